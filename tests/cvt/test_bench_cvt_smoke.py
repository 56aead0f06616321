"""Keeps tools/bench_cvt.py from rotting: its `--smoke` run (tiny preset, 4 steps) must finish and
print both parts' tables, including the per-repeat ratios; a bad `--features` folder is one error
line. Times nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "bench_cvt.py"


@pytest.fixture
def run_tool(shared_data: Path):
    if not (shared_data / "conll2000" / "train.txt").exists():
        pytest.skip(f"{shared_data / 'conll2000' / 'train.txt'} not found")

    def run(*args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "XFER_DATA": str(shared_data)}
        return subprocess.run(
            [sys.executable, str(TOOL), "--smoke", *args], env=env, capture_output=True, text=True, timeout=600
        )

    return run


def test_smoke_run_prints_every_table(run_tool) -> None:
    done = run_tool()
    assert done.returncode == 0, done.stderr[-2000:]
    for row in ("| supervised |", "| self-training |", "| cvt |", "| cvt-shared |"):
        assert row in done.stdout
    assert "| cvt / ... per repeat | min | median | max |" in done.stdout
    assert "## Supervised throughput (words/s)" in done.stdout


def test_bad_features_folder_is_an_error_line(run_tool, tmp_path: Path) -> None:
    done = run_tool("--features", str(tmp_path))
    assert done.returncode != 0
    assert done.stderr.startswith("error:") and str(tmp_path) in done.stderr
    assert "Traceback" not in done.stderr

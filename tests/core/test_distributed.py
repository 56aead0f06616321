"""Acceptance: `torchrun --nproc_per_node=2` on CPU matches a single process with the same
global batch (weights within 1e-4 relative after 20 steps), and only rank 0 writes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xfer.testing import assert_same_weights, make_host, output_tensors, run_recipe_file, write_recipe

RECIPE = """\
name: ddp
seed: 5
stages:
  fit:
    kind: testing.fit
    task: {name: toy/agreement, train_size: 320, dev_size: 64}
    dropout: 0.0
    train: {steps: 20, batch_size: 16, log_every: 5, checkpoint_every: 10}
"""


@pytest.mark.skipif(
    shutil.which("torchrun") is None and not Path(sys.executable).with_name("torchrun").exists(),
    reason="torchrun not installed",
)
def test_two_process_ddp_matches_single_process(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, RECIPE)
    run_recipe_file(recipe, tmp_path / "single", make_host(["xfer.testing.plugin"]))
    pid_file = tmp_path / "pids.txt"
    env = {
        **os.environ,
        "XFER_PLUGIN_MODULES": "xfer.testing.plugin,pid_recorder",
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
        "XFER_TEST_PID_FILE": str(pid_file),
        "OMP_NUM_THREADS": "1",
    }
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    command = [
        torchrun,
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "xfer.core.cli",
        "run",
        str(recipe),
        "--run-dir",
        str(tmp_path / "ddp"),
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_weights(output_tensors(tmp_path / "single", "fit"), output_tensors(tmp_path / "ddp", "fit"), rtol=1e-4)

    # only one process (rank 0) fired hooks and wrote log lines; each step was logged once
    lines = pid_file.read_text().splitlines()
    assert {line.split()[1] for line in lines} == {"0"} and len({line.split()[0] for line in lines}) == 1
    metrics = [json.loads(line) for line in (tmp_path / "ddp/fit/metrics.jsonl").read_text().splitlines()]
    train_steps = [m["step"] for m in metrics if m["split"] == "train"]
    assert train_steps == [5, 10, 15, 20]
    assert json.loads((tmp_path / "ddp/environment.json").read_text())["world_size"] == 2
    assert result.stdout.count("run directory:") == 1
    # dev metrics come from predictions gathered over both ranks: identical to the single process
    single = [json.loads(line) for line in (tmp_path / "single/fit/metrics.jsonl").read_text().splitlines()]
    dev = lambda records: [(r["step"], r["accuracy"]) for r in records if r["split"] == "dev"]  # noqa: E731
    assert dev(metrics) == dev(single)

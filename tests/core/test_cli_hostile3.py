"""Hostile use of `xfer run`, third round: SIGTERM during its checks before the first stage.

This module is also the plugin (XFER_PLUGIN_MODULES) of its subprocess runs: the stage
`hostile108.slow`, whose pre-flight data check waits, as a large data set's read does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from xfer.core.config import knob
from xfer.core.errors import UserError
from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec
from xfer.core.stage import StageContext

HERE = Path(__file__).parent
XFER_NAMESPACE = "hostile108"
MODULE = "test_cli_hostile3"


@dataclass
class SlowConfig:
    seconds: float = knob(20.0, "How long the pre-flight data check takes.")

    def preflight(self) -> list[UserError]:
        started = os.environ.get("HOSTILE108_STARTED")
        if started:
            Path(started).touch()  # the test sends SIGTERM from here on
        time.sleep(self.seconds)
        return []


def run_slow(ctx: StageContext) -> None:
    ctx.output_dir("out")


@hookimpl
def xfer_stages() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "stage",
            "hostile108.slow",
            f"{MODULE}:run_slow",
            "1",
            f"{MODULE}:SlowConfig",
            "Its data check is slow.",
            outputs=("out",),
        )
    ]


def _stop_during_the_data_check(tmp_path: Path, **extra: str) -> tuple[int, str]:
    """Run `xfer run` on a stage whose data check waits, SIGTERM it there: its exit code and stderr."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: hostile108\nseed: 1\nstages:\n  s:\n    kind: hostile108.slow\n")
    started = tmp_path / "started"
    env = {
        **os.environ,
        "XFER_PLUGIN_MODULES": MODULE,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "HOSTILE108_STARTED": str(started),
        "OMP_NUM_THREADS": "1",
    }
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        env.pop(key, None)
    env.update(extra)
    command = [sys.executable, "-m", "xfer.core.cli", "run", str(recipe), "--run-dir", str(tmp_path / "run")]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), process.communicate(timeout=10)[1][-2000:]
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("SIGTERM did not stop `xfer run` during its data check")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    return process.returncode, stderr


def test_sigterm_during_the_data_check_stops_with_a_message(tmp_path: Path) -> None:
    """The SIGTERM handler was installed only after `load_recipe` and `check_data`: SIGTERM then (a
    scheduler's stop during a long data check) killed the process outright: no message, exit -15."""
    returncode, stderr = _stop_during_the_data_check(tmp_path)
    assert returncode == 143, (returncode, stderr[-2000:])
    assert "terminated (SIGTERM); re-run the same command to resume" in stderr, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]


def test_torchrun_stopping_rank_0_during_its_data_check_names_the_rank_that_failed(tmp_path: Path) -> None:
    """Under torchrun, rank 1 failed its (quick) data check and left its error in the launch store
    (`distributed.note_failure`) while rank 0 still checked its data; torchrun's SIGTERM then killed
    rank 0 without a word. It names rank 1's error now, exit 1. torchrun's store is played by a
    TCPStore of this test: nothing else of the launch is needed before the process group."""
    import torch.distributed as torch_dist

    from xfer.core import distributed as dist

    store = torch_dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    store.set(f"{dist._FAILED_KEY}0/1", "/data/dev.tsv:3: no tab between the sentence and the label")
    returncode, stderr = _stop_during_the_data_check(
        tmp_path,
        TORCHELASTIC_RUN_ID="hostile108",
        TORCHELASTIC_RESTART_COUNT="0",
        RANK="0",
        LOCAL_RANK="0",
        WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(store.port),
    )
    assert returncode == 1, (returncode, stderr[-2000:])
    expected = "error: rank 1 failed: /data/dev.tsv:3: no tab between the sentence and the label (torchrun then"
    assert expected in stderr, stderr[-2000:]
    assert "re-run the same command to resume" not in stderr and "Traceback" not in stderr, stderr[-2000:]

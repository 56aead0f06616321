"""Acceptance: a stage killed with SIGKILL, or crashing inside a checkpoint write, resumes to
bitwise the same weights as an uninterrupted run (CPU)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from xfer.core.checkpoint import latest_checkpoint, load_module, load_state, load_torch_state
from xfer.testing import assert_same_weights, make_host, output_tensors, run_cli, run_recipe_file, write_recipe
from xfer.testing.bow import BowObjective

from .recipes import FIT

PLUGINS = ["xfer.testing.plugin"]
KILL_POINTS = sorted(random.Random(20261122).sample([s for s in range(2, 24) if s % 5], 3))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("reference")
    recipe = write_recipe(root, FIT)
    run_recipe_file(recipe, root / "run", make_host(PLUGINS))
    return recipe, output_tensors(root / "run", "fit")


@pytest.mark.parametrize("kill_step", KILL_POINTS)
def test_sigkill_then_resume_is_bitwise_identical(reference: tuple[Path, dict], tmp_path: Path, kill_step: int) -> None:
    recipe, expected = reference
    args = ["run", str(recipe), "--run-dir", str(tmp_path / "run")]
    killed = run_cli(args, plugin_modules=PLUGINS, kill_at_step=kill_step)
    assert killed.returncode == -9, killed.stderr[-2000:]
    checkpoint = latest_checkpoint(tmp_path / "run" / "fit" / "checkpoints")
    assert checkpoint is not None and load_state(checkpoint)["step"] == kill_step - kill_step % 5
    status = run_cli(["status", str(tmp_path / "run")])
    assert "interrupted" in status.stdout, "stage.json says running, but its owner is dead"
    resumed = run_cli(args, plugin_modules=PLUGINS)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "[fit] resuming" in resumed.stdout
    assert_same_weights(expected, output_tensors(tmp_path / "run", "fit"))
    # the killed attempt is kept in the stage's history and counted in its duration
    state = json.loads((tmp_path / "run" / "fit" / "stage.json").read_text())
    (earlier,) = state["earlier_attempts"]
    assert earlier["status"] == "interrupted" and earlier["started"] < earlier["finished"] <= state["started"]
    assert "over 2 attempts (earlier: interrupted)" in (tmp_path / "run" / "fit" / "report.md").read_text()
    row = next(
        r for r in json.loads(run_cli(["status", str(tmp_path / "run"), "--json"]).stdout) if r["stage"] == "fit"
    )
    assert row["attempts"] == 2
    assert (
        row["duration_s"]
        >= round(state["finished"] - state["started"] + earlier["finished"] - earlier["started"], 1) - 0.1
    )
    # metrics.jsonl has each training step once: lines written after the checkpoint were redone
    lines = (tmp_path / "run" / "fit" / "metrics.jsonl").read_text().splitlines()
    steps = [int(line.split('"step": ')[1].split(",")[0]) for line in lines if '"split": "train"' in line]
    assert steps == list(range(1, 25))


def test_crash_inside_checkpoint_write_keeps_previous_checkpoint(reference: tuple[Path, dict], tmp_path: Path) -> None:
    recipe, expected = reference
    args = ["run", str(recipe), "--run-dir", str(tmp_path / "run")]
    crashed = run_cli(args, plugin_modules=PLUGINS, crash_in_checkpoint=2)  # dies writing step 10
    assert crashed.returncode == -9
    checkpoints = tmp_path / "run" / "fit" / "checkpoints"
    assert list(checkpoints.glob(".tmp-step-0000010-*")), "the half-written checkpoint should be in its temp dir"
    previous = latest_checkpoint(checkpoints)
    assert previous is not None and previous.name == "step-0000005"
    # the previous checkpoint is complete and loadable
    model = BowObjective(4096, 32, 2, 0.1)
    load_module(previous, "model", model)
    assert load_torch_state(previous, "optimizer")["state"]
    resumed = run_cli(args, plugin_modules=PLUGINS)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert_same_weights(expected, output_tensors(tmp_path / "run", "fit"))
    assert not list(checkpoints.glob(".tmp-*")), "stale temp dirs are cleaned up"


def test_sigterm_stops_like_ctrl_c_and_the_rerun_resumes_exactly(reference: tuple[Path, dict], tmp_path: Path) -> None:
    """SIGTERM (a scheduler's stop) used to end the process without a word; now: stage interrupted, exit 143."""
    recipe, expected = reference
    args = ["run", str(recipe), "--run-dir", str(tmp_path / "run")]
    stopped = run_cli(args, plugin_modules=PLUGINS, term_at_step=7)
    assert stopped.returncode == 143, stopped.stderr[-2000:]
    assert "terminated (SIGTERM); re-run the same command to resume" in stopped.stderr
    assert "Traceback" not in stopped.stderr
    state = json.loads((tmp_path / "run" / "fit" / "stage.json").read_text())
    assert state["status"] == "interrupted" and state["error"] == "SIGTERM"
    resumed = run_cli(args, plugin_modules=PLUGINS)
    assert resumed.returncode == 0 and "[fit] resuming" in resumed.stdout, resumed.stderr[-2000:]
    assert_same_weights(expected, output_tensors(tmp_path / "run", "fit"))

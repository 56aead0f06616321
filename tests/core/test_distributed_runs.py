"""Under `torchrun`, run-directory decisions are rank 0's and reach every rank: a locked run dir is
refused on all ranks (no rank left waiting), and a damaged newest checkpoint makes every rank
resume from the same earlier one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xfer.core.runs.runlock import RunLock
from xfer.testing import assert_same_weights, make_host, output_tensors, run_recipe_file, write_recipe

from .test_distributed import RECIPE as DDP_RECIPE

RECIPE = DDP_RECIPE.replace("checkpoint_every: 10}", "checkpoint_every: 10, keep_checkpoints: 2}")

TORCHRUN = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
pytestmark = pytest.mark.skipif(not Path(TORCHRUN).exists(), reason="torchrun not installed")


def torchrun(recipe: Path, run: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XFER_PLUGIN_MODULES": "xfer.testing.plugin", "OMP_NUM_THREADS": "1", **(env or {})}
    command = [TORCHRUN, "--standalone", "--nproc_per_node=2", "-m", "xfer.core.cli", "run", str(recipe)]
    return subprocess.run([*command, "--run-dir", str(run)], env=env, capture_output=True, text=True, timeout=240)


def test_locked_run_dir_is_refused_on_every_rank(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, RECIPE)
    with RunLock(tmp_path / "run"):
        result = torchrun(recipe, tmp_path / "run")
    assert result.returncode != 0
    assert result.stderr.count(f"is in use by pid {os.getpid()}") == 2, result.stderr[-3000:]
    assert "xfer/core/" not in result.stderr, "a clear message from each rank, no traceback (torchrun adds its own)"


def test_damaged_newest_checkpoint_every_rank_resumes_from_the_previous(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, RECIPE)
    run_recipe_file(recipe, tmp_path / "single", make_host(["xfer.testing.plugin"]))
    run = tmp_path / "run"
    assert torchrun(recipe, run).returncode == 0
    state = json.loads((run / "fit/stage.json").read_text())
    state["status"] = "running"
    (run / "fit/stage.json").write_text(json.dumps(state))
    optimizer = run / "fit/checkpoints/step-0000020/optimizer.pt"
    optimizer.write_bytes(optimizer.read_bytes()[:-10])

    result = torchrun(recipe, run)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("checkpoint step 20 is damaged") == 1, "rank 0 alone checks and says so"
    assert "resuming from step 10" in result.stderr and "[fit] resuming" in result.stdout
    assert_same_weights(output_tensors(tmp_path / "single", "fit"), output_tensors(run, "fit"), rtol=1e-4)


def test_a_stage_that_diverges_on_every_rank_ends_as_a_failure_with_why(tmp_path: Path) -> None:
    """Every rank raises TrainingDiverged at the same step. Rank 1 exited at once, and torchrun then
    killed rank 0 while it was still recording the failure (here: a slow `xfer_stage_finish` hook,
    in the electra stage its report's plots), so rank 0 said "terminated (SIGTERM); re-run the same
    command to resume" about a run that re-running would not fix."""
    recipe = write_recipe(tmp_path, RECIPE.replace("log_every: 5", "lr: 1.0e+30, log_every: 5"))
    env = {"XFER_PLUGIN_MODULES": "xfer.testing.plugin,slow_failure_report", "PYTHONPATH": _here_on_path()}
    result = torchrun(recipe, tmp_path / "run", env)
    assert result.returncode != 0
    state = json.loads((tmp_path / "run/fit/stage.json").read_text())
    assert state["status"] == "failed" and "became NaN/inf" in state["error"], state
    assert "became NaN/inf" in result.stderr, result.stderr[-3000:]
    assert "re-run the same command to resume" not in result.stderr, result.stderr[-3000:]


def _here_on_path() -> str:
    return os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])


def test_processes_whose_recipes_differ_are_refused_naming_the_key(tmp_path: Path) -> None:
    """Each process reads its own recipe (files, environment, node); rank 0's fingerprints reached
    every rank, so a setting outside `train:` that differed (here dropout, through an include that
    depends on the rank) trained the ranks apart, silently."""
    (tmp_path / "part0.yaml").write_text("stages: {fit: {dropout: 0.0}}\n")
    (tmp_path / "part1.yaml").write_text("stages: {fit: {dropout: 0.1}}\n")
    text = RECIPE.replace("    dropout: 0.0\n", "").replace("seed: 5\n", "seed: 5\ninclude: part${LOCAL_RANK}.yaml\n")
    result = torchrun(write_recipe(tmp_path, text), tmp_path / "run")
    assert result.returncode != 0
    said = (
        "the recipes of the processes differ between ranks: stages.fit.dropout is '0.0' on rank 0 but '0.1' on rank 1"
    )
    assert result.stderr.count(said) == 2, result.stderr[-3000:]
    assert not (tmp_path / "run" / "fit").exists()

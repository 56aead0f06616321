"""Hostile use of data parallelism: a half-set torchrun environment, ranks that disagree on their
settings, their data, the metrics they log or their dev results. Each case ends in a clear error on
every rank (or in the right numbers), never in a hang, a gloo abort or silently different weights.

The two-process cases run `ddp_hostile_worker.py` under `torchrun --nproc_per_node=2` (gloo, CPU,
a few steps); its process group times out after 20 s, and the launch is killed after 60 s."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from xfer.core import distributed as dist
from xfer.core.errors import UserError

TORCHRUN = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
needs_torchrun = pytest.mark.skipif(not Path(TORCHRUN).exists(), reason="torchrun not installed")
WORKER = Path(__file__).with_name("ddp_hostile_worker.py")


def torchrun(out: Path, *scenarios: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the scenarios in one 2-process launch; its exit code and stderr."""
    out.mkdir(exist_ok=True)
    command = [TORCHRUN, "--standalone", "--nproc_per_node=2", str(WORKER), str(out), *scenarios]
    process = subprocess.Popen(
        command,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # torchrun and both workers: nothing is left hanging
        process.communicate()
        pytest.fail(f"the 2-process launch of {scenarios} hung")
    return process.returncode, stderr


def launch(out: Path, *scenarios: str) -> dict[str, list[dict]]:
    """Run the scenarios in one 2-process launch; each one's per-rank records, rank order."""
    returncode, stderr = torchrun(out, *scenarios)
    assert returncode == 0, stderr[-3000:]
    return {s: [json.loads((out / f"{s}-rank{r}.json").read_text()) for r in (0, 1)] for s in scenarios}


@pytest.fixture
def env_without_torchrun(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_world_size_without_the_rest_of_torchrun_environment_is_refused_by_name(
    env_without_torchrun: pytest.MonkeyPatch,
) -> None:
    """`WORLD_SIZE=2 xfer run ...` (or a WORLD_SIZE left exported) ended in torch's ValueError traceback
    from its rendezvous code; with MASTER_* set and a RANK outside the world it waited for peers."""
    env = env_without_torchrun
    env.setenv("WORLD_SIZE", "2")
    with pytest.raises(UserError, match=r"WORLD_SIZE=2 is set but RANK, MASTER_ADDR, MASTER_PORT are not.*torchrun"):
        dist.init_from_env()
    env.setenv("WORLD_SIZE", "two")
    with pytest.raises(UserError, match=r"WORLD_SIZE='two' is not a whole number"):
        dist.init_from_env()
    env.setenv("WORLD_SIZE", "2")
    for name, value in (("RANK", "2"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "1")):
        env.setenv(name, value)
    with pytest.raises(UserError, match=r"RANK=2 is outside WORLD_SIZE=2"):
        dist.init_from_env()
    assert not dist.is_distributed()
    env.setenv("WORLD_SIZE", "1")  # one process: nothing else is needed, as before
    dist.init_from_env()
    assert not dist.is_distributed() and dist.world_size() == 1


@needs_torchrun
def test_ranks_with_different_settings_or_data_are_refused_on_every_rank(tmp_path: Path) -> None:
    """Rank 1 with another learning rate trained other weights, silently (rank 0's were saved); rank 1
    with a bigger dataset made gloo abort rank 0 ("Is there a distributed collective mismatch"); a
    parameter more on rank 1 was DDP's RuntimeError traceback. Each is refused on both ranks alike."""
    records = launch(tmp_path / "out", "lr", "data", "shape")
    for rank0, rank1 in records.values():
        assert rank0["error"] == rank1["error"] and rank0["error"] is not None, (rank0, rank1)
    assert records["lr"][0]["error"].startswith(
        "UserError: the training settings differ between ranks: train.lr is 0.05 on rank 0 but 0.1 on rank 1"
    )
    assert "the data's steps per epoch is 5 on rank 0 but 6 on rank 1" in records["data"][0]["error"]
    assert (
        "the shape of parameter idle.bias is '<missing>' on rank 0 but (1,) on rank 1" in records["shape"][0]["error"]
    )


@needs_torchrun
def test_a_metric_logged_by_one_rank_only_keeps_its_name(tmp_path: Path) -> None:
    """Rank 0 logs `alpha` (1.0 every step), rank 1 `beta` (10.0): the sums were all-reduced by
    position, so rank 0 logged alpha = (1 + 10) / 2 and no beta. A rank that did not log a metric
    adds zero to it, as a step that did not log it does in one process."""
    ((rank0, rank1),) = launch(tmp_path / "out", "metrics").values()
    assert rank0["error"] is None and rank1["error"] is None
    assert rank0["weights"] == rank1["weights"]
    train = [r for r in rank0["logged"] if r["split"] == "train"]
    assert [r["step"] for r in train] == [3, 6]
    assert [(r["alpha"], r["beta"]) for r in train] == [(0.5, 5.0), (0.5, 5.0)]


@needs_torchrun
def test_an_evaluator_that_scores_per_rank_is_refused_not_deadlocked(tmp_path: Path) -> None:
    """Rank 0's score improved at step 4, rank 1's did not: rank 0 alone wrote a "best" checkpoint and
    waited in its gather while rank 1 trained on (a collective mismatch: abort or hang)."""
    ((rank0, rank1),) = launch(tmp_path / "out", "evaluator").values()
    assert rank0["error"] == rank1["error"]
    assert rank0["error"].startswith(
        "PluginError: evaluator __main__.RankEvaluator returned different dev results on rank 0 ({'loss': -1.0}) "
        "and rank 1 ({'loss': 1.0})"
    ), rank0["error"]
    assert "gathered from every rank" in rank0["error"]


@needs_torchrun
def test_a_parameter_no_step_uses_names_the_recipe_key(tmp_path: Path) -> None:
    """One process trains such an objective; under torchrun DDP raised its "Expected to have finished
    reduction in the prior iteration" RuntimeError (a traceback) advising a DDP argument no recipe can set."""
    ((rank0, rank1),) = launch(tmp_path / "out", "unused").values()
    assert rank0["error"] == rank1["error"]
    assert rank0["error"] == (
        "UserError: objective class __main__.Regression: some parameters (idle.weight, idle.bias) got no "
        "gradient in step 1, which data-parallel training refuses unless told to look for them: set "
        "`train.find_unused_parameters: true` in the recipe (or make forward(batch) use every trainable "
        "parameter in every step)"
    )


@needs_torchrun
def test_ranks_with_their_own_data_cursors_resume_exactly(tmp_path: Path) -> None:
    """The trainer checkpointed rank 0's data cursor alone and restored it on every rank: a source whose
    ranks read disjoint shards (ELECTRA's `PretrainBatches(stream_sharding="shards")`) refused it on
    rank 1 ("given rank 0's data cursor") while rank 0 trained on, so such a run could never resume.
    Each rank's cursor is kept now."""
    ((rank0, rank1),) = launch(tmp_path / "out", "shards").values()
    assert rank0["error"] is None and rank1["error"] is None, (rank0["error"], rank1["error"])
    assert rank0["resumed"][0] == 3 and rank0["straight"][0] is None
    assert rank0["resumed"][1] == rank0["straight"][1] == rank1["resumed"][1]
    state = json.loads((tmp_path / "out/shards/interrupted/checkpoints/step-0000006/state.json").read_text())
    assert state["data"] == [{"rank": 0, "offset": 24}, {"rank": 1, "offset": 24}]


@needs_torchrun
def test_one_rank_killed_mid_training_ends_the_launch_and_the_rerun_resumes_exactly(tmp_path: Path) -> None:
    """SIGKILL of rank 1 at step 5 (checkpoint at step 3): rank 0 does not wait for it forever, and the
    re-run resumes every rank, with its own dropout stream, to exactly the uninterrupted weights."""
    returncode, _ = torchrun(tmp_path / "run", "kill", env={"XFER_TEST_KILL_RANK1_AT": "5"})
    assert returncode != 0 and not (tmp_path / "run/kill-rank1.json").exists()
    left = tmp_path / "run/kill-rank0.json"  # rank 0, if not stopped by torchrun first, saw the peer go
    assert not left.exists() or "RuntimeError" in json.loads(left.read_text())["error"]
    both = launch(tmp_path / "run", "straight", "kill")  # the uninterrupted run first, in a run dir of its own
    resumed, straight = both["kill"], both["straight"]
    assert [r["resumed_from"] for r in resumed] == [3, 3] and straight[0]["resumed_from"] is None
    assert resumed[0]["weights"] == resumed[1]["weights"] == straight[0]["weights"]
    timeless = lambda records: [{k: v for k, v in r.items() if k != "steps_per_s"} for r in records]  # noqa: E731
    logged = [r for r in straight[0]["logged"] if r["step"] > 3]
    assert timeless(resumed[0]["logged"]) == timeless(logged) and len(logged) == 3

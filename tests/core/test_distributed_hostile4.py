"""Hostile use of `torchrun` runs, fourth round: how a failed rank's error is relayed through the
launch's store to the other ranks with three ranks or more, and across `torchrun --max-restarts`.

The launches run under `torchrun` (gloo, CPU); this module is also their plugin (XFER_PLUGIN_MODULES):
the stage `hostile4.check`, whose pre-flight data check fails on one rank in torchrun's first attempt
and has that rank killed outright in the next. The store cases talk to a real TCPStore in this process."""

from __future__ import annotations

import datetime
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch.distributed

from xfer.core import distributed as dist
from xfer.core.config import knob
from xfer.core.errors import DataError, UserError
from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec
from xfer.core.stage import StageContext

HERE = Path(__file__).parent
TORCHRUN = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
needs_torchrun = pytest.mark.skipif(not Path(TORCHRUN).exists(), reason="torchrun not installed")

XFER_NAMESPACE = "hostile4"
CAUSE = "/data/rank-only.tsv:3: label: no tab between the sentence and the label"


@dataclass
class CheckConfig:
    fail_rank: int = knob(1, "The rank whose pre-flight data check fails (first attempt) or that is killed (later).")

    def preflight(self) -> list[DataError]:
        rank, attempt = int(os.environ.get("RANK", "0")), os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        ready = Path(os.environ.get("HOSTILE4_DIR", ".")) / f"rank0-checked-{attempt}"
        if rank == 0:
            ready.touch()  # rank 0 is past its data check: it stops on SIGTERM with a message from here on
        if rank != self.fail_rank:
            return []
        for _ in range(300):  # at most 30 s
            if ready.exists():
                break
            time.sleep(0.1)
        time.sleep(1.0)  # rank 0 is waiting to join by then
        if attempt == "0":
            return [DataError("/data/rank-only.tsv", 3, "no tab between the sentence and the label", key="label")]
        os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would: no error left
        return []


def run_check(ctx: StageContext) -> None:
    ctx.output_dir("out")


@hookimpl
def xfer_stages() -> list[ComponentSpec]:
    module = "test_distributed_hostile4"
    return [
        ComponentSpec(
            "stage",
            "hostile4.check",
            f"{module}:run_check",
            "1",
            f"{module}:CheckConfig",
            "Its data check fails on one rank, then that rank is killed in torchrun's restart.",
            outputs=("out",),
        )
    ]


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    return {
        **os.environ,
        "XFER_PLUGIN_MODULES": "test_distributed_hostile4",
        "PYTHONPATH": path,
        "OMP_NUM_THREADS": "1",
        **extra,
    }


def _run(command: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int, str]:
    """Run `command` in its own session; its exit code and stderr (the session is killed on timeout)."""
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"{command} hung")
    return process.returncode, stderr


class Launch:
    """A torchrun launch of three ranks as this process sees it; `as_rank(r)` makes this process rank r."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch

    def as_rank(self, rank: int) -> None:
        self.monkeypatch.setenv("RANK", str(rank))


@pytest.fixture
def launch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Launch]:
    """torchrun's variables and its agent's store (a real TCPStore in this process)."""
    store = torch.distributed.TCPStore("127.0.0.1", 0, is_master=True, timeout=datetime.timedelta(seconds=5))
    for name, value in (
        ("TORCHELASTIC_RUN_ID", "hostile4"),
        ("TORCHELASTIC_RESTART_COUNT", "0"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", str(store.port)),
        ("WORLD_SIZE", "3"),
    ):
        monkeypatch.setenv(name, value)
    yield Launch(monkeypatch)
    del store


def test_a_rank_relaying_another_ranks_failure_is_not_named_as_the_failed_rank(launch: Launch) -> None:
    """Rank 2 failed; rank 0 ended with `RankFailed` ("rank 2 failed: ...") and left that as its own
    error: rank 1, stopped by torchrun, read the lowest rank's and said "rank 0 failed: rank 2 failed:
    ...", naming rank 0 first. It names rank 2 and its error."""
    launch.as_rank(2)
    dist.note_failure(CAUSE)
    launch.as_rank(0)
    dist.note_failure(str(dist.RankFailed(2, CAUSE)))
    launch.as_rank(1)
    assert dist.failed_peer() == (2, CAUSE)


def test_a_relayed_failure_is_left_under_the_rank_that_failed_if_it_left_none(launch: Launch) -> None:
    """A rank that could not leave its error (it ended on a full disk, say) is still named, by the
    rank that relayed it, and as itself; an error it left itself is not overwritten."""
    launch.as_rank(0)
    dist.note_failure(str(dist.RankFailed(2, CAUSE)))
    launch.as_rank(1)
    assert dist.failed_peer() == (2, CAUSE)
    launch.as_rank(1)
    dist.note_failure("its own words")
    launch.as_rank(0)
    dist.note_failure(str(dist.RankFailed(1, "rank 0's account of it")))
    launch.as_rank(2)
    assert dist.failed_peer() == (1, "its own words")


def test_a_lost_peer_is_not_left_as_this_ranks_failure(launch: Launch) -> None:
    """Rank 2 was killed outright (no error); rank 0 ended with `PeerLost` and left that as its own
    error: rank 1 then said "rank 0 failed: another process ... stopped without an error of its own"
    and "fix that", for a run that a re-run resumes. Nothing is left: rank 1 says terminated, resume."""
    launch.as_rank(0)
    dist.note_failure(str(dist.PeerLost("Connection closed by peer [::1]:1")))
    launch.as_rank(1)
    assert dist.failed_peer() is None


def test_an_earlier_attempts_failure_is_not_read_after_a_restart(
    launch: Launch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchrun's store outlives a `--max-restarts` restart: the first attempt's error was read as the
    cause of the next attempt's end."""
    launch.as_rank(1)
    dist.note_failure(CAUSE)
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    launch.as_rank(0)
    assert dist.failed_peer() is None
    launch.as_rank(1)
    dist.note_failure("the second attempt's error")
    launch.as_rank(0)
    assert dist.failed_peer() == (1, "the second attempt's error")


@needs_torchrun
def test_torchrun_restarts_do_not_name_the_previous_attempts_error(tmp_path: Path) -> None:
    """`torchrun --max-restarts=1`: rank 1's data check failed in the first attempt, and rank 1 was
    killed outright in the second. Rank 0, stopped by torchrun in the second attempt, said "rank 1
    failed: <the first attempt's error>; fix that": that error was no longer the cause."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: hostile4\nseed: 1\nstages:\n  s:\n    kind: hostile4.check\n")
    command = [TORCHRUN, "--standalone", "--nproc_per_node=2", "--max-restarts=1", "-m", "xfer.core.cli", "run"]
    run = [*command, str(recipe), "--run-dir", str(tmp_path / "run")]
    returncode, stderr = _run(run, _env(HOSTILE4_DIR=str(tmp_path)))
    assert returncode != 0
    said = [line for line in stderr.splitlines() if "rank 1 failed" in line or line.startswith("terminated")]
    assert len(said) == 2, stderr[-3000:]
    assert f"rank 1 failed: {CAUSE}" in said[0], stderr[-3000:]  # the first attempt
    assert said[1] == "terminated (SIGTERM); re-run the same command to resume", stderr[-3000:]


@pytest.mark.parametrize("value", ["1e10", "99999999999", "1e15"])
def test_an_init_timeout_beyond_what_torch_can_wait_is_refused_by_name(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XFER_DIST_INIT_TIMEOUT=1e10, meant as "wait forever", overflowed torch's nanosecond deadlines:
    the join failed at once with "timed out after 10000000000000ms ... set XFER_DIST_INIT_TIMEOUT=SECONDS
    to wait longer" (an OverflowError from 1e15). It is refused naming the variable and the limit."""
    monkeypatch.setenv(dist.INIT_TIMEOUT_VARIABLE, value)
    with pytest.raises(
        UserError, match=rf"XFER_DIST_INIT_TIMEOUT='{value}' is more seconds than torch can wait: at most 1e\+09"
    ):
        dist.init_timeout()
    monkeypatch.setenv(dist.INIT_TIMEOUT_VARIABLE, "1e9")
    assert dist.init_timeout() == 1e9

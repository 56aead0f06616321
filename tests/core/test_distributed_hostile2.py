"""Hostile use of `torchrun` runs, second round: one rank failing alone, a rendezvous with no peer
(or a peer that never joins), SIGTERM while waiting for one, the process group's backend against
`--device`, and devices this machine cannot use.

The two-process cases run under `torchrun --nproc_per_node=2` (gloo, CPU) with the plugin and
script in `ddp_hostile2_worker.py`; each launch is killed after 60 s."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from xfer.core import distributed as dist
from xfer.core.errors import DataError, UserError
from xfer.testing import make_host, run_recipe_file, write_recipe

HERE = Path(__file__).parent
TORCHRUN = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
needs_torchrun = pytest.mark.skipif(not Path(TORCHRUN).exists(), reason="torchrun not installed")

FAIL_RECIPE = """\
name: hostile2
seed: 1
stages:
  s:
    kind: hostile2.fail
"""


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    return {
        **os.environ,
        "XFER_PLUGIN_MODULES": "ddp_hostile2_worker",
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


@needs_torchrun
def test_an_error_on_one_rank_is_what_rank_0_records_and_prints(tmp_path: Path) -> None:
    """Rank 1 raised a DataError alone: rank 0 recorded gloo's "Connection closed by peer" as the stage's
    error (or was stopped by torchrun's SIGTERM, "interrupted") and printed that traceback; the real
    cause was only in rank 1's output."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(FAIL_RECIPE)
    run = tmp_path / "run"
    command = [TORCHRUN, "--standalone", "--nproc_per_node=2", "-m", "xfer.core.cli", "run", str(recipe)]
    returncode, stderr = _run([*command, "--run-dir", str(run)], _env())
    assert returncode != 0
    cause = "/data/rank-only.tsv:7: label: no tab between the sentence and the label"
    state = json.loads((run / "s/stage.json").read_text())
    assert state["status"] == "failed" and state["error"] == f"rank 1 failed: {cause}", state
    assert state["rank_errors"]["1"] == cause
    assert json.loads((run / "s/rank1.error.json").read_text())["error"] == cause
    assert f"error: rank 1 failed: {cause}" in stderr, stderr[-3000:]
    assert "[rank0]: Traceback" not in stderr and "Connection closed by peer" not in stderr, stderr[-3000:]
    assert f"- **error**: rank 1 failed: {cause}" in (run / "s/report.md").read_text()


@needs_torchrun
def test_a_rank_killed_outright_is_said_without_a_traceback(tmp_path: Path) -> None:
    """Rank 1 SIGKILLed (the out-of-memory killer) leaves no error: rank 0 printed gloo's RuntimeError
    traceback and recorded it as the stage's error. It says what happened and that a re-run resumes."""
    recipe = write_recipe(tmp_path, FAIL_RECIPE + "    kill: true\n")
    run = tmp_path / "run"
    command = [TORCHRUN, "--standalone", "--nproc_per_node=2", "-m", "xfer.core.cli", "run", str(recipe)]
    returncode, stderr = _run([*command, "--run-dir", str(run)], _env())
    assert returncode != 0 and "[rank0]: Traceback" not in stderr, stderr[-3000:]
    state = json.loads((run / "s/stage.json").read_text())
    assert not list((run / "s").glob("rank*.error.json"))
    if state["status"] == "interrupted":  # torchrun's SIGTERM reached rank 0 before gloo's error did
        assert "terminated (SIGTERM); re-run the same command to resume" in stderr, stderr[-3000:]
        return
    said = "another process of this torchrun launch stopped without an error of its own (killed, e.g. by"
    assert state["status"] == "failed" and state["error"].startswith(said), state
    assert "Connection closed by peer" in state["error"] and "re-run the same command to resume" in state["error"]
    assert f"error: {said}" in stderr, stderr[-3000:]


def test_a_resumed_stage_starts_without_the_last_attempts_rank_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank error left by an earlier attempt was read as this attempt's: a rank 1 SIGKILLed (out of
    memory) in the next attempt writes none, and rank 0 would have named the old error as the cause."""
    monkeypatch.syspath_prepend(str(HERE))
    recipe = write_recipe(tmp_path, FAIL_RECIPE + "    fail_rank: 0\n")
    host = make_host(["ddp_hostile2_worker"])
    with pytest.raises(DataError):
        run_recipe_file(recipe, tmp_path / "run", host)
    stale = tmp_path / "run/s/rank1.error.json"
    stale.write_text(json.dumps({"rank": 1, "error": "an earlier attempt's error", "exit_code": 2}))
    with pytest.raises(DataError):
        run_recipe_file(recipe, tmp_path / "run", host)  # same fingerprint: the failed stage resumes
    assert json.loads((tmp_path / "run/s/stage.json").read_text())["earlier_attempts"][0]["status"] == "failed"
    assert not stale.exists()


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _torchrun_environment(monkeypatch: pytest.MonkeyPatch, rank: int = 0, port: int = 1) -> None:
    for name, value in (("WORLD_SIZE", "2"), ("RANK", str(rank)), ("LOCAL_RANK", "1"), ("LOCAL_WORLD_SIZE", "1")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))


def test_a_rendezvous_with_no_peer_ends_in_a_user_error_saying_what_it_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With torchrun's variables set and no other process (left exported from another job), rank 0
    waited torch's 30 minutes in C++, then ended in a DistStoreError traceback. (In a subprocess, so
    that a wait that does not end fails this test instead of hanging the suite.)"""
    env = _env(WORLD_SIZE="2", RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    env["XFER_DIST_INIT_TIMEOUT"] = "1"
    script = (
        "from xfer.core import distributed as dist\n"
        "from xfer.core.errors import UserError\n"
        "try:\n    dist.init_from_env()\nexcept UserError as exc:\n    print(f'UserError: {exc}')\n"
        "print('distributed:', dist.is_distributed())\n"
    )
    process = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=30)
    said = process.stdout
    assert (
        "UserError: rank 0 could not join the 2 processes of WORLD_SIZE=2 at MASTER_ADDR:MASTER_PORT 127.0.0.1:" in said
    )
    assert "(limit 1 s, $XFER_DIST_INIT_TIMEOUT): " in said and "unset WORLD_SIZE" in said, said
    assert "distributed: False" in said
    _torchrun_environment(monkeypatch)
    monkeypatch.setenv("XFER_DIST_INIT_TIMEOUT", "soon")
    with pytest.raises(UserError, match=r"XFER_DIST_INIT_TIMEOUT='soon' is not a positive number of seconds"):
        dist.init_from_env("cpu")


def test_sigterm_stops_a_run_waiting_for_its_peers(tmp_path: Path) -> None:
    """torch's rendezvous wait runs in C++, where no Python signal handler runs: `xfer run` with a
    torchrun environment and no peer ignored SIGTERM (and Ctrl-C) for the whole 30-minute wait."""
    recipe = write_recipe(tmp_path, FAIL_RECIPE)
    port = _free_port()
    env = _env(WORLD_SIZE="2", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    command = [sys.executable, "-m", "xfer.core.cli", "run", str(recipe), "--run-dir", str(tmp_path / "run")]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for_listener(port, process)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("SIGTERM did not stop `xfer run` waiting for its peers")
    assert process.returncode == 143 and "terminated (SIGTERM)" in stderr, stderr[-2000:]


@needs_torchrun
def test_under_torchrun_a_peer_that_does_not_join_in_time_ends_the_wait(tmp_path: Path) -> None:
    """Under torchrun the rendezvous store is the agent's and always answers: the wait for a process that
    had not reached init_from_env was gloo's, with the collectives' 30-minute timeout, whatever the
    rendezvous timeout. Rank 1 arrives 6 s late; rank 0 gives up at its 1 s limit (plus 2 s of grace). The
    launch is stopped once rank 0 has written what happened: only rank 0's wait is checked."""
    out = tmp_path / "out"
    out.mkdir()
    command = [TORCHRUN, "--standalone", "--nproc_per_node=2", str(HERE / "ddp_hostile2_worker.py"), str(out), "6"]
    _run_until(out / "late-rank0.json", command, _env(XFER_DIST_INIT_TIMEOUT="1"))
    rank0 = json.loads((out / "late-rank0.json").read_text())
    assert rank0["seconds"] < 4.5, rank0
    assert rank0["error"].startswith("rank 0 could not join the 2 processes of WORLD_SIZE=2 at MASTER_ADDR:MASTER_PORT")
    assert "(limit 1 s, $XFER_DIST_INIT_TIMEOUT)" in rank0["error"], rank0
    assert "Another process of this torchrun launch did not join in time" in rank0["error"], rank0


def _run_until(record: Path, command: list[str], env: dict[str, str], timeout: float = 60) -> None:
    """Run `command` in its own session until it has written `record` (then its session is killed: what the
    other ranks do after that is not looked at, and rank 1 of the late launch would spend its delay and its
    own wait for the gone rank 0 there), until it ends, or until `timeout` (then the test fails)."""
    import time

    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + timeout
    try:
        while not _written(record) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        hung = process.poll() is None and not _written(record)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    if hung:
        pytest.fail(f"{command} hung")


def _written(record: Path) -> bool:
    """Whether `record` holds a whole JSON document (not a file opened and not yet written)."""
    try:
        json.loads(record.read_text())
    except (OSError, ValueError):
        return False
    return True


def _wait_for_listener(port: int, process: subprocess.Popen[str], limit: float = 30) -> None:
    """Until rank 0's rendezvous server listens on `port` (it is then waiting for its peer)."""
    import socket
    import time

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and process.poll() is None:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    pytest.fail(f"rank 0 never listened on {port} (exit code {process.poll()})")


class _Recorded:
    def __init__(self) -> None:
        self.backends: list[str] = []
        self.cuda_devices: list[object] = []


@pytest.fixture
def fake_cuda_group(monkeypatch: pytest.MonkeyPatch) -> _Recorded:
    """A machine with two GPUs (as far as torch.cuda says) whose process group is faked: the
    backend and CUDA device each init_from_env asks for are recorded, and no group is made."""
    import torch
    import torch.distributed

    recorded = _Recorded()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", recorded.cuda_devices.append)

    def rendezvous(url: str, rank: int = -1, world_size: int = -1, **kwargs: object) -> Iterator[tuple]:
        yield torch.distributed.HashStore(), 0, 2

    def init_process_group(backend: str, **kwargs: object) -> None:
        recorded.backends.append(backend)

    monkeypatch.setattr(torch.distributed, "rendezvous", rendezvous)
    monkeypatch.setattr(torch.distributed, "init_process_group", init_process_group)
    _torchrun_environment(monkeypatch)
    return recorded


def test_the_backend_follows_the_device_of_the_run(
    fake_cuda_group: _Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nccl was chosen whenever CUDA existed: `xfer run --device cpu` under torchrun on a GPU machine
    made an nccl group, whose first collective on CPU tensors failed."""
    monkeypatch.syspath_prepend(str(HERE))
    recipe = write_recipe(tmp_path, FAIL_RECIPE)
    run_recipe_file(recipe, tmp_path / "run", make_host(["ddp_hostile2_worker"]), device="cpu")
    assert fake_cuda_group.backends == ["gloo"] and fake_cuda_group.cuda_devices == []
    dist.init_from_env("auto")
    dist.init_from_env("cuda")  # this rank's GPU, as with auto: LOCAL_RANK=1
    dist.init_from_env("cuda:0")
    assert fake_cuda_group.backends == ["gloo", "nccl", "nccl", "nccl"]
    assert [str(d) for d in fake_cuda_group.cuda_devices] == ["cuda:1", "cuda:1", "cuda:0"]
    # two processes on this node: `cuda:0` would put both on one GPU, which nccl refuses in its first collective
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.raises(UserError, match=r"--device 'cuda:0' would put all 2 processes of this node on one GPU"):
        dist.init_from_env("cuda:0")
    dist.init_from_env("cuda")
    assert fake_cuda_group.backends[4:] == ["nccl"] and str(fake_cuda_group.cuda_devices[-1]) == "cuda:1"


def test_a_device_this_machine_cannot_use_is_refused_before_the_run_starts(
    fake_cuda_group: _Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--device mps` (no MPS in this torch) or `cuda:2` on a two-GPU machine started the run and failed
    its first stage with torch's RuntimeError traceback."""
    import torch

    with pytest.raises(UserError, match=r"--device 'mps': MPS is not available on this machine"):
        dist.select_device("mps")
    with pytest.raises(UserError, match=r"--device 'meta': xfer runs on auto, cpu, cuda or cuda:N"):
        dist.select_device("meta")
    with pytest.raises(UserError, match=r"--device 'cuda:2': this machine has 2 CUDA device\(s\) \(cuda:0 to cuda:1\)"):
        dist.select_device("cuda:2")
    monkeypatch.setenv("LOCAL_RANK", "2")
    with pytest.raises(UserError, match=r"--device 'auto': this process is LOCAL_RANK=2, but this machine has 2 CUDA"):
        dist.select_device("auto")
    assert dist.select_device("cuda:1") == torch.device("cuda", 1) and dist.select_device("cpu") == torch.device("cpu")
    monkeypatch.syspath_prepend(str(HERE))
    recipe = write_recipe(tmp_path, FAIL_RECIPE)
    with pytest.raises(UserError, match="mps"):
        run_recipe_file(recipe, tmp_path / "run", make_host(["ddp_hostile2_worker"]), device="mps")
    assert not (tmp_path / "run").exists() and fake_cuda_group.backends == []


def test_of_several_failed_ranks_the_first_to_fail_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With 3 ranks, rank 2's DataError ended it, and rank 1's next collective then failed (timed out):
    the cause is rank 2's error, not rank 1's for being the lower rank."""
    from xfer.core.runs import runner

    monkeypatch.setattr(dist, "world_size", lambda: 3)
    (tmp_path / "rank1.error.json").write_text(json.dumps({"error": "RuntimeError: timed out", "time": 20.5}))
    (tmp_path / "rank2.error.json").write_text(json.dumps({"error": "a.tsv:3: no tab", "time": 20.1}))
    errors = runner._rank_errors(tmp_path)
    assert runner._first_failure(errors) == 2
    errors[2].pop("time")
    assert runner._first_failure(errors) == 1

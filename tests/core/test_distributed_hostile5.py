"""Hostile use of distributed runs and their checkpoints, fifth round: one rank stopped by a SIGTERM
of its own (not torchrun's), a checkpoint written by a newer xfer (refused on every rank), and a
damaged best checkpoint behind an intact latest one.

The two-process case runs `xfer run` under `torchrun --nproc_per_node=2` (gloo, CPU) with
`ddp_hostile5_worker.py` as a plugin; each launch is killed after 60 s. The others run in this
process, some playing rank 0 and then rank 1 of a launch."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from xfer.core import checkpoint as ckpt
from xfer.core import distributed as dist
from xfer.core.data import BatchStream
from xfer.core.errors import CheckpointError
from xfer.core.trainer import TrainConfig, Trainer
from xfer.testing import write_recipe

HERE = Path(__file__).parent
TORCHRUN = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
needs_torchrun = pytest.mark.skipif(not Path(TORCHRUN).exists(), reason="torchrun not installed")

FIT = """\
name: fit
seed: 3
stages:
  fit:
    kind: testing.fit
    task: {name: toy/agreement, train_size: 320, dev_size: 64}
    train: {steps: 40, batch_size: 16, log_every: 1, checkpoint_every: 5}
"""

GLOO_LOST = (
    "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by "
    "peer [127.0.0.1]:20389. This is typically caused by a remote worker crashing. Check the logs of the remote "
    "worker before reporting an error. GLHF! 🏖️"
)
"""gloo's error, word for word, in a rank whose peer rank was stopped by SIGTERM (torch 2.13)."""


def _run(command: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run `command` in its own session; its exit code, stdout and stderr (the session is killed after 60 s)."""
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"{command} hung")
    return process.returncode, stdout, stderr


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    return {
        **os.environ,
        "XFER_PLUGIN_MODULES": "xfer.testing.plugin,ddp_hostile5_worker",
        "PYTHONPATH": path,
        "OMP_NUM_THREADS": "1",
        **extra,
    }


def test_a_lost_peer_names_a_sigterm_and_drops_gloos_crash_advice() -> None:
    """A rank stopped by a SIGTERM sent to it alone (a scheduler, `kill PID`) records no error, so the other
    ranks end in `PeerLost`: it named only a kill or a lost node, and passed on gloo's "typically caused by
    a remote worker crashing ... GLHF!", for a process that never crashed."""
    message = str(dist.PeerLost(GLOO_LOST))
    assert message.startswith("another process of this torchrun launch stopped without an error of its own")
    assert "stopped by a SIGTERM sent to it alone" in message and "143 for SIGTERM" in message
    assert "Connection closed by peer [127.0.0.1]:20389;" in message
    assert "crashing" not in message and "GLHF" not in message
    assert message.endswith("re-run the same command to resume from the last checkpoint")


@needs_torchrun
def test_one_rank_stopped_by_its_own_sigterm_is_said_as_such_and_the_rerun_resumes(tmp_path: Path) -> None:
    """SIGTERM to rank 1 alone, after the first checkpoint: rank 1 says it was terminated; rank 0 either
    loses it in a collective (`PeerLost`, which names a SIGTERM now) or is stopped by torchrun's SIGTERM
    first. Either way the same command run again resumes from the checkpoint and completes."""
    recipe = write_recipe(tmp_path, FIT)
    run = tmp_path / "run"
    command = [TORCHRUN, "--standalone", "--nproc_per_node=2", "-m", "xfer.core.cli", "run", str(recipe)]
    command += ["--run-dir", str(run)]
    returncode, _, stderr = _run(command, _env(HOSTILE5_TERM_RUN=str(run)))
    assert returncode != 0 and "[rank0]: Traceback" not in stderr and "[rank1]: Traceback" not in stderr, stderr[-3000:]
    assert "terminated (SIGTERM); re-run the same command to resume" in stderr, stderr[-3000:]
    state = json.loads((run / "fit/stage.json").read_text())
    assert not list((run / "fit").glob("rank*.error.json")), "a rank stopped by SIGTERM has no error to record"
    if state["status"] == "failed":  # rank 0 lost its peer in a collective (the usual order)
        assert "stopped by a SIGTERM sent to it alone" in state["error"], state["error"]
        assert "GLHF" not in state["error"] and "remote worker crashing" not in stderr, stderr[-3000:]
    else:  # torchrun's SIGTERM reached rank 0 before gloo's error did
        assert state["status"] == "interrupted", state
    checkpoint = ckpt.latest_checkpoint(run / "fit/checkpoints")
    assert checkpoint is not None and ckpt.load_state(checkpoint)["world_size"] == 2
    returncode, stdout, stderr = _run(command, _env())
    assert returncode == 0, stderr[-3000:]
    assert "[fit] resuming testing.fit" in stdout and "[fit] completed" in stdout, stdout
    state = json.loads((run / "fit/stage.json").read_text())
    assert state["status"] == "completed" and len(state["earlier_attempts"]) == 1, state


def _payload(step: int) -> ckpt.CheckpointPayload:
    optimizer = {"state": {}, "param_groups": []}
    return ckpt.CheckpointPayload(step, {"model": nn.Linear(2, 2)}, {}, {"optimizer": optimizer}, {"step": step})


def _newer(directory: Path) -> Path:
    """Checkpoints at steps 5 and 10 in `directory`, the newest as a later xfer (format 2) would write it."""
    for step in (5, 10):
        ckpt.save_checkpoint(directory, _payload(step), keep=2)
    manifest = directory / "step-0000010" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "format": 2}))
    return directory / "step-0000010"


def test_a_checkpoint_from_a_newer_xfer_is_refused_not_loaded_nor_moved_aside(tmp_path: Path) -> None:
    """The manifest's `format` was written and never read: a newer layout's checkpoint was loaded as this
    one's, and had anything in it failed to load, resume moved it aside as damaged and took an older one."""
    newest = _newer(tmp_path / "ck")
    warnings: list[str] = []
    with pytest.raises(CheckpointError) as info:
        ckpt.load_latest_intact(tmp_path / "ck", warnings.append)
    assert str(info.value).startswith(f"{newest}: written by a newer xfer (checkpoint format 2; this one reads")
    assert f"delete {tmp_path / 'ck'} to train from the start" in str(info.value)
    assert isinstance(info.value, CheckpointError) and info.value.exit_code == 2
    assert not warnings and not list((tmp_path / "ck").glob("corrupt-*")), "nothing is moved aside"
    assert ckpt.latest_checkpoint(tmp_path / "ck") == newest, "the pointer still names it"
    with pytest.raises(CheckpointError, match="written by a newer xfer"):  # a direct load (an export) too
        ckpt.load_module(newest, "model", nn.Linear(2, 2))
    ckpt.verify_checkpoint(tmp_path / "ck" / "step-0000005")  # this xfer's own format still reads


def _as_rank(monkeypatch: pytest.MonkeyPatch, rank: int, sent: list[Any]) -> None:
    """Play `rank` of a launch: rank 0 records what it broadcasts in `sent`, rank 1 receives `sent[0]`."""
    monkeypatch.setattr(dist, "is_main", lambda: rank == 0)
    monkeypatch.setattr(dist, "broadcast_object", lambda obj: sent.append(obj) or obj if rank == 0 else sent[0])


def test_rank_0s_error_choosing_the_checkpoint_is_raised_on_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 0 raised before it told the others which checkpoint to resume from: they waited until its exit
    closed the connection and ended in gloo's "Connection closed by peer", said as a peer lost without an
    error of its own. Now every rank raises rank 0's error."""
    _newer(tmp_path / "ck")
    sent: list[Any] = []
    _as_rank(monkeypatch, 0, sent)
    with pytest.raises(CheckpointError) as on_rank_0:
        ckpt.load_latest_intact(tmp_path / "ck")
    assert len(sent) == 1, "rank 0 told the other ranks before raising"
    _as_rank(monkeypatch, 1, sent)
    with pytest.raises(CheckpointError) as on_rank_1:
        ckpt.load_latest_intact(tmp_path / "ck")
    assert type(on_rank_1.value) is type(on_rank_0.value) and str(on_rank_1.value) == str(on_rank_0.value)
    assert "written by a newer xfer" in str(on_rank_0.value)


class _FirstIsBest:
    """Scores each evaluation worse than the one before: the first one stays the best."""

    main_metric, greater_is_better = "loss", False

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, model: nn.Module) -> dict[str, float]:
        self.calls += 1
        return {"loss": float(self.calls)}


def _fit_and_load_best(workdir: Path) -> Path:
    """Train 8 steps (or resume them), evaluating every 2, then load the best weights as `select: best` does."""
    from .ddp_hostile_worker import Regression, collate, data

    torch.manual_seed(1)
    config = TrainConfig(steps=8, batch_size=8, lr=0.05, precision="fp32", eval_every=2, checkpoint_every=2, prefetch=0)
    source = BatchStream(data(40), 8, collate, seed=5)
    trainer = Trainer(
        config, Regression(), source, workdir, device=torch.device("cpu"), evaluator=_FirstIsBest(), progress=False
    )
    trainer.fit()
    return trainer.load_weights("best")


def test_a_damaged_best_checkpoint_behind_an_intact_latest_one_is_moved_aside_on_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Resume checked the best checkpoint only when the latest one was damaged too. A finished stage whose
    best checkpoint alone was damaged resumed without a word and failed where `select: best` loads it,
    "model.safetensors: truncated or altered", on every re-run. It is moved aside on resume now, with a
    warning, and the trainer chooses the best checkpoint again."""
    assert _fit_and_load_best(tmp_path / "w") == tmp_path / "w/checkpoints/step-0000002"
    model = tmp_path / "w/checkpoints/step-0000002/model.safetensors"
    model.write_bytes(model.read_bytes()[:-4])
    capsys.readouterr()
    for _ in range(2):  # the re-run after that, too; `select: best` says it falls back to the last one
        with pytest.warns(UserWarning, match="no best checkpoint to load .*moved aside as damaged"):
            assert _fit_and_load_best(tmp_path / "w") == tmp_path / "w/checkpoints/step-0000008"
    (moved,) = (tmp_path / "w/checkpoints").glob("corrupt-step-0000002-*")
    err = capsys.readouterr().err
    assert f"checkpoint step 2 is damaged ({model}: truncated or altered (" in err, err
    assert f"moved to {moved}; resuming from step 8" in err, err
    assert not (tmp_path / "w/checkpoints/best").exists()

    # at the checkpoint level: the best one is verified even when the latest one is intact
    directory = tmp_path / "ck"
    ckpt.save_checkpoint(directory, _payload(5), best=True)
    ckpt.save_checkpoint(directory, _payload(10))
    (directory / "step-0000005" / "optimizer.pt").write_bytes(b"")
    warnings: list[str] = []
    assert ckpt.load_latest_intact(directory, warnings.append) == directory / "step-0000010"
    (message,) = warnings
    assert message.startswith("checkpoint step 5 is damaged (") and "optimizer.pt: truncated or altered" in message
    assert (
        ckpt.read_pointer(directory / "best") is None
        and ckpt.latest_checkpoint(directory) == directory / "step-0000010"
    )

"""Weighted training metrics (`NAME@weight`, xfer.core.trainer.WEIGHT_SUFFIX): pooled over the log window's
micro-batches, steps and ranks as sum(value * weight) / sum(weight), where they were averaged per batch (a
recall of a batch with no positives, a placeholder, counted as much as any); their sums resume exactly, and a
checkpoint written before them still resumes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from xfer.core import checkpoint as ckpt
from xfer.core import trainer as trainer_module
from xfer.core.errors import PluginError
from xfer.core.trainer import WEIGHT_SUFFIX, StepOutput, TrainingProgress

from .test_trainer import Events, make

NAN = float("nan")


class Scripted(nn.Module):
    """Linear regression whose metric `recall` (weighted) and `plain` (not) are scripted per step and
    micro-batch: `script[step][micro_batch] = (value, weight)`; weight None gives `recall` without one."""

    def __init__(self, script: dict[int, list[tuple[float, float | None]]], interrupt_at_step: int | None = None):
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 1)
        self.script, self.interrupt_at_step = script, interrupt_at_step
        self.step, self.micro = 0, 0

    def set_progress(self, progress: TrainingProgress) -> None:
        self.step, self.micro = progress.step, 0

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        if self.step == self.interrupt_at_step:
            raise KeyboardInterrupt("killed in the middle of a log window")
        x, y = batch
        loss = nn.functional.mse_loss(self.linear(x).squeeze(-1), y)
        value, weight = self.script[self.step][self.micro]
        self.micro += 1
        metrics = {"recall": torch.tensor(value), "plain": torch.tensor(value)}
        if weight is not None:
            metrics["recall" + WEIGHT_SUFFIX] = torch.tensor(weight)
        return StepOutput(loss, metrics)


def train_logs(tmp_path: Path, script: dict, **config: Any) -> dict[int, dict[str, float]]:
    events = Events()
    settings: dict[str, Any] = {"steps": len(script), "log_every": len(script), "schedule": "constant", **config}
    make(tmp_path, Scripted(script), events=events, **settings).fit()
    return events.split("train")


def test_a_weighted_metric_is_pooled_over_the_window_not_averaged(tmp_path: Path) -> None:
    """Step 1 has nothing to measure (weight 0, the placeholder 0), step 2 a recall of 80 over 10 positives,
    step 3 one of 20 over 5: the window's recall is (800 + 100) / 15 = 60, not the mean 33.3 of the three.
    The weight is not logged as a metric of its own; an unweighted metric is averaged as before."""
    logs = train_logs(tmp_path, {0: [(0.0, 0.0)], 1: [(80.0, 10.0)], 2: [(20.0, 5.0)]})
    assert logs[3]["recall"] == pytest.approx(60.0)
    assert logs[3]["plain"] == pytest.approx(100.0 / 3)
    assert not [k for k in logs[3] if k.endswith(WEIGHT_SUFFIX)]


def test_weights_pool_over_accumulated_micro_batches(tmp_path: Path) -> None:
    """Two micro-batches per step: (10 over 1, 50 over 3) then (0 over 0, 90 over 4): pooled 520 / 8 = 65.
    Not divided by the accumulation count as plain metrics are (the plain mean is 37.5)."""
    script = {0: [(10.0, 1.0), (50.0, 3.0)], 1: [(0.0, 0.0), (90.0, 4.0)]}
    logs = train_logs(tmp_path, script, accumulation=2)
    assert logs[2]["recall"] == pytest.approx(65.0)
    assert logs[2]["plain"] == pytest.approx(37.5)


def test_a_window_with_nothing_measured_logs_no_value_and_a_nan_of_weight_0_counts_for_nothing(
    tmp_path: Path,
) -> None:
    """A micro-batch of weight 0 leaves the pool whatever its value: a NaN there made the window's NaN
    (NaN * 0). A window whose weights sum to 0 logs no value (not NaN, not the placeholder), without
    stopping the training as diverged (the NaN check looks at the loss and gradient only)."""
    script = {0: [(NAN, 0.0)], 1: [(30.0, 2.0)], 2: [(NAN, 0.0)], 3: [(NAN, 0.0)]}
    logs = train_logs(tmp_path, script, log_every=2)
    assert logs[2]["recall"] == pytest.approx(30.0)
    assert "recall" not in logs[4] and "loss" in logs[4]


SIX_STEPS = {0: [(50.0, 0.0)], 1: [(70.0, 7.0)], 2: [(10.0, 1.0)], 3: [(90.0, 9.0)], 4: [(0.0, 0.0)], 5: [(40.0, 2.0)]}
RESUME = {"steps": 6, "log_every": 3, "checkpoint_every": 2, "schedule": "constant"}


def test_resume_in_the_middle_of_a_window_logs_what_an_uninterrupted_run_logs(tmp_path: Path) -> None:
    """Killed in step 5 (checkpoint at step 4, log window 4..6): the resumed run's log at step 6 pools step
    4's recall, saved in the checkpoint as its two sums, with steps 5 and 6: (810 + 80) / 11, bitwise as the
    uninterrupted run's."""
    straight = train_logs(tmp_path / "straight", SIX_STEPS, **RESUME)
    with pytest.raises(KeyboardInterrupt):
        make(tmp_path / "resumed", Scripted(SIX_STEPS, interrupt_at_step=4), **RESUME).fit()
    sums = ckpt.load_tensors(tmp_path / "resumed/checkpoints/step-0000004", "metric_sums")
    assert sums["rank0.recall"].item() == 810.0 and sums["rank0.recall" + WEIGHT_SUFFIX].item() == 9.0
    events = Events()
    make(tmp_path / "resumed", Scripted(SIX_STEPS), events=events, **RESUME).fit()
    assert events.resumes == [4]
    assert straight[6]["recall"] == pytest.approx(890.0 / 11)
    resumed = events.split("train")
    assert {k: v for k, v in resumed[6].items() if k != "steps_per_s"} == {
        k: v for k, v in straight[6].items() if k != "steps_per_s"
    }


def test_a_checkpoint_written_before_weighted_metrics_still_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint of the older trainer (its sums without weights; its `recall` sum a plain one, as an
    objective that gave `recall` without a weight before an upgrade) resumes: that plain sum cannot be
    pooled, so the first log pools the steps trained since the resume (80 / 2), and the plain metrics
    keep their sums (mean over steps 4..6)."""
    save = ckpt.save_checkpoint

    def as_the_older_trainer(directory: Path, payload: ckpt.CheckpointPayload, **kwargs: Any) -> Path:
        sums = payload.tensors["metric_sums"]
        sums = {k: v for k, v in sums.items() if not k.endswith(WEIGHT_SUFFIX)}
        if "rank0.recall" in sums:
            sums["rank0.recall"] = torch.tensor(90.0)  # the older trainer's plain sum of step 4's value
        payload.tensors["metric_sums"] = sums
        return save(directory, payload, **kwargs)

    monkeypatch.setattr(trainer_module.ckpt, "save_checkpoint", as_the_older_trainer)
    with pytest.raises(KeyboardInterrupt):
        make(tmp_path, Scripted(SIX_STEPS, interrupt_at_step=4), events=Events(), **RESUME).fit()
    monkeypatch.undo()
    events = Events()
    make(tmp_path, Scripted(SIX_STEPS), events=events, **RESUME).fit()
    assert events.resumes == [4]
    assert events.split("train")[6]["recall"] == pytest.approx(40.0)
    assert events.split("train")[6]["plain"] == pytest.approx((90.0 + 0.0 + 40.0) / 3)


@pytest.mark.parametrize(
    "script",
    [
        {0: [(10.0, 1.0)], 1: [(20.0, None)]},  # weighted, then plain
        {0: [(10.0, None)], 1: [(20.0, 2.0)]},  # plain, then weighted
    ],
)
def test_a_weight_given_in_some_steps_only_is_refused(tmp_path: Path, script: dict) -> None:
    """Pooled and plain values cannot be combined: summed together silently, the log was neither."""
    with pytest.raises(PluginError, match=r"metric 'recall' with a weight \('recall@weight'\) in some steps"):
        train_logs(tmp_path, script)


class StrayWeight(nn.Module):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.linear, self.name = nn.Linear(4, 1), name

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        x, y = batch
        loss = nn.functional.mse_loss(self.linear(x).squeeze(-1), y)
        return StepOutput(loss, {"tokens": torch.tensor(8.0), self.name + WEIGHT_SUFFIX: torch.tensor(1.0)})


@pytest.mark.parametrize(
    ("name", "why"), [("recall", "not one of the metrics"), ("loss", "not one of the metrics"), ("tokens", "a count")]
)
def test_a_weight_without_its_metric_is_refused(tmp_path: Path, name: str, why: str) -> None:
    """A weight for a metric the objective does not return (a typo, the trainer's own loss) or for the
    count metric was logged as a metric named `...@weight` of its own."""
    with pytest.raises(PluginError, match=rf"returned '{name}@weight', a weight for metric '{name}', which is {why}"):
        make(tmp_path, StrayWeight(name), steps=1).fit()


WORKER = """\
import datetime, json, sys
from pathlib import Path
import torch, torch.distributed
from torch import nn
from xfer.core import distributed as dist
from xfer.core.trainer import StepOutput, TrainConfig, Trainer

class Source:
    steps_per_epoch = None
    def next_step(self):
        return [torch.zeros(1), torch.zeros(1)]
    def state_dict(self):
        return {}
    def load_state_dict(self, state):
        pass

class Scripted(nn.Module):
    # rank 0 measures nothing in its first micro-batch, rank 1 measures much in its second
    SCRIPT = {0: [(0.0, 0.0), (60.0, 2.0)], 1: [(30.0, 1.0), (90.0, 5.0)]}
    def __init__(self):
        super().__init__()
        self.w, self.calls = nn.Parameter(torch.zeros(())), 0
    def forward(self, batch):
        value, weight = self.SCRIPT[dist.rank()][self.calls % 2]
        self.calls += 1
        metrics = {"recall": torch.tensor(value), "recall@weight": torch.tensor(weight)}
        return StepOutput((self.w - 1.0) ** 2, metrics)

class Log:
    def __init__(self):
        self.records = []
    def log(self, step, split, metrics):
        self.records.append(metrics)
    def checkpoint_saved(self, step, path):
        pass
    def resumed(self, step):
        pass

torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
out = Path(sys.argv[1])
config = TrainConfig(steps=2, batch_size=2, grad_accum=2, lr=0.1, precision="fp32", log_every=2, eval_every=None)
events = Log()
Trainer(config, Scripted(), Source(), out / "run", device=torch.device("cpu"), events=events, progress=False).fit()
if dist.is_main():  # the trainer logs on rank 0 only
    (out / "logged.json").write_text(json.dumps(events.records))
torch.distributed.barrier()
torch.distributed.destroy_process_group()
"""

TORCHRUN = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))


@pytest.mark.skipif(not Path(TORCHRUN).exists(), reason="torchrun not installed")
def test_weights_pool_over_ranks(tmp_path: Path) -> None:
    """Two ranks, two micro-batches a step, two steps: the pool is over all of them
    (0 x 0 + 60 x 2 + 30 x 1 + 90 x 5) x 2 / (8 x 2) = 75, not the mean of each rank's (60 and 80)."""
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    command = [TORCHRUN, "--standalone", "--nproc_per_node=2", str(worker), str(tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr[-3000:]

    (logged,) = json.loads((tmp_path / "logged.json").read_text())
    assert logged["recall"] == pytest.approx(75.0)


def test_ranks_that_disagree_on_a_weight_are_refused_on_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank that gave `recall` without its weight while another gave it with one: its plain sum was
    pooled as if it were a sum of value * weight, silently. Every rank sees every rank's names, so every
    rank refuses alike (none is left waiting in the all-reduce). Two ranks stand in by their gathered names."""
    trainer = make(tmp_path, Scripted({0: [(10.0, None)]}), steps=1)
    trainer._sums = {"loss": torch.tensor(1.0), "recall": torch.tensor(10.0)}
    trainer._sum_steps = 1
    monkeypatch.setattr(trainer_module.dist, "world_size", lambda: 2)
    other = ["loss", "recall", "recall" + WEIGHT_SUFFIX]
    monkeypatch.setattr(trainer_module.dist, "gather_objects", lambda names: [names, other])
    with pytest.raises(PluginError, match=r"metric 'recall' with a weight \('recall@weight'\) in some steps"):
        trainer._flush_metrics({})

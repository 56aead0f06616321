"""Hostile checks of the shared trainer: kills between checkpoint files, resume of logged metrics,
batch sources that end, evaluators that break their contract. Complements test_trainer.py."""

from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest
import torch

from xfer.core import checkpoint as ckpt
from xfer.core.data import BatchStream, MultiTaskSource
from xfer.core.errors import PluginError, UserError
from xfer.core.trainer import StepOutput, TrainConfig, Trainer

from .test_trainer import CPU, Events, Regression, ScriptedEvaluator, make

SCORES = [1.0, 5.0, 3.0, 4.0, 2.0, 0.0, 0.0, 0.0]


def test_a_kill_between_the_latest_and_best_pointers_keeps_the_best_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after `latest` named the new best checkpoint but before `best` did: the resumed run
    reported step 2's score as the best while `best` (what `select: best` exports) named step 1."""
    settings = {"steps": 8, "eval_every": 1, "checkpoint_every": 2}
    straight = make(tmp_path / "straight", evaluator=ScriptedEvaluator(SCORES), **settings).fit()
    assert (straight.best_metric, straight.best_checkpoint.name) == (5.0, "step-0000002")

    original = ckpt.write_pointer

    def killed_before_best(path: Path, target: str) -> None:
        if path.name == "best" and target == "step-0000002":
            raise KeyboardInterrupt("killed between the pointers")
        original(path, target)

    monkeypatch.setattr(ckpt, "write_pointer", killed_before_best)
    with pytest.raises(KeyboardInterrupt):
        make(tmp_path / "run", evaluator=ScriptedEvaluator(SCORES), **settings).fit()
    monkeypatch.undo()
    checkpoints = tmp_path / "run" / "checkpoints"
    assert ckpt.read_pointer(checkpoints / "latest").name == "step-0000002"
    assert ckpt.read_pointer(checkpoints / "best").name == "step-0000001"

    resumed = make(tmp_path / "run", evaluator=ScriptedEvaluator(SCORES[2:]), **settings).fit()
    assert resumed.resumed_from == 2
    assert (resumed.best_metric, resumed.best_checkpoint.name) == (5.0, "step-0000002")


def test_a_best_checkpoint_gone_before_resume_is_chosen_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The best checkpoint moved aside as damaged (`load_latest_intact` does that): its score kept
    as the best made every later evaluation lose to a checkpoint that no longer exists, so the run
    ended with the lost score as its best metric and no best checkpoint."""
    settings = {"eval_every": 1, "checkpoint_every": 1, "schedule": "constant"}  # resumed with more steps
    make(tmp_path, evaluator=ScriptedEvaluator([1.0, 5.0, 3.0, 4.0]), steps=4, **settings).fit()
    checkpoints = tmp_path / "checkpoints"
    assert ckpt.read_pointer(checkpoints / "best").name == "step-0000002"
    ckpt.move_aside(checkpoints / "step-0000002")

    result = make(tmp_path, evaluator=ScriptedEvaluator([2.0, 0.0]), steps=6, **settings).fit()
    assert (result.resumed_from, result.best_metric, result.best_checkpoint.name) == (4, 2.0, "step-0000005")
    assert "its best checkpoint step-0000002 (score 5.0) is gone" in capsys.readouterr().err


class CrashAt(Regression):
    """Dies (like Ctrl-C) at its `at`-th training forward."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        if self.calls + 1 == self.at:
            raise KeyboardInterrupt("killed")
        return super().forward(batch)


@pytest.mark.parametrize("accumulation", [1, 2])
def test_the_first_log_after_a_resume_averages_the_same_steps(tmp_path: Path, accumulation: int) -> None:
    """Checkpoints every 2 steps, logs every 4: resumed from step 6, the step-8 line averaged steps
    7-8 only (the sums of steps 5-6 were lost), so metrics.jsonl differed from the uninterrupted run."""
    settings = {"steps": 8, "log_every": 4, "checkpoint_every": 2, "accumulation": accumulation}
    straight = Events()
    torch.manual_seed(0)
    make(tmp_path / "straight", events=straight, **settings).fit()
    torch.manual_seed(0)
    with pytest.raises(KeyboardInterrupt):
        make(tmp_path / "run", CrashAt(7 * accumulation), events=Events(), **settings).fit()
    resumed = Events()
    result = make(tmp_path / "run", events=resumed, **settings).fit()
    assert result.resumed_from == 6
    assert list(resumed.split("train")) == [8]
    for name in ("loss", "mae", "grad_norm"):
        assert resumed.split("train")[8][name] == straight.split("train")[8][name], name


class EndingSource:
    """A source that breaks the endless-stream contract after `steps` steps, in one of two ways."""

    steps_per_epoch = None

    def __init__(self, steps: int, how: str):
        self.i, self.steps, self.how = 0, steps, how

    def next_step(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        self.i += 1
        if self.i > self.steps:
            if self.how == "empty":
                return []
            raise StopIteration
        x = torch.randn(8, 4, generator=torch.Generator().manual_seed(self.i))
        return [(x, x.sum(-1))]

    def state_dict(self) -> dict[str, int]:
        return {"i": self.i}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.i = state["i"]


@pytest.mark.parametrize("prefetch", [0, 2])
@pytest.mark.parametrize(("how", "what"), [("empty", "returned no micro-batches"), ("stop", "raised StopIteration")])
def test_a_batch_source_that_ends_is_refused_at_the_step(tmp_path: Path, how: str, what: str, prefetch: int) -> None:
    """An empty step list "trained" steps 4-6 on nothing (no gradient, yet counted, logged and
    checkpointed as done); a StopIteration ended the run in a bare traceback."""
    torch.manual_seed(0)
    config = TrainConfig(
        steps=6, batch_size=8, precision="fp32", checkpoint_every=2, eval_every=None, prefetch=prefetch
    )
    events = Events()
    trainer = Trainer(config, Regression(), EndingSource(3, how), tmp_path, device=CPU, events=events, progress=False)
    with pytest.raises(PluginError, match=rf"EndingSource .*{what}.* at step 4 of 6: a BatchSource is endless") as info:
        trainer.fit()
    assert info.value.exit_code == 2
    assert trainer.step == 3 and [s for s, _ in events.saved] == [2]


class ContractBreakingEvaluator:
    """An evaluator of task `toy/x` whose results break the contract in one of several ways."""

    main_metric = "accuracy"
    greater_is_better = True
    task = types.SimpleNamespace(name="toy/x")

    def __init__(self, results: object):
        self.results = results

    def __call__(self, model: torch.nn.Module) -> object:
        return self.results


@pytest.mark.parametrize(
    ("results", "got"),
    [
        ({"acc": 50.0}, "metrics ['acc']"),
        ({"accuracy": None}, "NoneType None as 'accuracy'"),
        ({"accuracy": "50"}, "str '50' as 'accuracy'"),
        ([50.0], "a list"),
    ],
)
def test_an_evaluator_without_its_main_metric_is_named(tmp_path: Path, results: object, got: str) -> None:
    """Was a bare KeyError ('accuracy') or TypeError traceback, after a whole epoch of training."""
    trainer = make(tmp_path, evaluator=ContractBreakingEvaluator(results), steps=3, eval_every=2)
    with pytest.raises(PluginError) as info:
        trainer.fit()
    assert str(info.value) == (
        f"evaluator {__name__}.ContractBreakingEvaluator (task 'toy/x') returned {got} at step 2: its results "
        "must hold a number for its main metric 'accuracy'"
    )


def test_numpy_scores_are_main_metrics_too(tmp_path: Path) -> None:
    result = make(
        tmp_path, evaluator=ContractBreakingEvaluator({"accuracy": np.float32(0.5)}), steps=2, eval_every=1
    ).fit()
    assert result.best_metric == 0.5 and type(result.best_metric) is float
    assert ckpt.load_state(result.last_checkpoint)["last_eval"]["accuracy"] == 0.5, "was a TypeError writing state.json"


@pytest.mark.parametrize("steps", [0, -3])
def test_a_stage_that_sets_no_steps_is_refused(tmp_path: Path, steps: int) -> None:
    """A stage setting `steps` from its own budget after the recipe checks: 0 trained nothing and the
    stage then failed on "no checkpoint to load"; -3 was reported as a warmup problem."""
    with pytest.raises(UserError, match=rf"train.steps is {steps} for this stage .* must train at least 1 step"):
        make(tmp_path, steps=steps)


def _payload(step: int) -> ckpt.CheckpointPayload:
    return ckpt.CheckpointPayload(step, {"model": torch.nn.Linear(2, 2)}, {}, {}, {"step": step})


def test_checkpoints_past_ten_million_steps_are_ordered_by_step(tmp_path: Path) -> None:
    """`step-10000000` sorts before `step-9999999` by name: pruning kept the old checkpoint and deleted
    the new ones, and without a `latest` pointer resume went back to the old one."""
    for step in (9_999_000, 10_000_000, 10_001_000):
        ckpt.save_checkpoint(tmp_path, _payload(step), keep=2)
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-10000000", "step-10001000"]
    (tmp_path / "latest").unlink()
    assert ckpt.latest_checkpoint(tmp_path) == tmp_path / "step-10001000"


@pytest.mark.parametrize("checkpoint_every", [500, "epoch"])
def test_a_batch_source_with_no_steps_per_epoch_is_refused(tmp_path: Path, checkpoint_every: int | str) -> None:
    """`steps_per_epoch == 0` (a source over no examples) trained one step and never evaluated at
    `eval_every: epoch`, or ended in ZeroDivisionError with `checkpoint_every: epoch`."""
    source = EndingSource(100, "empty")
    source.steps_per_epoch = 0
    config = TrainConfig(batch_size=8, precision="fp32", checkpoint_every=checkpoint_every)
    with pytest.raises(PluginError, match=r"EndingSource has 0 steps per epoch: expected a positive int, or None"):
        Trainer(config, Regression(), source, tmp_path, device=CPU, evaluator=ScriptedEvaluator(), progress=False)


def test_numpy_steps_per_epoch_are_taken(tmp_path: Path) -> None:
    source = EndingSource(100, "empty")
    source.steps_per_epoch = np.int64(3)
    config = TrainConfig(batch_size=8, precision="fp32", epochs=2.0)
    assert Trainer(config, Regression(), source, tmp_path, device=CPU, progress=False).total_steps == 6


def test_multi_task_weights_for_unknown_sources_are_refused() -> None:
    """A weight under a misspelt name gave the real source weight 0: it was never drawn, silently."""

    def stream(n: int) -> BatchStream:
        return BatchStream(list(range(n)), 2, list, seed=0)

    source = MultiTaskSource({"glue/sst2": stream(4), "glue/rte": stream(4)}, {"glue/sst": 1.0, "glue/rte": 1.0})
    with pytest.raises(ValueError, match=r"weights for \['glue/sst'\], which are not sources"):
        source.next_step()
    annealed = MultiTaskSource({"a": stream(4), "b": stream(4)}, lambda step: {"a": 1.0, "c": float(step)})
    with pytest.raises(ValueError, match=r"weights for \['c'\]"):
        annealed.next_step()

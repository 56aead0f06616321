"""The shared training loop, in process on CPU with a tiny regression objective.

Complements test_resume.py (SIGKILL / crash-in-checkpoint through the CLI): here resume, EMA, best
checkpoints, accumulation, clipping, NaN stop, bf16 and metric logging are checked directly.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from xfer.core import checkpoint as ckpt
from xfer.core import trainer as trainer_module
from xfer.core.data import BatchStream
from xfer.core.errors import TrainingDiverged, UserError
from xfer.core.optim import lr_multiplier
from xfer.core.trainer import StepOutput, TrainConfig, Trainer, resolve_precision

CPU = torch.device("cpu")
TRUE_W = torch.tensor([1.0, -2.0, 0.5, 3.0])


def dataset(n: int = 40) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(n, 4, generator=gen)
    y = x @ TRUE_W + 0.1
    return list(zip(x, y, strict=True))


def collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.stack([x for x, _ in items]), torch.stack([y for _, y in items])


class Regression(nn.Module):
    """Linear regression with optional dropout; counts training forwards and can turn NaN."""

    def __init__(self, dropout: float = 0.0, nan_from: int | None = None):
        super().__init__()
        self.linear = nn.Linear(4, 1)
        self.dropout = nn.Dropout(dropout)
        self.nan_from = nan_from
        self.calls = 0
        self.losses: list[float] = []
        self.output_dtypes: list[torch.dtype] = []

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        x, y = batch
        pred = self.linear(self.dropout(x)).squeeze(-1)
        self.output_dtypes.append(pred.dtype)
        loss = nn.functional.mse_loss(pred.float(), y)
        self.calls += 1
        if self.nan_from is not None and self.calls >= self.nan_from:
            loss = loss * float("nan")
        self.losses.append(loss.item())
        return StepOutput(loss, {"mae": (pred.float() - y).abs().mean().detach()})


class Events:
    def __init__(self, on_log: Callable[[int, str], None] | None = None):
        self.logs: list[tuple[int, str, dict[str, float]]] = []
        self.saved: list[tuple[int, Path]] = []
        self.resumes: list[int] = []
        self.on_log = on_log

    def log(self, step: int, split: str, metrics: dict[str, float]) -> None:
        self.logs.append((step, split, dict(metrics)))
        if self.on_log is not None:
            self.on_log(step, split)

    def checkpoint_saved(self, step: int, path: Path) -> None:
        self.saved.append((step, path))

    def resumed(self, step: int) -> None:
        self.resumes.append(step)

    def split(self, name: str) -> dict[int, dict[str, float]]:
        return {step: m for step, s, m in self.logs if s == name}


class ScriptedEvaluator:
    """Returns scripted scores (or draws random numbers) and records what it saw."""

    main_metric = "score"

    def __init__(self, scores: list[float] | None = None, greater_is_better: bool = True, consume_rng: bool = False):
        self.scores, self.greater_is_better, self.consume_rng = scores, greater_is_better, consume_rng
        self.weights: list[torch.Tensor] = []
        self.modes: list[tuple[bool, bool]] = []

    def __call__(self, model: nn.Module) -> dict[str, float]:
        self.weights.append(model.linear.weight.detach().clone())
        self.modes.append((torch.is_grad_enabled(), model.training))
        if self.consume_rng:
            torch.randn(100)
        score = self.scores[len(self.weights) - 1] if self.scores else 0.0
        return {"score": score, "other": 1.0}


def make(
    workdir: Path,
    objective: nn.Module | None = None,
    *,
    n: int = 40,
    accumulation: int = 1,
    evaluator: Any = None,
    events: Any = None,
    **config: Any,
) -> Trainer:
    settings: dict[str, Any] = {
        "batch_size": 8,
        "lr": 0.05,
        "precision": "fp32",
        "log_every": 1000,
        "checkpoint_every": 1000,
        "eval_every": None,
        "weight_decay": 0.0,
        "grad_accum": accumulation,
    }
    settings.update(config)
    cfg = TrainConfig(**settings)
    stream = BatchStream(dataset(n), cfg.batch_size, collate, seed=5, accumulation=accumulation)
    if objective is None:
        torch.manual_seed(0)
        objective = Regression()
    return Trainer(cfg, objective, stream, workdir, device=CPU, evaluator=evaluator, events=events, progress=False)


def weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def assert_bitwise(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), f"{name}: max diff {(a[name] - b[name]).abs().max().item():.3g}"


# --- configuration -------------------------------------------------------------------------------


def test_total_steps_and_warmup(tmp_path: Path) -> None:
    t = make(tmp_path, epochs=2.0)
    assert (t.steps_per_epoch, t.total_steps, t.warmup_steps) == (5, 10, 0)
    assert make(tmp_path, epochs=0.5).total_steps == 3, "ceil(2.5): a partial epoch still gets its steps"
    assert make(tmp_path, n=42, epochs=2.0).total_steps == 12, "6 steps per epoch when the batch does not divide"
    assert make(tmp_path, epochs=2.0, steps=7).total_steps == 7, "steps overrides epochs"
    assert make(tmp_path, epochs=4.0, warmup_fraction=0.15).warmup_steps == 3
    assert make(tmp_path, epochs=4.0, warmup_fraction=0.15, warmup_steps=5).warmup_steps == 5
    t = make(tmp_path, epochs=2.0, eval_every="epoch", checkpoint_every="epoch")
    assert (t.eval_every, t.checkpoint_every) == (5, 5)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="epochs: must be positive"):
        TrainConfig(epochs=0)
    TrainConfig(epochs=0, steps=3)
    with pytest.raises(ValueError, match="batch_size 10 is not a multiple of grad_accum 4"):
        TrainConfig(batch_size=10, grad_accum=4)
    with pytest.raises(ValueError, match="must be positive"):
        TrainConfig(batch_size=0)


def test_schedule_applied_each_step(tmp_path: Path) -> None:
    events = Events()
    t = make(tmp_path, events=events, epochs=2.0, warmup_steps=3, schedule="linear", log_every=1)
    result = t.fit()
    assert result.step == 10 and result.resumed_from is None
    train = events.split("train")
    assert sorted(train) == list(range(1, 11))
    for step, logged in train.items():  # the lr logged for step s is the one step s used
        assert logged["lr"] == pytest.approx(0.05 * lr_multiplier("linear", step - 1, 10, 3))
        assert logged["epoch"] == pytest.approx(step / 5)
    assert train[1]["lr"] == 0.0 and train[4]["lr"] == pytest.approx(0.05)


# --- one step ---------------------------------------------------------------------------------------


def test_gradient_accumulation_matches_one_big_batch(tmp_path: Path) -> None:
    results = []
    for accumulation in (1, 2):
        events = Events()
        # SGD without clipping: unlike Adam it is sensitive to the scale of the summed gradients
        t = make(
            tmp_path / f"a{accumulation}",
            batch_size=16,
            accumulation=accumulation,
            steps=6,
            log_every=1,
            events=events,
            optimizer="sgd",
            clip_norm=None,
            lr=0.02,
        )
        t.fit()
        assert t.objective.calls == 6 * accumulation
        results.append((weights(t.objective), events.split("train")))
    (w1, log1), (w2, log2) = results
    for name in w1:
        torch.testing.assert_close(w1[name], w2[name], rtol=0, atol=1e-6)
    for step in log1:  # loss and metrics are averaged over micro-batches, not summed
        for key in ("loss", "mae"):
            assert log1[step][key] == pytest.approx(log2[step][key], rel=1e-5), (step, key)


def test_clip_norm_limits_the_update(tmp_path: Path) -> None:
    deltas, norms = {}, {}
    for clip in (0.01, 1e9):
        events = Events()
        t = make(
            tmp_path / str(clip),
            events=events,
            steps=1,
            optimizer="sgd",
            momentum=0.0,
            lr=0.1,
            clip_norm=clip,
            schedule="constant",
            log_every=1,
        )
        before = weights(t.objective)
        t.fit()
        after = weights(t.objective)
        deltas[clip] = torch.cat([(after[k] - before[k]).flatten() for k in before])
        norms[clip] = events.split("train")[1]["grad_norm"]  # the norm before clipping
    assert norms[0.01] == pytest.approx(norms[1e9]) and norms[0.01] > 1.0
    assert deltas[0.01].norm().item() == pytest.approx(0.1 * 0.01, rel=1e-4)
    assert deltas[1e9].norm().item() == pytest.approx(0.1 * norms[1e9], rel=1e-4)
    torch.testing.assert_close(deltas[0.01], deltas[1e9] * (0.01 / norms[1e9]), rtol=1e-4, atol=1e-9)


# --- EMA, evaluation, best checkpoints ---------------------------------------------------------


def test_ema_weights_are_evaluated_and_exported(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Regression()
    initial = weights(model)
    live: dict[int, dict[str, torch.Tensor]] = {}
    events = Events(on_log=lambda step, split: live.setdefault(step, weights(model)) if split == "train" else None)
    evaluator = ScriptedEvaluator([1.0, 2.0])
    t = make(tmp_path, model, events=events, evaluator=evaluator, steps=4, ema_decay=0.75, log_every=1, eval_every=2)
    t.fit()
    expected = {0: initial}
    for step in range(1, 5):  # shadow <- decay * shadow + (1 - decay) * live
        expected[step] = {k: 0.75 * expected[step - 1][k] + 0.25 * live[step][k] for k in initial}
    for index, step in enumerate((2, 4)):
        torch.testing.assert_close(evaluator.weights[index], expected[step]["linear.weight"])
        assert not torch.allclose(evaluator.weights[index], live[step]["linear.weight"]), "evaluated the live weights"
    assert_bitwise(weights(model), live[4])  # live weights restored after each evaluation
    for name in initial:
        torch.testing.assert_close(t.ema.shadow[name], expected[4][name])
    stored = ckpt.load_tensors(ckpt.latest_checkpoint(tmp_path / "checkpoints"), "ema")
    assert_bitwise(stored, t.ema.shadow)
    t.load_weights("last")  # with EMA on, the exported weights are the averaged ones
    assert_bitwise(weights(model), t.ema.shadow)


@pytest.mark.parametrize(("greater", "best_step"), [(True, 2), (False, 3)])
def test_best_checkpoint_follows_the_main_metric(tmp_path: Path, greater: bool, best_step: int) -> None:
    scores = [0.5, 0.9, 0.3, 0.8]
    evaluator = ScriptedEvaluator(scores, greater_is_better=greater)
    events = Events()
    t = make(tmp_path, evaluator=evaluator, events=events, steps=4, eval_every=1)
    result = t.fit()
    assert result.best_metric == scores[best_step - 1]
    assert result.best_checkpoint == tmp_path / "checkpoints" / f"step-{best_step:07d}"
    assert result.last_checkpoint == tmp_path / "checkpoints" / "step-0000004"
    assert result.last_eval == {"score": 0.8, "other": 1.0}
    assert [s for s, m in events.split("dev").items()] == [1, 2, 3, 4]
    assert ckpt.load_state(result.best_checkpoint)["best_metric"] == scores[best_step - 1]
    # checkpoints are written on improvement even between checkpoint_every boundaries; keep=1 + best
    improved = [1, 2] if greater else [1, 3]
    assert [s for s, _ in events.saved] == [*improved, 4]
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*")) == [
        f"step-{best_step:07d}",
        "step-0000004",
    ]
    final = weights(t.objective)
    assert t.load_weights("best") == result.best_checkpoint
    assert torch.equal(t.objective.linear.weight, evaluator.weights[best_step - 1])
    assert t.load_weights("last") == result.last_checkpoint
    assert_bitwise(weights(t.objective), final)


@pytest.mark.parametrize(("keep", "expected"), [(1, [2, 5]), (2, [2, 4, 5]), (3, [2, 3, 4, 5])])
def test_keep_checkpoints_keeps_best_and_latest(tmp_path: Path, keep: int, expected: list[int]) -> None:
    evaluator = ScriptedEvaluator([0.5, 0.9, 0.3, 0.8, 0.1])
    t = make(tmp_path, evaluator=evaluator, steps=5, eval_every=1, checkpoint_every=1, keep_checkpoints=keep)
    t.fit()
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*")) == [f"step-{s:07d}" for s in expected]


def test_evaluation_does_not_consume_the_training_rng(tmp_path: Path) -> None:
    finals = []
    for eval_every in (1, None):
        torch.manual_seed(3)
        model = Regression(dropout=0.3)
        evaluator = ScriptedEvaluator(consume_rng=True)
        t = make(tmp_path / str(eval_every), model, evaluator=evaluator, steps=6, eval_every=eval_every)
        t.fit()
        finals.append(weights(model))
        if eval_every:
            assert len(evaluator.modes) == 6
            assert set(evaluator.modes) == {(False, False)}, "evaluation runs under no_grad in eval mode"
            assert model.training, "training mode is restored"
    assert_bitwise(*finals)


# --- divergence -----------------------------------------------------------------------------------


def test_nan_stops_training_and_keeps_the_last_good_checkpoint(tmp_path: Path) -> None:
    torch.manual_seed(0)
    events = Events()
    t = make(tmp_path, Regression(nan_from=6), events=events, steps=12, log_every=4, checkpoint_every=4)
    last_good = tmp_path / "checkpoints" / "step-0000004"
    with pytest.raises(TrainingDiverged) as info:
        t.fit()
    message = str(info.value)
    assert "between step 5 and step 8" in message
    assert f"last good checkpoint: {last_good} (step 4)" in message
    assert info.value.exit_code == 1
    assert [s for s, _ in events.saved] == [4], "nothing written after the NaN"
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest", "step-0000004"]
    assert [s for s in events.split("train")] == [4]
    # the kept checkpoint is intact and loadable
    assert ckpt.latest_checkpoint(tmp_path / "checkpoints") == last_good
    fresh = Regression()
    ckpt.load_module(last_good, "model", fresh)
    assert all(torch.isfinite(v).all() for v in fresh.state_dict().values())
    state = ckpt.load_torch_state(last_good, "optimizer")
    assert all(torch.isfinite(s["exp_avg"]).all() for s in state["state"].values())
    assert ckpt.load_state(last_good)["step"] == 4


class NanGradientAt(Regression):
    """A finite loss whose gradient is NaN at one training call: d sqrt(|0 * w|) / dw = inf * 0."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        out = super().forward(batch)
        if self.calls == self.at:
            return StepOutput(out.loss + torch.sqrt((self.linear.weight.sum() * 0.0).abs()), out.metrics)
        return out


@pytest.mark.parametrize("clip_norm", [1.0, None])
def test_nan_gradient_is_never_checkpointed(tmp_path: Path, clip_norm: float | None) -> None:
    torch.manual_seed(0)
    t = make(tmp_path, NanGradientAt(4), steps=12, log_every=4, checkpoint_every=4, clip_norm=clip_norm)
    with pytest.raises(TrainingDiverged):
        t.fit()
    for path in (tmp_path / "checkpoints").glob("step-*"):
        fresh = Regression()
        ckpt.load_module(path, "model", fresh)
        assert all(torch.isfinite(v).all() for v in fresh.state_dict().values()), f"{path.name} holds NaN weights"


def test_nan_before_any_checkpoint(tmp_path: Path) -> None:
    torch.manual_seed(0)
    t = make(tmp_path, Regression(nan_from=1), steps=5, log_every=2)
    with pytest.raises(TrainingDiverged, match=r"between step 1 and step 2; no checkpoint had been written yet"):
        t.fit()
    assert ckpt.latest_checkpoint(tmp_path / "checkpoints") is None


# --- resume ------------------------------------------------------------------------------------------


def _resume_run(workdir: Path, steps: int, init_seed: int, fit_seed: int, events: Events) -> Trainer:
    torch.manual_seed(init_seed)
    model = Regression(dropout=0.2)
    t = make(
        workdir,
        model,
        events=events,
        steps=steps,
        schedule="constant_warmup",
        warmup_steps=2,
        checkpoint_every=2,
        log_every=1,
        ema_decay=0.9,
    )
    torch.manual_seed(fit_seed)  # a resumed run must not depend on the process's RNG state
    t.fit()
    return t


def test_in_process_resume_is_bitwise_identical(tmp_path: Path) -> None:
    straight_events = Events()
    straight = _resume_run(tmp_path / "straight", 8, init_seed=0, fit_seed=1, events=straight_events)

    first = _resume_run(tmp_path / "resumed", 4, init_seed=0, fit_seed=1, events=Events())
    assert ckpt.load_state(ckpt.latest_checkpoint(tmp_path / "resumed" / "checkpoints"))["step"] == 4
    events = Events()
    second = _resume_run(tmp_path / "resumed", 8, init_seed=42, fit_seed=999, events=events)
    assert events.resumes == [4]
    assert second.objective.calls == 4, "only steps 5..8 were run"
    assert sorted(events.split("train")) == [5, 6, 7, 8]
    for step in (5, 6, 7, 8):
        assert events.split("train")[step]["loss"] == straight_events.split("train")[step]["loss"]
    assert_bitwise(weights(second.objective), weights(straight.objective))
    assert_bitwise(second.ema.shadow, straight.ema.shadow)
    assert second.data.state_dict() == straight.data.state_dict()
    opt_a, opt_b = straight.optimizer.state_dict()["state"], second.optimizer.state_dict()["state"]
    for key in opt_a:
        for name in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(opt_a[key][name], opt_b[key][name])
    assert first.step == 4 and second.step == 8

    # fitting a finished run again resumes at the end and does nothing
    events = Events()
    third = make(tmp_path / "resumed", Regression(dropout=0.2), events=events, steps=8, ema_decay=0.9)
    result = third.fit()
    assert (result.step, result.resumed_from, events.resumes, third.objective.calls) == (8, 8, [8], 0)
    assert_bitwise(weights(third.objective), weights(straight.objective))


def test_training_time_adds_up_across_resumes_without_the_lost_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trial killed after its step-4 checkpoint reports, once resumed, the time of steps 1-8 (what
    made the result): not only the resumed part, and not the lost step 5 twice."""
    clock = [0.0]
    monkeypatch.setattr(trainer_module, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    class Ticking(Regression):
        """Each training forward takes one (fake) second; the `crash_at`-th one dies."""

        def __init__(self, crash_at: int | None = None):
            super().__init__()
            self.crash_at = crash_at

        def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
            clock[0] += 1.0
            if self.calls + 1 == self.crash_at:
                raise RuntimeError("killed")
            return super().forward(batch)

    settings = {"steps": 8, "checkpoint_every": 4, "schedule": "constant"}
    with pytest.raises(RuntimeError, match="killed"):
        make(tmp_path / "run", Ticking(crash_at=6), **settings).fit()  # steps 1-5 done, 5 lost
    assert ckpt.load_state(ckpt.latest_checkpoint(tmp_path / "run" / "checkpoints"))["seconds"] == 4.0
    resumed = make(tmp_path / "run", Ticking(), **settings).fit()
    assert (resumed.resumed_from, resumed.seconds) == (4, 8.0)
    straight = make(tmp_path / "straight", Ticking(), **settings).fit()
    assert (straight.resumed_from, straight.seconds) == (None, 8.0)


# --- precision --------------------------------------------------------------------------------------


def test_resolve_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_precision("fp32", CPU) is None
    assert resolve_precision("bf16", CPU) is torch.bfloat16
    assert resolve_precision("bf16", torch.device("cuda")) is torch.bfloat16
    assert resolve_precision("auto", CPU) in (None, torch.bfloat16)
    monkeypatch.setattr(trainer_module, "_cpu_has_fast_bf16", lambda: True)
    assert resolve_precision("auto", CPU) is torch.bfloat16
    monkeypatch.setattr(trainer_module, "_cpu_has_fast_bf16", lambda: False)
    assert resolve_precision("auto", CPU) is None
    assert resolve_precision("auto", torch.device("meta")) is None


def test_bf16_autocast_trains(tmp_path: Path) -> None:
    events = Events()
    t = make(tmp_path, events=events, steps=30, precision="bf16", lr=0.1, log_every=10, schedule="constant")
    assert t.amp_dtype is torch.bfloat16
    t.fit()
    assert set(t.objective.output_dtypes) == {torch.bfloat16}, "the forward ran under bf16 autocast"
    assert t.objective.linear.weight.dtype == torch.float32, "master weights stay fp32"
    losses = [m["loss"] for m in events.split("train").values()]
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < 0.2 * losses[0], losses
    fp32 = make(tmp_path / "fp32", steps=1)
    fp32.fit()
    assert fp32.amp_dtype is None and set(fp32.objective.output_dtypes) == {torch.float32}


# --- logging ----------------------------------------------------------------------------------------


def test_logged_metrics(tmp_path: Path) -> None:
    events = Events()
    evaluator = ScriptedEvaluator([1.0, 2.0])
    t = make(tmp_path, events=events, evaluator=evaluator, steps=6, log_every=2, checkpoint_every=3, eval_every=3)
    t.fit()
    train = events.split("train")
    assert sorted(train) == [2, 4, 6]
    losses = t.objective.losses
    for step, logged in train.items():
        assert {"loss", "lr", "grad_norm", "steps_per_s", "epoch", "mae"} <= logged.keys()
        assert logged["loss"] == pytest.approx((losses[step - 2] + losses[step - 1]) / 2, rel=1e-6)
        assert logged["epoch"] == pytest.approx(step / 5)
        assert logged["steps_per_s"] > 0 and logged["grad_norm"] > 0
        assert logged["lr"] == pytest.approx(0.05 * lr_multiplier("linear", step - 1, 6, 0))
    assert events.split("dev") == {3: {"score": 1.0, "other": 1.0}, 6: {"score": 2.0, "other": 1.0}}
    assert [(s, p.name) for s, p in events.saved] == [(3, "step-0000003"), (6, "step-0000006")]
    assert events.resumes == []
    assert [s for s, split, _ in events.logs] == [2, 3, 4, 6, 6], "train before dev at a shared step"


# --- seams: batch sources, progress, prefetch, exported == evaluated -------------------------------


def test_prefetch_on_and_off_give_identical_weights(tmp_path: Path) -> None:
    results = {}
    for depth in (0, 3):
        torch.manual_seed(0)
        t = make(tmp_path / f"p{depth}", Regression(dropout=0.2), steps=9, prefetch=depth, ema_decay=0.9)
        torch.manual_seed(1)
        t.fit()
        state = ckpt.load_state(ckpt.latest_checkpoint(tmp_path / f"p{depth}" / "checkpoints"))
        results[depth] = (weights(t.objective), t.ema.shadow, state["data"])
    assert_bitwise(results[0][0], results[3][0])
    assert_bitwise(results[0][1], results[3][1])
    assert results[0][2] == results[3][2], "the checkpoint must hold the consumed cursor, not the prefetcher's"


def test_resume_with_prefetch_equals_uninterrupted(tmp_path: Path) -> None:
    torch.manual_seed(0)
    straight = make(tmp_path / "a", Regression(dropout=0.2), steps=8, prefetch=0, schedule="constant")
    straight.fit()
    torch.manual_seed(0)
    make(tmp_path / "b", Regression(dropout=0.2), steps=4, prefetch=4, checkpoint_every=2, schedule="constant").fit()
    resumed = make(tmp_path / "b", Regression(dropout=0.2), steps=8, prefetch=4, schedule="constant")
    resumed.fit()
    assert resumed.objective.calls == 4
    assert_bitwise(weights(resumed.objective), weights(straight.objective))


class FailingObjective(Regression):
    def forward(self, batch: Any) -> StepOutput:
        if self.calls >= 2:
            raise KeyboardInterrupt
        return super().forward(batch)


def test_prefetch_thread_stops_on_interrupt(tmp_path: Path) -> None:
    import threading

    with pytest.raises(KeyboardInterrupt):
        make(tmp_path, FailingObjective(), steps=10, prefetch=2).fit()
    assert not [t for t in threading.enumerate() if t.name == "xfer-prefetch"]


class ProgressReader(Regression):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, int, float]] = []

    def set_progress(self, progress: trainer_module.TrainingProgress) -> None:
        self.seen.append((progress.step, progress.total_steps, progress.fraction))


def test_objective_reads_training_progress(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = ProgressReader()
    make(tmp_path, model, steps=4).fit()
    assert model.seen == [(0, 4, 0.0), (1, 4, 0.25), (2, 4, 0.5), (3, 4, 0.75)]
    assert len(model.seen) == model.calls  # called before every forward
    torch.manual_seed(0)
    # a run of 2 steps resumed as one of 4 (constant: a decaying schedule is refused another length)
    make(tmp_path / "r", ProgressReader(), steps=2, checkpoint_every=2, schedule="constant").fit()
    resumed = ProgressReader()
    make(tmp_path / "r", resumed, steps=4, schedule="constant").fit()
    assert resumed.seen == model.seen[2:], "resume restores progress from the step count"


class EndlessStream:
    """A minimal BatchSource without epochs."""

    steps_per_epoch = None

    def __init__(self) -> None:
        self.position = 0

    def next_step(self) -> list[Any]:
        self.position += 1
        return [collate(dataset(8))]

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.position = state["position"]


def test_any_batch_source_plugs_in(tmp_path: Path) -> None:
    cfg = TrainConfig(steps=3, batch_size=8, precision="fp32", eval_every=None, checkpoint_every=2)
    t = Trainer(cfg, Regression(), EndlessStream(), tmp_path, device=CPU, progress=False)
    assert t.fit().step == 3
    assert ckpt.load_state(ckpt.latest_checkpoint(tmp_path / "checkpoints"))["data"] == {"position": 3}
    with pytest.raises(UserError, match=r"EndlessStream has no epochs.*train\.steps must be set"):
        Trainer(TrainConfig(eval_every=None), Regression(), EndlessStream(), tmp_path, device=CPU)
    with pytest.raises(UserError, match="checkpoint_every cannot be 'epoch'"):
        Trainer(
            TrainConfig(steps=2, eval_every=None, checkpoint_every="epoch"),
            Regression(),
            EndlessStream(),
            tmp_path,
            device=CPU,
        )
    with pytest.raises(TypeError, match="list is not a BatchSource: missing next_step, state_dict"):
        Trainer(cfg, Regression(), [], tmp_path, device=CPU)  # type: ignore[arg-type]


def test_exported_weights_are_the_evaluated_ones(tmp_path: Path) -> None:
    torch.manual_seed(0)
    evaluator = ScriptedEvaluator([1.0, 3.0, 2.0])
    t = make(tmp_path, Regression(), evaluator=evaluator, steps=6, ema_decay=0.8, eval_every=2, checkpoint_every=2)
    t.fit()
    best = ckpt.read_pointer(tmp_path / "checkpoints" / "best")
    assert ckpt.load_state(best)["step"] == 4
    exported = Regression()
    trainer_module.load_evaluated_weights(best, exported)  # what finetune's model export uses
    assert torch.equal(exported.linear.weight, evaluator.weights[1]), "export differs from the evaluated model"
    t.load_weights("best")
    assert torch.equal(t.objective.linear.weight, evaluator.weights[1])


class Counting(Regression):
    """Reports a `tokens` count: examples in the micro-batch."""

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        out = super().forward(batch)
        return StepOutput(out.loss, {**out.metrics, "tokens": torch.tensor(float(batch[0].shape[0]))})


@pytest.mark.parametrize("accumulation", [1, 2])
def test_token_counts_are_summed_and_give_tokens_per_second(tmp_path: Path, accumulation: int) -> None:
    events = Events()
    t = make(tmp_path, Counting(), events=events, steps=4, log_every=2, accumulation=accumulation)
    t.fit()
    for logged in events.split("train").values():
        assert logged["tokens"] == pytest.approx(8.0), "a count per optimizer step, not a per-micro-batch mean"
        assert logged["tokens_per_s"] == pytest.approx(8.0 * logged["steps_per_s"])


# --- review fixes: NaN scores, fractional epochs, `auto` precision on GPUs --------------------------


@pytest.mark.parametrize("greater", [True, False])
def test_a_nan_evaluation_is_never_the_best(tmp_path: Path, greater: bool) -> None:
    """A first evaluation scoring NaN must not pin `best` to step 1 (NaN compares False with
    everything, so nothing would ever beat it and `select: best` would keep a barely trained model)."""
    scores = [float("nan"), 0.5, 0.9, float("nan")]
    t = make(tmp_path, evaluator=ScriptedEvaluator(scores, greater_is_better=greater), steps=4, eval_every=1)
    result = t.fit()
    assert result.best_metric == (0.9 if greater else 0.5)
    assert result.best_checkpoint == tmp_path / "checkpoints" / f"step-{3 if greater else 2:07d}"


def test_a_nan_best_stored_by_an_older_run_is_beaten_on_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # constant: a 2-step run resumed by a 3-step one keeps its schedule (a linear one is refused)
    make(tmp_path, steps=2, checkpoint_every=2, schedule="constant").fit()
    real_load_state = ckpt.load_state  # a checkpoint written before NaN scores were refused
    monkeypatch.setattr(ckpt, "load_state", lambda path: {**real_load_state(path), "best_metric": float("nan")})
    result = make(tmp_path, evaluator=ScriptedEvaluator([0.1]), steps=3, eval_every=3, schedule="constant").fit()
    assert result.resumed_from == 2
    assert result.best_metric == 0.1 and result.best_checkpoint == tmp_path / "checkpoints" / "step-0000003"


def test_fractional_epochs_are_not_rounded_up_by_float_noise(tmp_path: Path) -> None:
    """1.1 epochs of 50 steps is 55 steps; the binary product 55.00000000000001 must not make it 56."""
    assert make(tmp_path, n=400, epochs=1.1).total_steps == 55  # 400 examples / batch 8 = 50 steps per epoch
    assert make(tmp_path, n=200, epochs=2.2).total_steps == 55
    assert make(tmp_path, n=40, epochs=0.5).total_steps == 3, "a partial step still counts"
    assert make(tmp_path, n=40, epochs=1e-6).total_steps == 1


def test_auto_precision_does_not_pick_emulated_bf16_on_older_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """A T4/V100 emulates bf16 (slower than fp32): `torch.cuda.is_bf16_supported()` says yes by default,
    `auto` must ask for native support only."""

    def is_bf16_supported(including_emulation: bool = True) -> bool:  # a pre-Ampere GPU
        return including_emulation

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    assert resolve_precision("auto", torch.device("cuda")) is None
    assert resolve_precision("bf16", torch.device("cuda")) is torch.bfloat16, "asked for explicitly: honoured"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)  # Ampere+
    assert resolve_precision("auto", torch.device("cuda")) is torch.bfloat16

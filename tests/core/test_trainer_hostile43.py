"""The shared trainer attacked as a plugin author would (review 43): a one-step stage with a warmup,
numpy metrics, and clipping under gradient accumulation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from xfer.core.errors import PluginError, TrainingDiverged, UserError
from xfer.core.trainer import StepOutput

from .test_trainer import Events, Regression, make, weights


def _trained(tmp_path: Path, **config: object) -> bool:
    """Whether a fit with `config` changed any weight of the regression."""
    torch.manual_seed(0)
    objective = Regression()
    before = weights(objective)
    make(tmp_path, objective, **config).fit()
    return any(not torch.equal(before[k], v) for k, v in weights(objective).items())


@pytest.mark.parametrize("schedule", ["linear", "warmup_on_decay", "constant_warmup", "inverse_sqrt_t"])
def test_one_step_with_a_warmup_is_refused_as_it_would_train_at_lr_0(tmp_path: Path, schedule: str) -> None:
    """A warmup starts at lr 0, so `steps: 1` with `warmup_steps: 1` (allowed: at most train.steps) trained its
    only step at lr 0: the stage completed with its initial weights, silently."""
    with pytest.raises(UserError, match=r"train\.warmup_steps 1 with 1 training step: .* change no weight"):
        make(tmp_path / "steps", steps=1, warmup_steps=1, schedule=schedule)
    # the same from a warmup_fraction rounded up to the one step (a tiny data set at `epochs: 1`)
    with pytest.raises(UserError, match=r"train\.warmup_fraction 0\.5 \(rounded to 1 warmup step\)"):
        make(tmp_path / "fraction", steps=1, warmup_fraction=0.5, schedule=schedule)


def test_what_still_trains_or_says_lr_0_on_purpose_is_not_refused(tmp_path: Path) -> None:
    assert _trained(tmp_path / "no-warmup", steps=1, warmup_steps=0)
    assert _trained(tmp_path / "constant", steps=1, warmup_steps=1, schedule="constant")  # no warmup there
    assert _trained(tmp_path / "two", steps=2, warmup_steps=2)  # the second step trains at half the lr
    assert not _trained(tmp_path / "lr0", steps=1, warmup_steps=1, lr=0.0)  # asked for


class NumpyMetrics(Regression):
    """Metrics computed with numpy, as a plugin author may: `np.all(...)` is a numpy bool, and a reduction
    with `keepdims` or `np.asarray` of a number is an array of one number."""

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        out = super().forward(batch)
        metrics = {"finite": np.all(np.isfinite(batch[1].numpy())), "half": np.asarray(0.5), "one": np.ones(1)}
        return StepOutput(out.loss, {**out.metrics, **metrics})


def test_numpy_bools_and_one_number_arrays_are_metrics_like_numbers(tmp_path: Path) -> None:
    """A numpy bool was refused as "of type bool, expected a scalar tensor or number" (numpy 2 calls it
    `bool`), while a Python bool is taken; one-number arrays, taken as numbers in dev results, were refused."""
    events = Events()
    make(tmp_path, NumpyMetrics(), steps=2, log_every=2, events=events).fit()
    logged = events.split("train")[2]
    assert (logged["finite"], logged["half"], logged["one"]) == (1.0, 0.5, 1.0)


class ArrayMetric(Regression):
    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        return StepOutput(super().forward(batch).loss, {"per_example": np.zeros(3)})


def test_a_metric_of_several_numbers_is_refused_naming_its_qualified_type(tmp_path: Path) -> None:
    with pytest.raises(PluginError, match=r"returned metric 'per_example' of type numpy\.ndarray, expected a scalar"):
        make(tmp_path, ArrayMetric(), steps=1).fit()


def test_clipping_under_accumulation_clips_the_summed_gradient(tmp_path: Path) -> None:
    """A guard (already right): clipping each micro-batch's gradient instead of their sum would change
    SGD's update and the logged grad_norm with the accumulation count."""
    results = []
    for accumulation in (1, 4):
        events = Events()
        torch.manual_seed(0)
        trainer = make(
            tmp_path / str(accumulation),
            batch_size=16,
            accumulation=accumulation,
            steps=3,
            log_every=1,
            events=events,
            optimizer="sgd",
            clip_norm=0.5,
            lr=0.1,
        )
        trainer.fit()
        results.append((weights(trainer.objective), [m["grad_norm"] for m in events.split("train").values()]))
    (w1, norms1), (w4, norms4) = results
    assert all(n > 0.5 for n in norms1), norms1  # the clip acts in every step
    assert norms1 == pytest.approx(norms4, rel=1e-5)
    for name in w1:
        torch.testing.assert_close(w1[name], w4[name], rtol=0, atol=1e-6)


class SometimesMeasured(Regression):
    """Returns `rare` (always 8.0 where given) in every other micro-batch only, as a multi-task objective
    returns one task's accuracy in that task's batches."""

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        out = super().forward(batch)
        extra = {"rare": torch.tensor(8.0)} if self.calls % 2 else {}
        return StepOutput(out.loss, {**out.metrics, **extra})


@pytest.mark.parametrize("accumulation", [1, 2])
def test_a_metric_given_in_some_micro_batches_only_is_said_to_be_logged_diluted(
    tmp_path: Path, accumulation: int
) -> None:
    """It is averaged over every micro-batch of the window (a missing one counts 0), so it was logged at half
    its value here, without a word; the warning names the metric, the counts and the weight that fixes it,
    once per metric however many windows it spans."""
    events = Events()
    with pytest.warns(UserWarning) as said:
        make(
            tmp_path, SometimesMeasured(), steps=8, log_every=2, events=events, accumulation=accumulation, batch_size=8
        ).fit()
    assert [m["rare"] for m in events.split("train").values()] == [4.0] * 4  # what the warning explains
    diluted = [str(w.message) for w in said if "micro-batches trained before the log" in str(w.message)]
    assert len(diluted) == 1, diluted
    total = 2 * accumulation
    assert (
        f"returned metric 'rare' in {total // 2} of the {total} micro-batches trained before the log at step 2"
        in (diluted[0])
    )
    assert "'rare@weight'" in diluted[0]


def test_metrics_given_in_every_micro_batch_are_not_said_to_be_diluted(
    tmp_path: Path, recwarn: pytest.WarningsRecorder
) -> None:
    make(tmp_path, steps=4, log_every=2, accumulation=2, batch_size=8).fit()
    assert not [w for w in recwarn if "micro-batches" in str(w.message)]


class BadAtCall(Regression):
    """Its loss (or, with `gradient`, only its gradient) is NaN at forward call `at` only."""

    def __init__(self, at: int, gradient: bool = False):
        super().__init__()
        self.at, self.gradient = at, gradient

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        out = super().forward(batch)
        if self.calls != self.at:
            return out
        if self.gradient:  # sqrt at 0: a finite loss (+0) whose gradient is inf * 0 = NaN
            zero = (self.linear.weight - self.linear.weight.detach()).abs().sum()
            return StepOutput(out.loss + torch.sqrt(zero), out.metrics)
        return StepOutput(out.loss * float("nan"), out.metrics)


@pytest.mark.parametrize(
    ("objective", "config", "said"),
    [
        (lambda: BadAtCall(3), {}, "The loss was first NaN/inf at step 3."),
        (lambda: BadAtCall(3), {"clip_norm": None}, "The loss was first NaN/inf at step 3."),
        (lambda: BadAtCall(5, gradient=True), {}, "The gradient norm was first NaN/inf at step 5."),
        (lambda: BadAtCall(6), {"accumulation": 2, "batch_size": 8}, "The loss was first NaN/inf at step 3."),
    ],
)
def test_a_loss_nan_in_one_step_only_is_named_with_its_step(
    tmp_path: Path, objective: Callable[[], Regression], config: dict[str, object], said: str
) -> None:
    """The check runs at log boundaries only, so the error named the window (steps 1 to 8) and left the user
    to find the one bad batch; it now names the first step whose loss or gradient norm was NaN/inf."""
    with pytest.raises(TrainingDiverged) as stopped:
        make(tmp_path, objective(), steps=8, log_every=8, **config).fit()
    message = str(stopped.value)
    assert "between step 1 and step 8; no checkpoint had been written yet." in message
    assert said in message, message


def test_a_resume_names_the_first_bad_step_among_those_trained_since(tmp_path: Path) -> None:
    """The steps traced are those since the resume: the window's first four were trained by another process."""
    make(tmp_path, steps=4, log_every=8, checkpoint_every=4, schedule="constant").fit()
    with pytest.raises(TrainingDiverged) as stopped:  # continued to 8 steps (the lr is the same), NaN at its 2nd step
        make(tmp_path, BadAtCall(2), steps=8, log_every=8, checkpoint_every=4, schedule="constant").fit()
    assert "between step 5 and step 8;" in str(stopped.value) and "The loss was first NaN/inf at step 6." in str(
        stopped.value
    )

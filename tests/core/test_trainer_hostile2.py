"""Hostile checks of the shared trainer's features (second round): metrics an objective returns that
alias its own state or take the trainer's names, objectives with nothing to train, what a divergence
names, warmup under the constant schedule, layer decay that reaches no parameter, and dev results
as tensors. Complements test_trainer.py and test_trainer_hostile.py."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from xfer.core import checkpoint as ckpt
from xfer.core.config import FieldError
from xfer.core.errors import PluginError, TrainingDiverged, UserError
from xfer.core.trainer import StepOutput, TrainConfig

from .test_trainer import Events, NanGradientAt, Regression, make


class InPlaceCounter(Regression):
    """Logs its own float buffer, updated in place at every forward (1, 2, 3, ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        out = super().forward(batch)
        self.seen += 1
        return StepOutput(out.loss, {**out.metrics, "seen": self.seen})


@pytest.mark.parametrize("log_every", [2, 3])
def test_a_metric_updated_in_place_by_the_objective_is_averaged_as_it_was(tmp_path: Path, log_every: int) -> None:
    """The first value of a log window started the sum as the objective's own tensor (`.float()` of a
    float32 tensor is no copy): the next forward's in-place update rewrote it, so the log said 2.0 for
    steps 1-2 (values 1 and 2) and 4.0 for steps 3-4."""
    events = Events()
    torch.manual_seed(0)
    make(tmp_path, InPlaceCounter(), events=events, steps=6, log_every=log_every).fit()
    logged = {step: metrics["seen"] for step, metrics in events.split("train").items()}
    expected = {end: sum(range(end - log_every + 1, end + 1)) / log_every for end in range(log_every, 7, log_every)}
    assert logged == expected


class NamedMetric(Regression):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        out = super().forward(batch)
        return StepOutput(out.loss, {**out.metrics, self.name: torch.tensor(1000.0)})


@pytest.mark.parametrize("name", ["loss", "grad_norm", "lr", "epoch", "steps_per_s", "tokens_per_s"])
def test_a_metric_named_like_the_trainers_own_is_refused(tmp_path: Path, name: str) -> None:
    """A metric `loss` replaced the loss minimised (in the log and in the NaN check), `grad_norm` was
    added to the clipped gradient's norm (1013 logged for 13), and `lr`, `epoch`, `steps_per_s`,
    `tokens_per_s` were overwritten by the trainer's values: each silently."""
    events = Events()
    with pytest.raises(
        PluginError, match=rf"NamedMetric: forward\(batch\) returned metric '{name}', a name the trainer"
    ):
        make(tmp_path, NamedMetric(name), events=events, steps=2, log_every=1).fit()
    assert events.logs == [], "refused before anything was logged"


class LoggedScale(Regression):
    """A trainable scalar in the loss, logged as it was in the forward (`.detach()` shares its storage)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(()))
        self.seen: list[float] = []

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        out = super().forward(batch)
        self.seen.append(self.scale.item())
        return StepOutput(out.loss * self.scale, {"scale": self.scale.detach()})


def test_a_logged_parameter_is_its_value_in_the_step_not_after_the_update(tmp_path: Path) -> None:
    """With `log_every: 1` the sum was the parameter itself, read after the optimizer had moved it."""
    events = Events()
    torch.manual_seed(0)
    objective = LoggedScale()
    make(tmp_path, objective, events=events, steps=3, log_every=1).fit()
    assert objective.scale.item() != objective.seen[-1], "the optimizer moves it"
    assert [metrics["scale"] for metrics in events.split("train").values()] == objective.seen


def test_an_objective_without_trainable_parameters_is_named(tmp_path: Path) -> None:
    """Every parameter frozen: torch's bare "optimizer got an empty parameter list" ValueError."""
    objective = Regression().requires_grad_(False)
    with pytest.raises(PluginError, match=r"objective class .*Regression has no trainable parameters"):
        make(tmp_path, objective, steps=2)


@pytest.mark.parametrize(
    ("objective", "clip_norm", "what"),
    [
        ("nan_loss", 1.0, "the loss and the gradient norm (grad_norm, before clipping to train.clip_norm 1.0)"),
        ("nan_gradient", 1.0, "the gradient norm (grad_norm, before clipping to train.clip_norm 1.0)"),
        ("nan_gradient", None, "the weights (through their gradient; train.clip_norm is null"),
    ],
)
def test_divergence_names_what_became_nan(tmp_path: Path, objective: str, clip_norm: float | None, what: str) -> None:
    """ "The loss or gradient became NaN/inf" did not say which: a finite loss with a NaN gradient (the
    optimisation) read the same as a NaN loss (the objective)."""
    # the NaN gradient at the window's last step: the weights it breaks compute no loss before the check
    model = Regression(nan_from=6) if objective == "nan_loss" else NanGradientAt(8)
    settings = {"steps": 12, "log_every": 4, "checkpoint_every": 4, "clip_norm": clip_norm}
    with pytest.raises(TrainingDiverged) as info:
        make(tmp_path, model, **settings).fit()
    message = str(info.value)
    assert message.startswith(f"training stopped: {what}"), message
    assert "became NaN/inf between step 5 and step 8; last good checkpoint:" in message
    if objective == "nan_gradient":
        assert "the loss" not in message, "the loss stayed finite"


def test_a_warmup_longer_than_training_is_no_problem_for_the_constant_schedule(tmp_path: Path) -> None:
    """`constant` ignores warmup (`constant_warmup` is the one with it), yet a stage default's warmup_steps
    above `train.steps` was refused, recipe and trainer alike, as a learning rate that "would never reach
    train.lr": a false reason, for a run whose lr is train.lr from its first step."""
    TrainConfig(steps=4, warmup_steps=10, schedule="constant").check_recipe()
    with pytest.raises(FieldError, match=r"10 is more than train\.steps"):
        TrainConfig(steps=4, warmup_steps=10, schedule="constant_warmup").check_recipe()
    events = Events()
    make(tmp_path, events=events, steps=4, warmup_steps=10, schedule="constant", log_every=1).fit()
    assert [metrics["lr"] for metrics in events.split("train").values()] == [0.05] * 4
    with pytest.raises(UserError, match=r"train\.warmup_steps 10 is more than the 4 steps"):
        make(tmp_path / "linear", steps=4, warmup_steps=10, schedule="linear")


class Layered(torch.nn.Module):
    """A two-layer stack reporting depths for names `layers.<i>.*`, or for none when `known` is False."""

    num_layers = 2

    def __init__(self, known: bool) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)])
        self.known = known

    def parameter_depth(self, name: str) -> int | None:
        if self.known and name.startswith("layers."):
            return int(name.split(".")[1]) + 1
        return None  # e.g. a plugin encoder whose blocks are not called `layers`


class LayeredRegression(Regression):
    def __init__(self, known: bool) -> None:
        super().__init__()
        self.encoder = Layered(known)

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        x, y = batch
        return super().forward((self.encoder.layers[1](self.encoder.layers[0](x)), y))


@pytest.mark.parametrize(
    ("objective", "warned"),
    [
        (Regression, True),
        (lambda: LayeredRegression(known=False), True),
        (lambda: LayeredRegression(known=True), False),
    ],
    ids=["no-layered-module", "depths-for-no-name", "layered"],
)
def test_a_layer_decay_that_reaches_no_parameter_is_said(tmp_path: Path, objective: object, warned: bool) -> None:
    """`layer_decay: 0.8` on a model without parameter depths trained everything at train.lr, silently."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = make(tmp_path, objective(), steps=1, layer_decay=0.5)  # type: ignore[operator]
    said = [str(w.message) for w in caught if "train.layer_decay 0.5 has no effect" in str(w.message)]
    assert len(said) == int(warned), said
    if warned:
        assert "objective class " in said[0] and "every parameter trains at train.lr" in said[0]
    else:
        assert min(g["lr_scale"] for g in trainer.optimizer.param_groups) == 0.5**2  # layer 0: depth 1 of 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make(tmp_path / "off", objective(), steps=1, layer_decay=1.0)  # type: ignore[operator]
    assert not [w for w in caught if "layer_decay" in str(w.message)], "1.0 is off: nothing to say"


class TensorEvaluator:
    """Scores as tensors, as an evaluator computing `(predicted == gold).float().mean()` does."""

    main_metric, greater_is_better = "accuracy", True

    def __init__(self, other: object) -> None:
        self.other = other

    def __call__(self, model: torch.nn.Module) -> dict[str, object]:
        return {"accuracy": torch.tensor(50.0), "other": self.other}


@pytest.mark.parametrize("other", [torch.tensor(2.0), torch.tensor([2.0]), np.array(2.0), np.float64(2.0)])
def test_dev_results_of_one_number_tensors_are_numbers(tmp_path: Path, other: object) -> None:
    """A tensor beside the main metric was a bare `TypeError: Object of type Tensor is not JSON
    serializable` from the checkpoint written after the evaluation (a whole epoch in)."""
    events = Events()
    result = make(tmp_path, evaluator=TensorEvaluator(other), events=events, steps=2, eval_every=1).fit()
    assert result.best_metric == 50.0 and type(result.best_metric) is float
    assert events.split("dev")[2] == {"accuracy": 50.0, "other": 2.0}
    assert all(type(v) is float for v in events.split("dev")[2].values())
    assert ckpt.load_state(result.last_checkpoint)["last_eval"] == {"accuracy": 50.0, "other": 2.0}


def test_dev_results_json_cannot_hold_are_refused_naming_the_evaluator(tmp_path: Path) -> None:
    trainer = make(tmp_path, evaluator=TensorEvaluator(torch.tensor([1.0, 2.0])), steps=3, eval_every=2)
    with pytest.raises(PluginError) as info:
        trainer.fit()
    assert str(info.value).startswith(
        f"evaluator {__name__}.TensorEvaluator returned a Tensor of shape (2,) as 'other' at step 2: dev results "
        "are written to state.json and metrics.jsonl"
    )
    assert ckpt.latest_checkpoint(tmp_path / "checkpoints") is None, "refused before the checkpoint"


def test_bf16_asked_on_a_cpu_that_only_emulates_it_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    """`precision: bf16` on an AVX2-only CPU ran emulated, ~5x slower than fp32, without a word."""
    import warnings

    from xfer.core import trainer as trainer_module

    monkeypatch.setattr(trainer_module, "_cpu_has_fast_bf16", lambda: False)
    with pytest.warns(
        UserWarning, match=r"precision bf16 on a CPU without native bf16 .* `precision: auto` picks fp32"
    ):
        assert trainer_module.resolve_precision("bf16", torch.device("cpu")) is torch.bfloat16
    assert trainer_module.resolve_precision("auto", torch.device("cpu")) is None
    monkeypatch.setattr(trainer_module, "_cpu_has_fast_bf16", lambda: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert trainer_module.resolve_precision("bf16", torch.device("cpu")) is torch.bfloat16

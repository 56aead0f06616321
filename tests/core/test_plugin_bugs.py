"""Bugs in a third-party objective or stage are reported as such: a clean `UserError` that names the
component and the distribution that provides it, never a bare PyTorch or runner traceback; and the
lifecycle hooks tell the training runs of one stage apart (`tags`)."""

# no `from __future__ import annotations`: the recipe validator reads the config classes' real types
import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from xfer.core import cli
from xfer.core.config import knob
from xfer.core.data import BatchStream
from xfer.core.errors import PluginError, TrainingDiverged, UserError
from xfer.core.hookspecs import hookimpl
from xfer.core.plugins import PluginHost, set_default_host
from xfer.core.specs import ComponentSpec
from xfer.core.stage import StageContext
from xfer.core.trainer import StepOutput, TrainConfig, Trainer
from xfer.testing import make_host, run_recipe_file, write_recipe

CPU = torch.device("cpu")


def dataset(n: int = 32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(n, 4, generator=gen)
    return list(zip(x, x.sum(-1), strict=True))


def collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.stack([x for x, _ in items]), torch.stack([y for _, y in items])


class Good(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)

    def losses(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return (self.linear(x).squeeze(-1) - y) ** 2

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        loss = self.losses(batch).mean()
        return StepOutput(loss, {"mse": loss.detach()})


class NoGrad(Good):
    def forward(self, batch: Any) -> StepOutput:
        return StepOutput(self.losses(batch).mean().detach(), {})


class PerExample(Good):
    def forward(self, batch: Any) -> StepOutput:
        return StepOutput(self.losses(batch), {})


class PlainTuple(Good):
    def forward(self, batch: Any) -> Any:
        out = super().forward(batch)
        return out.loss, out.metrics


class IntegerLoss(Good):
    def forward(self, batch: Any) -> StepOutput:
        return StepOutput(torch.tensor(3), {})


class VectorMetric(Good):
    def forward(self, batch: Any) -> StepOutput:
        losses = self.losses(batch)
        return StepOutput(losses.mean(), {"per_example": losses.detach()})


class NanFrom(Good):
    """Its loss is NaN from the `start`-th forward on (1: from the very first step)."""

    def __init__(self, start: int) -> None:
        super().__init__()
        self.start, self.calls = start, 0

    def forward(self, batch: Any) -> StepOutput:
        self.calls += 1
        out = super().forward(batch)
        return StepOutput(out.loss * float("nan"), out.metrics) if self.calls >= self.start else out


class ObjectivePlugin:
    """Registers the broken objectives above, as a third-party plugin would."""

    @hookimpl
    def xfer_objectives(self) -> list[ComponentSpec]:
        return [
            ComponentSpec("objective", f"probe.{cls.__name__.lower()}", f"{__name__}:{cls.__name__}", "1")
            for cls in (NoGrad, PerExample, PlainTuple, NanFrom)
        ]


class HostEvents:
    """Trainer events that only carry a plugin host (as `xfer.core.stage.RunLog` does)."""

    def __init__(self, host: PluginHost | None) -> None:
        self.host = host

    def log(self, step: int, split: str, metrics: dict[str, float]) -> None: ...

    def checkpoint_saved(self, step: int, path: Path) -> None: ...

    def resumed(self, step: int) -> None: ...


def make(workdir: Path, objective: nn.Module, host: PluginHost | None = None, **config: Any) -> Trainer:
    settings: dict[str, Any] = {
        "steps": 4,
        "batch_size": 8,
        "lr": 0.01,
        "precision": "fp32",
        "log_every": 2,
        "checkpoint_every": 1000,
        "eval_every": None,
    }
    cfg = TrainConfig(**{**settings, **config})
    stream = BatchStream(dataset(), cfg.batch_size, collate, seed=1, accumulation=cfg.grad_accum)
    return Trainer(cfg, objective, stream, workdir, device=CPU, events=HostEvents(host), progress=False)


def probe_host() -> PluginHost:
    host = make_host()
    host.add_object(ObjectivePlugin(), "probe")
    return host


# --- what forward(batch) returns ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        (NoGrad, "returned a loss that does not require grad"),
        (PerExample, r"returned a loss of shape \(8,\), expected a floating-point tensor of one number .*\.mean\(\)"),
        (PlainTuple, r"returned tuple, expected xfer\.core\.trainer\.StepOutput\(loss, metrics\); wrap them"),
    ],
)
def test_a_broken_objective_is_named_with_its_provider_instead_of_a_torch_traceback(
    tmp_path: Path, cls: type, expected: str
) -> None:
    torch.manual_seed(0)
    objective = cls()
    before = objective.linear.weight.detach().clone()
    trainer = make(tmp_path, objective, probe_host())
    with pytest.raises(PluginError, match=expected) as info:
        trainer.fit()
    message = str(info.value)
    name = f"probe.{cls.__name__.lower()}"
    provider = probe_host().get("objective", name).provider
    assert "probe" in provider
    assert message.startswith(f"objective {name!r} from {provider} (class {__name__}.{cls.__name__}):")
    assert "forward(batch)" in message
    assert isinstance(info.value, UserError) and info.value.__cause__ is None
    assert torch.equal(objective.linear.weight, before), "refused at the first step, before any update"


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        (IntegerLoss, r"returned a loss of dtype torch\.int64"),
        (VectorMetric, r"returned metric 'per_example' of shape \(8,\), expected a scalar"),
    ],
)
def test_an_unregistered_objective_is_named_by_its_class(tmp_path: Path, cls: type, expected: str) -> None:
    trainer = make(tmp_path, cls(), probe_host())
    with pytest.raises(PluginError, match=expected) as info:
        trainer.fit()
    assert str(info.value).startswith(f"objective class {__name__}.{cls.__name__}: forward(batch) ")


def test_a_registered_base_class_names_the_component_of_a_subclass(tmp_path: Path) -> None:
    class Derived(NoGrad):
        pass

    host = probe_host()
    with pytest.raises(PluginError) as info:
        make(tmp_path, Derived(), host).fit()
    provider = host.get("objective", "probe.nograd").provider
    assert str(info.value).startswith(f"objective 'probe.nograd' from {provider} (class {__name__}.")
    assert "Derived)" in str(info.value)


def test_a_good_objective_passes_the_checks_with_accumulation(tmp_path: Path) -> None:
    result = make(tmp_path, Good(), probe_host(), grad_accum=2).fit()
    assert result.step == 4


class OneElement(Good):
    """A loss (and a metric) of shape (1,): one number, which `backward()` accepts."""

    def forward(self, batch: Any) -> StepOutput:
        out = super().forward(batch)
        return StepOutput(out.loss.reshape(1), {"mse": out.metrics["mse"].reshape(1), "n": 8})


class OneElementNan(OneElement):
    def forward(self, batch: Any) -> StepOutput:
        out = super().forward(batch)
        return StepOutput(out.loss * float("nan"), out.metrics)


class LoggedEvents(HostEvents):
    def __init__(self) -> None:
        super().__init__(None)
        self.logged: list[tuple[int, str, dict[str, float]]] = []

    def log(self, step: int, split: str, metrics: dict[str, float]) -> None:
        self.logged.append((step, split, metrics))


@pytest.mark.parametrize("grad_accum", [1, 2])
def test_a_loss_of_shape_one_trains_like_a_0_dim_loss(tmp_path: Path, grad_accum: int) -> None:
    runs = {}
    for cls in (Good, OneElement):
        torch.manual_seed(0)
        objective = cls()
        trainer = make(tmp_path / cls.__name__, objective, None, grad_accum=grad_accum, clip_norm=1.0)
        events = trainer.events = LoggedEvents()
        assert trainer.fit().step == 4
        train = [metrics for _, split, metrics in events.logged if split == "train"]
        runs[cls] = (objective.linear.weight.detach().clone(), train)
    (good_weight, good_logs), (one_weight, one_logs) = runs[Good], runs[OneElement]
    assert torch.allclose(good_weight, one_weight), "the same updates"
    assert len(one_logs) == 2 and all(isinstance(m["loss"], float) and isinstance(m["mse"], float) for m in one_logs)
    for good, one in zip(good_logs, one_logs, strict=True):
        assert one["loss"] == pytest.approx(good["loss"]) and one["mse"] == pytest.approx(good["mse"])


def test_a_loss_of_shape_one_that_is_nan_at_the_first_step_is_still_caught(tmp_path: Path) -> None:
    with pytest.raises(TrainingDiverged, match="already NaN/inf at the first step"):
        make(tmp_path, OneElementNan(), None, grad_accum=2).fit()


def test_a_loss_of_more_than_one_number_is_still_refused(tmp_path: Path) -> None:
    class TwoElements(Good):
        def forward(self, batch: Any) -> StepOutput:
            return StepOutput(self.losses(batch)[:2].reshape(2, 1), {})

    with pytest.raises(PluginError, match=r"returned a loss of shape \(2, 1\), expected a floating-point tensor"):
        make(tmp_path, TwoElements()).fit()


# --- NaN ------------------------------------------------------------------------------------------------


def test_a_loss_nan_at_the_first_step_is_the_objectives_bug_not_the_learning_rates(tmp_path: Path) -> None:
    trainer = make(tmp_path, NanFrom(1), probe_host(), log_every=3)
    with pytest.raises(TrainingDiverged) as info:
        trainer.fit()
    message = str(info.value)
    assert "the loss was already NaN/inf at the first step, before any update" in message
    provider = probe_host().get("objective", "probe.nanfrom").provider
    assert f"objective 'probe.nanfrom' from {provider} (class {__name__}.NanFrom)" in message
    assert "a bug in the objective" in message
    assert "Lower the learning rate" not in message
    assert "between step 1 and step 3; no checkpoint had been written yet" in message
    assert info.value.exit_code == 1


@pytest.mark.parametrize("grad_accum", [1, 2])
def test_a_loss_that_turns_nan_later_keeps_the_optimisation_advice(tmp_path: Path, grad_accum: int) -> None:
    # with accumulation, the 2nd forward is still the first step: NaN there is a first-step NaN
    trainer = make(tmp_path, NanFrom(3), probe_host(), grad_accum=grad_accum)
    with pytest.raises(TrainingDiverged) as info:
        trainer.fit()
    message = str(info.value)
    assert "Lower the learning rate, enable clipping, or use fp32." in message
    assert "first step" not in message and "objective" not in message
    first_step = make(tmp_path / "accumulated", NanFrom(2), probe_host(), grad_accum=2)
    with pytest.raises(TrainingDiverged, match="already NaN/inf at the first step"):
        first_step.fit()


# --- stages ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class ProbeConfig:
    trials: int = knob(2, "Training runs.", ge=1)
    write: bool = knob(False, "Write the declared output.")


def run_forgetful(ctx: StageContext) -> None:
    """Declares `note` but never writes it (the tester's I1 case)."""
    ctx.report("wrote nothing")


def run_trials(ctx: StageContext) -> None:
    """Trains `trials` times on each of two tasks, as transformer.finetune does, then writes `note`."""
    for task in ("a/one", "b/two"):
        for trial in range(ctx.config.trials):
            cfg = TrainConfig(steps=2, batch_size=8, lr=0.01, precision="fp32", log_every=2, checkpoint_every=2)
            stream = BatchStream(dataset(), cfg.batch_size, collate, seed=trial)
            workdir = ctx.dir / task.replace("/", "-") / f"trial-{trial}"
            Trainer(cfg, Good(), stream, workdir, device=ctx.device, events=ctx.events(task=task, trial=trial)).fit()
    ctx.output_dir("note")


class StagePlugin:
    @hookimpl
    def xfer_stages(self) -> list[ComponentSpec]:
        return [
            ComponentSpec("stage", f"probe.{name}", f"{__name__}:run_{name}", "1", ProbeConfig, "x", outputs=("note",))
            for name in ("forgetful", "trials")
        ]


class TaggedRecorder:
    def __init__(self) -> None:
        self.metrics: list[tuple] = []
        self.checkpoints: list[tuple] = []

    @hookimpl
    def xfer_metrics_logged(self, stage: str, step: int, split: str, tags: dict[str, Any]) -> None:
        self.metrics.append((stage, step, split, tags))

    @hookimpl
    def xfer_checkpoint_saved(self, stage: str, step: int, tags: dict[str, Any]) -> None:
        self.checkpoints.append((stage, step, tags))


class UntaggedRecorder:
    """Written before the hooks had `tags`: still called."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def xfer_metrics_logged(self, run_dir: Path, stage: str, step: int, split: str, metrics: dict) -> None:
        self.calls.append("metrics")

    @hookimpl
    def xfer_checkpoint_saved(self, run_dir: Path, stage: str, step: int, path: Path) -> None:
        self.calls.append("checkpoint")


def stage_host(*observers: Any) -> PluginHost:
    host = make_host(["xfer.testing.plugin"])
    host.add_object(StagePlugin(), "probe")
    for index, observer in enumerate(observers):
        host.add_object(observer, f"observer{index}")
    return host


STAGE = """\
name: probe
seed: 1
stages:
  {name}: {{kind: probe.{name}}}
"""


def test_a_stage_that_does_not_write_a_declared_output_names_its_kind_and_provider(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = write_recipe(tmp_path, STAGE.format(name="forgetful"))
    provider = stage_host().get("stage", "probe.forgetful").provider
    assert "probe" in provider
    expected = (
        f"stage 'forgetful': stage kind 'probe.forgetful' from {provider} did not write its declared "
        "outputs ['note'] (plugin bug"
    )
    with pytest.raises(PluginError) as info:
        run_recipe_file(recipe, tmp_path / "run", stage_host())
    assert str(info.value).startswith(expected)
    state = json.loads((tmp_path / "run/forgetful/stage.json").read_text())
    assert state["status"] == "failed" and state["error"].startswith(expected)
    # through the CLI: one line and a non-zero exit, no traceback
    set_default_host(stage_host())
    try:
        code = cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "cli-run")])
    finally:
        set_default_host(None)
    err = capsys.readouterr().err
    assert code == 2
    assert f"error: {expected}" in err and "Traceback" not in err


def test_lifecycle_hooks_carry_the_task_and_trial_of_each_training_run(tmp_path: Path) -> None:
    tagged, untagged = TaggedRecorder(), UntaggedRecorder()
    recipe = write_recipe(tmp_path, STAGE.format(name="trials"))
    run_recipe_file(recipe, tmp_path / "run", stage_host(tagged, untagged))
    runs = [{"task": task, "trial": trial} for task in ("a/one", "b/two") for trial in (0, 1)]
    assert tagged.metrics == [("trials", 2, "train", tags) for tags in runs], "4 distinguishable events"
    assert tagged.checkpoints == [("trials", 2, tags) for tags in runs]
    assert untagged.calls == ["metrics", "checkpoint"] * 4, "an implementation without `tags` still runs"
    records = [json.loads(line) for line in (tmp_path / "run/trials/metrics.jsonl").read_text().splitlines()]
    assert [{"task": r["task"], "trial": r["trial"]} for r in records] == runs, "the same tags as metrics.jsonl"


def test_a_stage_that_trains_once_passes_empty_tags(tmp_path: Path) -> None:
    from .recipes import FIT

    tagged = TaggedRecorder()
    recipe = write_recipe(
        tmp_path, FIT.replace("steps: 24", "steps: 4").replace("checkpoint_every: 5", "checkpoint_every: 4")
    )
    host = make_host(["xfer.testing.plugin"])
    host.add_object(tagged, "observer")
    run_recipe_file(recipe, tmp_path / "run", host)
    assert tagged.metrics and {str(t) for *_, t in tagged.metrics} == {"{}"}
    assert [(s, step, t) for s, step, t in tagged.checkpoints] == [("fit", 4, {})]


def test_a_caller_written_before_tags_still_reaches_every_observer(tmp_path: Path) -> None:
    """A third-party stage with its own loop calls `host.notify` as yesterday's API had it, without
    `tags`: the observers get {} (pluggy alone refuses the call, and it became a warning)."""
    tagged, untagged = TaggedRecorder(), UntaggedRecorder()
    host = stage_host(tagged, untagged)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        host.notify("xfer_metrics_logged", run_dir=tmp_path, stage="own", step=3, split="train", metrics={"a": 1.0})
        host.notify("xfer_checkpoint_saved", run_dir=tmp_path, stage="own", step=3, path=tmp_path)
        host.notify("xfer_checkpoint_saved", run_dir=tmp_path, stage="own", step=4, path=tmp_path)
    assert tagged.metrics == [("own", 3, "train", {})]
    assert tagged.checkpoints == [("own", 3, {}), ("own", 4, {})]
    assert tagged.checkpoints[0][2] is not tagged.checkpoints[1][2], "a fresh {} per call"
    assert untagged.calls == ["metrics", "checkpoint", "checkpoint"]
    # tags the caller gives are passed as given; an argument without a default is still the caller's bug
    host.notify("xfer_checkpoint_saved", run_dir=tmp_path, stage="own", step=5, path=tmp_path, tags={"trial": 1})
    assert tagged.checkpoints[-1] == ("own", 5, {"trial": 1})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        host.notify("xfer_checkpoint_saved", run_dir=tmp_path, stage="own", step=6)
    assert any("xfer_checkpoint_saved failed in a hook wrapper" in str(w.message) for w in caught)
    assert len(tagged.checkpoints) == 3


# --- hookspec docs ----------------------------------------------------------------------------------


def test_every_xfer_name_the_hookspecs_document_exists() -> None:
    """The hookspecs are the plugin author's reference: a class or module they name must exist
    (`xfer_stages` named an `xfer.core.stage.Stage` class that never did: a stage is `run(ctx)`)."""
    import importlib
    import re

    from xfer.core import hookspecs

    texts = [hookspecs.__doc__ or ""] + [getattr(hookspecs, name).__doc__ or "" for name in hookspecs.HOOK_NAMES]
    names = sorted({m for text in texts for m in re.findall(r"\bxfer\.core(?:\.\w+)+", text)})
    assert "xfer.core.stage.StageContext" in names
    for dotted in names:
        module, _, attribute = dotted.rpartition(".")
        try:
            importlib.import_module(dotted)
        except ImportError:
            assert hasattr(importlib.import_module(module), attribute), f"{dotted} does not exist"
    assert "run(ctx" in (hookspecs.xfer_stages.__doc__ or "")

"""Hostile review of BAM with custom objectives and the student's training loop: defects found and fixed."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
from torch import Tensor

from xfer.bam.data import MixedCollate
from xfer.bam.model import HiddenStates
from xfer.bam.naming import module_name
from xfer.bam.objective import TASK_KINDS, DistillationObjective
from xfer.core.errors import UserError
from xfer.core.hookspecs import hookimpl
from xfer.core.recipes.recipe import load_recipe
from xfer.core.specs import ComponentSpec
from xfer.core.trainer import StepOutput
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.objectives import SequenceConfig, SequenceObjective, TaggingObjective

from .test_bam_hostile5 import _batch, _model

# --- an objective that changes its loss in forward() --------------------------------------------


class _Penalised(SequenceObjective):
    """A plugin objective that adds an auxiliary penalty in `forward` (not in `loss`)."""

    def forward(self, batch: dict[str, Tensor]) -> StepOutput:
        out = super().forward(batch)
        return StepOutput(out.loss + 10.0, out.metrics)


class _TwoPasses(SequenceObjective):
    """A forward that runs the encoder twice (BAM's shared encoder runs once per batch)."""

    def forward(self, batch: dict[str, Tensor]) -> StepOutput:
        return StepOutput(self.scores(batch).sum() + self.scores(batch).sum(), {})


def test_gold_only_training_uses_an_objectives_own_forward() -> None:
    """Teachers and Multi computed BAM's cross-entropy from `scores()` and never called the
    objective's `forward`: its penalty was silently dropped (the loss equalled the plain one)."""
    batch = _batch(_model(SequenceObjective))
    plain = DistillationObjective(_model(SequenceObjective).eval(), "none")(batch).loss  # same weights (seed 0)
    own = DistillationObjective(_model(_Penalised).eval(), "none")(batch).loss
    assert own.item() == pytest.approx(plain.item() + 10.0, rel=1e-5)
    assert own.requires_grad


def test_a_student_distilling_with_an_objectives_own_forward_is_refused() -> None:
    """The mixed target λ·gold + (1−λ)·teacher replaced the objective's forward without a word."""
    for schedule in ("linear", "constant"):
        with pytest.raises(UserError, match=r"toy/c: objective _Penalised overrides forward\(\)"):
            DistillationObjective(_model(_Penalised), schedule)


def test_an_own_forward_that_runs_the_encoder_twice_is_a_user_error() -> None:
    """Not HiddenStates' internal RuntimeError ("call the model, not the objective")."""
    model = _model(_TwoPasses)
    with pytest.raises(UserError, match=r"toy/c: objective _TwoPasses's forward\(\) runs the encoder more than once"):
        DistillationObjective(model, "none")(_batch(model))


def test_preflight_refuses_a_distilling_student_with_an_objective_that_has_its_own_forward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found only when the student started, after the teachers had trained."""
    import xfer.core.plugins as plugins

    text = """
stages:
  student:
    kind: bam.student
    objective: transformer.sequence
    tasks: [{name: toy/agreement}]
    teachers: teachers_dir
"""
    (tmp_path / "teachers_dir").mkdir()
    plan = load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))
    config = plan.stages["student"].config
    assert config._own_loss_problems() == []  # the built-in objective distils
    monkeypatch.setattr(plugins, "default_host", lambda: SimpleNamespace(load=lambda kind, name: _Penalised))
    [problem] = config._own_loss_problems()
    assert "objective: transformer.sequence overrides forward()" in str(problem)
    config.lambda_schedule = "none"
    assert config._own_loss_problems() == []


def test_own_forward_detection_on_classes() -> None:
    from xfer.bam.objective import has_own_forward, own_loss_method

    assert not has_own_forward(SequenceObjective) and not has_own_forward(TaggingObjective)
    assert own_loss_method(_Penalised) == "forward()"
    assert own_loss_method(SequenceObjective) is None


class _PenalisedTagging(TaggingObjective):
    def forward(self, batch: dict[str, Tensor]) -> StepOutput:
        out = super().forward(batch)
        return StepOutput(out.loss + 100.0, out.metrics)


def test_own_forwards_in_a_mixed_batch_read_their_own_rows() -> None:
    """Each part's forward runs on its rows of the one encoder pass: the mixed loss is the plain one
    plus each task's penalty weighted by its share of the batch (tagging and regression too)."""
    from .test_objective import _features, _infos, _tokenizer
    from .test_objective import _model as _plain_model

    tasks = ["toy/c", "toy/r", "toy/t"]
    plain = _plain_model(tasks).eval()
    own = _plain_model(tasks).eval()  # same seed: same encoder and heads
    infos = _infos()
    for task, cls in (("toy/c", _Penalised), ("toy/r", _Penalised), ("toy/t", _PenalisedTagging)):
        objective = cls(HiddenStates(own.encoder.config), infos[task], _tokenizer(), 16, None)
        objective.head.load_state_dict(plain.objective(task).head.state_dict())
        own.tasks[module_name(task)] = objective.eval()
    features = _features(plain)
    kinds = {t: TASK_KINDS[infos[t].type] for t in tasks}
    batch = MixedCollate({t: plain.objective(t) for t in tasks}, kinds, pad_id=0)(features)
    expected = DistillationObjective(plain, "none")(batch).loss.item()
    sizes = {t: len(features[t]) for t in tasks}
    penalty = (10.0 * (sizes["toy/c"] + sizes["toy/r"]) + 100.0 * sizes["toy/t"]) / sum(sizes.values())
    assert DistillationObjective(own, "none")(batch).loss.item() == pytest.approx(expected + penalty, rel=1e-5)


class _PenalisedObjectives:
    @staticmethod
    @hookimpl
    def xfer_objectives() -> list[ComponentSpec]:
        return [ComponentSpec("objective", "mine/penalised", f"{__name__}:_Penalised", "1", SequenceConfig)]


def test_a_teachers_stage_trains_with_a_plugin_objectives_own_forward(tmp_path: Path) -> None:
    """End to end through the trainer: the logged training loss carries the forward's +10 penalty
    (it was the plain cross-entropy, ~0.7: the objective's forward was never called)."""
    host = make_host(autoload=True)
    host.add_object(_PenalisedObjectives, "mine")
    text = """
name: own-forward
stages:
  corpus: {kind: toy.corpus, sentences: 60}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 150, min_frequency: 1}
  teachers:
    kind: bam.teachers
    tokenizer: vocab.tokenizer
    encoder: {num_layers: 1, hidden_size: 16, embedding_size: 16, intermediate_size: 32, num_heads: 2}
    objective: mine/penalised
    max_length: 16
    tasks: [{name: toy/agreement, train_size: 16, dev_size: 8}]
    train: {steps: 2, batch_size: 8, log_every: 1, checkpoint_every: 2, eval_every: null, precision: fp32}
"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # examples cut to max_length
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host)
    records = [json.loads(line) for line in (tmp_path / "run/teachers/metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if "loss" in r]
    assert losses and all(loss > 10.0 for loss in losses), records

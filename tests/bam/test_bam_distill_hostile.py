"""Hostile review of BAM distillation (student objective, teacher annealing, model): defects found and fixed."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn

from xfer.core.errors import UserError
from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.objectives import SequenceConfig, SequenceObjective

from .test_bam_hostile5 import _model

# --- an objective with weights outside its head ------------------------------------------------


class _LearntScale(SequenceObjective):
    """A plugin objective with a task-specific weight beside its head (a learnt logit scale)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.scale = nn.Parameter(torch.ones(()))

    def scores(self, batch: dict[str, Tensor]) -> Tensor:
        return super().scores(batch) * self.scale


class _LearntScaleObjectives:
    @staticmethod
    @hookimpl
    def xfer_objectives() -> list[ComponentSpec]:
        return [ComponentSpec("objective", "mine/scaled", f"{__name__}:_LearntScale", "1", SequenceConfig)]


def test_an_objective_with_weights_outside_its_head_is_refused_when_the_model_is_built() -> None:
    """BAM model dirs hold the encoder and one head per task: `save_bam_model` refused such an
    objective only at the export, after every trial had trained."""
    with pytest.raises(UserError, match=r"toy/c: objective _LearntScale has parameters outside its head \(scale"):
        _model(_LearntScale)
    assert _model(SequenceObjective).task_names == ["toy/c"]  # the built-in objectives keep their weights in `head`


def test_a_teachers_stage_with_such_an_objective_stops_before_training(tmp_path: Path) -> None:
    """End to end: no trial trains (before, both trials trained, then the export stopped the stage)."""
    host = make_host(autoload=True)
    host.add_object(_LearntScaleObjectives, "mine")
    text = """
name: scaled
stages:
  corpus: {kind: toy.corpus, sentences: 60}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 150, min_frequency: 1}
  teachers:
    kind: bam.teachers
    tokenizer: vocab.tokenizer
    encoder: {num_layers: 1, hidden_size: 16, embedding_size: 16, intermediate_size: 32, num_heads: 2}
    objective: mine/scaled
    max_length: 16
    trials: 2
    tasks: [{name: toy/agreement, train_size: 16, dev_size: 8}]
    train: {steps: 2, batch_size: 8, log_every: 1, checkpoint_every: 2, eval_every: null, precision: fp32}
"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # examples cut to max_length
        with pytest.raises(UserError, match="parameters outside its head"):
            run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host)
    assert not list((tmp_path / "run").rglob("done.json")), "no trial may train"


# --- a teacher of another task type ------------------------------------------------------------

RETYPED = """
name: retyped
stages:
  teachers:
    kind: bam.teachers
    tasks: [{name: glue/tsv, train: t.tsv, dev: t.tsv, text_a_column: text, label_column: score, labels: ["1.0", "4.0"]}]
  student:
    kind: bam.student
    init: teachers.init
    teachers: teachers.predictions
    tasks:
      - {name: glue/tsv, train: t.tsv, dev: t.tsv, text_a_column: text, label_column: score,
         type: STUDENT}
"""


def test_a_student_of_another_task_type_than_its_teacher_is_a_recipe_error(tmp_path: Path) -> None:
    """A regression student of a classification teacher (the same glue/tsv data, `type:` changed)
    validated, and the student stopped on "teacher predictions ... are for a classification task"
    only when it started, after the teachers had trained."""
    from xfer.core.errors import RecipeError
    from xfer.core.recipes.recipe import load_recipe

    (tmp_path / "t.tsv").write_text("text\tscore\na cat\t1.0\na dog\t4.0\n", encoding="utf-8")
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(tmp_path, RETYPED.replace("STUDENT", "regression")), host=make_host(autoload=True))
    [problem] = caught.value.diagnostics
    assert (problem.location.line, problem.location.col) == (13, 10), problem  # at `type:`
    assert problem.message == (
        "stages.student.tasks.0.type: regression here, but stage 'teachers' trains the teacher of 'glue/tsv' as a "
        "classification task: its outputs are not this task's (use the teachers' task entry here)"
    )
    text = RETYPED.replace("STUDENT", 'classification, labels: ["1.0", "4.0"]')
    load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))  # the teachers' type: valid


# --- an objective whose predict() runs the encoder twice ---------------------------------------


class _TwicePredicted(SequenceObjective):
    """predict() calls scores() twice (fine in transformer.finetune, where the encoder is real)."""

    def predict(self, batch: dict[str, Tensor]) -> list[str]:
        self.scores(batch).softmax(-1)  # e.g. a confidence it reports
        return [self.info.labels[i] for i in self.scores(batch).argmax(-1).tolist()]


class _TwicePredictedObjectives:
    @staticmethod
    @hookimpl
    def xfer_objectives() -> list[ComponentSpec]:
        return [ComponentSpec("objective", "mine/twice", f"{__name__}:_TwicePredicted", "1", SequenceConfig)]


def test_a_predict_that_runs_the_encoder_twice_is_a_user_error() -> None:
    """Not HiddenStates' internal RuntimeError ("call the model, not the objective")."""
    from xfer.core.tasks import SentenceExample

    model = _model(_TwicePredicted)
    objective = model.objective("toy/c")
    batch = objective.collate(objective.featurize([SentenceExample("c0", "the cat runs", label="1")]))
    with pytest.raises(UserError, match=r"toy/c: objective _TwicePredicted's predict\(\) runs the encoder more than"):
        model.predict("toy/c", batch)


def test_a_teachers_stage_with_a_twice_predicting_objective_stops_before_training(tmp_path: Path) -> None:
    """Found at the first dev evaluation, after training (here, with eval_every: null, after the whole
    first trial), in a bare RuntimeError traceback."""
    host = make_host(autoload=True)
    host.add_object(_TwicePredictedObjectives, "mine")
    text = """
name: twice
stages:
  corpus: {kind: toy.corpus, sentences: 60}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 150, min_frequency: 1}
  teachers:
    kind: bam.teachers
    tokenizer: vocab.tokenizer
    encoder: {num_layers: 1, hidden_size: 16, embedding_size: 16, intermediate_size: 32, num_heads: 2}
    objective: mine/twice
    max_length: 16
    tasks: [{name: toy/agreement, train_size: 16, dev_size: 8}]
    train: {steps: 2, batch_size: 8, log_every: 1, checkpoint_every: 2, eval_every: null, precision: fp32}
"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # examples cut to max_length
        with pytest.raises(UserError, match=r"toy/agreement: objective _TwicePredicted's predict\(\) runs the encoder"):
            run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host)
    assert not list((tmp_path / "run/teachers").rglob("checkpoints")), "nothing may train"

"""Hostile review of BAM training (teacher annealing, sampling, distillation loss): defects found and fixed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from xfer.bam.data import MixedCollate
from xfer.bam.model import HiddenStates, MultiTaskModel
from xfer.bam.objective import TASK_KINDS, DistillationObjective
from xfer.core.errors import RecipeError, UserError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.tasks import SentenceExample, TaskInfo
from xfer.testing import make_host, write_recipe
from xfer.transformer.encoder import Encoder
from xfer.transformer.objectives import SequenceObjective
from xfer.transformer.presets import preset
from xfer.transformer.tokenization import WordPieceTokenizer

RECIPE = """
stages:
  teachers:
    kind: bam.teachers
    tasks: [{name: toy/agreement}]
  student:
    kind: bam.student
    init: teachers.init
    tasks: [{name: toy/agreement}]
    teachers: teachers.predictions
    lambda_schedule: constant
"""


def test_a_constant_lambda_of_one_is_refused_as_ignoring_the_teachers(tmp_path: Path) -> None:
    """λ = 1 at every step weighs the teacher by 0: the teachers had to be trained and were read,
    yet taught nothing (as `lambda_schedule: none` with teachers, which is refused). It was accepted."""
    path = write_recipe(tmp_path, RECIPE + "    lambda_value: 1\n")
    with pytest.raises(RecipeError) as caught:
        load_recipe(path, host=make_host(autoload=True))
    [problem] = caught.value.diagnostics
    assert problem.location.line == 12
    assert "stages.student.lambda_value" in problem.message and "teachers would be ignored" in problem.message
    for value in ("0", "0.5", "0.99"):  # any weight on the teacher is a distillation
        ok = write_recipe(tmp_path / value, RECIPE + f"    lambda_value: {value}\n")
        assert load_recipe(ok, host=make_host(autoload=True)).stages["student"].config.lambda_value == float(value)


# --- an objective's own loss -----------------------------------------------------------------

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "dog", "runs", "a"]


class _TripledLoss(SequenceObjective):
    """A plugin objective that changes the loss (as `example.focal` does): three times cross-entropy."""

    def loss(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return 3.0 * F.cross_entropy(scores, labels)


def _model(objective_class: type) -> MultiTaskModel:
    torch.manual_seed(0)
    config = preset("tiny", vocab_size=len(WORDS), num_layers=1, hidden_size=16, embedding_size=16, num_heads=2,
                    intermediate_size=32, hidden_dropout=0.0, attention_dropout=0.0)  # fmt: skip
    info = TaskInfo("toy/c", "classification", ("0", "1"), "accuracy")
    tokenizer = WordPieceTokenizer.from_vocab({w: i for i, w in enumerate(WORDS)})
    objective = objective_class(HiddenStates(config), info, tokenizer, 16, None)
    return MultiTaskModel(Encoder(config), {"toy/c": objective}, {"toy/c": info})


def _batch(model: MultiTaskModel) -> dict:
    examples = [SentenceExample("c0", "the cat runs", label="1"), SentenceExample("c1", "a dog", label="0")]
    features = model.objective("toy/c").featurize(examples)
    return MixedCollate({"toy/c": model.objective("toy/c")}, {"toy/c": TASK_KINDS["classification"]}, 0)(
        {"toy/c": features}
    )


def test_gold_only_training_uses_an_objectives_own_loss() -> None:
    """Teachers and Multi (schedule none) trained every objective with BAM's cross-entropy: a
    focal-loss (or any `loss()`-overriding) objective was accepted and its loss silently replaced."""
    model = _model(_TripledLoss).eval()
    batch = _batch(model)
    plain = DistillationObjective(_model(SequenceObjective).eval(), "none")(batch).loss  # same weights (seed 0)
    own = DistillationObjective(model, "none")(batch).loss
    assert own.item() == pytest.approx(3.0 * plain.item(), rel=1e-5)


def test_a_student_distilling_with_an_objectives_own_loss_is_refused() -> None:
    """The loss has no form for the mixed target λ·gold + (1−λ)·teacher: it was replaced by cross-entropy."""
    for schedule in ("linear", "constant"):
        with pytest.raises(UserError, match=r"toy/c: objective _TripledLoss overrides loss\(\)"):
            DistillationObjective(_model(_TripledLoss), schedule)
    DistillationObjective(_model(SequenceObjective), "linear")  # the built-in objective distils


def test_preflight_refuses_a_distilling_student_with_an_objective_that_has_its_own_loss(tmp_path: Path) -> None:
    """Found only when the student started, after the teachers had trained (they train with that loss)."""
    pytest.importorskip("xfer.example")  # the xfer-example plugin's focal loss
    from xfer.core.runs.preflight import preflight

    text = """
stages:
  teachers:
    kind: bam.teachers
    objective: {name: example.focal, gamma: 2}
    tasks: [{name: toy/agreement}]
  student:
    kind: bam.student
    init: teachers.init
    objective: {name: example.focal, gamma: 2}
    tasks: [{name: toy/agreement}]
"""
    host = make_host(autoload=True)
    plan = load_recipe(write_recipe(tmp_path, text + "    teachers: teachers.predictions\n"), host=host)
    [problem] = preflight(plan, host)
    assert "stage 'student': objective: example.focal overrides loss()" in problem, problem
    multi = load_recipe(write_recipe(tmp_path / "multi", text + "    lambda_schedule: none\n"), host=host)
    assert preflight(multi, host) == []  # gold only: the focal loss is used

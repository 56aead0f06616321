"""Hostile review of the BAM stages, third pass: task types found late, broken teacher outputs,
task sampling past the float range, and the choice of the teaching trial with a NaN score."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from xfer.bam import cache
from xfer.bam.config import TASK_TYPES
from xfer.bam.data import attach_teacher_outputs
from xfer.bam.objective import TASK_KINDS
from xfer.bam.sampling import task_probabilities
from xfer.bam.stage import Group, teaching_run
from xfer.core.errors import UserError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import preflight
from xfer.core.tasks import SentenceExample
from xfer.testing import make_host

# --- a task type BAM cannot distil --------------------------------------------------------------


def _squad(path: Path, questions: int) -> None:
    qas = [
        {"id": f"q{i}", "question": "where did the cat sit", "answers": [{"text": "the mat", "answer_start": 15}]}
        for i in range(questions)
    ]
    paragraphs = [{"context": "the cat sat on the mat", "qas": qas}]
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}), "utf-8")


@pytest.mark.parametrize("kind", ["bam.teachers", "bam.student"])
def test_a_task_type_bam_cannot_distil_is_refused_before_the_stages_ahead_train(tmp_path: Path, kind: str) -> None:
    """A span-QA task passed validation and the pre-flight (it has a default fine-tuning objective)
    and was refused only when the BAM stage started, after the corpus and vocabulary stages (in
    recipes/bam-on-electra.yaml: ELECTRA pre-training) had run."""
    _squad(tmp_path / "train.json", 3)
    _squad(tmp_path / "dev.json", 2)
    student = "    lambda_schedule: none\n" if kind == "bam.student" else ""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "name: qa\nstages:\n"
        "  corpus: {kind: toy.corpus, sentences: 50}\n"
        "  vocab: {kind: transformer.vocab, files: corpus.text, size: 100, min_frequency: 1}\n"
        f"  bam:\n    kind: {kind}\n    tokenizer: vocab.tokenizer\n{student}"
        "    tasks: [{name: toy/agreement}, {name: squad/v1, train_file: train.json, dev_file: dev.json}]\n",
        encoding="utf-8",
    )
    host = make_host(autoload=True)
    problems = preflight(load_recipe(recipe, host=host), host)
    assert len(problems) == 1, problems
    assert "tasks.1: squad/v1 is a span_qa task; BAM distils classification, regression, tagging" in problems[0]


def test_the_task_types_the_config_admits_are_those_the_loss_handles() -> None:
    assert set(TASK_TYPES) == set(TASK_KINDS)


# --- teacher outputs that are not finite ---------------------------------------------------------


def test_a_non_finite_teacher_output_is_refused_naming_the_example() -> None:
    """A NaN/inf teacher row was attached as it was; the student's loss became NaN at the first step
    that drew the example and the trainer said to lower the learning rate or enable clipping."""
    examples = [SentenceExample(f"train-{i}", "a cat", label="1") for i in range(3)]
    rows = [np.array([[0.5, -0.5]], np.float32), np.array([[np.inf, 0.0]], np.float32), np.zeros((1, 2), np.float32)]
    entry = cache.assemble("k", "glue/rte", "classification", ["0", "1"], examples, [e.id for e in examples], rows)
    entry.source = "teachers/outputs/predictions/k.safetensors"
    features = [{"id": e.id} for e in examples]
    with pytest.raises(UserError, match=r"glue/rte: the teacher's output for training example 'train-1' is NaN"):
        attach_teacher_outputs("glue/rte", examples, features, entry, TASK_KINDS["classification"])
    assert "k.safetensors" in str(_error(examples, features, entry))
    rows[1] = np.array([[1.0, 0.0]], np.float32)
    fine = cache.assemble("k", "glue/rte", "classification", ["0", "1"], examples, [e.id for e in examples], rows)
    attach_teacher_outputs("glue/rte", examples, features, fine, TASK_KINDS["classification"])
    assert np.array_equal(features[1]["teacher"], [[1.0, 0.0]])


def _error(examples: list, features: list, entry: cache.TeacherPredictions) -> UserError:
    with pytest.raises(UserError) as caught:
        attach_teacher_outputs("glue/rte", examples, features, entry, TASK_KINDS["classification"])
    return caught.value


# --- task sampling past the float range ----------------------------------------------------------


def test_sampling_probabilities_past_the_float_range() -> None:
    """|D|^(1/temperature) overflowed a float (100,000^100 at temperature 0.01): a bare OverflowError
    when the student started."""
    sizes = {"a": 100_000, "b": 99_000, "c": 100_000}
    p = task_probabilities(sizes, "temperature", temperature=0.01)
    assert sum(p.values()) == pytest.approx(1.0)
    assert p["a"] == p["c"]
    assert p["b"] / p["a"] == pytest.approx((99_000 / 100_000) ** 100, rel=1e-9)
    assert task_probabilities(sizes, "power", alpha=100.0) == pytest.approx(p, rel=1e-12)
    # a task whose probability is 0 in floating point would never be drawn: its head stays random
    with pytest.raises(UserError, match=r"task 'small' \(10 examples\).*never be sampled; raise the temperature"):
        task_probabilities({"big": 100_000, "small": 10}, "temperature", temperature=0.01)
    with pytest.raises(UserError, match=r"alpha 300.*lower alpha"):
        task_probabilities({"big": 100_000, "small": 10}, "power", alpha=300.0)


def test_ordinary_sampling_probabilities_are_unchanged_to_the_last_bit() -> None:
    """Existing runs draw their batches from these: the fallback must not touch them."""
    sizes = {"cola": 8551, "mrpc": 3668, "stsb": 5749, "rte": 2490}
    total = sum(size**0.75 for size in sizes.values())
    assert task_probabilities(sizes) == {name: size**0.75 / total for name, size in sizes.items()}


# --- the teaching trial when a trial's dev score is NaN ------------------------------------------


def test_a_trial_with_a_nan_score_is_not_taken_for_the_median_teacher() -> None:
    """NaN compares false with everything, so the sort left a NaN trial where it stood: with
    scores [50, NaN, 60] trial 1 (NaN) taught, and the pick depended on the trials' order."""
    group = Group("t", [SimpleNamespace(name="t", info=SimpleNamespace(main_metric="m"))])
    for scores in itertools.permutations([math.nan, 40.0, 50.0, 60.0, 70.0]):
        runs = [{"trial": i, "metrics": {"t": {"m": s}}} for i, s in enumerate(scores)]
        chosen = teaching_run(runs, group, "median")
        assert chosen["metrics"]["t"]["m"] == 50.0, scores  # NaN lowest: [NaN, 40, 50, 60, 70]
    runs = [{"trial": i, "metrics": {"t": {"m": s}}} for i, s in enumerate([50.0, math.nan, 60.0])]
    assert teaching_run(runs, group, "median")["trial"] == 0


# --- `init: <stage>.models` without a model for a task ---------------------------------------------

MODELS_INIT = """
stages:
  teachers:
    kind: bam.teachers
    tasks: [{name: toy/agreement}]
  multi:
    kind: bam.student
    init: teachers.init
    lambda_schedule: none
    tasks: [{name: toy/agreement}]
  again:
    kind: KIND
    init: FROM.models
    tasks: [{name: toy/agreement}, {name: toy/pos}]
"""


@pytest.mark.parametrize(
    ("kind", "source", "hint"),
    [("bam.teachers", "multi", "teachers.init"), ("bam.student", "teachers", "teachers.init")],
)
def test_a_models_init_without_a_model_for_a_task_is_a_recipe_error(
    tmp_path: Path, kind: str, source: str, hint: str
) -> None:
    """`init: multi.models` (task -> model dir) for a task `multi` does not train was refused only when
    the stage started ("init has no model for task"), after every stage before it had trained."""
    from xfer.core.errors import RecipeError
    from xfer.testing import write_recipe

    text = MODELS_INIT.replace("KIND", kind).replace("FROM", source)
    if kind == "bam.student":
        text += "    lambda_schedule: none\n    multitask: false\n"
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))
    [problem] = caught.value.diagnostics
    assert problem.location.line == 13, problem
    assert problem.message == (
        f"stages.again.init: {source}.models has no model for task 'toy/pos': stage {source!r} trains "
        f"toy/agreement (start this stage from an encoder, e.g. {hint}, or drop the task)"
    )
    fine = text.replace(", {name: toy/pos}]", "]")
    load_recipe(write_recipe(tmp_path / "fine", fine), host=make_host(autoload=True))


# --- a hand-written teachers folder --------------------------------------------------------------


@pytest.mark.parametrize("entry", [{"key": "abc"}, "abc.safetensors", {"file": None, "key": "abc"}])
def test_an_index_entry_without_a_file_is_a_clear_error(tmp_path: Path, entry: object) -> None:
    """`teachers:` may be a folder made elsewhere; an entry without "file" was a KeyError (or TypeError)
    traceback when the student started."""
    (tmp_path / "index.json").write_text(json.dumps({"format": 1, "tasks": {"glue/rte": entry}}), "utf-8")
    with pytest.raises(cache.CacheError, match=r"index.json: the entry of 'glue/rte' names no predictions file"):
        cache.load_teacher_predictions(tmp_path, "glue/rte")


# --- the student's labels in another order than its teacher's --------------------------------------

PERMUTED_LABELS = """
name: labels
stages:
  teachers:
    kind: bam.teachers
    tasks: [{name: glue/tsv, train: t.tsv, dev: t.tsv, text_a_column: text, label_column: label, labels: [neg, pos]}]
  student:
    kind: bam.student
    init: teachers.init
    teachers: teachers.predictions
    tasks:
      - {name: glue/tsv, train: t.tsv, dev: t.tsv, text_a_column: text, label_column: label,
         labels: STUDENT}
"""


def test_student_labels_in_another_order_than_the_teachers_are_a_recipe_error(tmp_path: Path) -> None:
    """`labels: [pos, neg]` against the teachers' `[neg, pos]` validated, and the student stopped on
    "teacher predictions ... use labels" only once the teachers had trained."""
    from xfer.core.errors import RecipeError
    from xfer.testing import write_recipe

    (tmp_path / "t.tsv").write_text("text\tlabel\na cat\tpos\na dog\tneg\n", encoding="utf-8")
    with pytest.raises(RecipeError) as caught:
        load_recipe(
            write_recipe(tmp_path, PERMUTED_LABELS.replace("STUDENT", "[pos, neg]")), host=make_host(autoload=True)
        )
    [problem] = caught.value.diagnostics
    assert (problem.location.line, problem.location.col) == (13, 10), problem
    assert problem.message == (
        "stages.student.tasks.0.labels: ['pos', 'neg'] here, but stage 'teachers' trains the teacher of "
        "'glue/tsv' with labels ['neg', 'pos']: its outputs are in that order (use the teachers' labels here)"
    )
    load_recipe(write_recipe(tmp_path, PERMUTED_LABELS.replace("STUDENT", "[neg, pos]")), host=make_host(autoload=True))

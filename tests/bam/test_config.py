"""Recipe mistakes in bam stages are reported at their line, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import RecipeError
from xfer.core.recipes.recipe import load_recipe
from xfer.testing import make_host, write_recipe

BASE = """
stages:
  teachers:
    kind: bam.teachers
    tasks: [{name: toy/agreement}, {name: toy/pos}]
  student:
    kind: bam.student
    init: teachers.init
    tasks: [{name: toy/agreement}, {name: toy/pos}]
"""


def _problems(tmp_path: Path, extra_student: str, extra_teachers: str = "") -> list[str]:
    text = BASE.replace(
        "    tasks: [{name: toy/agreement}, {name: toy/pos}]\n  student:",
        f"    tasks: [{{name: toy/agreement}}, {{name: toy/pos}}]{extra_teachers}\n  student:",
    )
    path = write_recipe(tmp_path, text + extra_student)
    with pytest.raises(RecipeError) as caught:
        load_recipe(path, host=make_host(autoload=True))
    return [f"{d.location.line}: {d.message}" for d in caught.value.diagnostics]


def test_a_valid_student_recipe(tmp_path: Path) -> None:
    path = write_recipe(tmp_path, BASE + "    teachers: teachers.predictions\n")
    plan = load_recipe(path, host=make_host(autoload=True))
    assert plan.stages["student"].config.lambda_schedule == "linear"
    assert plan.stages["student"].config.train.batch_size == 128  # BAM's multi-task defaults
    assert plan.stages["teachers"].config.train.batch_size == 32


@pytest.mark.parametrize(
    ("extra", "line", "message"),
    [
        ("", 7, "distils from teachers: give teachers"),  # the stage mapping: the key is missing
        ("    lambda_schedule: none\n    teachers: teachers.predictions\n", 11, "teachers would be ignored"),
        ("    teachers: teachers.predictions\n    lambda_value: 0.5\n", 11, "only used by lambda_schedule: constant"),
        ("    teachers: teachers.predictions\n    lamda_schedule: none\n", 11, "did you mean 'lambda_schedule'"),
        ("    teachers: teachers.modelz\n", 10, "has no output 'modelz'"),
        (
            "    teachers: teachers.models\n",
            10,
            "stages.student.teachers: teachers.models is bam-models; teachers takes teacher-predictions "
            "(e.g. teachers.predictions)",
        ),
        ("    teachers: teachers.predictions\n    sampling: sqrt\n", 11, "sampling"),
        ("    teachers: teachers.predictions\n    lambda_value: 1.5\n", 11, "lambda_value"),
        # were silently ignored: the student sampled by the scheme's own exponent
        (
            "    teachers: teachers.predictions\n    sampling: uniform\n    alpha: 0.5\n",
            12,
            "only used by sampling: power",
        ),
        ("    teachers: teachers.predictions\n    temperature: 5\n", 11, "only used by sampling: temperature"),
        ("    teachers: teachers.predictions\n    model: mini\n", 11, "'mini' would be ignored: with `init:`"),
        # as transformer.finetune: a sentence pair's [CLS] and two [SEP]s do not fit in 2
        ("    teachers: teachers.predictions\n    max_length: 2\n", 11, "max_length: must be at least 3"),
    ],
)
def test_student_mistakes(tmp_path: Path, extra: str, line: int, message: str) -> None:
    problems = _problems(tmp_path, extra)
    assert any(p.startswith(f"{line}:") and message in p for p in problems), problems


def test_a_student_task_without_a_teacher_is_a_recipe_error(tmp_path: Path) -> None:
    """It failed only when the student started, after the teachers stage had trained."""
    text = BASE.rsplit("    tasks:", 1)[0] + "    tasks:\n      - toy/agreement\n      - {name: toy/chunk}\n"
    path = write_recipe(tmp_path, text + "    teachers: teachers.predictions\n")
    with pytest.raises(RecipeError) as caught:
        load_recipe(path, host=make_host(autoload=True))
    [problem] = caught.value.diagnostics
    assert problem.location.line == 11 and "stages.student.tasks.1: 'toy/chunk' has no teacher" in problem.message
    assert "predicts toy/agreement, toy/pos" in problem.message
    outside = write_recipe(tmp_path / "outside", text + f"    teachers: {tmp_path}\n")  # a folder: read at run time
    load_recipe(outside, host=make_host(autoload=True))


def test_a_reference_to_an_output_of_the_wrong_kind_is_a_recipe_error(tmp_path: Path) -> None:
    """`init: teachers.predictions` failed only when the student started, after the teachers had trained."""
    text = BASE.replace("init: teachers.init", "init: teachers.predictions") + "    teachers: teachers.predictions\n"
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))
    [problem] = caught.value.diagnostics
    assert (problem.location.line, problem.location.col) == (8, 11), problem
    assert problem.message == (
        "stages.student.init: teachers.predictions is teacher-predictions; init takes a model or bam-models "
        "(e.g. teachers.init, teachers.models)"
    )
    for init in ("teachers.models", str(tmp_path)):  # a BAM models output, and a folder: read at run time
        ok = text.replace("init: teachers.predictions", f"init: {init}")
        if init == "teachers.models":  # one model per task: a student of one model per task
            ok += "    multitask: false\n"
        load_recipe(write_recipe(tmp_path / "ok", ok), host=make_host(autoload=True))


def test_a_multitask_student_from_one_model_per_task_is_a_recipe_error(tmp_path: Path) -> None:
    """`init: teachers.models` gives each task its teacher's model; a multi-task student (one model)
    validated, then stopped on "init gives tasks ... different models" after the teachers trained."""
    text = BASE.replace("init: teachers.init", "init: teachers.models") + "    teachers: teachers.predictions\n"
    with pytest.raises(RecipeError, match=r"stages\.student\.init: teachers\.models holds one model per task"):
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))


def test_teacher_mistakes(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "    teachers: teachers.predictions\n", "\n    task_epochs: {toy/agreemnt: 3}")
    assert any("did you mean 'toy/agreement'" in p for p in problems), problems
    twice = write_recipe(tmp_path / "twice", "stages:\n  t:\n    kind: bam.teachers\n    tasks: [toy/pos, toy/pos]\n")
    with pytest.raises(RecipeError, match="listed twice"):
        load_recipe(twice, host=make_host(autoload=True))


def test_teacher_encoder_overrides_the_encoder_would_refuse_are_recipe_errors(tmp_path: Path) -> None:
    """Like transformer.finetune's: a traceback when the first teacher was built, before."""
    problems = _problems(tmp_path, "    teachers: teachers.predictions\n", "\n    encoder: {hidden_size: 101}")
    assert any("hidden_size" in p and "multiple of num_heads" in p for p in problems), problems

"""Hostile checks of task aliases (`as:`) in BAM stages, before anything trains: task keys that
share a folder on macOS/Windows, a student entry whose alias names a teacher of another task, and
settings of a task that BAM would silently ignore."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.config import FieldError, TaskRef
from xfer.core.errors import RecipeError
from xfer.core.recipes.recipe import load_recipe
from xfer.testing import make_host, write_recipe

BASE = """
stages:
  teachers:
    kind: bam.teachers
    tasks: TEACHERS
  student:
    kind: bam.student
    init: teachers.init
    teachers: teachers.predictions
    tasks: STUDENT
"""

CASE = (
    "differ only in case: their trial, model and prediction folders would be one folder on a case-insensitive "
    "file system (macOS, Windows); give one of them another name with `as:`"
)


def _problems(tmp_path: Path, teachers: str, student: str) -> list[str]:
    (tmp_path / "MNLI").mkdir(parents=True, exist_ok=True)
    path = write_recipe(tmp_path, BASE.replace("TEACHERS", teachers).replace("STUDENT", student))
    with pytest.raises(RecipeError) as caught:
        load_recipe(path, host=make_host(autoload=True))
    return [f"{d.location.line}:{d.location.col}: {d.message}" for d in caught.value.diagnostics]


def _loads(tmp_path: Path, teachers: str, student: str) -> None:
    (tmp_path / "MNLI").mkdir(parents=True, exist_ok=True)
    path = write_recipe(tmp_path, BASE.replace("TEACHERS", teachers).replace("STUDENT", student))
    load_recipe(path, host=make_host(autoload=True))


def test_aliases_that_differ_only_in_case_are_refused_in_both_bam_stages(tmp_path: Path) -> None:
    """`as: Reviews` and `as: reviews` trained side by side on Linux, but on macOS/Windows their
    trial folders were one: the second task's trial found the first's completed trial and reused it."""
    two = "[{name: toy/agreement, as: Reviews}, {name: toy/agreement, as: reviews, seed: 5}]"
    one = "[{name: toy/agreement, as: reviews}]"
    assert _problems(tmp_path / "t", two, one) == [f"5:5: stages.teachers.tasks: tasks 'Reviews' and 'reviews' {CASE}"]
    teachers = "[{name: toy/agreement, as: Reviews}, {name: toy/agreement, as: tickets, seed: 5}]"
    student = "[{name: toy/agreement, as: Reviews}, {name: toy/agreement, as: REVIEWS, seed: 5}]"
    assert _problems(tmp_path / "s", teachers, student) == [
        f"10:5: stages.student.tasks: tasks 'Reviews' and 'REVIEWS' {CASE}"
    ]


def _stage_configs(tasks: list[TaskRef]) -> list[object]:
    """Every stage kind whose config calls core's `check_distinct_tasks` (finetune, BAM, CVT)."""
    from xfer.bam.config import StudentConfig, TeachersConfig
    from xfer.cvt.config import CvtConfig
    from xfer.transformer.finetune_config import FinetuneConfig

    return [
        lambda: TeachersConfig(tasks=tasks),
        lambda: StudentConfig(tasks=tasks, lambda_schedule="none"),
        lambda: FinetuneConfig(tasks=tasks),
        lambda: CvtConfig(tasks=tasks, mode="supervised"),
    ]


def test_every_stage_kind_with_a_task_list_refuses_keys_that_differ_only_in_case() -> None:
    tasks = [TaskRef("toy/pos", None, alias="Tags"), TaskRef("toy/pos", None, alias="tags")]
    for build in _stage_configs(tasks):
        with pytest.raises(FieldError, match="tasks 'Tags' and 'tags' differ only in case"):
            build()
    distinct = [TaskRef("toy/pos", None, alias="tags"), TaskRef("toy/pos", None, alias="other_tags")]
    for build in _stage_configs(distinct):
        build()


def test_a_student_alias_matching_a_teacher_of_another_loader_is_refused_at_the_entry(tmp_path: Path) -> None:
    """Teachers and student were matched by alias only: `{name: toy/pos, as: reviews}` against the
    teachers' `{name: toy/agreement, as: reviews}` passed validation and failed (or, with the same
    labels, learnt from another task's outputs) only when the student started, after the teachers trained."""
    problems = _problems(
        tmp_path,
        "[{name: toy/agreement, as: reviews}, {name: toy/pos, as: tags}]",
        "[{name: toy/pos, as: tags}, {name: toy/pos, as: reviews}]",
    )
    assert problems == [
        "10:40: stages.student.tasks.1: 'reviews' is a toy/pos task here, but stage 'teachers' trains the teacher "
        "of 'reviews' on toy/agreement: its predictions are for another task (use the teachers' task entry here, "
        "or give this one another alias and a teacher of its own)"
    ]
    # the same loader under the same alias is the teachers' entry (data differences are checked by
    # example digest when the student starts)
    _loads(tmp_path / "ok", "[{name: toy/agreement, as: reviews}]", "[{name: toy/agreement, as: reviews}]")


@pytest.mark.parametrize("stage", ["teachers", "student"])
def test_the_mnli_diagnostic_set_in_a_bam_stage_is_refused_at_its_key(tmp_path: Path, stage: str) -> None:
    """`diagnostic: true` asks for AX.tsv from the MNLI model's test predictions; BAM stages write
    none, so the setting was accepted and did nothing (no AX.tsv, no word said)."""
    plain = "[{name: glue/mnli, data_dir: MNLI}]"
    asked = "[{name: glue/mnli, data_dir: MNLI, diagnostic: true}]"
    teachers, student = (asked, plain) if stage == "teachers" else (plain, asked)
    line = 5 if stage == "teachers" else 10
    assert _problems(tmp_path, teachers, student) == [
        f"{line}:47: stages.{stage}.tasks.0.diagnostic: BAM stages write no test-set predictions, so the "
        "diagnostic set (AX.tsv) would never be predicted: remove `diagnostic: true` here (transformer.finetune "
        "with `predict: [dev, test]` writes AX.tsv)"
    ]
    _loads(tmp_path / "ok", plain, plain.replace("}]", ", diagnostic: false}]"))

"""BAM over two datasets of one loader (`as:`): teachers, their predictions and the multi-task
student are keyed by the aliases, so each student head learns from its own teacher."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.testing import make_host, run_recipe_file

from .bam_recipes import prepare, recipe

TASKS = """
      - {name: glue/tsv, as: sts_a, train: sts_train.tsv, dev: sts_dev.tsv, text_a_column: a, text_b_column: b,
         label_column: score, type: regression, metrics: [spearman]}
      - {name: glue/tsv, as: sts_b, train: sts_dev.tsv, dev: sts_train.tsv, text_a_column: a, text_b_column: b,
         label_column: score, type: regression, metrics: [pearson]}"""

STUDENT = """
  student:
    kind: bam.student
    init: teachers.init
    teachers: teachers.predictions
    max_length: 40
    trials: 1
    tasks: {TASKS}
    train: {TRAIN_EVAL}
"""
RECIPE = recipe(STUDENT, trials=1, tasks=TASKS)


def test_a_student_learns_two_datasets_of_one_loader_from_their_own_teachers(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_recipe_file(prepare(tmp_path / "project", RECIPE), run, make_host(autoload=True))
    for stage in ("teachers", "student"):
        results = json.loads((run / stage / "outputs/results/results.json").read_text())
        assert list(results) == ["sts_a", "sts_b"]
        assert (results["sts_a"]["main_metric"], results["sts_b"]["main_metric"]) == ("spearman", "pearson")
    index = json.loads((run / "teachers/outputs/predictions/index.json").read_text())["tasks"]
    assert sorted(index) == ["sts_a", "sts_b"]
    assert (index["sts_a"]["examples"], index["sts_b"]["examples"]) == (48, 24), "each alias its own train file"
    models = json.loads((run / "student/outputs/models/models.json").read_text())["tasks"]
    assert sorted(models) == ["sts_a", "sts_b"]


def test_a_student_alias_the_teachers_do_not_have_is_refused_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = RECIPE.replace("as: sts_b, train: sts_dev.tsv", "as: sts_c, train: sts_dev.tsv", 2)
    student_only = text.replace("as: sts_c", "as: sts_b", 1)  # the teachers keep sts_b, the student says sts_c
    path = prepare(tmp_path, student_only)
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "'sts_c' has no teacher: stage 'teachers' predicts sts_a, sts_b" in err


def test_an_alias_named_like_the_compare_average_is_refused_at_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`xfer compare` names its average over tasks `average`; an alias `average` (a valid word, unlike
    task names, which have a `/`) put the average into that task's column of compare's table, and
    its tests were told apart from the average's by that name only."""
    path = prepare(tmp_path, RECIPE.replace("as: sts_b", "as: average"))
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "'average' is the name of `xfer compare`'s column of the task average: choose another alias" in err
    assert f"{path.resolve()}:" in err and "stages.teachers.tasks.1.as" in err
    from xfer.bam.compare import AVERAGE
    from xfer.bam.config import COMPARE_AVERAGE

    assert AVERAGE == COMPARE_AVERAGE, "the reserved name must follow compare's"

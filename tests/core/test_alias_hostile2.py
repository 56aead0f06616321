"""Hostile checks of task aliases built in Python (plugins, tests) and of task keys that name folders."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.config import FieldError, TaskRef, check_distinct_tasks
from xfer.testing import write_recipe

from .lines_task import GOOD_LINES
from .recipes import ALIAS as RECIPE

ALIAS_RULE = (
    "is not a task alias: use a letter, then letters, digits or '_' (no '/' or '-': registered task names "
    "have them), e.g. `as: reviews`"
)


@pytest.mark.parametrize("alias", ["a/b", "", "glue-rte", "../x", "2nd", "re views"])
def test_a_task_ref_built_in_python_refuses_an_alias_a_recipe_refuses(alias: str) -> None:
    """Only the recipe validator checked `as:`: `TaskRef("glue/tsv", None, alias="../x")` from a plugin
    or a test was taken, and its key went into trial, model and prediction folder names (`../x`
    outside the stage's folder, `a/b` a sub-folder; `""` silently fell back to the task name)."""
    with pytest.raises(FieldError) as caught:
        TaskRef("glue/tsv", None, alias=alias)
    assert caught.value.key == ("as",)
    assert caught.value.message == f"{alias!r} {ALIAS_RULE}"
    good = TaskRef("glue/tsv", None, alias="reviews")
    with pytest.raises(FieldError):
        dataclasses.replace(good, alias=alias)
    assert good.key == "reviews" and TaskRef("glue/tsv").key == "glue/tsv"


def test_a_recipe_alias_is_still_refused_at_its_line_with_the_same_rule(
    tmp_path: Path, lines_host, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "reviews").mkdir()
    (tmp_path / "reviews" / "train.tsv").write_text(GOOD_LINES)
    path = write_recipe(tmp_path, RECIPE.replace("as: reviews", "as: re-views"))
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"{path.resolve()}:5:29: stages.fit.task.as: 're-views' {ALIAS_RULE}" in err


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (TaskRef("glue/tsv", None, alias="Reviews"), TaskRef("glue/tsv", None, alias="reviews")),
        (TaskRef("glue/tsv", None, alias="reviews"), TaskRef("glue/rte", None, alias="REVIEWS")),
        (TaskRef("toy/agreement"), TaskRef("toy/Agreement")),
    ],
)
def test_task_keys_that_differ_only_in_case_are_refused(first: TaskRef, second: TaskRef) -> None:
    """Stages name trial, model and prediction folders by the task key: on macOS or Windows
    `Reviews` and `reviews` are one folder, so the second task reused the first's trial result
    (a completed trial is skipped) or overwrote its model."""
    with pytest.raises(FieldError) as caught:
        check_distinct_tasks([TaskRef("toy/chunk"), first, second], "one encoder")
    assert caught.value.key == ("tasks",)
    assert caught.value.message == (
        f"tasks {first.key!r} and {second.key!r} differ only in case: their trial, model and prediction folders "
        "would be one folder on a case-insensitive file system (macOS, Windows); give one of them another name "
        "with `as:` (one encoder)"
    )


def test_distinct_keys_pass_and_an_exact_repeat_keeps_its_own_message() -> None:
    check_distinct_tasks([TaskRef("glue/tsv", None, alias="reviews"), TaskRef("glue/tsv", None, alias="tickets")])
    with pytest.raises(FieldError, match="task 'reviews' is listed twice; give each task once"):
        check_distinct_tasks([TaskRef("glue/tsv", None, alias="reviews"), TaskRef("glue/tsv", None, alias="reviews")])

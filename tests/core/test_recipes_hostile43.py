"""Hostile recipes, round 43: a misspelt or mistyped stage `kind`, a misspelt `as:` in a task, and a
recipe file that is an empty YAML document (`---` alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.recipes.recipe import load_recipe
from xfer.testing import write_recipe

from .recipes import BARE, testing_host  # noqa: F401 (autouse fixture)
from .recipes import validate_errors as _errors

STAGE = "name: t\nstages:\n  fit:\n    {kind}\n    task: toy/agreement\n"


@pytest.mark.parametrize("written", ["knd: testing.fit", "Kind: testing.fit", "kinds: testing.fit"])
def test_a_misspelt_kind_key_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], written: str) -> None:
    """`knd: testing.fit` said only "stages.fit: missing 'kind'", at the stage's name, with no word of the
    key that was meant to be it (every other misspelt key gets a did-you-mean). It is reported at the
    misspelt key, which the message names."""
    path = write_recipe(tmp_path, STAGE.format(kind=written))
    err = _errors(path, capsys)
    key = written.split(":")[0]
    expected = f"recipe.yaml:4:5: stages.fit: missing 'kind' (a stage kind name); is {key!r} meant to be 'kind'?"
    assert expected in err, err


@pytest.mark.parametrize(
    ("written", "col", "got"),
    [
        ("kind: no", 11, "bool False (YAML reads no as false: write 'no' in quotes if you mean the word)"),
        ("kind: [testing.fit]", 11, "a list"),
        ("kind: 3", 11, "int 3"),
        ("kind:", 10, "null"),
    ],
)
def test_a_kind_of_the_wrong_type_is_not_called_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], written: str, col: int, got: str
) -> None:
    """`kind: no` (YAML 1.1's false), `kind: [testing.fit]` or `kind: 3` were reported as "missing 'kind'"
    at the value the user wrote: the key is there, its value is not a name. Said so, with what YAML read."""
    path = write_recipe(tmp_path, STAGE.format(kind=written))
    err = _errors(path, capsys)
    assert f"recipe.yaml:4:{col}: stages.fit.kind: expected a stage kind name, got {got}\n" in err, err
    assert "missing 'kind'" not in err, err


def test_an_override_giving_kind_a_wrong_type_names_the_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same through the command line: `stages.fit.kind=null` was "missing 'kind'"."""
    path = write_recipe(tmp_path, BARE)
    err = _errors(path, capsys, "stages.fit.kind=null")
    assert "<override 1: stages.fit.kind=null>:1:17: stages.fit.kind: expected a stage kind name, got null" in err, err


@pytest.mark.parametrize("typo", ["ass", "As"])
def test_a_misspelt_task_alias_key_gets_a_suggestion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], typo: str
) -> None:
    """A task's own keys (`name`, `as`) were no candidates for a did-you-mean: `{name: toy/agreement,
    ass: reviews}` was "unknown key 'ass'" alone, while `train_sise` got 'train_size'."""
    path = write_recipe(tmp_path, BARE.replace("train_size: 64", f"{typo}: reviews"))
    err = _errors(path, capsys)
    assert f"stages.fit.task.{typo}: unknown key {typo!r}; did you mean 'as'?" in err, err
    # the alias itself, spelt right, still works
    path = write_recipe(tmp_path, BARE.replace("train_size: 64", "as: reviews"))
    assert load_recipe(path).stages["fit"].config.task.alias == "reviews"


@pytest.mark.parametrize("text", ["---\n", "# my recipe\n---\n", "~\n", "--- null\n"])
def test_an_empty_yaml_document_reads_as_an_empty_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """A recipe that is `---` alone (a document started, nothing in it) was refused as "a recipe must be
    a mapping with 'stages', got NoneType" (a Python type name, at the line after the file's end), and an
    included file that is only `---` and comments was refused the same way, where an empty file is an
    empty recipe. It is read as an empty file: the recipe has no 'stages', and an include adds nothing."""
    path = write_recipe(tmp_path, text)
    err = _errors(path, capsys)
    assert "recipe.yaml:1:1: recipe has no 'stages'\n" in err, err
    assert "NoneType" not in err, err
    write_recipe(tmp_path, text, name="common.yaml")
    path = write_recipe(tmp_path, "include: [common.yaml]\n" + BARE)
    assert list(load_recipe(path).stages) == ["fit"]


@pytest.mark.parametrize(("text", "got"), [("- fit\n", "a list"), ("fit\n", "str 'fit'"), ("3\n", "int 3")])
def test_a_recipe_that_is_not_a_mapping_says_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, got: str
) -> None:
    """A list or a scalar as the whole recipe: "got list", "got str" (Python's names) now read as every other
    type error does."""
    path = write_recipe(tmp_path, text)
    err = _errors(path, capsys)
    assert f"recipe.yaml:1:1: a recipe must be a mapping with 'stages', got {got}\n" in err, err


def test_an_alias_in_an_override_is_not_sent_looking_in_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`stages.fit.train=*fast`, with `&fast` written in the recipe, was refused with the hint for files:
    "an anchor must come before its alias in the same file", which the recipe's anchor does. An override's
    value is a YAML document of its own; the message says so. An alias inside the file keeps its hint."""
    path = write_recipe(tmp_path, BARE + "    train: &fast {steps: 3}\n")
    err = _errors(path, capsys, "stages.fit.train=*fast")
    assert (
        "<override 1: stages.fit.train=*fast>:1:18: YAML syntax error: found undefined alias 'fast' (an override's "
        "value is YAML of its own: it cannot use the recipe's anchors; write the value itself)" in err
    ), err
    assert "in the same file" not in err, err
    path = write_recipe(tmp_path, BARE + "    train: *fast\n")
    assert "(an anchor must come before its alias in the same file" in _errors(path, capsys)


@pytest.mark.parametrize("name", ["run-$USER", "$HOME", "a$_b"])
def test_a_shell_variable_in_the_run_name_is_refused_as_dollar_brace_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """`name: ${USER}-demo` is refused (the name is taken as written, so the folder would be
    `runs/${USER}-demo`), but `name: run-$USER`, the shell's spelling of the same mistake, named the folder
    `runs/run-$USER` silently. A `$` that starts no variable name is still text."""
    path = write_recipe(tmp_path, BARE.replace("name: t\n", f"name: {name}\n"))
    err = _errors(path, capsys)
    assert f"recipe.yaml:1:7: name {name!r}: the run name is taken as written" in err, err
    path = write_recipe(tmp_path, BARE.replace("name: t\n", "name: cost$5-$\n"))
    assert load_recipe(path).name == "cost$5-$"


def test_an_included_stage_without_kind_suggests_the_stage_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Shared settings in an included file for a misspelt stage (`fti:` for `fit:`) made a stage of their
    own, refused as "stages.fti: missing 'kind'" with no word of the stage they were meant for."""
    write_recipe(tmp_path, "stages:\n  fti:\n    train: {steps: 3}\n", name="common.yaml")
    path = write_recipe(tmp_path, "include: [common.yaml]\n" + BARE)
    err = _errors(path, capsys)
    expected = "stages.fti: missing 'kind' (a stage kind name); or are these settings for the stage 'fit', under a"
    assert f"common.yaml:2:3: {expected} misspelt name?" in err, err

"""Hostile recipes (recipe loading and overrides): a literal `${` in a path, explicit YAML tags and
dates, stages added by an override, and the odd shapes a recipe file can take."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.recipes.recipe import load_recipe
from xfer.testing import write_recipe

from .recipes import BARE, testing_host  # noqa: F401 (autouse fixture)
from .recipes import validate_errors as _errors

SECOND = """\
  second:
    kind: testing.fit
    init: {init}
    task: toy/agreement
"""


def test_a_literal_dollar_brace_in_a_path_is_written_dollar_dollar_brace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder named `m${x}` could not be named at all (`${x}` is a variable, and a `${` left over is
    refused), and `$${X}` silently read as `$` + X's value. `$${` is a literal `${`, in the file, in an
    include and in an override; a lone `$` stays text."""
    monkeypatch.setenv("XFER_TEST_X", "expanded")
    (tmp_path / "m${XFER_TEST_X}").mkdir()
    (tmp_path / "m$expanded").mkdir()  # what `$${XFER_TEST_X}` used to name
    (tmp_path / "a$b").mkdir()
    (tmp_path / "base${v}.yaml").write_text("seed: 7\n")
    text = "include: 'base$${v}.yaml'\n" + BARE + SECOND.format(init="'m$${XFER_TEST_X}'")
    path = write_recipe(tmp_path, text)
    recipe = load_recipe(path)
    assert recipe.stages["second"].config.init.path == tmp_path / "m${XFER_TEST_X}"
    assert recipe.seed == 7
    # an override (relative to the current directory) reads the escape the same way
    monkeypatch.chdir(tmp_path)
    recipe = load_recipe(path, ["stages.second.init=m$${XFER_TEST_X}"])
    assert recipe.stages["second"].config.init.path == tmp_path / "m${XFER_TEST_X}"
    # a lone `$` is text, as before; variables beside an escape are still expanded
    assert load_recipe(path, ["stages.second.init=a$b"]).stages["second"].config.init.path == tmp_path / "a$b"
    (tmp_path / "m${XFER_TEST_X}" / "expanded").mkdir()
    recipe = load_recipe(path, ["stages.second.init=m$${XFER_TEST_X}/${XFER_TEST_X}"])
    assert recipe.stages["second"].config.init.path == tmp_path / "m${XFER_TEST_X}" / "expanded"
    # a `${` that is neither a variable nor escaped is still refused, and the message names the escape
    err = _errors(path, capsys, "stages.second.init=m${MY-VAR}")
    assert "'${MY-VAR}' is not expanded" in err and "write $${ for a literal ${" in err, err


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("!!int '010'", "'010' reads as a YAML 1.1 octal integer (8)"),
        ("!!int '0x10'", "'0x10' reads as a YAML 1.1 hexadecimal integer (16)"),
        ('!!int "+0b11"', "'+0b11' reads as a YAML 1.1 binary integer (3)"),
        ("!!int '1:30'", "'1:30' reads as a YAML 1.1 base-60 number (90)"),
        ("!!str {a: 1}", "invalid value: a mapping cannot be read as !!str"),
        ("!!int [1]", "invalid value: a list cannot be read as !!int"),
        ("!!seq {a: 1}", "invalid value: a mapping cannot be read as !!seq"),
        ("!!null '5'", "invalid value: '5' cannot be read as !!null"),
    ],
)
def test_an_explicit_tag_does_not_read_a_number_in_another_base_or_a_collection_silently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, expected: str
) -> None:
    """`seed: !!int '010'` was seed 8 and `!!int '0x10'` 16 (a quoted scalar escaped the non-decimal
    check, though the tag reads it as YAML 1.1 does), and a tag on a mapping or list (`!!str {a: 1}`)
    was ignored: the value was the mapping, and `!!null` made any text null. All are refused at the value's line and column."""
    path = write_recipe(tmp_path, f"seed: {value}\n" + BARE)
    err = _errors(path, capsys)
    assert f"recipe.yaml:1:7: {expected}" in err, err
    # decimal numbers under a tag, and tags that match their value, still read as before
    path.write_text("seed: !!int '10'\n" + BARE)
    assert load_recipe(path).seed == 10
    path.write_text("seed: !!int 0\ndescription: !!str 2020-01-01\n" + BARE)
    recipe = load_recipe(path)
    assert (recipe.seed, recipe.description) == (0, "2020-01-01")


def test_a_whole_stages_override_does_not_add_a_stage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`stages.fitt={...}` is refused (no such stage), but `stages={fit: {...}, fitt: {...}}` added the
    misspelt stage, which then ran as a stage of its own; so did `stages={...}` on a recipe without stages.
    A stage the files do not write is refused however the override names it; replacing one is as before."""
    stage = "{kind: testing.fit, task: toy/agreement}"
    path = write_recipe(tmp_path, BARE)
    err = _errors(path, capsys, f"stages={{fit: {stage}, fitt: {stage}}}")
    assert f"<override 1: stages={{fit: {stage}, fitt: {stage}}}>:1:" in err, err
    assert "override matches no stage 'fitt'; did you mean 'fit'?" in err, err
    err = _errors(path, capsys, f"stages={{other: {stage}}}")
    assert "override matches no stage 'other' (stages: fit)" in err, err
    empty = write_recipe(tmp_path, "name: t\nstages:\n", name="empty.yaml")
    err = _errors(empty, capsys, f"stages={{other: {stage}}}")
    assert "override matches no stage 'other' (the recipe writes no stage, and an override adds none)" in err, err
    # a stage the file writes may still be replaced, whole or inside `stages={...}`
    recipe = load_recipe(path, [f"stages={{fit: {stage}}}"])
    assert list(recipe.stages) == ["fit"] and recipe.stages["fit"].config.task.name == "toy/agreement"
    assert list(load_recipe(path, [f"stages.fit={stage}"]).stages) == ["fit"]

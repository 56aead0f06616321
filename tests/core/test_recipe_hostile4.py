"""Hostile recipes, fourth round: what `xfer show` says about a section overrides created, `${VAR:-default}`
with the variable set to nothing, and stage names that differ only in case."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.testing import make_host, write_recipe

from .recipes import BARE, testing_host  # noqa: F401 (autouse fixture)
from .recipes import validate_errors as _errors


def _show(path: Path, capsys: pytest.CaptureFixture[str], *overrides: str) -> str:
    from xfer.core import cli

    assert cli.main(["show", str(path), *overrides]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_show_names_every_override_that_created_a_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`train.lr=1e-3 train.steps=5` on a file without `train:` labelled the whole section, defaults and
    `steps` included, `override 'stages.fit.train.lr=1e-3'`: as if that one override had written it."""
    path = write_recipe(tmp_path, BARE)
    out = _show(path, capsys, "stages.fit.train.lr=1e-3", "stages.fit.train.steps=5")
    assert "    train:  # created by overrides 'stages.fit.train.lr=1e-3', 'stages.fit.train.steps=5'\n" in out, out
    assert "      steps: 5  # override 'stages.fit.train.steps=5'\n" in out, out
    assert "      batch_size: 16  # default\n" in out, out
    one = _show(path, capsys, "stages.fit.train.lr=1e-3")
    assert "    train:  # created by override 'stages.fit.train.lr=1e-3'\n" in one, one
    # a section an override gave whole is that override's, whatever keys later overrides add to it
    whole = _show(path, capsys, "stages.fit.train={lr: 1e-3}", "stages.fit.train.steps=5")
    assert "    train:  # override 'stages.fit.train={lr: 1e-3}'\n" in whole, whole


def test_a_default_replaces_a_variable_set_to_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`${VAR:-default}` took an empty VAR as its value, unlike a shell: `XFER_DATA= xfer run` (an empty
    line of an env file) turned `${XFER_DATA:-.}/base.yaml` into `/base.yaml`, another folder."""
    from xfer.core import cli

    write_recipe(tmp_path, BARE, name="base.yaml")
    path = write_recipe(tmp_path, "include: ${XFER_TEST_EMPTY:-.}/base.yaml\n")
    monkeypatch.setenv("XFER_TEST_EMPTY", "")
    assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err


def test_a_variable_set_to_nothing_without_a_default_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`${XFER_DATA}/base.yaml` with XFER_DATA set to "" read `/base.yaml`: the same silent move to another
    folder that an unset variable is refused for."""
    write_recipe(tmp_path, BARE, name="base.yaml")
    path = write_recipe(tmp_path, "include: ${XFER_TEST_EMPTY}/base.yaml\n")
    monkeypatch.setenv("XFER_TEST_EMPTY", "")
    err = _errors(path, capsys)
    assert f"{path.resolve()}:1:10: include: environment variable XFER_TEST_EMPTY is set to nothing" in err, err
    assert "the absolute path '/base.yaml'" in err, err
    # an empty prefix that leaves the path relative is what it says
    from xfer.core import cli

    path.write_text("include: ${XFER_TEST_EMPTY}base.yaml\n")
    assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err


def test_stage_names_that_differ_only_in_case_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stages `fit` and `Fit` passed: on macOS or Windows they are one folder of the run directory, so the
    second stage wrote its stage.json and checkpoints over the first's (tasks were refused so already)."""
    second = BARE.split("stages:\n", 1)[1].replace("  fit:", "  Fit:")
    path = write_recipe(tmp_path, BARE + second)
    err = _errors(path, capsys)
    assert f"{path.resolve()}:6:3: stages.Fit: stage names 'fit' and 'Fit' differ only in case" in err, err
    assert "1 problem found" in err, err


def test_an_explicitly_tagged_float_is_read_as_yaml_writes_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lr: !!float 1e-3` is the usual way to make PyYAML read `1e-3` as a number, and PyYAML reads the tagged
    text with Python's float(): the typo `!!float 1e-3_0` became 1e-30, silently."""
    path = write_recipe(tmp_path, BARE + "    train: {lr: !!float 1e-3_0}\n")
    err = _errors(path, capsys)
    assert f"{path.resolve()}:6:17: invalid value: '1e-3_0' cannot be read as !!float" in err, err


@pytest.mark.parametrize("text", ["infinity", "inf", "nan", "١.٥"])
def test_an_explicitly_tagged_float_is_no_python_spelling(text: str) -> None:
    """YAML writes infinity `.inf` and NaN `.nan`; `!!float infinity` was inf on any field, bounded or not."""
    from xfer.core.errors import RecipeError
    from xfer.core.recipes.yamlsrc import parse_text

    with pytest.raises(RecipeError, match=f"f:1:4: invalid value: '{text}' cannot be read as !!float"):
        parse_text(f"a: !!float {text}", "f")
    assert parse_text("a: !!float -.inf", "f").value["a"].value == float("-inf")


@pytest.mark.parametrize("text", ["!!int ١٠", '!!int "١٠"'])
def test_an_explicitly_tagged_int_takes_ascii_digits_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """`!!int ١٠` (Arabic-Indic digits) was read by int() as 10."""
    path = write_recipe(tmp_path, BARE + f"    train: {{steps: {text}}}\n")
    err = _errors(path, capsys)
    assert f"{path.resolve()}:6:20: invalid value: '١٠' cannot be read as !!int" in err, err


def test_explicitly_tagged_numbers_still_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xfer.core.recipes.recipe import load_recipe

    path = write_recipe(tmp_path, BARE + "    train: {lr: !!float 1e-3, steps: !!int 1_000, adam_eps: !!float .5e-6}\n")
    train = load_recipe(path).stages["fit"].config.train
    assert (train.lr, train.steps, train.adam_eps) == (1e-3, 1000, 5e-7)


INT_KEYS = """\
from dataclasses import dataclass, field


def run(ctx):
    pass


@dataclass
class Config:
    weights: dict[int, float] = field(default_factory=dict)
    names: dict[str, float] = field(default_factory=dict)
"""


def test_a_mapping_with_keys_other_than_strings_cannot_be_set_from_a_recipe(
    pkg: tuple[str, Path], tmp_path: Path
) -> None:
    """A plugin's `weights: dict[int, float]` got `{"3": 1.5}` from `weights: {3: 1.5}` (YAML keys are read as
    written): `weights[3]` failed at run time, `weights.get(3, 1.0)` silently took the default."""
    from xfer.core.errors import RecipeError
    from xfer.core.hookspecs import hookimpl
    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.recipes.schema import config_class_notes
    from xfer.core.specs import ComponentSpec

    name, directory = pkg
    (directory / "config.py").write_text(INT_KEYS)

    class Plugin:
        @hookimpl
        def xfer_stages(self) -> list:
            return [ComponentSpec("stage", "keys.s", f"{name}.config:run", "1", f"{name}.config:Config")]

    host = make_host()
    assert host.add_object(Plugin(), "keys").error is None
    recipe = write_recipe(tmp_path, "name: p\nstages:\n  s:\n    kind: keys.s\n    weights: {3: 1.5}\n")
    with pytest.raises(RecipeError) as invalid:
        load_recipe(recipe, [], host)
    assert f"{recipe.resolve()}:5:14: stages.s.weights: " in str(invalid.value)
    assert "type dict[int, float] cannot be set from a recipe" in str(invalid.value)
    notes = config_class_notes(host.config_class("stage", "keys.s"))
    assert notes == [("weights", "type dict[int, float] cannot be set from a recipe")], notes
    # string keys, and the field left at its default, are fine
    recipe.write_text("name: p\nstages:\n  s:\n    kind: keys.s\n    names: {a: 2}\n")
    assert load_recipe(recipe, [], host).stages["s"].config.names == {"a": 2.0}


def test_a_file_included_on_several_paths_is_read_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files that each include the next one twice read the last one 2**depth times: with twenty of them
    `xfer validate` hung, as on a YAML alias bomb (which is refused)."""
    from xfer.core import cli
    from xfer.core.recipes import recipe as recipe_module

    depth = 10
    for i in range(depth):
        write_recipe(tmp_path, f"include: [e{i + 1}.yaml, e{i + 1}.yaml]\n", name=f"e{i}.yaml")
    write_recipe(tmp_path, BARE.split("stages:\n", 1)[1].join(["stages:\n", ""]), name=f"e{depth}.yaml")
    path = write_recipe(tmp_path, "include: e0.yaml\nname: t\n")
    reads: list[str] = []
    parse_file = recipe_module.parse_file
    monkeypatch.setattr(recipe_module, "parse_file", lambda p, d=None: reads.append(p.name) or parse_file(p, d))
    assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err
    assert sorted(reads) == sorted(["recipe.yaml", *(f"e{i}.yaml" for i in range(depth + 1))]), len(reads)
    # an error below is reported once too, not read again on every path
    write_recipe(tmp_path, "stages: [\n", name=f"e{depth}.yaml")
    reads.clear()
    err = _errors(path, capsys)
    assert f"{tmp_path / f'e{depth}.yaml'}:2:1: YAML syntax error: " in err and "1 problem found" in err, err
    assert len(reads) == depth + 2, len(reads)

"""Hostile recipe values: numbers only in ASCII decimal as YAML writes them, a `FieldError` blaming a
list item by its index, and a key set by override inside a value the file wrote as a single name."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.config import FieldError
from xfer.testing import write_recipe

from .recipes import BARE, testing_host  # noqa: F401 (autouse fixture)
from .recipes import validate_errors as _errors


@pytest.mark.parametrize("text", ["1e-3_0", "١٠", "infinity", "1e-3e"])
def test_a_float_knob_is_not_read_by_pythons_float(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """`lr: 1e-3_0` became 1e-30 and `lr: ١٠` became 10 without a word: float() reads more than YAML."""
    path = write_recipe(tmp_path, BARE + f"    train: {{lr: {text}}}\n")
    err = _errors(path, capsys)
    assert f"{path.resolve()}:6:" in err and "stages.fit.train.lr" in err, err


@pytest.mark.parametrize("text", ["1_0e3_0", "٣"])
def test_an_int_knob_is_not_read_by_pythons_float(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    path = write_recipe(tmp_path, BARE + f"    train: {{steps: {text}}}\n")
    err = _errors(path, capsys)
    assert f"{path.resolve()}:6:" in err and "stages.fit.train.steps" in err, err


def test_plain_yaml_numbers_still_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The leniency kept: `3e-4` (a string to YAML 1.1) for a float, `1e2` for an int."""
    from xfer.core import cli

    path = write_recipe(tmp_path, BARE + "    train: {lr: 3e-4, steps: 1e2}\n")
    assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err


def test_field_error_with_a_list_index_does_not_crash() -> None:
    """`FieldError(("layers", 0), ...)` raised TypeError in its own __init__ joining the int."""
    exc = FieldError(("layers", 0), "too wide")
    assert exc.key == ("layers", "0")
    assert str(exc) == "layers.0: too wide"


def test_a_key_set_inside_a_name_says_how_to_write_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`task.train_size=3` on `task: toy/agreement` said "is a single value" and nothing more."""
    path = write_recipe(tmp_path, BARE.replace("{name: toy/agreement, train_size: 64, dev_size: 16}", "toy/agreement"))
    err = _errors(path, capsys, "stages.fit.task.train_size=3")
    assert "'stages.fit.task' is a single value, it has no key 'train_size'" in err, err
    assert "`stages.fit.task={name: toy/agreement, train_size: ...}`" in err, err

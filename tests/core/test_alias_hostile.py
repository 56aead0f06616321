"""Hostile checks of task aliases (`as:`) through the paths that key by task."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import PreflightError, check_data
from xfer.testing import write_recipe

from .lines_task import GOOD_LINES
from .recipes import ALIAS as RECIPE


def test_a_missing_split_of_an_alias_named_like_its_data_folder_points_at_the_recipe(
    tmp_path: Path, host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task blames a missing split with `DataError(self.name, 0, ...)`, and `self.name` is the
    alias. The pre-flight took that "path" for a file when it existed: with the alias `reviews`
    run beside its data folder `reviews/` (the docs' own example), the problem lost the recipe's
    file:line and was shown as `reviews: ...`, as if the folder were a broken file."""
    (tmp_path / "reviews").mkdir()
    (tmp_path / "reviews" / "train.tsv").write_text(GOOD_LINES)
    path = write_recipe(tmp_path, RECIPE)
    monkeypatch.chdir(tmp_path)  # where a user runs `xfer validate --data`: the folder `reviews` exists
    recipe = load_recipe(path, host=host)
    with pytest.raises(PreflightError) as caught:
        check_data(recipe, host)
    assert str(caught.value) == f"{path.resolve()}:4:11: stage 'fit', task 'reviews': no dev_file configured"


def test_an_alias_yaml_reads_as_a_boolean_says_so(tmp_path: Path, host, capsys: pytest.CaptureFixture[str]) -> None:
    """`as: no` (a dataset named "no") is `False` to YAML 1.1; the error said "bool False is not a
    task alias" without the hint every other string key gives: quote the word."""
    (tmp_path / "reviews").mkdir()
    (tmp_path / "reviews" / "train.tsv").write_text(GOOD_LINES)
    path = write_recipe(tmp_path, RECIPE.replace("as: reviews", "as: no"))
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "stages.fit.task.as: bool False (YAML reads no as false: write 'no' in quotes if you mean the word)" in err
    quoted = write_recipe(tmp_path / "quoted", RECIPE.replace("as: reviews", "as: 'no'"))
    (tmp_path / "quoted" / "reviews").mkdir()
    (tmp_path / "quoted" / "reviews" / "train.tsv").write_text(GOOD_LINES)
    assert load_recipe(quoted, host=host).stages["fit"].config.task.key == "no"


@pytest.fixture
def host(lines_host):
    """This module's tests take the `lines/cls` host as `host`."""
    return lines_host

"""The README's recipe example works when copied: a user's first contact must not be an error."""

from __future__ import annotations

import re

import pytest

from xfer.core.recipes.recipe import load_recipe
from xfer.testing import make_host

from .conftest import REPO, shared_data_dir


def readme_recipes() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return [block for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S) if "stages:" in block]


def test_readme_has_a_recipe_example() -> None:
    assert readme_recipes(), "README.md lost its ```yaml recipe example"


@pytest.mark.parametrize("index", range(len(readme_recipes())))
def test_readme_recipe_validates(index: int, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not shared_data_dir().is_dir():
        pytest.skip(f"the README example reads the datasets at {shared_data_dir()} (set XFER_DATA)")
    monkeypatch.setenv("XFER_DATA", str(shared_data_dir()))
    recipe = tmp_path / "my-experiment.yaml"
    recipe.write_text(readme_recipes()[index], encoding="utf-8")
    plan = load_recipe(recipe, host=make_host(autoload=True))
    assert list(plan.stages) == ["vocab", "finetune"]

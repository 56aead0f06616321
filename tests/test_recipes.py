"""Every recipe shipped in recipes/ validates (data-dependent ones when the datasets are present)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.recipes.recipe import load_recipe
from xfer.testing import make_host

from .conftest import REPO, shared_data_dir

RECIPES = sorted((REPO / "recipes").glob("*.yaml"))


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.name for r in RECIPES])
def test_recipe_validates(recipe: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = recipe.read_text()
    if "XFER_DATA" in text:
        if not shared_data_dir().is_dir():
            pytest.skip(f"{recipe.name} needs the datasets at {shared_data_dir()} (set XFER_DATA)")
        monkeypatch.setenv("XFER_DATA", str(shared_data_dir()))
    plan = load_recipe(recipe, host=make_host(autoload=True))
    assert plan.stages

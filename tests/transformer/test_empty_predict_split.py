"""A split the stage predicts must hold examples even for a task that skips the pre-flight's data check
(a hub download): transformer.finetune wrote a header-only prediction file for an empty test split."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import UserError
from xfer.core.toy.tasks import ToyPosTask
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.testing import toy_finetune_recipe

RECIPE = toy_finetune_recipe(
    "{name: toy/pos, train_size: 8, dev_size: 4, test_size: 0}",
    name="empty-test",
    seed=1,
    max_length=32,
    predict="[test]",
    steps=1,
    batch_size=4,
)


def test_an_empty_predicted_split_is_refused_by_the_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ToyPosTask, "check_data", lambda self, splits: [])  # as a task that skips the check
    recipe = write_recipe(tmp_path, RECIPE)
    with pytest.raises(UserError, match="toy/pos: the test set is empty"):
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    assert not list((tmp_path / "run").glob("finetune/**/test.tsv"))

"""Empty splits: a split a stage reads must hold examples, whichever split it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.config import FieldError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import PreflightError, check_data, preflight
from xfer.core.toy import ToyTaskConfig
from xfer.core.toy.tasks import ToyAgreementTask, ToyPosTask
from xfer.testing import make_host, write_recipe


def finetune(predict: str | None) -> str:
    """The toy fine-tuning recipe of these tests (an empty test split), predicting `predict` or nothing.
    xfer.transformer is imported here, not at the top: the other tests of this file need only xfer-core."""
    from xfer.transformer.testing import toy_finetune_recipe

    return toy_finetune_recipe(
        "{name: toy/pos, train_size: 8, dev_size: 4, test_size: 0}",
        max_length=32,
        predict=predict,
        steps=1,
        batch_size=4,
    )


def test_an_empty_test_split_that_is_read_is_a_problem_of_check_data() -> None:
    """A stage reads the test split only to predict it; an empty one passed the pre-flight (which
    flagged empty train and dev sets only) and `predict: [test]` wrote a header-only file."""
    task = ToyPosTask("toy/pos", ToyTaskConfig(train_size=4, dev_size=2, test_size=0))
    problems = [str(p) for p in task.check_data(("train", "dev", "test"))]
    assert problems == ["toy/pos: the test set is empty"]
    assert task.check_data(("train", "dev")) == []  # not read, not a problem


def test_predicting_an_empty_test_split_is_refused_before_training(tmp_path: Path) -> None:
    """The pre-flight names the stage, the task and the split at the stage's line of the recipe,
    and `xfer run` stops there (PreflightError, exit code 2) instead of training, then writing an
    empty prediction file without a word. Without `predict: [test]`, `test_size: 0` is fine."""
    host = make_host(autoload=True)
    path = write_recipe(tmp_path, finetune("[test]"))
    recipe = load_recipe(path, host=host)
    assert preflight(recipe, host) == [f"{path}:7:11: stage 'finetune', task 'toy/pos': the test set is empty"]
    with pytest.raises(PreflightError, match="the test set is empty"):
        check_data(recipe, host)
    unused = write_recipe(tmp_path / "unused", finetune(None))
    assert preflight(load_recipe(unused, host=host), host) == []


@pytest.mark.parametrize("key", ["train_size", "dev_size", "test_size"])
def test_a_negative_toy_size_built_in_python_is_a_field_error(key: str) -> None:
    """A negative size raised a bare ValueError; now a FieldError naming the key, like every other
    config check (the recipe validator reports those at the key's file:line). Zero stays allowed."""
    with pytest.raises(FieldError, match=rf"^{key}: must be at least 0, got -1$") as raised:
        ToyTaskConfig(**{key: -1})
    assert raised.value.key == (key,)
    assert ToyAgreementTask("a", ToyTaskConfig(train_size=0, dev_size=0, test_size=0)).examples("test") == []

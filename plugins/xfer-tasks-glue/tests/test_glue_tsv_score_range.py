"""glue/tsv's `score_range`: a recipe-defined regression task declares the range of its gold scores,
so fine-tuning scales its targets to [0, 1] exactly as glue/stsb's 0-5 are (METHODS.md). There was
no way to: a 1-100 rating trained an output layer initialised for ~[0, 1] on raw values, silently."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from xfer.core.config import FieldError
from xfer.core.errors import DataError, RecipeError
from xfer.core.plugins import set_default_host
from xfer.core.recipes.recipe import load_recipe
from xfer.tasks.glue.config import TsvTaskConfig
from xfer.tasks.glue.tasks import STSBTask, TsvTask
from xfer.testing import make_host, write_recipe
from xfer.transformer.testing import tiny_finetune_recipe

RATINGS = "text\tscore\nthe cat sat\t1\na dog ran far\t100\n"


@pytest.fixture(autouse=True)
def host():
    set_default_host(make_host(autoload=True, allow=["transformer", "glue", "toy"]))
    yield
    set_default_host(None)


def _task(tmp_path: Path, text: str = RATINGS, **config: object) -> TsvTask:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "train.tsv").write_text(text, encoding="utf-8")
    options = {"train": tmp_path / "train.tsv", "label_column": "score", "type": "regression", **config}
    return TsvTask("glue/tsv", TsvTaskConfig(**options))


def test_the_task_info_carries_the_score_range_as_stsb_does(tmp_path: Path) -> None:
    task = _task(tmp_path, score_range=[1, 100])
    assert task.info().extra["score_range"] == (1.0, 100.0)
    assert STSBTask("glue/stsb").info().extra["score_range"] == (0.0, 5.0)  # the same key, the same shape
    # without it, nothing is declared: objectives keep their default (0, 1), as before
    assert "score_range" not in _task(tmp_path / "other", text=RATINGS).info().extra


def test_fine_tuning_scales_the_targets_by_the_declared_range(tmp_path: Path) -> None:
    """The fine-tuning objective's batch holds targets in [0, 1] (1 -> 0, 100 -> 1), and its
    predictions are scaled back to the task's scale: it had trained on raw 1 and 100."""
    import torch

    from xfer.transformer.encoder import Encoder
    from xfer.transformer.objectives import SequenceObjective
    from xfer.transformer.presets import preset
    from xfer.transformer.tokenization import WordPieceTokenizer

    task = _task(tmp_path, score_range=[1, 100])
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat . a dog ran far .\n" * 10, encoding="utf-8")
    tokenizer = WordPieceTokenizer.train([corpus], 60, min_frequency=1)
    torch.manual_seed(0)
    encoder = Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1))
    objective = SequenceObjective(encoder, task.info(), tokenizer, 16, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every score is inside the range: no out-of-range warning
        batch = objective.collate(objective.featurize(task.examples("train")))
    assert batch["labels"].tolist() == pytest.approx([0.0, 1.0])
    objective.eval()
    with torch.no_grad():
        raw = objective.scores(batch).squeeze(-1).tolist()
        assert objective.predict(batch) == pytest.approx([1 + 99 * r for r in raw])


def test_a_score_outside_the_range_is_refused_at_its_line_as_stsb(tmp_path: Path) -> None:
    task = _task(tmp_path, text=RATINGS + "an owl\t101\n", score_range=[1, 100])
    with pytest.raises(DataError, match=r"train\.tsv:4: .*score 101\.0 outside \[1\.0, 100\.0\]"):
        task.examples("train")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"score_range": [5, 5]}, "low < high"),
        ({"score_range": [5, 0]}, "low < high"),
        ({"score_range": [0, float("inf")]}, "finite"),
        ({"score_range": [0, 5], "type": "classification", "labels": ["a", "b"]}, "regression tasks only"),
    ],
)
def test_a_bad_score_range_is_refused_at_its_key(tmp_path: Path, config: dict, expected: str) -> None:
    with pytest.raises(FieldError) as caught:
        _task(tmp_path, **config)
    assert caught.value.key == ("score_range",) and expected in caught.value.message


def test_a_recipe_with_score_range_on_a_classification_task_names_the_key_line(tmp_path: Path) -> None:
    (tmp_path / "train.tsv").write_text("text\tlabel\nthe cat\ta\na dog\tb\n", encoding="utf-8")
    task = "\n".join(
        [
            "{name: glue/tsv, train: train.tsv, label_column: label, labels: [a, b],",
            "         score_range: [0, 5]}",
        ]
    )
    path = write_recipe(tmp_path, tiny_finetune_recipe(task))
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    line = next(n for n, text in enumerate(path.read_text().splitlines(), start=1) if "score_range:" in text)
    message = str(caught.value)
    assert f"{path}:{line}:" in message and "stages.fit.tasks.0.score_range" in message, message
    assert "regression tasks only" in message, message


def test_a_recipe_score_range_reaches_the_task(tmp_path: Path) -> None:
    (tmp_path / "train.tsv").write_text(RATINGS, encoding="utf-8")
    task = "{name: glue/tsv, train: train.tsv, label_column: score, type: regression, score_range: [1, 100]}"
    recipe = load_recipe(write_recipe(tmp_path, tiny_finetune_recipe(task)))
    config = recipe.stages["fit"].config.tasks[0].config
    assert config.score_range == (1.0, 100.0)


def test_unscaled_scores_outside_0_1_are_warned_about(tmp_path: Path) -> None:
    """Without score_range the scores are trained on as they are (today's behaviour, kept), but 1-100
    ratings did so without a word."""
    task = _task(tmp_path)
    with pytest.warns(UserWarning, match=r"glue/tsv: 1 of 2 training scores lie outside \[0, 1\].*score_range"):
        task.examples("train")
    inside = _task(tmp_path / "other", text="text\tscore\nthe cat\t0.2\na dog\t1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inside.examples("train")

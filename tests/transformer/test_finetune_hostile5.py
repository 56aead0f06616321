"""Hostile review of transformer.finetune, fifth round (multi-task stages, span-QA windows, the
ELECTRA fine-tuning protocol): defects found and pinned (each test failed before its fix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from xfer.core import cli
from xfer.core.errors import UserError
from xfer.core.plugins import set_default_host
from xfer.core.tasks import Answer, SpanQAExample, TaskInfo
from xfer.testing import make_host, write_recipe
from xfer.transformer.encoder import Encoder
from xfer.transformer.objectives import SequenceObjective, SpanQAConfig, SpanQAObjective, TaggingObjective
from xfer.transformer.presets import preset
from xfer.transformer.tokenization import WordPieceTokenizer


@pytest.fixture(autouse=True)
def host():
    set_default_host(make_host(autoload=True, allow=["transformer", "squad", "glue"]))
    yield
    set_default_host(None)


def _tokenizer(tmp_path: Path) -> WordPieceTokenizer:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat . a dog ran far away .\n" * 20)
    return WordPieceTokenizer.train([corpus], 120, min_frequency=1)


def _encoder(tokenizer: WordPieceTokenizer, **overrides: float) -> Encoder:
    torch.manual_seed(0)
    return Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1, **overrides))


SQUAD = SpanQAExample("q1", "where is the cat", "the cat sat on the mat", (Answer("mat", 19),))


def test_a_span_qa_max_length_without_room_for_a_window_says_how_long_it_must_be(tmp_path: Path) -> None:
    """`max_length: 3` (the stage's lower bound, enough for a sentence or a tagged word) holds no
    question window: the span-QA objective told the user to "set the objective's max_query_length
    to at most -1", even for a question cut to 0 tokens. Now it names the max_length that fits."""
    tokenizer = _tokenizer(tmp_path)
    info = TaskInfo("squad/v1", "span_qa", (), "f1")
    for max_query_length in (64, 0):
        objective = SpanQAObjective(
            _encoder(tokenizer), info, tokenizer, 3, SpanQAConfig(max_query_length=max_query_length)
        )
        with pytest.raises(UserError, match=r"max_length=3 .* set max_length to at least 4") as error:
            objective.featurize([SQUAD])
        assert "-1" not in str(error.value)
    # 4 is enough: an empty question, [SEP], one context token per window
    fits = SpanQAObjective(_encoder(tokenizer), info, tokenizer, 4, SpanQAConfig(max_query_length=0))
    assert all(len(f["input_ids"]) <= 4 for f in fits.featurize([SQUAD]))


def _squad_recipe(tmp_path: Path, max_length: int) -> Path:
    document = {
        "version": "1.1",
        "data": [
            {
                "title": "t",
                "paragraphs": [
                    {
                        "context": SQUAD.context,
                        "qas": [
                            {"id": "q1", "question": SQUAD.question, "answers": [{"text": "mat", "answer_start": 19}]}
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "squad.json").write_text(json.dumps(document))
    return write_recipe(
        tmp_path,
        f"""name: t
stages:
  corpus: {{kind: toy.corpus, sentences: 50}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 100}}
  qa:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    max_length: {max_length}
    tasks: [{{name: squad/v1, train_file: squad.json, dev_file: squad.json}}]
""",
    )


def test_a_span_qa_task_with_a_max_length_below_a_window_is_refused_before_any_stage_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`max_length: 3` passed validation and the pre-flight (its bound, 3, is the sentence and tagging
    tasks'), so a recipe ran its corpus, vocabulary and every task before the span-QA one, which
    then stopped the stage. The pre-flight refuses it now, naming the task and the length needed."""
    assert cli.main(["validate", "--data", str(_squad_recipe(tmp_path, 3))]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "stage 'qa': max_length 3 cannot hold a question window of squad/v1 (span QA)" in err
    assert "need max_length 4 or more" in err
    assert cli.main(["validate", "--data", str(_squad_recipe(tmp_path, 4))]) == 0


def _weights_std(module: torch.nn.Module) -> float:
    return torch.cat([p.detach().flatten() for n, p in module.named_parameters() if n.endswith("weight")]).std().item()


@pytest.mark.parametrize("kind", ["classification", "regression", "tagging", "span_qa"])
def test_task_heads_are_initialised_with_the_encoders_initializer_range(tmp_path: Path, kind: str) -> None:
    """ELECTRA draws its task layers with `create_initializer(config.initializer_range)` (HF's
    `_init_weights` likewise); the fine-tuning heads took their own 0.02 whatever the encoder's
    `initializer_range` was, so `encoder: {initializer_range: 0.2}` reached every encoder weight
    but not the new classifier, and the saved head's config said 0.02."""
    tokenizer = _tokenizer(tmp_path)
    objective_class = {"tagging": TaggingObjective, "span_qa": SpanQAObjective}.get(kind, SequenceObjective)
    labels = ("a", "b", "c") if kind in ("classification", "tagging") else ()
    info = TaskInfo("t", kind, labels, "accuracy")
    wide = objective_class(_encoder(tokenizer, initializer_range=0.2), info, tokenizer, 32, None)
    assert wide.head.config()["initializer_range"] == pytest.approx(0.2)
    assert _weights_std(wide.head) > 0.1  # truncated at 2 std: ~0.88 x 0.2; it was ~0.018
    usual = objective_class(_encoder(tokenizer), info, tokenizer, 32, None)  # the presets' 0.02: unchanged
    assert usual.head.config()["initializer_range"] == pytest.approx(0.02)
    assert _weights_std(usual.head) < 0.03


def test_a_classification_task_with_a_single_label_is_refused_not_trained_to_100_percent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """glue/tsv accepted `labels: [pos]`: the cross-entropy over one class is 0 whatever the model
    says, so every step had a zero gradient, nothing trained, and the report gave 100% accuracy.
    The pre-flight now refuses it, naming the task (and the objective does, for stages without it)."""
    (tmp_path / "one.tsv").write_text("text\tlabel\nthe cat\tpos\na dog\tpos\n")
    task = "{name: glue/tsv, as: one, train: one.tsv, dev: one.tsv, text_a_column: text, label_column: label, "
    recipe = """name: t
stages:
  corpus: {kind: toy.corpus, sentences: 50}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 100}
  fit:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    tasks: [TASK]
"""
    single = write_recipe(tmp_path, recipe.replace("TASK", task + "labels: [pos]}"))
    assert cli.main(["validate", "--data", str(single)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "stage 'fit': one: a classification task needs at least two labels" in err and "['pos']" in err
    two = write_recipe(tmp_path, recipe.replace("TASK", task + "labels: [neg, pos]}"))
    assert cli.main(["validate", "--data", str(two)]) == 0
    tokenizer = _tokenizer(tmp_path)
    with pytest.raises(UserError, match=r"one: a classification task needs at least two labels"):
        SequenceObjective(
            _encoder(tokenizer), TaskInfo("one", "classification", ("pos",), "accuracy"), tokenizer, 8, None
        )

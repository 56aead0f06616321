"""Fine-tuning objectives against heads of the wrong shape and splits that disagree on pairs.

A head (a plugin objective's own, or one built from the head registry) whose output does not fit
the task failed with torch's bare IndexError in the loss (too few classes) or trained silently (too
many); and a dev/test split without the second text of a pair task was encoded as single sentences
without a word."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import Tensor, nn

from xfer.core.errors import PluginError, UserError
from xfer.core.tasks import Answer, SentenceExample, SpanQAExample, TaggingExample, TaskInfo
from xfer.transformer.encoder import Encoder
from xfer.transformer.heads import SequenceHead, SpanQAHead, SpanQAOutput, TokenHead
from xfer.transformer.objectives import SequenceObjective, SpanQAObjective, TaggingObjective
from xfer.transformer.presets import preset
from xfer.transformer.tokenization import WordPieceTokenizer

LABELS = ("a", "b", "c", "d")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> WordPieceTokenizer:
    corpus = tmp_path_factory.mktemp("corpus") / "c.txt"
    corpus.write_text("the cat sat on the mat . a dog ran far away .\n" * 20)
    return WordPieceTokenizer.train([corpus], 80, min_frequency=1)


def _encoder(tokenizer: WordPieceTokenizer) -> Encoder:
    torch.manual_seed(0)
    return Encoder(
        preset(
            "tiny",
            vocab_size=tokenizer.vocab_size,
            num_layers=1,
            hidden_size=16,
            num_heads=2,
            embedding_size=16,
            intermediate_size=32,
        )
    )


class PluginHead(nn.Module):
    """What a plugin's head looks like to an objective: a module with a registered kind."""

    kind = "acme.pooled_head"

    def __init__(self, hidden: int, outputs: int):
        super().__init__()
        self.out = nn.Linear(hidden, outputs)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.out(hidden.mean(1))


def _sentences() -> list[SentenceExample]:
    return [SentenceExample("train-0", "the cat", "a dog", "d"), SentenceExample("train-1", "a dog", "the mat", "a")]


@pytest.mark.parametrize("outputs", [3, 5])
def test_a_classification_head_with_the_wrong_number_of_classes_is_a_plugin_error(
    tokenizer: WordPieceTokenizer, outputs: int
) -> None:
    """3 outputs for 4 labels was "IndexError: Target 3 is out of bounds"; 5 trained silently and could
    predict class 4, which has no label."""
    info = TaskInfo("acme/four", "classification", LABELS, "accuracy")
    objective = SequenceObjective(_encoder(tokenizer), info, tokenizer, 16, None)
    objective.head = PluginHead(16, outputs)
    batch = objective.collate(objective.featurize(_sentences()))
    for call in (objective, objective.predict):
        with pytest.raises(PluginError) as caught:
            call(batch)
        message = str(caught.value)
        assert message.startswith("acme/four: the head PluginHead (acme.pooled_head) of objective SequenceObjective")
        assert f"shape (2, {outputs})" in message and "needs shape (2, 4)" in message, message
        assert "4 labels ['a', 'b', 'c', 'd']" in message, message


def test_a_regression_head_must_give_one_output_per_example(tokenizer: WordPieceTokenizer) -> None:
    """Two outputs on a regression task broadcast against the targets in the MSE loss (a warning at
    best, a wrong loss at worst) and predicted pairs of numbers; a squeezed [B] output crashed on one example."""
    info = TaskInfo("acme/sts", "regression", (), "pearson", extra={"score_range": (0.0, 5.0)})
    objective = SequenceObjective(_encoder(tokenizer), info, tokenizer, 16, None)
    batch = objective.collate(objective.featurize([SentenceExample("s0", "the cat", "a dog", 3.0)]))
    objective.head = PluginHead(16, 2)
    with pytest.raises(PluginError, match=r"acme/sts: .*shape \(1, 2\).*regression task needs shape \(1, 1\)"):
        objective(batch)
    objective.head = SequenceHead(16, 1)  # the right shape still trains and predicts
    assert objective(batch).loss.isfinite()
    assert len(objective.predict(batch)) == 1


def test_a_tagging_head_with_the_wrong_tag_count_is_a_plugin_error(tokenizer: WordPieceTokenizer) -> None:
    info = TaskInfo("acme/ner", "tagging", ("B", "I", "O"), "f1")
    objective = TaggingObjective(_encoder(tokenizer), info, tokenizer, 16, None)
    batch = objective.collate(objective.featurize([TaggingExample("t0", ("the", "cat", "sat"), ("B", "I", "O"))]))
    objective.head = TokenHead(16, 2)  # tag "O" (index 2) was out of bounds in the loss
    with pytest.raises(PluginError, match=r"acme/ner: the head TokenHead \(token\) .*shape \(1, 3, 2\).*\(1, 3, 3\)"):
        objective(batch)
    objective.head = TokenHead(16, 5)  # two logits no tag has: trained silently before
    with pytest.raises(PluginError, match=r"needs shape \(1, 3, 3\)"):
        objective.predict(batch)
    objective.head = TokenHead(16, 3)
    assert [len(tags) for tags in objective.predict(batch)] == [3]


class PackedQAHead(SpanQAHead):
    """A span-QA head that returns the raw [B, T, 2] logits instead of a SpanQAOutput."""

    def forward(self, hidden: Tensor, allowed: Tensor | None = None, start_positions: Tensor | None = None) -> Any:
        return self.qa_outputs(hidden)


class ShortQAHead(SpanQAHead):
    """A span-QA head whose logits cover one token fewer than the window."""

    def forward(self, hidden: Tensor, allowed: Tensor | None = None, start_positions: Tensor | None = None) -> Any:
        out = super().forward(hidden, allowed, start_positions)
        return SpanQAOutput(out.start_logits[:, :-1], out.end_logits[:, :-1], out.na_logit)


def test_a_span_qa_head_must_give_start_and_end_logits_per_token(tokenizer: WordPieceTokenizer) -> None:
    info = TaskInfo("acme/qa", "span_qa", (), "f1")
    objective = SpanQAObjective(_encoder(tokenizer), info, tokenizer, 32, None)
    example = SpanQAExample("q0", "where ?", "the cat sat on the mat .", (Answer("the mat", 15),))
    batch = objective.collate(objective.featurize([example]))
    tokens = batch["input_ids"].shape[1]
    objective.head = PackedQAHead(16)
    with pytest.raises(
        PluginError, match=r"acme/qa: the head PackedQAHead \(span_qa\) .*returned a Tensor.*SpanQAOutput"
    ):
        objective(batch)
    objective.head = ShortQAHead(16)
    expected = rf"shape \(1, {tokens - 1}\) as its start_logits, but this span_qa task needs shape \(1, {tokens}\)"
    with pytest.raises(PluginError, match=expected):
        objective(batch)
    with pytest.raises(PluginError, match=expected), torch.no_grad():
        objective.predict(batch)
    objective.head = SpanQAHead(16)
    assert objective(batch).loss.isfinite()
    with torch.no_grad():
        assert len(objective.predict(batch)) == 1


def test_a_split_without_the_second_text_of_a_pair_task_is_refused(tokenizer: WordPieceTokenizer) -> None:
    """A prediction-only test split whose reader left out text_b was encoded as single sentences (no
    [SEP] between the texts, token type 0 throughout) under a model trained on pairs, silently."""
    info = TaskInfo("acme/nli", "classification", LABELS, "accuracy")
    objective = SequenceObjective(_encoder(tokenizer), info, tokenizer, 16, None)
    assert objective.featurize([]) == []  # an empty split decides nothing
    objective.featurize(_sentences())  # training: pairs
    objective.featurize([SentenceExample("dev-0", "the cat", "the mat", "b")])  # pairs again: fine
    assert objective.featurize([]) == []
    test = [SentenceExample("test-0", "the cat", None, None), SentenceExample("test-1", "a dog", None, None)]
    with pytest.raises(
        UserError,
        match=r"acme/nli: the split whose first example is 'test-0' \(2 examples\) has no "
        r"second text \(text_b is None in every example\), but the task's training examples are "
        "sentence pairs",
    ):
        objective.featurize(test)


def test_a_pair_split_under_a_model_trained_on_single_texts_is_refused(tokenizer: WordPieceTokenizer) -> None:
    info = TaskInfo("acme/cola", "classification", LABELS, "accuracy")
    objective = SequenceObjective(_encoder(tokenizer), info, tokenizer, 16, None)
    objective.featurize([SentenceExample("train-0", "the cat", None, "a")])
    dev = [SentenceExample("dev-0", "the cat", None, "a"), SentenceExample("dev-1", "a dog", "the mat", "b")]
    with pytest.raises(
        UserError,
        match=r"acme/cola: the split whose first example is 'dev-0' \(2 examples\) has "
        r"sentence pairs \(text_b given, first in 'dev-1'\), but the task's training examples are single",
    ):
        objective.featurize(dev)

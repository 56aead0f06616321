"""Fidelity of `transformer.span_qa` to ELECTRA's SQuAD fine-tuning (finetune/qa/qa_tasks.py):
each test failed before its fix."""

from __future__ import annotations

from pathlib import Path

from xfer.core.tasks import Answer, SpanQAExample, TaskInfo
from xfer.transformer.encoder import Encoder
from xfer.transformer.objectives import SpanQAConfig, SpanQAObjective
from xfer.transformer.presets import preset
from xfer.transformer.tokenization import WordPieceTokenizer

CONTEXT = "the cat sat on the mat . a dog ran to the park . the bird hid in a tree ."


def _objective(tmp_path: Path, info: TaskInfo, **knobs: object) -> SpanQAObjective:
    corpus = tmp_path / "c.txt"
    corpus.write_text((CONTEXT + " who sat ran hid where ?\n") * 20)
    tokenizer = WordPieceTokenizer.train([corpus], 120, min_frequency=1)
    encoder = Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1))
    # 16 tokens: [CLS] + 3 question tokens + [SEP] ... [SEP] leaves 10 per window, 4 apart
    return SpanQAObjective(encoder, info, tokenizer, 16, SpanQAConfig(doc_stride=4, **knobs))  # type: ignore[arg-type]


def test_answerability_label_is_the_questions_in_every_window(tmp_path: Path) -> None:
    """ELECTRA labels each window's `_is_impossible` with the question's own `is_impossible`
    (a window without the answer points its span at [CLS] but stays "answerable"). xfer labelled
    every window that missed the answer "unanswerable" (on SQuAD 1.1 too), so the answerability
    classifier was trained on whether a window covers the answer."""
    info = TaskInfo("squad/v2", "span_qa", (), "f1", extra={"unanswerable": True})
    objective = _objective(tmp_path, info, answerable=True)
    answerable = SpanQAExample("a", "who sat ?", CONTEXT, (Answer("the cat", 0),))
    impossible = SpanQAExample("n", "who ran ?", CONTEXT, (), is_impossible=True)
    features = objective.featurize([answerable, impossible])
    windows = [f for f in features if f["id"] == "a"]
    assert len(windows) > 2
    assert [f["start"] > 0 for f in windows].count(True) == 1  # only the first window has "the cat"
    assert all(f["start"] == f["end"] == 0 for f in windows[1:])  # the others point at [CLS] ...
    assert [f["impossible"] for f in windows] == [0] * len(windows)  # ... but are answerable
    assert all(f["impossible"] == 1 and f["start"] == 0 for f in features if f["id"] == "n")


def test_an_answer_covering_no_token_is_left_out_of_training_with_a_warning(tmp_path: Path) -> None:
    """An answer made only of characters the tokenizer drops ("\\u200b") has no token span: it was
    silently trained as "no answer" ([CLS]). run_squad skips such a question with "Could not find
    answer"; now its windows are marked unlabelled, dropped from the loss, and a warning counts them."""
    import pytest
    import torch

    context = "the cat \u200b sat on the mat ."
    info = TaskInfo("squad/v1", "span_qa", (), "f1")
    objective = _objective(tmp_path, info)
    bad = SpanQAExample("z", "who sat ?", context, (Answer("\u200b", context.index("\u200b")),))
    good = SpanQAExample("g", "who sat ?", context, (Answer("the cat", 0),))
    with pytest.warns(UserWarning, match=r"1 question\(s\) have an answer that covers no token.*'z'"):
        features = objective.featurize([bad, good])
    assert [f["labelled"] for f in features if f["id"] == "z"] == [0] * sum(f["id"] == "z" for f in features)
    assert all(f["labelled"] == 1 for f in features if f["id"] == "g")
    objective.eval()  # no dropout: the two losses are comparable
    both = objective(objective.collate(features)).loss
    alone = objective(objective.collate([f for f in features if f["id"] == "g"])).loss
    assert torch.allclose(both, alone)  # the unmapped question adds nothing to the loss
    only_bad = objective(objective.collate([f for f in features if f["id"] == "z"])).loss
    assert float(only_bad.detach()) == 0.0 and only_bad.requires_grad

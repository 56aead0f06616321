"""Adversarial tests of the toy language, second round: each pins a defect found by a hostile
review (it failed before the fix) or guards the fix."""

from __future__ import annotations

import random

import pytest

from xfer.core.errors import DataError
from xfer.core.toy import ToyPosTask, ToySentence, ToyTaskConfig
from xfer.core.toy import tasks as toy_tasks


def test_a_nearly_exhausted_grammar_is_an_error_not_an_hours_long_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """max_words=4 holds a few thousand distinct sentences per split. Asking for far more never hit
    the miss streak: each rare new sentence reset it, so the error came after hours. Now a window
    of draws that is almost all repeats ends the stream too. (`_MAX_MISSES` is lowered and draws
    are capped only to keep the test fast; the old code needed far more than the cap.)"""
    monkeypatch.setattr(toy_tasks, "_MAX_MISSES", 300)
    task = ToyPosTask("toy/pos", ToyTaskConfig(train_size=100_000, dev_size=1, test_size=0, max_words=4))
    draws = 0
    sentence = task.grammar.sentence

    def counted(rng: random.Random) -> ToySentence:
        nonlocal draws
        draws += 1
        if draws > 100_000:
            raise AssertionError("still drawing after 100000 sentences: the exhausted split never ends")
        return sentence(rng)

    monkeypatch.setattr(task.grammar, "sentence", counted)
    with pytest.raises(DataError, match=r"train_size: asks for 100000 distinct train sentences.*only \d+ new ones"):
        task.examples("train")


def test_the_yield_limit_leaves_a_small_grammar_that_still_has_room_alone() -> None:
    """The new limit only ends streams that are nearly exhausted: 1,500 sentences of at most four
    tokens (about a third of what the split holds) still come out, distinct and in the split."""
    task = ToyPosTask("toy/pos", ToyTaskConfig(train_size=1500, dev_size=1, test_size=0, max_words=4))
    texts = [" ".join(example.words) for example in task.examples("train")]
    assert len(texts) == len(set(texts)) == 1500
    assert all(len(text.split()) <= 4 and toy_tasks.split_of(text) == "train" for text in texts)

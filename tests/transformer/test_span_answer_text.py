"""Span-QA answer text recovery: characters the tokenizer drops must stay in the answer."""

import pytest

from xfer.transformer.objectives import _past_marks


@pytest.mark.parametrize("mark", ["\u00ad", "\u200e", "\u200b", "\u200d"])
def test_past_marks_keeps_trailing_format_characters(mark: str) -> None:
    context = f"the mat{mark} is red"
    assert context[4 : _past_marks(context, 7)] == f"mat{mark}"


def test_past_marks_keeps_combining_then_format() -> None:
    context = "mate\u0301\u00ad x"
    assert context[: _past_marks(context, 4)] == "mate\u0301\u00ad"


def test_past_marks_stops_at_plain_characters() -> None:
    context = "mat is"
    assert _past_marks(context, 3) == 3

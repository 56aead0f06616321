"""Fitting token sequences into `max_length`: pair truncation, tagging windows, QA doc-stride spans.

Pure arithmetic on lengths and offsets, with no `tokenizers` dependency, so each function can
follow the reference it must match (`tokenizers`' `truncate_encodings`, Google's `run_squad.py`)
and be checked on plain integers.
"""

from __future__ import annotations

from typing import Literal

TruncationStrategy = Literal["longest_first", "only_first", "only_second"]
_STRATEGIES: tuple[str, ...] = ("longest_first", "only_first", "only_second")


def _truncated_lengths(n_a: int, n_b: int | None, budget: int, strategy: str) -> tuple[int, int]:
    """How many pieces of text a and b to keep; a transcription of `tokenizers`' `truncate_encodings`.

    `longest_first` keeps the shorter text whole when the longer one can absorb the cut, else
    gives each half the budget (the extra token of an odd budget to the longer text, or to the
    second when both are equally long). `only_first`/`only_second` cut one text and fail when
    that would take all of it.
    """
    total = n_a + (n_b or 0)
    if total <= budget:
        return n_a, n_b or 0
    if strategy == "longest_first":
        if n_b is None:
            return budget, 0
        swap = n_a > n_b
        short, long = (n_b, n_a) if swap else (n_a, n_b)
        long = short if short > budget else max(short, budget - short)
        if short + long > budget:
            short = budget // 2
            long = short + budget % 2
        keep_a, keep_b = (long, short) if swap else (short, long)
        return min(n_a, keep_a), min(n_b, keep_b)
    if strategy == "only_second" and n_b is None:
        raise ValueError("truncation='only_second' needs a second text to cut")
    target = n_a if strategy == "only_first" else n_b or 0
    remove = total - budget
    if target <= remove:
        raise ValueError(
            f"truncation={strategy!r} cannot fit the pair in {budget} pieces: "
            f"the text to cut has {target} and {remove} must go"
        )
    return (n_a - remove, n_b or 0) if strategy == "only_first" else (n_a, target - remove)


def _word_budget(max_length: int) -> int:
    if max_length < 3:
        raise ValueError(f"max_length={max_length} cannot hold [CLS], one word piece and [SEP]")
    return max_length - 2


def _fit_words(pieces: list[list[int]], start: int, budget: int) -> int:
    """End (exclusive) of the longest run of words from `start` whose pieces fit in `budget`.

    Always takes at least one word (it gets cut to `budget` pieces), so windows always advance.
    """
    used = 0
    end = start
    while end < len(pieces) and (end == start or used + len(pieces[end]) <= budget):
        used += len(pieces[end])
        end += 1
    return end


def _windows(pieces: list[list[int]], budget: int) -> list[tuple[int, int]]:
    if not pieces:
        return [(0, 0)]
    windows = []
    start = 0
    while start < len(pieces):
        end = _fit_words(pieces, start, budget)
        windows.append((start, end))
        start = end
    return windows


def _doc_spans(num_tokens: int, room: int, stride: int) -> list[tuple[int, int]]:
    """`(start, length)` windows over the context tokens, as in Google's run_squad.py.

    An empty context still gets one (empty) window so that every example yields a feature.
    """
    spans = []
    start = 0
    while True:
        length = min(num_tokens - start, room)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, stride)


def _max_context_spans(spans: list[tuple[int, int]], num_tokens: int) -> list[int]:
    """For every context token, the window giving it the most context (run_squad.py's rule).

    Score = min(tokens to the left, tokens to the right) + 0.01 * window length; the first window
    wins ties.
    """
    best = [-1] * num_tokens
    best_score = [float("-inf")] * num_tokens
    for index, (start, length) in enumerate(spans):
        for position in range(start, start + length):
            score = min(position - start, start + length - 1 - position) + 0.01 * length
            if score > best_score[position]:
                best[position], best_score[position] = index, score
    return best


def _answer_token_span(
    offsets: list[tuple[int, int]], answer: tuple[int, int], context_length: int
) -> tuple[int, int] | None:
    """First and last context token overlapping `[start_char, end_char)`, or None if none does."""
    start_char, end_char = answer
    if not 0 <= start_char < end_char <= context_length:
        raise ValueError(f"answer span {answer} is not a non-empty span of the {context_length}-character context")
    covered = [i for i, (start, end) in enumerate(offsets) if start < end_char and end > start_char]
    if not covered:
        return None
    return covered[0], covered[-1]

"""Builders shared by the CVT tests: a tiny vocabulary, encoder and batches made of real words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from xfer.cvt.config import PRESETS
from xfer.cvt.data import Featurizer
from xfer.cvt.model import WordEncoder
from xfer.cvt.vocab import build_vocab

WORDS = [
    "the",
    "dog",
    "runs",
    "near",
    "a",
    "house",
    ".",
    "bob",
    "and",
    "mary",
    "saw",
    "paris",
    "yesterday",
    ";",
    "it",
    "was",
    "very",
    "big",
]


class Kit:
    """A tiny encoder over a fixed vocabulary, and helpers to encode sentences."""

    def __init__(self, packed: bool = False, sizes: dict[str, Any] | None = None):
        torch.manual_seed(0)
        self.sizes = {**PRESETS["tiny"], **(sizes or {})}
        self.vocab = build_vocab(WORDS, None, lowercase=True, min_count=1, unlabeled_words=0, char_min_count=1)
        self.featurizer = Featurizer(self.vocab, self.sizes["max_word_chars"])
        self.encoder = WordEncoder(self.sizes, len(self.vocab.words), len(self.vocab.chars), packed=packed).eval()

    def batch(self, sentences: list[list[str]]) -> dict[str, torch.Tensor]:
        return self.featurizer.inputs(sentences)

    def states(self, sentences: list[list[str]], p: float = 0.0) -> Any:
        return self.encoder(self.batch(sentences), p)


@pytest.fixture
def kit() -> Callable[..., Kit]:
    return Kit


@pytest.fixture
def sentences() -> list[list[str]]:
    """Two sentences of different lengths (9 and 7 words)."""
    return [
        ["bob", "saw", "the", "dog", "near", "a", "big", "house", "."],
        ["mary", "runs", ";", "it", "was", "very", "big"],
    ]

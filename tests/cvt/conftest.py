"""Builders shared by the CVT tests: a tiny vocabulary, encoder and batches made of real words."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
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


@pytest.fixture(autouse=True, scope="module")
def _lean_runs() -> Any:
    """Tiny models on one thread (a second OpenMP thread only spins on these sizes, and burns a
    shared machine's CPU: ~10x the CPU time of a subprocess run), and runs skip report.md's
    matplotlib curves (~0.3 s of CPU per metric, not under test here): in-process by a patch, in
    subprocesses (`run_cli`, torchrun) through the `cvt_quiet_reports` plugin module.
    Module-scoped, so the tests of other directories keep their threads and plots."""
    here = str(Path(__file__).parent)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    modules = [m for m in os.environ.get("XFER_PLUGIN_MODULES", "").split(",") if m]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("xfer.core.report._plot", lambda *args, **kwargs: None)
        patch.setenv("XFER_PLUGIN_MODULES", ",".join([*modules, "cvt_quiet_reports"]))
        patch.setenv("PYTHONPATH", os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
        patch.setenv("OMP_NUM_THREADS", "1")
        yield
    torch.set_num_threads(threads)


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

"""Unlabelled toy text: documents of sentences for pre-training corpora and vocabularies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from xfer.core.atomic import atomic_path
from xfer.core.toy.grammar import ToyGrammar, ToyGrammarConfig
from xfer.core.toy.rng import derive_rng

# ---------------------------------------------------------------------------------------------
# Unlabelled text.
# ---------------------------------------------------------------------------------------------


def generate_text(
    n_sentences: int,
    seed: int | None = None,
    sentences_per_document: int = 8,
    config: ToyGrammarConfig | None = None,
) -> list[list[str]]:
    """`n_sentences` sentences (space-separated tokens) grouped into documents.

    Documents are consecutive groups of `sentences_per_document` (the last may be shorter), so
    pre-training objectives that need document boundaries (next-sentence tasks, packing) work.
    `seed` defaults to the config's seed.
    """
    if sentences_per_document < 1:
        raise ValueError(f"sentences_per_document must be >= 1, got {sentences_per_document}")
    texts = list(_texts(n_sentences, seed, config))
    return [texts[i : i + sentences_per_document] for i in range(0, len(texts), sentences_per_document)]


def _texts(n_sentences: int, seed: int | None, config: ToyGrammarConfig | None) -> Iterator[str]:
    """The sentences of `generate_text`, one at a time (the one place that draws them)."""
    grammar = ToyGrammar(config)
    rng = derive_rng(grammar.config.seed if seed is None else seed, "text")
    for _ in range(n_sentences):
        yield grammar.sentence(rng).text


def write_text(
    directory: str | Path,
    n_sentences: int,
    seed: int | None = None,
    sentences_per_document: int = 8,
    config: ToyGrammarConfig | None = None,
    filename: str = "toy.txt",
) -> list[Path]:
    """Write `generate_text(...)` to `directory/filename`: one sentence a line, a blank line
    between documents (the usual pre-training corpus layout). Returns the written files.

    Sentences are written as they are drawn rather than joined in memory first (a corpus of
    millions of sentences would otherwise hold every line twice), into a temporary file renamed
    into place at the end, so an interrupted run never leaves a truncated corpus behind.
    """
    if sentences_per_document < 1:
        raise ValueError(f"sentences_per_document must be >= 1, got {sentences_per_document}")
    path = Path(directory) / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as partial, partial.open("w", encoding="utf-8", newline="\n") as f:
        count = 0
        for count, text in enumerate(_texts(n_sentences, seed, config), start=1):
            if count > 1:
                f.write("\n\n" if (count - 1) % sentences_per_document == 0 else "\n")
            f.write(text)
        if count:
            f.write("\n")
    return [path]

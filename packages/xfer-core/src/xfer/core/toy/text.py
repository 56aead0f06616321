"""Unlabelled toy text: documents of sentences for pre-training corpora and vocabularies."""

from __future__ import annotations

from pathlib import Path

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
    grammar = ToyGrammar(config)
    rng = derive_rng(grammar.config.seed if seed is None else seed, "text")
    texts = [grammar.sentence(rng).text for _ in range(n_sentences)]
    return [texts[i : i + sentences_per_document] for i in range(0, len(texts), sentences_per_document)]


def write_text(
    directory: str | Path,
    n_sentences: int,
    seed: int | None = None,
    sentences_per_document: int = 8,
    config: ToyGrammarConfig | None = None,
    filename: str = "toy.txt",
) -> list[Path]:
    """Write `generate_text(...)` to `directory/filename`: one sentence a line, a blank line
    between documents (the usual pre-training corpus layout). Returns the written files."""
    documents = generate_text(n_sentences, seed, sentences_per_document, config)
    path = Path(directory) / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "\n\n".join("\n".join(document) for document in documents)
    path.write_text(body + "\n" if body else "", encoding="utf-8")
    return [path]

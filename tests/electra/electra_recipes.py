"""The tiny `electra.pretrain` recipe the ELECTRA stage tests share (imported relatively, as
tests/bam's `bam_recipes`)."""

from __future__ import annotations

TINY = "{num_layers: 1, hidden_size: 64, embedding_size: 32, intermediate_size: 128, num_heads: 2}"


def pretrain_recipe(sentences: int, objective: str, train: str) -> str:
    """toy corpus -> vocabulary -> `fit`, a tiny `electra.pretrain` stage with `objective` and `train`."""
    return f"""
name: pre
seed: 2
stages:
  corpus: {{kind: toy.corpus, sentences: {sentences}}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200, min_frequency: 1}}
  fit:
    kind: electra.pretrain
    corpus: {{files: corpus.text}}
    tokenizer: vocab.tokenizer
    model: tiny
    encoder: {TINY}
    max_length: 32
    objective: {objective}
    train: {train}
"""

"""The tiny `electra.pretrain` recipe the ELECTRA stage tests share (imported relatively, as
tests/bam's `bam_recipes`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from xfer.transformer.encoder import EncoderConfig

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


def scoring_config(vocab_size: int, max_positions: int = 24) -> EncoderConfig:
    """The one-layer, 16-wide encoder of the scoring tests' hand-made checkpoints: small enough to
    score exhaustively, wide enough for two heads."""
    from xfer.transformer.encoder import EncoderConfig

    return EncoderConfig(
        vocab_size=vocab_size,
        embedding_size=16,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_position_embeddings=max_positions,
    )


def spread_weights(*modules: torch.nn.Module, std: float = 0.5) -> None:
    """Redraw every parameter from N(0, std): BERT's 0.02 init leaves every PLL near uniform, so
    scoring tests could not tell one sentence (or one scorer) from another."""
    for module in modules:
        for parameter in module.parameters():
            parameter.data.normal_(0, std)

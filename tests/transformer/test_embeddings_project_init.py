"""A random encoder's `embeddings_project` (embedding size != hidden size, ELECTRA's factorisation)
starts as the original ELECTRA's: `tf.layers.dense(..., name="embeddings_project")` names no
initializer, so TF's default Glorot-uniform weights and a zero bias, unlike the Transformer's
layers (truncated normal at initializer_range), which stay so."""

from __future__ import annotations

import math

import torch

from xfer.transformer.encoder import Encoder, EncoderConfig


def test_embeddings_project_starts_glorot_uniform_and_the_layers_truncated_normal() -> None:
    torch.manual_seed(0)
    config = EncoderConfig(
        vocab_size=500, embedding_size=128, hidden_size=256, num_layers=2, num_heads=4, intermediate_size=1024
    )
    encoder = Encoder(config)
    weight = encoder.embeddings_project.weight.detach()
    bound = math.sqrt(6.0 / (128 + 256))
    assert float(weight.abs().max()) <= bound
    assert abs(float(weight.std()) - bound / math.sqrt(3.0)) < 0.005  # uniform(-b, b): std b / sqrt(3) = 0.072
    assert torch.count_nonzero(encoder.embeddings_project.bias) == 0
    qkv = encoder.layers[0].qkv.weight.detach()
    assert float(qkv.abs().max()) <= 2 * 0.02 + 1e-7  # truncated at 2 std
    assert abs(float(qkv.std()) - 0.0176) < 0.002  # std of N(0, 0.02) truncated at 2 std


def test_no_projection_when_the_sizes_agree() -> None:
    config = EncoderConfig(
        vocab_size=500, embedding_size=64, hidden_size=64, num_layers=1, num_heads=2, intermediate_size=128
    )
    assert Encoder(config).embeddings_project is None

"""ELECTRA's pre-training heads, registered through `xfer_models` (see `xfer.transformer.registry`).

- `GeneratorHead` (`electra.generator_head`): the MLM output layer of the generator (and of the
  BERT baseline): dense(hidden -> embedding) + GELU + LayerNorm, then the *input* word-embedding
  matrix (tied, passed in at call time) plus an output bias. HF: `ElectraForMaskedLM`'s
  `generator_predictions.{dense,LayerNorm}` and `generator_lm_head.bias` (its weight is the tied
  word embeddings, which HF re-ties on load).
- `DiscriminatorHead` (`electra.discriminator_head`): dense(H) + GELU + dense(1), one logit per
  token; the dense(1) starts Glorot-uniform as in the original (TF's default: it names no
  initializer), the rest truncated normal (`initializer_range`). HF: `ElectraForPreTraining`'s
  `discriminator_predictions.{dense,dense_prediction}`.
  Electric's energy head has the same shape (the logit is the token's energy).
- `ClozeHead` (`electra.cloze_head`): the two-tower cloze model's output: the left-to-right state
  at t-1 and the right-to-left state at t+1, concatenated, then the same dense + GELU + LayerNorm
  + tied embeddings as the generator. No HF equivalent.

Heads take the rows they need ([N, H]) rather than padded batches: ELECTRA evaluates the generator's
softmax only at the ~15% masked positions, which is most of its speed advantage over
`ElectraForMaskedLM`, which computes 30522 logits for every position.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xfer.transformer.encoder import init_weights
from xfer.transformer.hfmap import HFHeadMap


def _generator_config_from_hf(state: dict[str, Tensor], hf_config: dict[str, Any], encoder_config: Any) -> dict:
    if hf_config.get("tie_word_embeddings", True) is False:
        # its output layer has weights of its own (`generator_lm_head.weight`); this head always scores
        # with the input word embeddings, so importing it gave other logits without a word
        raise ValueError(
            "an ElectraForMaskedLM with untied output embeddings (tie_word_embeddings: false): xfer's generator "
            "head scores with the input word embeddings, as ELECTRA's generator does, and cannot hold a separate "
            "output matrix"
        )
    return {
        "hidden": encoder_config.hidden_size,
        "embedding_size": encoder_config.embedding_size,
        "vocab_size": encoder_config.vocab_size,
        "layer_norm_eps": encoder_config.layer_norm_eps,
    }


class GeneratorHead(nn.Module):
    """MLM logits from hidden rows: LayerNorm(GELU(dense(h))) @ word_embeddings.T + bias."""

    kind: ClassVar[str] = "electra.generator_head"
    hf: ClassVar[HFHeadMap] = HFHeadMap(
        architectures={"electra": "ElectraForMaskedLM"},
        tensors={
            "dense": "generator_predictions.dense",
            "norm": "generator_predictions.LayerNorm",
            "bias": "generator_lm_head.bias",
        },
        config_from_hf=_generator_config_from_hf,
    )

    def __init__(
        self,
        hidden: int,
        embedding_size: int,
        vocab_size: int,
        layer_norm_eps: float = 1e-12,
        initializer_range: float = 0.02,
    ):
        super().__init__()
        self.hidden, self.embedding_size, self.vocab_size = hidden, embedding_size, vocab_size
        self.layer_norm_eps, self.initializer_range = layer_norm_eps, initializer_range
        self.dense = nn.Linear(hidden, embedding_size)
        self.norm = nn.LayerNorm(embedding_size, eps=layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        for module in (self.dense, self.norm):
            init_weights(module, initializer_range)

    def config(self) -> dict[str, Any]:
        return {
            "hidden": self.hidden,
            "embedding_size": self.embedding_size,
            "vocab_size": self.vocab_size,
            "layer_norm_eps": self.layer_norm_eps,
            "initializer_range": self.initializer_range,
        }

    def features(self, hidden: Tensor) -> Tensor:
        """`hidden` [N, H] rows -> the [N, E] features the vocabulary projection reads."""
        return self.norm(F.gelu(self.dense(hidden)))

    def forward(self, hidden: Tensor, word_embeddings: Tensor) -> Tensor:
        """`hidden` [N, H] rows -> logits [N, vocab] against the tied `word_embeddings` [vocab, E]."""
        h = self.features(hidden)
        return F.linear(h, word_embeddings.to(h.dtype), self.bias.to(h.dtype))


def _discriminator_config_from_hf(state: dict[str, Tensor], hf_config: dict[str, Any], encoder_config: Any) -> dict:
    return {"hidden": encoder_config.hidden_size}


class DiscriminatorHead(nn.Module):
    """One logit per token row: dense(H) + GELU + dense(1) (ELECTRA's replaced-token detector)."""

    kind: ClassVar[str] = "electra.discriminator_head"
    hf: ClassVar[HFHeadMap] = HFHeadMap(
        architectures={"electra": "ElectraForPreTraining"},
        tensors={"dense": "discriminator_predictions.dense", "out": "discriminator_predictions.dense_prediction"},
        config_from_hf=_discriminator_config_from_hf,
    )

    def __init__(self, hidden: int, initializer_range: float = 0.02):
        super().__init__()
        self.hidden, self.initializer_range = hidden, initializer_range
        self.dense = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 1)
        init_weights(self.dense, initializer_range)
        # The original's `tf.layers.dense(hidden, units=1)` names no initializer, so TF's default
        # applies: Glorot-uniform weight (bound sqrt(6 / (H + 1)), ~0.15 for H = 256), zero bias. A
        # truncated normal of std 0.02 made its weights ~5x smaller (std 0.018 against 0.088).
        nn.init.xavier_uniform_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def config(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "initializer_range": self.initializer_range}

    def forward(self, hidden: Tensor) -> Tensor:
        """`hidden` [N, H] -> logits [N] (float32: they feed a sigmoid loss)."""
        return self.out(F.gelu(self.dense(hidden))).squeeze(-1).float()


class ClozeHead(GeneratorHead):
    """The two-tower cloze model's output layer: its input is [ltr state at t-1; rtl state at t+1]
    (width 2H), so the prediction at t never sees token t."""

    kind: ClassVar[str] = "electra.cloze_head"
    hf: ClassVar[None] = None  # type: ignore[assignment]

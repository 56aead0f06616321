"""The networks of ELECTRA pre-training, built from xfer-transformer's `Encoder`.

- The discriminator is a plain `Encoder` (what fine-tuning starts from) plus a head.
- The generator is an `Encoder` of the same depth and 1/4 the width (`generator_encoder_config`),
  which, tied, *shares the discriminator's whole `Embeddings` block* (token, position and type
  embeddings and their LayerNorm) and has its own `embeddings_project` (128 -> 64 for Small). Its
  MLM head multiplies by those same word embeddings, so its input and output embeddings are tied.
- `TwoTower` is the two-tower cloze model (Electric's noise model, ELECTRA-TT's generator): a
  left-to-right and a right-to-left Transformer; the distribution at t comes from the LTR state
  at t-1 and the RTL state at t+1, so it never sees token t. Both towers use the encoder's causal
  attention masks, so nothing here re-implements attention.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xfer.core.errors import UserError
from xfer.electra.config import GeneratorConfig, generator_depth_problem, generator_width_problem
from xfer.electra.heads import ClozeHead, GeneratorHead
from xfer.transformer.encoder import Embeddings, Encoder, EncoderConfig
from xfer.transformer.presets import generator_config


def generator_encoder_config(disc: EncoderConfig, config: GeneratorConfig) -> EncoderConfig:
    """The generator's size: widths x `size`, depth x `layers`; untied, embeddings of its own hidden width.

    A `size` that makes it narrower than 1 unit is a `UserError` (recipes are refused at `size`
    when the discriminator is known before the run; this covers an `init:` an earlier stage wrote)."""
    problem = generator_width_problem(config.size, disc.hidden_size, disc.intermediate_size, "the discriminator")
    if problem:
        raise UserError(f"objective.generator.size: {problem}")
    problem = generator_depth_problem(config.layers, disc.num_layers, "the discriminator")
    if problem:
        raise UserError(f"objective.generator.layers: {problem}")
    gen = generator_config(disc, config.size)
    gen = dataclasses.replace(gen, num_layers=max(1, round(disc.num_layers * config.layers)))
    if not config.tie_embeddings:
        gen = dataclasses.replace(gen, embedding_size=gen.hidden_size)
    return gen


_GENERATOR_SHAPE = ("hidden_size", "num_heads", "intermediate_size", "num_layers", "embedding_size")


def _shape(config: EncoderConfig) -> str:
    return (
        f"hidden {config.hidden_size}, {config.num_heads} head{'s' if config.num_heads != 1 else ''}, "
        f"FFN {config.intermediate_size}, {config.num_layers} layer{'s' if config.num_layers != 1 else ''}, "
        f"embeddings {config.embedding_size}"
    )


def generator_shape_mismatch(
    disc: EncoderConfig, wanted: GeneratorConfig, checkpoint: EncoderConfig, has: str = "its encoder has"
) -> str | None:
    """Why a generator checkpoint does not fit the generator `wanted` builds next to `disc`, with the
    `objective.generator` settings that would build its shape; None when the shapes agree. `has`
    opens the description of the checkpoint's shape ("its towers each have" for a two-tower model).

    Continuing from a released pair is the common case: Google's ELECTRA-Small generator is as wide
    as its discriminator (hidden 256), so the default `size: 0.25` cannot load it, and the stage said
    only "size mismatch for layers.0.qkv.weight"."""
    built = generator_encoder_config(disc, wanted)
    if all(getattr(built, f) == getattr(checkpoint, f) for f in _GENERATOR_SHAPE):
        return None
    message = f"{has} {_shape(checkpoint)}; objective.generator {{size: {wanted.size:g}, layers: "
    message += f"{wanted.layers:g}, tie_embeddings: {str(wanted.tie_embeddings).lower()}}} builds {_shape(built)} "
    message += f"next to this discriminator ({_shape(disc)})"
    candidate = dataclasses.replace(
        wanted,
        size=checkpoint.hidden_size / disc.hidden_size,
        layers=checkpoint.num_layers / disc.num_layers,
        tie_embeddings=checkpoint.embedding_size == disc.embedding_size,
    )
    try:
        fits = 0 < candidate.size <= 1 and 0 < candidate.layers <= 1
        fits = fits and all(
            getattr(generator_encoder_config(disc, candidate), f) == getattr(checkpoint, f) for f in _GENERATOR_SHAPE
        )
    except UserError:
        fits = False
    if fits:
        return (
            f"{message}: to continue from it, set objective.generator {{size: {candidate.size:.6g}, "
            f"layers: {candidate.layers:.6g}, tie_embeddings: {str(candidate.tie_embeddings).lower()}}}"
        )
    return f"{message}, and no generator size, layers and tying builds its shape from this discriminator"


def build_tower(config: EncoderConfig, shared: Embeddings | None) -> Encoder:
    """An encoder that uses `shared` embeddings when given (tied) or its own."""
    return Encoder(config, embeddings=shared)


class MaskedGenerator(nn.Module):
    """ELECTRA's generator: a small masked LM whose softmax is evaluated only at chosen rows."""

    def __init__(self, config: EncoderConfig, shared: Embeddings | None):
        super().__init__()
        self.encoder = build_tower(config, shared)
        self.head = GeneratorHead(config.hidden_size, config.embedding_size, config.vocab_size, config.layer_norm_eps)

    @classmethod
    def from_modules(cls, encoder: Encoder, head: GeneratorHead) -> MaskedGenerator:
        """Reassemble a saved generator (modules `encoder` and `head` of its model directory)."""
        model = cls.__new__(cls)
        nn.Module.__init__(model)
        model.encoder, model.head = encoder, head
        return model

    def features_at(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor, flat: Tensor) -> Tensor:
        """The head's features [M, E] at the flat positions `flat` of the [B, T] batch (the masked
        ones): what the tied vocabulary projection reads."""
        hidden = self.encoder(input_ids, attention_mask, token_type_ids).last_hidden_state
        return self.head.features(hidden.reshape(-1, hidden.shape[-1]).index_select(0, flat))

    def logits_at(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor, flat: Tensor) -> Tensor:
        """Logits [M, V] at the flat positions `flat` of the [B, T] batch (the masked ones)."""
        h = self.features_at(input_ids, attention_mask, token_type_ids, flat)
        return F.linear(h, self.encoder.embeddings.word.weight.to(h.dtype), self.head.bias.to(h.dtype))


class TwoTower(nn.Module):
    """Two causal Transformers whose shifted states predict each token from both sides of it."""

    def __init__(self, config: EncoderConfig, shared: Embeddings | None):
        super().__init__()
        self.ltr = build_tower(config, shared)
        # untied from the discriminator, the towers still share one embedding table (the cloze softmax's)
        self.rtl = build_tower(config, shared if shared is not None else self.ltr.embeddings)
        self.head = ClozeHead(2 * config.hidden_size, config.embedding_size, config.vocab_size, config.layer_norm_eps)

    @classmethod
    def from_modules(cls, ltr: Encoder, rtl: Encoder, head: ClozeHead) -> TwoTower:
        """Reassemble a saved two-tower model (modules `ltr`, `rtl`, `head` of its model directory)."""
        model = cls.__new__(cls)
        nn.Module.__init__(model)
        model.ltr, model.rtl, model.head = ltr, rtl, head
        return model

    def context(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor) -> Tensor:
        """[B, T, 2H]: at position t, the LTR state at t-1 and the RTL state at t+1 (zeros past the ends)."""
        ltr = self.ltr(input_ids, attention_mask, token_type_ids, causal="ltr").last_hidden_state
        rtl = self.rtl(input_ids, attention_mask, token_type_ids, causal="rtl").last_hidden_state
        # padding rows may hold anything (dense attention): never let them be a neighbour
        real = attention_mask.to(rtl.dtype)[..., None]
        ltr, rtl = ltr * real, rtl * real
        before = torch.cat([torch.zeros_like(ltr[:, :1]), ltr[:, :-1]], dim=1)
        after = torch.cat([rtl[:, 1:], torch.zeros_like(rtl[:, :1])], dim=1)
        return torch.cat([before, after], dim=-1)

    def logits_at(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor, flat: Tensor) -> Tensor:
        """Cloze logits [M, V] at the flat positions `flat` (each from its context alone)."""
        context = self.context(input_ids, attention_mask, token_type_ids)
        rows = context.reshape(-1, context.shape[-1]).index_select(0, flat)
        return self.head(rows, self.ltr.embeddings.word.weight)

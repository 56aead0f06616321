"""A BERT/ELECTRA-architecture Transformer encoder, the network top to bottom.

`Encoder.forward` embeds the tokens (`Embeddings`, then the optional `embeddings_project` to
the hidden size), runs the post-LayerNorm `Layer`s and returns an `EncoderOutput`. It computes
the same function as HF `ElectraModel` / `BertModel` (`xfer.transformer.hf` maps the weights;
parity is tested to 1e-5), but trains faster: the speed tricks (unpadding, one fused QKV
projection, bucketed attention with a hand-written CPU backward, cheap CPU dropout) live beside
it in `xfer.transformer.kernels`, whose docstring says where the speed comes from. This file
only calls them: `dropout`, `residual_dropout`, `dense_plan` / `unpadded_plan` and `attention`.

bf16/fp16 autocast: matmuls and attention run in low precision, while the residual stream and
LayerNorms stay fp32 (as CUDA autocast does for LayerNorm); without the projection's output
cast, CPU autocast would silently carry the whole residual stream in bf16.

Outputs at padding positions are zeros when unpadding is active and unspecified (finite)
otherwise: consumers must only read real-token positions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xfer.core.config import knob
from xfer.transformer.kernels import (
    AttentionPlan,
    Causal,
    attention,
    dense_plan,
    dropout,
    residual_dropout,
    row_multiple,
    unpadded_plan,
)
from xfer.transformer.presets import ARCHITECTURE_FIELDS, encoder_problems

__all__ = [
    "ARCHITECTURE_FIELDS",
    "Causal",
    "Embeddings",
    "Encoder",
    "EncoderConfig",
    "EncoderOutput",
    "Layer",
    "dropout",
    "init_weights",
    "residual_dropout",
    "trunc_normal_",
]


@dataclass
class EncoderConfig:
    """Sizes and regularisation of the encoder; defaults are ELECTRA-Small (see `presets`)."""

    vocab_size: int = knob(30522, "Number of token ids (WordPiece vocabulary size).")
    embedding_size: int = knob(
        128,
        "Width of the token/position/type embeddings; if it differs from hidden_size a linear "
        "projection (embeddings_project) maps embeddings to the hidden size (ELECTRA factorisation).",
    )
    hidden_size: int = knob(256, "Width of the Transformer residual stream.")
    num_layers: int = knob(12, "Number of Transformer layers.")
    num_heads: int = knob(4, "Attention heads per layer; must divide hidden_size.")
    intermediate_size: int = knob(1024, "Inner width of the feed-forward network.")
    max_position_embeddings: int = knob(512, "Longest sequence the position embeddings cover.")
    type_vocab_size: int = knob(2, "Number of token-type (segment) ids.")
    hidden_dropout: float = knob(0.1, "Dropout on embeddings and on each sublayer output (BERT).")
    attention_dropout: float = knob(0.1, "Dropout on the attention probabilities (BERT).")
    layer_norm_eps: float = knob(1e-12, "LayerNorm epsilon (BERT/ELECTRA use 1e-12).")
    initializer_range: float = knob(0.02, "Std of the truncated-normal (at 2 std) weight init, as in TF BERT.")
    pad_token_id: int = knob(0, "Id of the padding token (used only for HF config export).")
    unpad: bool = knob(
        True,
        "Drop padding tokens inside the encoder (faster with padded batches; same results). "
        "Padding positions of the output are then zeros.",
    )

    def __post_init__(self) -> None:
        # The rules live in torch-free `presets.encoder_problems`, so that recipe validation checks
        # `encoder:` overrides against exactly these before anything imports torch.
        problems = encoder_problems(asdict(self))
        if problems:
            name, message = problems[0]
            raise ValueError(f"EncoderConfig.{name} {message}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncoderConfig:
        """Inverse of `to_dict`; unknown keys are an error (a typo must not be silently ignored)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown EncoderConfig key(s): {', '.join(unknown)} (valid: {', '.join(sorted(known))})")
        return cls(**data)


@dataclass
class EncoderOutput:
    """`last_hidden_state` [B, T, H]; `hidden_states` = (embedding output, layer 1, ..., layer L) or None."""

    last_hidden_state: Tensor
    hidden_states: tuple[Tensor, ...] | None = None


# ----------------------------------------------------------------------------------------------
# The network: embeddings, one layer, the encoder (then weight init).


class Embeddings(nn.Module):
    """Token + position + token-type embeddings, LayerNorm, dropout (width `embedding_size`).

    Kept separate from the projection to the hidden size so that ELECTRA's generator and
    discriminator can share this whole block while each has its own `embeddings_project`.
    HF: `embeddings.{word_embeddings,position_embeddings,token_type_embeddings,LayerNorm}`.
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.embedding_size)
        self.position = nn.Embedding(config.max_position_embeddings, config.embedding_size)
        self.token_type = nn.Embedding(config.type_vocab_size, config.embedding_size)
        self.norm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.dropout_p = config.hidden_dropout

    def forward(self, input_ids: Tensor, position_ids: Tensor, token_type_ids: Tensor) -> Tensor:
        """All three id tensors have the same shape S; returns S + [embedding_size]."""
        x = self.word(input_ids) + self.position(position_ids) + self.token_type(token_type_ids)
        return dropout(self.norm(x), self.dropout_p, self.training)


class Layer(nn.Module):
    """Post-LayerNorm Transformer block (BERT): x = LN(x + Attn(x)); x = LN(x + FFN(x)).

    HF: `encoder.layer.{i}.attention.self.{query,key,value}` (= `qkv` split in three),
    `attention.output.{dense,LayerNorm}` (= `attn_out`, `attn_norm`), `intermediate.dense`
    (= `ffn_in`), `output.{dense,LayerNorm}` (= `ffn_out`, `ffn_norm`).
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        h = config.hidden_size
        self.num_heads = config.num_heads
        self.qkv = nn.Linear(h, 3 * h)
        self.attn_out = nn.Linear(h, h)
        self.attn_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(h, config.intermediate_size)
        self.ffn_out = nn.Linear(config.intermediate_size, h)
        self.ffn_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.hidden_dropout = config.hidden_dropout
        self.attention_dropout = config.attention_dropout

    def forward(self, x: Tensor, plan: AttentionPlan) -> Tensor:
        p_attn = self.attention_dropout if self.training else 0.0
        a = attention(self.qkv(x), plan, p_attn)
        x = self.attn_norm(residual_dropout(x, self.attn_out(a), self.hidden_dropout, self.training))
        f = self.ffn_out(F.gelu(self.ffn_in(x)))  # exact (erf) GELU, as BERT/ELECTRA
        return self.ffn_norm(residual_dropout(x, f, self.hidden_dropout, self.training))


class Encoder(nn.Module):
    """BERT/ELECTRA encoder. Pass `embeddings` to share an existing `Embeddings` block (not re-initialised)."""

    def __init__(self, config: EncoderConfig, embeddings: Embeddings | None = None):
        super().__init__()
        self.config = config
        if embeddings is not None:
            # All three tables: a shared block with fewer positions (or token types) than `config`
            # passed the length check in `forward` and then crashed inside nn.Embedding, and HF
            # export wrote a config that did not match the weights.
            tables = (
                ("word", config.vocab_size, "vocab_size"),
                ("position", config.max_position_embeddings, "max_position_embeddings"),
                ("token_type", config.type_vocab_size, "type_vocab_size"),
            )
            for table, rows, knob_name in tables:
                got = tuple(getattr(embeddings, table).weight.shape)
                want = (rows, config.embedding_size)
                if got != want:
                    raise ValueError(
                        f"shared embeddings' {table} table has shape {got}, config wants {want} "
                        f"({knob_name}={rows}, embedding_size={config.embedding_size})"
                    )
        self.embeddings = embeddings if embeddings is not None else Embeddings(config)
        self.embeddings_project = (
            nn.Linear(config.embedding_size, config.hidden_size)
            if config.embedding_size != config.hidden_size
            else None
        )
        self.layers = nn.ModuleList(Layer(config) for _ in range(config.num_layers))
        shared = set(self.embeddings.modules()) if embeddings is not None else set()
        for module in self.modules():
            if module not in shared:
                init_weights(module, config.initializer_range)
        if self.embeddings_project is not None:
            # Glorot-uniform weights and a zero bias, as the original's `tf.layers.dense(...,
            # name="embeddings_project")`, which names no initializer (TF's default), unlike the
            # layers inside the Transformer (truncated normal at initializer_range)
            nn.init.xavier_uniform_(self.embeddings_project.weight)
            nn.init.zeros_(self.embeddings_project.bias)

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def parameter_depth(self, name: str) -> int | None:
        """Depth for layer-wise LR decay: 0 = embedding block (incl. projection), i+1 = layer i, else None.

        `name` is relative to this module (as in `self.named_parameters()`).
        """
        if name.startswith(("embeddings.", "embeddings_project.")):
            return 0
        if name.startswith("layers."):
            return int(name.split(".", 2)[1]) + 1
        return None

    def embed(
        self, input_ids: Tensor, token_type_ids: Tensor | None = None, position_ids: Tensor | None = None
    ) -> Tensor:
        """Embedding block + projection for a padded [B, T] batch: [B, T, hidden_size]."""
        position_ids, token_type_ids = self._default_ids(input_ids, position_ids, token_type_ids)
        return self._project(self.embeddings(input_ids, position_ids, token_type_ids))

    def _project(self, x: Tensor) -> Tensor:
        return x if self.embeddings_project is None else self.embeddings_project(x)

    def _default_ids(
        self, input_ids: Tensor, position_ids: Tensor | None, token_type_ids: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        if input_ids.dim() != 2:  # was "not enough values to unpack" for one unbatched sequence
            raise ValueError(f"input_ids must be a [batch, length] batch, got shape {list(input_ids.shape)}")
        batch, length = input_ids.shape
        if length > self.config.max_position_embeddings:
            raise ValueError(
                f"sequence length {length} exceeds max_position_embeddings={self.config.max_position_embeddings}"
            )
        if position_ids is None:
            position_ids = torch.arange(length, device=input_ids.device)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        position_ids, token_type_ids = position_ids.expand(batch, length), token_type_ids.expand(batch, length)
        self._check_ids(input_ids, position_ids, token_type_ids)
        return position_ids, token_type_ids

    def _check_ids(self, input_ids: Tensor, position_ids: Tensor, token_type_ids: Tensor) -> None:
        """Refuse ids outside their embedding tables, naming the tensor, value, place and limit.

        Why: `nn.Embedding` only says "index out of range in self" (on CUDA: a device-side
        assert), which does not tell a tokenizer/model vocabulary mismatch from a too-long
        explicit `position_ids` or a segment id the model has no row for. One host sync for
        all three tensors on the good path.
        """
        config = self.config
        tables = (
            ("input_ids", input_ids, config.vocab_size, "vocab_size"),
            ("position_ids", position_ids, config.max_position_embeddings, "max_position_embeddings"),
            ("token_type_ids", token_type_ids, config.type_vocab_size, "type_vocab_size"),
        )
        bad = [(ids < 0) | (ids >= limit) for _, ids, limit, _ in tables]
        if not bool(torch.stack([b.any() for b in bad]).any()):
            return
        for (name, ids, limit, knob_name), out in zip(tables, bad, strict=True):
            if bool(out.any()):
                where = [int(i) for i in out.nonzero()[0]]
                value = int(ids[tuple(where)])
                raise ValueError(
                    f"{name} hold {value} at {where}, outside the embedding table [0, {limit}) ({knob_name}={limit})"
                )

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        causal: Causal = None,
        output_hidden_states: bool = False,
    ) -> EncoderOutput:
        """Encode a [B, T] batch; `attention_mask` is 1 for real tokens, 0 for padding.

        `causal="ltr"`: position t attends to positions <= t; `"rtl"`: to positions >= t
        (combined with the padding mask).
        """
        if causal not in (None, "ltr", "rtl"):
            raise ValueError(f"causal must be None, 'ltr' or 'rtl', got {causal!r}")
        position_ids, token_type_ids = self._default_ids(input_ids, position_ids, token_type_ids)
        batch, length = input_ids.shape
        rows: Tensor | None = None
        real = None if attention_mask is None else _padding_mask(attention_mask, input_ids)
        multiple = row_multiple(input_ids.device, self.embeddings.word.weight.dtype)
        # a batch without padding runs dense, unless its B*T rows need rounding up (bf16 on CPU):
        # batches of equal-length texts (scoring sorts by length) were a new row count each
        if (
            self.config.unpad
            and real is not None
            and bool(real.any())
            and (batch * length % multiple or not real.all())
        ):
            plan, rows, n_real = unpadded_plan(real, self.config.num_heads, causal, multiple)
            ids = [t.reshape(-1).index_select(0, rows) for t in (input_ids, position_ids, token_type_ids)]
        else:
            plan = dense_plan(real, batch, length, self.config.num_heads, causal, input_ids.device)
            ids = [t.reshape(-1) for t in (input_ids, position_ids, token_type_ids)]

        x = self._project(self.embeddings(*ids))  # [rows, H]
        if x.dtype != self.embeddings.norm.weight.dtype:  # autocast: keep the residual stream in fp32
            x = x.to(self.embeddings.norm.weight.dtype)
        states = [x] if output_hidden_states else None
        for layer in self.layers:
            x = layer(x, plan)
            if states is not None:
                states.append(x)

        # A batch without any real token runs dense (there is nothing to unpad); its outputs are
        # still zeroed, as `unpad` promises for padding positions (kept in the graph: zero gradients).
        all_padding = self.config.unpad and real is not None and not bool(real.any())

        def repad(h: Tensor) -> Tensor:
            if rows is None:
                return h.view(batch, length, -1).mul(0.0) if all_padding else h.view(batch, length, -1)
            # the first n_real rows are the real tokens; any rows after them only round the shape up
            out = h.new_zeros(batch * length, h.shape[-1])
            return out.index_copy_(0, rows[:n_real], h[:n_real]).view(batch, length, -1)

        return EncoderOutput(repad(x), tuple(repad(h) for h in states) if states is not None else None)


def _padding_mask(attention_mask: Tensor, input_ids: Tensor) -> Tensor:
    """`attention_mask` as bool [B, T] (True = real token), refusing masks that are not 0/1 of that shape.

    Why: the mask picks which flat rows are tokens, so a [B, T'] mask of another length indexed
    the wrong tokens and put outputs at the wrong positions without an error; a 3-D mask (per-query
    [B, T, T], or HF's [B, 1, T]) ran while all ones and crashed unpacking its shape at the first
    batch with padding; and an HF-style additive mask (0 = real, -10000 = padding) was read
    inverted: the real tokens were dropped as padding (zeros out) and the padding encoded instead.
    """
    if tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(
            f"attention_mask has shape {list(attention_mask.shape)}, expected {list(input_ids.shape)} like "
            "input_ids ([batch, length], 1 = real token, 0 = padding; use causal= for directional attention)"
        )
    if attention_mask.dtype == torch.bool:
        return attention_mask
    odd = (attention_mask != 0) & (attention_mask != 1)
    if bool(odd.any()):
        where = [int(i) for i in odd.nonzero()[0]]
        raise ValueError(
            f"attention_mask holds {attention_mask[tuple(where)].item()!r} at {where}: it must be 0/1 "
            "(1 = real token, 0 = padding), not an additive mask"
        )
    return attention_mask.bool()


def init_weights(module: nn.Module, std: float = 0.02) -> None:
    """TF BERT init: truncated normal (at 2 std) weights, zero biases, LayerNorm ones/zeros."""
    if isinstance(module, nn.Linear):
        trunc_normal_(module.weight, std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        trunc_normal_(module.weight, std)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


@torch.no_grad()
def trunc_normal_(tensor: Tensor, std: float) -> Tensor:
    """N(0, std) truncated at +-2 std, by redrawing the ~4.6% of values outside (as TF's
    truncated_normal). `nn.init.trunc_normal_` is ~50x slower (8 s for ELECTRA-Small on CPU)."""
    flat = tensor.view(-1)
    flat.normal_(0.0, std)
    redraw = (flat.abs() > 2 * std).nonzero().squeeze(1)
    while redraw.numel():
        flat[redraw] = torch.randn(redraw.numel(), dtype=flat.dtype, device=flat.device) * std
        redraw = redraw[flat[redraw].abs() > 2 * std]
    return tensor

"""Task heads on top of encoder hidden states, with their HF `transformers` equivalents.

Each head is a small `nn.Module` taking `hidden` [B, T, H] from the encoder. Heads know how to
describe themselves (`kind`, `config()`) so `modelio` can save and rebuild them, and carry their
HF mapping (`hf`, see `xfer.transformer.hfmap`) that `xfer.transformer.hf` uses to export and
import them. They are registered as model components by xfer-transformer's plugin, exactly as a
method package registers its own heads (`xfer.transformer.registry`).

Dropout uses `encoder.dropout`, the same cheap-on-CPU dropout the encoder uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xfer.core.plugins import PluginHost
from xfer.transformer import registry
from xfer.transformer.encoder import dropout, init_weights
from xfer.transformer.hfmap import HFHeadMap, SequenceHFMap, SpanQAHFMap, TokenHFMap

Pooler = Literal["none", "tanh", "gelu"]

# Added to logits of positions that may not be chosen (as the original ELECTRA code, which adds
# -1000); finite so that fully masked rows stay NaN-free and it is representable in bf16/fp16.
MASK_VALUE = -10000.0


class _Head(nn.Module):
    kind: ClassVar[str]
    hf: ClassVar[HFHeadMap | None] = None

    def config(self) -> dict[str, Any]:
        """Constructor keyword arguments that rebuild this head (JSON-serialisable)."""
        raise NotImplementedError

    def _init(self, std: float) -> None:
        for module in self.modules():
            init_weights(module, std)


class SequenceHead(_Head):
    """Sequence classification/regression from the [CLS] (first) position.

    pooler="none": original ELECTRA: [CLS] -> dropout -> `out`. No HF class has this form, so it
        cannot be exported to HF (use "gelu" if HF export matters).
    pooler="tanh": BERT: `dense` + tanh on [CLS] -> dropout -> `out`.
        HF BertForSequenceClassification: `bert.pooler.dense` = `dense`, `classifier` = `out`.
    pooler="gelu": HF ElectraClassificationHead: dropout -> `dense` -> gelu -> dropout -> `out`.
        HF ElectraForSequenceClassification: `classifier.dense` = `dense`, `classifier.out_proj` = `out`.
    num_outputs=1 means regression (output [B, 1]).
    """

    kind = "sequence"
    hf = SequenceHFMap()

    def __init__(
        self,
        hidden: int,
        num_outputs: int,
        dropout: float = 0.1,
        pooler: Pooler = "none",
        initializer_range: float = 0.02,
    ):
        super().__init__()
        if pooler not in ("none", "tanh", "gelu"):
            raise ValueError(f"pooler must be 'none', 'tanh' or 'gelu', got {pooler!r}")
        self.hidden, self.num_outputs, self.dropout_p, self.pooler = hidden, num_outputs, dropout, pooler
        self.initializer_range = initializer_range
        self.dense = nn.Linear(hidden, hidden) if pooler != "none" else None
        self.out = nn.Linear(hidden, num_outputs)
        self._init(initializer_range)

    def config(self) -> dict[str, Any]:
        return {
            "hidden": self.hidden,
            "num_outputs": self.num_outputs,
            "dropout": self.dropout_p,
            "pooler": self.pooler,
            "initializer_range": self.initializer_range,
        }

    def forward(self, hidden: Tensor) -> Tensor:
        x = hidden[:, 0]
        if self.dense is None:
            x = dropout(x, self.dropout_p, self.training)
        elif self.pooler == "tanh":
            x = dropout(torch.tanh(self.dense(x)), self.dropout_p, self.training)
        else:
            x = dropout(x, self.dropout_p, self.training)
            x = dropout(F.gelu(self.dense(x)), self.dropout_p, self.training)
        return self.out(x)


class TokenHead(_Head):
    """Per-token tagging: dropout -> `out` (HF *ForTokenClassification: `classifier` = `out`).

    To tag words rather than sub-tokens, gather each word's first sub-token first
    (`gather_first_subtokens`), as BERT/ELECTRA do.
    """

    kind = "token"
    hf = TokenHFMap()

    def __init__(self, hidden: int, num_tags: int, dropout: float = 0.1, initializer_range: float = 0.02):
        super().__init__()
        self.hidden, self.num_tags, self.dropout_p, self.initializer_range = (
            hidden,
            num_tags,
            dropout,
            initializer_range,
        )
        self.out = nn.Linear(hidden, num_tags)
        self._init(initializer_range)

    def config(self) -> dict[str, Any]:
        return {
            "hidden": self.hidden,
            "num_tags": self.num_tags,
            "dropout": self.dropout_p,
            "initializer_range": self.initializer_range,
        }

    def forward(self, hidden: Tensor) -> Tensor:
        return self.out(dropout(hidden, self.dropout_p, self.training))


def gather_first_subtokens(hidden: Tensor, word_starts: Tensor, word_mask: Tensor) -> Tensor:
    """[B, T, H] x word_starts [B, W] (token index of each word's first sub-token) -> [B, W, H].

    Positions where `word_mask` is 0/False (padding words) are zeros; their `word_starts` may be
    anything (they are clamped into range).
    """
    index = word_starts.clamp(0, hidden.shape[1] - 1)[..., None].expand(-1, -1, hidden.shape[-1])
    return torch.gather(hidden, 1, index) * word_mask[..., None].to(hidden.dtype)


@dataclass
class SpanQAOutput:
    """start/end logits [B, T] (masked to allowed positions when a mask was given) and the
    no-answer logit [B] (> threshold means "unanswerable", SQuAD 2.0) or None."""

    start_logits: Tensor
    end_logits: Tensor
    na_logit: Tensor | None = None


class SpanQAHead(_Head):
    """Extractive QA: start/end logits over the tokens, optionally ELECTRA's SQuAD 2.0 extras.

    Base: `qa_outputs` = Linear(hidden, 2) giving [start, end] logits per token
        (HF *ForQuestionAnswering: `qa_outputs`, identical layout).
    joint_end (original ELECTRA `joint_prediction`): end logits conditioned on the start:
        concat(h_start, h_t) -> `end_dense` (joint_hidden, gelu) [-> `end_norm` if joint_layer_norm,
        as XLNet; ELECTRA has none] -> `end_out`. Trained on the gold start; decoded with a beam
        over the top `beam_size` starts (`decode`). The end column of `qa_outputs` is then unused.
    answerable (original ELECTRA `answerable_classifier`): `na_dense`/`na_out` predict
        "no answer" from [CLS] (and, with answerable_uses_start, also from the start-probability
        weighted average of the hidden states, through a joint_hidden gelu layer).
    Neither extra has an HF equivalent (export refuses them).
    `allowed` masks (1 = may be chosen) restrict start/end to context tokens plus [CLS]
    (index 0 = "no answer"), as ELECTRA's answer_mask.
    """

    kind = "span_qa"
    hf = SpanQAHFMap()

    def __init__(
        self,
        hidden: int,
        joint_end: bool = False,
        answerable: bool = False,
        answerable_uses_start: bool = True,
        joint_hidden: int = 512,
        joint_layer_norm: bool = False,
        layer_norm_eps: float = 1e-12,
        initializer_range: float = 0.02,
    ):
        super().__init__()
        self.hidden, self.joint_end, self.answerable = hidden, joint_end, answerable
        self.answerable_uses_start, self.joint_hidden, self.joint_layer_norm = (
            answerable_uses_start,
            joint_hidden,
            joint_layer_norm,
        )
        self.layer_norm_eps, self.initializer_range = layer_norm_eps, initializer_range
        self.qa_outputs = nn.Linear(hidden, 2)
        if joint_end:
            self.end_dense = nn.Linear(2 * hidden, joint_hidden)
            self.end_norm = nn.LayerNorm(joint_hidden, eps=layer_norm_eps) if joint_layer_norm else None
            self.end_out = nn.Linear(joint_hidden, 1)
        if answerable:
            self.na_dense = nn.Linear(2 * hidden, joint_hidden) if answerable_uses_start else None
            self.na_out = nn.Linear(joint_hidden if answerable_uses_start else hidden, 1)
        self._init(initializer_range)

    def config(self) -> dict[str, Any]:
        return {
            "hidden": self.hidden,
            "joint_end": self.joint_end,
            "answerable": self.answerable,
            "answerable_uses_start": self.answerable_uses_start,
            "joint_hidden": self.joint_hidden,
            "joint_layer_norm": self.joint_layer_norm,
            "layer_norm_eps": self.layer_norm_eps,
            "initializer_range": self.initializer_range,
        }

    def _end_given_start(self, hidden: Tensor, start_vectors: Tensor) -> Tensor:
        """hidden [B, T, H], start_vectors [B, K, H] -> end logits [B, K, T]."""
        b, t, h = hidden.shape
        k = start_vectors.shape[1]
        features = torch.cat([start_vectors[:, :, None].expand(b, k, t, h), hidden[:, None].expand(b, k, t, h)], -1)
        x = F.gelu(self.end_dense(features))
        if self.end_norm is not None:
            x = self.end_norm(x)
        return self.end_out(x).squeeze(-1)

    def forward(
        self, hidden: Tensor, allowed: Tensor | None = None, start_positions: Tensor | None = None
    ) -> SpanQAOutput:
        """`start_positions` [B] (gold starts) conditions the joint end logits in training; without
        it the end logits are conditioned on the argmax start (use `decode` for beam search)."""
        logits = self.qa_outputs(hidden)
        start, end = logits[..., 0], logits[..., 1]
        if allowed is not None:
            start = start.masked_fill(~allowed.bool(), MASK_VALUE)
        if self.joint_end:
            if start_positions is None:
                start_positions = start.argmax(-1)
            start_vec = _pick(hidden, start_positions)[:, None]
            end = self._end_given_start(hidden, start_vec).squeeze(1)
        if allowed is not None:
            end = end.masked_fill(~allowed.bool(), MASK_VALUE)
        na = self._na_logit(hidden, start) if self.answerable else None
        return SpanQAOutput(start, end, na)

    def _na_logit(self, hidden: Tensor, start_logits: Tensor) -> Tensor:
        x = hidden[:, 0]
        if self.na_dense is not None:
            weights = torch.softmax(start_logits.float(), -1).to(hidden.dtype)
            start_feature = torch.einsum("bt,bth->bh", weights, hidden)
            x = F.gelu(self.na_dense(torch.cat([x, start_feature], -1)))
        return self.na_out(x).squeeze(-1)

    @torch.no_grad()
    def decode(
        self,
        hidden: Tensor,
        allowed: Tensor,
        max_answer_length: int = 30,
        beam_size: int = 20,
        starts: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Best span per example: (start [B], end [B], score [B] = log p(start) + log p(end | start)).

        Spans must satisfy start <= end < start + max_answer_length and both ends `allowed`
        excluding position 0 ([CLS] is the no-answer slot: compare `na_logit` for SQuAD 2.0).
        `starts` (default `allowed`) narrows where a span may start but not where it may end: a
        window of a long context predicts only answers starting in its max-context tokens, which
        may end in the overlap with the next window (as run_squad; limiting ends too left such an
        answer to no window at all). Joint heads search the top `beam_size` starts; otherwise the
        search is exhaustive.
        """
        out = self.forward(hidden, allowed)
        span_ok = allowed.bool().clone()
        span_ok[:, 0] = False
        start_ok = span_ok if starts is None else span_ok & starts.bool()
        start_lp = masked_log_softmax(out.start_logits, allowed)
        if not self.joint_end:
            end_lp = masked_log_softmax(out.end_logits, allowed)
            return best_span(start_lp, end_lp, span_ok, max_answer_length, starts=start_ok)
        k = min(beam_size, hidden.shape[1])
        top_lp, top_idx = start_lp.masked_fill(~start_ok, float("-inf")).topk(k, -1)  # [B, K]
        end_logits = self._end_given_start(hidden, _pick(hidden, top_idx))  # [B, K, T]
        end_lp = masked_log_softmax(end_logits, allowed[:, None].expand_as(end_logits))
        positions = torch.arange(hidden.shape[1], device=hidden.device)
        length = positions[None, None] - top_idx[..., None]  # end - start
        ok = span_ok[:, None] & (length >= 0) & (length < max_answer_length) & top_lp[..., None].isfinite()
        scores = (top_lp[..., None] + end_lp).masked_fill(~ok, float("-inf"))  # [B, K, T]
        flat = scores.flatten(1).argmax(-1)
        best_k, best_end = flat // hidden.shape[1], flat % hidden.shape[1]
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        return top_idx[rows, best_k], best_end, scores.flatten(1)[rows, flat]


def _pick(hidden: Tensor, positions: Tensor) -> Tensor:
    """hidden [B, T, H], positions [B] or [B, K] -> [B, H] or [B, K, H]."""
    index = positions.reshape(positions.shape[0], -1)
    out = torch.gather(hidden, 1, index[..., None].expand(-1, -1, hidden.shape[-1]))
    return out.reshape(*positions.shape, hidden.shape[-1])


def masked_log_softmax(logits: Tensor, allowed: Tensor | None) -> Tensor:
    """log_softmax over the last dim in fp32, giving disallowed positions (allowed == 0) -inf-like scores."""
    logits = logits.float()
    if allowed is not None:
        logits = logits.masked_fill(~allowed.bool(), MASK_VALUE)
    return torch.log_softmax(logits, -1)


def span_loss(logits: Tensor, positions: Tensor, allowed: Tensor | None = None) -> Tensor:
    """Mean negative log-likelihood of the gold `positions` [B] under masked softmax over T."""
    return -masked_log_softmax(logits, allowed).gather(-1, positions[:, None]).mean()


def span_qa_loss(
    out: SpanQAOutput,
    start_positions: Tensor,
    end_positions: Tensor,
    allowed: Tensor | None = None,
    is_impossible: Tensor | None = None,
    answerable_weight: float = 0.5,
) -> Tensor:
    """ELECTRA's QA loss: (start NLL + end NLL) / 2 [+ answerable_weight * BCE(na_logit, is_impossible)].

    Unanswerable examples point start and end at 0 ([CLS]).
    """
    loss = (
        span_loss(out.start_logits, start_positions, allowed) + span_loss(out.end_logits, end_positions, allowed)
    ) / 2
    if out.na_logit is not None and is_impossible is not None:
        loss = loss + answerable_weight * F.binary_cross_entropy_with_logits(
            out.na_logit.float(), is_impossible.float()
        )
    return loss


def best_span(
    start_scores: Tensor,
    end_scores: Tensor,
    allowed: Tensor,
    max_answer_length: int = 30,
    starts: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """argmax over start <= end < start + max_answer_length of start_scores[s] + end_scores[e],
    both positions `allowed` and the start also in `starts` when given; returns (start [B],
    end [B], score [B]). Exhaustive: O(B * T^2)."""
    t = start_scores.shape[-1]
    positions = torch.arange(t, device=start_scores.device)
    length = positions[None, :] - positions[:, None]  # [start, end]
    ok = (length >= 0) & (length < max_answer_length)
    start_ok = allowed.bool() if starts is None else allowed.bool() & starts.bool()
    ok = ok[None] & start_ok[:, :, None] & allowed.bool()[:, None, :]
    scores = (start_scores.float()[:, :, None] + end_scores.float()[:, None, :]).masked_fill(~ok, float("-inf"))
    flat = scores.flatten(1).argmax(-1)
    rows = torch.arange(start_scores.shape[0], device=start_scores.device)
    return flat // t, flat % t, scores.flatten(1)[rows, flat]


def build_head(kind: str, config: dict[str, Any], host: PluginHost | None = None) -> nn.Module:
    """Rebuild a head from its `kind` and `config()` (as stored by modelio / returned by hf.load_hf),
    looked up in the head registry (`xfer.transformer.registry`), so plugins' heads work too."""
    return registry.build_head(kind, config, host)

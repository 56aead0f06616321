"""Sequence tagging module: the primary module and the auxiliary views of thesis 4.2.2.

    primary   p(y_t)  = softmax(U relu(W [h1_t; h2_t]))        (teacher; test-time predictions)
    full      p(y_t)  = softmax(U' W' [h1_t; h2_t])             (dropout on its input; no ReLU, as
                                                               the original code's "full" module)
    fwd       p(y_t)  = NN_fwd(fw1_t)          never sees words right of t
    bwd       p(y_t)  = NN_bwd(bw1_t)          never sees words left of t
    future    p(y_t)  = NN_future(fw1_{t-1})   sees neither word t nor words to its right
    past      p(y_t)  = NN_past(bw1_{t+1})     sees neither word t nor words to its left

The four layer-1 views share shapes, so their weights are stacked and they run as one batched
matmul over all words of the batch (one pass for every view). As in the original code, `future`
is not trained on the first word (its input would be the <start> state alone) nor `past` on the
last one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xfer.cvt.model import EncoderStates, init_linear

UNI_VIEWS = ("fwd", "bwd", "future", "past")
_SOURCE = {"fwd": ("fw1", 0), "bwd": ("bw1", 0), "future": ("fw1", -1), "past": ("bw1", 1)}


class Classifier(nn.Module):
    """Linear -> (ReLU) -> Linear."""

    def __init__(self, inputs: int, hidden: int, outputs: int, activate: bool = True):
        super().__init__()
        self.hidden = init_linear(nn.Linear(inputs, hidden))
        self.out = init_linear(nn.Linear(hidden, outputs))
        self.activate = activate

    def forward(self, x: Tensor) -> Tensor:
        h = self.hidden(x)
        return self.out(F.relu(h) if self.activate else h)


class StackedViews(nn.Module):
    """V independent `Linear -> ReLU -> Linear` classifiers evaluated as batched matmuls."""

    def __init__(self, views: int, inputs: int, hidden: int, outputs: int):
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(views, inputs, hidden))
        self.b1 = nn.Parameter(torch.zeros(views, 1, hidden))
        self.w2 = nn.Parameter(torch.empty(views, hidden, outputs))
        self.b2 = nn.Parameter(torch.zeros(views, 1, outputs))
        for w in (self.w1, self.w2):
            for v in range(views):
                nn.init.xavier_uniform_(w.data[v].T)  # same bound as nn.Linear(inputs, hidden) of each view

    def forward(self, x: Tensor) -> Tensor:
        """x [V, N, inputs] -> [V, N, outputs]."""
        return torch.baddbmm(self.b2, F.relu(torch.baddbmm(self.b1, x, self.w1)), self.w2)


def soft_cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Per-row cross-entropy of `logits` [..., C] against distributions `targets` [..., C]."""
    return -(targets * F.log_softmax(logits.float(), dim=-1)).sum(-1)


class TaggingModule(nn.Module):
    kind = "tagging"

    def __init__(self, full_size: int, uni_size: int, hidden: int, labels: Sequence[str], views: Sequence[str]):
        super().__init__()
        self.labels = list(labels)
        classes = len(self.labels)
        self.primary = Classifier(full_size, hidden, classes)
        self.full = Classifier(full_size, hidden, classes, activate=False) if "full" in views else None
        self.uni_views = [v for v in UNI_VIEWS if v in views]
        self.views = StackedViews(len(self.uni_views), uni_size, hidden, classes) if self.uni_views else None

    # --- pieces ----------------------------------------------------------------------------------

    @staticmethod
    def word_index(states: EncoderStates) -> Tensor:
        """Flat indices (b * T + t) of the words of the batch, in order: N entries. States are
        picked with `index_select`, whose backward (index_add_) is 2-3x cheaper in bf16 than
        that of `x[index]` (an accumulating index_put_)."""
        return states.word_mask.flatten().nonzero().squeeze(1)

    def primary_logits(self, states: EncoderStates) -> Tensor:
        return self.primary(states.full.flatten(0, 1).index_select(0, self.word_index(states))).float()

    def view_logits(self, states: EncoderStates) -> dict[str, tuple[Tensor, Tensor]]:
        """view -> (logits [N, C], weight [N]: 1 where the view is trained on that word)."""
        index = self.word_index(states)
        out: dict[str, tuple[Tensor, Tensor]] = {}
        if self.full is not None:
            out["full"] = (
                self.full(states.full.flatten(0, 1).index_select(0, index)).float(),
                torch.ones_like(index, dtype=torch.float),
            )
        if self.views is not None:
            flat = {"fw1": states.fw1.flatten(0, 1), "bw1": states.bw1.flatten(0, 1)}
            word_flags = states.word_mask.flatten()
            inputs, weights = [], []
            for view in self.uni_views:
                source, shift = _SOURCE[view]
                inputs.append(flat[source].index_select(0, index + shift))
                weight = torch.ones_like(index, dtype=torch.float) if shift == 0 else word_flags[index + shift].float()
                weights.append(weight)  # future: the previous position is a word; past: the next one
            logits = self.views(torch.stack(inputs)).float()
            for i, view in enumerate(self.uni_views):
                out[view] = (logits[i], weights[i])
        return out

    # --- the objective's protocol ----------------------------------------------------------------

    def supervised(
        self, states: EncoderStates, batch: dict[str, Tensor], smoothing: float, p: float = 0.0
    ) -> tuple[list, dict]:
        logits = self.primary_logits(states)
        gold = batch["labels"].flatten()[self.word_index(states)]
        loss = F.cross_entropy(logits, gold, label_smoothing=smoothing, reduction="sum")
        correct = (logits.argmax(-1) == gold).sum()
        return [("primary", loss, gold.new_tensor(gold.numel(), dtype=torch.float))], {
            "correct": correct,
            "total": gold.numel(),
        }

    @torch.no_grad()
    def teacher(self, states: EncoderStates, batch: dict[str, Tensor], settings: Any) -> Tensor:
        """Soft targets: the primary module's distribution for every word [N, C]."""
        return F.softmax(self.primary_logits(states), dim=-1)

    def student_losses(
        self, states: EncoderStates, batch: dict[str, Tensor], targets: Tensor, settings: Any, primary_only: bool
    ) -> list[tuple[str, Tensor, Tensor]]:
        """(name, summed CE, count) per student: the auxiliary views, or the primary module itself
        (word dropout baseline)."""
        if primary_only:
            ce = soft_cross_entropy(self.primary_logits(states), targets)
            return [("primary", ce.sum(), ce.new_tensor(ce.numel()))]
        losses = []
        for view, (logits, weight) in self.view_logits(states).items():
            losses.append((view, (soft_cross_entropy(logits, targets) * weight).sum(), weight.sum()))
        return losses

    @torch.no_grad()
    def predict(self, states: EncoderStates, batch: dict[str, Tensor], settings: Any) -> list[list[str]]:
        best = self.primary_logits(states).argmax(-1).tolist()
        out, start = [], 0
        for n in (states.lengths - 2).tolist():
            out.append([self.labels[i] for i in best[start : start + n]])
            start += n
        return out

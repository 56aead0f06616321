"""Graph-based dependency parsing module and its auxiliary views (thesis 4.2.3).

Every word t gets one distribution over (head, relation) pairs, head in {ROOT} ∪ words:

    s(u, t, r) = relu(W_head z_u + b)ᵀ (W_r + W) · A relu(W_dep z_t + b) / sqrt(D)

with a relation-specific W_r and a W shared by all relations (the dependent side is projected
to D = `parse_dim` dimensions first, as in the original code, which keeps the R relation matrices
small). ROOT is a learned vector h_ROOT in the head's hidden space, scored the same way (plus a
per-relation bias); arcs from ROOT may only carry relations seen with head 0 in training and,
the mirror, arcs between words only relations seen with a word head (`word_relations`), else a
word hung from another word could be labelled `root` and a predicted tree carried two `root`
relations (UD validation and the CoNLL 2018 evaluator reject that). Without `word_relations`,
training is unrestricted (a word-headed `root` in the data keeps a finite loss) and predictions
never put UD's `root` (or a subtype) seen with head 0 on an arc between words. Self loops and
arcs from padding or <start>/<end> are impossible.

Views: the primary (teacher) and `full` modules read [h1; h2] on both sides; the auxiliaries
fwd-fwd, fwd-bwd, bwd-fwd, bwd-bwd read one layer-1 direction for the candidate head (first
name) and one for the dependent (second name), so each misses the context on one side of each.
The four share shapes and run stacked (one batched einsum for all of them).

Column layout of the scores of a batch [B, T]: column 0 = ROOT, column u + 1 = position u (so
word i, at position i, is column i + 1). A label is `column * R + relation`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xfer.cvt.model import EncoderStates, dropout
from xfer.cvt.mst import max_tree

UNI_VIEWS = ("fwd-fwd", "fwd-bwd", "bwd-fwd", "bwd-bwd")
_SIDES = {"fwd": "fw1", "bwd": "bw1"}


class ArcScorer(nn.Module):
    """V stacked scorers of the form above, evaluated together."""

    def __init__(self, views: int, inputs: int, hidden: int, dim: int, relations: int):
        super().__init__()

        def param(*shape: int, fan: tuple[int, int] | None = None) -> nn.Parameter:
            tensor = torch.empty(*shape)
            if fan is None:
                nn.init.zeros_(tensor)
            else:
                bound = (6.0 / sum(fan)) ** 0.5
                nn.init.uniform_(tensor, -bound, bound)
            return nn.Parameter(tensor)

        self.w_head, self.b_head = param(views, inputs, hidden, fan=(inputs, hidden)), param(views, 1, 1, hidden)
        self.w_dep, self.b_dep = param(views, inputs, hidden, fan=(inputs, hidden)), param(views, 1, 1, hidden)
        self.w_proj, self.b_proj = param(views, hidden, dim, fan=(hidden, dim)), param(views, 1, 1, dim)
        self.w_rel = param(views, hidden, relations, dim, fan=(hidden, relations * dim))
        self.w_shared = param(views, hidden, dim, fan=(hidden, dim))
        self.root = param(views, hidden, fan=(1, hidden))
        self.root_bias = param(views, relations)
        self.scale = dim**-0.5

    def forward(self, head_in: Tensor, dep_in: Tensor, p: float) -> Tensor:
        """head_in, dep_in [V, B, T, inputs] -> scores [V, B, T (dependent), 1 + T (head), R]."""
        hh = F.relu(torch.einsum("vbti,vih->vbth", head_in, self.w_head) + self.b_head)
        hd = F.relu(torch.einsum("vbti,vih->vbth", dep_in, self.w_dep) + self.b_dep)
        hh, hd = dropout(hh, p, self.training), dropout(hd, p, self.training)
        a = torch.einsum("vbth,vhd->vbtd", hd, self.w_proj) + self.b_proj
        w = self.w_rel + self.w_shared[:, :, None, :]  # [V, H, R, D]
        heads = torch.einsum("vbuh,vhrd->vburd", hh, w)
        words = torch.einsum("vbtd,vburd->vbtur", a, heads)
        root_w = torch.einsum("vh,vhrd->vrd", self.root, w)
        root = torch.einsum("vbtd,vrd->vbtr", a, root_w) + self.root_bias[:, None, None, :]
        return torch.cat([root[:, :, :, None, :], words], dim=3) * self.scale


class ParsingModule(nn.Module):
    kind = "parsing"

    def __init__(
        self,
        full_size: int,
        uni_size: int,
        hidden: int,
        dim: int,
        relations: Sequence[str],
        root_relations: Sequence[str],
        views: Sequence[str],
        word_relations: Sequence[str] | None = None,
    ):
        super().__init__()
        self.relations = list(relations)
        r = len(self.relations)
        self.register_buffer(
            "root_allowed", torch.tensor([rel in set(root_relations) for rel in self.relations]), persistent=False
        )
        words = set(self.relations if word_relations is None else word_relations)
        self.register_buffer("word_allowed", torch.tensor([rel in words for rel in self.relations]), persistent=False)
        if word_relations is None:  # UD's `root` (any subtype) labels the ROOT arc and no other
            words -= {rel for rel in root_relations if rel.split(":")[0].lower() == "root"}
        self.register_buffer(  # what predictions may put on an arc between words
            "word_output", torch.tensor([rel in words for rel in self.relations]), persistent=False
        )
        self.primary = ArcScorer(1, full_size, hidden, dim, r)
        self.full = ArcScorer(1, full_size, hidden, dim, r) if "full" in views else None
        self.uni_views = [v for v in UNI_VIEWS if v in views]
        self.views = ArcScorer(len(self.uni_views), uni_size, hidden, dim, r) if self.uni_views else None

    # --- pieces ----------------------------------------------------------------------------------

    def _arc_mask(self, states: EncoderStates) -> Tensor:
        """[B, T, 1 + T, 1] bool: which head columns each position may take (ROOT and real words,
        never itself); broadcast over relations, so no [B, T, 1+T, R] mask is materialised."""
        b, t = states.word_mask.shape
        heads_ok = torch.cat([states.word_mask.new_ones(b, 1), states.word_mask], dim=1)  # [B, 1+T]
        positions = torch.arange(t, device=heads_ok.device)
        not_self = positions[:, None] + 1 != torch.arange(t + 1, device=heads_ok.device)[None, :]  # [T, 1+T]
        return (heads_ok[:, None, :] & not_self[None])[..., None]

    def _flat_rows(self, scores: Tensor, states: EncoderStates) -> Tensor:
        """scores [V, B, T, 1+T, R] -> log-probabilities [V, N, (1+T) R] at the words."""
        index = states.word_mask.flatten().nonzero().squeeze(1)
        rows = scores.flatten(1, 2)[:, index].float()  # [V, N, 1+T, R]: only the words' rows
        arcs = self._arc_mask(states).flatten(0, 1)[index]  # [N, 1+T, 1]
        relations = torch.ones(rows.shape[-2:], dtype=torch.bool, device=rows.device)
        relations[0] = self.root_allowed  # arcs from ROOT carry root relations only
        relations[1:] = self.word_allowed  # and arcs from words word relations only (no second `root`)
        rows = rows.masked_fill(~(arcs & relations)[None], float("-inf"))
        return F.log_softmax(rows.flatten(2), dim=-1)

    def primary_logprobs(self, states: EncoderStates, p: float) -> Tensor:
        full = states.full[None]
        return self._flat_rows(self.primary(full, full, p), states)[0]

    def view_logprobs(self, states: EncoderStates, p: float) -> dict[str, Tensor]:
        out = {}
        if self.full is not None:
            full = states.full[None]
            out["full"] = self._flat_rows(self.full(full, full, p), states)[0]
        if self.views is not None:
            sides = {"fwd": states.fw1, "bwd": states.bw1}
            heads = torch.stack([sides[v.split("-")[0]] for v in self.uni_views])
            deps = torch.stack([sides[v.split("-")[1]] for v in self.uni_views])
            logprobs = self._flat_rows(self.views(heads, deps, p), states)
            for i, view in enumerate(self.uni_views):
                out[view] = logprobs[i]
        return out

    def gold(self, states: EncoderStates, batch: dict[str, Tensor]) -> Tensor:
        """Joint labels at the words [N]: column(head) * R + relation."""
        index = states.word_mask.flatten().nonzero().squeeze(1)
        heads = batch["heads"].flatten()[index]
        relations = batch["labels"].flatten()[index]
        column = torch.where(heads == 0, torch.zeros_like(heads), heads + 1)
        return column * len(self.relations) + relations

    # --- the objective's protocol ----------------------------------------------------------------

    def supervised(
        self, states: EncoderStates, batch: dict[str, Tensor], smoothing: float, p: float
    ) -> tuple[list, dict]:
        logprobs = self.primary_logprobs(states, p)
        gold = self.gold(states, batch)
        nll = -logprobs.gather(1, gold[:, None]).squeeze(1)
        if smoothing > 0:
            possible = torch.isfinite(logprobs)
            uniform = -(logprobs.masked_fill(~possible, 0.0)).sum(-1) / possible.sum(-1)
            nll = (1 - smoothing) * nll + smoothing * uniform
        correct = (logprobs.argmax(-1) == gold).sum()
        return [("primary", nll.sum(), nll.new_tensor(nll.numel()))], {"correct": correct, "total": gold.numel()}

    @torch.no_grad()
    def teacher(self, states: EncoderStates, batch: dict[str, Tensor], settings: Any) -> Tensor:
        return self.primary_logprobs(states, 0.0).exp()

    def student_losses(
        self, states: EncoderStates, batch: dict[str, Tensor], targets: Tensor, settings: Any, primary_only: bool
    ) -> list[tuple[str, Tensor, Tensor]]:
        p = settings.student_dropout
        outputs = {"primary": self.primary_logprobs(states, p)} if primary_only else self.view_logprobs(states, p)
        losses = []
        for view, logprobs in outputs.items():
            ce = -(targets * logprobs.masked_fill(targets == 0, 0.0)).sum(-1)
            losses.append((view, ce.sum(), ce.new_tensor(ce.numel())))
        return losses

    @torch.no_grad()
    def predict(
        self, states: EncoderStates, batch: dict[str, Tensor], settings: Any
    ) -> list[tuple[list[int], list[str]]]:
        logprobs = self.primary_logprobs(states, 0.0).float()
        r = len(self.relations)
        width = states.word_mask.shape[1]
        out, start = [], 0
        for n in (states.lengths - 2).tolist():
            rows = logprobs[start : start + n].view(n, width + 1, r)[:, : n + 2]  # columns ROOT, <start>, words
            rows = torch.cat([rows[:, :1], rows[:, 1:].masked_fill(~self.word_output, float("-inf"))], dim=1)
            start += n
            if settings.parse_decoding == "mst":
                marginal = torch.logsumexp(rows, dim=-1).cpu().numpy()  # [dep, column]
                scores = np.full((n + 1, n + 1), -np.inf)
                scores[0, 1:] = marginal[:, 0]
                scores[1:, 1:] = marginal[:, 2 : n + 2].T  # head word h is column h + 1
                heads = max_tree(scores)[1:].tolist()
                columns = [0 if h == 0 else h + 1 for h in heads]
                picked = torch.tensor(columns, dtype=torch.long, device=rows.device)  # long: [] is float
                rels = rows[torch.arange(n, device=rows.device), picked].argmax(-1).tolist()
            else:
                best = rows.flatten(1).argmax(-1)
                columns, rels = (best // r).tolist(), (best % r).tolist()
                heads = [0 if c == 0 else c - 1 for c in columns]
            out.append((heads, [self.relations[i] for i in rels]))
        return out

"""Which tokens to mask, and what to put there: the details METHODS.md pins.

- Candidates are real (non-pad) tokens other than [CLS], [SEP] and [MASK].
- A fixed count per sequence: round(mask_prob * n) with n the sequence's real tokens (special
  tokens included, as the original counts `input_mask`), at least 1, at most
  `max_predictions(mask_prob, max_length)` = int((mask_prob + 0.005) * max_length) (19 for 128),
  and never more than the sequence has candidates. Positions are drawn uniformly *without*
  replacement (the original draws with replacement and silently masks fewer tokens when a
  position repeats; the intended count is what the papers describe). Electric's noise count is
  ceil(mask_prob * n) (thesis 5.1.3).
- ELECTRA: of the chosen positions, each becomes [MASK] with probability 0.85 and keeps its token
  otherwise, in the generator's input — no random-token replacement.
- BERT (the MLM baseline): 80% [MASK], 10% a random token, 10% unchanged.

Everything runs on the batch's device from the global torch RNG, which the trainer checkpoints,
so masks are drawn on the fly and resume stays exact.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import Tensor


def max_predictions(mask_prob: float, max_length: int) -> int:
    """The original's cap on masked tokens per sequence: int((mask_prob + 0.005) * max_length)."""
    return max(1, int((mask_prob + 0.005) * max_length))


def electric_cap(mask_prob: float, max_length: int) -> int:
    """Electric's cap on noise positions per sequence: k = ceil(mask_prob * n) (thesis 5.1.3,
    METHODS.md) must hold at full length too, where ELECTRA's `max_predictions` (19 at 128) would
    cut it (ceil(0.15 x 128) = 20). ELECTRA's own objectives keep `max_predictions` (METHODS.md)."""
    longest = int(target_count(torch.tensor([max_length]), mask_prob, "ceil").item())
    return max(max_predictions(mask_prob, max_length), longest)


@dataclass
class Selection:
    """Chosen positions of a [B, T] batch, as flat indices into the B*T token grid.

    `flat` [M] (row-major, sorted by sequence), `rows` [M] the sequence of each, `count` [B] per
    sequence, `chosen` [B, T] bool.
    """

    flat: Tensor
    rows: Tensor
    count: Tensor
    chosen: Tensor


def candidates(input_ids: Tensor, attention_mask: Tensor, special_ids: Tensor) -> Tensor:
    """[B, T] bool: tokens that may be masked (real, not [CLS]/[SEP]/[MASK])."""
    return attention_mask.bool() & ~torch.isin(input_ids, special_ids)


def has_float64(device: torch.device) -> bool:
    """Whether tensors of `device` may be float64: Apple's MPS has no float64 at all (creating one
    raises TypeError), CPU and CUDA have it."""
    return device.type != "mps"


@functools.lru_cache(maxsize=32)
def _count_table(mask_prob: float, max_tokens: int, rounding: str, device: torch.device) -> Tensor:
    """int64 [max_tokens + 1]: `target_count` of n = 0 .. max_tokens, computed on the CPU (float64 for
    "ceil": the same IEEE operations as on any float64 device; float32 for "round", whose ties round
    to even there) and copied once to `device`. Looking counts up there is exact integer work: no
    float64 on the device (MPS has none), no device-specific rounding, no host sync per step."""
    return target_count(torch.arange(max_tokens + 1), mask_prob, rounding).long().to(device)


def target_count(n_tokens: Tensor, mask_prob: float, rounding: str = "round", max_tokens: int | None = None) -> Tensor:
    """mask_prob x n per sequence, before the cap and the candidate count (`xfer.electra.flops`
    costs the same numbers). "round": the original ELECTRA's float32 round, ties included. "ceil"
    (Electric's k): in float64, a product within 1e-9 of a whole number taken as that number; in
    float32, 0.15 x 100 = 15.000001 gave k = 16 where the thesis's ceil(0.15 n) is 15.

    With `max_tokens` (a bound on the integer counts `n_tokens`, as `select` knows: the sequence
    length), the counts are looked up (int64) in a table computed on the CPU (`_count_table`)
    instead of computed on `n_tokens`'s device: the same values, and a run with `--device mps` no
    longer fails at its first Electric step on MPS's missing float64."""
    if max_tokens is not None:
        table = _count_table(float(mask_prob), int(max_tokens), rounding, n_tokens.device)
        return table[n_tokens.long().clamp(0, max_tokens)]
    if rounding == "ceil":
        return torch.ceil(n_tokens.double() * mask_prob - 1e-9)
    return torch.round(n_tokens.float() * mask_prob)


def select(
    input_ids: Tensor,
    attention_mask: Tensor,
    special_ids: Tensor,
    mask_prob: float,
    cap: int,
    rounding: str = "round",
) -> Selection:
    """A fixed count of distinct candidate positions per sequence, uniformly at random."""
    allowed = candidates(input_ids, attention_mask, special_ids)
    raw = target_count(attention_mask.sum(-1), mask_prob, rounding, max_tokens=input_ids.shape[1])
    count = torch.minimum(raw.long().clamp(1, cap), allowed.sum(-1))
    # The top-`count` of i.i.d. uniform scores over the candidates is a uniform draw without replacement.
    scores = torch.rand(input_ids.shape, device=input_ids.device).masked_fill_(~allowed, -1.0)
    k = min(cap, input_ids.shape[1])
    top = scores.topk(k, dim=-1).indices  # [B, k]
    keep = torch.arange(k, device=input_ids.device)[None, :] < count[:, None]
    chosen = torch.zeros_like(allowed).scatter_(1, top, keep)
    flat = chosen.reshape(-1).nonzero().squeeze(1)
    return Selection(flat, flat // input_ids.shape[1], count, chosen)


def electra_generator_input(input_ids: Tensor, selection: Selection, mask_id: int, mask_fraction: float) -> Tensor:
    """The generator's input: each chosen token becomes [MASK] with probability `mask_fraction`
    (0.85) and is left unchanged otherwise. No random replacement."""
    flat = input_ids.reshape(-1).clone()
    to_mask = torch.rand(selection.flat.shape, device=input_ids.device) < mask_fraction
    flat[selection.flat[to_mask]] = mask_id
    return flat.view_as(input_ids)


def bert_input(
    input_ids: Tensor, selection: Selection, mask_id: int, vocab_size: int, mask: float = 0.8, random: float = 0.1
) -> Tensor:
    """BERT's corruption of the chosen tokens: [MASK] (80%), a random token (10%), unchanged (10%)."""
    flat = input_ids.reshape(-1).clone()
    draw = torch.rand(selection.flat.shape, device=input_ids.device)
    masked = selection.flat[draw < mask]
    randomized = selection.flat[(draw >= mask) & (draw < mask + random)]
    flat[masked] = mask_id
    flat[randomized] = torch.randint(vocab_size, randomized.shape, device=input_ids.device)
    return flat.view_as(input_ids)

"""Analytic training FLOPs of the pre-training objectives, for compute-matched comparisons.

What is counted: the multiply-adds of every matrix product, 2 FLOPs each (the quantity
`torch.utils.flop_counter.FlopCounterMode` measures, which a test checks within 5%); a training
step costs 3x the forward pass (the backward computes gradients for both inputs of every
product). Element-wise work (softmax, GELU, LayerNorm, dropout) is left out: it is a few percent
and depends on kernels, not on the method. ELECTRA's own `flops_computation.py` adds estimates
of it; comparisons between objectives are unaffected as both sides are counted the same way.

Per sequence of n real tokens, an encoder of width h, FFN width i, embedding width e and L
layers costs, forward: 2n(e*h if e != h) + L * (2n(4h^2 + 2hi) + 4n^2 h). ELECTRA adds the
generator encoder, the generator's softmax at the ~15% masked positions only (2m(h_g e + e V))
and the discriminator head at every token (2n(h^2 + h)); the BERT baseline a softmax at its
masked positions; Electric two causal towers and a softmax at *every* token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

TRAIN_MULTIPLIER = 3  # forward + backward (two products per forward product)


@dataclass(frozen=True)
class Arch:
    """The sizes that determine FLOPs (read off an EncoderConfig)."""

    hidden: int
    layers: int
    intermediate: int
    embedding: int
    vocab: int

    @classmethod
    def of(cls, config: Any) -> Arch:
        return cls(
            config.hidden_size, config.num_layers, config.intermediate_size, config.embedding_size, config.vocab_size
        )


def encoder_forward(arch: Arch, n: np.ndarray | float) -> np.ndarray | float:
    """Forward FLOPs of an encoder over sequences of `n` real tokens (causal towers count the same:
    the masked half of the scores is still computed)."""
    h, i, e = arch.hidden, arch.intermediate, arch.embedding
    project = 2 * n * e * h if e != h else 0
    return project + arch.layers * (2 * n * (4 * h * h + 2 * h * i) + 4 * n * n * h)


def softmax_head_forward(arch: Arch, rows: np.ndarray | float, inputs: int | None = None) -> np.ndarray | float:
    """dense(inputs -> embedding) + logits against the V x embedding table, at `rows` positions."""
    width = arch.hidden if inputs is None else inputs
    return 2 * rows * (width * arch.embedding + arch.embedding * arch.vocab)


def detection_head_forward(arch: Arch, rows: np.ndarray | float) -> np.ndarray | float:
    return 2 * rows * (arch.hidden * arch.hidden + arch.hidden)


def masked_count(n: np.ndarray, mask_prob: float, max_length: int, rounding: str = "round") -> np.ndarray:
    """Masked positions per sequence, as `xfer.electra.masking.select` draws them (candidates ~ n - 3)."""
    import torch

    from xfer.electra.masking import max_predictions, target_count

    raw = target_count(torch.as_tensor(np.asarray(n, dtype=np.float64)), mask_prob, rounding).double().numpy()
    return np.minimum(np.clip(raw, 1, max_predictions(mask_prob, max_length)), np.maximum(n - 3, 0))


class NoFlopFormula(ValueError):
    """An objective this module cannot cost (a plugin's, with a config class of its own)."""


def training_flops(config: Any, disc: Arch, gen: Arch | None, lengths: np.ndarray, max_length: int) -> dict[str, float]:
    """Training FLOPs per *sequence* (mean over `lengths`), by component, of the objective `config`
    configures; `gen` is the generator's architecture (None for generator-less objectives).

    The formula follows the config's class, not the objective's registered name, so a plugin
    objective built on a built-in one (its config an `RTDConfig`, `MLMConfig` or `NCEConfig`, or a
    subclass) is costed like it. A config class of its own may bring its formula as a method
    `training_flops(disc, gen, n, max_length) -> {component: forward FLOPs per sequence}` (`n`: the
    real-token counts, a float array); without one, `NoFlopFormula` (FLOP budgets need a count)."""
    from xfer.electra.config import MLMConfig, NCEConfig, RTDConfig

    n = np.asarray(lengths, dtype=np.float64)
    own = getattr(config, "training_flops", None)
    if callable(own):
        parts = dict(own(disc, gen, n, max_length))
        _check_own_formula(config, parts)
    elif isinstance(config, MLMConfig):
        parts = _mlm_forward(config, disc, n, max_length)
    elif isinstance(config, RTDConfig):
        parts = _rtd_forward(config, disc, gen, n, max_length)
    elif isinstance(config, NCEConfig):
        assert gen is not None
        parts = _electric_forward(disc, gen, n)
    else:
        raise NoFlopFormula(
            f"no FLOP formula for an objective configured by {type(config).__name__} (xfer.electra.flops costs "
            "RTDConfig, MLMConfig and NCEConfig objectives; a config class may define training_flops)"
        )
    return {name: float(TRAIN_MULTIPLIER * np.mean(value)) for name, value in parts.items()}


def _check_own_formula(config: Any, parts: dict[str, Any]) -> None:
    """A config class's own `training_flops` must give finite, non-negative FLOPs, not all zero.

    Its numbers were used as given: all zero made a FLOP budget a bare `ZeroDivisionError`, a NaN
    `cannot convert float NaN to integer`, a negative total "the budget does not buy one training
    step (... < -12288 per step)", in `xfer flops` and the stage alike, none naming the formula."""
    from xfer.core.errors import UserError

    where = f"{type(config).__name__}.training_flops"
    total = 0.0
    for name, value in parts.items():
        values = np.asarray(value, dtype=np.float64).ravel()
        bad = values[~np.isfinite(values) | (values < 0)]
        if bad.size:
            raise UserError(
                f"{where} gave {bad[0]:g} FLOPs for {name!r} (a sequence's): FLOPs must be finite and non-negative"
            )
        total += float(values.sum())
    if total <= 0:
        raise UserError(f"{where} gave 0 FLOPs ({', '.join(map(repr, parts)) or 'no components'}): a step costs some")


def _mlm_forward(config: Any, disc: Arch, n: np.ndarray, max_length: int) -> dict[str, Any]:
    m = masked_count(n, config.mask_prob, max_length)
    return {"encoder": encoder_forward(disc, n), "mlm softmax (masked positions)": softmax_head_forward(disc, m)}


def _rtd_forward(config: Any, disc: Arch, gen: Arch | None, n: np.ndarray, max_length: int) -> dict[str, Any]:
    parts: dict[str, Any] = {}
    m = masked_count(n, config.mask_prob, max_length)
    kind = config.generator.kind
    if kind == "mlm" and gen is not None:
        parts["generator"] = encoder_forward(gen, n)
        parts["generator softmax (masked positions)"] = softmax_head_forward(gen, m)
    elif kind == "two_tower" and gen is not None:
        candidates = np.maximum(n - 3, 0)
        parts["generator (two towers)"] = 2 * encoder_forward(gen, n)
        parts["generator softmax (all candidates)"] = softmax_head_forward(gen, candidates, 2 * gen.hidden)
    parts["discriminator"] = encoder_forward(disc, n)
    if config.variant == "electra":
        parts["discriminator head"] = detection_head_forward(disc, n)
    elif config.variant == "electra_15":
        parts["discriminator head"] = detection_head_forward(disc, m)
    elif config.variant == "replace_mlm":
        parts["mlm softmax (masked positions)"] = softmax_head_forward(disc, m)
    else:
        parts["mlm softmax (all tokens)"] = softmax_head_forward(disc, n) + 2 * n * disc.hidden
    return parts


def _electric_forward(disc: Arch, gen: Arch, n: np.ndarray) -> dict[str, Any]:
    return {
        "noise model (two towers)": 2 * encoder_forward(gen, n),
        "noise softmax (all tokens)": softmax_head_forward(gen, n, 2 * gen.hidden),
        "energy model": encoder_forward(disc, n),
        "energy head": detection_head_forward(disc, n),
    }


def steps_for_budget(budget: Any, flops_per_step: float | None, tokens_per_step: float) -> int:
    """Optimizer steps that a `budget` (flops, tokens or steps) buys; ValueError if not even one, or
    if it is in FLOPs and the objective has no FLOP formula (`flops_per_step` None)."""
    if budget.steps is not None:
        return int(budget.steps)
    if budget.flops is not None and flops_per_step is None:
        raise NoFlopFormula(
            "budget.flops needs a FLOP count, and this objective has no FLOP formula: give the budget in tokens or steps"
        )
    if budget.tokens is not None:
        steps, what = (
            _whole_steps(budget.tokens, tokens_per_step),
            f"tokens {budget.tokens:.6g} < {tokens_per_step:.6g} per step",
        )
    else:
        assert flops_per_step is not None
        steps, what = (
            _whole_steps(budget.flops, flops_per_step),
            f"flops {budget.flops:.6g} < {flops_per_step:.6g} per step",
        )
    if steps < 1:
        raise ValueError(f"the budget does not buy one training step (budget.{what})")
    return steps


_BUDGET_RTOL = 1e-9


def _whole_steps(budget: float, per_step: float) -> int:
    """Whole steps `budget` pays for, `per_step` each.

    A plain `budget // per_step` floors the quotient of two rounded floats: a budget written as
    exactly k steps' worth (e.g. `flops_total` of `xfer flops --json`, itself `per_step * k`)
    came out as k - 1 steps about half the time, and `xfer flops` and the stage (which add the
    components in another order) could disagree by a step. A quotient within a relative 1e-9 of
    a whole number is that number; FLOP and token counts carry no such precision anyway.
    """
    quotient = budget / per_step
    nearest = round(quotient)
    if abs(quotient - nearest) <= _BUDGET_RTOL * max(1.0, abs(quotient)):
        return int(nearest)
    return math.floor(quotient)

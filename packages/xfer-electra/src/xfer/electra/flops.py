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
    from xfer.electra.masking import max_predictions

    raw = np.ceil(n * mask_prob) if rounding == "ceil" else np.round(n * mask_prob)
    return np.minimum(np.clip(raw, 1, max_predictions(mask_prob, max_length)), np.maximum(n - 3, 0))


def training_flops(
    objective: str, config: Any, disc: Arch, gen: Arch | None, lengths: np.ndarray, max_length: int
) -> dict[str, float]:
    """Training FLOPs per *sequence* (mean over `lengths`), by component, for a registered objective.

    `config` is the objective's config (RTDConfig, MLMConfig, NCEConfig); `gen` the generator's
    architecture (None for generator-less objectives)."""
    n = np.asarray(lengths, dtype=np.float64)
    parts: dict[str, np.ndarray | float] = {}
    if objective == "electra.mlm":
        m = masked_count(n, config.mask_prob, max_length)
        parts["encoder"] = encoder_forward(disc, n)
        parts["mlm softmax (masked positions)"] = softmax_head_forward(disc, m)
    elif objective == "electra.rtd":
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
    elif objective == "electric.nce":
        assert gen is not None
        parts["noise model (two towers)"] = 2 * encoder_forward(gen, n)
        parts["noise softmax (all tokens)"] = softmax_head_forward(gen, n, 2 * gen.hidden)
        parts["energy model"] = encoder_forward(disc, n)
        parts["energy head"] = detection_head_forward(disc, n)
    else:
        raise ValueError(f"no FLOP formula for objective {objective!r}")
    return {name: float(TRAIN_MULTIPLIER * np.mean(value)) for name, value in parts.items()}


def steps_for_budget(budget: Any, flops_per_step: float, tokens_per_step: float) -> int:
    """Optimizer steps that a `budget` (flops, tokens or steps) buys; ValueError if not even one."""
    if budget.steps is not None:
        return int(budget.steps)
    if budget.tokens is not None:
        steps, what = (
            int(budget.tokens // tokens_per_step),
            f"tokens {budget.tokens:.3g} < {tokens_per_step:.0f} per step",
        )
    else:
        steps, what = int(budget.flops // flops_per_step), f"flops {budget.flops:.3g} < {flops_per_step:.3g} per step"
    if steps < 1:
        raise ValueError(f"the budget does not buy one training step (budget.{what})")
    return steps

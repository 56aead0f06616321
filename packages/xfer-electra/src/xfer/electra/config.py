"""Configs of the ELECTRA package (torch-free: `xfer validate` must not import torch).

Defaults are the thesis's ELECTRA-Small settings (Tables 5.1/5.2, METHODS.md); each knob says
what it changes. Objectives are chosen in a recipe as `objective: electra.rtd` or
`objective: {name: electra.rtd, generator: {size: 0.5}}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xfer.core.config import FieldError, knob

MASK_FRACTION = 0.85
"""ELECTRA's share of the chosen positions shown to its generator as [MASK] (METHODS.md: 85%)."""
GEN_WEIGHT, DISC_WEIGHT = 1.0, 50.0
"""ELECTRA's loss weights: 1.0 * generator MLM + 50.0 * detection (METHODS.md)."""

Variant = Literal["electra", "electra_15", "replace_mlm", "all_tokens_mlm"]
GeneratorKind = Literal["mlm", "two_tower", "unigram", "uniform"]


@dataclass
class GeneratorConfig:
    """The generator (noise model) that proposes replacements."""

    kind: GeneratorKind = knob(
        "mlm",
        "mlm: a small masked LM (ELECTRA); two_tower: a two-tower cloze model (ELECTRA-TT, Electric's "
        "noise); unigram: token frequencies of the corpus; uniform: any ordinary vocabulary token, not [PAD], "
        "[CLS], [SEP] or [MASK] (thesis 5.3.2).",
    )
    size: float = knob(
        0.25,
        "Hidden, FFN and head widths as a fraction of the discriminator's (1/4 small, 1/3 base); "
        "heads = max(1, hidden // 64); a generator narrower than 1 unit is an error. Ignored by unigram/uniform.",
        gt=0.0,
        le=1.0,
    )
    layers: float = knob(
        1.0,
        "Depth as a fraction of the discriminator's (the thesis keeps the same depth); rounded, at least 1 layer. "
        "Above 1 the generator would be larger than the discriminator: refused, like `size` above 1.",
        gt=0.0,
        le=1.0,
    )
    tie_embeddings: bool = knob(
        True,
        "Share the whole embedding block (token, position, type embeddings and their LayerNorm) with the "
        "discriminator; untied, the generator has its own embeddings of its hidden width.",
    )
    temperature: float = knob(
        1.0, "Sampling temperature: replacements are drawn from softmax(logits / temperature), in fp32.", gt=0.0
    )


def generator_width_problem(size: float, hidden: int, intermediate: int, discriminator: str) -> str | None:
    """Why `size` gives no generator for a discriminator of these widths, or None.

    The generator's hidden and FFN widths are the discriminator's x `size`, rounded (heads follow
    from its hidden width: max(1, hidden // 64), lowered until they divide it, so there is always at
    least one and they always divide it). A width below 1 unit is refused: it was rounded to 0 or 1
    and built 1 unit wide (`max(1, ...)`) without a word.
    """
    if hidden * size >= 1 and intermediate * size >= 1:
        return None
    narrowest = min(hidden, intermediate)
    return (
        f"{size:g} x the widths of this discriminator ({discriminator}: hidden {hidden}, FFN {intermediate}) "
        f"gives a generator {hidden * size:.3g} units wide with an FFN of {intermediate * size:.3g}: narrower than "
        f"1 unit; give at least 1/{narrowest} = {1 / narrowest:.3g}"
    )


def generator_depth_problem(layers: float, num_layers: int, discriminator: str) -> str | None:
    """Why `layers` gives no generator for a discriminator `num_layers` deep, or None: the depth is
    round(num_layers x layers), and one that rounds to 0 was built 1 layer deep without a word."""
    if round(num_layers * layers) >= 1:
        return None
    return (
        f"{layers:g} x the {num_layers} layer{'s' if num_layers != 1 else ''} of this discriminator ({discriminator}) "
        "gives "
        f"{num_layers * layers:.3g} layers, which rounds to 0; give at least 1/{num_layers} = {1 / num_layers:.3g}"
    )


@dataclass
class RTDConfig:
    """`electra.rtd`: replaced token detection with a generator (ELECTRA) and its Table 5.7 ablations."""

    mask_prob: float = knob(0.15, "Fraction of tokens replaced (0.25 for ELECTRA-Large).", gt=0.0, lt=1.0)
    mask_fraction: float = knob(
        MASK_FRACTION,
        "Of the chosen positions, the fraction shown to the generator as [MASK]; the rest keep their token. "
        "Only a masked-LM generator (kind mlm) reads a masked input: with another kind, another value is an error.",
    )
    generator: GeneratorConfig = knob(GeneratorConfig(), "The generator.")
    gen_weight: float = knob(GEN_WEIGHT, "Weight of the generator's MLM loss (not with unigram/uniform ones).", ge=0.0)
    disc_weight: float = knob(
        DISC_WEIGHT, "Weight of the discriminator's loss (replaced-token detection: not in the MLM variants).", ge=0.0
    )
    variant: Variant = knob(
        "electra",
        "electra: detect replaced tokens at every position; electra_15: only at the masked positions; "
        "replace_mlm: MLM on generator-corrupted input; all_tokens_mlm: predict every token, with a copy "
        "mechanism (Table 5.7).",
    )

    def __post_init__(self) -> None:
        if not 0.0 <= self.mask_fraction <= 1.0:
            raise FieldError("mask_fraction", f"must be in [0, 1], got {self.mask_fraction!r}")
        self._check_ignored()
        if self.variant != "electra" and self.generator.kind == "two_tower":
            raise FieldError("variant", f"{self.variant!r} needs a masked generator (kind mlm, unigram or uniform)")

    def _check_ignored(self) -> None:
        """Refuse a setting of the recipe's that this generator kind or variant never reads: each was
        ignored without a word. A two-tower generator reads the unmasked input and unigram/uniform ones
        read none (`mask_fraction`); unigram/uniform ones have no loss to weight (`gen_weight`); the
        MLM variants' main loss has weight 1 (`disc_weight`, the detection loss's weight)."""
        kind = self.generator.kind
        if self.mask_fraction != MASK_FRACTION and kind != "mlm":
            raise FieldError(
                "mask_fraction",
                f"{self.mask_fraction!r} shapes a masked-LM generator's input, and generator kind {kind!r} reads "
                "no [MASK]: remove mask_fraction, or use generator kind mlm",
            )
        if self.gen_weight != GEN_WEIGHT and kind in ("unigram", "uniform"):
            raise FieldError(
                "gen_weight",
                f"{self.gen_weight!r} weights the generator's loss, and a {kind} generator is a fixed distribution "
                "without one: remove gen_weight",
            )
        if self.disc_weight != DISC_WEIGHT and self.variant in ("replace_mlm", "all_tokens_mlm"):
            raise FieldError(
                "disc_weight",
                f"{self.disc_weight!r} weights replaced-token detection, which variant {self.variant!r} replaces "
                "by a masked-LM loss of weight 1: remove disc_weight (gen_weight sets the generator's share)",
            )


@dataclass
class MLMConfig:
    """`electra.mlm`: the BERT baseline — masked language modelling, 80/10/10, no next-sentence task."""

    mask_prob: float = knob(0.15, "Fraction of tokens predicted.", gt=0.0, lt=1.0)
    mask: float = knob(0.8, "Of those, replaced by [MASK].", ge=0.0, le=1.0)
    random: float = knob(0.1, "Of those, replaced by a random token (the rest are unchanged).", ge=0.0, le=1.0)

    def __post_init__(self) -> None:
        if self.mask + self.random > 1.0:
            raise FieldError("random", f"mask + random must be at most 1, got {self.mask + self.random:g}")


@dataclass
class NCEConfig:
    """`electric.nce`: Electric — an energy-based cloze model trained with NCE against a two-tower noise model."""

    mask_prob: float = knob(0.15, "k = ceil(mask_prob * n) noise tokens per sequence of n tokens.", gt=0.0, lt=1.0)
    generator: GeneratorConfig = knob(
        GeneratorConfig(kind="two_tower"), "The noise model q: a two-tower cloze model (each tower generator-sized)."
    )
    gen_weight: float = knob(1.0, "Weight of the noise model's cloze (maximum-likelihood) loss.", ge=0.0)
    disc_weight: float = knob(50.0, "Weight of the NCE binary classification loss.", ge=0.0)

    def __post_init__(self) -> None:
        if self.generator.kind != "two_tower":
            raise FieldError(
                ("generator", "kind"),
                "Electric needs q(x_t | context) at every position: only a two_tower noise model gives it",
            )

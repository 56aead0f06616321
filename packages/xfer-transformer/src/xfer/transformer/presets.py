"""Named encoder sizes, and ELECTRA's generator sizing rule.

ELECTRA sizes are those of Clark et al. (2020); `bert-small` is BERT-Small of Turc et al.
(2019, "Well-Read Students Learn Better"); `tiny` and `mini` are small CPU sizes for tests and
quick experiments. Vocabulary 30522 (uncased English WordPiece), 512 positions and 2 token
types everywhere; override `vocab_size` for other vocabularies.

Also the arithmetic rules an encoder's sizes must obey (`encoder_problems`), which
`EncoderConfig` enforces and recipe validation checks against a preset merged with a stage's
`encoder:` overrides. This module imports torch only inside `preset()`, so `xfer validate` can
use the presets and the rules without loading it.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xfer.transformer.encoder import EncoderConfig

# Written out (they are also EncoderConfig's defaults) so that recipes are checked against them
# without building an EncoderConfig, which imports torch.
_BASE: dict[str, Any] = {"vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2}

PRESETS: dict[str, dict[str, Any]] = {
    "electra-small": {
        "embedding_size": 128,
        "hidden_size": 256,
        "num_layers": 12,
        "num_heads": 4,
        "intermediate_size": 1024,
    },
    "electra-base": {
        "embedding_size": 768,
        "hidden_size": 768,
        "num_layers": 12,
        "num_heads": 12,
        "intermediate_size": 3072,
    },
    "electra-large": {
        "embedding_size": 1024,
        "hidden_size": 1024,
        "num_layers": 24,
        "num_heads": 16,
        "intermediate_size": 4096,
    },
    "bert-small": {
        "embedding_size": 512,
        "hidden_size": 512,
        "num_layers": 4,
        "num_heads": 8,
        "intermediate_size": 2048,
    },
    "bert-base": {
        "embedding_size": 768,
        "hidden_size": 768,
        "num_layers": 12,
        "num_heads": 12,
        "intermediate_size": 3072,
    },
    "bert-large": {
        "embedding_size": 1024,
        "hidden_size": 1024,
        "num_layers": 24,
        "num_heads": 16,
        "intermediate_size": 4096,
    },
    "tiny": {"embedding_size": 128, "hidden_size": 128, "num_layers": 2, "num_heads": 2, "intermediate_size": 512},
    "mini": {"embedding_size": 128, "hidden_size": 256, "num_layers": 4, "num_heads": 4, "intermediate_size": 1024},
}


ARCHITECTURE_FIELDS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_layers",
    "num_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)
"""EncoderConfig fields that pre-trained weights fix: their shapes, or (num_heads) how they are read.
Each is a size that must be at least 1. Here, not in `encoder`, so recipes check them without torch."""


def encoder_problems(values: Mapping[str, Any], given: Collection[str] | None = None) -> list[tuple[str, str]]:
    """`(field, message)` for every rule the encoder fields in `values` break, fields missing from
    `values` unchecked; `message` reads after the field's name ("must be positive, got 0").

    One list of rules for two callers: `EncoderConfig` refuses a bad config when a model is built,
    and recipe validation finds the same problem at the `encoder:` key before anything runs (it
    was a traceback at model construction, or an IndexError at the first step). A rule between
    two fields blames one of `given` (the fields the user wrote; default: all), so a recipe's
    error points at the override that broke it, not at the preset's value.
    """
    problems: list[tuple[str, str]] = []
    for name in ARCHITECTURE_FIELDS:
        if name in values and int(values[name]) <= 0:
            problems.append((name, f"must be positive, got {values[name]!r}"))
    for name in ("hidden_dropout", "attention_dropout"):
        if name in values and not 0.0 <= float(values[name]) < 1.0:
            problems.append((name, f"must be in [0, 1), got {values[name]!r}"))
    # finite too: `.inf` passed, and an infinite epsilon or init std made every activation NaN at step 1
    if "layer_norm_eps" in values and not 0 < float(values["layer_norm_eps"]) < math.inf:
        problems.append(("layer_norm_eps", f"must be a positive finite number, got {values['layer_norm_eps']!r}"))
    if "initializer_range" in values and not 0 <= float(values["initializer_range"]) < math.inf:  # a normal's std
        problems.append(
            ("initializer_range", f"must be a finite number, at least 0, got {values['initializer_range']!r}")
        )
    if "pad_token_id" in values and int(values["pad_token_id"]) < 0:
        problems.append(("pad_token_id", f"must be a token id (at least 0), got {values['pad_token_id']!r}"))
    if problems:  # the rules below divide and compare sizes already known to be wrong
        return problems
    given = set(values) if given is None else set(given)
    if "hidden_size" in values and "num_heads" in values and values["hidden_size"] % values["num_heads"]:
        hidden, heads = values["hidden_size"], values["num_heads"]
        if "num_heads" in given and "hidden_size" not in given:
            problems.append(("num_heads", f"must divide hidden_size ({hidden}), got {heads}"))
        else:
            problems.append(("hidden_size", f"must be a multiple of num_heads ({heads}), got {hidden}"))
    if "pad_token_id" in values and "vocab_size" in values and values["pad_token_id"] >= values["vocab_size"]:
        pad, vocab = values["pad_token_id"], values["vocab_size"]
        if "vocab_size" in given and "pad_token_id" not in given:
            problems.append(("vocab_size", f"must be more than pad_token_id ({pad}), got {vocab}"))
        else:
            problems.append(("pad_token_id", f"must be less than vocab_size ({vocab}), got {pad}"))
    return problems


def preset_values(name: str) -> dict[str, Any]:
    """The fields a preset sets (vocabulary size included), without building an EncoderConfig."""
    return {**_BASE, **PRESETS[name]}


def preset_names() -> list[str]:
    return sorted(PRESETS)


def preset(name: str, **overrides: Any) -> EncoderConfig:
    """EncoderConfig of a named size; keyword overrides replace fields (e.g. vocab_size=...)."""
    if name not in PRESETS:
        close = difflib.get_close_matches(name, PRESETS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown encoder preset {name!r}{hint}; valid: {', '.join(preset_names())}")
    from xfer.transformer.encoder import EncoderConfig

    return EncoderConfig.from_dict({**preset_values(name), **overrides})


def generator_config(disc: EncoderConfig, multiplier: float) -> EncoderConfig:
    """ELECTRA generator for discriminator `disc`: same depth and embedding size, hidden and
    FFN widths scaled by `multiplier` (1/4 for small, 1/3 for base/large), heads = max(1, hidden // 64).

    Widths are rounded to the nearest integer (256 / 4 = 64, 768 / 3 = 256, 1024 / 3 -> 341,
    for which heads = 5 would not divide it: the head count is then lowered until it divides).
    """
    if not 0 < multiplier <= 1:
        raise ValueError(f"generator multiplier must be in (0, 1], got {multiplier}")
    hidden = max(1, round(disc.hidden_size * multiplier))
    heads = max(1, hidden // 64)
    while hidden % heads:
        heads -= 1
    return dataclasses.replace(
        disc, hidden_size=hidden, num_heads=heads, intermediate_size=max(1, round(disc.intermediate_size * multiplier))
    )

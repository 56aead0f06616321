"""Named encoder sizes, and ELECTRA's generator sizing rule.

ELECTRA sizes are those of Clark et al. (2020); `bert-small` is BERT-Small of Turc et al.
(2019, "Well-Read Students Learn Better"); `tiny` and `mini` are small CPU sizes for tests and
quick experiments. Vocabulary 30522 (uncased English WordPiece) everywhere; override
`vocab_size` for other vocabularies.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from xfer.transformer.encoder import EncoderConfig

_BASE: dict[str, Any] = {"vocab_size": 30522}

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


def preset_names() -> list[str]:
    return sorted(PRESETS)


def preset(name: str, **overrides: Any) -> EncoderConfig:
    """EncoderConfig of a named size; keyword overrides replace fields (e.g. vocab_size=...)."""
    if name not in PRESETS:
        close = difflib.get_close_matches(name, PRESETS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown encoder preset {name!r}{hint}; valid: {', '.join(preset_names())}")
    values = {**_BASE, **PRESETS[name], **overrides}
    return EncoderConfig.from_dict(values)


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

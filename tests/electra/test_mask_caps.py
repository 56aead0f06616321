"""Each objective's cap on masked positions per sequence, as METHODS.md gives it."""

from __future__ import annotations

import pytest

from xfer.electra.config import NCEConfig, RTDConfig
from xfer.electra.objective import ElectricObjective, RTDObjective, SpecialTokens
from xfer.transformer.presets import preset

from .test_objectives import TOKENS, packed_batch


@pytest.mark.parametrize(("length", "cap"), [(64, 9), (128, 19), (512, 79)])
def test_electra_masks_at_most_its_original_cap(length: int, cap: int) -> None:
    """METHODS.md: round(0.15 n) capped at int((0.15 + 0.005) L). Stop 41 raised RTD's cap to
    ceil(0.15 L) along with Electric's, so a full 64-token sequence got 10 masked positions, not 9."""
    objective = RTDObjective(preset("tiny", vocab_size=500), SpecialTokens(**vars(TOKENS)), length, RTDConfig())
    assert objective.cap == cap
    batch = packed_batch([length] * 2, width=length)
    batch["input_ids"] = batch["input_ids"] % 500
    assert objective.select(batch).count.max().item() == min(cap, round(0.15 * length))


@pytest.mark.parametrize(("length", "k"), [(64, 10), (128, 20)])
def test_electric_draws_ceil_k_at_full_length(length: int, k: int) -> None:
    objective = ElectricObjective(preset("tiny", vocab_size=500), SpecialTokens(**vars(TOKENS)), length, NCEConfig())
    batch = packed_batch([length] * 2, width=length)
    batch["input_ids"] = batch["input_ids"] % 500
    assert objective.select(batch, rounding="ceil").count.tolist() == [k, k]

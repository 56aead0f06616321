"""A streamed corpus's random uses draw from separate numpy streams.

numpy's SeedSequence ignores trailing zeros (`[5, 3, 0]` is `[5, 3]`), so the shuffle window
entropy `[seed, rank, 0]` was the shard-order entropy `[seed, pass=rank]`: on one process window 0
and pass 0 were permutations from one stream. These tests record every `default_rng` call of the
streaming path and compare the streams themselves (SeedSequence states), not the entropy lists.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

import datasets
import numpy as np
import pytest

from xfer.electra import data as electra_data
from xfer.electra.data import PretrainBatches

_default_rng = np.random.default_rng


def stream_id(entropy: Any) -> tuple[int, ...]:
    """What identifies a numpy stream: the state its SeedSequence generates (trailing zeros and all)."""
    return tuple(np.random.SeedSequence(entropy).generate_state(8).tolist())


def corpus(shards: int = 4, per_shard: int = 3) -> datasets.IterableDataset:
    rows = shards * per_shard
    table = datasets.Dataset.from_dict(
        {"input_ids": [[2, 10 + i, 3] for i in range(rows)], "segment_split": [3] * rows}
    )
    return table.to_iterable_dataset(num_shards=shards)


def record_streams(monkeypatch: pytest.MonkeyPatch, seed: int, rank: int, world_size: int) -> dict[str, set]:
    """The streams each use (the function that called default_rng) drew from over a few passes."""
    uses: dict[str, set[tuple[int, ...]]] = defaultdict(set)

    def recording(entropy: Any = None) -> np.random.Generator:
        uses[sys._getframe(1).f_code.co_name].add(stream_id(entropy))
        return _default_rng(entropy)

    monkeypatch.setattr(electra_data.np.random, "default_rng", recording)
    batches = PretrainBatches(
        corpus(), 2 * world_size, seed, pad_id=0, rank=rank, world_size=world_size, shuffle_buffer=3
    )
    for _ in range(18):  # 3 passes over the 12 examples at least, 6+ windows
        batches.next_step()
    monkeypatch.undo()
    return uses


@pytest.mark.parametrize("seed", [0, 1, 7, 2**32 + 5])
@pytest.mark.parametrize(("rank", "world_size"), [(0, 1), (1, 2)])
def test_shard_orders_and_windows_never_share_a_stream(
    monkeypatch: pytest.MonkeyPatch, seed: int, rank: int, world_size: int
) -> None:
    uses = record_streams(monkeypatch, seed, rank, world_size)
    assert set(uses) == {"_shard_order", "_fill"}
    assert len(uses["_shard_order"]) >= 3 and len(uses["_fill"]) >= 6  # every pass, every window its own
    assert not uses["_shard_order"] & uses["_fill"]


def test_first_window_is_not_the_first_pass_order_on_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The case the old seeding had: window 0 ([seed, 0, 0]) drew from pass 0's stream ([seed, 0])."""
    calls: list[tuple[str, tuple[int, ...]]] = []

    def recording(entropy: Any = None) -> np.random.Generator:
        calls.append((sys._getframe(1).f_code.co_name, stream_id(entropy)))
        return _default_rng(entropy)

    monkeypatch.setattr(electra_data.np.random, "default_rng", recording)
    PretrainBatches(corpus(), 2, seed=0, pad_id=0, shuffle_buffer=3).next_step()
    monkeypatch.undo()
    first = dict(reversed(calls))  # each use's first stream
    assert first["_shard_order"] != first["_fill"]


def test_tags_are_distinct_words_and_the_stream_is_still_deterministic() -> None:
    assert electra_data.SHARD_ORDER != electra_data.WINDOW_ORDER
    assert all(0 < tag < 2**32 for tag in (electra_data.SHARD_ORDER, electra_data.WINDOW_ORDER))

    def run() -> list[list[int]]:
        batches = PretrainBatches(corpus(), 2, seed=3, pad_id=0, shuffle_buffer=3)
        return [batches.next_step()[0]["input_ids"][:, 1].tolist() for _ in range(12)]

    first = run()
    assert first == run()
    assert sorted(x for step in first[:6] for x in step) == list(range(10, 22))  # one pass: each example once

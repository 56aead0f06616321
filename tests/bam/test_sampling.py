"""Task sampling ∝ |D|^α and the mixed multi-task batch source (exact resume, DDP shares)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from xfer.bam.data import MixedTaskSource, batch_mixing_source
from xfer.bam.sampling import task_probabilities
from xfer.core.data import Prefetcher, TaggedBatch
from xfer.core.errors import UserError

SIZES = {"big": 8000, "mid": 2000, "small": 250}


def _groups(groups: dict[str, list]) -> dict[str, list]:
    return groups  # the collate of these tests: keep {task: features}


def _source(seed: int = 7, batch: int = 32, **kwargs) -> MixedTaskSource:
    features = {name: [(name, i) for i in range(size)] for name, size in SIZES.items()}
    return MixedTaskSource(features, task_probabilities(SIZES), batch, _groups, seed, **kwargs)


def test_probabilities_of_each_scheme() -> None:
    power = task_probabilities(SIZES)  # alpha = 0.75 by default, as BAM
    raw = {n: s**0.75 for n, s in SIZES.items()}
    assert power == pytest.approx({n: v / sum(raw.values()) for n, v in raw.items()})
    assert task_probabilities(SIZES, "proportional") == pytest.approx({n: s / 10250 for n, s in SIZES.items()})
    assert task_probabilities(SIZES, "uniform") == pytest.approx({n: 1 / 3 for n in SIZES})
    assert task_probabilities(SIZES, "temperature", temperature=2.0) == pytest.approx(
        task_probabilities(SIZES, alpha=0.5)
    )
    with pytest.raises(ValueError, match="no training examples"):
        task_probabilities({"a": 3, "b": 0})


def test_sampled_task_frequencies_match_size_to_the_alpha() -> None:
    source = _source(batch=64)
    counts: Counter[str] = Counter()
    steps = 400
    for _ in range(steps):
        for task, features in source.next_step()[0].items():
            counts[task] += len(features)
    expected = task_probabilities(SIZES)
    total = steps * 64
    for task, p in expected.items():
        sd = np.sqrt(p * (1 - p) / total)
        assert abs(counts[task] / total - p) < 5 * sd, (task, counts[task] / total, p)
    # the proportions are not the proportional ones: small tasks are up-weighted
    assert counts["small"] / total > 1.5 * SIZES["small"] / sum(SIZES.values())


def test_every_example_is_seen_once_per_task_epoch() -> None:
    source = MixedTaskSource({"a": list(range(10)), "b": list(range(3))}, {"a": 0.5, "b": 0.5}, 4, _groups, seed=1)
    seen: dict[str, list[int]] = {"a": [], "b": []}
    for _ in range(30):
        for task, items in source.next_step()[0].items():
            seen[task] += items
    for task, size in (("a", 10), ("b", 3)):
        full = len(seen[task]) // size * size
        for epoch in range(full // size):  # each epoch is a permutation: nothing dropped or repeated
            assert sorted(seen[task][epoch * size : (epoch + 1) * size]) == list(range(size))
    assert source.steps_per_epoch == 4  # ceil(13 / 4): an epoch is the tasks' training sets together


def test_resume_from_state_reproduces_the_batches_even_with_prefetch() -> None:
    reference = _source()
    expected = [reference.next_step() for _ in range(12)]
    resumed = _source()
    with Prefetcher(resumed, depth=3) as prefetcher:
        for _ in range(5):
            _, state = prefetcher.next()
    fresh = _source()
    fresh.load_state_dict(state)
    assert [fresh.next_step() for _ in range(7)] == expected[5:]
    with pytest.raises(ValueError, match="data changed"):
        other = MixedTaskSource({"big": [1], "mid": [2], "small": [3]}, task_probabilities(SIZES), 32, _groups, 7)
        other.load_state_dict(state)


def test_ranks_split_the_same_global_batch() -> None:
    whole = _source(batch=32).next_step()[0]
    ranks = [_source(batch=32, rank=r, world_size=2, accumulation=2).next_step() for r in (0, 1)]
    union: Counter = Counter()
    for micro_batches in ranks:
        assert len(micro_batches) == 2 and sum(len(v) for v in micro_batches[0].values()) == 8
        for micro in micro_batches:
            for items in micro.values():
                union.update(items)
    assert union == Counter(item for items in whole.values() for item in items)
    with pytest.raises(UserError, match=r"multiple of the number of processes \(4\)"):
        _source(batch=30, world_size=4)


def test_batch_mixing_draws_one_task_per_step() -> None:
    features = {name: [(name, i) for i in range(size)] for name, size in SIZES.items()}
    source = batch_mixing_source(features, task_probabilities(SIZES), 16, _groups, seed=3)
    counts: Counter[str] = Counter()
    for _ in range(300):
        (item,) = source.next_step()
        assert isinstance(item, TaggedBatch) and list(item.batch) == [item.source]
        counts[item.source] += 1
    assert source.steps_per_epoch == -(-sum(SIZES.values()) // 16)
    p = task_probabilities(SIZES)["small"]
    assert abs(counts["small"] / 300 - p) < 5 * np.sqrt(p * (1 - p) / 300)

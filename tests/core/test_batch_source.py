"""The `BatchSource` protocol and its combinators: resuming mid-stream reproduces the exact batch
sequence, and the prefetcher hands over the consumer's cursor and shuts down cleanly."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from xfer.core.data import (
    AlternatingSource,
    BatchSource,
    BatchStream,
    MultiTaskSource,
    Prefetcher,
    TaggedBatch,
    check_batch_source,
)


def stream(n: int, seed: int, accumulation: int = 1) -> BatchStream:
    return BatchStream(list(range(n)), 4, list, seed=seed, accumulation=accumulation)


def take(source: Any, steps: int) -> list[Any]:
    return [source.next_step() for _ in range(steps)]


def assert_resumes_exactly(build: Any, steps: int = 12, cut: int = 5) -> None:
    """Run `build()` straight; cut at `cut`, round-trip the state through JSON into a fresh source."""
    straight = take(build(), steps)
    first = build()
    head = take(first, cut)
    state = json.loads(json.dumps(first.state_dict()))  # checkpoints store it as JSON
    second = build()
    second.load_state_dict(state)
    assert head + take(second, steps - cut) == straight


def test_batch_stream_follows_the_protocol_and_iterates() -> None:
    source = stream(10, 1)
    assert isinstance(source, BatchSource)
    check_batch_source(source)
    assert next(iter(source)) == stream(10, 1).next_step()
    assert_resumes_exactly(lambda: stream(10, 1))


def weights_by_step(step: int) -> dict[str, float]:
    return {"a": 1.0, "b": 0.0} if step < 3 else {"a": 1.0, "b": 3.0}


@pytest.mark.parametrize("weights", [None, {"a": 1.0, "b": 2.0}, weights_by_step])
def test_multitask_source_resumes_exactly(weights: Any) -> None:
    def build() -> MultiTaskSource:
        return MultiTaskSource({"a": stream(10, 1), "b": stream(6, 2, accumulation=2)}, weights, seed=3)

    assert_resumes_exactly(build)
    batches = take(build(), 40)
    assert all(isinstance(b, TaggedBatch) for step in batches for b in step)
    tasks = [step[0].source for step in batches]
    assert {"a", "b"} == set(tasks)
    assert all(len(step) == (1 if step[0].source == "a" else 2) for step in batches)
    if weights is weights_by_step:
        assert tasks[:3] == ["a", "a", "a"]


def test_multitask_source_rejects_bad_weights_and_changed_setup() -> None:
    with pytest.raises(ValueError, match="invalid sampling weights"):
        MultiTaskSource({"a": stream(4, 1)}, {"a": 0.0}).next_step()
    state = MultiTaskSource({"a": stream(4, 1)}, seed=1).state_dict()
    with pytest.raises(ValueError, match="seed changed"):
        MultiTaskSource({"a": stream(4, 1)}, seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="checkpoint has sources"):
        MultiTaskSource({"b": stream(4, 1)}, seed=1).load_state_dict(state)
    with pytest.raises(TypeError, match="not a BatchSource"):
        MultiTaskSource({"a": [1, 2]})  # type: ignore[dict-item]


def test_alternating_source_follows_the_pattern_and_resumes_exactly() -> None:
    def build() -> AlternatingSource:
        return AlternatingSource(
            {"labeled": stream(10, 1), "unlabeled": stream(30, 2)}, ["labeled", "unlabeled", "unlabeled"]
        )

    tasks = [step[0].source for step in take(build(), 6)]
    assert tasks == ["labeled", "unlabeled", "unlabeled"] * 2
    assert_resumes_exactly(build, steps=11, cut=4)
    with pytest.raises(ValueError, match="unknown sources"):
        AlternatingSource({"labeled": stream(4, 1)}, ["labeled", "other"])


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_prefetcher_reports_the_consumed_cursor(depth: int) -> None:
    reference = stream(10, 1)
    with Prefetcher(stream(10, 1), depth) as prefetch:
        for _ in range(7):
            batches, state = prefetch.next()
            assert batches == reference.next_step()
            assert state == reference.state_dict()  # the next unconsumed batch, whatever is queued


class Broken:
    steps_per_epoch = None

    def __init__(self) -> None:
        self.count = 0

    def next_step(self) -> list[Any]:
        self.count += 1
        if self.count == 3:
            raise RuntimeError("bad batch")
        return [self.count]

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = state["count"]


def test_prefetcher_reraises_producer_errors_and_stops() -> None:
    prefetch = Prefetcher(Broken(), 2)
    assert prefetch.next()[0] == [1] and prefetch.next()[0] == [2]
    with pytest.raises(RuntimeError, match="bad batch"):
        prefetch.next()
    prefetch.close()
    assert not [t for t in threading.enumerate() if t.name == "xfer-prefetch"]


def test_prefetcher_close_does_not_hang_with_a_full_queue() -> None:
    prefetch = Prefetcher(stream(100, 1), 2)
    prefetch.next()
    prefetch.close()  # the producer is blocked on a full queue: it must notice the stop
    assert not [t for t in threading.enumerate() if t.name == "xfer-prefetch"]

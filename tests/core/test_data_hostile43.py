"""Hostile cases for core batching (xfer.core.data): the batch stream at awkward sizes, resume at
every position of an epoch, and the prefetch thread's lifetime and errors."""

from __future__ import annotations

import gc
import json
import traceback
from typing import Any

import pytest

from xfer.core.data import BatchStream, Prefetcher


def _stream(size: int, batch: int) -> BatchStream:
    return BatchStream(list(range(size)), batch, list, seed=3)


@pytest.mark.parametrize(("size", "batch"), [(3, 4), (4, 4), (5, 1), (7, 3), (1, 1), (1, 3)])
def test_resume_at_every_position_gives_the_same_next_batches(size: int, batch: int) -> None:
    """Datasets smaller than, equal to and not a multiple of the batch, batch size 1: a cursor taken
    after any step (through JSON, as checkpoints store it) continues with the same batches."""
    steps = 3 * size + 2  # over several epochs, so some cuts fall at or across an epoch's end
    reference = _stream(size, batch)
    straight = [reference.next_step() for _ in range(steps)]
    for cut in range(steps):
        first = _stream(size, batch)
        for _ in range(cut):
            first.next_step()
        resumed = _stream(size, batch)
        resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
        assert [resumed.next_step() for _ in range(steps - cut)] == straight[cut:], f"cut after step {cut}"


def test_no_example_is_dropped_or_padded_at_an_epoch_end() -> None:
    """The documented stream semantics: the last partial batch of an epoch is filled from the next
    epoch's permutation, so each epoch's examples all appear, once, in order of the stream."""
    stream = _stream(5, 2)
    seen = [i for _ in range(5) for i in stream.next_step()[0]]  # 10 examples: exactly two epochs
    assert sorted(seen[:5]) == list(range(5)) and sorted(seen[5:]) == list(range(5))


class _Failing:
    """A source whose third step fails, as a reader meeting a bad line would."""

    steps_per_epoch = None

    def __init__(self) -> None:
        self.count = 0

    def next_step(self) -> list[Any]:
        self.count += 1
        if self.count == 3:
            raise KeyError("bad line")
        return [self.count]

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = state["count"]


def test_a_producer_error_reaches_the_consumer_with_the_producers_traceback() -> None:
    prefetcher = Prefetcher(_Failing(), depth=2)
    try:
        assert prefetcher.next()[0] == [1] and prefetcher.next()[0] == [2]
        with pytest.raises(KeyError, match="bad line") as raised:
            prefetcher.next()
        frames = [frame.name for frame in traceback.extract_tb(raised.value.__traceback__)]
        assert frames[-1] == "next_step"  # where it failed, in the producer thread, not only where re-raised
    finally:
        prefetcher.close()


def test_a_prefetcher_dropped_without_close_stops_its_thread() -> None:
    """The thread's target was the prefetcher's own bound method, so the running thread kept it (and its
    source's data) alive: one dropped without `close()` (an error between making it and the `try` that
    closes it, a plugin driving a source itself) was never collected, and its thread polled the full
    queue every 0.1 s for the life of the process, one more per such fit."""
    prefetcher = Prefetcher(_stream(100, 2), depth=2)
    prefetcher.next()
    thread = prefetcher._thread
    assert thread is not None and thread.is_alive()
    del prefetcher
    gc.collect()
    thread.join(timeout=2)
    assert not thread.is_alive(), "the prefetch thread outlived its prefetcher"

"""BatchStream: seeded epochs laid end to end, exact resumable cursor, rank and accumulation shares."""

from __future__ import annotations

from collections import Counter, namedtuple

import pytest
import torch

from xfer.core.data import BatchStream, batches, pad, shard_indices, to_device
from xfer.core.errors import UserError

N = 10  # dataset size; batch 4 does not divide it


def stream(n: int = N, batch: int = 4, seed: int = 7, **kwargs) -> BatchStream:
    return BatchStream(list(range(n)), batch, list, seed=seed, **kwargs)


def flat(s: BatchStream, steps: int) -> list[int]:
    """The examples of `steps` optimizer steps, in order (all micro-batches of this rank)."""
    return [x for _ in range(steps) for micro in s.next_step() for x in micro]


def test_every_example_once_per_epoch_and_epochs_wrap() -> None:
    s = stream()
    assert s.steps_per_epoch == 3  # ceil(10 / 4)
    # 3 steps = 12 examples: the third batch holds the last 2 of epoch 0 and the first 2 of epoch 1
    first = [s.next_step()[0] for _ in range(3)]
    assert all(len(b) == 4 for b in first)
    seen = [x for b in first for x in b]
    assert sorted(seen[:N]) == list(range(N)), "epoch 0 must contain every example exactly once"
    assert s.state_dict()["epoch"] == 1 and s.state_dict()["offset"] == 2
    # over 10 full epochs (batch 4 x 25 steps = 100 examples): each consecutive block of 10 is a permutation
    s = stream()
    examples = flat(s, 25)
    epochs = [examples[i : i + N] for i in range(0, 100, N)]
    for epoch in epochs:
        assert sorted(epoch) == list(range(N))
    assert Counter(examples) == {i: 10 for i in range(N)}, "no example dropped or repeated"
    assert len({tuple(e) for e in epochs}) == 10, "every epoch has its own permutation"
    assert s.state_dict() == {"epoch": 10, "offset": 0, "seed": 7, "size": N}


def test_permutations_are_seeded() -> None:
    assert flat(stream(seed=3), 10) == flat(stream(seed=3), 10)
    assert flat(stream(seed=3), 10) != flat(stream(seed=4), 10)
    assert flat(stream(shuffle=False), 5) == [*range(N), *range(N)]


@pytest.mark.parametrize("consumed", [1, 2, 3, 7])  # mid-epoch, just after a wrap, later epochs
def test_state_dict_resume_is_identical(consumed: int) -> None:
    original = stream()
    flat(original, consumed)
    state = original.state_dict()
    expected = flat(original, 8)
    resumed = stream()
    flat(resumed, 1)  # a resumed stream may have been used before loading
    resumed.load_state_dict(dict(state))
    assert flat(resumed, 8) == expected


def test_state_from_other_data_refused() -> None:
    state = stream().state_dict()
    with pytest.raises(ValueError, match=r"size 10 -> 11"):
        stream(n=11).load_state_dict(state)
    with pytest.raises(ValueError, match=r"seed 7 -> 8"):
        stream(seed=8).load_state_dict(state)


def test_ranks_together_see_the_global_batch() -> None:
    single = stream(batch=8)
    ranks = [stream(batch=8, rank=r, world_size=2) for r in range(2)]
    for _ in range(7):
        (global_batch,) = single.next_step()
        shares = [r.next_step() for r in ranks]
        assert all(len(share) == 1 and len(share[0]) == 4 for share in shares)
        assert sorted(shares[0][0] + shares[1][0]) == sorted(global_batch)
    assert single.state_dict() == ranks[0].state_dict() == ranks[1].state_dict()


def test_accumulation_splits_the_share() -> None:
    single = stream(batch=8)
    accumulating = stream(batch=8, accumulation=2)
    for _ in range(5):
        (global_batch,) = single.next_step()
        micro = accumulating.next_step()
        assert [len(m) for m in micro] == [4, 4]
        assert micro[0] + micro[1] == global_batch
    # data parallel and accumulation together: 2 ranks x 2 micro-batches of 2
    single = stream(batch=8)
    ranks = [stream(batch=8, rank=r, world_size=2, accumulation=2) for r in range(2)]
    for _ in range(5):
        (global_batch,) = single.next_step()
        parts = [m for r in ranks for m in r.next_step()]
        assert [len(m) for m in parts] == [2, 2, 2, 2]
        assert sorted(x for m in parts for x in m) == sorted(global_batch)


@pytest.mark.parametrize(
    ("batch", "world", "accum"),
    [(5, 2, 1), (6, 1, 4), (4, 2, 4), (3, 4, 1), (8, 3, 1)],
)
def test_invalid_batch_world_accumulation(batch: int, world: int, accum: int) -> None:
    """A UserError naming the recipe keys: under torchrun an odd batch size was a ValueError traceback."""
    with pytest.raises(
        UserError,
        match=rf"train\.batch_size {batch} must be a multiple of the number of processes \({world}\) x "
        rf"train\.grad_accum \({accum}\)",
    ):
        stream(batch=batch, world_size=world, accumulation=accum)


def test_empty_dataset_refused() -> None:
    with pytest.raises(ValueError, match="empty dataset"):
        BatchStream([], 4, list, seed=0)


def test_collate_receives_dataset_items() -> None:
    data = [{"x": i} for i in range(6)]
    s = BatchStream(data, 3, lambda items: torch.tensor([d["x"] for d in items]), seed=0, shuffle=False)
    (first,) = s.next_step()
    assert torch.equal(first, torch.tensor([0, 1, 2]))


def test_sequential_helpers() -> None:
    assert list(batches(list(range(7)), 3, list)) == [[0, 1, 2], [3, 4, 5], [6]]
    shards = [list(shard_indices(7, r, 3)) for r in range(3)]
    assert sorted(i for s in shards for i in s) == list(range(7))


def test_pad() -> None:
    out = pad([[1, 2, 3], [4], []])
    assert out.dtype == torch.long
    assert out.tolist() == [[1, 2, 3], [4, 0, 0], [0, 0, 0]]
    assert pad([[1, 2], [3]], value=-1).tolist() == [[1, 2], [3, -1]]
    assert pad([[1, 2, 3], [4]], length=2).tolist() == [[1, 2], [4, 0]], "truncates to a fixed length"
    assert pad([[1], [2]], length=4).tolist() == [[1, 0, 0, 0], [2, 0, 0, 0]]
    assert pad([]).shape == (0, 0)


Pair = namedtuple("Pair", "ids labels")


def test_to_device() -> None:
    meta = torch.device("meta")
    batch = {"ids": torch.ones(2, 3), "nested": [torch.zeros(1), (torch.zeros(2), "text")], "n": 3}
    moved = to_device(batch, meta)
    assert moved["ids"].device == meta and moved["ids"].shape == (2, 3)
    assert isinstance(moved["nested"], list) and moved["nested"][0].device == meta
    assert isinstance(moved["nested"][1], tuple) and moved["nested"][1][0].device == meta
    assert moved["nested"][1][1] == "text" and moved["n"] == 3
    assert batch["ids"].device.type == "cpu", "the input is not modified"
    assert to_device("plain", meta) == "plain"


def test_to_device_keeps_named_tuples() -> None:
    moved = to_device(Pair(torch.ones(2), torch.zeros(2)), torch.device("meta"))
    assert isinstance(moved, Pair)
    assert moved.ids.device.type == "meta" and moved.labels.device.type == "meta"

"""Batching with an exact, resumable cursor.

Training data is treated as an endless stream of examples: seeded epoch permutations laid end
to end and cut into global batches of a fixed size (like TF's `repeat().shuffle().batch()`), so
no example is dropped at epoch ends and every step sees the same number of examples. The
cursor (epoch, offset) is saved in checkpoints, so a resumed run continues exactly where the
interrupted one stopped — no batch is replayed or skipped. Under data parallelism every rank
computes the same global batch and takes its share; with gradient accumulation each share is
split into micro-batches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

Collate = Callable[[list[Any]], Any]


class BatchStream:
    """Global batches over `dataset`, sliced for this rank and split for accumulation."""

    def __init__(
        self,
        dataset: Sequence[Any],
        global_batch: int,
        collate: Collate,
        seed: int,
        shuffle: bool = True,
        rank: int = 0,
        world_size: int = 1,
        accumulation: int = 1,
    ):
        if not len(dataset):
            raise ValueError("cannot train on an empty dataset")
        share = global_batch // (world_size * accumulation)
        if share * world_size * accumulation != global_batch or share == 0:
            raise ValueError(
                f"batch size {global_batch} must be a multiple of world size {world_size} x accumulation {accumulation}"
            )
        self.dataset, self.global_batch, self.collate = dataset, global_batch, collate
        self.seed, self.shuffle = seed, shuffle
        self.rank, self.world_size, self.accumulation = rank, world_size, accumulation
        self.epoch, self.offset = 0, 0
        self._order: np.ndarray | None = None

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.dataset) / self.global_batch)

    def _permutation(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(len(self.dataset))
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.dataset))

    def _take(self, count: int) -> list[int]:
        taken: list[int] = []
        while len(taken) < count:
            if self._order is None:
                self._order = self._permutation(self.epoch)
            chunk = self._order[self.offset : self.offset + count - len(taken)]
            taken.extend(chunk.tolist())
            self.offset += len(chunk)
            if self.offset >= len(self._order):
                self.epoch, self.offset, self._order = self.epoch + 1, 0, None
        return taken

    def next_step(self) -> list[Any]:
        """The collated micro-batches of this rank for one optimizer step."""
        indices = self._take(self.global_batch)[self.rank :: self.world_size]
        size = len(indices) // self.accumulation
        return [
            self.collate([self.dataset[i] for i in indices[k * size : (k + 1) * size]])
            for k in range(self.accumulation)
        ]

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "offset": self.offset, "seed": self.seed, "size": len(self.dataset)}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state.get("size") != len(self.dataset) or state.get("seed") != self.seed:
            raise ValueError(
                f"data changed since the checkpoint (size {state.get('size')} -> {len(self.dataset)}, "
                f"seed {state.get('seed')} -> {self.seed}); cannot resume exactly"
            )
        self.epoch, self.offset, self._order = state["epoch"], state["offset"], None


def shard_indices(n: int, rank: int, world_size: int) -> range:
    """The indices an evaluation rank handles; `gather_objects` puts the pieces back together."""
    return range(rank, n, world_size)


def batches(items: Sequence[Any], batch_size: int, collate: Collate) -> Iterator[Any]:
    """Sequential, unshuffled batches (evaluation and prediction)."""
    for start in range(0, len(items), batch_size):
        yield collate(list(items[start : start + batch_size]))


def pad(sequences: Sequence[Sequence[int]], value: int = 0, length: int | None = None) -> torch.Tensor:
    """Right-pad integer sequences into a [batch, length] LongTensor (dynamic padding)."""
    width = length or max((len(s) for s in sequences), default=0)
    out = torch.full((len(sequences), width), value, dtype=torch.long)
    for row, seq in enumerate(sequences):
        out[row, : len(seq)] = torch.as_tensor(seq[:width], dtype=torch.long)
    return out


def to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor inside dicts/lists/tuples to `device` (non-blocking)."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # NamedTuple: fields are positional arguments
        return type(batch)(*(to_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch

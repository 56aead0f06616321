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

import copy
import math
import queue
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
import torch

from xfer.core.errors import UserError

Collate = Callable[[list[Any]], Any]


@runtime_checkable
class BatchSource(Protocol):
    """What `Trainer` trains on: any object with these members (duck-typed; `BatchStream` is one).

    - `next_step()` returns this rank's collated micro-batches for ONE optimizer step (a list,
      one item per accumulation micro-batch). Sources are endless; `Trainer` decides when to stop.
    - `steps_per_epoch` is an int, or None for sources without epochs (streams, mixtures);
      then `train.steps` must be set and `eval_every`/`checkpoint_every` cannot be "epoch".
    - `state_dict()` returns a JSON-serialisable cursor taken *between* steps, and
      `load_state_dict(state)` restores it so the following `next_step()` calls reproduce the
      interrupted run's batches exactly (exact resume).
    - Iterating a source (`for micro_batches in source`) yields `next_step()` forever.

    Under prefetch, `next_step()` and `state_dict()` run in a background thread, so a source must
    not touch the global torch/numpy RNG (draw from its own seeded generator instead).
    """

    @property
    def steps_per_epoch(self) -> int | None: ...

    def next_step(self) -> list[Any]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def check_batch_source(source: Any) -> None:
    """Fail early, naming what is missing, when `source` does not follow the `BatchSource` protocol."""
    missing = [m for m in ("next_step", "state_dict", "load_state_dict") if not callable(getattr(source, m, None))]
    if not hasattr(source, "steps_per_epoch"):
        missing.append("steps_per_epoch")
    if missing:
        raise TypeError(
            f"{type(source).__name__} is not a BatchSource: missing {', '.join(missing)} "
            "(see xfer.core.data.BatchSource)"
        )


class _Iterable:
    """Mixin: iterating a source yields one step's micro-batches at a time, forever."""

    def __iter__(self) -> Iterator[list[Any]]:
        return self

    def __next__(self) -> list[Any]:
        return self.next_step()  # type: ignore[attr-defined]


def per_process_share(global_batch: int, world_size: int, accumulation: int) -> int:
    """Examples each process takes from each micro-batch: `global_batch` split evenly over
    `world_size` processes and `accumulation` micro-batches, else a UserError naming the recipe
    keys (a bare ValueError traceback under `torchrun` with an odd batch size). The one check of
    every stage's batch source."""
    share = global_batch // (world_size * accumulation) if world_size > 0 and accumulation > 0 else 0
    if share == 0 or share * world_size * accumulation != global_batch:
        raise UserError(
            f"train.batch_size {global_batch} must be a multiple of the number of processes ({world_size}) x "
            f"train.grad_accum ({accumulation}): every process takes an equal share of every micro-batch"
        )
    return share


class BatchStream(_Iterable):
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
        per_process_share(global_batch, world_size, accumulation)
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


class TaggedBatch(NamedTuple):
    """A micro-batch labelled with the child source it came from (mixtures and alternation)."""

    source: str
    batch: Any


def _load_children(owner: str, sources: Mapping[str, BatchSource], state: dict[str, Any]) -> None:
    children = state.get("sources", {})
    if set(children) != set(sources):
        raise ValueError(
            f"{owner}: checkpoint has sources {sorted(children)}, this run has {sorted(sources)}; cannot resume exactly"
        )
    for name, source in sources.items():
        source.load_state_dict(children[name])


class MultiTaskSource(_Iterable):
    """Each step draws one task (by weight) and takes that task's next step: multi-task training.

    The draw for step `i` comes from `numpy.random.default_rng([seed, i])`, so it depends only on
    the seed and the step count: every DDP rank picks the same task, and the state is just the step
    count plus each child's cursor. `weights` is a mapping of relative weights (default: equal) or
    a function of the step index returning one (for annealed sampling). Micro-batches come back as
    `TaggedBatch(task, batch)` so the objective can route them.
    """

    def __init__(
        self,
        sources: Mapping[str, BatchSource],
        weights: Mapping[str, float] | Callable[[int], Mapping[str, float]] | None = None,
        seed: int = 0,
    ):
        if not sources:
            raise ValueError("MultiTaskSource needs at least one source")
        for source in sources.values():
            check_batch_source(source)
        self.sources, self.names, self.seed, self.step = dict(sources), list(sources), seed, 0
        self.weights = weights

    @property
    def steps_per_epoch(self) -> int | None:
        return None

    def _probabilities(self) -> np.ndarray:
        weights = self.weights(self.step) if callable(self.weights) else self.weights
        unknown = sorted(set(weights or {}) - set(self.names))
        if unknown:  # a misspelt name: its source got weight 0 and was never drawn, silently
            raise ValueError(
                f"MultiTaskSource: sampling weights for {unknown}, which are not sources (sources: {self.names})"
            )
        raw = np.array([float((weights or {}).get(n, 1.0 if weights is None else 0.0)) for n in self.names])
        if (raw < 0).any() or not np.isfinite(raw).all() or raw.sum() <= 0:
            raise ValueError(
                f"MultiTaskSource: invalid sampling weights {dict(zip(self.names, raw.tolist(), strict=True))}"
            )
        return raw / raw.sum()

    def next_step(self) -> list[Any]:
        index = np.random.default_rng([self.seed, self.step]).choice(len(self.names), p=self._probabilities())
        name = self.names[int(index)]
        self.step += 1
        return [TaggedBatch(name, b) for b in self.sources[name].next_step()]

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step, "seed": self.seed, "sources": {n: s.state_dict() for n, s in self.sources.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("seed") != self.seed:
            raise ValueError(f"MultiTaskSource: seed changed ({state.get('seed')} -> {self.seed}); cannot resume")
        _load_children("MultiTaskSource", self.sources, state)
        self.step = state["step"]


class AlternatingSource(_Iterable):
    """Steps follow a fixed cyclic `pattern` of source names, e.g. labeled/unlabeled alternation.

    `pattern=["labeled", "unlabeled", "unlabeled"]` gives one labeled step then two unlabeled ones,
    repeated. Deterministic, so the state is the step count plus each child's cursor. Micro-batches
    come back as `TaggedBatch(name, batch)`.
    """

    def __init__(self, sources: Mapping[str, BatchSource], pattern: Sequence[str]):
        unknown = sorted(set(pattern) - set(sources))
        if not pattern or unknown:
            raise ValueError(f"AlternatingSource: pattern {list(pattern)} names unknown sources {unknown}")
        for source in sources.values():
            check_batch_source(source)
        self.sources, self.pattern, self.step = dict(sources), list(pattern), 0

    @property
    def steps_per_epoch(self) -> int | None:
        return None

    def next_step(self) -> list[Any]:
        name = self.pattern[self.step % len(self.pattern)]
        self.step += 1
        return [TaggedBatch(name, b) for b in self.sources[name].next_step()]

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "pattern": self.pattern,
            "sources": {n: s.state_dict() for n, s in self.sources.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if list(state.get("pattern", [])) != self.pattern:
            raise ValueError(f"AlternatingSource: pattern changed ({state.get('pattern')} -> {self.pattern})")
        _load_children("AlternatingSource", self.sources, state)
        self.step = state["step"]


class Prefetcher:
    """Prepares the next `depth` steps of `source` in a background thread.

    Each item carries the source's cursor *after* producing it — the cursor of the next batch the
    trainer has not consumed — so a checkpoint stores the consumer's position, never the
    prefetcher's: resume is exact whatever is still queued. `depth=0` runs inline (no thread).
    Errors in the producer are re-raised in the consumer; `close()` stops the thread promptly, and so
    does dropping the prefetcher without it (the thread holds no reference to it).
    """

    def __init__(self, source: BatchSource, depth: int, pin_memory: bool = False):
        self.source, self.depth, self.pin_memory = source, depth, pin_memory
        self._queue: queue.Queue[tuple[str, Any, Any]] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if depth > 0:
            # The thread gets what it works on, not `self`: with `target=self._produce` the running thread
            # kept the prefetcher (and its source's data) alive, so one dropped without `close()` was never
            # collected and its thread polled the full queue for the life of the process.
            self._thread = threading.Thread(
                target=_produce, args=(source, pin_memory, self._queue, self._stop), name="xfer-prefetch", daemon=True
            )
            weakref.finalize(self, self._stop.set)  # dropped without close(): the thread ends on its own
            self._thread.start()

    def _make(self) -> tuple[list[Any], Any]:
        return _make_step(self.source, self.pin_memory)

    def next(self) -> tuple[list[Any], Any]:
        """One step's micro-batches and the source cursor to save once they are consumed."""
        if self._thread is None:
            return self._make()
        while True:
            try:
                kind, value, state = self._queue.get(timeout=1.0)
                break
            except queue.Empty:
                if not self._thread.is_alive():
                    # The producer may have queued its error and ended between the timeout and this check:
                    # that error (a DataError naming a file and line) was lost behind "stopped unexpectedly".
                    try:
                        kind, value, state = self._queue.get_nowait()
                        break
                    except queue.Empty:
                        raise RuntimeError("the batch prefetch thread stopped unexpectedly") from None
        if kind == "error":
            raise value
        return value, state

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _make_step(source: BatchSource, pin_memory: bool) -> tuple[list[Any], Any]:
    """One step's micro-batches and the source's cursor after them (a copy: the source moves on)."""
    batches = source.next_step()
    if pin_memory:
        batches = [_pin(b) for b in batches]
    return batches, copy.deepcopy(source.state_dict())


def _produce(
    source: BatchSource, pin_memory: bool, items: queue.Queue[tuple[str, Any, Any]], stop: threading.Event
) -> None:
    """The prefetch thread: steps of `source` into `items` until `stop` is set or a step fails (the
    error is queued for the consumer, which re-raises it)."""
    while not stop.is_set():
        try:
            item: tuple[str, Any, Any] = ("ok", *_make_step(source, pin_memory))
        except BaseException as exc:  # handed to the consumer, which re-raises it
            item = ("error", exc, None)
        while not stop.is_set():
            try:
                items.put(item, timeout=0.1)
                break
            except queue.Full:
                continue
        if item[0] == "error":
            return


def _pin(batch: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.pin_memory()
    if isinstance(batch, dict):
        return {k: _pin(v) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_pin(v) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_pin(v) for v in batch)
    return batch


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

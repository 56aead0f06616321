"""The student's data: mixed multi-task batches with the teachers' outputs attached.

- `attach_teacher_outputs` puts each training feature's cached teacher rows (logits, or the
  regression output) into the feature itself, so the teacher travels with the example through
  shuffling, batching, prefetching and resume — the student never calls a teacher.
- `MixedCollate` collates `{task: features}` into one batch: each task's part collated by its own
  objective, plus the joint encoder inputs (every part padded to one length) for a single pass.
- `MixedTaskSource` is the `BatchSource` of `mixing: example`: every example of a global batch
  draws its task (probabilities from `xfer.bam.sampling`), then takes that task's next example
  from an endless sequence of seeded epoch permutations. Its state is the step count and one
  (epoch, offset) cursor per task, so resume is exact. `mixing: batch` uses core's
  `MultiTaskSource` (one task per step) through `with_epochs`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from xfer.bam.cache import TeacherPredictions, example_digest
from xfer.bam.objective import TaskKind
from xfer.core.data import BatchSource, BatchStream, MultiTaskSource, per_process_share
from xfer.core.errors import UserError
from xfer.core.tasks import Example


def feature_rows(feature: Mapping[str, Any], kind: TaskKind) -> int:
    """How many teacher rows a feature carries: one per word of a tagging window, else one."""
    return len(feature["word_starts"]) if kind.per_word else 1


def attach_teacher_outputs(
    task: str,
    examples: Sequence[Example],
    features: list[dict[str, Any]],
    predictions: TeacherPredictions,
    kind: TaskKind,
) -> None:
    """Set `feature["teacher"]` (float32 [rows, C]) for every training feature, from the cache.

    Every example must be in the cache with the same content (id and digest of its text and
    label): teacher outputs for a different version of the data would silently teach the wrong
    thing. Windows of a long tagging sentence take consecutive slices of its per-word rows.
    """
    missing, changed = [], []
    for example in examples:
        stored = predictions.digest(example.id)
        if stored is None:
            missing.append(example.id)
        elif stored != example_digest(example):
            changed.append(example.id)
    if missing or changed:
        which = missing or changed
        problem = "have no teacher prediction" if missing else "differ from the examples the teacher predicted on"
        raise UserError(
            f"{task}: {len(which)} training example(s) {problem} (first: {which[0]!r}); the teachers "
            f"({predictions.source}) were run on different data. Re-run the teachers stage on the same task config."
        )
    if not np.isfinite(predictions.values).all():
        # a NaN/inf target made the student's loss NaN at the first step that drew the example, and
        # the trainer then blamed the learning rate: say which teacher output is broken instead
        bad = next((e.id for e in examples if not np.isfinite(predictions.rows(e.id)).all()), None)
        if bad is not None:
            raise UserError(
                f"{task}: the teacher's output for training example {bad!r} is NaN or infinite "
                f"({predictions.source}): a student cannot learn from it. Re-run the teachers stage "
                "(with train: {precision: fp32} if it ran in reduced precision)."
            )
    used: dict[str, int] = {}
    for feature in features:
        rows = predictions.rows(feature["id"])
        start = used.get(feature["id"], 0)
        count = feature_rows(feature, kind)
        if start + count > len(rows):
            raise UserError(f"{task}: example {feature['id']!r} has more words than its teacher prediction rows")
        feature["teacher"] = rows[start : start + count]
        used[feature["id"]] = start + count
    short = [i for i, n in used.items() if n != len(predictions.rows(i))]
    if short:
        raise UserError(f"{task}: example {short[0]!r} has fewer words than its teacher prediction rows")


class MixedCollate:
    """`{task: [features]}` -> one mixed batch (see `DistillationObjective.forward` for its use).

    Layout: `input_ids`, `attention_mask`, `token_type_ids` [B, T] for the shared encoder pass,
    and `parts`: per task `{"task", "start", "end", "batch", "teacher"?}` where `batch` is the
    task objective's own collation and rows start:end of the joint inputs are its examples.
    """

    def __init__(self, objectives: Mapping[str, Any], kinds: Mapping[str, TaskKind], pad_id: int):
        self.objectives, self.kinds, self.pad_id = objectives, kinds, pad_id

    def __call__(self, groups: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        start = 0
        for task, features in groups.items():
            if not features:
                continue
            sub = self.objectives[task].collate(features)
            part: dict[str, Any] = {"task": task, "start": start, "end": start + len(features), "batch": sub}
            if "teacher" in features[0]:
                part["teacher"] = self._teacher(features, self.kinds[task], sub)
            parts.append(part)
            start += len(features)
        width = max(p["batch"]["input_ids"].shape[1] for p in parts)

        def joint(key: str, value: int) -> torch.Tensor:
            pieces = []
            for p in parts:
                tensor = p["batch"].get(key)
                if tensor is None:  # e.g. tagging inputs carry no token types
                    tensor = torch.zeros_like(p["batch"]["input_ids"])
                pieces.append(F.pad(tensor, (0, width - tensor.shape[1]), value=value))
            return torch.cat(pieces)

        return {
            "input_ids": joint("input_ids", self.pad_id),
            "attention_mask": joint("attention_mask", 0),
            "token_type_ids": joint("token_type_ids", 0),
            "parts": parts,
        }

    @staticmethod
    def _teacher(features: list[dict[str, Any]], kind: TaskKind, sub: Mapping[str, torch.Tensor]) -> torch.Tensor:
        if not kind.per_word:
            return torch.from_numpy(np.stack([f["teacher"][0] for f in features]))
        words = sub[kind.gold_key].shape[1]
        classes = features[0]["teacher"].shape[1]
        out = np.zeros((len(features), words, classes), dtype=np.float32)
        for row, feature in enumerate(features):
            out[row, : len(feature["teacher"])] = feature["teacher"]
        return torch.from_numpy(out)


STEP_DRAWS = 0x6D6978  # "mix"
"""The first entropy word of `MixedTaskSource`'s per-step task draws, apart from its permutations'.

numpy's SeedSequence ignores trailing zeros: `[seed, step]` was the entropy of task `step`'s first
permutation `[seed, step, 0]`, so step k's task counts and task k's first epoch order were drawn from
one stream (correlated). Task permutations start with the seed, the draws with this word: they could
only meet if the seed were this word and a task index too, and a stage has far fewer tasks. The
permutations keep their old seeds, so a single-task group (every `bam.teachers` model, whose draws
are all its one task) trains on the same batches as before."""


class MixedTaskSource:
    """Global batches whose examples each draw their task with `probabilities` (exact resume).

    Step `i` draws its per-task counts from `numpy.random.default_rng([STEP_DRAWS, seed, i])`
    (multinomial over the global batch = one categorical draw per example), so every DDP rank
    composes the same global batch and takes its share; task `k`'s examples come from seeded
    permutations `default_rng([seed, k, epoch])` laid end to end, so no example is skipped at
    epoch ends. An epoch is as many examples as the tasks' training sets hold together.
    """

    def __init__(
        self,
        features: Mapping[str, Sequence[Any]],
        probabilities: Mapping[str, float],
        global_batch: int,
        collate: Callable[[dict[str, list[Any]]], Any],
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        accumulation: int = 1,
    ):
        self.names = list(features)
        empty = [n for n in self.names if not len(features[n])]
        if empty:
            raise ValueError(f"task {empty[0]!r} has no training examples")
        per_process_share(global_batch, world_size, accumulation)
        self.features, self.global_batch, self.collate, self.seed = features, global_batch, collate, seed
        self.rank, self.world_size, self.accumulation = rank, world_size, accumulation
        p = np.array([float(probabilities[n]) for n in self.names])
        if (p < 0).any() or not np.isfinite(p).all() or p.sum() <= 0:
            raise ValueError(f"invalid task probabilities {dict(probabilities)}")
        self.p = p / p.sum()
        self.step = 0
        self.cursors = {n: [0, 0] for n in self.names}  # task -> [epoch, offset]
        self._orders: dict[str, np.ndarray] = {}

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(sum(len(self.features[n]) for n in self.names) / self.global_batch)

    def _take(self, name: str, count: int) -> list[int]:
        size, cursor, taken = len(self.features[name]), self.cursors[name], []
        while len(taken) < count:
            order = self._orders.get(name)
            if order is None:
                index = self.names.index(name)
                order = self._orders[name] = np.random.default_rng([self.seed, index, cursor[0]]).permutation(size)
            chunk = order[cursor[1] : cursor[1] + count - len(taken)]
            taken.extend(chunk.tolist())
            cursor[1] += len(chunk)
            if cursor[1] >= size:
                cursor[0], cursor[1] = cursor[0] + 1, 0
                self._orders.pop(name)
        return taken

    def draw_counts(self, step: int) -> np.ndarray:
        """Examples of each task (in `names` order) in the global batch of `step`."""
        return np.random.default_rng([STEP_DRAWS, self.seed, step]).multinomial(self.global_batch, self.p)

    def next_step(self) -> list[Any]:
        counts = self.draw_counts(self.step)
        picked = [(name, i) for name, count in zip(self.names, counts, strict=True) for i in self._take(name, count)]
        mine = picked[self.rank :: self.world_size]
        size = len(mine) // self.accumulation
        self.step += 1
        micro = []
        for k in range(self.accumulation):
            groups: dict[str, list[Any]] = {}
            for name, i in mine[k * size : (k + 1) * size]:
                groups.setdefault(name, []).append(self.features[name][i])
            micro.append(self.collate(groups))
        return micro

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "seed": self.seed,
            "sizes": {n: len(self.features[n]) for n in self.names},
            "cursors": {n: list(c) for n, c in self.cursors.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        sizes = {n: len(self.features[n]) for n in self.names}
        if state.get("seed") != self.seed or state.get("sizes") != sizes:
            raise ValueError(
                f"data changed since the checkpoint (sizes {state.get('sizes')} -> {sizes}, seed "
                f"{state.get('seed')} -> {self.seed}); cannot resume exactly"
            )
        self.step = int(state["step"])
        self.cursors = {n: list(state["cursors"][n]) for n in self.names}
        self._orders = {}

    def __iter__(self) -> Iterator[list[Any]]:
        return self

    def __next__(self) -> list[Any]:
        return self.next_step()


class _WithEpochs:
    """A source without epochs (core's `MultiTaskSource`) given an epoch length, so `train.epochs` works."""

    def __init__(self, source: BatchSource, steps_per_epoch: int):
        self.source, self._steps = source, steps_per_epoch

    @property
    def steps_per_epoch(self) -> int:
        return self._steps

    def next_step(self) -> list[Any]:
        return self.source.next_step()

    def state_dict(self) -> dict[str, Any]:
        return self.source.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.source.load_state_dict(state)


def batch_mixing_source(
    features: Mapping[str, Sequence[Any]],
    probabilities: Mapping[str, float],
    global_batch: int,
    collate: Callable[[dict[str, list[Any]]], Any],
    seed: int,
    rank: int = 0,
    world_size: int = 1,
    accumulation: int = 1,
) -> BatchSource:
    """`mixing: batch`: each step draws ONE task (core `MultiTaskSource`); epoch as in `MixedTaskSource`."""
    streams = {
        name: BatchStream(
            features[name],
            global_batch,
            lambda group, name=name: collate({name: group}),
            seed=seed * 1000 + index,
            rank=rank,
            world_size=world_size,
            accumulation=accumulation,
        )
        for index, name in enumerate(features)
    }
    # the task draws' seed is the number after the last task's stream seed: with `seed=seed` the draws of
    # a seed-0 trial ([0, step]) were task 0's permutations ([0, epoch]), one stream for both
    source = MultiTaskSource(streams, dict(probabilities), seed=seed * 1000 + len(streams))
    total = sum(len(f) for f in features.values())
    return _WithEpochs(source, math.ceil(total / global_batch))

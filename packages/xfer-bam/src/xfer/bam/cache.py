"""Content-addressed store of teacher predictions on training sets (safetensors, no pickle).

A teacher's predictions depend on its weights, the task's data and config, the objective and
the featurisation (tokenizer, max_length) and the precision it ran in. `prediction_key` hashes
exactly those, so an entry is valid for as long as its key is asked for, and a changed teacher
(or data, or featurisation) asks for a different key: it can never be served stale predictions.
Entries are reused across students, trials and — with a shared `cache_dir` — across runs.

One entry = `<key>.safetensors`:

    values   float32 [rows, C]   classification: logits; regression: output in the objective's
                                 [0, 1] target space (C = 1); tagging: one row of logits per word
    offsets  int64 [N + 1]       example i owns rows offsets[i]:offsets[i+1]
    digests  int64 [N]           digest of each example (id, text, label): the student checks it
    metadata {"format", "key", "task", "type", "labels", "ids" (JSON list), "extra", "values_sha256",
              "content_sha256" (of the three tensors and every other metadata field)}

Example ids must be unique (an error otherwise, at write and at read). Writes are atomic (temp
file + rename), and a file whose content hash does not match its metadata is treated as absent.
A stage's `predictions` output holds `index.json` (task -> entry file and provenance) and the
entries themselves (hard links into a shared cache when one is used).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from xfer.core.atomic import atomic_write_with, write_json
from xfer.core.errors import UserError

FORMAT = 1
INDEX = "index.json"


class CacheError(UserError):
    """A prediction store or index that cannot be used (missing task, damaged file, bad ids)."""


def example_digest(example: Any) -> int:
    """A signed 64-bit digest of an example's full content (id, text or words, label or tags)."""
    payload = json.dumps(dataclasses.asdict(example), sort_keys=True, ensure_ascii=False, default=str)
    return int.from_bytes(hashlib.blake2b(payload.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


def data_digest(examples: Sequence[Any]) -> str:
    """Digest of a whole split, in order (enters the cache key)."""
    h = hashlib.sha256()
    for example in examples:
        h.update(example_digest(example).to_bytes(8, "little", signed=True))
    return h.hexdigest()


def weights_digest(state: Mapping[str, Any]) -> str:
    """sha256 of a state dict's names, dtypes, shapes and bytes (tensors of any dtype)."""
    import torch

    h = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().cpu().contiguous()
        h.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        h.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def prediction_key(**parts: Any) -> str:
    """The content address of a teacher's predictions: sha256 of everything they depend on.

    Callers pass teacher_weights, task, task_config, train_data, objective, objective_config,
    max_length, tokenizer, precision (see `stage.teacher_key`); values must be JSON-able (paths
    and dataclasses are converted).
    """
    payload = json.dumps({"format": FORMAT, **parts}, sort_keys=True, default=_plain)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__type__": type(value).__name__, **dataclasses.asdict(value)}
    return str(value)


@dataclass
class TeacherPredictions:
    """One task's teacher outputs on its training set, addressed by example id."""

    key: str
    task: str
    type: str
    labels: tuple[str, ...]
    ids: list[str]
    values: np.ndarray  # float32 [rows, C]
    offsets: np.ndarray  # int64 [N + 1]
    digests: np.ndarray  # int64 [N]
    extra: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    _position: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        n = len(self.ids)
        if self.offsets.shape != (n + 1,) or self.digests.shape != (n,):
            raise CacheError(
                f"{self.source or self.task}: {n} ids but offsets {self.offsets.shape}, digests {self.digests.shape}"
            )
        if self.values.ndim != 2 or (n and (self.offsets[0] != 0 or self.offsets[-1] != len(self.values))):
            raise CacheError(f"{self.source or self.task}: offsets do not cover the {len(self.values)} value rows")
        if (np.diff(self.offsets) < 1).any():
            raise CacheError(f"{self.source or self.task}: an example has no prediction rows")
        self._position = {}
        for position, example_id in enumerate(self.ids):
            if example_id in self._position:
                raise CacheError(f"{self.source or self.task}: duplicate example id {example_id!r}")
            self._position[example_id] = position

    def __len__(self) -> int:
        return len(self.ids)

    def rows(self, example_id: str) -> np.ndarray:
        p = self._position[example_id]
        return self.values[self.offsets[p] : self.offsets[p + 1]]

    def digest(self, example_id: str) -> int | None:
        p = self._position.get(example_id)
        return None if p is None else int(self.digests[p])


def assemble(
    key: str,
    task: str,
    task_type: str,
    labels: Sequence[str],
    examples: Sequence[Any],
    feature_ids: Sequence[str],
    feature_rows: Sequence[np.ndarray],
    extra: Mapping[str, Any] | None = None,
) -> TeacherPredictions:
    """Predictions from per-feature output rows (windows of an example are consecutive features)."""
    seen: set[str] = set()
    for example in examples:
        if example.id in seen:
            raise CacheError(f"{task}: duplicate example id {example.id!r} in the training data; ids must be unique")
        seen.add(example.id)
    grouped: dict[str, list[np.ndarray]] = {}
    previous = None
    for example_id, rows in zip(feature_ids, feature_rows, strict=True):
        if example_id in grouped and example_id != previous:
            raise CacheError(f"{task}: features of example {example_id!r} are not consecutive")
        grouped.setdefault(example_id, []).append(np.asarray(rows, dtype=np.float32))
        previous = example_id
    missing = [e.id for e in examples if e.id not in grouped]
    if missing:
        raise CacheError(f"{task}: no teacher output for example {missing[0]!r}")
    blocks = [np.concatenate(grouped[e.id]) for e in examples]
    lengths = np.array([len(b) for b in blocks], dtype=np.int64)
    return TeacherPredictions(
        key=key,
        task=task,
        type=task_type,
        labels=tuple(labels),
        ids=[e.id for e in examples],
        values=np.ascontiguousarray(np.concatenate(blocks).astype(np.float32)),
        offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        digests=np.array([example_digest(e) for e in examples], dtype=np.int64),
        extra=dict(extra or {}),
    )


def _sha(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()


CHECKSUM = "content_sha256"


def _content_sha(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str]) -> str:
    """sha256 of every tensor (name, dtype, shape, bytes) and every other metadata field: a flipped
    bit in `offsets` (which rows are whose) or in `labels` is as damaging as one in `values`, and
    safetensors itself checks nothing. (Entries written before it carry `values_sha256` alone.)"""
    h = hashlib.sha256()
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        h.update(f"{name}:{array.dtype.str}:{array.shape};".encode())
        h.update(array.tobytes())
    fields = {k: v for k, v in metadata.items() if k != CHECKSUM}
    h.update(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()


def save_predictions(path: Path, predictions: TeacherPredictions) -> None:
    """Write one entry atomically (temp file + rename)."""
    from safetensors.numpy import save_file

    metadata = {
        "format": str(FORMAT),
        "key": predictions.key,
        "task": predictions.task,
        "type": predictions.type,
        "labels": json.dumps(list(predictions.labels)),
        "ids": json.dumps(predictions.ids, ensure_ascii=False),
        "extra": json.dumps(predictions.extra, default=str),
        "values_sha256": _sha(predictions.values),
    }
    tensors = {"values": predictions.values, "offsets": predictions.offsets, "digests": predictions.digests}
    metadata[CHECKSUM] = _content_sha(tensors, metadata)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_with(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))


def load_predictions(path: Path) -> TeacherPredictions:
    """Read and verify one entry; CacheError if it is damaged or inconsistent."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as handle:
            metadata = handle.metadata() or {}
            tensors = {name: handle.get_tensor(name) for name in ("values", "offsets", "digests")}
        if metadata.get("format") != str(FORMAT):
            raise CacheError(f"{path}: unsupported format {metadata.get('format')!r} (this xfer reads {FORMAT})")
        if metadata.get("values_sha256") != _sha(tensors["values"]) or (
            CHECKSUM in metadata and metadata[CHECKSUM] != _content_sha(tensors, metadata)
        ):
            raise CacheError(f"{path}: content does not match its checksum (damaged file)")
        return TeacherPredictions(
            key=metadata["key"],
            task=metadata["task"],
            type=metadata["type"],
            labels=tuple(json.loads(metadata["labels"])),
            ids=json.loads(metadata["ids"]),
            values=tensors["values"],
            offsets=tensors["offsets"],
            digests=tensors["digests"],
            extra=json.loads(metadata.get("extra", "{}")),
            source=str(path),
        )
    except CacheError:
        raise
    except Exception as exc:  # safetensors raises several types for truncated/garbled files
        raise CacheError(f"{path}: unreadable teacher predictions ({type(exc).__name__}: {exc})") from exc


class PredictionStore:
    """`<directory>/<key>.safetensors` entries; `lookup(key)` returns a verified entry or None."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.safetensors"

    def lookup(self, key: str) -> TeacherPredictions | None:
        """The entry for `key`, or None when absent; a damaged entry is moved aside (warning) and treated as absent.

        A shared `cache_dir` is written by concurrent runs: while this one reads a damaged entry,
        another may already have moved it aside (the move here then failed with a bare
        FileNotFoundError) or replaced it with a recomputed one (which the move here then threw
        away, and the other run's `publish` crashed on the missing file). Only the file that was
        read is moved aside; one that replaced it is looked up afresh."""
        path = self.path(key)
        for _ in range(3):  # a file replaced while it was read is read again (not forever)
            try:
                read = path.stat()
            except OSError:
                return None
            if not stat.S_ISREG(read.st_mode):
                return None
            try:
                entry = load_predictions(path)
            except CacheError as exc:
                if self._set_aside(path, read, ".damaged", str(exc)):
                    return None
                continue
            if entry.key != key:
                # A renamed/misnamed file: moved aside like a damaged one, so the stage recomputes the
                # entry instead of stopping after all its training.
                if self._set_aside(path, read, ".misnamed", f"{path}: holds key {entry.key}, not {key}"):
                    return None
                continue
            return entry
        return None

    @staticmethod
    def _set_aside(path: Path, read: os.stat_result, suffix: str, problem: str) -> bool:
        """Move `path` to `<name><suffix>` (warning: `problem`) if it is still the file `read` was taken of;
        False when another run has replaced it since (to be read again). Gone already: True."""
        aside = path.with_name(path.name + suffix)
        try:
            now = path.stat()
            if (now.st_dev, now.st_ino, now.st_mtime_ns) != (read.st_dev, read.st_ino, read.st_mtime_ns):
                return False
            os.replace(path, aside)
        except FileNotFoundError:  # another run moved it aside first
            return True
        warnings.warn(f"{problem}; moved to {aside.name}, recomputing", stacklevel=3)
        return True

    def save(self, predictions: TeacherPredictions) -> Path:
        """Store an entry; NaN/inf outputs are refused here, at the teachers' export, naming the
        example: stored, they were refused only by the student stage, in a later stage or run."""
        if not np.isfinite(predictions.values).all():
            bad = next(i for i in predictions.ids if not np.isfinite(predictions.rows(i)).all())
            raise CacheError(
                f"{predictions.task}: the teacher's output for training example {bad!r} is NaN or infinite "
                "(a diverged teacher?); not saved: a student cannot learn from it (re-run the teacher with a "
                "lower learning rate, or with train: {precision: fp32} if it ran in reduced precision)"
            )
        path = self.path(predictions.key)
        save_predictions(path, predictions)
        return path


def publish(entry_path: Path, output_dir: Path) -> Path:
    """Make an entry of a shared cache part of a stage output (hard link, else copy)."""
    target = output_dir / entry_path.name
    if entry_path.parent.resolve() == output_dir.resolve():
        return target
    if target.exists() and _same_content(entry_path, target):
        return target
    # An existing target that differs (an old link to an entry since found damaged and recomputed)
    # is replaced atomically: keeping it would publish the damaged predictions.
    output_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".publish-tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(entry_path, tmp)
        os.replace(tmp, target)
    except OSError:
        import shutil

        tmp.unlink(missing_ok=True)
        atomic_write_with(target, lambda t: shutil.copyfile(entry_path, t))
    return target


def _same_content(a: Path, b: Path) -> bool:
    """True when `b` is `a` (same inode) or a byte-identical copy of it."""
    try:
        if os.path.samefile(a, b):
            return True
        return a.stat().st_size == b.stat().st_size and a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def write_index(output_dir: Path, entries: Mapping[str, Mapping[str, Any]]) -> None:
    """`index.json`: {task: {"file", "key", "type", "labels", "examples", "teacher": provenance}}."""
    write_json(output_dir / INDEX, {"format": FORMAT, "tasks": dict(entries)})


def read_index(folder: Path) -> dict[str, dict[str, Any]]:
    path = Path(folder) / INDEX
    if not path.is_file():
        raise CacheError(
            f"{folder}: no {INDEX}: `teachers` must be the `predictions` output of a bam.teachers or bam.student stage"
        )
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return dict(document["tasks"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CacheError(f"{path}: unreadable index ({exc})") from exc


def entry_file(folder: Path, task: str, entry: Any) -> Path:
    """The predictions file an index.json `entry` of `task` names (not checked to exist), or a
    CacheError for an entry that names none (a hand-written index: a KeyError/TypeError traceback)."""
    file = entry.get("file") if isinstance(entry, Mapping) else None
    if not isinstance(file, str) or not file:
        raise CacheError(
            f"{Path(folder) / INDEX}: the entry of {task!r} names no predictions file "
            f'(expected {{"file": "<key>.safetensors", "key": "<key>", ...}}, found {entry!r})'
        )
    return Path(folder) / file


def load_teacher_predictions(folder: Path, task: str) -> TeacherPredictions:
    """The cached teacher predictions for `task` in a `predictions` output folder."""
    tasks = read_index(folder)
    if task not in tasks:
        raise CacheError(f"{folder}: the teachers have no predictions for {task!r} (they cover: {', '.join(tasks)})")
    entry = tasks[task]
    file = entry_file(folder, task, entry)
    try:
        predictions = load_predictions(file)
    except CacheError as exc:
        raise CacheError(
            f"{exc}; re-run the stage that wrote {folder} (delete its folder in the run directory)"
        ) from exc
    if predictions.key != entry.get("key") or predictions.task != task:
        raise CacheError(f"{file}: does not hold the predictions {INDEX} lists for {task!r}")
    return predictions

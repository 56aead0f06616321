"""What a stage sees while it runs: its config, folders, inputs, device and logging.

A stage component is a function `run(ctx: StageContext) -> None` (registered with
`ComponentSpec(kind="stage", ..., outputs=("model",))`). It reads earlier stages' outputs through
`ctx.resolve(input)`, writes each declared output into `ctx.output_dir(name)`, trains with
`xfer.core.trainer.Trainer(..., workdir=ctx.dir, events=ctx.events())`, and may add Markdown to
its report with `ctx.report(...)`. Every rank runs the stage; only rank 0 writes files
(`ctx.is_main`).
"""

from __future__ import annotations

import glob
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from xfer.core import distributed as dist
from xfer.core.atomic import atomic_path, read_json
from xfer.core.config import Files, Input
from xfer.core.errors import DataError, PluginError
from xfer.core.plugins import PluginHost
from xfer.core.runs.report import TAGS_KEY, metric_json


@dataclass
class StageContext:
    run_dir: Path
    name: str
    kind: str
    config: Any
    seed: int
    dir: Path
    device: torch.device
    host: PluginHost
    stage_dirs: dict[str, Path]  # every stage of the recipe -> its folder (for references)
    resumed: bool = False
    report_sections: list[str] = field(default_factory=list)

    @property
    def is_main(self) -> bool:
        return dist.is_main()

    @property
    def metrics_file(self) -> Path:
        return self.dir / "metrics.jsonl"

    def resolve(self, source: Input) -> Path:
        """The directory an `Input` designates: an earlier stage's output or a path."""
        if source.stage is not None:
            return self.stage_dirs[source.stage] / "outputs" / str(source.output)
        assert source.path is not None
        return source.path

    def resolve_files(self, files: Files, suffixes: tuple[str, ...] = (".txt",)) -> list[Path]:
        """Every file the patterns match plus every file with `suffixes` inside referenced outputs.

        The list keeps regular files only (a `**` glob matches folders too), so what it would leave
        out without a word is a DataError naming the path and the recipe key instead:
        - a broken symbolic link among the matches (the vocabulary and CVT pre-flights check it
          before any stage runs; this is the check at the stage);
        - a FIFO, device or socket among the matches: it was dropped, and its text with it;
        - a match inside a stage folder of this run (`*/*/outputs/*/*.txt` around the run
          directory): the run's own outputs, written after the runner's check before anything
          runs, were trained on in a first run and refused by the next;
        - an output file of a referenced stage deleted since that stage completed (its
          `stage.json` records them): taken as pruned on purpose, "a stage that reads them will
          fail" — the stage instead read the output's other files, or nothing;
        - a pattern that no longer matches any file (the recipe check found one: moved, deleted or
          unmounted since, hours earlier in a long recipe): the stage trained on the other
          patterns' files, or failed as "empty", naming no pattern."""
        key = self._key_of(files)
        found: list[Path] = []
        for pattern in files.patterns:
            matches = [Path(p) for p in sorted(glob.glob(pattern, recursive=True))]
            for path in matches:
                if path.is_symlink() and not path.exists():
                    raise DataError(
                        path, 0, "a broken symbolic link matched by the stage's files: its text would be left out", key
                    )
                if path.exists() and not path.is_file() and not path.is_dir():
                    raise DataError(
                        path,
                        0,
                        f"matched by {pattern!r} but not a regular file (a FIFO, device or socket): its text would "
                        "be left out; save the text to a file",
                        key,
                    )
            self._check_outside_stage_folders(matches, pattern, key)
            if not any(path.is_file() for path in matches):
                raise DataError(
                    pattern,
                    0,
                    "matches no file now, though it did when the recipe was checked: moved or deleted since? "
                    "Its text would be left out",
                    key,
                )
            found += matches
        for source in files.inputs:
            root = self.resolve(source)
            if source.stage is not None:
                self._check_not_pruned(source, root, suffixes, key)
            found += sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in suffixes)
        return [p for p in found if p.is_file()]

    def _key_of(self, files: Files) -> str:
        """The recipe key that holds `files` (`stages.vocab.files`), for messages; `files` if unknown."""
        from xfer.core.runs.fingerprint import file_lists

        return next(
            (label for label, value in file_lists(self.config, f"stages.{self.name}") if value is files), "files"
        )

    def _check_outside_stage_folders(self, matches: list[Path], pattern: str, key: str) -> None:
        """Refuse a match inside a stage folder of this run (by its path with `..` collapsed, or by
        its folder's real path). The runner refuses such a glob before anything runs only when it
        holds `**` or already matches there, which a first run's `*/*/outputs/*/*.txt` does not."""
        folders = {os.path.abspath(d) for d in self.stage_dirs.values()}
        prefixes = tuple({f + os.sep for f in folders} | {os.path.realpath(f) + os.sep for f in folders})
        if not prefixes:
            return
        real_parents: dict[str, str] = {}  # one realpath per folder, not per file
        for path in matches:
            parent, name = os.path.split(os.path.abspath(path))
            if parent not in real_parents:
                real_parents[parent] = os.path.realpath(parent)
            if any(
                (os.path.join(folder, name) + os.sep).startswith(prefixes) for folder in (parent, real_parents[parent])
            ):
                raise DataError(
                    path,
                    0,
                    f"matched by {pattern!r} inside the run directory {self.run_dir}: the stage would read files "
                    "the run writes and never be up to date; narrow the pattern, or refer to an earlier stage's "
                    "output by name (stage.output)",
                    key,
                )

    def _check_not_pruned(self, source: Input, root: Path, suffixes: tuple[str, ...], key: str) -> None:
        """Refuse reading stage output `source` when files it held when its stage completed are gone."""
        record = read_json(self.stage_dirs[str(source.stage)] / "stage.json") or {}
        recorded = record.get("output_files")
        prefix = f"{source.output}/"
        if isinstance(recorded, dict):
            gone = [
                name
                for name in sorted(recorded)
                if name.startswith(prefix) and Path(name).suffix in suffixes and not (root.parent / name).is_file()
            ]
            if gone:
                raise DataError(
                    root.parent / gone[0],
                    0,
                    f"{source}: {len(gone)} of its file(s) deleted since stage {source.stage!r} completed: the stage "
                    f"would read the output without them; delete the folder {self.stage_dirs[str(source.stage)]} to "
                    "make them again",
                    key,
                )
        if not root.is_dir():
            raise DataError(root, 0, f"{source}: the stage output folder is missing", key)

    def output_dir(self, name: str) -> Path:
        """Folder for a declared output (created on rank 0)."""
        path = self.dir / "outputs" / name
        if self.is_main:
            path.mkdir(parents=True, exist_ok=True)
        return path

    def events(self, **tags: Any) -> RunLog:
        """Trainer events that append to metrics.jsonl with `tags` (e.g. trial=2, task='glue/rte').

        A tag named like a key every record has (`step`, `split`, `time`, `tags`) is refused: it
        was overwritten in metrics.jsonl by that key, so the runs it told apart were merged. So is a
        value JSON does not give back equal: a Path failed the first log with a bare TypeError, and
        a tuple (read back a list) or NaN (read back "NaN") never matched its records again, so a
        resume kept the killed attempt's records and each redone step was logged twice."""
        reserved = sorted(set(tags) & {"step", "split", "time", TAGS_KEY})
        if reserved:
            raise PluginError(
                f"stage {self.name!r} ({self.kind}): ctx.events() tag {', '.join(map(repr, reserved))} is a key "
                "every metrics.jsonl record has; name the tag otherwise"
            )
        for key, value in tags.items():
            # what metrics.jsonl gives back equal: a resume finds its run's records by comparing them
            plain = value is None or isinstance(value, (str, int, float))
            if not plain or (isinstance(value, float) and not math.isfinite(value)):
                kind = f"float {value}" if plain else type(value).__name__
                raise PluginError(
                    f"stage {self.name!r} ({self.kind}): ctx.events() tag {key!r} is a {kind} ({value!r}); a tag "
                    "must be a str, int, float, bool or None (it is written to and matched in metrics.jsonl)"
                )
        return RunLog(self, tags)

    def report(self, markdown: str) -> None:
        """Add a section to this stage's report.md."""
        self.report_sections.append(markdown)

    @contextmanager
    def warnings_reported(self) -> Iterator[None]:
        """Route every `UserWarning` raised inside the block through `warn` as it is shown (the
        runner wraps each stage's `run(ctx)` in it), other categories and other ranks as before.

        Why: the warnings a stage raises say what happens to the data (a tagging dev set with tags
        unseen in training, span-QA answers that cover no token, a damaged BAM cache entry
        recomputed), and a plain `warnings.warn` reached only stderr, which is gone once the
        terminal scrolls or the run is in the background. Shown when raised, not at the end."""
        with warnings.catch_warnings():
            shown = warnings.showwarning

            def show(message: Any, category: type[Warning], filename: str, lineno: int, *rest: Any) -> None:
                if issubclass(category, UserWarning) and self.is_main:
                    self.warn(str(message))
                else:
                    shown(message, category, filename, lineno, *rest)

            warnings.showwarning = show
            yield

    def warn(self, message: str) -> None:
        """A warning the user sees now and finds later: on stderr and as a "Warning" section of
        report.md (rank 0 only, so a torchrun run says it once). For what a stage goes on with as
        asked but the user should know (a collapsed or a generator `init:`, a head left at random)."""
        if self.is_main:
            print(f"warning: {message}", file=sys.stderr, flush=True)
            self.report(f"## Warning\n\n{message}\n")


def finished_trial(done: Path) -> dict[str, Any] | None:
    """The record a finished trial left in `done` (its `done.json`), or None: the trial has to run
    (or resume from its checkpoints). A record that is not a JSON object (damaged by hand or by a
    disk) counts as absent, with a warning: the trial resumes from its last checkpoint, its final
    step, and writes the record again, where reading it used to stop the stage on a traceback."""
    if not done.exists():
        return None
    record = read_json(done)
    if record is None:
        print(f"warning: {done}: unreadable trial record; the trial runs again from its checkpoints", file=sys.stderr)
    return record


class RunLog:
    """Writes metrics.jsonl lines and forwards lifecycle events to plugins (rank 0 only).

    One RunLog per training run (its `tags` tell runs of a stage apart, in metrics.jsonl and in
    the `tags` argument of the `xfer_metrics_logged` and `xfer_checkpoint_saved` hooks). A tagged
    record also lists its tag names under `TAGS_KEY`, so a numeric tag (`fold=2`) is read as a tag,
    not as a metric. In a stage run again after an interruption, the records the earlier attempt
    wrote past the point this run starts from are dropped before the first new one is written, so
    each step is logged once: from the checkpoint resumed from (`resumed`), or from the first step
    when no checkpoint was left.
    """

    def __init__(self, ctx: StageContext, tags: dict[str, Any]):
        self.ctx, self.tags = ctx, tags
        self._warned = False  # about metrics named like a key of the record (once per run)
        self._synced = not ctx.resumed  # a fresh stage folder holds no earlier attempt's records

    @property
    def host(self) -> PluginHost:
        """The stage's plugin host (the trainer reads it to name an objective's provider in errors)."""
        return self.ctx.host

    def log(self, step: int, split: str, metrics: dict[str, float]) -> None:
        if not self.ctx.is_main:
            return
        if not self._synced:  # started over (no intact checkpoint): everything from `step` on is redone
            self._drop_records_from(step)
        record = {"step": step, "split": split, **self.tags, **self._renamed(metrics), "time": round(time.time(), 3)}
        if self.tags:  # which keys are tags: the report took a numeric one (fold=2) for a metric and drew it
            record[TAGS_KEY] = sorted(self.tags)
        with _named(self.ctx.metrics_file), open(self.ctx.metrics_file, "a", encoding="utf-8") as out:
            out.write(metric_json(record) + "\n")  # strict JSON: a diverged loss as "NaN"
        self.ctx.host.notify(
            "xfer_metrics_logged",
            run_dir=self.ctx.run_dir,
            stage=self.ctx.name,
            step=step,
            split=split,
            metrics=metrics,
            tags=dict(self.tags),
        )

    def _renamed(self, metrics: dict[str, float]) -> dict[str, float]:
        """`metrics` with a name that is also a key of the record (`step`, `split`, `time`, `tags`, a
        tag) written as `metric/<name>`: it replaced that key, so the logged step became the metric's
        value (a resume then dropped the wrong records) or the metric was lost, without a word.
        Renamed, not refused: this runs on rank 0 only, where an error would hang the other ranks."""
        taken = {"step", "split", "time", TAGS_KEY, *self.tags}
        clashes = sorted(taken.intersection(metrics))
        if not clashes:
            return metrics
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"stage {self.ctx.name!r}: metric {', '.join(map(repr, clashes))} is named like a key every "
                f"metrics.jsonl record has (or a tag); written as {', '.join(repr(f'metric/{n}') for n in clashes)}",
                UserWarning,
                stacklevel=2,
            )
        return {(f"metric/{k}" if k in taken else k): v for k, v in metrics.items()}

    def checkpoint_saved(self, step: int, path: Path) -> None:
        self.ctx.host.notify(
            "xfer_checkpoint_saved",
            run_dir=self.ctx.run_dir,
            stage=self.ctx.name,
            step=step,
            path=path,
            tags=dict(self.tags),
        )

    def resumed(self, step: int) -> None:
        """Drop log lines of this run written after the checkpoint we resume from (they are redone)."""
        if not self.ctx.is_main:
            return
        self._drop_records_from(step + 1)
        if self.ctx.metrics_file.exists():
            self.log(step, "resume", {})

    def _drop_records_from(self, step: int) -> None:
        """Rewrite metrics.jsonl without this run's records of `step` and later, and without a line
        torn by the kill that ended the previous attempt (the next record would be glued to it).

        Every other line is kept byte for byte, read a line at a time (the log can be large): lines
        that are no JSON object (a `[1, 2]`, a note, another tool's line) and bytes that are no UTF-8
        used to be deleted or rewritten as U+FFFD, so a resume silently destroyed data in the user's
        file; the report lists such lines as not read, with their numbers. The rewrite is atomic (a
        temporary file, fsynced, renamed over the log): a kill in the middle leaves the old log."""
        path = self.ctx.metrics_file
        if path.exists():
            with _named(path), open(path, "rb") as lines, atomic_path(path) as tmp, open(tmp, "wb") as out:
                for line in lines:
                    if not line.endswith(b"\n"):  # the last line, unterminated
                        if _json_value(line) is _NOT_JSON:
                            continue  # torn by a kill or a crash (or NUL bytes a power cut left)
                        line += b"\n"  # complete: kept, and the next record starts on a line of its own
                    if not self._redone(line, step):
                        out.write(line)
        self._synced = True

    def _redone(self, line: bytes, step: int) -> bool:
        """Whether `line` is a record of this run logged at `step` or later (redone after the resume).

        A record of this run has the same tags as this run, no more: a record listing its tags under
        `TAGS_KEY` is another run's when they differ, so an untagged run (`ctx.events()`) no longer
        drops the records of a tagged one (`ctx.events(fold=2)`) of the same stage, nor `(task=...)` those
        of `(task=..., trial=...)`. A record without the list (untagged, or written by an xfer before it)
        is this run's when it has this run's tag values. Every record has a numeric step: an object
        without one (`{"note": ...}`) was taken as logged at step 0, and deleted by a log at step 0."""
        record = _json_value(line)
        if not isinstance(record, dict):
            return False
        names = record.get(TAGS_KEY)
        if isinstance(names, list) and {n for n in names if isinstance(n, str)} != set(self.tags):
            return False
        if not all(record.get(k) == v for k, v in self.tags.items()):
            return False
        logged_at = record.get("step")
        return isinstance(logged_at, (int, float)) and not isinstance(logged_at, bool) and logged_at >= step


_NOT_JSON = object()
"""What `_json_value` gives for a line that is no JSON (None is JSON's `null`)."""


def _json_value(line: bytes) -> Any:
    """The JSON value of one metrics.jsonl line, or `_NOT_JSON` (invalid JSON or UTF-8, NUL bytes, or
    arrays nested past Python's recursion limit: a `[[[[...` line ended the resume in a RecursionError)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return _NOT_JSON


@contextmanager
def _named(path: Path) -> Iterator[None]:
    """Name `path` in an OSError that names no file: a failed write or fsync (a full disk, an I/O error)
    raises one without a file name, and `xfer run` said "error: No space left on device" without
    saying which file (or, through a symbolic link to another disk, which disk) it could not write."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc

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
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from xfer.core import distributed as dist
from xfer.core.atomic import atomic_write_text, read_json
from xfer.core.config import Files, Input
from xfer.core.errors import DataError
from xfer.core.plugins import PluginHost
from xfer.core.runs.report import metric_json, metric_lines


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

        A broken symbolic link among the matches is a DataError naming it: the list keeps regular
        files only, so its text was left out of every stage's data without a word (the vocabulary
        and CVT pre-flights check it before any stage runs; this is the check at the stage)."""
        found = [Path(p) for pattern in files.patterns for p in sorted(glob.glob(pattern, recursive=True))]
        broken = next((p for p in found if p.is_symlink() and not p.exists()), None)
        if broken is not None:
            raise DataError(
                broken, 0, "a broken symbolic link matched by the stage's files: its text would be left out"
            )
        for source in files.inputs:
            root = self.resolve(source)
            found += sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in suffixes)
        return [p for p in found if p.is_file()]

    def output_dir(self, name: str) -> Path:
        """Folder for a declared output (created on rank 0)."""
        path = self.dir / "outputs" / name
        if self.is_main:
            path.mkdir(parents=True, exist_ok=True)
        return path

    def events(self, **tags: Any) -> RunLog:
        """Trainer events that append to metrics.jsonl with `tags` (e.g. trial=2, task='glue/rte')."""
        return RunLog(self, tags)

    def report(self, markdown: str) -> None:
        """Add a section to this stage's report.md."""
        self.report_sections.append(markdown)

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
    the `tags` argument of the `xfer_metrics_logged` and `xfer_checkpoint_saved` hooks). In a stage run again
    after an interruption, the records the earlier attempt wrote past the point this run starts
    from are dropped before the first new one is written, so each step is logged once: from
    the checkpoint resumed from (`resumed`), or from the first step when no checkpoint was left.
    """

    def __init__(self, ctx: StageContext, tags: dict[str, Any]):
        self.ctx, self.tags = ctx, tags
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
        record = {"step": step, "split": split, **self.tags, **metrics, "time": round(time.time(), 3)}
        with open(self.ctx.metrics_file, "a", encoding="utf-8") as out:
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
        torn by the kill that ended the previous attempt (the next record would be glued to it)."""
        self._synced = True
        if not self.ctx.metrics_file.exists():
            return
        kept = []
        for line, record in metric_lines(self.ctx.metrics_file.read_text(encoding="utf-8", errors="replace")):
            same_run = all(record.get(k) == v for k, v in self.tags.items())
            logged_at = record.get("step", 0)
            if not (same_run and isinstance(logged_at, (int, float)) and logged_at >= step):
                kept.append(line)
        atomic_write_text(self.ctx.metrics_file, "".join(k + "\n" for k in kept))

"""RunLog on resume, fed hostile metrics.jsonl files (h43): lines it does not own (not a JSON object, not
UTF-8, nested past the recursion limit, another run's) are kept byte for byte, a torn last line is still
dropped, a failed write names the file; the runner counts a checkpoint a killed re-save left renamed
aside; bam's report table escapes task and metric names."""

from __future__ import annotations

import errno
import json
import os
import tracemalloc
from pathlib import Path

import pytest
import torch
from torch import nn

from xfer.core import checkpoint as ckpt
from xfer.core.runs.report import read_metrics
from xfer.core.runs.runner import _left_progress
from xfer.core.stage import StageContext
from xfer.testing import make_host


def context(tmp_path: Path, resumed: bool = False) -> StageContext:
    stage = tmp_path / "s"
    stage.mkdir(parents=True, exist_ok=True)
    return StageContext(tmp_path, "s", "k", None, 1, stage, torch.device("cpu"), make_host(), {}, resumed=resumed)


def record(step: int, split: str = "train", **tags: object) -> bytes:
    """A metrics.jsonl line as RunLog writes it (tags listed under `tags`)."""
    line = {"step": step, "split": split, **tags, "loss": 1.0, "time": 0.0}
    if tags:
        line["tags"] = sorted(tags)
    return json.dumps(line).encode() + b"\n"


# --- lines a resume does not own are kept byte for byte -------------------------------------------


def test_a_resume_keeps_lines_that_are_no_record_byte_for_byte(tmp_path: Path) -> None:
    """A `[1, 2]` line was deleted and a 0xE9 byte (Latin-1 "é") rewritten as U+FFFD: a resume silently
    changed the user's log (the report lists such lines as not read, with their numbers)."""
    ctx = context(tmp_path)
    foreign = [b"[1, 2]\n", b'{"note": "caf\xe9"}\n', b"caf\xe9 au lait\r\n", b"\n", b"42\n"]
    ctx.metrics_file.write_bytes(record(1) + foreign[0] + foreign[1] + record(2) + b"".join(foreign[2:]) + record(3))
    ctx.events().resumed(1)
    lines = ctx.metrics_file.read_bytes().splitlines(keepends=True)
    assert lines[:-1] == [record(1), *foreign]  # step 2 and 3 redone; every other line as it was
    assert json.loads(lines[-1])["split"] == "resume"


def test_a_torn_last_line_is_still_dropped(tmp_path: Path) -> None:
    """The line a kill cut short (or the NUL bytes a power cut leaves in place of unwritten data) goes: the
    next record would be glued to it."""
    for tail in (b'{"step": 3, "split": "tr', b"\x00" * 64, b'[1, 2]{"step": 3, "sp', b'{"note": "caf\xe9'):
        ctx = context(tmp_path)
        ctx.metrics_file.write_bytes(record(1) + b"[1, 2]\n" + record(2) + tail)
        ctx.events().resumed(2)
        lines = ctx.metrics_file.read_bytes().splitlines(keepends=True)
        assert lines[:3] == [record(1), b"[1, 2]\n", record(2)], tail
        assert [r["split"] for r in read_metrics(ctx.metrics_file)] == ["train", "train", "resume"], tail


def test_an_unterminated_last_line_that_is_complete_is_kept(tmp_path: Path) -> None:
    """A complete JSON line missing only its newline (`printf '[1, 2]' >> metrics.jsonl`) is no torn
    record: it is kept, on a line of its own; a complete record of this run is still redone."""
    ctx = context(tmp_path)
    ctx.metrics_file.write_bytes(record(1) + b"[1, 2]")
    ctx.events().resumed(1)
    assert ctx.metrics_file.read_bytes().splitlines(keepends=True)[:2] == [record(1), b"[1, 2]\n"]
    ctx.metrics_file.write_bytes(record(1) + record(2).rstrip(b"\n"))
    ctx.events().resumed(1)
    assert [(r["step"], r["split"]) for r in read_metrics(ctx.metrics_file)] == [(1, "train"), (1, "resume")]


def test_a_line_nested_past_the_recursion_limit_does_not_stop_the_resume(tmp_path: Path) -> None:
    """`[[[[...` (100,000 deep) raised RecursionError out of json.loads: the resume ended in a traceback."""
    ctx = context(tmp_path)
    deep = b"[" * 100_000 + b"]" * 100_000 + b"\n"
    ctx.metrics_file.write_bytes(record(1) + deep + record(2))
    ctx.events().resumed(1)
    assert ctx.metrics_file.read_bytes().splitlines(keepends=True)[:2] == [record(1), deep]


def test_the_first_log_of_a_resumed_stage_keeps_foreign_lines(tmp_path: Path) -> None:
    """The other way in: a stage resumed with no checkpoint left drops its records at the first log."""
    ctx = context(tmp_path, resumed=True)
    ctx.metrics_file.write_bytes(record(1) + b"[1, 2]\n" + b"\xff\xfe\n" + record(2))
    ctx.events().log(1, "train", {"loss": 0.5})
    lines = ctx.metrics_file.read_bytes().splitlines(keepends=True)
    assert lines[:2] == [b"[1, 2]\n", b"\xff\xfe\n"] and json.loads(lines[2])["loss"] == 0.5


def test_an_object_without_a_step_is_no_record(tmp_path: Path) -> None:
    """`{"note": ...}` was read as logged at step 0: the first log of a stage started over, at step 0,
    deleted it (and a `{"step": true}` line, `True >= 0`)."""
    ctx = context(tmp_path, resumed=True)
    ctx.metrics_file.write_bytes(b'{"note": "lr sweep 2"}\n{"step": true}\n' + record(0) + record(1))
    ctx.events().log(0, "dev", {"accuracy": 0.5})
    lines = ctx.metrics_file.read_bytes().splitlines(keepends=True)
    assert lines[:2] == [b'{"note": "lr sweep 2"}\n', b'{"step": true}\n']
    assert [(r["step"], r["split"]) for r in map(json.loads, lines[2:])] == [(0, "dev")]


# --- whose records are redone ------------------------------------------------------------------------


def test_an_untagged_run_keeps_the_records_of_tagged_runs(tmp_path: Path) -> None:
    """`ctx.events()` matched every record (no tag to compare), so resuming a stage's untagged final fit
    deleted the records of its tagged runs (`fold=1`, ...) past the step resumed from; likewise a run
    tagged `task=a` deleted those of `task=a, trial=1`."""
    ctx = context(tmp_path)
    lines = [record(s, fold=1) for s in (1, 2, 3)] + [record(s) for s in (1, 2, 3)]
    lines += [record(s, task="a", trial=1) for s in (1, 2)] + [record(s, task="a") for s in (1, 2)]
    ctx.metrics_file.write_bytes(b"".join(lines))
    ctx.events().resumed(1)
    ctx.events(task="a").resumed(1)
    kept = [
        (r.get("fold"), r.get("task"), r.get("trial"), r["step"], r["split"]) for r in read_metrics(ctx.metrics_file)
    ]
    assert kept == [
        (1, None, None, 1, "train"),
        (1, None, None, 2, "train"),
        (1, None, None, 3, "train"),
        (None, None, None, 1, "train"),
        (None, "a", 1, 1, "train"),
        (None, "a", 1, 2, "train"),
        (None, "a", None, 1, "train"),
        (None, None, None, 1, "resume"),
        (None, "a", None, 1, "resume"),
    ]


def test_records_written_before_the_tag_list_are_still_matched_by_value(tmp_path: Path) -> None:
    """A record of an older xfer has no `tags` list: its run is told by its tag values, as before."""
    ctx = context(tmp_path)
    old = [
        json.dumps({"step": s, "split": "train", "trial": t, "loss": 1.0}).encode() + b"\n"
        for t in (0, 1)
        for s in (1, 2)
    ]
    ctx.metrics_file.write_bytes(b"".join(old))
    ctx.events(trial=0).resumed(1)
    assert [(r["trial"], r["step"], r["split"]) for r in read_metrics(ctx.metrics_file)] == [
        (0, 1, "train"),
        (1, 1, "train"),
        (1, 2, "train"),
        (0, 1, "resume"),
    ]


# --- the rewrite: atomic, a line at a time -----------------------------------------------------------


def test_a_failed_rewrite_leaves_the_log_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill or a full disk in the middle of the rewrite: the old log stays, no temporary file is left
    (a guard: the rewrite went through a temporary file before too)."""
    ctx = context(tmp_path)
    before = record(1) + b"[1, 2]\n" + record(2) + record(3)
    ctx.metrics_file.write_bytes(before)
    replace = os.replace

    def full(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        ctx.events().resumed(1)
    monkeypatch.setattr(os, "replace", replace)
    assert ctx.metrics_file.read_bytes() == before
    assert sorted(p.name for p in ctx.dir.iterdir()) == ["metrics.jsonl"]


def test_the_rewrite_reads_a_line_at_a_time(tmp_path: Path) -> None:
    """A 24 MB log was read whole as text and kept as a list of lines: memory grew with the file."""
    ctx = context(tmp_path)
    big = b"x" * (1 << 20) + b"\n"
    ctx.metrics_file.write_bytes(record(1) + big * 24 + record(2))
    tracemalloc.start()
    try:
        ctx.events().resumed(1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB"
    assert ctx.metrics_file.read_bytes().count(big) == 24


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_names_the_log(tmp_path: Path) -> None:
    """A write that fails on a full disk raises an OSError without a file name: `xfer run` said only
    "error: No space left on device", not which file (on which disk) it could not write."""
    ctx = context(tmp_path)
    ctx.metrics_file.symlink_to("/dev/full")
    with pytest.raises(OSError) as failed:
        ctx.events().log(1, "train", {"loss": 1.0})
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(ctx.metrics_file)


# --- the runner counts a checkpoint renamed aside by a killed re-save ----------------------------------


class Killed(BaseException):
    """A SIGKILL stand-in: nothing after the point it is raised at runs."""


def _killed_resave(checkpoints: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checkpoints at steps 1 and 2 (keep=1: step 1 pruned), then a re-save at step 2 killed after the old
    copy was renamed aside and before the new one was renamed in: no step folder is left, only `.old-step-0000002-<pid>`."""

    def payload(step: int) -> ckpt.CheckpointPayload:
        return ckpt.CheckpointPayload(
            step=step, modules={"model": nn.Linear(2, 2)}, tensors={}, torch_state={}, state={"step": step}
        )

    ckpt.save_checkpoint(checkpoints, payload(1), keep=1)
    ckpt.save_checkpoint(checkpoints, payload(2), keep=1)
    rename = os.rename

    def killed_on_the_new_copy(src: object, dst: object) -> None:
        if Path(src).name.startswith(".tmp-step-"):
            raise Killed
        rename(src, dst)

    with monkeypatch.context() as patched:
        patched.setattr(os, "rename", killed_on_the_new_copy)
        with pytest.raises(Killed):
            ckpt.save_checkpoint(checkpoints, payload(2), keep=1)
    assert [p.name for p in checkpoints.glob("step-*")] == []
    assert (checkpoints / f".old-step-0000002-{os.getpid()}" / "state.json").exists()


@pytest.mark.parametrize("where", ["checkpoints", "trials/glue-rte/trial-0/checkpoints"])
def test_a_checkpoint_renamed_aside_counts_as_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The runner said "running again (its last attempt left no checkpoint to resume from)" while the
    trainer put the copy back and resumed from it."""
    stage = tmp_path / "stage"
    _killed_resave(stage / where, monkeypatch)
    assert _left_progress(stage)
    assert ckpt.load_latest_intact(stage / where) is not None  # what the trainer resumes from


def test_a_partial_save_is_no_progress(tmp_path: Path) -> None:
    """A `.tmp-step-...` folder (a save that never completed) is still not counted."""
    (tmp_path / "checkpoints" / ".tmp-step-0000002-1").mkdir(parents=True)
    (tmp_path / "checkpoints" / ".tmp-step-0000002-1" / "state.json").write_text("{}")
    assert not _left_progress(tmp_path)


# --- bam's report table -------------------------------------------------------------------------------


def test_bam_report_escapes_task_and_metric_names() -> None:
    """A `|` in a task name split its row into one cell too many; a line break in a metric name ended the
    row in the middle (the rest became a line of text under the table)."""
    bam = pytest.importorskip("xfer.bam.stage")
    summary = {"median": 50.0, "mean": 50.0, "std": 0.0}
    results = {
        "my|task": {"main_metric": "f1\nmacro", "summary": {"f1\nmacro": summary}, "runs": [{}]},
        "other": {"main_metric": "acc", "summary": {"acc": summary}, "runs": [{}]},
    }
    entries = {"my|task": {"teacher": {"trial": 0, "seed": 1}, "key": "ab" * 32, "reused": False}}
    text = bam.report(results, entries)
    assert "| my\\|task | f1 macro | 50.00 | 50.00 | 0.00 | 1 |" in text
    assert "| my\\|task | 0 (seed 1) |" in text
    for line in text.splitlines():
        if line.startswith("|"):
            cells = line.replace("\\|", "").count("|") - 1
            assert cells in (4, 6), line

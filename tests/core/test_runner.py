"""Run directories: skip completed stages, redo changed ones and their dependents, refuse a
changed recipe unless --fork/--force, lifecycle hooks, reports and `xfer status`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.errors import RunDirError
from xfer.core.hookspecs import hookimpl
from xfer.core.plugins import set_default_host
from xfer.testing import make_host, output_tensors, run_recipe_file, write_recipe

from .recipes import CHAIN


class Recorder:
    """A plugin that records every lifecycle hook call."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    @hookimpl
    def xfer_stage_start(self, stage: str, kind: str, resumed: bool) -> None:
        self.events.append(("start", stage, kind, resumed))

    @hookimpl
    def xfer_stage_finish(self, stage: str, status: str, outputs: dict) -> None:
        self.events.append(("finish", stage, status, sorted(outputs)))

    @hookimpl
    def xfer_metrics_logged(self, stage: str, step: int, split: str, metrics: dict) -> None:
        self.events.append(("metrics", stage, step, split))

    @hookimpl
    def xfer_checkpoint_saved(self, stage: str, step: int, path: Path) -> None:
        assert (path / "state.json").exists(), "hook fires only for complete checkpoints"
        self.events.append(("checkpoint", stage, step))


def host_with(recorder: Recorder | None = None):
    host = make_host(["xfer.testing.plugin"])
    if recorder is not None:
        host.add_object(recorder, "recorder")
    return host


def stage_times(run: Path) -> dict[str, float]:
    return {s: json.loads((run / s / "stage.json").read_text())["started"] for s in ("corpus", "first", "second")}


def test_lifecycle_hooks_and_run_layout(tmp_path: Path) -> None:
    recorder = Recorder()
    recipe = write_recipe(tmp_path, CHAIN)
    result = run_recipe_file(recipe, tmp_path / "run", host_with(recorder))
    assert [(s.name, s.action) for s in result.stages] == [("corpus", "ran"), ("first", "ran"), ("second", "ran")]
    starts = [e for e in recorder.events if e[0] == "start"]
    assert starts == [
        ("start", "corpus", "toy.corpus", False),
        ("start", "first", "testing.fit", False),
        ("start", "second", "testing.fit", False),
    ]
    assert ("finish", "second", "completed", ["model"]) in recorder.events
    assert [e for e in recorder.events if e[:2] == ("checkpoint", "first")] == [
        ("checkpoint", "first", 3),
        ("checkpoint", "first", 6),
    ]
    assert ("metrics", "first", 2, "train") in recorder.events and ("metrics", "first", 6, "dev") in recorder.events
    run = tmp_path / "run"
    for name in (
        "recipe.resolved.yaml",
        "environment.json",
        "first/stage.json",
        "first/metrics.jsonl",
        "first/report.md",
    ):
        assert (run / name).exists(), name
    assert (run / "first/plots/train-loss.png").stat().st_size > 1000
    assert "![train loss](plots/train-loss.png)" in (run / "first/report.md").read_text()
    assert (run / "corpus/outputs/text/toy.txt").read_text().count("\n") >= 50


def test_rerun_skips_and_changes_propagate(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, CHAIN)
    run = tmp_path / "run"
    host = host_with()
    run_recipe_file(recipe, run, host)
    before = stage_times(run)
    again = run_recipe_file(recipe, run, host)
    assert [s.action for s in again.stages] == ["skipped"] * 3
    assert stage_times(run) == before

    # A changed recipe is refused with a key-level diff...
    with pytest.raises(RunDirError) as refused:
        run_recipe_file(recipe, run, host, ["stages.first.train.lr=0.02"])
    assert "~ stages.first.train.lr: 0.01 -> 0.02" in str(refused.value)
    assert "--fork" in str(refused.value) and "--force" in str(refused.value)

    # ...--fork runs it in a copy, reusing the unchanged stage and redoing first + its dependent
    forked = run_recipe_file(recipe, run, host, ["stages.first.train.lr=0.02"], fork=tmp_path / "fork")
    assert [(s.name, s.action) for s in forked.stages] == [("corpus", "skipped"), ("first", "ran"), ("second", "ran")]
    assert stage_times(run) == before, "the original run is untouched"
    original, changed = output_tensors(run, "second"), output_tensors(tmp_path / "fork", "second")
    assert any(not (original[k] == changed[k]).all() for k in original)

    # --force changes in place: only the changed stage and what depends on it run again
    forced = run_recipe_file(recipe, run, host, ["stages.second.train.lr=0.02"], force=True)
    assert [(s.name, s.action) for s in forced.stages] == [
        ("corpus", "skipped"),
        ("first", "skipped"),
        ("second", "ran"),
    ]


def test_status_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = write_recipe(tmp_path, CHAIN)
    run_recipe_file(recipe, tmp_path / "run", host_with())
    set_default_host(host_with())
    try:
        assert cli.main(["status", str(tmp_path / "run")]) == 0
        out = capsys.readouterr().out
        assert "first" in out and "completed" in out and "step-0000006" in out
        assert cli.main(["status", str(tmp_path / "run"), "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [r["status"] for r in rows] == ["completed"] * 3
        assert cli.main(["status", str(tmp_path)]) == 2
        assert "not a run directory" in capsys.readouterr().err
    finally:
        set_default_host(None)


def test_failed_stage_is_recorded_and_rerun(tmp_path: Path) -> None:
    recipe = write_recipe(
        tmp_path,
        CHAIN.replace(
            "task: {name: toy/agreement, train_size: 160, dev_size: 32}\n    train: {steps: 4",
            "task: {name: toy/pos, train_size: 16, dev_size: 8}\n    train: {steps: 4",
        ),
    )
    with pytest.raises(Exception, match=r"testing\.fit trains sentence tasks; toy/pos is a tagging task"):
        run_recipe_file(recipe, tmp_path / "run", host_with())
    state = json.loads((tmp_path / "run/second/stage.json").read_text())
    assert state["status"] == "failed" and "tagging task" in state["error"]
    assert "error" in (tmp_path / "run/second/report.md").read_text()

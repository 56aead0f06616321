"""Hostile review of run directories: locks, fingerprints, stage records (h182)."""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from xfer.core import cli
from xfer.core.config import ExistingPath, Input, knob
from xfer.core.errors import RunDirError
from xfer.core.hookspecs import hookimpl
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs import runlock
from xfer.core.specs import ComponentSpec
from xfer.core.toy.stage import ToyCorpusConfig
from xfer.testing import make_host, write_recipe

from .recipes import testing_host  # noqa: F401  (autouse: the testing plugin as the default host)

CORPUS = "name: c\nstages:\n  c: {kind: toy.corpus, sentences: 5}\n"


def _no_locks(monkeypatch: pytest.MonkeyPatch, number: int = errno.ENOSYS) -> None:
    """flock as on Lustre mounted without `flock` (ENOSYS) or NFS without its lock daemon (ENOLCK)."""

    def flock(fd: int, operation: int) -> None:
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(fcntl, "flock", flock)


@pytest.mark.parametrize("number", [errno.ENOSYS, errno.ENOLCK])
def test_a_filesystem_without_file_locks_is_refused_by_name_not_with_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], number: int
) -> None:
    """flock's OSError there was no BlockingIOError: `xfer run` ended in a traceback from fcntl."""
    _no_locks(monkeypatch, number)
    run_dir = tmp_path / "run"
    with pytest.raises(RunDirError, match=r"does not support file locks.*--run-dir on a local disk"):
        runlock.RunLock(run_dir).acquire()
    recipe = write_recipe(tmp_path, CORPUS)
    assert cli.main(["run", str(recipe), "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"{run_dir / runlock.LOCK_FILE}: its filesystem does not support file locks" in err
    assert not (run_dir / "c").exists(), "no stage ran without the lock"


def test_status_and_fork_read_a_run_directory_on_a_filesystem_without_locks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No run can hold a lock there, so `xfer status` (and a fork's source) see no owner instead of a traceback."""
    recipe = write_recipe(tmp_path, CORPUS)
    run_dir = tmp_path / "run"
    assert cli.main(["run", str(recipe), "--run-dir", str(run_dir)]) == 0  # made where locks work
    capsys.readouterr()
    _no_locks(monkeypatch)
    assert runlock.holder(run_dir) is None
    runlock.check_free(run_dir)
    with runlock.no_writer(run_dir, "fork it"):
        pass
    assert cli.main(["status", str(run_dir)]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "completed" in out.out


def test_a_kill_while_a_redone_stage_is_cleared_does_not_leave_it_skipped_as_pruned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A completed stage whose output was modified runs again from scratch: its folder is removed first.
    `rmtree` removes files in directory order, so a kill part-way could leave stage.json ("completed",
    same fingerprint) with outputs gone: the next run took them as pruned on purpose and skipped the
    stage it had just decided to redo, and its readers failed on the missing files."""
    from xfer.core.runs import runner
    from xfer.testing import run_recipe_file

    host = make_host()
    recipe = write_recipe(tmp_path, CORPUS)
    run_dir = tmp_path / "run"
    run_recipe_file(recipe, run_dir, host)
    text = run_dir / "c" / "outputs" / "text" / "toy.txt"
    made = text.read_text()
    text.write_text(made[:10])  # truncated behind the run's back

    real_rmtree = shutil.rmtree

    def killed_part_way(path: Path, *args: object, **kwargs: object) -> None:
        real_rmtree(Path(path) / "outputs")  # the files the directory order reached first
        raise KeyboardInterrupt("killed while clearing")

    monkeypatch.setattr(runner.shutil, "rmtree", killed_part_way)
    with pytest.raises(KeyboardInterrupt):
        run_recipe_file(recipe, run_dir, host)
    monkeypatch.setattr(runner.shutil, "rmtree", real_rmtree)

    result = run_recipe_file(recipe, run_dir, host)
    assert [(s.name, s.action) for s in result.stages] == [("c", "ran")]
    assert text.read_text() == made


@dataclass
class _GrowConfig(ToyCorpusConfig):
    source: Input | None = knob(None, "The corpus it reads (a stage output).", takes=("text",))
    trials: int = knob(1, "Seeds.")
    data: ExistingPath | None = knob(None, "A file it reads.")


class _GrowPlugin:
    """A stage with trials that may grow; `edit` (when set) is rewritten once it has started."""

    def __init__(self, edit: Path | None = None) -> None:
        self.edit = edit

    @hookimpl
    def xfer_stages(self) -> list[ComponentSpec]:
        spec = ComponentSpec(
            "stage", "grow.corpus", "xfer.core.toy.stage:run_corpus", "1", _GrowConfig, outputs=("text",)
        )
        return [dataclasses.replace(spec, growable=("trials",))]

    @hookimpl
    def xfer_stage_start(self, stage: str) -> None:
        if self.edit is not None and stage == "b":
            self.edit.write_text("edited while the stage ran\n")


GROW = """\
name: g
stages:
  a: {kind: toy.corpus, sentences: 5}
  b: {kind: grow.corpus, sentences: 5, source: a.text, trials: TRIALS}
"""


def test_status_does_not_promise_kept_trials_to_a_stage_the_run_will_redo_from_scratch(tmp_path: Path) -> None:
    """A grown stage whose upstream runs again from scratch (its output was edited) is marked invalidated
    by the runner and runs afresh, its finished trials dropped; `xfer status` said "resumes with more
    trials: what it finished is kept"."""
    from xfer.core.runs.runner import read_status
    from xfer.testing import run_recipe_file

    host = make_host()
    host.add_object(_GrowPlugin(), "grow")
    run_dir = tmp_path / "run"
    run_recipe_file(write_recipe(tmp_path, GROW.replace("TRIALS", "1")), run_dir, host)
    (run_dir / "a" / "outputs" / "text" / "toy.txt").write_text("edited behind the run's back\n")
    grown = write_recipe(tmp_path, GROW.replace("TRIALS", "2"), "grown.yaml")
    resolved = load_recipe(grown, (), host).resolved()  # the run directory as `--force` leaves it, before it runs
    (run_dir / "recipe.resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))

    rows = {row["stage"]: row for row in read_status(run_dir, host)}
    because = " ".join(rows["b"]["reruns_because"])
    assert "what it finished is kept" not in because
    assert "upstream stage 'a'" in because
    result = run_recipe_file(grown, run_dir, host)
    assert [(s.name, s.action) for s in result.stages] == [("a", "ran"), ("b", "ran")], "b runs afresh, not grown"


@dataclass
class _ReadsConfig(ToyCorpusConfig):
    data: ExistingPath | None = knob(None, "A file it reads.")


class _FailingReader:
    """A stage that reads `data` and fails (it never writes its declared output `more`), and a hook that
    edits `data` once the stage has started, after its fingerprint was taken."""

    def __init__(self, edit: Path | None) -> None:
        self.edit = edit

    @hookimpl
    def xfer_stages(self) -> list[ComponentSpec]:
        return [
            ComponentSpec(
                "stage", "reads.corpus", "xfer.core.toy.stage:run_corpus", "1", _ReadsConfig, outputs=("text", "more")
            )
        ]

    @hookimpl
    def xfer_stage_start(self, stage: str) -> None:
        if self.edit is not None:
            self.edit.write_text("edited while the stage ran\n")


def test_an_input_edited_during_a_failed_attempt_and_put_back_is_not_resumed_from(tmp_path: Path) -> None:
    """An input file edited while a stage ran, put back before the next `xfer run`, let that run resume from
    the checkpoints of the attempt that read the edit: only a completed stage was checked (a stage that
    streams its data, stopped by Ctrl-C or failing, then had part of the edit in its weights)."""
    from xfer.core.errors import PluginError
    from xfer.core.runs.runner import read_state, run_recipe, stale_reasons

    data = tmp_path / "data.txt"
    data.write_text("the original\n")
    recipe_file = write_recipe(tmp_path, f"name: r\nstages:\n  s: {{kind: reads.corpus, sentences: 5, data: {data}}}\n")
    run_dir = tmp_path / "run"
    host = make_host()
    plugin = _FailingReader(edit=data)
    host.add_object(plugin, "reads")
    recipe = load_recipe(recipe_file, (), host)
    with pytest.raises(PluginError, match="did not write its declared outputs"):
        run_recipe(recipe, run_dir, host=host, log=lambda *a: None)
    state = read_state(run_dir / "s" / "stage.json")
    assert state["status"] == "failed" and "data.txt changed" in " ".join(state["inputs_changed_while_running"])

    data.write_text("the original\n")  # put back: the fingerprint is the first attempt's again
    plugin.edit = None
    assert any("changed while it ran" in reason for reason in stale_reasons(run_dir, host)["s"])
    said: list[str] = []
    with pytest.raises(PluginError):
        run_recipe(recipe, run_dir, host=host, log=said.append)
    assert any("[s] runs again: its input files changed while it ran" in line for line in said), said
    assert not any("resuming" in line for line in said), said


def test_a_grown_stage_whose_outputs_were_modified_runs_afresh_instead_of_keeping_them(tmp_path: Path) -> None:
    """Raising `trials` resumes a completed stage in place, its finished trials' outputs kept: an output
    edited or truncated since it completed was kept too, and recorded as the stage's own when it
    completed again (the check of modified outputs applied to an unchanged fingerprint only)."""
    from xfer.core.runs.runner import stale_reasons
    from xfer.testing import run_recipe_file

    host = make_host()
    host.add_object(_GrowPlugin(), "grow")
    run_dir = tmp_path / "run"
    run_recipe_file(write_recipe(tmp_path, GROW.replace("TRIALS", "1")), run_dir, host)
    text = run_dir / "b" / "outputs" / "text" / "toy.txt"
    made = text.read_text()
    text.write_text(made[:10])  # truncated behind the run's back
    grown = write_recipe(tmp_path, GROW.replace("TRIALS", "2"), "grown.yaml")
    resolved = load_recipe(grown, (), host).resolved()  # the run directory as `--force` leaves it, before it runs
    (run_dir / "recipe.resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))

    because = " ".join(stale_reasons(run_dir, host)["b"])
    assert "outputs/text/toy.txt was modified after the stage completed" in because
    assert "what it finished is kept" not in because
    result = run_recipe_file(grown, run_dir, host)
    assert [(s.name, s.action) for s in result.stages] == [("a", "skipped"), ("b", "ran")]
    assert text.read_text() == made


def test_a_grown_stage_that_read_an_input_edited_while_it_ran_runs_afresh(tmp_path: Path) -> None:
    """A completed stage whose input was edited while it ran (and put back since) runs afresh on the next
    run; raising its `trials` instead resumed it in place, keeping the trials built partly from the edit
    (the check applied to an unchanged fingerprint only)."""
    from xfer.core.runs.runner import read_state
    from xfer.testing import run_recipe_file

    data = tmp_path / "data.txt"
    data.write_text("the original\n")
    text = GROW.replace("trials: TRIALS}", f"trials: TRIALS, data: {data}}}")
    host = make_host()
    plugin = _GrowPlugin(edit=data)
    host.add_object(plugin, "grow")
    run_dir = tmp_path / "run"
    run_recipe_file(write_recipe(tmp_path, text.replace("TRIALS", "1")), run_dir, host)
    assert read_state(run_dir / "b" / "stage.json").get("inputs_changed_while_running")
    data.write_text("the original\n")  # put back
    plugin.edit = None

    result = run_recipe_file(write_recipe(tmp_path, text.replace("TRIALS", "2")), run_dir, host, force=True)
    assert [(s.name, s.action) for s in result.stages] == [("a", "skipped"), ("b", "ran")]

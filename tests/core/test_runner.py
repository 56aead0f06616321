"""Run directories: skip completed stages, redo changed ones and their dependents, refuse a
changed recipe unless --fork/--force, lifecycle hooks, reports and `xfer status`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.errors import PluginError, RunDirError, UserError
from xfer.core.hookspecs import hookimpl
from xfer.core.plugins import PluginHost, set_default_host
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs import runlock
from xfer.core.runs.runlock import RunLock
from xfer.core.runs.runner import read_status, run_recipe, stale_reasons
from xfer.core.specs import ComponentSpec
from xfer.testing import assert_same_weights, make_host, output_tensors, run_recipe_file, write_recipe

from .recipes import CHAIN, FIT


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


def test_lifecycle_hooks_and_run_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XFER_REPORT_PLOTS", "1")  # the test session's default is off (conftest.py)
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


def test_fork_inside_or_around_its_run_dir_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, CHAIN)
    run = tmp_path / "run"
    host = host_with()
    run_recipe_file(recipe, run, host, only={"corpus"})
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for source, target in ((run, run / "fork"), (run, run), (run / "sub", run)):
        with pytest.raises(RunDirError, match="must be a new directory outside"):
            run_recipe_file(recipe, source, host, fork=target)
    (tmp_path / "a-file").write_text("")
    with pytest.raises(RunDirError, match=r"--fork target .*a-file is a file; give a new directory"):
        run_recipe_file(recipe, run, host, fork=tmp_path / "a-file")
    (tmp_path / "a-file").unlink()
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_run_dir_being_written_is_not_forked(tmp_path: Path) -> None:
    """A copy taken mid-run could pair a stage.json with checkpoints of another moment."""
    recipe = write_recipe(tmp_path, CHAIN)
    run = tmp_path / "run"
    host = host_with()
    run_recipe_file(recipe, run, host, only={"corpus"})
    in_use = r"is in use by pid \d+ .*fork it to .* once that run has finished"
    with RunLock(run), pytest.raises(RunDirError, match=in_use):  # another `xfer run` writing it
        run_recipe_file(recipe, run, host, ["stages.first.train.lr=0.02"], fork=tmp_path / "fork")
    assert not (tmp_path / "fork" / "recipe.resolved.yaml").exists()
    forked = run_recipe_file(recipe, run, host, ["stages.first.train.lr=0.02"], fork=tmp_path / "fork", only={"corpus"})
    assert [(s.name, s.action) for s in forked.stages] == [("corpus", "skipped")], "the same fork works once it ends"


def test_a_folder_xfer_did_not_make_is_refused_as_run_dir_and_left_untouched(tmp_path: Path) -> None:
    """`--run-dir ~` with a stage named like one of its folders must not replace that folder."""
    recipe = write_recipe(tmp_path, CHAIN)
    home = tmp_path / "home"
    (home / "corpus").mkdir(parents=True)
    (home / "corpus" / "notes.txt").write_text("mine")
    host = host_with()
    for fork in (None, tmp_path / "copy"):
        with pytest.raises(RunDirError, match="is not empty and is not an xfer run directory"):
            run_recipe_file(recipe, home, host, fork=fork)
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == ["corpus", "corpus/notes.txt"]
    assert not (tmp_path / "copy").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert [s.action for s in run_recipe_file(recipe, empty, host, only={"corpus"}).stages] == ["ran"]


def test_a_run_starting_in_a_new_folder_refuses_a_second_with_its_pid_not_as_foreign(tmp_path: Path) -> None:
    """Two `xfer run` started at once on a new folder: the second saw the first's files before its
    recipe.resolved.yaml and called the folder "not an xfer run directory"."""
    recipe = write_recipe(tmp_path, CHAIN)
    run = tmp_path / "run"
    run.mkdir()
    with RunLock(run):  # the first run, between taking the lock and writing its recipe
        (run / "environment.json").write_text("{}")
        with pytest.raises(RunDirError, match=r"is in use by pid \d+"):
            run_recipe_file(recipe, run, host_with())


@pytest.mark.parametrize("damage", ["truncate", "empty", "list", "syntax"])
def test_a_damaged_resolved_recipe_is_named_and_force_rewrites_it(tmp_path: Path, damage: str) -> None:
    """It was read as-is: `xfer status` printed an empty table, `xfer run` a diff of the whole file."""
    recipe = write_recipe(tmp_path, CHAIN)
    run = tmp_path / "run"
    host = host_with()
    run_recipe_file(recipe, run, host, only={"corpus"})
    resolved = run / "recipe.resolved.yaml"
    text = resolved.read_text()
    damaged = {"truncate": text[: text.index("corpus") + 4], "empty": "", "list": "- 1\n", "syntax": "stages: [\n"}
    resolved.write_text(damaged[damage])
    with pytest.raises(RunDirError, match=r"recipe\.resolved\.yaml is (damaged|unreadable).*--force") as refused:
        run_recipe_file(recipe, run, host, only={"corpus"})
    with pytest.raises(UserError, match=r"recipe\.resolved\.yaml is (damaged|unreadable)") as unreadable:
        read_status(run, host)
    assert "\n" not in str(refused.value) + str(unreadable.value), "one line, as every error of the CLI"
    forced = run_recipe_file(recipe, run, host, only={"corpus"}, force=True)
    assert [(s.name, s.action) for s in forced.stages] == [("corpus", "skipped")], "its stage.json still counts"
    assert resolved.read_text() == text


def _completed_chain(tmp_path: Path) -> tuple[Path, Path, object]:
    """(recipe file, run directory, host) of the CHAIN recipe run to completion."""
    recipe = write_recipe(tmp_path, CHAIN)
    run = tmp_path / "run"
    host = host_with()
    run_recipe_file(recipe, run, host)
    return recipe, run, host


def test_outputs_changed_after_completion_rerun_their_stage_and_every_reader(tmp_path: Path) -> None:
    recipe, run, host = _completed_chain(tmp_path)
    weights = sorted((run / "first/outputs/model").rglob("*.safetensors"))[0]
    name = weights.relative_to(run / "first/outputs").as_posix()
    written = weights.read_bytes()
    trained_second = output_tensors(run, "second")
    weights.write_bytes(written[: len(written) // 2])  # truncated behind the run's back

    reasons = stale_reasons(run, host)
    assert reasons["first"] == [f"outputs/{name} was modified after the stage completed"]
    assert reasons["second"] == ["upstream stage 'first', which it read, runs again first"]
    assert reasons["corpus"] == []
    assert [r["status"] for r in read_status(run, host)] == ["completed", "stale", "stale"]

    said: list[str] = []
    again = run_recipe(load_recipe(recipe, [], host), run, host=host, log=said.append)
    assert [(s.name, s.action) for s in again.stages] == [("corpus", "skipped"), ("first", "ran"), ("second", "ran")]
    assert f"[first] runs again: outputs/{name} was modified after the stage completed" in said
    assert weights.read_bytes() == written, "the stage wrote its outputs again"
    assert_same_weights(output_tensors(run, "second"), trained_second)
    assert [s.action for s in run_recipe_file(recipe, run, host).stages] == ["skipped"] * 3


def test_readers_of_changed_outputs_stay_marked_until_they_ran_again(tmp_path: Path) -> None:
    """The mark is written before the changed stage runs again: a run cut short after it (here
    `--only first`) still leaves `second` to run afresh, although `first` is then up to date."""
    recipe, run, host = _completed_chain(tmp_path)
    for file in (run / "first/outputs/model").rglob("*.safetensors"):
        file.write_bytes(b"\0" * file.stat().st_size)  # same size, other bytes

    assert [s.action for s in run_recipe_file(recipe, run, host, only={"first"}).stages] == ["ran"]
    assert [r["status"] for r in read_status(run, host)] == ["completed", "completed", "invalidated"]
    later = run_recipe_file(recipe, run, host)
    assert [(s.name, s.action) for s in later.stages] == [
        ("corpus", "skipped"),
        ("first", "skipped"),
        ("second", "ran"),
    ]
    assert [r["status"] for r in read_status(run, host)] == ["completed"] * 3


def test_output_files_deleted_on_purpose_are_noted_not_remade(tmp_path: Path) -> None:
    """Deleting outputs that nothing needs any more (BAM's teacher models) must not cost a re-run."""
    recipe, run, host = _completed_chain(tmp_path)
    weights = sorted((run / "first/outputs/model").rglob("*.safetensors"))[0]
    weights.unlink()
    notes: dict[str, list[str]] = {}
    assert stale_reasons(run, host, notes) == {"corpus": [], "first": [], "second": []}
    assert list(notes) == ["first"] and "1 of its output files was deleted" in notes["first"][0]
    assert next(r for r in read_status(run, host) if r["stage"] == "first")["notes"] == notes["first"], "xfer status"
    said: list[str] = []
    again = run_recipe(load_recipe(recipe, [], host), run, host=host, log=said.append)
    assert [s.action for s in again.stages] == ["skipped"] * 3
    note = next(line for line in said if line.startswith("[first] up to date, skipped;"))
    assert (
        f"1 of its output files was deleted since it completed ({weights.relative_to(run / 'first').as_posix()})"
        in note
    )


def test_a_stage_json_without_fingerprint_runs_again_and_so_do_its_readers(tmp_path: Path) -> None:
    """A hand-edited or foreign stage.json is no record of what ran: `xfer status` and `xfer run`
    (one shared verdict) both treat the stage as lost, readers included."""
    recipe, run, host = _completed_chain(tmp_path)
    stage_json = (run / "first/stage.json").read_text()
    (run / "first/stage.json").write_text(stage_json[: len(stage_json) // 2])  # truncated: said nothing before
    assert stale_reasons(run, host)["first"] == ["its stage.json is unreadable (truncated or not a JSON object)"]
    (run / "first/stage.json").write_text('{"status": "completed"}')
    reasons = stale_reasons(run, host)
    assert reasons["first"] == ["its stage.json records no fingerprint"]
    assert reasons["second"] == ["upstream stage 'first', which it read, runs again first"]
    said: list[str] = []
    again = run_recipe(load_recipe(recipe, [], host), run, host=host, log=said.append)
    assert [(s.name, s.action) for s in again.stages] == [("corpus", "skipped"), ("first", "ran"), ("second", "ran")]
    assert "[first] runs again: its stage.json records no fingerprint" in said
    assert (
        "[second] runs again: upstream stage 'first' ran again from scratch: its stage.json was missing or unreadable"
        in said
    )
    assert not any(stale_reasons(run, host).values())


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("status", 3, "status is int 3, expected str"),
        ("fingerprint", 5, "fingerprint is int 5, expected str"),
        ("started", "yesterday", 'started is str "yesterday", expected int or float'),
        ("earlier_attempts", [{"started": 1.0}], "earlier_attempts[0].finished is missing"),
        ("signature", {"config": {}, "inputs": [2]}, "signature.inputs is not an object"),
        ("output_files", {"model/model.safetensors": 5}, "output_files['model/model.safetensors'] is not a sha256"),
    ],
)
def test_a_stage_json_field_of_the_wrong_type_runs_the_stage_again_with_its_readers(
    tmp_path: Path, field: str, value: object, why: str
) -> None:
    """A hand-edited stage.json with a valid JSON but a wrong type used to stop `xfer run` and
    `xfer status` with a TypeError at every re-run (or, for the fingerprint, re-run the stage
    without its readers): it is no record of what ran, like one without a fingerprint."""
    recipe, run, host = _completed_chain(tmp_path)
    state = json.loads((run / "first/stage.json").read_text())
    (run / "first/stage.json").write_text(json.dumps({**state, field: value}))
    assert why in stale_reasons(run, host)["first"][0]
    assert [r["stage"] for r in read_status(run, host)] == ["corpus", "first", "second"]
    said: list[str] = []
    again = run_recipe(load_recipe(recipe, [], host), run, host=host, log=said.append)
    assert [(s.name, s.action) for s in again.stages] == [("corpus", "skipped"), ("first", "ran"), ("second", "ran")]
    assert any(line.startswith("[first] runs again: its stage.json is malformed (") for line in said)
    assert not any(stale_reasons(run, host).values())


def test_a_stage_folder_deleted_runs_again_and_so_do_its_readers(tmp_path: Path) -> None:
    recipe, run, host = _completed_chain(tmp_path)
    shutil.rmtree(run / "first")
    assert stale_reasons(run, host)["second"] == ["upstream stage 'first', which it read, runs again first"]
    said: list[str] = []
    again = run_recipe(load_recipe(recipe, [], host), run, host=host, log=said.append)
    assert [(s.name, s.action) for s in again.stages] == [("corpus", "skipped"), ("first", "ran"), ("second", "ran")]
    assert (
        "[second] runs again: upstream stage 'first' ran again from scratch: its stage.json was missing or unreadable"
        in said
    )


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
    said: list[str] = []
    with pytest.raises(Exception, match="tagging task"):
        run_recipe(load_recipe(recipe, [], host_with()), tmp_path / "run", host=host_with(), log=said.append)
    assert "[second] running testing.fit again (its last attempt left no checkpoint to resume from)" in said


# --- runs you can trust: damaged checkpoints, the run lock, interrupted stages, import failures ---

FIT_KEEP_2 = FIT.replace("checkpoint_every: 5}", "checkpoint_every: 5, keep_checkpoints: 2}")


def test_truncated_newest_checkpoint_resumes_from_the_previous_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = write_recipe(tmp_path, FIT_KEEP_2)
    run_recipe_file(recipe, tmp_path / "reference", host_with())
    expected = output_tensors(tmp_path / "reference", "fit")

    run = tmp_path / "run"
    run_recipe_file(recipe, run, host_with())
    # as if killed right after the last checkpoint, whose weights file was then cut short
    state = json.loads((run / "fit/stage.json").read_text())
    state.update(status="running")
    del state["finished"]
    (run / "fit/stage.json").write_text(json.dumps(state))
    checkpoints = run / "fit/checkpoints"
    assert sorted(p.name for p in checkpoints.glob("step-*")) == ["step-0000020", "step-0000024"]
    weights = checkpoints / "step-0000024/model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with open(run / "fit/metrics.jsonl", "a") as log:
        log.write('{"step": 25, "split": "tr')  # the kill also tore the log's last line
    capsys.readouterr()

    resumed = run_recipe_file(recipe, run, host_with())
    assert [s.action for s in resumed.stages] == ["resumed"]
    err = capsys.readouterr().err
    assert "checkpoint step 24 is damaged" in err and str(weights) in err
    assert f"resuming from step 20 ({checkpoints / 'step-0000020'})" in err
    (moved,) = checkpoints.glob("corrupt-step-0000024-*")
    assert f"moved to {moved}" in err
    assert_same_weights(expected, output_tensors(run, "fit"))
    resume_lines = [json.loads(line) for line in (run / "fit/metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in resume_lines if r["split"] == "resume"] == [20]
    assert [r["step"] for r in resume_lines if r["split"] == "train"] == list(range(1, 25))


def test_a_stage_resumed_without_an_intact_checkpoint_logs_each_step_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Killed at step 7 with its only checkpoint then damaged: the re-run trains from step 0. The
    killed attempt's records of steps 1-7 used to stay in metrics.jsonl (every step twice in the
    report's curves), and the line the kill tore swallowed the new step 1."""
    recipe = write_recipe(tmp_path, FIT)
    run = tmp_path / "run"
    run_recipe_file(recipe, run, host_with())
    expected = [json.loads(line) for line in (run / "fit/metrics.jsonl").read_text().splitlines()]
    state = json.loads((run / "fit/stage.json").read_text())
    state.update(status="running")
    del state["finished"]
    (run / "fit/stage.json").write_text(json.dumps(state))
    shutil.rmtree(run / "fit/checkpoints")  # as if killed at step 7, before the step-5 checkpoint was safe
    (run / "fit/checkpoints").mkdir()
    (run / "fit/checkpoints/latest").write_text("step-0000005\n")
    lines = (run / "fit/metrics.jsonl").read_text().splitlines()[:7]
    (run / "fit/metrics.jsonl").write_text("\n".join(lines) + '\n{"step": 8, "split": "tr')

    again = run_recipe_file(recipe, run, host_with())
    assert [s.action for s in again.stages] == ["resumed"]
    records = [json.loads(line) for line in (run / "fit/metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["split"]) for r in records] == [(r["step"], r["split"]) for r in expected]


def test_unreadable_stage_json_starts_the_stage_afresh(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, FIT)
    run = tmp_path / "run"
    run_recipe_file(recipe, run, host_with())
    (run / "fit/stage.json").write_text('{"status": "runn')  # torn by a crash of an older version
    [row] = read_status(run, host_with())
    assert row["status"] == "damaged", "not `pending`, as if it had never run"
    assert row["reruns_because"] == ["its stage.json is unreadable (truncated or not a JSON object)"]
    again = run_recipe_file(recipe, run, host_with())
    assert [s.action for s in again.stages] == ["ran"]
    lines = (run / "fit/metrics.jsonl").read_text().splitlines()
    assert not any('"resume"' in line for line in lines), "the runner said fresh: the trainer did not resume"
    assert json.loads((run / "fit/stage.json").read_text())["status"] == "completed"


def test_second_run_on_a_locked_run_dir_is_refused(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, CHAIN)
    run = tmp_path / "run"
    with RunLock(run):  # another `xfer run` (flock conflicts between open files, even in one process)
        with pytest.raises(RunDirError, match=rf"run directory {run} is in use by pid {os.getpid()} on .* \(started "):
            run_recipe_file(recipe, run, host_with())
        assert not (run / "recipe.resolved.yaml").exists(), "refused before touching anything"
    result = run_recipe_file(recipe, run, host_with())
    assert [s.action for s in result.stages] == ["ran"] * 3
    assert runlock.holder(run) is None, "released when the run ends"


def fake_run(run: Path, status: str) -> None:
    (run / "fine").mkdir(parents=True)
    (run / "recipe.resolved.yaml").write_text("name: x\nstages:\n  fine: {kind: transformer.finetune}\n")
    (run / "fine/stage.json").write_text(json.dumps({"status": status, "fingerprint": "ab" * 32, "started": 1.0}))
    for task, trial, step in (("glue-rte", 0, 400), ("glue-rte", 1, 200)):
        checkpoints = run / "fine/trials" / task / f"trial-{trial}" / "checkpoints"
        (checkpoints / f"step-{step:07d}").mkdir(parents=True)
        (checkpoints / f"step-{step:07d}" / "state.json").write_text("{}")
        (checkpoints / "latest").write_text(f"step-{step:07d}\n")


def test_status_shows_interrupted_for_a_dead_owner_and_trial_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    fake_run(run, "running")
    set_default_host(host_with())
    try:
        assert cli.main(["status", str(run), "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        assert row["status"] == "interrupted", "stage.json says running but nobody holds the lock"
        assert row["trial_checkpoints"] == [
            {"run": "trials/glue-rte/trial-0", "checkpoint": "step-0000400"},
            {"run": "trials/glue-rte/trial-1", "checkpoint": "step-0000200"},
        ]
        with RunLock(run):
            assert cli.main(["status", str(run)]) == 0
            out = capsys.readouterr().out
        assert " running " in out and "interrupted" not in out
        assert "checkpoint: trials/glue-rte/trial-0: step-0000400" in out
        assert "checkpoint: trials/glue-rte/trial-1: step-0000200" in out
        # a garbage pointer is not shown as a checkpoint name: the one a resume would take is
        (run / "fine/trials/glue-rte/trial-0/checkpoints/latest").write_text("garbage-pointer\n")
        assert cli.main(["status", str(run)]) == 0
        assert "checkpoint: trials/glue-rte/trial-0: step-0000400" in capsys.readouterr().out
        (run / "recipe.resolved.yaml").write_text("stages: [unclosed\n")
        assert cli.main(["status", str(run)]) == 2
        assert "recipe.resolved.yaml is unreadable" in capsys.readouterr().err
    finally:
        set_default_host(None)


class BrokenStage:
    """A plugin whose stage's module imports at validation and fails when the stage runs
    (a target that never imports is refused by recipe validation, before any stage)."""

    @hookimpl
    def xfer_stages(self) -> list[ComponentSpec]:
        return [
            ComponentSpec("stage", "broken.fit", "xfer.testing.bow:run_fit", "1", "xfer.testing.bow:FitConfig", "x")
        ]


def test_stage_import_failure_marks_the_stage_failed_and_fires_the_finish_hook(tmp_path: Path, monkeypatch) -> None:
    recorder = Recorder()
    host = host_with(recorder)
    host.add_object(BrokenStage(), "broken")
    real_load = host.load

    def load(kind: str, name: str):
        if (kind, name) == ("stage", "broken.fit"):
            raise PluginError(
                "stage 'broken.fit' from broken failed to import: ModuleNotFoundError: xfer_no_such_module"
            )
        return real_load(kind, name)

    monkeypatch.setattr(host, "load", load)
    recipe = write_recipe(tmp_path, FIT.replace("kind: testing.fit", "kind: broken.fit"))
    with pytest.raises(PluginError, match="xfer_no_such_module"):
        run_recipe_file(recipe, tmp_path / "run", host)
    state = json.loads((tmp_path / "run/fit/stage.json").read_text())
    assert state["status"] == "failed" and "failed to import" in state["error"]
    assert ("start", "fit", "broken.fit", False) in recorder.events
    assert ("finish", "fit", "failed", []) in recorder.events
    assert "failed to import" in (tmp_path / "run/fit/report.md").read_text()


class CtrlC(Recorder):
    """Presses Ctrl-C once, after the checkpoint of step 5 (a KeyboardInterrupt out of the training loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.pressed = False

    @hookimpl
    def xfer_checkpoint_saved(self, stage: str, step: int, path: Path) -> None:
        super().xfer_checkpoint_saved(stage, step, path)
        if step == 5 and not self.pressed:
            self.pressed = True
            raise KeyboardInterrupt


def test_ctrl_c_marks_the_stage_interrupted_not_failed_and_the_rerun_resumes(tmp_path: Path) -> None:
    recorder = CtrlC()
    recipe = write_recipe(tmp_path, FIT)
    with pytest.raises(KeyboardInterrupt):
        run_recipe_file(recipe, tmp_path / "run", host_with(recorder))
    state = json.loads((tmp_path / "run/fit/stage.json").read_text())
    assert state["status"] == "interrupted" and state["error"] == "KeyboardInterrupt"
    assert ("finish", "fit", "interrupted", []) in recorder.events
    run_recipe_file(recipe, tmp_path / "run", host_with(recorder))
    assert ("start", "fit", "testing.fit", True) in recorder.events, "resumed from its step-5 checkpoint"
    assert json.loads((tmp_path / "run/fit/stage.json").read_text())["status"] == "completed"


def test_only_runs_the_named_stages_and_what_they_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe, run = write_recipe(tmp_path, CHAIN), tmp_path / "run"
    set_default_host(host_with())
    try:
        assert cli.main(["run", str(recipe), "--run-dir", str(run), "--only", "first"]) == 0
        assert "[corpus] not selected" in capsys.readouterr().out
        assert (run / "first" / "stage.json").exists()
        assert not (run / "corpus").exists() and not (run / "second").exists()
        assert cli.main(["run", str(recipe), "--run-dir", str(run), "--only", "second"]) == 0
        out = capsys.readouterr().out
        assert "[first] up to date, skipped" in out and "[second] running" in out  # second reads first
        assert not (run / "corpus").exists()
        assert cli.main(["run", str(recipe), "--run-dir", str(run), "--only", "secnd"]) == 2
        assert "no stage 'secnd'; did you mean 'second'?" in capsys.readouterr().err
        # an empty selection (an unset shell variable) ran every stage ("") or none (",") with exit 0
        for nothing in ("", ",", " , "):
            assert cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "other"), "--only", nothing]) == 2
            assert (
                "--only names no stage: give STAGE[,STAGE] (stages: corpus, first, second)" in capsys.readouterr().err
            )
        assert not (tmp_path / "other").exists()
    finally:
        set_default_host(None)


def test_a_damaged_metrics_line_does_not_stop_the_stage_from_completing(tmp_path: Path) -> None:
    """metrics.jsonl lines without a numeric step or with a non-string split (a hand edit, a damaged
    file) once made report.md raise after the stage's outputs were written: the stage stayed
    `running` and every re-run ended in the same traceback."""
    recipe = write_recipe(tmp_path, FIT)
    run_recipe_file(recipe, tmp_path / "run", host_with())
    stage_json = tmp_path / "run/fit/stage.json"
    state = json.loads(stage_json.read_text())
    state["status"] = "running"  # killed after its outputs, before it was recorded as completed
    del state["finished"]
    stage_json.write_text(json.dumps(state))
    with open(tmp_path / "run/fit/metrics.jsonl", "a", encoding="utf-8") as out:
        out.write('{"split": "train", "loss": 1.0}\n{"step": 3, "split": ["train"], "loss": 2.0}\n')
    run_recipe_file(recipe, tmp_path / "run", host_with())
    assert json.loads(stage_json.read_text())["status"] == "completed"
    assert "Stage `fit`" in (tmp_path / "run/fit/report.md").read_text()


def test_a_fork_cut_short_is_no_run_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork killed mid-copy left the source's recipe.resolved.yaml in the target: `--run-dir TARGET`
    then took it for a run whose completed stages lacked the files not yet copied (read as pruned on
    purpose, so skipped). The copy is now made without it, the fork's own recipe written last."""
    import shutil as real_shutil

    from xfer.core.runs import runner

    recipe = write_recipe(tmp_path, CHAIN)
    run, fork = tmp_path / "run", tmp_path / "fork"
    host = host_with()
    run_recipe_file(recipe, run, host, only={"corpus"})
    copytree = real_shutil.copytree

    def killed_mid_copy(*args: object, **kwargs: object) -> None:
        monkeypatch.setattr(real_shutil, "copytree", copytree)  # copytree recurses through its global name
        copytree(*args, **kwargs)
        for text in (fork / "corpus" / "outputs").rglob("*.txt"):
            text.unlink()  # not copied yet when it was killed
        raise KeyboardInterrupt

    monkeypatch.setattr(runner.shutil, "copytree", killed_mid_copy)
    with pytest.raises(KeyboardInterrupt):
        run_recipe_file(recipe, run, host, ["stages.first.train.lr=0.02"], fork=fork, only={"corpus"})
    monkeypatch.undo()
    with pytest.raises(RunDirError, match=r"not an xfer run directory .*--fork copy cut short"):
        run_recipe_file(recipe, fork, host, only={"corpus"})


def _corpus_stage_on_another_disk(tmp_path: Path) -> tuple[Path, Path, Path, PluginHost]:
    """(recipe, run, disk, host): CHAIN's corpus stage run, then moved to `disk` and linked back."""
    recipe = write_recipe(tmp_path, CHAIN)
    run, disk = tmp_path / "run", tmp_path / "other-disk"
    host = host_with()
    run_recipe_file(recipe, run, host, only={"corpus"})
    disk.mkdir()
    shutil.move(run / "corpus", disk / "corpus")
    (run / "corpus").symlink_to(disk / "corpus")
    return recipe, run, disk, host


def test_a_stage_folder_symlinked_elsewhere_is_unlinked_not_emptied_and_a_file_there_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stage folder moved to another disk and linked back (or a fork's copy of such a link, which
    names the source run's folder) ended a re-run from scratch in `OSError: Cannot call rmtree on a
    symbolic link`; a file in its place in a NotADirectoryError traceback."""
    recipe, run, disk, host = _corpus_stage_on_another_disk(tmp_path)
    kept = sorted(p.relative_to(disk) for p in disk.rglob("*"))
    changed = run_recipe_file(recipe, run, host, ["stages.corpus.sentences=40"], force=True, only={"corpus"})
    assert [(s.name, s.action) for s in changed.stages] == [("corpus", "ran")]
    assert "was a symbolic link to" in capsys.readouterr().err
    assert not (run / "corpus").is_symlink() and json.loads((run / "corpus/stage.json").read_text())["status"] == (
        "completed"
    )
    assert sorted(p.relative_to(disk) for p in disk.rglob("*")) == kept, "what the link named is left alone"
    shutil.rmtree(run / "corpus")
    (run / "corpus").write_text("my notes\n")
    with pytest.raises(RunDirError, match=r"corpus is a file, not the stage's folder; move it away"):
        run_recipe_file(recipe, run, host, force=True, only={"corpus"})
    assert (run / "corpus").read_text() == "my notes\n"


def test_a_fork_copies_a_symlinked_stage_folder_instead_of_sharing_it(tmp_path: Path) -> None:
    """A fork copied a stage folder linked from another disk as the link, so a stage resuming in
    the fork wrote into the source run's folder."""
    recipe, run, disk, host = _corpus_stage_on_another_disk(tmp_path)
    before = sorted(p.relative_to(disk / "corpus") for p in (disk / "corpus").rglob("*"))
    fork = tmp_path / "fork"
    forked = run_recipe_file(recipe, run, host, ["stages.first.train.steps=8"], fork=fork, only={"corpus"})
    assert [(s.name, s.action) for s in forked.stages] == [("corpus", "skipped")]  # unchanged: reused, not re-run
    assert (run / "corpus").is_symlink() and not (fork / "corpus").is_symlink(), "the fork owns its stage folder"
    assert sorted(p.relative_to(fork / "corpus") for p in (fork / "corpus").rglob("*")) == before
    assert json.loads((fork / "corpus/stage.json").read_text())["status"] == "completed"

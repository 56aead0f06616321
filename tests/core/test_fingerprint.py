"""Honest stage caching (xfer.core.runs.fingerprint): a stage is skipped only when nothing it reads
changed, and a stage that runs again says why."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.config import knob
from xfer.core.errors import RunDirError
from xfer.core.plugins import set_default_host
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs import fingerprint
from xfer.core.runs.fingerprint import FileHasher
from xfer.core.runs.runner import diff, read_status, run_recipe, without_new_unsigned
from xfer.testing import make_host, write_recipe

from . import lines_task
from .lines_task import GOOD_LINES, LinesPlugin

RECIPE = """\
name: fp
seed: 3
stages:
  first:
    kind: testing.fit
    task: {name: lines/cls, train_file: data/train.tsv, dev_file: data/dev.tsv}
    train: {steps: 2, batch_size: 8, log_every: 1}
  second:
    kind: testing.fit
    init: first.model
    task: {name: lines/cls, train_file: data/train.tsv, dev_file: data/dev.tsv}
    train: {steps: 2, batch_size: 8, log_every: 1}
"""


def _age(path: Path, seconds: float = 60.0) -> None:
    """Move a file's mtime into the past, out of the hasher's racy window."""
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.tsv", "dev.tsv"):
        (data / name).write_text(GOOD_LINES)
        _age(data / name)
    write_recipe(tmp_path, RECIPE)
    return tmp_path


def host():
    h = make_host(["xfer.testing.plugin"])
    h.add_object(LinesPlugin, "lines")
    return h


def run(project: Path, *overrides: str, force: bool = False) -> tuple[list[tuple[str, str]], list[str]]:
    said: list[str] = []
    h = host()
    plan = load_recipe(project / "recipe.yaml", list(overrides), h)
    result = run_recipe(plan, project / "run", host=h, log=lambda m, **k: said.append(str(m)), force=force)
    return [(s.name, s.action) for s in result.stages], said


def test_editing_a_task_data_file_reruns_the_stage_and_its_dependents(project: Path) -> None:
    assert run(project)[0] == [("first", "ran"), ("second", "ran")]
    assert run(project)[0] == [("first", "skipped"), ("second", "skipped")]
    with open(project / "data/train.tsv", "a") as handle:  # one line appended behind the run's back
        handle.write("v word\ta\n")
    actions, said = run(project)
    assert actions == [("first", "ran"), ("second", "ran")]
    assert "[first] runs again: input stages.first.task.train_file: train.tsv changed" in said
    assert any("[second] runs again:" in s and "upstream stage 'first' changed" in s for s in said)


def test_glob_signs_the_matched_list_itself(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    files = load_recipe(
        write_recipe(tmp_path, "stages:\n  v: {kind: transformer.vocab, files: ['*.txt'], size: 50}\n"),
        host=make_host(autoload=True),
    )
    config = files.stages["v"].config.files
    hasher = FileHasher()
    before = fingerprint.signed_inputs(config, hasher, "stages.v.files")
    (tmp_path / "b.txt").write_text("two\n")
    after = fingerprint.signed_inputs(config, hasher, "stages.v.files")
    assert before != after
    old, new = {"inputs": before}, {"inputs": after}
    assert fingerprint.explain_change(old, new) == ["input stages.v.files: b.txt added"]
    (tmp_path / "a.txt").unlink()
    gone = {"inputs": fingerprint.signed_inputs(config, hasher, "stages.v.files")}
    assert "a.txt removed" in fingerprint.explain_change(new, gone)[0]


def test_folder_inputs_sign_every_file_inside(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    (folder / "sub").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"\x00" * 64)
    (folder / "sub" / "vocab.txt").write_text("[PAD]\n")
    hasher = FileHasher()
    before = fingerprint.signed_inputs([folder], hasher, "init")
    (folder / "sub" / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    after = fingerprint.signed_inputs([folder], hasher, "init")
    assert fingerprint.explain_change({"inputs": before}, {"inputs": after}) == ["input init.0: vocab.txt changed"]


def test_a_component_version_change_reruns(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run(project)
    monkeypatch.setattr(LinesPlugin, "version", "2")
    actions, said = run(project)
    assert actions == [("first", "ran"), ("second", "ran")]
    assert any("component task lines/cls: version 1" in s and "-> version 2" in s for s in said), said


def test_config_change_is_named_with_its_key(project: Path) -> None:
    run(project)
    actions, said = run(project, "stages.second.train.lr=0.05", force=True)
    assert actions == [("first", "skipped"), ("second", "ran")]
    assert any("stages.second.train.lr: 0.01 -> 0.05" in s for s in said), said


def _add_knob_to_lines_task(monkeypatch: pytest.MonkeyPatch, **unsigned_at: bool) -> None:
    """Give `lines/cls` a new knob `lowercase` (default False), as a plugin release would."""

    @dataclass
    class LinesConfigWithLowercase(lines_task.LinesConfig):
        lowercase: bool = knob(False, "Lower-case the text.", **unsigned_at)

    monkeypatch.setattr(lines_task, "LinesConfig", LinesConfigWithLowercase)


def test_a_knob_added_with_unsigned_at_keeps_existing_runs_fresh_until_it_is_used(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(project)
    _add_knob_to_lines_task(monkeypatch, unsigned_at=False)
    assert run(project)[0] == [("first", "skipped"), ("second", "skipped")]
    actions, said = run(project, "stages.first.task.lowercase=true", force=True)
    assert actions == [("first", "ran"), ("second", "ran")]
    assert "[first] runs again: stages.first.task.lowercase added: true" in said, said
    assert run(project, "stages.first.task.lowercase=false", force=True)[0] == [("first", "ran"), ("second", "ran")]
    assert run(project)[0] == [("first", "skipped"), ("second", "skipped")]  # the same run as before the knob


def test_a_knob_signed_as_one_value_reruns_nothing_and_is_no_recipe_change(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A knob that sets how fast a stage computes, never what (ELECTRA's `corpus.num_proc`): changing
    it re-ran the stage (hours of pre-training) and was refused as a different recipe without --force."""
    import yaml

    @dataclass
    class LinesConfigWithWorkers(lines_task.LinesConfig):
        workers: int = knob(1, "Processes (the examples are the same for every value).", ge=1, signed_as=1)

    monkeypatch.setattr(lines_task, "LinesConfig", LinesConfigWithWorkers)
    assert run(project)[0] == [("first", "ran"), ("second", "ran")]
    assert run(project, "stages.first.task.workers=3")[0] == [("first", "skipped"), ("second", "skipped")]
    resolved = yaml.safe_load((project / "run" / "recipe.resolved.yaml").read_text())
    assert resolved["stages"]["first"]["task"]["workers"] == 3, "the recipe that ran last is the one recorded"
    with pytest.raises(RunDirError, match=r"different recipe:\n  ~ stages.first.train.steps: 2 -> 3\nUse"):
        run(project, "stages.first.task.workers=2", "stages.first.train.steps=3")


def _recipe_with_tasks(*tasks: dict[str, object]) -> dict[str, object]:
    return {"stages": {"s": {"kind": "k", "tasks": list(tasks)}}}


def test_the_run_directory_check_skips_new_unsigned_knobs_also_inside_lists() -> None:
    """Task configs sit in lists (`tasks: [...]`): a knob added there at its unsigned value is no
    change; at another value it is; where the old recipe already had it, it is compared as usual."""
    before_the_knob = _recipe_with_tasks({"name": "a"}, {"name": "b"})
    full = _recipe_with_tasks({"name": "a", "lowercase": False}, {"name": "b", "lowercase": False})
    signed = _recipe_with_tasks({"name": "a"}, {"name": "b"})
    assert diff(before_the_knob, full) != []  # what the check said before `unsigned_at`
    assert diff(before_the_knob, without_new_unsigned(full, signed, before_the_knob)) == []

    full_b_set = _recipe_with_tasks({"name": "a", "lowercase": False}, {"name": "b", "lowercase": True})
    signed_b_set = _recipe_with_tasks({"name": "a"}, {"name": "b", "lowercase": True})
    assert diff(before_the_knob, without_new_unsigned(full_b_set, signed_b_set, before_the_knob)) == [
        '~ stages.s.tasks: [{"name": "a"}, {"name": "b"}] -> [{"name": "a"}, {"name": "b", "lowercase": true}]'
    ]

    written_with_the_knob = _recipe_with_tasks({"name": "a", "lowercase": True}, {"name": "b", "lowercase": False})
    assert diff(written_with_the_knob, without_new_unsigned(full, signed, written_with_the_knob)) == [
        '~ stages.s.tasks: [{"name": "a", "lowercase": true}, {"name": "b", "lowercase": false}] '
        '-> [{"name": "a", "lowercase": false}, {"name": "b", "lowercase": false}]'
    ]


def test_a_knob_added_without_unsigned_at_makes_existing_runs_stale(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(project)
    _add_knob_to_lines_task(monkeypatch)
    with pytest.raises(RunDirError, match=r"different recipe:\n  \+ stages.first.task.lowercase: false"):
        run(project)
    actions, said = run(project, force=True)
    assert actions == [("first", "ran"), ("second", "ran")]
    assert "[first] runs again: stages.first.task.lowercase added: false" in said, said


def test_hashes_are_reused_while_size_mtime_and_inode_are_unchanged(tmp_path: Path) -> None:
    data = tmp_path / "big.txt"
    data.write_text("x" * 10_000)
    _age(data)
    cache = tmp_path / "hashes.json"
    first = FileHasher(cache)
    digest = first.file(data)
    first.save()
    second = FileHasher(cache)  # a later `xfer run`: reads the table, hashes nothing
    assert second.file(data) == digest and second.hashed == 0
    then = time.time() - 30  # same content, new mtime: hashed again, same digest
    os.utime(data, (then, then))
    assert second.file(data) == digest and second.hashed == 1
    replaced = tmp_path / "other.txt"  # same size and mtime but another inode: not trusted
    replaced.write_text("y" * 10_000)
    os.utime(replaced, (then, then))
    os.replace(replaced, data)
    assert second.file(data) != digest and second.hashed == 2


def test_a_file_rewritten_in_place_with_its_size_and_mtime_put_back_is_hashed_again(tmp_path: Path) -> None:
    """`cp -p`, `rsync --inplace -t`: same path, inode, size and mtime, other content. The cache
    used to return the old digest, so the stage that read the file was skipped; the ctime, which
    no tool can set, now tells."""
    data = tmp_path / "train.tsv"
    data.write_text("a\tpositive\n")
    _age(data)
    cache = tmp_path / "hashes.json"
    first = FileHasher(cache)
    digest = first.file(data)
    first.save()
    before = data.stat()
    time.sleep(0.01)  # the rewrite gets a later ctime
    with open(data, "r+b") as handle:
        handle.write(b"b")
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = data.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    later = FileHasher(cache)
    assert later.file(data) != digest and later.hashed == 1


def test_a_file_hashed_right_after_being_written_is_not_cached(tmp_path: Path) -> None:
    """git's racy-clean rule: an edit in the same timestamp tick could keep size and mtime."""
    data = tmp_path / "fresh.txt"
    data.write_text("abc")
    hasher = FileHasher(tmp_path / "hashes.json")
    hasher.file(data)
    assert str(data) not in hasher.table
    hasher.file(data)
    assert hasher.hashed == 2


def test_status_says_why_a_stage_would_run_again(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(project)
    rows = read_status(project / "run", host())
    assert [r["status"] for r in rows] == ["completed", "completed"] and not any(r["reruns_because"] for r in rows)
    (project / "data/dev.tsv").write_text(GOOD_LINES + "q word\tb\n")
    rows = {r["stage"]: r for r in read_status(project / "run", host())}
    assert rows["first"]["status"] == "stale"
    assert rows["first"]["reruns_because"] == ["input stages.first.task.dev_file: dev.tsv changed"]
    assert rows["second"]["status"] == "stale" and rows["second"]["reruns_because"] == [
        "input stages.second.task.dev_file: dev.tsv changed",
        "upstream stage 'first' changed",
    ]
    set_default_host(host())
    try:
        assert cli.main(["status", str(project / "run")]) == 0
    finally:
        set_default_host(None)
    assert "runs again because input stages.first.task.dev_file: dev.tsv changed" in capsys.readouterr().out
    stage_json = json.loads((project / "run/first/stage.json").read_text())
    assert stage_json["signature"]["inputs"]["stages.first.task.train_file"], "parts are stored for explanations"

"""Pre-flight (xfer.core.runs.preflight): every stage's data is read before the first stage trains,
and every data problem of every stage is reported at once (`xfer validate --data`, `xfer run`)."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.config import TaskRef
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import PreflightError, check_data, preflight, stage_tasks
from xfer.testing import write_recipe

from .lines_task import GOOD_LINES, LinesConfig, LinesTask

RECIPE = """\
name: pre
stages:
  first:
    kind: testing.fit
    task: {name: lines/cls, train_file: first-train.tsv, dev_file: first-dev.tsv}
    train: {steps: 2, batch_size: 8}
  second:
    kind: testing.fit
    init: first.model
    task: {name: lines/cls, train_file: second-train.tsv, dev_file: second-dev.tsv}
    train: {steps: 2, batch_size: 8}
"""


def _files(directory: Path, **bad: str) -> None:
    for name in ("first-train", "first-dev", "second-train", "second-dev"):
        (directory / f"{name}.tsv").write_text(bad.get(name.replace("-", "_"), GOOD_LINES))


def test_validate_data_lists_errors_of_two_stages_at_once(
    tmp_path: Path, host, capsys: pytest.CaptureFixture[str]
) -> None:
    _files(tmp_path, first_dev="ok\ta\nno tab here\n", second_train="ok\ta\nfine\tb\nbad\tc\n")
    path = write_recipe(tmp_path, RECIPE)
    assert cli.main(["validate", str(path)]) == 0, "without --data the files are only checked to exist"
    capsys.readouterr()
    assert cli.main(["validate", str(path), "--data"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"{tmp_path / 'first-dev.tsv'}:2: expected text<TAB>label (stage 'first', task 'lines/cls')" in err
    assert f"{tmp_path / 'second-train.tsv'}:3: label: unknown label 'c' (stage 'second', task 'lines/cls')" in err
    assert "2 problems found" in err


def test_run_reads_every_stage_before_the_first_trains(tmp_path: Path, host, capsys) -> None:
    _files(tmp_path, second_dev="broken\n")
    path = write_recipe(tmp_path, RECIPE)
    run_dir = tmp_path / "run"
    assert cli.main(["run", str(path), "--run-dir", str(run_dir)]) == 2
    assert f"{tmp_path / 'second-dev.tsv'}:1: expected text<TAB>label" in capsys.readouterr().err
    assert not (run_dir / "first" / "stage.json").exists(), "the first stage must not have trained"


def test_clean_data_passes_and_every_split_is_read(tmp_path: Path, host) -> None:
    _files(tmp_path)
    recipe = load_recipe(write_recipe(tmp_path, RECIPE), host=host)
    assert preflight(recipe, host) == []
    assert sorted(LinesTask.reads) == [("lines/cls", "dev")] * 2 + [("lines/cls", "train")] * 2, "both stages"
    check_data(recipe, host)  # does not raise


def test_missing_split_is_reported_at_the_stage(tmp_path: Path, host) -> None:
    _files(tmp_path)
    text = RECIPE.replace(", dev_file: second-dev.tsv", "")
    path = write_recipe(tmp_path, text)
    recipe = load_recipe(path, host=host)
    with pytest.raises(PreflightError) as caught:
        check_data(recipe, host)
    assert str(caught.value) == f"{path.resolve()}:8:11: stage 'second', task 'lines/cls': no dev_file configured"


def test_tasks_reading_earlier_stage_outputs_are_skipped(tmp_path: Path, host) -> None:
    _files(tmp_path, second_train="bad\n")
    text = RECIPE.replace("dev_file: second-dev.tsv}", "dev_file: second-dev.tsv, source: first.model}")
    recipe = load_recipe(write_recipe(tmp_path, text), host=host)
    assert preflight(recipe, host) == []
    assert sorted(LinesTask.reads) == [("lines/cls", "dev"), ("lines/cls", "train")], "only the first stage's task"


def test_default_check_data_collects_instead_of_raising(tmp_path: Path) -> None:
    (tmp_path / "train.tsv").write_text("x\n")
    task = LinesTask("lines/cls", LinesConfig(train_file=tmp_path / "train.tsv"))
    problems = task.check_data(["train", "dev", "train"])
    assert [str(p) for p in problems] == [
        f"{tmp_path / 'train.tsv'}:1: expected text<TAB>label",
        "lines/cls: no dev_file configured",
    ]


def test_a_stage_config_may_declare_its_splits() -> None:
    ref = TaskRef("lines/cls", LinesConfig())

    @dataclass
    class Declares:
        task: TaskRef

        def data_splits(self) -> list[tuple[TaskRef, tuple[str, ...]]]:
            return [(self.task, ("train",))]

    @dataclass
    class Nested:
        tasks: list[TaskRef]
        other: dict[str, TaskRef]

    assert stage_tasks(Declares(ref)) == [(ref, ("train",))]
    assert stage_tasks(Nested([ref], {"k": ref})) == [(ref, ("train", "dev")), (ref, ("train", "dev"))]
    assert stage_tasks(None) == []


def test_a_problem_of_a_stage_set_by_an_override_points_at_the_override(
    tmp_path: Path, host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It pointed at the recipe file, without a line, where the stage was not written at all."""
    _files(tmp_path)
    monkeypatch.chdir(tmp_path)  # paths in overrides are relative to the current directory
    stage = "stages.second={kind: testing.fit, task: {name: lines/cls, train_file: second-train.tsv}}"
    recipe = load_recipe(write_recipe(tmp_path, RECIPE), [stage], host=host)
    with pytest.raises(PreflightError) as caught:
        check_data(recipe, host)
    assert str(caught.value) == f"<override 1: {stage}>:1:8: stage 'second', task 'lines/cls': no dev_file configured"


def test_a_crashing_check_of_a_stage_config_is_reported_not_raised(
    tmp_path: Path, host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check_task_infos()` and `data_splits()` that raise were tracebacks that hid every other problem
    (`preflight()` already reported a raising `preflight()` as a plugin bug)."""
    _files(tmp_path, first_dev="broken\n")
    path = write_recipe(tmp_path, RECIPE)
    recipe = load_recipe(path, host=host)
    config_cls = type(recipe.stages["first"].config)

    def boom(self, *args):
        raise KeyError("type")

    monkeypatch.setattr(config_cls, "check_task_infos", boom, raising=False)
    problems = preflight(recipe, host)
    assert f"{tmp_path / 'first-dev.tsv'}:1: expected text<TAB>label (stage 'first', task 'lines/cls')" in problems
    assert (
        f"{path.resolve()}:4:11: stage 'first': its check_task_infos() failed (KeyError: 'type'); plugin bug"
        in problems
    )
    monkeypatch.setattr(config_cls, "data_splits", boom, raising=False)
    problems = preflight(recipe, host)
    assert f"{path.resolve()}:8:11: stage 'second': its data_splits() failed (KeyError: 'type'); plugin bug" in problems


@pytest.fixture
def host(lines_host):
    """This module's tests take the `lines/cls` host as `host`."""
    return lines_host

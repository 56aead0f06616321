"""`xfer results`, report.md and `python -m xfer.cvt.results` on run folders that went through crashes,
edits and copies (hostile review h08, stop 43): a stage folder that lost its stage.json, a byte that is
not UTF-8, a results row without its main metric, evaluations logged twice by a resumed attempt, names
holding "|" or a line break, an infinite score."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.results import RESULTS_FILE, markdown_rows, task_result
from xfer.core.runs.report import _read_curves, write_report

RUNS = [{"trial": t, "seed": t + 1, "accuracy": v} for t, v in enumerate([80.0, 90.0, 85.0])]


def write_stage(run: Path, name: str, record: dict | None, results: dict | None = None) -> Path:
    """A stage folder of `run`; `record` None: no stage.json."""
    stage = run / name
    stage.mkdir(parents=True)
    if record is not None:
        (stage / "stage.json").write_text(json.dumps(record))
    if results is not None:
        (stage / RESULTS_FILE).parent.mkdir(parents=True)
        (stage / RESULTS_FILE).write_text(json.dumps(results))
    return stage


def write_run(run: Path, *stages: str) -> None:
    run.mkdir(parents=True)
    (run / "recipe.resolved.yaml").write_text("name: r\nstages:\n" + "".join(f"  {s}: {{kind: x}}\n" for s in stages))


# --- xfer results -----------------------------------------------------------------------------------


def test_a_stage_whose_stage_json_is_gone_keeps_its_row_marked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run folder copied without a stage's stage.json (or with it deleted): the stage's results
    were left out of the table without a word (only stages with a stage.json were listed), while
    `xfer status` listed the stage as pending."""
    run = tmp_path / "run"
    write_run(run, "first", "second")
    write_stage(run, "first", {"status": "completed"}, {"t": task_result("accuracy", RUNS)})
    write_stage(run, "second", None, {"t": task_result("accuracy", RUNS[:2])})
    assert cli.main(["results", str(run)]) == 0
    out = capsys.readouterr().out
    assert "| first | t | accuracy | **85.0** |" in out
    assert "| second [no stage.json] | t | accuracy | **85.0** | 85.0 ± 7.1 | 80.0–90.0 | 2 |" in out
    assert f"{run / 'second'} has no stage.json" in out


def test_a_stage_without_stage_json_is_listed_in_a_run_without_its_recipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without recipe.resolved.yaml the stages are listed alphabetically: from the stage.json files
    alone, so the stage holding only results.json was missing there too."""
    run = tmp_path / "run"
    write_stage(run, "a", {"status": "completed"}, {"t": task_result("accuracy", RUNS)})
    write_stage(run, "b", None, {"t": task_result("accuracy", RUNS[:1])})
    assert cli.main(["results", str(run)]) == 0
    out = capsys.readouterr().out
    assert "| a | t | accuracy |" in out and "| b | t | accuracy | **80.0** |" in out


def test_a_results_folder_on_its_own_is_still_a_plain_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A results folder copied out of its run (no recipe.resolved.yaml beside it) reads as it is."""
    stage = write_stage(tmp_path, "copied", None, {"t": task_result("accuracy", RUNS)})
    assert cli.main(["results", str(stage)]) == 0
    out = capsys.readouterr().out
    assert "| copied | t | accuracy | **85.0** |" in out and "stage.json" not in out


def test_a_byte_that_is_not_utf8_in_results_json_is_named_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error gave the byte's offset in the file ("position 17") alone; an editor shows lines."""
    stage = write_stage(tmp_path, "ft", {"status": "completed"}, {})
    text = json.dumps({"t": task_result("accuracy", RUNS)}, indent=1)
    (stage / RESULTS_FILE).write_bytes(text.encode().replace(b'"main_metric"', b'"main\xffmetric"'))
    assert cli.main(["results", str(stage)]) == 2
    line = text.splitlines().index(' "t": {') + 2
    assert f"{stage / RESULTS_FILE}:{line}: unreadable results file (not UTF-8" in capsys.readouterr().err


def test_a_row_without_its_main_metric_still_shows_the_other_metrics() -> None:
    """A summary without the main metric (every run lacked it) gave "(no value)" and an empty
    "other metrics" cell, though the summary held the other metrics' scores."""
    runs = [{"trial": 0, "seed": 1, "f1": None, "accuracy": 70.0}]
    (row,) = markdown_rows("ft", {"t": task_result("f1", runs)})
    assert row == "| ft | t | f1 | (no value) | | | 1 | accuracy 70.0 |"


# --- report.md ------------------------------------------------------------------------------------


def relogged(tmp_path: Path) -> Path:
    """metrics.jsonl of a stage killed at step 4 and resumed without an intact checkpoint by xfer
    before 2026-11-27, which kept the killed attempt's records: steps 1-4 twice, then 5."""
    old = [{"step": s, "split": "train", "trial": 0, "loss": 10.0 - s, "tags": ["trial"]} for s in (1, 2, 3, 4)]
    old.append({"step": 4, "split": "dev", "trial": 0, "f1": math.nan, "tags": ["trial"]})
    new = [{"step": s, "split": "train", "trial": 0, "loss": 5.0 - s, "tags": ["trial"]} for s in (1, 2, 3, 4, 5)]
    new.append({"step": 4, "split": "dev", "trial": 0, "f1": 60.0, "tags": ["trial"]})
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in old + new))
    return path


def test_the_report_draws_a_step_logged_twice_once_at_its_last_value(tmp_path: Path) -> None:
    """Both attempts' points were drawn, a zigzag between the two runs' losses at each step, and the
    killed attempt's NaN was counted among the values not drawn although step 4 has a score."""
    curves, not_finite, _, _ = _read_curves(relogged(tmp_path))
    steps, values = curves["train", "loss"]["trial=0"]
    assert list(steps) == [1, 2, 3, 4, 5] and list(values) == [4.0, 3.0, 2.0, 1.0, 0.0]
    assert [list(v) for v in curves["dev", "f1"]["trial=0"]] == [[4.0], [60.0]]
    assert not not_finite


def test_the_report_of_a_relogged_run_lists_no_value_as_not_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XFER_REPORT_PLOTS", "0")
    relogged(tmp_path)
    assert "not finite" not in write_report(tmp_path, "t", {}, []).read_text()


def test_a_value_not_finite_at_the_last_logging_of_a_step_is_still_counted(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": 1, "split": "dev", "f1": 50.0}, {"step": 1, "split": "dev", "f1": "NaN"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    curves, not_finite, _, _ = _read_curves(path)
    assert dict(not_finite) == {("dev", "f1"): 1} and curves["dev", "f1"] == {}


# --- python -m xfer.cvt.results ---------------------------------------------------------------------


def cvt_stage(
    folder: Path, metrics: bytes, runs: list[dict] | None = None, task: str = "chunk", main: str = "f1"
) -> Path:
    """A finished-looking cvt.train stage (mode supervised) with `metrics` as its metrics.jsonl."""
    folder.mkdir(parents=True)
    record = {"kind": "cvt.train", "status": "completed", "signature": {"config": {"mode": "supervised"}}}
    (folder / "stage.json").write_text(json.dumps(record))
    (folder / RESULTS_FILE).parent.mkdir(parents=True)
    runs = runs or [{"trial": 0, "seed": 1, main: 80.0}, {"trial": 1, "seed": 2, main: 90.0}]
    (folder / RESULTS_FILE).write_text(json.dumps({task: task_result(main, runs)}))
    (folder / "metrics.jsonl").write_bytes(metrics)
    return folder


def dev(step: int, trial: int, f1: float) -> bytes:
    record = {"step": step, "split": "dev", "trial": trial, "f1": f1, "time": 1.0, "tags": ["trial"]}
    return (json.dumps(record) + "\n").encode()


def test_cvt_curve_counts_an_evaluation_logged_twice_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial 1 killed after its step-4 evaluation and resumed from scratch (xfer before 2026-11-27
    kept the killed attempt's records): its two step-4 scores were both averaged into the point, as
    if a third trial, and the other point was then marked as reached by fewer trials ("(2)")."""
    from xfer.cvt.results import main

    text = dev(2, 0, 50.0) + dev(4, 0, 60.0) + dev(2, 1, 40.0) + dev(4, 1, 10.0) + dev(2, 1, 42.0) + dev(4, 1, 70.0)
    stage = cvt_stage(tmp_path / "run" / "sup", text)
    assert main(["--curve", str(stage)]) == 0
    assert capsys.readouterr().out.splitlines()[2] == "| run/sup f1 | 46.0 | 65.0 |"


def test_cvt_curve_names_a_byte_that_is_not_utf8_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole file was decoded at once: the error gave a byte offset, not the line."""
    from xfer.cvt.results import main

    stage = cvt_stage(tmp_path / "run" / "sup", dev(2, 0, 50.0) + b'{"step": 4, "split": "dev\xff"}\n' + dev(6, 0, 1.0))
    assert main(["--curve", str(stage)]) == 2
    assert f"{stage / 'metrics.jsonl'}:2: not UTF-8 text" in capsys.readouterr().err


def test_cvt_curve_skips_only_a_last_line_cut_by_a_kill(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A line without its line end is one a kill cut (or one being written); a whole line that is no
    JSON is named, also the last one (it was skipped as if a kill had cut it)."""
    from xfer.cvt.results import main

    torn = cvt_stage(tmp_path / "run" / "torn", dev(2, 0, 50.0) + dev(4, 0, 60.0)[:20])
    assert main(["--curve", str(torn)]) == 0
    assert capsys.readouterr().out.splitlines()[2] == "| run/torn f1 | 50.0 |"
    edited = cvt_stage(tmp_path / "run" / "edited", dev(2, 0, 50.0) + b"{oops}\n")
    assert main(["--curve", str(edited)]) == 2
    assert f"{edited / 'metrics.jsonl'}:2: not a JSON line" in capsys.readouterr().err


def test_cvt_table_keeps_its_columns_for_names_with_a_bar_or_a_line_break(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The names went into the cells raw: a "|" added a column to the row, a line break ended it."""
    from xfer.cvt.results import main

    runs = [{"trial": 0, "seed": 1, "f|1": 80.0, "acc\nx": 1.0}, {"trial": 1, "seed": 2, "f|1": 90.0, "acc\nx": 3.0}]
    stage = cvt_stage(tmp_path / "run" / "a|b", dev(2, 0, 1.0), runs, task="chunk\nx", main="f|1")
    assert main([str(stage)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[2] == "| run/a\\|b | chunk x f\\|1 | **85.0** ± 7.1 | 80.0–90.0 | 80.0 / 90.0 | 2 | acc x 2.0 |  |"
    assert len(rows) == 3


def test_cvt_table_with_an_infinite_score(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trial's infinite perplexity (or an edited file's 1e400): `statistics.stdev` ended the tool in a
    bare AttributeError; the row now reads as `xfer results` computes it (mean inf, std undefined)."""
    from xfer.cvt.results import main

    runs = [{"trial": 0, "seed": 1, "ppl": math.inf}, {"trial": 1, "seed": 2, "ppl": 3.0}]
    stage = tmp_path / "run" / "lm"
    cvt_stage(stage, dev(2, 0, 1.0), runs, main="ppl")
    results = json.loads((stage / RESULTS_FILE).read_text())
    results["chunk"] = task_result("ppl", runs, greater_is_better=False)
    (stage / RESULTS_FILE).write_text(json.dumps(results))
    assert main([str(stage)]) == 0
    assert "| run/lm | chunk ppl | **inf** ± nan | 3.0–inf | inf / 3.0 | 2 |" in capsys.readouterr().out


def test_a_pool_refuses_a_stage_whose_stage_json_is_gone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`A+B` with A's stage.json gone was refused as "stage ft has not run there" (the stage was not
    listed); listed now, it is refused for what it is, as a pool refuses any stage not known final."""
    for run, first_seed in (("a", 1), ("b", 4)):
        write_run(tmp_path / run, "ft")
        runs = [{**r, "seed": r["seed"] + first_seed - 1} for r in RUNS]
        write_stage(
            tmp_path / run, "ft", None if run == "a" else {"status": "completed"}, {"t": task_result("accuracy", runs)}
        )
    assert cli.main(["results", f"{tmp_path / 'a'}+{tmp_path / 'b'}"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'a' / 'ft'} has no stage.json" in err and "only finished, intact stages can be pooled" in err

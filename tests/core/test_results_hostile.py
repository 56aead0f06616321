"""`xfer results` and report.md after runs that went wrong (hostile review h116): stages that failed
or were killed before writing results, results.json deleted after its stage completed, pools of
stages that read different inputs, hand-edited metrics.jsonl lines, results.json of an older xfer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.results import RESULTS_FILE, task_result

RUNS = [{"trial": t, "seed": t + 1, "accuracy": v} for t, v in enumerate([80.0, 90.0, 85.0])]


def write_stage(run: Path, name: str, record: dict, results: dict | None = None) -> Path:
    stage = run / name
    stage.mkdir(parents=True)
    (stage / "stage.json").write_text(json.dumps(record))
    if results is not None:
        (stage / RESULTS_FILE).parent.mkdir(parents=True)
        (stage / RESULTS_FILE).write_text(json.dumps(results))
    return stage


def write_run(run: Path, *stages: str) -> None:
    run.mkdir(parents=True)
    (run / "recipe.resolved.yaml").write_text("name: r\nstages:\n" + "".join(f"  {s}: {{kind: x}}\n" for s in stages))


@pytest.mark.parametrize(
    ("record", "shown"), [({"status": "failed", "error": "boom"}, "failed"), ({"status": "running"}, "interrupted")]
)
def test_a_stage_that_ended_before_its_results_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], record: dict, shown: str
) -> None:
    """A run whose second fine-tuning failed (or was killed) half-way: the table showed the first
    stage's row alone, exit 0, with no word about the second, as if the run had only one."""
    run = tmp_path / "run"
    write_run(run, "corpus", "pretrained", "random")
    write_stage(run, "corpus", {"status": "completed"})  # finished and reports nothing: no note
    write_stage(run, "pretrained", {"status": "completed"}, {"t": task_result("accuracy", RUNS)})
    write_stage(run, "random", record)
    assert cli.main(["results", str(run)]) == 0
    out = capsys.readouterr().out
    assert "| pretrained | t | accuracy | **85.0** |" in out
    assert f"{run / 'random'} is {shown} and has no results yet" in out
    assert "corpus" not in out


def test_a_run_compared_side_by_side_that_has_no_results_yet_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`xfer results A B` with B's stage interrupted: B was silently left out of the comparison."""
    write_stage(tmp_path / "a", "ft", {"status": "completed"}, {"t": task_result("accuracy", RUNS)})
    write_stage(tmp_path / "b", "ft", {"status": "running"})
    assert cli.main(["results", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert f"{tmp_path / 'b' / 'ft'} is interrupted and has no results yet" in capsys.readouterr().out


def test_report_names_the_metrics_lines_it_could_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hand-edited metrics.jsonl (a non-JSON line, a record without a step): the report drew the
    curves without those points and said nothing, while a NaN value is listed under "Values not drawn"."""
    from xfer.core.runs.report import write_report

    monkeypatch.setenv("XFER_REPORT_PLOTS", "0")
    lines = [
        '{"step": 1, "split": "train", "loss": 2.0}',
        "loss at step 2 was 1.5",  # edited by hand
        "",
        '{"split": "train", "loss": 1.2}',  # no step
        '{"step": 4, "split": "train", "loss": 1.0}',
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    text = write_report(tmp_path, "s", {}, []).read_text()
    assert "## Values not drawn" in text
    assert (
        "- metrics.jsonl: 2 lines not read (not a JSON object with a finite step and a string split): lines 2, 4"
        in text
    )
    assert "_No metrics were logged._" not in text


def test_a_report_of_well_formed_metrics_lists_nothing_not_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xfer.core.runs.report import write_report

    monkeypatch.setenv("XFER_REPORT_PLOTS", "0")
    (tmp_path / "metrics.jsonl").write_text(
        '{"step": 1, "split": "train", "loss": 2.0}\n{"step": 1, "split": "resume"}\n'
    )
    assert "Values not drawn" not in write_report(tmp_path, "s", {}, []).read_text()


def test_a_pool_of_stages_that_read_different_inputs_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`A+B` of fine-tunings with equal configs whose pre-trained encoder (an upstream stage), dev data
    or code version differ: the note said "same config", as if the pooled trials were seeds of one model."""
    config = {"kind": "transformer.finetune", "init": "pretrain.model", "trials": 2}

    def signed(encoder: str, dev: str, version: str) -> dict:
        return {
            "config": config,
            "seed": 1,
            "upstream": {"pretrain": encoder, "vocab": "v1"},
            "inputs": {"stages.finetune.tasks[0]": {"/data/dev.tsv": dev}},
            "components": {"stage transformer.finetune": {"version": version, "provider": "transformer"}},
        }

    for name, seeds, signature in [
        ("a", [1, 2], signed("enc-a", "sha-1", "1")),
        ("b", [3, 4], signed("enc-b", "sha-2", "2")),
        ("c", [5, 6], signed("enc-a", "sha-1", "1")),
    ]:
        runs = [{"trial": i, "seed": s, "accuracy": 80.0 + i} for i, s in enumerate(seeds)]
        write_stage(
            tmp_path / name,
            "finetune",
            {"status": "completed", "signature": signature},
            {"t": task_result("accuracy", runs)},
        )
    assert cli.main(["results", f"{tmp_path / 'a'}+{tmp_path / 'b'}"]) == 0
    note = capsys.readouterr().out.splitlines()[-1]
    assert note.endswith(
        "; same config; what they read differs: upstream stage pretrain, input files stages.finetune.tasks[0], "
        "component stage transformer.finetune"
    ), note
    assert cli.main(["results", f"{tmp_path / 'a'}+{tmp_path / 'c'}"]) == 0  # seeds of one model: nothing more said
    assert capsys.readouterr().out.splitlines()[-1].endswith("; same config")
    moved = signed("enc-a", "sha-1", "1")  # the same dev file at another path (another machine)
    moved["inputs"] = {"stages.finetune.tasks[0]": {"/elsewhere/dev.tsv": "sha-1"}}
    runs = [{"trial": 0, "seed": 9, "accuracy": 80.0}]
    write_stage(
        tmp_path / "d", "finetune", {"status": "completed", "signature": moved}, {"t": task_result("accuracy", runs)}
    )
    assert cli.main(["results", f"{tmp_path / 'a'}+{tmp_path / 'd'}"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("; same config")


def test_many_unreadable_metrics_lines_are_counted_and_the_first_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xfer.core.runs.report import MAX_UNREAD, write_report

    monkeypatch.setenv("XFER_REPORT_PLOTS", "0")
    garbage = ["\x00\x01 not json"] * (MAX_UNREAD + 5)
    (tmp_path / "metrics.jsonl").write_text("\n".join(['{"step": 1, "loss": 2.0}', *garbage]) + "\n")
    text = write_report(tmp_path, "s", {}, []).read_text()
    listed = ", ".join(str(n) for n in range(2, MAX_UNREAD + 2))
    assert f"- metrics.jsonl: {MAX_UNREAD + 5} lines not read" in text
    assert f"lines {listed}, ...\n" in text


def test_an_older_summary_of_bookkeeping_is_not_shown_as_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """results.json of an older xfer summarised every numeric key, trial, seed and steps included:
    `xfer results` listed "trial 1.0, seed 2.0, steps 10.0" among the other metrics of the row."""
    runs = [
        {"trial": t, "seed": t + 1, "steps": 10, "f1": f, "accuracy": a}
        for t, (f, a) in enumerate([(80.0, 90.0), (70.0, 85.0), (75.0, 88.0)])
    ]
    stats = lambda v: {"median": v, "mean": v, "std": 1.0, "min": v, "max": v}  # noqa: E731
    summary = {
        "trial": stats(1.0),
        "seed": stats(2.0),
        "steps": stats(10.0),
        "f1": stats(75.0),
        "accuracy": stats(88.0),
    }
    write_stage(
        tmp_path / "run", "ft", {"status": "completed"}, {"t": {"main_metric": "f1", "summary": summary, "runs": runs}}
    )
    assert cli.main(["results", str(tmp_path / "run")]) == 0
    row = capsys.readouterr().out.splitlines()[2]
    assert row == "| ft | t | f1 | **75.0** | 75.0 ± 1.0 | 75.0–75.0 | 3 | accuracy 88.0 |", row


def test_a_completed_stage_whose_results_were_deleted_is_not_called_one_that_reports_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A finished fine-tuning whose results.json was deleted since: pooling it said "finished without
    results (a transformer.finetune stage reports none)", and its own table left it out without a word."""
    record = {"status": "completed", "kind": "transformer.finetune", "output_files": {"results/results.json": "ab"}}
    write_stage(tmp_path / "a", "ft", {"status": "completed"}, {"t": task_result("accuracy", RUNS)})
    write_stage(tmp_path / "b", "ft", record)
    assert cli.main(["results", f"{tmp_path / 'a'}+{tmp_path / 'b'}"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'b' / 'ft'}: completed, but its outputs/results/results.json (recorded in stage.json" in err
    assert "reports none" not in err
    assert cli.main(["results", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert f"{tmp_path / 'b' / 'ft'}: completed, but its outputs/results/results.json" in capsys.readouterr().out
    # a finished stage kind that reports nothing (no results.json recorded) is still said so
    write_stage(tmp_path / "c", "ft", {"status": "completed", "kind": "toy.corpus", "output_files": {"text.txt": "cd"}})
    assert cli.main(["results", f"{tmp_path / 'a'}+{tmp_path / 'c'}"]) == 2
    assert "finished without results (a toy.corpus stage reports none)" in capsys.readouterr().err


def test_a_run_without_any_results_names_the_stage_that_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only "no results yet under RUN" (exit 1) for a run whose one fine-tuning failed: it read as a run
    not yet started."""
    run = tmp_path / "run"
    write_run(run, "corpus", "finetune")
    write_stage(run, "corpus", {"status": "completed"})
    write_stage(run, "finetune", {"status": "failed", "error": "boom"})
    assert cli.main(["results", str(run)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"no results yet under {run} (no finished stage wrote outputs/results/results.json)",
        f"{run / 'finetune'} is failed and has no results yet; `xfer status` says why",
    ]


def test_a_completed_run_whose_results_table_fails_still_prints_its_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A results.json the table cannot read (a plugin's own layout) made a run that had completed exit 2
    without printing its run directory or reports."""
    from xfer.core import cli, results
    from xfer.core.errors import UserError

    def unreadable(paths: object) -> str:
        raise UserError("results.json: not in the shared layout")

    monkeypatch.setattr(results, "results_table", unreadable)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: r\nseed: 1\nstages:\n  corpus: {kind: toy.corpus, sentences: 20}\n")
    assert cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "run")]) == 0
    captured = capsys.readouterr()
    assert "the results table could not be made: results.json: not in the shared layout" in captured.err
    assert f"run directory: {(tmp_path / 'run').resolve()}" in captured.out


def test_a_stage_named_twice_is_one_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`xfer results R R` (or R and R/ft) printed the same row twice, while `R+R` is refused."""
    run = tmp_path / "run"
    write_run(run, "ft")
    write_stage(run, "ft", {"status": "completed"}, {"t": task_result("accuracy", RUNS)})
    for paths in ([run, run], [run, run / "ft"], [run / "ft", tmp_path / "." / "run" / "ft"]):
        assert cli.main(["results", *map(str, paths)]) == 0
        assert capsys.readouterr().out.count("| ft | t | accuracy | **85.0** |") == 1, paths

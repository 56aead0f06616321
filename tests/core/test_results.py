"""`xfer results`: one table from every stage's results.json, bookkeeping never summarised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.results import RESULTS_FILE, plus_minus, summarize, task_result


def write_stage(run: Path, name: str, results: dict | str, config: dict | None = None) -> None:
    (run / name).mkdir(parents=True)
    record = {"status": "completed"} if config is None else {"status": "completed", "signature": {"config": config}}
    (run / name / "stage.json").write_text(json.dumps(record))
    path = run / name / RESULTS_FILE
    path.parent.mkdir(parents=True)
    path.write_text(results if isinstance(results, str) else json.dumps(results))


def test_summary_covers_metrics_only() -> None:
    runs = [
        {"trial": 0, "seed": 1, "steps": 10, "accuracy": 80.0},
        {"trial": 1, "seed": 2, "steps": 10, "accuracy": 90.0},
    ]
    summary = summarize(runs)
    assert set(summary) == {"accuracy"}
    assert summary["accuracy"] == {
        "median": 85.0,
        "mean": 85.0,
        "std": pytest.approx(7.0710678),
        "min": 80.0,
        "max": 90.0,
    }


def test_results_table_in_recipe_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    (run).mkdir()
    (run / "recipe.resolved.yaml").write_text("name: r\nstages:\n  zeta: {kind: x}\n  alpha: {kind: x}\n")
    runs = [
        {"trial": t, "seed": t + 1, "mcc": v, "accuracy": a}
        for t, (v, a) in enumerate([(10.0, 60.0), (30.0, 70.0), (20.0, 65.0)])
    ]
    write_stage(run, "zeta", {"glue/cola": task_result("mcc", runs)})
    write_stage(run, "alpha", {"glue/rte": task_result("accuracy", runs[:1])})
    assert cli.main(["results", str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "| zeta | glue/cola | mcc | **20.0** | 20.0 ± 10.0 | 10.0–30.0 | 3 | accuracy 65.0 |"
    assert lines[3].startswith("| alpha | glue/rte | accuracy | **60.0** |")


def test_std_keeps_close_seeds_visible_and_is_left_out_for_one_run() -> None:
    assert [plus_minus(0.047, 3), plus_minus(0.0, 3), plus_minus(0.46, 3)] == [" ± 0.05", " ± 0.0", " ± 0.5"]
    assert plus_minus(0.0, 1) == ""


def test_bad_or_missing_results_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["results", str(tmp_path / "nowhere")]) == 2
    assert "no such run or stage folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()  # a wrong folder, not a run that has not finished yet
    assert cli.main(["results", str(tmp_path / "empty")]) == 2
    assert f"{tmp_path / 'empty'}: not a run or stage folder (no recipe.resolved.yaml" in capsys.readouterr().err
    (tmp_path / "afile").write_text("x")
    assert cli.main(["results", str(tmp_path / "afile")]) == 2
    assert "afile: not a folder" in capsys.readouterr().err
    (tmp_path / "started").mkdir()  # a run directory whose first stage has not finished: no results yet
    (tmp_path / "started" / "recipe.resolved.yaml").write_text("name: r\nstages:\n  s: {kind: x}\n")
    assert cli.main(["results", str(tmp_path / "started")]) == 1
    assert "no results yet" in capsys.readouterr().out
    write_stage(tmp_path / "run", "broken", '{"glue/cola": {"main_metric": "mcc"')
    assert cli.main(["results", str(tmp_path / "run")]) == 2
    assert "results.json: unreadable results file" in capsys.readouterr().err


def test_report_plots_can_be_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from xfer.core.runs.report import write_report

    rows = [{"step": s, "split": "train", "loss": 1.0 / s} for s in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv("XFER_REPORT_PLOTS", "0")
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert "not drawn (XFER_REPORT_PLOTS=0)" in text and not (tmp_path / "plots").exists()
    monkeypatch.setenv("XFER_REPORT_PLOTS", "1")
    assert "![train loss](plots/train-loss.png)" in write_report(tmp_path, "t", {}, []).read_text()


def seeded_runs(seeds: list[int], scores: list[float]) -> list[dict]:
    return [{"trial": t, "seed": s, "f1": v} for t, (s, v) in enumerate(zip(seeds, scores, strict=True))]


def write_plain_stage(run: Path, name: str, status: str = "completed") -> None:
    """A stage folder without results: a corpus or vocabulary stage, or one still running."""
    (run / name).mkdir(parents=True)
    (run / name / "stage.json").write_text(json.dumps({"status": status, "kind": "toy.corpus"}))


def test_pooling_runs_reports_their_trials_as_one_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Seeds run apart (a first run of seed 1, then seed=2 with two trials) make one row of 3 runs;
    a note names the pooled folders and what differs in their configs besides `trials`."""
    first, later = tmp_path / "first", tmp_path / "later"
    config = {"mode": "cvt", "trials": 1, "vocab": {"vectors": "vectors.vectors"}}
    write_stage(first, "cvt", {"conll/ner": task_result("f1", seeded_runs([1], [80.0]))}, config)
    other = {"mode": "cvt", "trials": 2, "vocab": {"vectors": "/runs/first/vectors/vectors.txt"}, "new_knob": False}
    write_stage(later, "cvt", {"conll/ner": task_result("f1", seeded_runs([2, 3], [82.0, 84.0]))}, other)
    assert cli.main(["results", f"{first}+{later}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "| cvt (pooled) | conll/ner | f1 | **82.0** | 82.0 ± 2.0 | 80.0–84.0 | 3 |  |"
    assert lines[-1] == (
        f"cvt (pooled) pools {first / 'cvt'} + {later / 'cvt'}; their configs differ in vocab.vectors, "
        "new_knob (only 1 of 2 have it: false)"
    )
    assert cli.main(["results", f"{first / 'cvt'}+{later / 'cvt'}"]) == 0  # stage folders pool alike
    assert "| cvt (pooled) | conll/ner | f1 | **82.0** |" in capsys.readouterr().out


def test_pools_that_would_mislead_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b, c, d = (tmp_path / name for name in "abcd")
    write_stage(a, "s", {"conll/ner": task_result("f1", seeded_runs([1, 2], [80.0, 81.0]))}, {"trials": 2})
    write_stage(b, "s", {"conll/ner": task_result("f1", seeded_runs([2], [81.0]))}, {"trials": 1})
    write_stage(c, "s", {"conll/chunking": task_result("f1", seeded_runs([3], [90.0]))}, {"trials": 1})
    (d / "s").mkdir(parents=True)
    (d / "s" / "stage.json").write_text(json.dumps({"status": "running", "signature": {"config": {}}}))
    e, g = tmp_path / "e", tmp_path / "g"
    write_stage(e, "s", {"conll/ner": task_result("f1", seeded_runs([5], [80.0]))}, {"trials": 1})
    write_stage(g, "s", {"conll/ner": task_result("f1", seeded_runs([6], [80.0]))}, {"trials": 1})
    write_stage(g, "only-in-g", {"conll/ner": task_result("f1", seeded_runs([6], [50.0]))}, {"trials": 1})
    write_plain_stage(tmp_path / "f", "corpus")
    for pool, message in [
        (f"{a}+{b}", "seed 2 of conll/ner is also in"),
        (f"{a}+{c}", "tasks ['conll/chunking'] differ from"),
        (f"{a}+{d}", f"{d / 's'}: no results yet (running); only finished stages can be pooled"),
        (f"{d / 's'}+{a / 's'}", f"{d / 's'}: no results yet (running); only finished stages can be pooled"),
        # a stage with results in one run must be in every run, else the row would hold fewer runs than asked
        (f"{g}+{e}", f"{e}: stage only-in-g has not run there (not in its recipe, or not started), while {g}"),
        (f"{tmp_path / 'f' / 'corpus'}+{a / 's'}", "f/corpus: finished without results (a toy.corpus stage"),
        (f"{a}+{b / 's'}", "pools stage folders with run folders"),
        (f"{a}+", "an empty folder name around '+'"),
        (f"{a}+{tmp_path / 'nowhere'}", "no such run or stage folder"),
    ]:
        assert cli.main(["results", pool]) == 2, pool
        assert message in capsys.readouterr().err, pool


def write_run(run: Path, stages: dict[str, dict | str | None]) -> None:
    """A run folder as `xfer run` leaves it: recipe.resolved.yaml and stage folders, of which only
    those given results (a dict) wrote results.json; None is a completed stage without results
    (a corpus or vocabulary), a string the status of an unfinished one."""
    run.mkdir(parents=True)
    (run / "recipe.resolved.yaml").write_text(
        "name: r\nstages:\n" + "".join(f"  {name}: {{kind: x}}\n" for name in stages)
    )
    for name, results in stages.items():
        if isinstance(results, dict):
            write_stage(run, name, results, {"trials": 1})
        else:
            write_plain_stage(run, name, results or "completed")


def test_pooling_runs_pools_only_the_stages_with_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A normal run has stages that report nothing (toy.corpus, transformer.vocab); `A+B` pools the
    ones that do, and a stage finished without results in one run only is no result stage either."""
    ok, seed2 = tmp_path / "r_ok", tmp_path / "r_seed2"
    write_run(
        ok,
        {
            "corpus": None,
            "vocab": None,
            "finetune": {"toy/agreement": task_result("f1", seeded_runs([1], [50.0]))},
        },
    )
    write_run(seed2, {"corpus": None, "finetune": {"toy/agreement": task_result("f1", seeded_runs([2], [60.0]))}})
    assert cli.main(["results", f"{ok}+{seed2}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:] == [
        "| finetune (pooled) | toy/agreement | f1 | **55.0** | 55.0 ± 7.1 | 50.0–60.0 | 2 |  |",
        "",
        f"finetune (pooled) pools {ok / 'finetune'} + {seed2 / 'finetune'}; same config",
    ]
    running = tmp_path / "running"  # the result stage is still running there: refused, naming it
    write_run(running, {"corpus": None, "vocab": None, "finetune": "running"})
    assert cli.main(["results", f"{ok}+{running}"]) == 2
    assert f"{running / 'finetune'}: no results yet (running); only finished stages can be pooled" in (
        capsys.readouterr().err
    )


def test_a_run_pooled_with_itself_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`r+r` (or `r+./r`, or a stage folder twice) would count every trial twice: said as such."""
    run = tmp_path / "r"
    write_run(run, {"corpus": None, "finetune": {"toy/agreement": task_result("f1", seeded_runs([1], [50.0]))}})
    (tmp_path / "link").symlink_to(run)
    for pool, message in [
        (f"{run}+{run}", f"{run} is given twice; pooling a folder with itself would count each trial twice"),
        (f"{run}+{tmp_path / 'link'}", f"{tmp_path / 'link'} is the same folder as {run}"),
        (f"{run / 'finetune'}+{run / 'finetune'}", f"{run / 'finetune'} is given twice"),
    ]:
        assert cli.main(["results", pool]) == 2, pool
        assert message in capsys.readouterr().err, pool


def test_rows_of_several_runs_name_their_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`xfer results A B` shows the same stage and task twice: a run column tells the rows apart;
    a single run's table (the end of `xfer run` too) keeps its plain layout."""
    a, b, c = (tmp_path / name for name in "abc")
    for run, seed, score in [(a, 1, 50.0), (b, 2, 60.0), (c, 3, 70.0)]:
        write_run(run, {"corpus": None, "finetune": {"toy/agreement": task_result("f1", seeded_runs([seed], [score]))}})
    assert cli.main(["results", str(a), str(b)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| run | stage | task | main metric |") and lines[1].startswith("|---|---|---|")
    assert lines[0].count("|") == lines[1].count("|") == lines[2].count("|")
    assert lines[2].startswith(f"| {a} | finetune | toy/agreement | f1 | **50.0** |")
    assert lines[3].startswith(f"| {b} | finetune | toy/agreement | f1 | **60.0** |")
    assert cli.main(["results", f"{a}+{b}", str(c / "finetune")]) == 0  # a pool and a stage folder
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith(f"| {a}+{b} | finetune (pooled) | toy/agreement |")
    assert lines[3].startswith(f"| {c} | finetune | toy/agreement |")
    assert cli.main(["results", str(a)]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith("| finetune | toy/agreement |")
    assert cli.main(["results", f"{a}+{b}"]) == 0  # one pool: one row source, no run column
    assert capsys.readouterr().out.splitlines()[2].startswith("| finetune (pooled) |")


@pytest.mark.parametrize(
    ("status", "held", "shown"),
    [
        ("invalidated", False, "invalidated"),
        ("running", True, "running"),
        ("running", False, "interrupted"),  # its run was killed: nobody holds the lock
        ("interrupted", False, "interrupted"),
        ("failed", False, "failed"),
    ],
)
def test_results_left_by_an_unfinished_or_outdated_attempt_are_marked_and_not_pooled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: str, held: bool, shown: str
) -> None:
    """A results.json outlives the attempt that wrote it (a stage marked invalidated after a stage it
    read ran again, or resumed with more trials and then killed): it once showed as a plain row, as
    if it were the stage's current result, and was pooled as such."""
    from xfer.core.runs.runlock import RunLock

    run, other = tmp_path / "r", tmp_path / "o"
    write_run(run, {"finetune": {"toy/agreement": task_result("f1", seeded_runs([1], [50.0]))}})
    write_run(other, {"finetune": {"toy/agreement": task_result("f1", seeded_runs([2], [60.0]))}})
    (run / "finetune" / "stage.json").write_text(json.dumps({"status": status, "reason": "upstream ran again"}))
    lock = RunLock(run).acquire() if held else None
    try:
        assert cli.main(["results", str(run)]) == 0
        out = capsys.readouterr().out
        assert f"| finetune [{shown}] | toy/agreement | f1 | **50.0** |" in out
        assert f"{run / 'finetune'} is {shown}: its results.json is left from an attempt" in out
        assert cli.main(["results", f"{other}+{run}"]) == 2
        assert f"{run / 'finetune'}: its results are not final ({shown}:" in capsys.readouterr().err
    finally:
        if lock is not None:
            lock.release()


def test_a_nan_score_sorts_lowest_wherever_it_stands() -> None:
    """A diverged trial's NaN made `statistics.median`, `min` and `max` depend on its position
    (NaN compares false with everything): it now counts as the lowest score, and the exported
    (median) trial of transformer.finetune follows the same order."""
    import itertools
    import math

    from xfer.core.results import summarize
    from xfer.transformer.finetune import _median_trial

    for order in itertools.permutations([float("nan"), 50.0, 60.0]):
        runs = [{"trial": i, "seed": i, "f1": v} for i, v in enumerate(order)]
        summary = summarize(runs)["f1"]
        assert summary["median"] == 50.0 and summary["max"] == 60.0 and math.isnan(summary["min"])
        assert math.isnan(summary["mean"]) and math.isnan(summary["std"]), "stdev raised on a NaN"
        assert runs[_median_trial(runs, "f1")]["f1"] == 50.0

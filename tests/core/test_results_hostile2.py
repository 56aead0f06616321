"""Results tables and run-directory bookkeeping (hostile review h164): a diverged (NaN) run of a
lower-is-better metric, the table's count of diverged runs, ..."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.results import (
    RESULTS_FILE,
    markdown_rows,
    pooled_results,
    results_table,
    score_order,
    summarize,
    task_result,
)
from xfer.testing import write_recipe

from .recipes import testing_host  # noqa: F401  (autouse: the testing plugin as the default host)

NAN = math.nan


def perplexity_runs(values: list[float], first_seed: int = 1) -> list[dict]:
    return [{"trial": t, "seed": first_seed + t, "perplexity": v} for t, v in enumerate(values)]


def test_a_nan_run_is_the_worst_of_a_lower_is_better_metric() -> None:
    """NaN sorted lowest whatever the direction: for a perplexity the diverged run stood next to the
    best runs, and the median of [NaN, 10, 20, 30, 40] was 20 (leaning to the best) instead of 30."""
    entry = task_result("perplexity", perplexity_runs([10.0, NAN, 40.0, 20.0, 30.0]), greater_is_better=False)
    stats = entry["summary"]["perplexity"]
    assert stats["median"] == 30.0
    assert stats["min"] == 10.0 and stats["max"] == "NaN"  # strict JSON: NaN at the worst (high) end
    assert entry["greater_is_better"] is False
    # even count: the two middle runs of [10, 20, 30, NaN] are 20 and 30, not 10 and 20
    assert (
        summarize(perplexity_runs([NAN, 30.0, 10.0, 20.0]), lower_is_better=["perplexity"])["perplexity"]["median"]
        == 25.0
    )


def test_greater_is_better_keeps_nan_lowest() -> None:
    entry = task_result("accuracy", [{"trial": t, "seed": t, "accuracy": v} for t, v in enumerate([90.0, NAN, 80.0])])
    assert entry["summary"]["accuracy"]["median"] == 80.0
    assert "greater_is_better" not in entry  # files of greater-is-better metrics keep their layout
    assert math.isnan(sorted([1.0, NAN, 0.5], key=score_order)[0])
    assert sorted([1.0, NAN, 0.5], key=lambda v: score_order(v, greater_is_better=False))[:2] == [0.5, 1.0]


def test_the_table_counts_nan_runs_and_names_the_direction(tmp_path: Path) -> None:
    """The table of five runs of which one diverged said "5 runs" and nothing else: the reader could
    not tell the median was taken with a NaN counted as the worst run."""
    entry = task_result("perplexity", perplexity_runs([10.0, NAN, 40.0, 20.0, 30.0]), greater_is_better=False)
    (row,) = markdown_rows("lm", {"wiki": entry})
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "perplexity (lower is better)"
    assert cells[3] == "**30.0**"
    accuracy = task_result(
        "accuracy", [{"trial": t, "seed": t, "accuracy": v} for t, v in enumerate([90.0, NAN, 80.0])]
    )
    write_results(tmp_path / "run" / "ft", {"sst2": accuracy})
    table = results_table([tmp_path / "run" / "ft"])
    assert table is not None
    assert (
        "ft / sst2: 1 of 3 runs have a NaN accuracy (diverged); the median and range count them as the worst" in table
    )


def write_results(stage: Path, results: dict) -> Path:
    (stage / RESULTS_FILE).parent.mkdir(parents=True)
    (stage / RESULTS_FILE).write_text(json.dumps(results))
    return stage


def test_a_pool_keeps_the_direction(tmp_path: Path) -> None:
    """Pooling recomputed the summary with NaN lowest: two lower-is-better stages pooled lost the
    direction their own summaries had used."""
    a = write_results(tmp_path / "a", {"wiki": task_result("perplexity", perplexity_runs([10.0, NAN]), False)})
    b = write_results(tmp_path / "b", {"wiki": task_result("perplexity", perplexity_runs([20.0, 30.0], 5), False)})
    pooled = pooled_results([a, b])
    assert pooled is not None
    assert pooled["wiki"]["summary"]["perplexity"]["median"] == 25.0  # of [10, 20, 30, NaN]
    assert pooled["wiki"]["greater_is_better"] is False


# --- run directories ------------------------------------------------------------------------------

TWO = "name: two\nstages:\n  a: {kind: toy.corpus, sentences: 5}\n  b: {kind: toy.corpus, sentences: 6}\n"


def test_a_fork_run_again_says_to_use_run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`xfer run R --run-dir A --fork B` run again (after it finished, or after a kill that printed no
    advice) was refused with "--fork target B already exists" alone; B is R's run directory, which
    resumes or is found done with `--run-dir B`. A target of another recipe is told apart."""
    recipe = write_recipe(tmp_path, TWO)
    source, fork = tmp_path / "run", tmp_path / "fork"
    assert cli.main(["run", str(recipe), "--run-dir", str(source)]) == 0
    argv = ["run", str(recipe), "--run-dir", str(source), "--fork", str(fork), "stages.b.sentences=7"]
    assert cli.main(argv) == 0
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"--fork target {fork} already exists as a run directory of this recipe" in err
    assert f"run with --run-dir {fork} in place of --fork {fork}" in err
    assert cli.main(["run", str(recipe), "--run-dir", str(fork), "stages.b.sentences=7"]) == 0  # the advice works

    argv[-1] = "stages.b.sentences=8"  # another recipe: no --run-dir advice, which would be refused
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"--fork target {fork} already exists as the run directory of a different recipe" in err
    assert "--run-dir" not in err.partition("already exists")[2]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    argv[argv.index(str(fork))] = str(tmp_path / "mine")
    assert cli.main(argv) == 2
    assert "already exists and is not an xfer run directory" in capsys.readouterr().err


def test_a_run_dir_in_use_or_of_another_recipe_is_refused_before_the_data_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`xfer run` took the run directory's lock (and judged its recipe) only in `run_recipe`, after
    `check_data` had read every data file: minutes on a large data set before "in use by pid N" or
    "made by a different recipe"."""
    from xfer.core.runs import preflight, runlock

    recipe = write_recipe(tmp_path, TWO)
    run = tmp_path / "run"
    assert cli.main(["run", str(recipe), "--run-dir", str(run)]) == 0
    capsys.readouterr()
    checked: list[object] = []
    monkeypatch.setattr(preflight, "check_data", lambda *args, **kwargs: checked.append(args))

    with runlock.RunLock(run):  # another `xfer run` working in it
        assert cli.main(["run", str(recipe), "--run-dir", str(run)]) == 2
        assert f"run directory {run} is in use by pid" in capsys.readouterr().err
        assert cli.main(["run", str(recipe), "--run-dir", str(run), "--fork", str(tmp_path / "f")]) == 2
        assert f"fork it to {tmp_path / 'f'} once that run has finished" in capsys.readouterr().err
    assert cli.main(["run", str(recipe), "--run-dir", str(run), "stages.b.sentences=9"]) == 2
    assert f"{run} was made by a different recipe:\n  ~ stages.b.sentences: 6 -> 9" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("x")
    assert cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "a-file")]) == 2
    assert "a-file is a file; pass a directory (--run-dir)" in capsys.readouterr().err
    assert checked == []
    assert not (tmp_path / "f").exists()

    # what is not refused still has its data checked: --only, a --fork, --force
    assert cli.main(["run", str(recipe), "--run-dir", str(run), "--only", "a"]) == 0
    assert (
        cli.main(["run", str(recipe), "--run-dir", str(run), "--fork", str(tmp_path / "f"), "stages.b.sentences=9"])
        == 0
    )
    assert cli.main(["run", str(recipe), "--run-dir", str(run), "--force", "stages.b.sentences=8"]) == 0
    assert len(checked) == 3


# --- xfer compare's arguments ----------------------------------------------------------------------


def test_compare_baseline_before_the_systems(tmp_path: Path) -> None:
    """`xfer compare --baseline A A=x B=y`: `--baseline` (nargs="+") took the systems as baseline
    names, and argparse said "the following arguments are required: SYSTEM"."""
    import argparse

    from xfer.bam import compare_cli
    from xfer.core.errors import UserError

    x, y = tmp_path / "x", tmp_path / "y"
    x.mkdir(), y.mkdir()
    parser = argparse.ArgumentParser()
    compare_cli.configure(parser)
    args = parser.parse_args(["--baseline", "A", f"A={x}", f"B={y}", "--no-plot"])
    assert args.baseline == ["A"] and compare_cli.all_systems(args) == [f"A={x}", f"B={y}"]
    args = parser.parse_args(["--baseline", "A", "B", f"A={x}", f"B={y}", str(x)])
    assert args.baseline == ["A", "B"] and compare_cli.all_systems(args) == [f"A={x}", f"B={y}", str(x)]
    # the documented order, and a baseline between systems, are read as before
    args = parser.parse_args([f"A={x}", f"B={y}", "--baseline", "A", "B", "--seed", "3"])
    assert args.baseline == ["A", "B"] and compare_cli.all_systems(args) == [f"A={x}", f"B={y}"] and args.seed == 3
    args = parser.parse_args([f"A={x}", "--baseline", "A", f"B={y}"])
    assert args.baseline == ["A"] and compare_cli.all_systems(args) == [f"A={x}", f"B={y}"]
    # a baseline name that is also a folder stays a baseline when nothing else is given
    args = parser.parse_args(["--baseline", str(x)])
    assert args.baseline == [str(x)] and compare_cli.all_systems(args) == []
    with pytest.raises(UserError, match=r"no SYSTEM to compare: .*--baseline took .* as names of baselines"):
        compare_cli.run(args)

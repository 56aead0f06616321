"""What a user reads about a run, fed hostile data: report.md and its plots from a metrics.jsonl with
NaN / infinite / huge values, records without a split, colliding metric names, long logs, a kill while
drawing; results summaries and pools with a diverged (infinite) score."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.results import RESULTS_FILE, summarize, task_result
from xfer.core.runs.report import write_report


@pytest.fixture(autouse=True)
def _draw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XFER_REPORT_PLOTS", "1")


def write_metrics(stage: Path, text: str) -> None:
    stage.mkdir(parents=True, exist_ok=True)
    (stage / "metrics.jsonl").write_text(text)


def test_report_says_which_values_were_not_finite(tmp_path: Path) -> None:
    """A diverged run: every dev loss NaN, the train loss NaN/Infinity from step 3. The report once
    showed no dev section at all and a train curve that simply ended, never saying why."""
    write_metrics(
        tmp_path,
        '{"step": 1, "split": "train", "loss": 2.0}\n{"step": 2, "split": "train", "loss": 1.5}\n'
        '{"step": 3, "split": "train", "loss": NaN}\n{"step": 4, "split": "train", "loss": Infinity}\n'
        '{"step": 4, "split": "dev", "loss": NaN}\n',
    )
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert "- train loss: 2 of 4 values not finite (NaN or infinite)" in text
    assert "- dev loss: 1 of 1 values not finite (NaN or infinite)" in text
    assert "![train loss](plots/train-loss.png)" in text and "dev-loss.png" not in text


def test_a_huge_integer_does_not_drop_every_curve(tmp_path: Path) -> None:
    """A 400-digit integer (step or value) made float() overflow inside the plot: the report lost
    every curve (written without curves by the runner's fallback), or raised when called directly."""
    huge = "9" * 400
    write_metrics(
        tmp_path,
        f'{{"step": 1, "split": "train", "loss": {huge}}}\n{{"step": {huge}, "split": "train", "loss": 1.0}}\n'
        '{"step": 2, "split": "train", "loss": 1.0}\n{"step": 3, "split": "train", "loss": 0.5}\n',
    )
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert "![train loss](plots/train-loss.png)" in text and (tmp_path / "plots" / "train-loss.png").is_file()
    assert "- train loss: 1 of 3 values not finite" in text


def test_records_without_a_split_are_drawn_as_train(tmp_path: Path) -> None:
    """A record without "split" counts as train (`_plottable`), but the plot looked for split ==
    "train" and found none: the report had neither curves nor "No metrics were logged"."""
    write_metrics(tmp_path, '{"step": 1, "loss": 1.0}\n{"step": 2, "loss": 0.5}\n')
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert "![train loss](plots/train-loss.png)" in text and (tmp_path / "plots" / "train-loss.png").is_file()


def test_metrics_whose_safe_names_collide_get_their_own_plots(tmp_path: Path) -> None:
    """`f1/x` and `f1_x` both became dev-f1_x.png: the second drawn over the first, both links to it."""
    write_metrics(tmp_path, '{"step": 1, "split": "dev", "f1/x": 1.0}\n{"step": 1, "split": "dev", "f1_x": 2.0}\n')
    text = write_report(tmp_path, "t", {}, []).read_text()
    links = [line for line in text.splitlines() if line.startswith("![dev f1")]
    assert len(links) == 2 and len(set(line.split("(")[1] for line in links)) == 2
    assert len(list((tmp_path / "plots").glob("*.png"))) == 2


def test_long_logs_are_thinned_but_keep_spikes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long metrics.jsonl: every point was drawn (and every record kept as a dict); at most about
    2000 points per curve are drawn now, the lowest and highest of each bucket, so a spike stays."""
    import matplotlib.axes

    lines = [json.dumps({"step": s, "split": "train", "loss": 100.0 if s == 4321 else 1.0}) for s in range(10000)]
    write_metrics(tmp_path, "\n".join(reversed(lines)) + "\n")  # out of order: still drawn in step order
    drawn: list[tuple[list[float], list[float]]] = []
    plot = matplotlib.axes.Axes.plot

    def spy(self: matplotlib.axes.Axes, xs: list[float], ys: list[float], *args: object, **kwargs: object) -> object:
        drawn.append((list(xs), list(ys)))
        return plot(self, xs, ys, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    write_report(tmp_path, "t", {}, [])
    [(xs, ys)] = drawn
    assert len(xs) <= 2000 and xs == sorted(xs) and xs[0] == 0 and xs[-1] == 9999
    assert 100.0 in ys and xs[ys.index(100.0)] == 4321


def test_a_kill_while_drawing_leaves_the_old_plot_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """savefig wrote the PNG in place: a stage killed while drawing left a torn image behind (and the
    figure of a drawing that failed stayed open in pyplot)."""
    import matplotlib.figure

    write_metrics(tmp_path, '{"step": 1, "split": "train", "loss": 1.0}\n{"step": 2, "split": "train", "loss": 0.5}\n')
    write_report(tmp_path, "t", {}, [])
    png = tmp_path / "plots" / "train-loss.png"
    before = png.read_bytes()

    def torn(self: matplotlib.figure.Figure, fname: object, *args: object, **kwargs: object) -> None:
        Path(str(fname)).write_bytes(b"\x89PNG torn")
        raise KeyboardInterrupt

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", torn)
    with pytest.raises(KeyboardInterrupt):
        write_report(tmp_path, "t", {}, [])
    assert png.read_bytes() == before
    assert sorted(p.name for p in png.parent.iterdir()) == ["train-loss.png"]
    import matplotlib.pyplot as plt

    assert plt.get_fignums() == []  # the figure of the failed drawing was closed


def test_the_same_metrics_give_the_same_report_bytes(tmp_path: Path) -> None:
    write_metrics(
        tmp_path, '{"step": 1, "split": "train", "loss": 1.0, "time": 1.5}\n{"step": 2, "split": "dev", "acc": 50}\n'
    )
    first = (
        write_report(tmp_path, "t", {"k": "v"}, ["## s"]).read_bytes(),
        (tmp_path / "plots" / "dev-acc.png").read_bytes(),
    )
    second = (
        write_report(tmp_path, "t", {"k": "v"}, ["## s"]).read_bytes(),
        (tmp_path / "plots" / "dev-acc.png").read_bytes(),
    )
    assert first == second


def test_summary_with_an_infinite_score_does_not_crash() -> None:
    """A diverged trial's infinite score (a perplexity): statistics.stdev raised AttributeError, after
    every trial of the stage had run."""
    summary = summarize([{"trial": 0, "seed": 1, "ppl": math.inf}, {"trial": 1, "seed": 2, "ppl": 80.0}])["ppl"]
    assert summary["max"] == math.inf and summary["min"] == 80.0 and math.isnan(summary["std"])
    both = summarize([{"ppl": -math.inf}, {"ppl": math.inf}])["ppl"]  # fsum raised ValueError
    assert math.isnan(both["mean"]) and math.isnan(both["std"])


def test_summary_covers_a_metric_the_first_run_did_not_record() -> None:
    summary = summarize([{"trial": 0, "seed": 1, "acc": 50.0}, {"trial": 1, "seed": 2, "acc": 60.0, "f1": 70.0}])
    assert list(summary) == ["acc", "f1"] and summary["f1"]["median"] == 70.0


def test_pooling_runs_with_an_infinite_score(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """results.json holds Infinity (Python's json writes it): pooling re-summarises and crashed."""
    for run, seed, score in (("a", 1, math.inf), ("b", 2, 10.0)):
        stage = tmp_path / run / "lm"
        (stage / RESULTS_FILE).parent.mkdir(parents=True)
        (stage / "stage.json").write_text(json.dumps({"status": "completed", "signature": {"config": {}}}))
        runs = [{"trial": 0, "seed": seed, "ppl": score}]
        (stage / RESULTS_FILE).write_text(json.dumps({"toy/lm": task_result("ppl", runs)}))
    assert cli.main(["results", f"{tmp_path / 'a'}+{tmp_path / 'b'}"]) == 0
    assert "| lm (pooled) | toy/lm | ppl | **inf** |" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"main_metric": "f1", "summary": {"f1": {"median": "x", "mean": 1.0}}, "runs": []},
            "summary is not a mapping",
        ),
        ({"main_metric": "f1", "summary": {"f1": 5}, "runs": []}, "summary is not a mapping"),
        ({"main_metric": "f1", "summary": [], "runs": []}, "summary is not a mapping"),
        ({"main_metric": ["f1"], "summary": {}, "runs": []}, "main_metric is ['f1'], not a metric name"),
        ({"main_metric": "f1", "summary": {}, "runs": 3}, "runs is not a list of run records"),
        ({"main_metric": "f1", "summary": {}, "runs": [{"seed": [1]}]}, "runs[0].seed is [1], not a number"),
    ],
)
def test_an_edited_results_file_names_the_file_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: dict, message: str
) -> None:
    """`read_results` checked only the three key names: `xfer results` then ended in a bare
    ValueError/TypeError/AttributeError from the table (or the pool's seed check)."""
    stage = tmp_path / "run" / "st"
    (stage / RESULTS_FILE).parent.mkdir(parents=True)
    (stage / "stage.json").write_text('{"status": "completed"}')
    (stage / RESULTS_FILE).write_text(json.dumps({"t": entry}))
    assert cli.main(["results", str(tmp_path / "run")]) == 2
    assert f"{stage / RESULTS_FILE}: task t: {message}" in capsys.readouterr().err


def test_a_summary_without_some_statistics_shows_them_as_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stage = tmp_path / "run" / "st"
    (stage / RESULTS_FILE).parent.mkdir(parents=True)
    (stage / "stage.json").write_text('{"status": "completed"}')
    summary = {"f1": {"median": 2.0, "mean": 1.0, "std": 0.5}, "acc": {"mean": 3.0}}
    (stage / RESULTS_FILE).write_text(json.dumps({"t": {"main_metric": "f1", "summary": summary, "runs": [{}, {}]}}))
    assert cli.main(["results", str(tmp_path / "run")]) == 0
    assert "| st | t | f1 | **2.0** | 1.0 ± 0.5 | ?–? | 2 | acc ? |" in capsys.readouterr().out


@pytest.mark.parametrize("stages", ["fit", "[fit]", "[[fit]]"])
def test_a_damaged_recipe_record_does_not_hide_the_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stages: str
) -> None:
    """recipe.resolved.yaml whose `stages` is no mapping: a string was read letter by letter and a list
    of lists as stage "['fit']", so the finished stage's results read as "no results yet"."""
    run = tmp_path / "run"
    stage = run / "fit"
    (stage / RESULTS_FILE).parent.mkdir(parents=True)
    (stage / "stage.json").write_text('{"status": "completed"}')
    runs = [{"trial": 0, "seed": 1, "f1": 80.0}]
    (stage / RESULTS_FILE).write_text(json.dumps({"t": task_result("f1", runs)}))
    (run / "recipe.resolved.yaml").write_text(f"name: r\nstages: {stages}\n")
    assert cli.main(["results", str(run)]) == 0
    assert "| fit | t | f1 | **80.0** |" in capsys.readouterr().out


def test_a_bar_in_a_name_does_not_shift_the_table_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stage = tmp_path / "run" / "st|old"
    (stage / RESULTS_FILE).parent.mkdir(parents=True)
    (stage / "stage.json").write_text('{"status": "completed"}')
    runs = [{"trial": 0, "seed": 1, "f|1": 80.0, "a|cc": 70.0}]
    (stage / RESULTS_FILE).write_text(json.dumps({"t|x": task_result("f|1", runs)}))
    assert cli.main(["results", str(stage)]) == 0
    row = capsys.readouterr().out.splitlines()[2]
    assert row == "| st\\|old | t\\|x | f\\|1 | **80.0** | 80.0 | 80.0–80.0 | 1 | a\\|cc 70.0 |"

"""report.md from a metrics.jsonl that went through crashes and edits, third hostile pass: a line
nested too deep for the JSON parser, a long file read whole, names matplotlib reads as TeX, and
more runs or metrics than a report can draw in reasonable time."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from xfer.core.runs import report
from xfer.core.runs.report import metric_lines, read_metrics, write_report


@pytest.fixture(autouse=True)
def _draw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XFER_REPORT_PLOTS", "1")


def write_metrics(stage: Path, records: list[dict | str]) -> Path:
    stage.mkdir(parents=True, exist_ok=True)
    path = stage / "metrics.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


DEEP = "[" * 100_000
"""A line the C JSON parser gives up on with RecursionError (not ValueError)."""


def test_a_line_nested_too_deep_is_listed_as_not_read(tmp_path: Path) -> None:
    """A line of 100,000 `[` made the report raise RecursionError after the stage had ended; now it is
    one more damaged line, named with its number, and the other records are still drawn."""
    write_metrics(tmp_path, [{"step": 1, "loss": 1.0}, DEEP, {"step": 2, "loss": 0.5}, '{"step": 3, "x": ' + DEEP])
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert "2 lines not read" in text and "lines 2, 4" in text, text
    assert "![train loss](plots/train-loss.png)" in text


def test_read_metrics_skips_a_line_nested_too_deep(tmp_path: Path) -> None:
    """`read_metrics` (ELECTRA's collapse watch reads it) and `metric_lines` raised RecursionError."""
    path = write_metrics(tmp_path, [{"step": 1, "loss": 1.0}, DEEP, {"step": 2, "loss": "NaN"}])
    records = read_metrics(path)
    assert [r["step"] for r in records] == [1, 2] and records[1]["loss"] != records[1]["loss"]
    assert [record["step"] for _, record in metric_lines(path.read_text())] == [1, 2]


def test_read_metrics_reads_a_line_at_a_time(tmp_path: Path) -> None:
    """The file was read into one string and split into a list of lines: 10 MB of text held twice over
    to keep two small records. Now memory follows the records and the longest line."""
    line = json.dumps({"note": "x" * 100_000})[:-2]  # a torn line: not read, not kept
    path = write_metrics(tmp_path, [{"step": 1, "loss": 1.0}, *[line] * 100, {"step": 2, "loss": 0.5}])
    tracemalloc.start()
    try:
        records = read_metrics(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [r["step"] for r in records] == [1, 2]
    assert peak < 2_000_000, peak  # was about 30 MB


def test_a_dollar_in_a_name_does_not_lose_its_plot(tmp_path: Path) -> None:
    """matplotlib reads text between two `$` as TeX: a task named `$x^$` (in the legend of two runs) or a
    metric `$\\frac{$` made a ValueError, and the curve was not drawn ("curve not drawn" with a parser trace as its reason)."""
    write_metrics(
        tmp_path,
        [{"step": s, "task": t, "loss": 1.0 / s} for t in ("$x^$", "b") for s in (1, 2)]
        + [{"step": s, "$\\frac{$": 1.0} for s in (1, 2)],
    )
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert "not drawn" not in text, text
    assert len(list((tmp_path / "plots").glob("*.png"))) == 2


def test_runs_past_the_cap_of_a_plot_are_left_out_and_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run of a metric was one line of its plot: 1,000 runs took 25 s to draw, into a legend no
    one can read, and 10,000 several minutes, after the stage had ended. Now a plot draws
    MAX_LINES of them and the report says how many it left out."""
    monkeypatch.setattr(report, "MAX_LINES", 3, raising=False)
    drawn: list[int] = []
    thin = report._thin
    monkeypatch.setattr(report, "_thin", lambda steps, values: drawn.append(len(steps)) or thin(steps, values))
    write_metrics(tmp_path, [{"step": s, "task": f"t{i}", "loss": 1.0} for i in range(5) for s in (1, 2)])
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert len(drawn) == 3
    assert "- train loss: 2 of 5 runs not drawn (at most 3 a plot" in text, text


def test_plots_past_the_cap_of_a_report_are_left_out_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One PNG per metric: 10,000 metrics in a line meant 10,000 plots, most of an hour of drawing
    after the stage ended. Now a report draws MAX_PLOTS and names the first of the rest."""
    monkeypatch.setattr(report, "MAX_PLOTS", 2, raising=False)
    write_metrics(tmp_path, [{"step": s, **{f"m{i}": 1.0 for i in range(4)}} for s in (1, 2)])
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert sorted(p.name for p in (tmp_path / "plots").glob("*.png")) == ["train-m0.png", "train-m1.png"]
    assert "- 2 more plots not drawn (at most 2 a report): train m2, train m3" in text, text


def test_a_metric_with_no_finite_value_takes_no_place_under_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An all-NaN metric has no curve to draw: it is counted under "values not finite", and must not use
    up one of the MAX_PLOTS places of a metric that has one."""
    monkeypatch.setattr(report, "MAX_PLOTS", 1, raising=False)
    write_metrics(tmp_path, [{"step": s, "a": "NaN", "b": 1.0} for s in (1, 2)])
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert "![train b](plots/train-b.png)" in text and "more plots not drawn" not in text, text
    assert "- train a: 2 of 2 values not finite" in text


def test_an_error_drawing_a_curve_is_one_line_of_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """matplotlib's errors span lines (a TeX parser's trace: the text, a caret, the expectation): put in
    the report as they were, they broke its list into stray indented paragraphs."""

    def fail(*_: object) -> None:
        raise ValueError("\nx^\n  ^\nParseSyntaxException: Expected something")

    monkeypatch.setattr(report, "_plot", fail)
    write_metrics(tmp_path, [{"step": 1, "loss": 1.0}])
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert "- train loss: curve not drawn (ValueError: x^ ^ ParseSyntaxException: Expected something)\n" in text, text


def test_thinning_a_curve_in_step_order_does_not_copy_it(tmp_path: Path) -> None:
    """`_thin` sorted the indices of every curve by step: for a million-step log a list of indices and
    one of keys, four times the memory of the curve itself, though a curve is logged in step order."""
    from array import array

    steps = array("d", range(300_000))
    values = array("d", (float(i % 97) for i in range(300_000)))
    tracemalloc.start()
    try:
        xs, ys = report._thin(steps, values)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert xs[0] == 0 and xs[-1] == 299_999 and len(xs) <= report.MAX_POINTS and max(ys) == 96
    assert peak < 1_000_000, peak  # was about 20 MB


def test_a_very_long_name_is_shortened_on_its_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A metric or run name of any length went whole into the plot's title, axis label and legend:
    matplotlib lays text out at about 6 s per 30,000 characters, for a plot 540 pixels wide. Now a plot
    shows MAX_TEXT characters of a name; report.md keeps it whole."""
    from matplotlib.figure import Figure

    shown: list[str] = []
    savefig = Figure.savefig

    def spy(fig: Figure, *args: object, **kwargs: object) -> None:
        ax = fig.axes[0]
        shown.extend([ax.get_title(), ax.get_ylabel(), *(t.get_text() for t in ax.get_legend().get_texts())])
        savefig(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", spy)
    metric, task = "m" * 5000, "t" * 5000
    write_metrics(tmp_path, [{"step": s, "task": t, metric: 1.0} for t in (task, "b") for s in (1, 2)])
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert f"![train {metric}](plots/" in text
    assert len(shown) == 4 and max(map(len, shown)) <= 100, [len(s) for s in shown]
    assert shown[1] == "m" * 99 + "…" and shown[2] == "task=b"

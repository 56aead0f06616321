"""report.md per stage: a summary of the final metrics plus training-curve plots.

Built from the stage's metrics.jsonl after the stage ends (also when it fails), plus the
Markdown sections the stage added with `ctx.report(...)`. Plots use matplotlib's Agg backend (no
display needed): one PNG per metric and split, one line per run within the stage (e.g. per
trial or task), so curves of several seeds can be compared at a glance; at most `MAX_PLOTS` plots
of `MAX_LINES` runs each, and the report says what it left out. `XFER_REPORT_PLOTS=0`
skips drawing them (about a second of CPU per stage: test suites and quick runs set it).
Values that cannot be drawn (NaN, infinite: a diverged run) are counted under "Values not drawn",
whether a line holds them as Python's bare NaN/Infinity tokens or as strict JSON's strings
"NaN"/"Infinity"/"-Infinity" (`metric_json`, `xfer.core.results.strict_json`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from array import array
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from xfer.core.atomic import atomic_write_text, atomic_write_with
from xfer.core.results import json_number, strict_json

TAGS_KEY = "tags"
"""The key of a metrics.jsonl record that lists the names of its run's tags (`ctx.events(**tags)`),
written only when there are tags: without it a numeric tag (`fold=2`, `seed=7`) could not be told
from a metric, was drawn as a curve of its own and merged the runs' curves into one."""

_SKIP = {"step", "split", "time", "epoch", TAGS_KEY}


def _tag_names(record: dict[str, Any]) -> set[str]:
    """The keys `record` says are tags (none in a record written before `TAGS_KEY` existed)."""
    names = record.get(TAGS_KEY)
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The records of a metrics.jsonl; a line torn by a kill in mid-append is skipped. A value
    written as strict JSON's "NaN"/"Infinity"/"-Infinity" is read as the float, as a bare token is."""
    if not path.exists():
        return []
    # a line at a time: read whole, a long file was held as one string and again as a list of lines
    with open(path, encoding="utf-8", errors="replace") as lines:
        return [{k: json_number(v) for k, v in record.items()} for _, record in _object_lines(lines)]


def metric_json(record: dict[str, Any]) -> str:
    """One metrics.jsonl line in strict JSON: a NaN/inf value (a diverged loss) as its name
    ("NaN", "Infinity"), which the readers here take back as the float; Python's bare NaN token
    made the file unreadable to `jq`, JavaScript and Go."""
    return json.dumps(strict_json(record), allow_nan=False)


def metric_lines(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(line, record) for every complete JSON object line of a metrics.jsonl text."""
    return list(_object_lines(text.splitlines()))


def _object_lines(lines: Iterable[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(line, record) for every line of `lines` that is a JSON object."""
    for line in lines:
        record = _parsed(line)
        if isinstance(record, dict):
            yield line, record


def _parsed(line: str) -> Any:
    """`line` as JSON, or None if it is none: also a line nested too deep for the parser (100,000
    `[` raised RecursionError, not ValueError, and failed the report of a stage that had completed,
    at every re-run, where any other damaged line is listed as not read)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


MAX_POINTS = 2000
"""Points drawn per curve at most (about): a 540-pixel-wide plot shows no more. A long metrics.jsonl
was once read whole and every record kept as a dict (285 MB of memory for 200,000 lines), and every
point drawn."""


MAX_UNREAD = 10
"""Line numbers of unreadable metrics.jsonl lines that report.md lists at most."""


MAX_PLOTS = 50
"""Plots one report.md draws at most (about a quarter of a second each), the rest named as not drawn:
10,000 metrics once meant 10,000 PNGs and most of an hour of drawing after the stage had ended."""


MAX_LINES = 20
"""Curves (runs) one plot draws at most, the rest counted as not drawn: no legend shows more, and 1,000
runs of one metric took 25 s to draw in one plot."""


Curves = dict[tuple[str, str], dict[str, tuple[array, array]]]
"""(split, metric) -> curve label -> (steps, values), as compact float arrays."""


def _number(value: Any) -> float | None:
    """`value` as a float if it is a number (not a bool), or the name strict JSON gives a number that
    is not finite ("NaN", "Infinity"); an int too large for a float is inf."""
    value = json_number(value)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except OverflowError:  # a 400-digit integer: once an OverflowError that dropped every curve
        return math.inf


def _plottable(record: dict[str, Any]) -> bool:
    """Whether a record can be placed on a curve: a finite numeric step and a string split (or none).
    metrics.jsonl is a plain text file in the run directory; a hand-edited or damaged line
    without them (`{"split": "train", "loss": 1}`) once made the report raise KeyError after
    the stage had finished, so the stage never completed and every re-run failed the same way."""
    step, split = _number(record.get("step")), record.get("split", "train")
    return step is not None and math.isfinite(step) and isinstance(split, str)


def series_key(record: dict[str, Any]) -> str:
    """Records with the same tags form one curve: the keys the record lists under `TAGS_KEY`, else (a
    record written before it) its non-numeric values (task, ...) and trial number ("NaN" is a number:
    `metric_json`'s spelling of one). A (split, series, step) is logged once by one run; twice, it
    was re-logged by a resumed attempt (see `latest_points`)."""
    named = _tag_names(record)
    tags = {
        k: v
        for k, v in record.items()
        if k in named or (k not in _SKIP and (k == "trial" or not isinstance(json_number(v), (int, float))))
    }
    return ", ".join(f"{k}={v}" for k, v in sorted(tags.items())) or "run"


def _read_curves(path: Path) -> tuple[Curves, dict[tuple[str, str], int], bool, tuple[int, list[int]]]:
    """(curves, count of values that are not finite per (split, metric), whether any record was
    plottable, (count, first MAX_UNREAD numbers) of the non-blank lines that are no plottable record),
    reading metrics.jsonl a line at a time: memory grows with the numbers, not the text. A record
    without a split is a train record (as `_plottable` reads it). A step of a curve logged twice
    counts once, at its last value (`latest_points`), also among the values that are not finite."""
    curves: Curves = defaultdict(dict)
    not_finite: dict[tuple[str, str], int] = defaultdict(int)
    any_record = False
    unread: list[int] = []
    unread_count = 0
    if not path.exists():
        return curves, not_finite, any_record, (unread_count, unread)
    with open(path, encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            record = _parsed(line)
            if not isinstance(record, dict) or not _plottable(record):
                if line.strip():  # a hand-edited or damaged line: its points were left out without a word
                    unread_count += 1
                    if len(unread) < MAX_UNREAD:
                        unread.append(number)
                continue
            any_record = True
            split, step, label = record.get("split", "train"), float(record["step"]), None
            tags = _tag_names(record)
            for k, v in record.items():
                value = _number(v)
                if k in _SKIP or k == "trial" or k in tags or value is None:
                    continue
                label = label or series_key(record)
                steps, values = curves[split, k].setdefault(label, (array("d"), array("d")))
                steps.append(step)
                values.append(value)
    for key, series in curves.items():
        for label in list(series):
            steps, values = latest_points(*series[label])
            if not all(map(math.isfinite, values)):  # the metric stays a key even if no value of it is drawn
                finite = [i for i, value in enumerate(values) if math.isfinite(value)]
                not_finite[key] += len(values) - len(finite)
                steps, values = array("d", (steps[i] for i in finite)), array("d", (values[i] for i in finite))
            if steps:
                series[label] = (steps, values)
            else:
                del series[label]
    return curves, not_finite, any_record, (unread_count, unread)


def latest_points(steps: array, values: array) -> tuple[array, array]:
    """The points of one curve with each step once, at the value logged last: a stage resumed without
    an intact checkpoint by xfer before 2026-11-27 logged its steps again after the killed attempt's
    (`RunLog` now drops those first), and both were drawn, a zigzag between two runs' values at
    every step, and counted twice among the values not drawn."""
    if all(a < b for a, b in pairwise(steps)):  # the usual curve: no dict of every step to check that
        return steps, values
    last = {step: index for index, step in enumerate(steps)}
    if len(last) == len(steps):
        return steps, values
    keep = sorted(last.values())
    return array("d", (steps[i] for i in keep)), array("d", (values[i] for i in keep))


def _thin(steps: array, values: array) -> tuple[list[float], list[float]]:
    """The points of one curve in step order, at most about MAX_POINTS: of each bucket of
    consecutive steps its first, lowest, highest and last point, so a spike stays visible and the
    curve spans every step. A curve logged in step order (the usual one) is not sorted: the list of its
    indices and their sort keys took four times the memory of the curve itself (70 MB a million steps)."""
    in_order = all(a <= b for a, b in pairwise(steps))
    order: Sequence[int] = range(len(steps)) if in_order else sorted(range(len(steps)), key=steps.__getitem__)
    if len(order) <= MAX_POINTS:
        return [steps[i] for i in order], [values[i] for i in order]
    keep: list[int] = []
    buckets = MAX_POINTS // 4
    for b in range(buckets):
        chunk = order[b * len(order) // buckets : (b + 1) * len(order) // buckets]
        low, high = min(chunk, key=values.__getitem__), max(chunk, key=values.__getitem__)
        keep += sorted({chunk[0], low, high, chunk[-1]}, key=chunk.index)
    return [steps[i] for i in keep], [values[i] for i in keep]


def _plot(series: dict[str, tuple[array, array]], split: str, metric: str, out: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not series:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    try:  # closed also when drawing fails: pyplot keeps every open figure (and warns past 20)
        for label, (steps, values) in sorted(series.items())[:MAX_LINES]:
            xs, ys = _thin(steps, values)
            ax.plot(xs, ys, label=_literal(label), marker="o" if len(xs) < 30 else None, markersize=3)
        ax.set_xlabel("step")
        ax.set_ylabel(_literal(metric))
        ax.set_title(_literal(f"{split} {metric}"))
        if len(series) > 1:
            ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        out.parent.mkdir(parents=True, exist_ok=True)
        # through a temporary file: a stage killed while drawing must not leave a torn PNG behind
        atomic_write_with(out, lambda tmp: fig.savefig(tmp, dpi=90, format="png"))
    finally:
        plt.close(fig)
    return out


MAX_TEXT = 100
"""Characters of a name (metric, run) a plot shows at most: a 540-pixel-wide plot shows fewer, and
laying out a 200,000-character name took matplotlib 37 s a plot."""


def _literal(text: str) -> str:
    """`text` as matplotlib shows it as written (and at most MAX_TEXT characters of it): between two `$`
    it reads TeX math, and a name that is no valid math there (a task `$x^$`, a metric `$\\frac{$`)
    failed its whole plot."""
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - 1] + "…"
    return text.replace("$", r"\$")


def _plot_name(split: str, metric: str, taken: set[str]) -> str:
    """A file name for the plot of `metric`, unique within the report: `dev f1/x` and `dev f1_x`
    once both became dev-f1_x.png, the second curve drawn over the first under both links.

    At most 120 characters before ".png" (a longer name gets its number there too): a 300-character
    metric name made a file name the file system refused (ENAMETOOLONG), and that OSError failed
    the stage after it had trained, at every re-run."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{split}-{metric}")[:120]
    name, n = f"{safe}.png", 1
    while name.lower() in taken:  # lower: a case-insensitive file system would merge them too
        n += 1
        name = f"{safe}-{n}.png"
    taken.add(name.lower())
    return name


def write_report(stage_dir: Path, title: str, header: dict[str, str], sections: list[str]) -> Path:
    """Write `stage_dir/report.md` (and `plots/*.png`); returns the report path."""
    curves, not_finite, any_record, (unread_count, unread) = _read_curves(stage_dir / "metrics.jsonl")
    lines = [f"# {title}", ""]
    lines += [f"- **{k}**: {v}" for k, v in header.items()]
    lines.append("")
    lines += [s.rstrip() + "\n" for s in sections]
    plots = []
    taken: set[str] = set()
    draw = os.environ.get("XFER_REPORT_PLOTS", "1") != "0"
    failed: list[str] = []
    wanted = [(split, m) for split in ("train", "dev") if draw for m in sorted(m for s, m in curves if s == split)]
    wanted = [key for key in wanted if curves[key]]  # a metric with no finite value has nothing to draw
    # the caps: what a plot cannot show, and drawing that would take longer than the stage did
    failed += _left_out(wanted, curves)
    for split, metric in wanted[:MAX_PLOTS]:
        out = stage_dir / "plots" / _plot_name(split, metric, taken)
        try:
            made = _plot(curves[split, metric], split, metric, out)
        except (ValueError, ArithmeticError) as error:
            # matplotlib cannot scale an axis over finite values whose range overflows a float
            # (1e308 and -1e308): the report was then written without any curve at all
            problem = " ".join(str(error).split())  # one list item: matplotlib's messages span lines
            failed.append(f"- {split} {metric}: curve not drawn ({type(error).__name__}: {problem})")
            continue
        if made:
            plots.append((split, metric, made))
    if plots:
        lines += ["## Training curves", ""]
        lines += [f"![{split} {metric}](plots/{path.name})" for split, metric, path in plots]
        lines.append("")
    if not_finite or failed or unread_count:
        # a diverged run's NaN/inf losses cannot be drawn; unsaid, its curve just ended early (or,
        # every value NaN, the report showed nothing at all)
        lines += ["## Values not drawn", ""]
        for (split, metric), count in sorted(not_finite.items()):
            total = count + sum(len(steps) for steps, _ in curves[split, metric].values())
            lines.append(f"- {split} {metric}: {count} of {total} values not finite (NaN or infinite)")
        if unread_count:
            shown = ", ".join(map(str, unread)) + (", ..." if unread_count > len(unread) else "")
            plural = "s" if unread_count > 1 else ""
            lines.append(
                f"- metrics.jsonl: {unread_count} line{plural} not read (not a JSON object with a finite step "
                f"and a string split): line{plural} {shown}"
            )
        lines += [*failed, ""]
    if any_record and not draw:
        lines += ["_Training curves not drawn (XFER_REPORT_PLOTS=0)._", ""]
    if not any_record and not unread_count:
        lines.append("_No metrics were logged._")
    path = stage_dir / "report.md"
    earlier = _linked_plots(path)
    text = "\n".join(lines) + "\n"
    atomic_write_text(path, text)
    _remove_unlinked(stage_dir / "plots", earlier - _linked_plots_in(text))
    return path


def _left_out(wanted: list[tuple[str, str]], curves: Curves) -> list[str]:
    """Report lines for what the caps leave undrawn: the runs past MAX_LINES in a plot, the plots
    past MAX_PLOTS (the first few named)."""
    notes = []
    for split, metric in wanted[:MAX_PLOTS]:
        runs = len(curves[split, metric])
        if runs > MAX_LINES:
            notes.append(
                f"- {split} {metric}: {runs - MAX_LINES} of {runs} runs not drawn (at most {MAX_LINES} a plot; "
                f"drawn: the first by name)"
            )
    rest = wanted[MAX_PLOTS:]
    if rest:
        named = ", ".join(f"{split} {metric}" for split, metric in rest[:MAX_UNREAD])
        more = ", ..." if len(rest) > MAX_UNREAD else ""
        notes.append(f"- {len(rest)} more plots not drawn (at most {MAX_PLOTS} a report): {named}{more}")
    return notes


_PLOT_LINK = re.compile(r"\]\(plots/([A-Za-z0-9_.-]+\.png)\)")
"""A link of report.md to one of its plots (`_plot_name` makes only these characters)."""


def _linked_plots(report: Path) -> set[str]:
    """The plot files an earlier report.md linked: the ones the report made and owns."""
    try:
        return _linked_plots_in(report.read_text(encoding="utf-8", errors="replace"))
    except OSError:  # no earlier report (or unreadable: nothing known to be the report's)
        return set()


def _linked_plots_in(text: str) -> set[str]:
    return set(_PLOT_LINK.findall(text))


def _remove_unlinked(folder: Path, names: set[str]) -> None:
    """Delete the plots an earlier report linked that this one does not: a re-run (a resume, another
    config, plots switched off) left the curves of the earlier attempt in plots/, next to the new
    ones and unlinked, where they read as this run's. Only those exact names: files others put in
    plots/ are not the report's to delete. Done after report.md is replaced, so a kill in between
    leaves at worst an unlinked file, never a report linking a missing one."""
    for name in sorted(names):
        plot = folder / name
        if plot.is_file() or plot.is_symlink():  # a folder of that name is nothing the report drew
            with contextlib.suppress(FileNotFoundError):
                plot.unlink()

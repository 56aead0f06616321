"""report.md per stage: a summary of the final metrics plus training-curve plots.

Built from the stage's metrics.jsonl after the stage ends (also when it fails), plus the
Markdown sections the stage added with `ctx.report(...)`. Plots use matplotlib's Agg backend (no
display needed): one PNG per metric and split, one line per run within the stage (e.g. per
trial or task), so curves of several seeds can be compared at a glance. `XFER_REPORT_PLOTS=0`
skips drawing them (about a second of CPU per stage: test suites and quick runs set it).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from xfer.core.atomic import atomic_write_text

_SKIP = {"step", "split", "time", "epoch"}


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The records of a metrics.jsonl; a line torn by a kill in mid-append is skipped."""
    if not path.exists():
        return []
    return [record for _, record in metric_lines(path.read_text(encoding="utf-8", errors="replace"))]


def metric_lines(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(line, record) for every complete JSON object line of a metrics.jsonl text."""
    found = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            found.append((line, record))
    return found


def _plottable(record: dict[str, Any]) -> bool:
    """Whether a record can be placed on a curve: a numeric step and a string split (or none).
    metrics.jsonl is a plain text file in the run directory; a hand-edited or damaged line
    without them (`{"split": "train", "loss": 1}`) once made the report raise KeyError after
    the stage had finished, so the stage never completed and every re-run failed the same way."""
    step, split = record.get("step"), record.get("split", "train")
    return isinstance(step, (int, float)) and not isinstance(step, bool) and isinstance(split, str)


def _series_key(record: dict[str, Any]) -> str:
    """Records with the same non-numeric tags (task, ...) and trial number form one curve."""
    tags = {k: v for k, v in record.items() if k not in _SKIP and (k == "trial" or not isinstance(v, (int, float)))}
    return ", ".join(f"{k}={v}" for k, v in sorted(tags.items())) or "run"


def _plot(records: list[dict[str, Any]], split: str, metric: str, out: Path) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in records:
        value = r.get(metric)
        if r.get("split") == split and isinstance(value, (int, float)) and math.isfinite(value):
            series[_series_key(r)].append((r["step"], float(value)))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, points in sorted(series.items()):
        steps, values = zip(*sorted(points), strict=True)
        ax.plot(steps, values, label=label, marker="o" if len(points) < 30 else None, markersize=3)
    ax.set_xlabel("step")
    ax.set_ylabel(metric)
    ax.set_title(f"{split} {metric}")
    if len(series) > 1:
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def write_report(stage_dir: Path, title: str, header: dict[str, str], sections: list[str]) -> Path:
    """Write `stage_dir/report.md` (and `plots/*.png`); returns the report path."""
    records = [r for r in read_metrics(stage_dir / "metrics.jsonl") if _plottable(r)]
    lines = [f"# {title}", ""]
    lines += [f"- **{k}**: {v}" for k, v in header.items()]
    lines.append("")
    lines += [s.rstrip() + "\n" for s in sections]
    metrics_by_split: dict[str, set[str]] = defaultdict(set)
    for r in records:
        for k, v in r.items():
            if k not in _SKIP and isinstance(v, (int, float)) and not isinstance(v, bool) and k != "trial":
                metrics_by_split[r.get("split", "train")].add(k)
    plots = []
    draw = os.environ.get("XFER_REPORT_PLOTS", "1") != "0"
    for split in ("train", "dev") if draw else ():
        for metric in sorted(metrics_by_split.get(split, ())):
            safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{split}-{metric}")
            made = _plot(records, split, metric, stage_dir / "plots" / f"{safe}.png")
            if made:
                plots.append((split, metric, made))
    if plots:
        lines += ["## Training curves", ""]
        lines += [f"![{split} {metric}](plots/{path.name})" for split, metric, path in plots]
        lines.append("")
    if records and not draw:
        lines += ["_Training curves not drawn (XFER_REPORT_PLOTS=0)._", ""]
    if not records:
        lines.append("_No metrics were logged._")
    path = stage_dir / "report.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path

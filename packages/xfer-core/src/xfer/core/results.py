"""The results of a stage that evaluates models: one layout, one summary, one table.

A stage that reports dev scores writes `outputs/results/results.json`:

    {"<task>": {"main_metric": "<metric>",
                "summary": {"<metric>": {"median", "mean", "std", "min", "max"}, ...},
                "runs": [{"trial": 0, "seed": 1, "<metric>": 87.5, ...}, ...]}, ...}

Every score is in percent (see `xfer.core.metrics`); `summary` covers metrics only, never the
bookkeeping a run record also carries. `xfer results` and the end of `xfer run` print these
files as one Markdown table, so users and docs/results.md read numbers from runs, never copy
them by hand. Torch-free: the CLI reads results without loading a model stack.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from xfer.core.errors import UserError

BOOKKEEPING = frozenset({"trial", "seed", "steps", "checkpoint", "seconds"})
"""Keys of a run record that describe the run rather than score it."""

RESULTS_FILE = Path("outputs") / "results" / "results.json"

HEADER = (
    "| stage | task | main metric | median | mean ± std | min–max | runs | other metrics (median) |\n"
    "|---|---|---|---|---|---|---|---|"
)


def summarize(runs: list[dict[str, Any]], metrics: Iterable[str] | None = None) -> dict[str, dict[str, float]]:
    """median / mean / std (sample; 0 for one run) / min / max of each metric over runs.

    `metrics` defaults to every numeric key of the runs that is not bookkeeping."""
    if metrics is None:
        metrics = [k for k, v in (runs[0] if runs else {}).items() if k not in BOOKKEEPING and _number(v)]
    out: dict[str, dict[str, float]] = {}
    for metric in metrics:
        if metric in BOOKKEEPING:
            continue
        values = [r[metric] for r in runs if _number(r.get(metric))]
        if not values:
            continue
        out[metric] = {
            "median": statistics.median(values),
            "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values),
            "max": max(values),
        }
    return out


def task_result(main_metric: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One task's entry of results.json."""
    return {"main_metric": main_metric, "summary": summarize(runs), "runs": runs}


def read_results(stage_dir: Path) -> dict[str, Any] | None:
    """A stage's results.json in the layout above; None when the stage wrote none (yet)."""
    path = stage_dir / RESULTS_FILE
    if not path.is_file():
        return None
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{path}: unreadable results file ({error})") from None
    if not isinstance(results, dict) or not all(_is_task_result(v) for v in results.values()):
        raise UserError(
            f"{path}: not a results file of the layout in xfer.core.results (task -> main_metric/summary/runs)"
        )
    return results


def plus_minus(std: float, count: int) -> str:
    """ " ± std" after a mean: one decimal, or two below 0.1 (seeds that agree closely should not
    read "± 0.0"); nothing for a single run, whose std is undefined, not zero."""
    if count < 2:
        return ""
    return f" ± {std:.2f}" if 0 < std < 0.1 else f" ± {std:.1f}"


def markdown_rows(stage: str, results: dict[str, Any]) -> list[str]:
    """One table row per task: main metric's median (the GLUE protocol), mean ± std, range, runs."""
    rows = []
    for task, result in results.items():
        main = result["main_metric"]
        summary = result["summary"]
        s = summary.get(main)
        if s is None:
            rows.append(f"| {stage} | {task} | {main} | (no value) | | | {len(result['runs'])} | |")
            continue
        others = ", ".join(f"{m} {v['median']:.1f}" for m, v in summary.items() if m != main)
        rows.append(
            f"| {stage} | {task} | {main} | **{s['median']:.1f}** | {s['mean']:.1f}{plus_minus(s['std'], len(result['runs']))} "
            f"| {s['min']:.1f}–{s['max']:.1f} | {len(result['runs'])} | {others} |"
        )
    return rows


def stage_dirs_of(paths: Iterable[Path]) -> list[Path]:
    """Stage folders named directly, or every stage folder (with a stage.json) of a run folder."""
    found: list[Path] = []
    for path in paths:
        if (path / "stage.json").is_file() or (path / RESULTS_FILE).is_file():
            found.append(path)
        elif path.is_dir():
            found += [path / name for name in _stage_order(path) if (path / name / "stage.json").is_file()]
        else:
            raise UserError(f"{path}: no such run or stage folder")
    return found


def results_table(paths: Iterable[Path]) -> str | None:
    """The Markdown table of every stage with results under `paths`; None when none has any."""
    rows: list[str] = []
    for stage_dir in stage_dirs_of(paths):
        results = read_results(stage_dir)
        if results:
            rows += markdown_rows(stage_dir.name, results)
    return "\n".join([HEADER, *rows]) if rows else None


def _stage_order(run_dir: Path) -> list[str]:
    """The run's stages in recipe order (from recipe.resolved.yaml), else alphabetically."""
    import yaml

    try:
        stages = yaml.safe_load((run_dir / "recipe.resolved.yaml").read_text(encoding="utf-8"))["stages"]
        return [str(name) for name in stages]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, TypeError, KeyError):
        return sorted(p.parent.name for p in run_dir.glob("*/stage.json"))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_task_result(value: Any) -> bool:
    return isinstance(value, dict) and {"main_metric", "summary", "runs"} <= set(value)

"""Print a Markdown table of `cvt.train` results with the thesis's statistic (what docs/results.md is built from).

    python -m xfer.cvt.results runs/cvt-chunking/*/ runs/cvt-ner/*/

`xfer results` prints medians (the GLUE protocol); the CVT chapter reports means over seeds, so
this table leads with mean ± sample std, then min–max, the per-trial values, the other metrics'
means and the mean training time per trial. It reads the shared results.json layout
(`xfer.core.results`); stages without one (not finished) are listed as such.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

from xfer.core.results import read_results


def task_row(stage: str, task: str, result: dict[str, Any]) -> str:
    main, runs, summary = result["main_metric"], result["runs"], result["summary"]
    values = [r[main] for r in runs if isinstance(r.get(main), (int, float))]
    if not values:
        return f"| {stage} | {task} {main} | (no value) | | | {len(runs)} | | |"
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    others = ", ".join(f"{m} {s['mean']:.1f}" for m, s in summary.items() if m != main)
    per_trial = " / ".join(f"{v:.1f}" for v in values)
    minutes = statistics.fmean(float(r.get("seconds", 0.0)) for r in runs) / 60
    return (
        f"| {stage} | {task} {main} | **{mean:.1f}** ± {std:.1f} | {min(values):.1f}–{max(values):.1f} | "
        f"{per_trial} | {len(values)} | {others} | {minutes:.1f} |"
    )


def stage_rows(stage: Path) -> list[str]:
    results = read_results(stage)
    if results is None:
        return [f"| {stage.name} | (not finished) | | | | | | |"]
    return [task_row(stage.name, task, result) for task, result in results.items()]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    print("| stage | task / metric | mean ± std | min–max | per trial | trials | other metrics (mean) | min/trial |")
    print("|---|---|---|---|---|---|---|---|")
    for folder in argv:
        for line in stage_rows(Path(folder)):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

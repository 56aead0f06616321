"""Print a Markdown table of `cvt.train` results (what docs/results.md is built from).

    python -m xfer.cvt.results runs/cvt-chunking/*/ runs/cvt-ner/*/

One row per (stage, task): the task's main metric, mean ± sample std over trials (the thesis
reports means), min–max, the per-trial values, the other metrics' means, and the mean training
time per trial. Stages without a results.json (not finished) are listed as such.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

BOOKKEEPING = {"trial", "seed", "steps", "checkpoint", "seconds"}


def stage_rows(stage: Path) -> list[str]:
    path = stage / "outputs" / "results" / "results.json"
    if not path.is_file():
        return [f"| {stage.name} | (not finished) | | | | | | |"]
    results: dict[str, Any] = json.loads(path.read_text())
    runs = results["runs"]
    numeric = [k for k, v in runs[0].items() if k not in BOOKKEEPING and isinstance(v, (int, float))]
    multitask = any(k.count("/") >= 2 for k in numeric)  # "<namespace>/<task>/<metric>" keys
    groups: dict[str, list[str]] = {}
    for key in numeric:
        task = key.rpartition("/")[0] if multitask and key.count("/") >= 2 else ("all tasks" if multitask else "")
        groups.setdefault(task, []).append(key)
    seconds = statistics.fmean(r.get("seconds", 0.0) for r in runs)
    lines = []
    for task, keys in groups.items():
        if task == "all tasks":
            main = "mean"
        elif task:
            declared = results.get("task_metrics", {}).get(task)
            main = (
                f"{task}/{declared}"
                if declared
                else next((k for k in keys if k.endswith(("/f1", "/las", "/bleu", "/accuracy"))), keys[0])
            )
        else:
            main = results["main_metric"]
        values = [r[main] for r in runs]
        mean = statistics.fmean(values)
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        others = ", ".join(
            f"{k.rsplit('/', 1)[-1]} {statistics.fmean(r[k] for r in runs):.1f}" for k in keys if k != main
        )
        per_trial = " / ".join(f"{v:.1f}" for v in values)
        lines.append(
            f"| {stage.name} | {task or '–'} {main.rsplit('/', 1)[-1]} | **{mean:.1f}** ± {std:.1f} | "
            f"{min(values):.1f}–{max(values):.1f} | {per_trial} | {len(runs)} | {others} | {seconds / 60:.1f} |"
        )
    return lines


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

"""Print a Markdown table of fine-tuning results from finetune stages' results.json files.

    python tools/results_table.py runs/finetune-glue/finetune runs/finetune-conll/finetune

One row per task: the main metric's median over runs (the GLUE protocol), mean +- std, min-max
and the number of runs, plus the other metrics' medians. Used to build docs/results.md from
real runs instead of copying numbers by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def rows(stage_dir: Path) -> list[str]:
    path = stage_dir / "outputs" / "results" / "results.json"
    if not path.is_file():
        raise SystemExit(f"error: {path} does not exist: is {stage_dir} a finished finetune stage?")
    results = json.loads(path.read_text())
    lines = []
    for task, result in results.items():
        main = result["main_metric"]
        s = result["summary"][main]
        others = ", ".join(
            f"{m} {v['median']:.1f}" for m, v in result["summary"].items() if m != main
        )
        lines.append(
            f"| {task} | {main} | **{s['median']:.1f}** | {s['mean']:.1f} ± {s['std']:.1f} | {s['min']:.1f}–{s['max']:.1f} "
            f"| {len(result['runs'])} | {others} |"
        )
    return lines


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    print("| task | main metric | median | mean ± std | min–max | runs | other metrics (median) |")
    print("|---|---|---|---|---|---|---|")
    for folder in argv:
        for line in rows(Path(folder)):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

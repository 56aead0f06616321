"""`xfer compare`: systems over seeds, as in the thesis's Table 3.1.

A *system* is a stage that wrote `outputs/results/results.json` (every run's dev metrics, with
its seed) and `outputs/results/dev/<task>/` (gold answers, and each run's per-example dev
predictions): `bam.teachers` (the Single system) and `bam.student` (Multi, Single→Multi, ...).

Printed (and written to OUT/compare.md, with OUT/compare.json and OUT/compare.png):
- per task and system: the median over seeds of the main metric, mean ± std, number of runs;
- the Table 3.1 view: medians and their average over tasks, starred where the system beats
  EVERY baseline significantly (Holm-Bonferroni-corrected paired bootstrap, see `xfer.bam.stats`);
- every test: Δ (seed-averaged metric difference), its 95% bootstrap interval, p and Holm's p,
  and on how many shared seeds the system beat the baseline;
- a plot: every run's score per task and system, with the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xfer.bam import stats
from xfer.bam.naming import module_name
from xfer.core.atomic import atomic_write_text, write_json
from xfer.core.errors import UserError
from xfer.core.results import RESULTS_FILE, plus_minus, read_results

AVERAGE = "average"


@dataclass
class TaskRuns:
    """One system's runs on one task."""

    task: str
    main_metric: str
    seeds: list[int]
    scores: list[float]  # the main metric of each run
    metric: stats.Metric  # resampling metric over the same runs
    gold_digest: str  # identifies the dev set (ids and gold answers)


@dataclass
class System:
    name: str
    folder: Path
    tasks: dict[str, TaskRuns] = field(default_factory=dict)

    def median(self, task: str) -> float:
        return statistics.median(self.tasks[task].scores)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: unreadable ({exc})") from exc


def stage_folders(folder: Path) -> list[Path]:
    """`folder` itself when it is a stage with results, else its stages that have results (a run
    folder), in the recipe's stage order: the first one is the default baseline, and in a BAM run
    that is the single-task teachers (alphabetical order made it `distill`, flipping every sign)."""
    if (folder / "outputs" / "results" / "results.json").is_file():
        return [folder]
    found = (
        sorted(
            (p for p in folder.iterdir() if (p / "outputs" / "results" / "dev").is_dir()),
            key=_recipe_order(folder),
        )
        if folder.is_dir()
        else []
    )
    if not found:
        raise UserError(
            f"{folder}: no outputs/results/results.json here or in a stage folder below (is it a bam stage or run?)"
        )
    return found


def _recipe_order(run: Path) -> Any:
    """Sort key of a run's stage folders: their position in its `recipe.resolved.yaml`, then name."""
    import yaml

    try:
        stages = list((yaml.safe_load((run / "recipe.resolved.yaml").read_text(encoding="utf-8")) or {})["stages"])
    except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError):
        stages = []
    return lambda path: (stages.index(path.name) if path.name in stages else len(stages), path.name)


def _field(record: Any, key: str, kind: type | tuple[type, ...], path: Path, where: str) -> Any:
    """`record[key]`, checked to be a `kind`; else an error naming the file and the key (a results
    file edited by hand or cut short must not surface as a KeyError from deep in the statistics)."""
    if not isinstance(record, dict):
        raise UserError(f"{path}: {where}: expected a JSON object, found {type(record).__name__}")
    if key not in record:
        raise UserError(f"{path}: {where}: no {key!r} (not a file written by xfer, or edited since)")
    value = record[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise UserError(f"{path}: {where}.{key}: expected {_kind_name(kind)}, found {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))


def load_system(name: str, folder: Path) -> System:
    import hashlib

    results_path = folder / RESULTS_FILE
    results = read_results(folder)  # the shared reader checks the file's layout
    if not results:
        raise UserError(f"{results_path}: no task results in it")
    system = System(name, folder)
    for task, result in results.items():
        main = _field(result, "main_metric", str, results_path, task)
        runs = _field(result, "runs", list, results_path, task)
        if not runs:
            raise UserError(f"{results_path}: {task}: no runs recorded")
        for i, run in enumerate(runs):
            for key, kind in (("trial", int), ("seed", int), (main, (int, float))):
                _field(run, key, kind, results_path, f"{task}.runs[{i}]")
        runs = sorted(runs, key=lambda r: r["trial"])
        dev = folder / "outputs" / "results" / "dev" / _slug(task)
        if not (dev / "gold.json").is_file():
            raise UserError(f"{dev}: no gold.json: {folder} did not record per-example dev predictions for {task}")
        gold = _read_json(dev / "gold.json")
        kind = _field(gold, "type", str, dev / "gold.json", task)
        ids = _field(gold, "ids", list, dev / "gold.json", task)
        answers = _field(gold, "gold", list, dev / "gold.json", task)
        if len(ids) != len(answers):
            raise UserError(f"{dev / 'gold.json'}: {len(ids)} ids for {len(answers)} gold answers")
        predictions = []
        for run in runs:
            path = dev / f"trial-{run['trial']}.json"
            record = _read_json(path)
            predicted = _field(record, "predictions", list, path, task)
            if len(predicted) != len(ids):
                raise UserError(f"{path}: {len(predicted)} predictions for {len(ids)} examples")
            predictions.append(predicted)
        try:
            metric = stats.build_metric(kind, main, answers, predictions, gold.get("labels", []))
            stats.check_against(metric, [r[main] for r in runs], f"{name}: {task}")
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise UserError(f"{dev}: cannot recompute {main} from the recorded predictions: {exc}") from exc
        digest = hashlib.sha256(json.dumps([ids, answers]).encode()).hexdigest()
        system.tasks[task] = TaskRuns(task, main, [r["seed"] for r in runs], [r[main] for r in runs], metric, digest)
    return system


def _slug(task: str) -> str:
    return module_name(task)


def _split_spec(spec: str) -> tuple[str, str, Path]:
    """NAME=FOLDER or FOLDER. Names may hold '=' ("S2M lambda=0"=runs/x/distill_l0): the split is at
    the first '=' after which an existing folder follows; without one, at the first '='."""
    if Path(spec).exists():
        return "", "", Path(spec)
    for i, char in enumerate(spec):
        if char == "=" and Path(spec[i + 1 :]).exists():
            return spec[:i], "=", Path(spec[i + 1 :])
    name, sep, path = spec.partition("=")
    return name, sep, Path(path if sep else spec)


def parse_systems(specs: list[str]) -> list[System]:
    """Systems in the order given. A NAME given twice is an error (two systems would merge into one
    row); a label derived from folders that clashes is lengthened until it is unique."""
    systems: list[System] = []
    for spec in specs:
        name, sep, folder = _split_spec(spec)
        if not folder.exists():
            raise UserError(f"{folder}: no such folder")
        if sep and not name:
            raise UserError(f"{spec!r}: empty system name before '=' (write NAME=FOLDER or just FOLDER)")
        stages = stage_folders(folder)
        for stage in stages:
            if any(s.folder.resolve() == stage.resolve() for s in systems):
                raise UserError(f"{stage}: the same stage is given twice")
            label = name if sep and len(stages) == 1 else (f"{name}/{stage.name}" if sep else stage.name)
            taken = {s.name for s in systems}
            if label in taken and sep:
                raise UserError(f"system name {label!r} is given twice; give each system its own NAME=")
            for longer in (f"{stage.parent.name}/{stage.name}", str(stage)):
                if label in taken:
                    label = longer
            systems.append(load_system(label, stage))
    return systems


@dataclass
class Comparison:
    system: str
    baseline: str
    task: str  # or AVERAGE
    result: stats.TestResult
    seed_wins: str  # "k/m": shared seeds where the system scored higher


def compare(systems: list[System], baselines: list[str], resamples: int, seed: int) -> list[Comparison]:
    by_name = {s.name: s for s in systems}
    unknown = [b for b in baselines if b not in by_name]
    if unknown:
        raise UserError(f"--baseline {unknown[0]!r} is not a system (systems: {', '.join(by_name)})")
    comparisons = []
    for system in systems:
        if system.name in baselines:
            continue
        for base_name in baselines:
            base = by_name[base_name]
            shared = [t for t in system.tasks if t in base.tasks]
            for task in shared:
                a, b = system.tasks[task], base.tasks[task]
                if a.gold_digest != b.gold_digest:
                    raise UserError(f"{task}: {system.name} and {base.name} were evaluated on different dev sets")
                if a.main_metric != b.main_metric:
                    raise UserError(f"{task}: {system.name} reports {a.main_metric}, {base.name} {b.main_metric}")
                result = stats.paired_bootstrap([a.metric], [b.metric], resamples, seed)
                comparisons.append(Comparison(system.name, base.name, task, result, _seed_wins(a, b)))
            if len(shared) > 1:
                result = stats.paired_bootstrap(
                    [system.tasks[t].metric for t in shared], [base.tasks[t].metric for t in shared], resamples, seed
                )
                comparisons.append(Comparison(system.name, base.name, AVERAGE, result, ""))
    for comparison, adjusted in zip(comparisons, stats.holm([c.result.p for c in comparisons]), strict=True):
        comparison.result.p_holm = adjusted
    return comparisons


def _seed_wins(a: TaskRuns, b: TaskRuns) -> str:
    base = dict(zip(b.seeds, b.scores, strict=True))
    shared = [(score, base[s]) for s, score in zip(a.seeds, a.scores, strict=True) if s in base]
    return f"{sum(x > y for x, y in shared)}/{len(shared)}" if shared else ""


def tasks_of(systems: list[System]) -> list[str]:
    return list(dict.fromkeys(t for s in systems for t in s.tasks))


def markdown(
    systems: list[System], baselines: list[str], comparisons: list[Comparison], resamples: int, seed: int
) -> str:
    tasks = tasks_of(systems)
    lines = ["### Dev medians over seeds (main metric)", ""]
    lines.append("| system | Avg | " + " | ".join(tasks) + " |")
    lines.append("|---|---|" + "---|" * len(tasks))
    best = {c.task: {} for c in comparisons}
    for c in comparisons:
        best[c.task].setdefault(c.system, []).append(c)
    for system in systems:
        cells = []
        for task in [AVERAGE, *tasks]:
            if task == AVERAGE:
                if not all(t in system.tasks for t in tasks):
                    cells.append("–")
                    continue
                value = statistics.fmean(system.median(t) for t in tasks)
            elif task in system.tasks:
                value = system.median(task)
            else:
                cells.append("–")
                continue
            mark = _stars(best.get(task, {}).get(system.name, []), baselines)
            cells.append(f"**{value:.1f}{mark}**" if mark else f"{value:.1f}")
        lines.append(f"| {system.name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Stars: significantly better than every baseline ({', '.join(baselines)}): Holm-Bonferroni-corrected "
        f"one-sided paired bootstrap over dev examples ({resamples} resamples, seed {seed}) of the seed-averaged "
        "metric; * p < .05, ** p < .01, *** p < .001. Avg: mean of the task medians.",
        "",
        "### Per task: median (mean ± std, runs)",
        "",
        "| task | metric | " + " | ".join(s.name for s in systems) + " |",
        "|---|---|" + "---|" * len(systems),
    ]
    for task in tasks:
        metric = next(s.tasks[task].main_metric for s in systems if task in s.tasks)
        cells = []
        for system in systems:
            if task not in system.tasks:
                cells.append("–")
                continue
            scores = system.tasks[task].scores
            std = statistics.stdev(scores) if len(scores) > 1 else 0.0
            mean = f"{statistics.fmean(scores):.1f}{plus_minus(std, len(scores))}"
            cells.append(f"{statistics.median(scores):.1f} ({mean}, {len(scores)})")
        lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### Tests (system − baseline)",
        "",
        "| task | system | baseline | Δ mean | 95% CI | p | p (Holm) | seed wins |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        r = c.result
        lines.append(
            f"| {c.task} | {c.system} | {c.baseline} | {r.delta:+.2f} | [{r.low:+.2f}, {r.high:+.2f}] | "
            f"{r.p:.4f} | {r.p_holm:.4f}{stats.stars(r.p_holm)} | {c.seed_wins} |"
        )
    return "\n".join(lines) + "\n"


def _stars(comparisons: list[Comparison], baselines: list[str]) -> str:
    """Stars only when the system improved on every baseline (Table 3.1's convention)."""
    against = {c.baseline: c for c in comparisons}
    if not baselines or set(against) != set(baselines) or any(c.result.delta <= 0 for c in against.values()):
        return ""
    return stats.stars(max(c.result.p_holm for c in against.values()))


def plot(systems: list[System], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = tasks_of(systems)
    fig, axes = plt.subplots(1, len(tasks), figsize=(2.6 * len(tasks) + 1, 3.4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        for x, system in enumerate(systems):
            if task not in system.tasks:
                continue
            scores = system.tasks[task].scores
            jitter = [x + 0.3 * (i / max(1, len(scores) - 1) - 0.5) for i in range(len(scores))]
            ax.scatter(jitter, scores, s=14, alpha=0.7)
            ax.hlines(statistics.median(scores), x - 0.3, x + 0.3, color="black", linewidth=2)
        ax.set_xticks(range(len(systems)), [s.name for s in systems], rotation=45, ha="right", fontsize=7)
        metric = next(s.tasks[task].main_metric for s in systems if task in s.tasks)
        ax.set_title(f"{task} ({metric})", fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle("dev score per run (bar: median over seeds)", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(args: argparse.Namespace) -> int:
    if args.bootstrap < 100:
        raise UserError("--bootstrap must be at least 100 resamples")
    out: Path = args.out
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a folder")
    systems = parse_systems(args.systems)
    if len(systems) == 1:
        print(f"note: one system ({systems[0].name}): its medians only, no tests (give two or more)", file=sys.stderr)
    baselines = args.baseline or [systems[0].name]
    comparisons = compare(systems, baselines, args.bootstrap, args.seed)
    text = markdown(systems, baselines, comparisons, args.bootstrap, args.seed)
    sys.stdout.write(text)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "compare.md", text)
    write_json(
        out / "compare.json",
        {
            "systems": {
                s.name: {
                    "folder": str(s.folder.resolve()),
                    "tasks": {
                        t: {"metric": r.main_metric, "seeds": r.seeds, "scores": r.scores} for t, r in s.tasks.items()
                    },
                }
                for s in systems
            },
            "baselines": baselines,
            "bootstrap": {"resamples": args.bootstrap, "seed": args.seed},
            "tests": [
                {
                    "task": c.task,
                    "system": c.system,
                    "baseline": c.baseline,
                    "seed_wins": c.seed_wins,
                    **asdict(c.result),
                }
                for c in comparisons
            ],
        },
    )
    if not args.no_plot:
        plot(systems, out / "compare.png")
    print(
        f"\nwritten: {out / 'compare.md'}, {out / 'compare.json'}"
        + ("" if args.no_plot else f", {out / 'compare.png'}")
    )
    return 0

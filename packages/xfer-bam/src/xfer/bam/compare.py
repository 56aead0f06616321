"""`xfer compare`: systems over seeds, as in the thesis's Table 3.1.

A *system* is a stage that wrote `outputs/results/results.json` (every run's dev metrics, with
its seed) and `outputs/results/dev/<task>/` (gold answers, and each run's per-example dev
predictions): `bam.teachers` (the Single system) and `bam.student` (Multi, Single→Multi, ...).

Printed (and written to OUT/compare.md, with OUT/compare.json and OUT/compare.png; OUT defaults to
`compare/` in the run folder of the first system, see `default_out`):
- per task and system: the median over seeds of the main metric, mean ± std, number of runs;
- the Table 3.1 view: medians and their average over tasks (MNLI counted once, as the thesis's GLUE
  average: see `average_tasks`), starred where the system beats EVERY baseline significantly
  (Holm-Bonferroni-corrected paired bootstrap, see `xfer.bam.stats`); main metrics must be
  greater-is-better (a lower-is-better one is refused, naming the file and task);
- every test: Δ (seed-averaged metric difference), its 95% bootstrap interval, p and Holm's p,
  and on how many shared seeds the system beat the baseline;
- a plot: every run's score per task and system, with the medians.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xfer.bam import stats
from xfer.bam.naming import module_name
from xfer.core.atomic import atomic_write_text, atomic_write_with, write_json
from xfer.core.errors import UserError
from xfer.core.results import RESULTS_FILE, plus_minus, read_results, stage_problem
from xfer.core.tasks import first_unknown_label

AVERAGE = "average"
MAX_RESAMPLES = 1_000_000  # p resolves to 1e-6; the distribution alone is 8 bytes per resample and test
TASK_TYPES = ("classification", "regression", "tagging")  # the types `stats` can resample
F1_METRICS = ("f1", "acc_f1_avg")  # classification metrics that depend on the positive label
MNLI, MNLI_MISMATCHED = "glue/mnli", "glue/mnli-mm"  # registered names: one GLUE task, two dev sets


@dataclass
class TaskRuns:
    """One system's runs on one task, and its dev set as recorded (to pair it with another system's)."""

    task: str
    main_metric: str
    seeds: list[int]
    scores: list[float]  # the main metric of each run
    metric: stats.Metric  # resampling metric over the same runs, examples in `ids` order
    kind: str
    labels: list[str]
    positive_label: str | None  # the class of a classification F1 (None for other task types)
    ids: list[str]
    answers: list[Any]
    predictions: list[list[Any]]  # per run, in `ids` order

    def metric_in(self, ids: list[str]) -> stats.Metric:
        """The metric with the examples in the order of `ids` (the same examples): another system's
        dev file may list them in another order, and the pairing of the bootstrap is by example."""
        if ids == self.ids:
            return self.metric
        position = {example: i for i, example in enumerate(self.ids)}
        order = [position[example] for example in ids]
        return stats.build_metric(
            self.kind,
            self.main_metric,
            [self.answers[i] for i in order],
            [[run[i] for i in order] for run in self.predictions],
            self.labels,
            self.positive_label,
        )


@dataclass
class System:
    name: str
    folder: Path
    tasks: dict[str, TaskRuns] = field(default_factory=dict)
    registered: dict[str, str] = field(default_factory=dict)  # task key (its `as:` alias) -> registered name

    def registered_name(self, task: str) -> str:
        """The registered task (`glue/mnli-mm`) behind a task key; the key itself when unrecorded."""
        return self.registered.get(task, task)

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
        other = sorted(p.name for p in folder.iterdir() if (p / RESULTS_FILE).is_file()) if folder.is_dir() else []
        if other:  # a run of other stages: "no results.json" was untrue, and did not say what is missing
            raise UserError(
                f"{folder}: its stages with results ({', '.join(other)}) recorded no per-example dev predictions "
                "(outputs/results/dev): xfer compare compares bam.teachers and bam.student stages"
            )
        raise UserError(
            f"{folder}: no outputs/results/results.json here or in a stage folder below (is it a bam stage or run?)"
        )
    return found


def _recipe_order(run: Path) -> Any:
    """Sort key of a run's stage folders: their position in its `recipe.resolved.yaml`, then name."""
    stages = _recipe_stages(run)
    return lambda path: (stages.index(path.name) if path.name in stages else len(stages), path.name)


def _recipe_stages(run: Path) -> list[str]:
    """The stage names of a run's `recipe.resolved.yaml`, in its order ([] when it is unreadable)."""
    import yaml

    try:
        return list((yaml.safe_load((run / "recipe.resolved.yaml").read_text(encoding="utf-8")) or {})["stages"])
    except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError):
        return []


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


def _stage_record(folder: Path) -> dict[str, Any]:
    """The stage's stage.json as a mapping ({} when absent or unreadable: `stage_problem` reports
    a damaged one before anything here is used)."""
    try:
        record = json.loads((folder / "stage.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _kind_of(folder: Path) -> str:
    """`" (a transformer.finetune stage)"` when the stage record names its kind, else ""."""
    kind = _stage_record(folder).get("kind")
    return f" (a {kind} stage)" if isinstance(kind, str) else ""


def _registered_tasks(folder: Path) -> dict[str, str]:
    """Task key -> registered task name, from the config the stage signed: results name a task by
    its key (`as:` alias or name), and which GLUE task a key is (MNLI mismatched) needs the name."""
    signature = _stage_record(folder).get("signature")
    config = signature.get("config") if isinstance(signature, dict) else None
    tasks = config.get("tasks") if isinstance(config, dict) else None
    registered: dict[str, str] = {}
    for entry in tasks if isinstance(tasks, list) else []:
        if isinstance(entry, str):
            registered[entry] = entry
        elif isinstance(entry, dict) and isinstance(entry.get("name"), str):
            key = entry.get("as") if isinstance(entry.get("as"), str) else entry["name"]
            registered[key] = entry["name"]
    return registered


def load_system(name: str, folder: Path) -> System:
    results_path = folder / RESULTS_FILE
    problem = stage_problem(folder)
    if problem is not None:  # the reason `xfer results` and `xfer status` give, naming the file
        raise UserError(
            f"{folder}: its results are not final ({problem[0]}: {problem[1]}); compare it once it has finished, intact"
        )
    results = read_results(folder)  # the shared reader checks the file's layout
    if results is None:
        raise UserError(f"{results_path}: missing: the stage has not finished (no results yet)")
    if not results:
        raise UserError(f"{results_path}: no task results in it")
    if not (folder / "outputs" / "results" / "dev").is_dir():
        raise UserError(
            f"{folder}: no per-example dev predictions (outputs/results/dev){_kind_of(folder)}: xfer compare "
            "compares bam.teachers and bam.student stages"
        )
    system = System(name, folder, registered=_registered_tasks(folder))
    for task, result in results.items():
        if task == AVERAGE:  # `as: average` is refused now; a run from before (or an edited file) has it
            raise UserError(
                f"{results_path}: task {task!r} has the name of xfer compare's average column: its tests and "
                "the average's would be one row and share their stars (rename the task with another `as:`)"
            )
        main = _field(result, "main_metric", str, results_path, task)
        if result.get("greater_is_better", True) is False:
            # the Avg, Δ and the stars read a higher score as better: a loss would be averaged raw
            raise UserError(
                f"{results_path}: {task}.greater_is_better is false: its main metric {main!r} is lower-is-better, "
                "and xfer compare averages and tests greater-is-better metrics only (a star marks a higher score)"
            )
        runs = _field(result, "runs", list, results_path, task)
        if not runs:
            raise UserError(f"{results_path}: {task}: no runs recorded")
        for i, run in enumerate(runs):
            for key, kind in (("trial", int), ("seed", int), (main, (int, float))):
                _field(run, key, kind, results_path, f"{task}.runs[{i}]")
            if not math.isfinite(run[main]):
                raise UserError(
                    f"{results_path}: {task}.runs[{i}].{main} is {run[main]}: a run without a finite score "
                    "(diverged?) cannot be compared"
                )
        for key in ("trial", "seed"):  # one trial counted twice would weigh double in the test
            values = [r[key] for r in runs]
            twice = next((v for v in values if values.count(v) > 1), None)
            if twice is not None:
                raise UserError(f"{results_path}: {task}: {key} {twice} is recorded for two runs")
        runs = sorted(runs, key=lambda r: r["trial"])
        dev = folder / "outputs" / "results" / "dev" / _slug(task)
        gold_path = dev / "gold.json"
        if not gold_path.is_file():
            raise UserError(f"{dev}: no gold.json: {folder} did not record per-example dev predictions for {task}")
        gold = _read_json(gold_path)
        kind = _field(gold, "type", str, gold_path, task)
        if kind not in TASK_TYPES:
            raise UserError(
                f"{gold_path}: {task} is a {kind} task; xfer compare resamples the metrics of "
                f"{', '.join(TASK_TYPES)} tasks only"
            )
        ids = _field(gold, "ids", list, gold_path, task)
        answers = _field(gold, "gold", list, gold_path, task)
        labels, positive = _labels(gold, kind, gold_path, task)
        _check_ids(ids, answers, gold_path)
        _check_values(answers, kind, labels, None, gold_path, "gold")
        predictions = []
        for run in runs:
            path = dev / f"trial-{run['trial']}.json"
            record = _read_json(path)
            predicted = _field(record, "predictions", list, path, task)
            if len(predicted) != len(ids):
                raise UserError(f"{path}: {len(predicted)} predictions for {len(ids)} examples")
            _check_values(predicted, kind, labels, answers, path, "predictions")
            predictions.append(predicted)
        try:
            metric = stats.build_metric(kind, main, answers, predictions, labels, positive)
            stats.check_against(metric, [r[main] for r in runs], f"{name}: {task}")
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise UserError(f"{dev}: cannot recompute {main} from the recorded predictions: {exc}") from exc
        system.tasks[task] = TaskRuns(
            task,
            main,
            [r["seed"] for r in runs],
            [r[main] for r in runs],
            metric,
            kind,
            labels,
            positive,
            ids,
            answers,
            predictions,
        )
    return system


def _labels(gold: dict[str, Any], kind: str, path: Path, task: str) -> tuple[list[str], str | None]:
    """A classification task's labels and the class of its F1 (`positive_label`; files written
    before it was recorded: the last label); a tagging task's tag set, when recorded (predicted
    tags are checked against it); other tasks need neither."""
    if kind == "tagging":
        tags = gold.get("labels")
        return (tags if isinstance(tags, list) and all(isinstance(t, str) for t in tags) else []), None
    if kind != "classification":
        return [], None
    labels = _field(gold, "labels", list, path, task)
    if not labels or not all(isinstance(label, str) for label in labels):
        raise UserError(f"{path}: {task}.labels: expected a non-empty list of label strings, found {labels!r}")
    positive = gold.get("positive_label", labels[-1])  # absent: the default of the stats (the last label)
    if positive not in labels:
        raise UserError(f"{path}: {task}.positive_label: {positive!r} is not one of the labels {labels}")
    return labels, positive


def _check_ids(ids: list[Any], answers: list[Any], path: Path) -> None:
    """Example ids pair two systems' predictions: they must be strings, unique, one per gold answer."""
    if len(ids) != len(answers):
        raise UserError(f"{path}: {len(ids)} ids for {len(answers)} gold answers")
    if not ids:
        raise UserError(f"{path}: no dev examples recorded")
    seen: set[str] = set()
    for i, example in enumerate(ids):
        if not isinstance(example, str):
            raise UserError(f"{path}: ids[{i}]: expected a string, found {type(example).__name__}")
        if example in seen:
            raise UserError(f"{path}: ids[{i}]: example id {example!r} is recorded twice")
        seen.add(example)


def _check_values(
    values: list[Any], kind: str, labels: list[str], gold: list[Any] | None, path: Path, key: str
) -> None:
    """Every gold answer or prediction of the task's type, naming the file and the position of the
    first that is not: an edited file must not be coerced ("3.5" read as 3.5, a tag string read as
    its characters) or let a NaN of a diverged run reach the statistics."""
    for i, value in enumerate(values):
        where = f"{path}: {key}[{i}]"
        if kind == "classification" and (not isinstance(value, str) or value not in labels):
            raise UserError(f"{where}: {value!r} is not one of the labels {labels}")
        if kind == "regression":
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise UserError(f"{where}: expected a number, found {type(value).__name__} {value!r}")
            if not math.isfinite(value):
                raise UserError(f"{where}: {value} is not a finite number (a diverged run?)")
        if kind == "tagging":
            if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
                raise UserError(f"{where}: expected a list of tag strings, found {value!r}")
            if gold is not None and len(value) != len(gold[i]):
                raise UserError(f"{where}: {len(value)} tags for a sentence of {len(gold[i])} words")
            # a model predicts the task's tags; the span F1 would count another one (an `S-X` in a
            # BIO task, a type the task lacks) as a span, silently (gold may hold dev-only tags)
            unknown = first_unknown_label(value, labels, gold[i] if gold is not None else value) if labels else None
            if unknown is not None:
                raise UserError(f"{where}: tag {value[unknown]!r} is not one of the task's tags {labels}")


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
    twice = next((b for b in baselines if baselines.count(b) > 1), None)
    if twice is not None:  # every test would run twice and count twice in Holm's correction
        raise UserError(f"--baseline {twice!r} is given twice")
    for task in tasks_of(systems):  # one column of the table, one metric (also between non-tested systems)
        having = [s for s in systems if task in s.tasks]
        other = next((s for s in having if s.tasks[task].main_metric != having[0].tasks[task].main_metric), None)
        if other is not None:
            first = having[0]
            raise UserError(
                f"{task}: {first.name} reports {first.tasks[task].main_metric}, "
                f"{other.name} {other.tasks[task].main_metric}"
            )
    common = average_tasks(systems)
    comparisons = []
    for system in systems:
        if system.name in baselines:
            continue
        for base_name in baselines:
            base = by_name[base_name]
            shared = [t for t in system.tasks if t in base.tasks]
            paired: dict[str, tuple[stats.Metric, stats.Metric]] = {}
            for task in shared:
                a, b = system.tasks[task], base.tasks[task]
                difference = _dev_difference(a, b, (system.name, base.name))
                if difference:
                    raise UserError(
                        f"{task}: {system.name} and {base.name} were evaluated on different dev sets ({difference})"
                    )
                if a.main_metric in F1_METRICS and a.positive_label != b.positive_label:
                    raise UserError(
                        f"{task}: {system.name} reports the F1 of label {a.positive_label!r}, "
                        f"{base.name} of {b.positive_label!r}"
                    )
                paired[task] = (a.metric_in(b.ids), b.metric)  # in the baseline's order of examples
                result = _test([paired[task]], resamples, seed, f"{task}: {system.name} vs {base.name}")
                comparisons.append(Comparison(system.name, base.name, task, result, _seed_wins(a, b)))
            if len(common) > 1:  # the Avg column's tasks: the same for every system and test
                result = _test([paired[t] for t in common], resamples, seed, f"{system.name} vs {base.name}")
                comparisons.append(Comparison(system.name, base.name, AVERAGE, result, ""))
    for comparison, adjusted in zip(comparisons, stats.holm([c.result.p for c in comparisons]), strict=True):
        comparison.result.p_holm = adjusted
    return comparisons


def _test(pairs: list[tuple[stats.Metric, stats.Metric]], resamples: int, seed: int, what: str) -> stats.TestResult:
    try:
        return stats.paired_bootstrap([a for a, _ in pairs], [b for _, b in pairs], resamples, seed)
    except ValueError as exc:
        raise UserError(f"{what}: {exc}") from exc


def _dev_difference(a: TaskRuns, b: TaskRuns, names: tuple[str, str]) -> str:
    """How two recorded dev sets differ ("" when they hold the same examples with the same gold
    answers, in any order): said precisely, since a stale or re-cut data folder is the usual cause."""
    if len(a.ids) != len(b.ids):
        return f"{len(a.ids)} vs {len(b.ids)} examples"
    answers = dict(zip(b.ids, b.answers, strict=True))
    for example, answer in zip(a.ids, a.answers, strict=True):
        if example not in answers:
            return f"example {example!r} is in {names[0]}'s, not in {names[1]}'s"
        if answers[example] != answer:
            return f"example {example!r} has gold {answer!r} in {names[0]}'s, {answers[example]!r} in {names[1]}'s"
    return ""


def _seed_wins(a: TaskRuns, b: TaskRuns) -> str:
    base = dict(zip(b.seeds, b.scores, strict=True))
    shared = [(score, base[s]) for s, score in zip(a.seeds, a.scores, strict=True) if s in base]
    return f"{sum(x > y for x, y in shared)}/{len(shared)}" if shared else ""


def tasks_of(systems: list[System]) -> list[str]:
    return list(dict.fromkeys(t for s in systems for t in s.tasks))


def common_tasks(systems: list[System]) -> list[str]:
    """The tasks every system has: the Avg column and the average tests are over these (less MNLI
    mismatched, see `average_tasks`), so a star on an average is for the average it stands next to
    (a task one system lacks is in neither)."""
    return [t for t in tasks_of(systems) if all(t in s.tasks for s in systems)]


def average_tasks(systems: list[System]) -> list[str]:
    """The tasks of the Avg column and of the average tests: the common ones, MNLI counted once.

    The thesis's GLUE dev average (Table 3.1, and 5.4) is over 8 tasks with one MNLI column, the
    matched dev set (the original code's `mnli`); with glue/mnli and glue/mnli-mm both in it, MNLI
    weighed twice in the Avg. Mismatched keeps its column and its own tests; it stands for MNLI in
    the average only when matched is absent."""
    common = common_tasks(systems)
    if not any(_is(systems, task, MNLI) for task in common):
        return common
    return [task for task in common if not _is(systems, task, MNLI_MISMATCHED)]


def _is(systems: list[System], task: str, registered: str) -> bool:
    return any(s.registered_name(task) == registered for s in systems if task in s.tasks)


def markdown(
    systems: list[System], baselines: list[str], comparisons: list[Comparison], resamples: int, seed: int
) -> str:
    tasks = tasks_of(systems)
    common = common_tasks(systems)
    averaged = average_tasks(systems)
    lines = ["### Dev medians over seeds (main metric)", ""]
    lines.append("| system | Avg | " + " | ".join(map(_cell, tasks)) + " |")
    lines.append("|---|---|" + "---|" * len(tasks))
    best = {c.task: {} for c in comparisons}
    for c in comparisons:
        best[c.task].setdefault(c.system, []).append(c)
    for system in systems:
        cells = []
        for task in [AVERAGE, *tasks]:
            if task == AVERAGE:
                if not averaged:
                    cells.append("–")
                    continue
                value = statistics.fmean(system.median(t) for t in averaged)
            elif task in system.tasks:
                value = system.median(task)
            else:
                cells.append("–")
                continue
            mark = _stars(best.get(task, {}).get(system.name, []), baselines)
            cells.append(f"**{value:.1f}{mark}**" if mark else f"{value:.1f}")
        lines.append(f"| {_cell(system.name)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Stars: significantly better than every baseline ({', '.join(baselines)}): Holm-Bonferroni-corrected "
        f"one-sided paired bootstrap over dev examples ({resamples} resamples, seed {seed}) of the seed-averaged "
        "metric; * p < .05, ** p < .01, *** p < .001. Avg: mean of the task medians"
        + ("." if common == tasks else f" of the tasks every system has ({', '.join(common) or 'none'}).")
        + _mnli_note(common, averaged),
        "",
        "### Per task: median (mean ± std, runs)",
        "",
        "| task | metric | " + " | ".join(_cell(s.name) for s in systems) + " |",
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
        lines.append(f"| {_cell(task)} | {_cell(metric)} | " + " | ".join(cells) + " |")
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
            f"| {_cell(c.task)} | {_cell(c.system)} | {_cell(c.baseline)} | {r.delta:+.2f} | [{r.low:+.2f}, {r.high:+.2f}] | "
            f"{r.p:.4f} | {r.p_holm:.4f}{stats.stars(r.p_holm)} | {c.seed_wins} |"
        )
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """A name as one Markdown table cell: a system named `a|b` (NAME= is free text) split its row
    into one cell more than the header, shifting every number after it into the wrong column."""
    return text.replace("|", "\\|")


def _mnli_note(common: list[str], averaged: list[str]) -> str:
    left_out = [task for task in common if task not in averaged]
    if not left_out:
        return ""
    return (
        f" MNLI counts once, as in the thesis's GLUE average: {', '.join(left_out)} (mismatched) has its "
        "column and tests but is not in Avg."
    )


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

    # names and task titles as written: matplotlib read "$...$" in them as math, so a system named
    # "x $\alpha$" drew a Greek letter and one with "$\foo$" raised after the tables were written
    with matplotlib.rc_context({"text.parse_math": False}):
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
        try:  # through a temporary file (`fig.savefig(path)` left a cut-short PNG over the old one on a crash)
            atomic_write_with(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
        finally:
            plt.close(fig)


OUT = "compare"  # the folder name of the default --out


def _check_out(out: Path) -> None:
    """`out` must be a folder or one that can be made: a file at `out`, or at a folder on its path
    (`--out results.txt/compare`), is refused before the work; the second surfaced as a bare
    NotADirectoryError traceback from `mkdir` once every test had run."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a folder")
    for folder in out.parents:
        if folder.exists():
            if not folder.is_dir():
                raise UserError(f"--out {out}: {folder} exists and is not a folder")
            return


def default_out(systems: list[System]) -> Path:
    """`compare/` in the run folder of the first system (the default baseline), when that stage is in
    a run folder (one with `recipe.resolved.yaml`); else `./compare`.

    The default was `./compare` always: the tables of runs under `runs/` (git-ignored) landed in the
    folder the command ran in, a repository's root, where they were committed by mistake; and a second
    comparison from there replaced the first one's files whatever runs it compared."""
    run = systems[0].folder.resolve().parent
    if not (run / "recipe.resolved.yaml").is_file():
        return Path(OUT)
    out = run / OUT
    if OUT in _recipe_stages(run) or (out / "stage.json").exists():  # the folder of a stage called `compare`
        raise UserError(f"{out} is the folder of the run's stage {OUT!r}: give the comparison's folder with --out")
    return out


def main(args: argparse.Namespace) -> int:
    if not 100 <= args.bootstrap <= MAX_RESAMPLES:
        raise UserError(f"--bootstrap must be between 100 and {MAX_RESAMPLES:,} resamples, not {args.bootstrap:,}")
    if args.seed < 0:
        raise UserError(f"--seed must be a non-negative integer, not {args.seed}")
    if args.out is not None:  # before the (slow) loading and resampling
        _check_out(args.out)
    systems = parse_systems(args.systems)
    out: Path = args.out if args.out is not None else default_out(systems)
    _check_out(out)
    if len(systems) == 1:
        print(f"note: one system ({systems[0].name}): its medians only, no tests (give two or more)", file=sys.stderr)
    baselines = args.baseline or [systems[0].name]
    partial = [t for t in tasks_of(systems) if t not in common_tasks(systems)]
    if partial and len(systems) > 1:
        print(
            f"note: not in every system, so not in the average: {', '.join(partial)} "
            "(tested only between systems that have it)",
            file=sys.stderr,
        )
    comparisons = compare(systems, baselines, args.bootstrap, args.seed)
    text = markdown(systems, baselines, comparisons, args.bootstrap, args.seed)
    sys.stdout.write(text)
    out.mkdir(parents=True, exist_ok=True)
    # an earlier comparison's plot must not stay beside this one's tables (--no-plot, or a plot that fails)
    stale_plot = (out / "compare.png").exists()
    (out / "compare.png").unlink(missing_ok=True)
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
            "average_tasks": average_tasks(systems),
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
        + (f" (removed the earlier {out / 'compare.png'})" if args.no_plot and stale_plot else "")
    )
    return 0

"""The results of a stage that evaluates models: one layout, one summary, one table.

A stage that reports dev scores writes `outputs/results/results.json`:

    {"<task>": {"main_metric": "<metric>",
                "summary": {"<metric>": {"median", "mean", "std", "min", "max"}, ...},
                "runs": [{"trial": 0, "seed": 1, "<metric>": 87.5, ...}, ...]}, ...}

Every score is in percent (see `xfer.core.metrics`); `summary` covers metrics only, never the
bookkeeping a run record also carries. A task whose main metric is lower-is-better (a perplexity)
also holds `"greater_is_better": false`; its summary then counts a NaN run as the highest (worst). The file is strict JSON: a score that is not finite (a
diverged trial's NaN, an infinite perplexity) is written as the string "NaN", "Infinity" or
"-Infinity" (`strict_json`), which `read_results` reads back as the float; a bare NaN token, as
files written before 2026-11-28 hold, is read too. `xfer results` and the end of `xfer run` print these
files as one Markdown table, so users and docs/results.md read numbers from runs, never copy
them by hand. Torch-free: the CLI reads results without loading a model stack.

Pooling: `A+B` (two run folders, or two stage folders) reports the trials of both as one row. Seeds
of one configuration are often run apart (on two machines, or later with `seed=N` once a first run
has finished); pooling refuses a seed that two folders share (one trial counted twice), the same
folder given twice, and a result stage one run has and another has not finished (or lacks); it
names the config keys in which the pooled stages differ, so a reader sees what was pooled. Of run
folders only the result stages are pooled: a corpus or vocabulary stage reports no results, so it
has nothing to pool. When the table shows stages of more than one run, each row names its run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from xfer.core.atomic import read_json
from xfer.core.errors import UserError
from xfer.core.runs.stage_record import state_problem

BOOKKEEPING = frozenset({"trial", "seed", "steps", "checkpoint", "seconds"})
"""Keys of a run record that describe the run rather than score it."""

RESULTS_FILE = Path("outputs") / "results" / "results.json"

HEADER = (
    "| stage | task | main metric | median | mean ± std | min–max | runs | other metrics (median) |\n"
    "|---|---|---|---|---|---|---|---|"
)


def summarize(
    runs: list[dict[str, Any]], metrics: Iterable[str] | None = None, lower_is_better: Iterable[str] = ()
) -> dict[str, dict[str, float]]:
    """median / mean / std (sample; 0 for one run) / min / max of each metric over runs.

    A NaN score (a diverged run) counts as the worst (`score_order`): the lowest of a metric where
    greater is better, the highest of one in `lower_is_better` (a perplexity, a WER). Sorted lowest
    there, a diverged run stood next to the best runs and pulled the median toward them.

    The median of an even number of runs is the mean of the two middle scores (as `statistics.median`),
    so it may be no run's score: the model `transformer.finetune` exports is the lower middle run's.

    `metrics` defaults to every numeric key of the runs that is not bookkeeping, in the order they
    first appear (the first run's keys alone once dropped a metric that run had not recorded).
    A non-finite score (a diverged trial's inf perplexity) makes mean and std non-finite rather
    than raising: `statistics.stdev` failed on inf with an AttributeError after every trial ran.

    A numpy scalar or a one-number tensor (a plugin's `evaluate` returning `np.float32`, or
    `(pred == gold).float().mean()`) counts as its number (`plain_number`): it was left out, so the
    summary lost the metric, its main metric too, and the table read "(no value)"."""
    if metrics is None:
        metrics = dict.fromkeys(
            k for r in runs for k, v in r.items() if k not in BOOKKEEPING and _number(plain_number(v))
        )
    lower = set(lower_is_better)
    out: dict[str, dict[str, float]] = {}
    for metric in metrics:
        if metric in BOOKKEEPING:
            continue
        scores = (plain_number(r.get(metric)) for r in runs)
        values = sorted(
            (value for value in scores if _number(value)),
            key=lambda value, better=metric not in lower: score_order(value, better),
        )
        if not values:
            continue
        middle = len(values) // 2
        out[metric] = {
            # on the NaN-worst order: `statistics.median`, `min` and `max` gave whatever the position
            # of a NaN (a diverged trial's score) happened to make them
            "median": values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2,
            "mean": _mean(values),  # NaN with a NaN run (stdev raised on one)
            "std": _std(values),
            "min": values[0],  # NaN when a run diverged and greater is better (NaN is the worst end)
            "max": values[-1],  # NaN when a run diverged and lower is better
        }
    return out


def _mean(values: list[float]) -> float:
    """The mean; NaN where it is undefined (inf and -inf) or the sum overflows a float."""
    try:
        return statistics.fmean(values)
    except (OverflowError, ValueError):
        return math.nan


def _std(values: list[float]) -> float:
    """Sample std (0 for one run); NaN when a score is not finite (its spread is undefined)."""
    if not all(math.isfinite(v) for v in values):
        return math.nan
    try:
        return statistics.stdev(values) if len(values) > 1 else 0.0
    except OverflowError:
        return math.inf


def score_order(value: float, greater_is_better: bool = True) -> tuple[bool, float]:
    """Sort key of scores with NaN (a diverged run's) as the worst: lowest where greater is better,
    highest where lower is better (a perplexity). NaN compares false with everything, so sorting
    floats that hold one gives an order that depends on where it stood; and lowest whatever the
    direction, a diverged run of a lower-is-better metric sorted next to the best runs."""
    if isinstance(value, float) and math.isnan(value):
        return (not greater_is_better, 0.0)
    return (greater_is_better, value)


def task_result(main_metric: str, runs: list[dict[str, Any]], greater_is_better: bool = True) -> dict[str, Any]:
    """One task's entry of results.json, in strict JSON (`strict_json`): a stage writes it as it is.

    `greater_is_better` is the main metric's direction (`TaskInfo.greater_is_better`); False is
    recorded in the entry (`"greater_is_better": false`), so a pool of it sorts a NaN run as the
    worst too.

    Python's json wrote a diverged trial's NaN as a bare `NaN` token, which `jq`, JavaScript and
    Go's decoders refuse: the whole results file became unreadable to them."""
    return strict_json(_task_entry(main_metric, runs, greater_is_better))


def _task_entry(main_metric: str, runs: list[dict[str, Any]], greater_is_better: bool = True) -> dict[str, Any]:
    """One task's entry with its scores as floats (what the table and pools compute with)."""
    entry: dict[str, Any] = {
        "main_metric": main_metric,
        "summary": summarize(runs, lower_is_better=() if greater_is_better else (main_metric,)),
        "runs": runs,
    }
    if not greater_is_better:  # absent: greater is better (every results.json written before)
        entry["greater_is_better"] = False
    return entry


NOT_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
"""How strict JSON spells the scores that are not finite (the spelling of Python's own tokens)."""


def strict_json(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by its name in `NOT_FINITE`, so that
    `json.dumps(..., allow_nan=False)` accepts it; a diverged score stays a diverged score (null
    would read as "not recorded"). A numpy scalar or a one-number tensor becomes its Python number
    (`plain_number`): the stages' `write_json` wrote it as a string ("66.66667", "tensor(5.)"), which
    no summary, pool or table counts as a score."""
    value = plain_number(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def plain_number(value: Any) -> Any:
    """`value` as a Python number when it is a numpy scalar (`np.float32(66.7)` -> 66.7) or an array or
    tensor of one number (`torch.tensor(5.0)`), else `value` itself (duck-typed: this module is
    torch-free). What `Task.evaluate` returns ends up in results.json, summaries and tables, which
    count Python numbers only (see `summarize`, `strict_json`)."""
    if value is None or type(value) in (bool, int, float, str):  # not isinstance: np.float64 is a float subclass
        return value
    item = getattr(value, "item", None)
    numel = getattr(value, "numel", None)  # a tensor's `size` is a method; numpy's is the element count
    count = numel() if callable(numel) else getattr(value, "size", None)
    if callable(item) and count == 1:
        return item()
    return value


def json_number(value: Any) -> Any:
    """A value read from strict JSON: "NaN", "Infinity" or "-Infinity" as the float, else `value`."""
    return NOT_FINITE[value] if isinstance(value, str) and value in NOT_FINITE else value


def _decoded(result: Any) -> Any:
    """One task's entry with the scores `strict_json` spelled out as floats again: every statistic of
    the summary and every run value but the seed and checkpoint, which may be names."""
    if not _is_task_result(result):
        return result
    summary, runs = result["summary"], result["runs"]
    if isinstance(summary, dict):
        summary = {
            m: {k: _score(v) for k, v in stats.items()} if isinstance(stats, dict) else stats
            for m, stats in summary.items()
        }
    if isinstance(runs, list):
        runs = [
            {k: v if k in ("seed", "checkpoint") else _score(v) for k, v in run.items()}
            if isinstance(run, dict)
            else run
            for run in runs
        ]
    return {**result, "summary": summary, "runs": runs}


def _score(value: Any) -> Any:
    """A score as read from results.json (`json_number`); an integer too large for a float (an edited
    file's 400 digits) as an infinite float: formatting it, or a median of two, raised OverflowError."""
    value = json_number(value)
    if _number(value) and isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    return value


def read_results(stage_dir: Path) -> dict[str, Any] | None:
    """A stage's results.json in the layout above; None when the stage wrote none (yet)."""
    path = stage_dir / RESULTS_FILE
    if not path.is_file():
        return None
    try:
        data = path.read_bytes()
        results = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:  # its byte offset alone did not say where the damage was
        raise UserError(f"{path}:{line_of(data, error)}: unreadable results file (not UTF-8: {error.reason})") from None
    except (OSError, json.JSONDecodeError) as error:
        raise UserError(f"{path}: unreadable results file ({error})") from None
    if isinstance(results, dict):
        results = {task: _decoded(result) for task, result in results.items()}
    if not isinstance(results, dict) or not all(_is_task_result(v) for v in results.values()):
        raise UserError(
            f"{path}: not a results file of the layout in xfer.core.results (task -> main_metric/summary/runs)"
        )
    for task, result in results.items():
        problem = _task_problem(result)
        if problem is not None:
            raise UserError(f"{path}: task {task}: {problem}")
    return results


def line_of(data: bytes, error: UnicodeDecodeError) -> int:
    """The line (from 1) of `data` holding the byte that `error` could not decode."""
    return data.count(b"\n", 0, error.start) + 1


def plus_minus(std: float, count: int) -> str:
    """ " ± std" after a mean: one decimal, or two below 0.1 (seeds that agree closely should not
    read "± 0.0"); nothing for a single run, whose std is undefined, not zero."""
    if count < 2:
        return ""
    return f" ± {std:.2f}" if 0 < std < 0.1 else f" ± {std:.1f}"


def markdown_rows(stage: str, results: dict[str, Any]) -> list[str]:
    """One table row per task: main metric's median (the GLUE protocol), mean ± std, range, runs.

    Names are made safe for a cell (`markdown_cell`): a stage folder, task or metric name with a "|" shifted
    every later column of its row."""
    rows = []
    stage = markdown_cell(stage)
    for task_name, entry in results.items():
        result = _decoded(entry)  # a stage's own table is made from `task_result`'s strict JSON
        task, main = markdown_cell(task_name), markdown_cell(result["main_metric"])
        summary = result["summary"]
        s = summary.get(result["main_metric"])
        # bookkeeping left out: results.json files written before summaries covered metrics only hold the
        # median trial number, seed and step count, which the table showed as scores ("seed 2.5")
        others = ", ".join(
            f"{markdown_cell(m)} {_stat(v, 'median')}"
            for m, v in summary.items()
            if m != result["main_metric"] and m not in BOOKKEEPING
        )
        if s is None:  # the other metrics still shown: the row left out every score the runs had
            rows.append(f"| {stage} | {task} | {main} | (no value) | | | {len(result['runs'])} | {others} |")
            continue
        spread = plus_minus(s["std"], len(result["runs"])) if "std" in s else ""
        if result.get("greater_is_better", True) is False:
            main += " (lower is better)"
        rows.append(
            f"| {stage} | {task} | {main} | **{_stat(s, 'median')}** | {_stat(s, 'mean')}{spread} "
            f"| {_stat(s, 'min')}–{_stat(s, 'max')} | {len(result['runs'])} | {others} |"
        )
    return rows


def _stat(stats: dict[str, Any], key: str) -> str:
    """One statistic of a summary entry with one decimal; "?" where a hand-written summary lacks it."""
    return f"{stats[key]:.1f}" if key in stats else "?"


def stage_dirs_of(paths: Iterable[Path]) -> list[Path]:
    """Stage folders named directly, or every stage folder of a run folder (with a stage.json, or a
    results.json: a stage whose stage.json was deleted or not copied along was left out of the
    table without a word, while `xfer status` listed it as pending).

    A path that is neither is refused (exit 2) rather than read as a run without results: a typo or
    a wrong folder should not look like a run that has not finished yet."""
    found: list[Path] = []
    for path in paths:
        if (path / "stage.json").is_file() or (path / RESULTS_FILE).is_file():
            found.append(path)
        elif not path.exists():
            raise UserError(f"{path}: no such run or stage folder")
        elif not path.is_dir():
            raise UserError(f"{path}: not a folder; give a run folder or a stage folder")
        elif (path / "recipe.resolved.yaml").is_file() or any(path.glob("*/stage.json")):
            found += [path / name for name in _stage_order(path) if _is_stage(path / name)]
        else:
            raise UserError(
                f"{path}: not a run or stage folder (no recipe.resolved.yaml, stage.json or {RESULTS_FILE})"
            )
    return found


def stage_groups(paths: Iterable[str | Path]) -> list[list[Path]]:
    """The stage folders `paths` name, one group per table row: a run or stage folder gives a group
    per stage; `A+B+...` pools stage folders A, B, ... themselves, or the same-named result stages of
    run folders A, B, ... into one group. A folder whose own name holds "+" is taken as it is.

    Of run folders, a stage that has results in none of them is left out: a finished stage that
    reports none (a corpus, a vocabulary) has nothing to pool, and one no run has finished has
    nothing yet. A stage with results in one run must have them in every run of the pool; where it
    is missing or unfinished the pool is refused, naming it, instead of showing a row that silently
    holds fewer runs than asked for."""
    groups: list[list[Path]] = []
    for path in paths:
        text = str(path)
        parts = pool_parts(text)
        _refuse_repeats(text, parts)
        found = [stage_dirs_of([p]) for p in parts]
        if len(parts) == 1:
            groups += [[stage] for stage in found[0]]
            continue
        is_stage = [stages == [p] for p, stages in zip(parts, found, strict=True)]
        if all(is_stage):
            groups.append(parts)
        elif any(is_stage):
            raise UserError(f"{text}: pools stage folders with run folders; join run folders, or stage folders")
        else:
            names = dict.fromkeys(stage.name for stages in found for stage in stages)
            for name in names:
                with_results = [
                    stage for stages in found for stage in stages if stage.name == name and _has_results(stage)
                ]
                if not with_results:
                    continue
                for run, stages in zip(parts, found, strict=True):
                    if name not in {stage.name for stage in stages}:
                        raise UserError(
                            f"{run}: stage {name} has not run there (not in its recipe, or not started), while "
                            f"{with_results[0]} has results; to pool only some stages, join stage folders (A/S+B/S)"
                        )
                groups.append([stage for stages in found for stage in stages if stage.name == name])
    # a stage named twice (`xfer results R R`, or R and R/finetune) is one row, not two equal ones
    unique: dict[tuple[Path, ...], list[Path]] = {}
    for group in groups:
        unique.setdefault(tuple(stage.resolve() for stage in group), group)
    return list(unique.values())


def pool_parts(text: str) -> list[Path]:
    """The folders `A+B+...` joins (one folder when nothing is joined, or when the name exists as it is)."""
    if "+" not in text or Path(text).exists():
        return [Path(text)]
    if any(not part for part in text.split("+")):
        raise UserError(f"{text}: an empty folder name around '+'")
    return [Path(part) for part in text.split("+")]


def pooled_results(stages: list[Path]) -> dict[str, Any] | None:
    """The results of one stage folder, or the trials of several pooled into one results dict.

    A pool is refused, naming the folders, where it would mislead: a folder without results yet,
    other tasks or main metrics, a trial without a recorded seed, or a seed two folders share."""
    if len(stages) == 1:
        return read_results(stages[0])
    pooled: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    direction: dict[str, bool] = {}  # task -> greater_is_better
    holder: dict[tuple[str, Any], Path] = {}
    for stage in stages:
        results = read_results(stage)
        if results is None:
            raise UserError(_no_results(stage))
        problem = stage_problem(stage)
        if problem is not None:
            raise UserError(
                f"{stage}: its results are not final ({problem[0]}: {problem[1]}); only finished, intact stages "
                "can be pooled"
            )
        unrecorded = _unrecorded(stage)
        if unrecorded is not None:
            raise UserError(f"{unrecorded}; only finished, intact stages can be pooled")
        if pooled and set(results) != set(pooled):
            raise UserError(f"{stage}: tasks {sorted(results)} differ from {stages[0]}'s {sorted(pooled)}; not pooled")
        for task, result in results.items():
            main, runs = pooled.setdefault(task, (result["main_metric"], []))
            if result["main_metric"] != main:
                raise UserError(f"{stage}: {task}'s main metric {result['main_metric']} is {main} in {stages[0]}")
            better = direction.setdefault(task, result.get("greater_is_better", True))
            if result.get("greater_is_better", True) != better:
                raise UserError(
                    f"{stage}: {task}'s {main} is recorded as {_direction(not better)} is better, in {stages[0]} "
                    f"as {_direction(better)}; not pooled"
                )
            for run in result["runs"]:
                if "seed" not in run:
                    raise UserError(f"{stage / RESULTS_FILE}: a {task} run without a seed; cannot check the pool")
                if (task, run["seed"]) in holder:
                    raise UserError(
                        f"{stage}: seed {run['seed']} of {task} is also in {holder[task, run['seed']]}; "
                        "pooling would count one trial twice"
                    )
                holder[task, run["seed"]] = stage
                runs.append(run)
    return {task: _task_entry(main, runs, direction[task]) for task, (main, runs) in pooled.items()}


def _direction(greater_is_better: bool) -> str:
    return "greater" if greater_is_better else "lower"


def config_differences(stages: list[Path]) -> list[str] | None:
    """The dotted config keys (`trials` aside) whose signed values (stage.json) differ among
    `stages`, a key that only some configs have with its values there (typically a knob added to
    the component since the older run, at its default); None when a stage has no signed config to
    compare (results.json alone)."""
    signed = [_signed_config(stage) for stage in stages]
    if any(config is None for config in signed):
        return None
    configs = [_flat(config) for config in signed if config is not None]
    differences = []
    for key in dict.fromkeys(k for config in configs for k in config if k != "trials"):
        values = {json.dumps(config[key], sort_keys=True) for config in configs if key in config}
        have = sum(key in config for config in configs)
        if have < len(configs):
            differences.append(f"{key} (only {have} of {len(configs)} have it: {', '.join(sorted(values))})")
        elif len(values) > 1:
            differences.append(key)
    return differences


def pool_note(label: str, stages: list[Path]) -> str:
    """The line under a table that says what a pooled row pooled and how the stages differ."""
    differences = config_differences(stages)
    if differences is None:
        differ = "; a stage.json with the signed config is missing, so their configs were not compared"
    else:
        differ = f"; their configs differ in {', '.join(differences)}" if differences else "; same config"
        read = input_differences(stages)
        if read:
            differ += f"; what they read differs: {', '.join(read)}"
    return f"{label} pools {' + '.join(map(str, stages))}{differ}"


def input_differences(stages: list[Path]) -> list[str]:
    """What else the fingerprints (stage.json) of `stages` signed differently, besides their config and
    seed: an upstream stage (the encoder fine-tuned, the vocabulary), the content of an input file set
    (task data edited in place), a component's version. Equal configs were called "same config" while
    the pooled trials fine-tuned two different pre-trained encoders or scored two versions of the dev
    set. A part a stage did not record (an older stage.json) is not compared."""
    signatures = [_signature(stage) for stage in stages]
    found = []
    for part, what in (("upstream", "upstream stage"), ("inputs", "input files"), ("components", "component")):
        values = [signature.get(part) for signature in signatures]
        if not all(isinstance(value, dict) for value in values):
            continue
        for key in dict.fromkeys(k for value in values for k in value):
            if len({_signed_content(part, value.get(key)) for value in values}) > 1:
                found.append(f"{what} {key}")
    return found


def _signed_content(part: str, value: Any) -> str:
    """One signed item as comparable text; of an input file set its files' digests alone: the same
    data at another path (another machine) is the same input (the path shows in the config)."""
    if part == "inputs" and isinstance(value, dict):
        value = sorted(map(str, value.values()))
    return json.dumps(value, sort_keys=True)


def _signature(stage: Path) -> dict[str, Any]:
    """The signature stage.json records (empty when there is none to read: nothing is compared)."""
    signature = (read_json(stage / "stage.json") or {}).get("signature")
    return signature if isinstance(signature, dict) else {}


def results_table(paths: Iterable[str | Path]) -> str | None:
    """The Markdown table of every stage with results under `paths` (see `stage_groups` for pools);
    None when none has any.

    When the rows come from more than one run (`xfer results A B`), a first column names each row's
    run folder (`A+B` for a pool): stage names repeat across runs of one recipe, so rows without it
    could not be told apart. One run's table (also the end of `xfer run`) keeps the plain layout."""
    labelled: list[tuple[str, list[str]]] = []
    notes: list[str] = []
    for group in stage_groups(paths):
        results = pooled_results(group)
        if results:
            label = group[0].name if len(group) == 1 else f"{group[0].name} (pooled)"
            problem = stage_problem(group[0]) if len(group) == 1 else None
            unrecorded = _unrecorded(group[0]) if len(group) == 1 else None
            if problem is not None:
                label = f"{label} [{problem[0]}]"
                notes.append(f"{group[0]} is {problem[0]}: {problem[1]}; `xfer status` says why")
            elif unrecorded is not None:
                label = f"{label} [no stage.json]"
                notes.append(unrecorded)
            labelled.append((run_label(group), markdown_rows(label, results)))
            notes += diverged_notes(label, results)
            if len(group) > 1:
                notes.append(pool_note(label, group))
        elif len(group) == 1:
            notes += missing_results([group[0]])
    if not labelled:
        return None
    if len({run for run, _ in labelled}) > 1:
        first, rule = HEADER.splitlines()
        header = [f"| run {first}", f"|---{rule}"]
        rows = [f"| {markdown_cell(run)} {row}" for run, group_rows in labelled for row in group_rows]
    else:
        header = [HEADER]
        rows = [row for _, group_rows in labelled for row in group_rows]
    return "\n".join([*header, *rows, *(["", *notes] if notes else [])])


def diverged_notes(stage: str, results: dict[str, Any]) -> list[str]:
    """A note for each task of `results` with runs whose main metric is NaN (diverged): the median
    counts them as the worst runs, and the row's run count alone ("3") did not say that only 2 of
    them trained, nor why the median is the worse of those two."""
    notes = []
    for task, entry in results.items():
        result = _decoded(entry)
        main = result["main_metric"]
        nan = sum(1 for run in result["runs"] if isinstance(v := run.get(main), float) and math.isnan(v))
        if nan:
            notes.append(
                f"{stage} / {task}: {nan} of {len(result['runs'])} runs have a NaN {main} (diverged); "
                "the median and range count them as the worst runs"
            )
    return notes


def missing_results(stages: Iterable[Path]) -> list[str]:
    """A note for each of `stages` that has no results.json but should have or may yet: it failed or
    was killed before writing one, or its results.json was deleted after it completed. Such a stage
    had no row and no word: the table of a run whose second fine-tuning failed read as a run of one
    fine-tuning. A finished stage that reports nothing (a corpus, a vocabulary) gets no note."""
    notes = []
    for stage in stages:
        if _has_results(stage):
            continue
        problem = stage_problem(stage)
        if problem is not None:
            notes.append(f"{stage} is {problem[0]} and has no results yet; `xfer status` says why")
        elif _deleted_results(stage):
            notes.append(f"{stage}: {_DELETED}")
    return notes


def run_label(group: list[Path]) -> str:
    """The run folder(s) a table row comes from, as given: `A`, or `A+B` for a pool."""
    return "+".join(dict.fromkeys(str(stage.parent) for stage in group))


def markdown_cell(text: str) -> str:
    """`text` safe inside a Markdown table cell (a "|" in a folder name would split the cell); every
    table of results uses it (`xfer.cvt.results`'s too, whose names went in raw).

    A line break (in a metric or task name) becomes a space: it ended the row in the middle, and the
    rest of the row became a line of text under the table, one cell short."""
    return " ".join(text.splitlines()).replace("|", "\\|")


def _refuse_repeats(text: str, parts: list[Path]) -> None:
    """Refuse `A+A` (also spelled `A+./A`, or through a symlink): every trial would count twice,
    and saying so is clearer than the seed clash or missing results it would otherwise show as."""
    seen: dict[Path, Path] = {}
    for part in parts:
        key = part.resolve()
        if key in seen:
            same = "given twice" if part == seen[key] else f"the same folder as {seen[key]}"
            raise UserError(f"{text}: {part} is {same}; pooling a folder with itself would count each trial twice")
        seen[key] = part


def stage_problem(stage: Path) -> tuple[str, str] | None:
    """(status, why naming the file) of a stage folder whose results.json is not its final result,
    as `xfer status` shows it: running, interrupted, failed, invalidated; `damaged` for a stage.json
    `xfer status` calls damaged (unreadable, or a field of the wrong type), `stale` for a completed
    stage whose results.json was modified after it completed. None: completed and intact, or
    results.json alone.

    A results.json outlives the attempt that wrote it: a stage resumed with more trials, or marked
    `invalidated` because a stage it read ran again, still holds the old file until it finishes.
    Shown as a plain row it read as the stage's result."""
    path = stage / "stage.json"
    if not path.exists():
        return None
    record = read_json(path)
    if record is None:
        return "damaged", f"{path} is unreadable (truncated or not a JSON object)"
    damage = state_problem(record)
    if damage is not None:
        # `xfer status` calls it damaged and `xfer run` runs it afresh; the table showed it as final
        return "damaged", f"{path} is malformed ({damage})"
    status = record.get("status")
    if status is None:
        return "pending", f"{path} records no status (`xfer status` shows the stage as pending)"
    if status == "completed":
        return _modified_results(stage, record)
    if status == "running":  # as `xfer status` says it: nobody holds the run's lock, so it was cut short
        from xfer.core.runs import runlock

        status = "running" if runlock.holder(stage.parent) is not None else "interrupted"
    return status, (
        "its results.json is left from an attempt that did not finish or from inputs since replaced, "
        "not this stage's result"
    )


def _modified_results(stage: Path, record: dict[str, Any]) -> tuple[str, str] | None:
    """("stale", why) when results.json differs from the sha256 stage.json recorded for it when the
    stage completed (an edit, a truncation, a copy from another run): `xfer status` then says the
    stage runs again because of it, while the table showed the edited numbers as the stage's."""
    recorded = record.get("output_files")
    name = RESULTS_FILE.relative_to("outputs").as_posix()
    digest = recorded.get(name) if isinstance(recorded, dict) else None
    path = stage / RESULTS_FILE
    if not isinstance(digest, str) or not path.is_file():
        return None
    try:
        with open(path, "rb") as handle:
            actual = hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as error:
        return "stale", f"{path} cannot be read to check it ({error.strerror})"
    if actual == digest:
        return None
    return "stale", f"{path} was modified after the stage completed (its sha256 differs from stage.json's)"


def _has_results(stage: Path) -> bool:
    return (stage / RESULTS_FILE).is_file()


_DELETED = f"completed, but its {RESULTS_FILE} (recorded in stage.json when it completed) has been deleted since"


def _deleted_results(stage: Path) -> bool:
    """Whether the stage completed with a results.json (its stage.json recorded the file's sha256)
    that is gone now: pruned or deleted by hand, it is no stage kind that reports nothing."""
    recorded = (read_json(stage / "stage.json") or {}).get("output_files")
    name = RESULTS_FILE.relative_to("outputs").as_posix()
    return isinstance(recorded, dict) and name in recorded and not _has_results(stage)


def _no_results(stage: Path) -> str:
    """Why a pooled stage folder has no results, from its recorded status: unfinished (pool it once
    it has finished), or finished without any (a stage kind that reports no dev scores)."""
    record = read_json(stage / "stage.json")  # None: no record, status unknown
    status = record.get("status") if record is not None else None
    if status == "completed" and _deleted_results(stage):  # not "a transformer.finetune stage reports none"
        return f"{stage}: {_DELETED}; nothing to pool"
    if status == "completed":
        kind = record.get("kind") if record is not None else None
        which = f"a {kind} stage" if isinstance(kind, str) else "its stage"
        return f"{stage}: finished without results ({which} reports none); nothing to pool"
    state = f" ({status})" if isinstance(status, str) else ""
    return f"{stage}: no results yet{state}; only finished stages can be pooled"


def _stage_order(run_dir: Path) -> list[str]:
    """The run's stages in recipe order (from recipe.resolved.yaml), else alphabetically.

    Only a mapping of stages is a recipe order: a damaged file's `stages: fit` was read letter by
    letter (stages f, i, t), and the run's results shown as "no results yet"."""
    import yaml

    stages = None
    with contextlib.suppress(OSError, UnicodeDecodeError, yaml.YAMLError):
        resolved = yaml.safe_load((run_dir / "recipe.resolved.yaml").read_text(encoding="utf-8"))
        stages = resolved.get("stages") if isinstance(resolved, dict) else None
    if isinstance(stages, dict):
        return [str(name) for name in stages]
    return sorted(p.name for p in run_dir.iterdir() if _is_stage(p))


def _is_stage(folder: Path) -> bool:
    """Whether `folder` is a stage folder: it has a stage.json or a results.json (`stage_dirs_of`)."""
    return (folder / "stage.json").is_file() or _has_results(folder)


def _unrecorded(stage: Path) -> str | None:
    """Why the row of a stage of a run folder that has a results.json but no stage.json is not known
    to be final, else None. Without the record nothing says the stage completed, nor that the file is
    the one it completed with (`xfer status` shows it pending). A results folder outside a run folder
    (copied out on its own) is read as it is."""
    if (stage / "stage.json").exists() or not (stage.parent / "recipe.resolved.yaml").is_file():
        return None
    return (
        f"{stage} has no stage.json (deleted, or not copied along): nothing records that the stage completed "
        f"with this {RESULTS_FILE}; `xfer status` shows it pending"
    )


def _signed_config(stage: Path) -> dict[str, Any] | None:
    """The config a stage's fingerprint signed (stage.json), None when the folder has no stage.json."""
    path = stage / "stage.json"
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))["signature"]["config"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise UserError(f"{path}: unreadable stage record ({error!r})") from None
    if not isinstance(config, dict):
        raise UserError(f"{path}: the signed config is not a mapping")
    return config


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_task_result(value: Any) -> bool:
    return isinstance(value, dict) and {"main_metric", "summary", "runs"} <= set(value)


def _task_problem(result: dict[str, Any]) -> str | None:
    """What in one task's entry the table and pools cannot use, else None (the wording of
    `xfer.cvt.results.check_layout`, which checked this for its own table). Only the key names were
    checked: a summary holding a string, or runs held as a number, ended `xfer results` in a
    traceback (ValueError, TypeError) instead of naming the file."""
    main, summary, runs = result["main_metric"], result["summary"], result["runs"]
    if not isinstance(main, str):
        return f"main_metric is {main!r}, not a metric name"
    if not isinstance(result.get("greater_is_better", True), bool):
        return f"greater_is_better is {result['greater_is_better']!r}, not true or false"
    if not isinstance(runs, list) or not all(isinstance(run, dict) for run in runs):
        return "runs is not a list of run records (mappings)"
    if not isinstance(summary, dict) or not all(
        isinstance(stats, dict) and _number(stats.get("mean")) and all(_number(stats[k]) for k in _STATS if k in stats)
        for stats in summary.values()
    ):
        return "summary is not a mapping of metric -> {mean: number, ...}"
    for index, run in enumerate(runs):
        if "seed" in run and not isinstance(run["seed"], (int, str)):
            return f"runs[{index}].seed is {run['seed']!r}, not a number or a name"
    return None


_STATS = ("median", "mean", "std", "min", "max")
"""The statistics `summarize` writes; a hand-written summary may lack some (the table shows "?")."""

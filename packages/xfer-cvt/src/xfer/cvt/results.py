"""Print Markdown tables of `cvt.train` results with the thesis's statistic (what docs/results.md is built from).

    python -m xfer.cvt.results runs/cvt-chunking runs/cvt-ner/cvt-10     # run or stage directories
    python -m xfer.cvt.results --curve runs/cvt-ner/supervised-10 runs/cvt-ner/cvt-10
    python -m xfer.cvt.results runs/cvt-ner-100+runs/cvt-ner-100-s23     # pool seeds run apart

`xfer results` prints medians (the GLUE protocol); the CVT chapter reports means over seeds, so
this table leads with mean ± sample std, then min–max, the per-trial values, the other metrics'
means and the mean training time per trial. It reads the shared results.json layout
(`xfer.core.results`); a stage still running is listed with the trials it has finished.

`--curve` prints, from each stage's metrics.jsonl, the dev score against the number of *labeled*
minibatches taken (the semi-supervised modes alternate a labeled and an unlabeled minibatch,
labeled first, so step s of mode cvt or word_dropout has taken ceil(s/2) labeled ones): modes compared at equal labeled
data, averaged over the trials that reached each point (their number in brackets where fewer
trials than elsewhere in the table did). Rows are labelled run/stage.

`A+B` pools the trials of same-named stages of run folders A and B (or of stage folders A and B)
into one row, as `xfer results` does (`xfer.core.results.stage_groups`): seeds of one configuration
run apart, e.g. a first run with `trials=1`, then `seed=2 stages.S.trials=2` in another folder. A
note under the table names the pooled folders and the config keys in which they differ.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from xfer.core.errors import UserError
from xfer.core.results import (
    BOOKKEEPING,
    RESULTS_FILE,
    json_number,
    markdown_cell,
    plus_minus,
    pool_note,
    pool_parts,
    pooled_results,
    read_results,
    stage_dirs_of,
    stage_groups,
    stage_problem,
    summarize,
)
from xfer.core.runs.report import TAGS_KEY, series_key

NOT_METRICS = BOOKKEEPING | {"step", "split", "time", TAGS_KEY}
"""Keys of a metrics.jsonl record that are not dev metrics (TAGS_KEY lists a tagged record's tag names)."""


def task_row(stage: str, task: str, result: dict[str, Any]) -> str:
    """One table row; names made safe for a cell (`markdown_cell`): a "|" or a line break in a stage,
    task or metric name shifted the later columns of the row, or ended it half-way."""
    main, runs, summary = result["main_metric"], result["runs"], result["summary"]
    values = [r[main] for r in runs if _number(r.get(main))]  # not a bool: True was read as 1.0
    name = f"{markdown_cell(task)} {markdown_cell(main)}"
    stage = markdown_cell(stage)
    if not values:
        return f"| {stage} | {name} | (no value) | | | {len(runs)} | | |"
    # as `xfer results` computes them (`summarize`): a diverged trial's NaN score is the worst (min/max
    # gave whatever its position made them) and makes the std NaN, where `statistics.stdev` raised a bare
    # AttributeError on it; an infinite one (a perplexity, a score of 1e400 in an edited file) too
    better = result.get("greater_is_better", True) is not False
    stats = summarize(runs, [main], () if better else (main,))[main]
    others = ", ".join(f"{markdown_cell(m)} {s['mean']:.1f}" for m, s in summary.items() if m != main)
    per_trial = " / ".join(f"{v:.1f}" for v in values)
    seconds = [float(r["seconds"]) for r in runs if _number(r.get("seconds"))]  # a missing time is not 0 s
    minutes = f"{_mean(seconds) / 60:.1f}" if seconds else ""
    return (
        f"| {stage} | {name} | **{stats['mean']:.1f}**{plus_minus(stats['std'], len(values))} | "
        f"{stats['min']:.1f}–{stats['max']:.1f} | "
        f"{per_trial} | {len(values)} | {others} | {minutes} |"
    )


def check_layout(stage: Path) -> None:
    """Refuse a results file (edited, or written by hand) whose parts are not what the table reads:
    `read_results` checks only the three keys of each task, and a run that is no mapping, a summary
    entry without a numeric mean or a `main_metric` that is no string stopped the tool with a bare
    TypeError or AttributeError (in pools too, inside `pooled_results`)."""
    results = read_results(stage)
    for task, result in (results or {}).items():
        main, summary, runs = result["main_metric"], result["summary"], result["runs"]
        problem = None
        if not isinstance(main, str):
            problem = f"main_metric is {main!r}, not a metric name"
        elif not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
            problem = "runs is not a list of run records (mappings)"
        elif not isinstance(summary, dict) or not all(
            isinstance(s, dict) and _number(s.get("mean")) for s in summary.values()
        ):
            problem = "summary is not a mapping of metric -> {mean: number, ...}"
        if problem is not None:
            raise UserError(f"{stage / RESULTS_FILE}: task {task}: {problem}")


def finished_trials(stage: Path) -> list[dict[str, Any]]:
    """The run records of the trials a running stage has finished (trials/trial-N/done.json)."""
    records = []
    # in trial order: sorted as text, trial-10 came before trial-2
    for done in sorted((stage / "trials").glob("trial-*/done.json"), key=_trial_number):
        try:
            record = json.loads(done.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise UserError(f"{done}: unreadable trial record ({error})") from None
        if not isinstance(record, dict):  # was a bare AttributeError in `first_metric`
            raise UserError(f"{done}: not a trial record (a mapping of metric -> value)")
        records.append(record)
    return records


def _trial_number(done: Path) -> tuple[int, str]:
    """`trials/trial-N/done.json` -> (N, name); a folder whose N is not a number sorts last, by name."""
    name = done.parent.name
    number = name.removeprefix("trial-")
    return (int(number), name) if number.isdecimal() else (1 << 62, name)


def first_metric(record: dict[str, Any]) -> str | None:
    """A record's first score: the (first task's) main metric, as stages write it first."""
    return next((k for k, v in record.items() if k not in NOT_METRICS and _number(v)), None)


def unfinished_row(stage: Path) -> str:
    records = finished_trials(stage)
    metric = first_metric(records[0]) if records else None
    name = markdown_cell(label([stage]))
    if metric is None:
        return f"| {name} | (not finished; no trial finished yet) | | | | | | |"
    values = " / ".join(f"{r[metric]:.1f}" for r in records if _number(r.get(metric)))
    return f"| {name} | (not finished) {markdown_cell(metric)} | | | {values} | {len(records)} so far | | |"


def stage_rows(group: list[Path]) -> list[str]:
    for stage in group:
        check_layout(stage)
    results = pooled_results(group)
    if results is None:
        return [unfinished_row(group[0])]
    name = label(group)
    problem = stale(group)
    if problem is not None:
        name = f"{name} [{problem[0]}]"
    return [task_row(name, task, result) for task, result in results.items()]


def stale(group: list[Path]) -> tuple[str, str] | None:
    """(status, why) of a lone stage whose results.json is not its final result (a pool refuses such
    a stage): invalidated, failed, interrupted, running again with more trials, damaged, or edited
    after it completed. It was shown as a plain row, as if final (`xfer results` marks it the same way)."""
    if len(group) != 1 or read_results(group[0]) is None:
        return None
    return stage_problem(group[0])


def stage_config(stage: Path) -> dict[str, Any]:
    """The stage record's kind and config (stage.json), read once per stage."""
    path = stage / "stage.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        return {"kind": str(record["kind"]), **record.get("signature", {}).get("config", {})}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
        raise UserError(f"{path}: unreadable stage record ({error!r})") from None


def cvt_groups(argument: str) -> list[list[Path]]:
    """The cvt.train stage directories an argument names, grouped into table rows: the stage
    itself, a run directory's (in recipe order, as `xfer results` lists them), or pools (`A+B`)."""
    parts = pool_parts(argument)
    named_stages = True
    for part in parts:
        stages = stage_dirs_of([part]) if part.is_dir() else []
        if not stages:
            raise UserError(f"{part}: not a stage directory (no stage.json) nor a run directory holding stages")
        named_stages = named_stages and stages == [part]
    chosen = []
    for group in stage_groups([argument]):
        configs = [stage_config(stage) for stage in group]
        kinds = {config["kind"] for config in configs}
        modes = {config.get("mode") for config in configs}
        if kinds != {"cvt.train"}:
            if named_stages and len(group) == 1:
                raise UserError(f"{argument}: a {', '.join(kinds)} stage, not cvt.train")
            if named_stages:
                raise UserError(
                    f"{argument}: pools stages of kinds {', '.join(sorted(kinds))}; only cvt.train ones pool"
                )
            continue
        if len(modes) > 1:
            raise UserError(f"{argument}: pools stages of modes {', '.join(sorted(map(str, modes)))}; not pooled")
        chosen.append(group)
    return chosen


def stage_mode(stage: Path) -> str:
    """The stage's `mode` (what its steps mean in labeled minibatches)."""
    mode = stage_config(stage).get("mode")
    if mode is None:
        raise UserError(f"{stage / 'stage.json'}: no cvt.train stage record with a mode")
    return str(mode)


def curve_metrics(stage: Path, rows: list[dict[str, Any]], metric: str | None) -> list[str]:
    """The dev keys to plot: `metric` (a key or a key's last part), else each task's main metric."""
    keys = [k for k in rows[0] if k not in NOT_METRICS] if rows else []
    if metric is not None:
        chosen = [k for k in keys if k == metric or k.endswith("/" + metric)]
        if not chosen:
            raise UserError(f"{stage / 'metrics.jsonl'}: no dev metric {metric!r}; it has {', '.join(keys)}")
        return chosen
    results = read_results(stage)
    if results is not None:
        if len(results) == 1:
            return [next(iter(results.values()))["main_metric"]]
        return [f"{task}/{r['main_metric']}" for task, r in results.items() if f"{task}/{r['main_metric']}" in keys]
    return [keys[0]] if keys else []


def dev_rows(stage: Path) -> list[dict[str, Any]]:
    """The dev records of a stage's metrics.jsonl, each (trial, step) once: the last one logged.

    Read a line at a time (a long run's file was read whole, twice), each line decoded on its own,
    so a byte that is not UTF-8 is named with its line. A last line without its line end is one a
    kill cut (or one being written): the run rewrites it on resume; any other bad line is named.
    A stage resumed without an intact checkpoint by xfer before 2026-11-27 logged its evaluations
    again after the killed attempt's (`RunLog` now drops those first): both were averaged into the
    curve's point and counted as trials."""
    path = stage / "metrics.jsonl"
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    try:
        with open(path, "rb") as lines:
            for number, data in enumerate(lines, 1):
                if not data.strip():
                    continue
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as error:  # a kill may cut a character in two as well
                    if not data.endswith(b"\n"):
                        continue
                    raise UserError(f"{path}:{number}: not UTF-8 text ({error.reason})") from None
                try:
                    row = json.loads(text)
                except json.JSONDecodeError:
                    if not data.endswith(b"\n"):  # the last line, cut by a kill mid-write (or being written)
                        continue
                    raise UserError(f"{path}:{number}: not a JSON line") from None
                if not isinstance(row, dict) or (
                    row.get("split") == "dev"
                    and not (isinstance(row.get("step"), int) and not isinstance(row["step"], bool))
                ):  # were a bare AttributeError, KeyError or ValueError (an edited or foreign file)
                    raise UserError(
                        f"{path}:{number}: not a metrics record (a mapping whose dev rows have an integer step)"
                    )
                if row.get("split") == "dev":
                    key = (series_key(row), row["step"])
                    latest.pop(key, None)  # in the order of the last records
                    latest[key] = {k: json_number(v) for k, v in row.items()}  # a diverged score is written "NaN"
    except OSError as error:
        raise UserError(f"{path}: unreadable ({error})") from None
    return list(latest.values())


def curve_table(groups: list[list[Path]], metric: str | None) -> list[str]:
    """Dev score by labeled minibatches: one row per (stage or pool, metric), mean over trials."""
    table: dict[str, dict[int, list[float]]] = {}
    for group in groups:
        if len(group) > 1:
            pooled_results(group)  # refuses pools that would count a trial twice
        per_labeled = 1 if stage_mode(group[0]) == "supervised" else 2
        keys = curve_metrics(group[0], dev_rows(group[0]), metric)
        for key in keys:
            points: dict[int, list[float]] = defaultdict(list)
            for stage in group:
                for row in dev_rows(stage):
                    if _number(row.get(key)):
                        points[labeled_minibatches(int(row["step"]), per_labeled)].append(float(row[key]))
            table[f"{label(group)} {key}"] = points
    columns = sorted({n for points in table.values() for n in points})
    most = max((len(v) for points in table.values() for v in points.values()), default=0)
    lines = [
        "| stage, dev metric \\ labeled minibatches | " + " | ".join(str(n) for n in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for name, points in table.items():
        cells = [cell(points[n], most) if n in points else "" for n in columns]
        lines.append(f"| {markdown_cell(name)} | " + " | ".join(cells) + " |")
    return lines


def labeled_minibatches(step: int, per_labeled: int) -> int:
    """Labeled minibatches taken in the first `step` steps when every `per_labeled`-th step is one,
    the first included (`AlternatingSource` starts with the labeled source): ceil(step / per_labeled).
    `step // 2` left out the last one after an odd number of steps (a final evaluation at step 7 had
    taken 4, it was plotted at 3, against a supervised run's score after 3)."""
    return -(-step // per_labeled)


def cell(values: list[float], most: int) -> str:
    """A mean, with its trial count when fewer trials than elsewhere in the table reached it."""
    mean = f"{_mean(values):.1f}"
    return mean if len(values) == most else f"{mean} ({len(values)})"


def label(group: list[Path]) -> str:
    """run/stage: stage names repeat across run directories (cvt-10 in each recipe's runs); a pool
    of same-named stages is run+run/stage."""
    if len({stage.name for stage in group}) == 1:
        return "+".join(stage.parent.name for stage in group) + "/" + group[0].name
    return "+".join(f"{stage.parent.name}/{stage.name}" for stage in group)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m xfer.cvt.results", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "stages", nargs="+", help="run or stage directories (runs/NAME, runs/NAME/STAGE); A+B pools A's and B's trials"
    )
    parser.add_argument("--curve", action="store_true", help="dev score by labeled minibatches instead")
    parser.add_argument("--metric", help="with --curve: the dev metric to follow (default: each task's main one)")
    args = parser.parse_args(argv)
    if args.metric is not None and not args.curve:  # the table was printed with the main metrics instead
        parser.error("--metric chooses the metric of --curve; the table always shows each task's main metric")
    try:
        groups = [group for argument in args.stages for group in cvt_groups(argument)]
        if args.curve:
            lines = curve_table(groups, args.metric)
        else:
            lines = [
                "| stage | task / metric | mean ± std | min–max | per trial | trials | other metrics (mean) | min/trial |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for group in groups:
                lines.extend(stage_rows(group))
        pools = [pool_note(label(group), group) for group in groups if len(group) > 1]
        if not args.curve:
            pools += [
                f"{group[0]} is {problem[0]}: {problem[1]}; `xfer status` says why"
                for group in groups
                if (problem := stale(group)) is not None
            ]
        lines += ["", *pools] if pools else []
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


def _mean(values: list[float]) -> float:
    """The mean; NaN where it is undefined (inf and -inf) or the sum overflows a float, where
    `statistics.fmean` raised (a bare ValueError or OverflowError)."""
    try:
        return statistics.fmean(values)
    except (OverflowError, ValueError):
        return math.nan


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

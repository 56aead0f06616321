"""`xfer compare` against hostile inputs: systems written as JSON files (no training), edited,
truncated or mismatched, and its statistics against independent references.

A synthetic system is what a `bam.*` stage writes: `outputs/results/results.json` (every run's
main metric, trial and seed) and `outputs/results/dev/<task>/{gold.json,trial-N.json}`.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import shutil
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xfer.bam import stats
from xfer.core import cli, metrics

LABELS = ["0", "1"]
TAGS = ["O", "B-A", "I-A"]
DEV = "outputs/results/dev"


def _task(kind: str, main: str, gold: list[Any], runs: list[tuple[int, list[Any]]], **gold_extra: Any) -> dict:
    return {"type": kind, "main": main, "gold": gold, "runs": runs, "extra": gold_extra}


def _official(kind: str, main: str, gold: list[Any], predictions: list[Any], positive: str | None) -> float:
    """The task's own metric, as the stage recorded it (xfer.core.metrics)."""
    if kind == "tagging":
        return metrics.span_f1(gold, predictions).f1
    if main == "f1":
        return metrics.f1(gold, predictions, positive=positive)
    return {"accuracy": metrics.accuracy, "pearson": metrics.pearson}[main](gold, predictions)


def write_system(folder: Path, tasks: dict[str, dict]) -> Path:
    """A stage folder holding `tasks` ({name: _task(...)}) as a bam stage records them."""
    results = {}
    for name, task in tasks.items():
        dev = folder / DEV / name.replace("/", "-")
        dev.mkdir(parents=True, exist_ok=True)
        ids = [f"ex{i}" for i in range(len(task["gold"]))]
        labels = {"classification": LABELS, "tagging": TAGS}.get(task["type"], [])
        gold = {"task": name, "type": task["type"], "labels": task["extra"].pop("labels", labels)}
        gold.update({"main_metric": task["main"], "ids": ids, "gold": task["gold"], **task["extra"]})
        (dev / "gold.json").write_text(json.dumps(gold))
        runs = []
        for trial, (seed, predictions) in enumerate(task["runs"]):
            record = {"task": name, "trial": trial, "seed": seed, "predictions": predictions}
            (dev / f"trial-{trial}.json").write_text(json.dumps(record))
            positive = gold.get("positive_label") or (gold["labels"][-1] if gold["labels"] else None)
            score = _official(task["type"], task["main"], task["gold"], predictions, positive)
            runs.append({task["main"]: score, "trial": trial, "seed": seed, "steps": 1, "checkpoint": "last"})
        scores = [r[task["main"]] for r in runs]
        summary = {task["main"]: {"median": float(np.median(scores)), "mean": float(np.mean(scores)), "std": 0.0}}
        results[name] = {"main_metric": task["main"], "model": "m", "runs": runs, "summary": summary}
    (folder / "outputs/results/results.json").write_text(json.dumps(results))
    return folder


def _noisy(rng: random.Random, gold: list[Any], accuracy: float, choices: list[Any]) -> list[Any]:
    return [g if rng.random() < accuracy else rng.choice(choices) for g in gold]


def two_systems(root: Path, n: int = 30, seeds_b: tuple[int, ...] = (1, 2)) -> tuple[Path, Path]:
    """A (better) and B: a classification, a regression and a tagging task on the same dev sets."""
    rng = random.Random(0)
    gold_c = [rng.choice(LABELS) for _ in range(n)]
    gold_r = [round(rng.uniform(0, 5), 1) for _ in range(n)]
    gold_t = [[rng.choice(TAGS) for _ in range(rng.randint(1, 5))] for _ in range(n)]

    def system(folder: Path, quality: float, seeds: tuple[int, ...]) -> Path:
        return write_system(
            folder,
            {
                "glue/cls": _task(
                    "classification", "accuracy", gold_c, [(s, _noisy(rng, gold_c, quality, LABELS)) for s in seeds]
                ),
                "glue/reg": _task(
                    "regression",
                    "pearson",
                    gold_r,
                    [(s, [g + rng.gauss(0, 3 - 3 * quality) for g in gold_r]) for s in seeds],
                ),
                "conll/tag": _task(
                    "tagging", "f1", gold_t, [(s, [_noisy(rng, g, quality, TAGS) for g in gold_t]) for s in seeds]
                ),
            },
        )

    return system(root / "A", 0.9, (1, 2, 3)), system(root / "B", 0.6, seeds_b)


def compare(capsys: pytest.CaptureFixture, *args: str, out: Path) -> tuple[int, str, str]:
    code = cli.main(["compare", *args, "--no-plot", "--bootstrap", "200", "--out", str(out)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _edit(path: Path, change: Callable[[Any], Any]) -> None:
    """Apply `change` to the JSON in `path` in place; a `change` that returns bytes writes those instead."""
    data = json.loads(path.read_text())
    result = change(data)
    if isinstance(result, bytes):
        path.write_bytes(result)
    else:
        path.write_text(json.dumps(data))


# --- the positive class of F1 -------------------------------------------------------------------


@pytest.mark.parametrize(("labels", "positive"), [(["pos", "neg"], "pos"), (["1", "0"], None), (["a", "b", "c"], "b")])
def test_f1_is_recomputed_for_the_recorded_positive_label(
    tmp_path: Path, capsys: pytest.CaptureFixture, labels: list[str], positive: str | None
) -> None:
    """The bootstrap F1 took label "1" (else the last) as the positive class, so a glue/tsv task
    with another positive_label (or labels "1","0", whose default positive is the last, "0")
    recomputed a different F1 than the run recorded and the systems were refused."""
    rng = random.Random(1)
    gold = [rng.choice(labels) for _ in range(40)]
    extra = {"labels": labels} | ({"positive_label": positive} if positive else {})
    systems = [
        write_system(
            tmp_path / name,
            {
                "glue/tsv": _task(
                    "classification", "f1", gold, [(s, _noisy(rng, gold, q, labels)) for s in (1, 2)], **dict(extra)
                )
            },
        )
        for name, q in (("A", 0.9), ("B", 0.5))
    ]
    code, out, err = compare(capsys, *map(str, systems), out=tmp_path / "c")
    assert code == 0, err
    assert "| glue/tsv | f1 |" in out


def test_positive_label_that_is_not_a_label_and_different_positives_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    a, b = two_systems(tmp_path)
    gold = b / DEV / "glue-cls/gold.json"
    _edit(gold, lambda g: g.update(positive_label="yes"))
    code, _, err = compare(capsys, str(a), str(b), out=tmp_path / "c")
    assert code == 2 and "gold.json: glue/cls.positive_label: 'yes' is not one of the labels" in err
    _edit(gold, lambda g: g.update(positive_label="0"))  # accuracy does not depend on it
    assert compare(capsys, str(a), str(b), out=tmp_path / "c")[0] == 0
    rng = random.Random(2)
    gold_labels = [rng.choice(LABELS) for _ in range(20)]
    systems = [
        write_system(
            tmp_path / name,
            {
                "t/f1": _task(
                    "classification",
                    "f1",
                    gold_labels,
                    [(1, _noisy(rng, gold_labels, 0.7, LABELS))],
                    positive_label=positive,
                )
            },
        )
        for name, positive in (("P0", "0"), ("P1", "1"))
    ]
    code, _, err = compare(capsys, *map(str, systems), out=tmp_path / "c2")
    assert code == 2 and "t/f1: P1 reports the F1 of label '1', P0 of '0'" in err


def test_stage_records_the_positive_label_of_the_task(tmp_path: Path) -> None:
    """gold.json carries the class of the F1: the task info's, the config's (glue/tsv), else the last label."""
    from types import SimpleNamespace

    from xfer.bam.stage import positive_label
    from xfer.core.tasks import TaskInfo

    def data(info: TaskInfo, config: Any = None) -> Any:
        return SimpleNamespace(info=info, config=config)

    binary = TaskInfo("t", "classification", ("pos", "neg"), "f1")
    assert positive_label(data(binary, SimpleNamespace(positive_label="pos"))) == "pos"
    assert positive_label(data(binary, SimpleNamespace(positive_label=None))) == "neg"
    named = TaskInfo("t", "classification", ("a", "b", "c"), "f1", extra={"positive_label": "b"})
    assert positive_label(data(named)) == "b"
    assert positive_label(data(TaskInfo("t", "regression", (), "pearson"))) is None


# --- dev sets, seeds and tasks that differ -------------------------------------------------------


def test_a_dev_set_in_another_order_is_paired_by_example(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The same examples listed in another order were refused as 'different dev sets'; they are
    paired by id, in the baseline's order, so the result equals that of the unshuffled files."""
    a, b = two_systems(tmp_path / "plain")
    code, expected, err = compare(capsys, str(a), str(b), out=tmp_path / "c1")
    assert code == 0, err
    shuffled = tmp_path / "shuffled"
    shutil.copytree(tmp_path / "plain", shuffled)
    order = list(range(30))
    random.Random(5).shuffle(order)
    dev = shuffled / "B" / DEV / "glue-cls"
    _edit(dev / "gold.json", lambda g: g.update(ids=[g["ids"][i] for i in order], gold=[g["gold"][i] for i in order]))
    for trial in (0, 1):
        _edit(dev / f"trial-{trial}.json", lambda r: r.update(predictions=[r["predictions"][i] for i in order]))
    code, out, err = compare(capsys, str(shuffled / "A"), str(shuffled / "B"), out=tmp_path / "c2")
    assert code == 0, err
    tests = lambda text: text[text.index("### Tests") : text.index("written:")]  # noqa: E731
    assert tests(out) == tests(expected)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda g: g.update(gold=["1" if x == "0" else "0" for x in g["gold"][:1]] + g["gold"][1:]),
            r"example 'ex0' has gold '\d' in B's, '\d' in A's",
        ),
        (lambda g: g["ids"].__setitem__(0, "other"), "example 'other' is in B's, not in A's"),
    ],
)
def test_different_dev_sets_say_how_they_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture, edit: Callable, message: str
) -> None:
    a, b = two_systems(tmp_path)
    _edit(b / DEV / "glue-cls/gold.json", edit)
    results = b / "outputs/results/results.json"
    gold = json.loads((b / DEV / "glue-cls/gold.json").read_text())["gold"]
    scores = [
        metrics.accuracy(gold, json.loads((b / DEV / f"glue-cls/trial-{t}.json").read_text())["predictions"])
        for t in (0, 1)
    ]
    _edit(results, lambda r: [run.update(accuracy=s) for run, s in zip(r["glue/cls"]["runs"], scores, strict=True)])
    code, _, err = compare(capsys, str(a), str(b), out=tmp_path / "c")
    assert code == 2 and "glue/cls: B and A were evaluated on different dev sets (" in err and re.search(message, err)


def test_a_task_in_one_system_only_is_left_out_of_the_average(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """B's Avg was the mean over four tasks while its average test (and A's Avg) covered three:
    a star would have been put on a number the test never saw."""
    a, b = two_systems(tmp_path, seeds_b=(1, 2, 3))
    shutil.copytree(b / DEV / "glue-cls", b / DEV / "extra-task")
    _edit(b / "outputs/results/results.json", lambda r: r.update({"extra/task": r["glue/cls"]}))
    code, out, err = compare(capsys, str(a), str(b), out=tmp_path / "c")
    assert code == 0, err
    assert "not in every system, so not in the average: extra/task" in err
    rows = {
        line.split("|")[1].strip(): line.split("|")[2].strip()
        for line in out.splitlines()
        if line.startswith("| A ") or line.startswith("| B ")
    }
    saved = json.loads((tmp_path / "c/compare.json").read_text())
    assert saved["average_tasks"] == ["glue/cls", "glue/reg", "conll/tag"]
    medians = {s: [np.median(saved["systems"][s]["tasks"][t]["scores"]) for t in saved["average_tasks"]] for s in "AB"}
    assert rows == {s: f"{np.mean(medians[s]):.1f}" for s in "AB"}
    assert not any(t["task"] == "extra/task" for t in saved["tests"])


def test_different_numbers_of_seeds_are_compared_on_shared_seeds(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a, b = two_systems(tmp_path, seeds_b=(2, 9))
    code, _, err = compare(capsys, str(a), str(b), out=tmp_path / "c")
    assert code == 0, err
    saved = json.loads((tmp_path / "c/compare.json").read_text())
    assert {t["seed_wins"] for t in saved["tests"] if t["task"] != "average"} <= {"0/1", "1/1"}


# --- edited, truncated, empty files ---------------------------------------------------------------


def _set(key: str, value: Any) -> Callable:
    return lambda d: d.update({key: value})


RESULTS = "outputs/results/results.json"
EDITS = [
    (f"{DEV}/glue-cls/gold.json", lambda g: json.dumps(g).encode()[:50], r"gold.json: unreadable \(Unterminated"),
    (f"{DEV}/glue-cls/trial-1.json", lambda r: b"", r"trial-1.json: unreadable"),
    (f"{DEV}/glue-cls/gold.json", _set("labels", "01"), r"gold.json: glue/cls.labels: expected list, found str"),
    (f"{DEV}/glue-cls/gold.json", lambda g: g.update(ids=[], gold=[]), r"gold.json: no dev examples recorded"),
    (
        f"{DEV}/glue-cls/gold.json",
        lambda g: g["ids"].__setitem__(1, "ex0"),
        r"gold.json: ids\[1\]: example id 'ex0' is recorded twice",
    ),
    (
        f"{DEV}/glue-cls/gold.json",
        lambda g: g["ids"].__setitem__(1, 1),
        r"gold.json: ids\[1\]: expected a string, found int",
    ),
    (f"{DEV}/glue-cls/gold.json", _set("type", "span_qa"), r"glue/cls is a span_qa task; xfer compare resamples"),
    (
        f"{DEV}/glue-cls/trial-0.json",
        lambda r: r["predictions"].__setitem__(2, 1),
        r"trial-0.json: predictions\[2\]: 1 is not one of the labels",
    ),
    (
        f"{DEV}/glue-reg/trial-0.json",
        lambda r: r["predictions"].__setitem__(3, "2.5"),
        r"trial-0.json: predictions\[3\]: expected a number, found str",
    ),
    (
        f"{DEV}/glue-reg/trial-0.json",
        lambda r: r["predictions"].__setitem__(3, float("nan")),
        r"trial-0.json: predictions\[3\]: nan is not a finite number",
    ),
    (
        f"{DEV}/conll-tag/trial-1.json",
        lambda r: r["predictions"].__setitem__(0, "O"),
        r"trial-1.json: predictions\[0\]: expected a list of tag strings",
    ),
    (
        f"{DEV}/conll-tag/trial-1.json",
        lambda r: r["predictions"][4].append("O"),
        r"trial-1.json: predictions\[4\]: \d tags for a sentence of \d words",
    ),
    (
        f"{DEV}/conll-tag/trial-1.json",
        lambda r: r["predictions"][4].__setitem__(0, "S-A"),
        r"trial-1.json: predictions\[4\]: tag 'S-A' is not one of the task's tags \['O', 'B-A', 'I-A'\]",
    ),
    (
        RESULTS,
        lambda r: r["glue/cls"]["runs"][0].update(accuracy=float("nan")),
        r"results.json: glue/cls.runs\[0\].accuracy is nan",
    ),
    (
        RESULTS,
        lambda r: r["glue/cls"]["runs"][1].update(trial=0),
        r"results.json: glue/cls: trial 0 is recorded for two runs",
    ),
    (
        RESULTS,
        lambda r: r["glue/cls"]["runs"][1].update(seed=1),
        r"results.json: glue/cls: seed 1 is recorded for two runs",
    ),
]


@pytest.mark.parametrize(("file", "edit", "message"), EDITS, ids=[m for _, _, m in EDITS])
def test_an_edited_file_is_named_with_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture, file: str, edit: Callable, message: str
) -> None:
    """Each was a traceback, a misleading 'resampling metric gives nan' or silently accepted
    (labels "01" read as "0", "1"; "2.5" read as 2.5; a run counted twice)."""
    a, b = two_systems(tmp_path)
    _edit(b / file, edit)
    code, _, err = compare(capsys, str(a), str(b), out=tmp_path / "c")
    assert code == 2 and re.search(message, err), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "c").exists()


def test_a_stage_whose_results_are_not_final_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """results.json outlives the attempt that wrote it (a stage resumed with more trials, invalidated)."""
    a, b = two_systems(tmp_path)
    (b / "stage.json").write_text(json.dumps({"status": "invalidated"}))
    code, _, err = compare(capsys, str(a), str(b), out=tmp_path / "c")
    assert code == 2 and "its results are not final (invalidated" in err


def test_a_run_folder_with_an_unfinished_stage_says_so(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A stage with dev predictions but no results.json yet was 'results.json: no task results in it'."""
    _, b = two_systems(tmp_path / "run")
    (b / RESULTS).unlink()
    code, _, err = compare(capsys, str(tmp_path / "run"), out=tmp_path / "c")
    assert code == 2 and "results.json: missing: the stage has not finished" in err


def test_a_dev_set_of_one_example_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """scipy's bootstrap needs two observations: its ValueError surfaced as a traceback."""
    systems = [
        write_system(tmp_path / name, {"t/cls": _task("classification", "accuracy", ["1"], [(1, [p])])})
        for name, p in (("A", "1"), ("B", "0"))
    ]
    code, _, err = compare(capsys, *map(str, systems), out=tmp_path / "c")
    assert code == 2 and "t/cls: B vs A: a dev set of 1 example(s) cannot be resampled" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bootstrap", "0"], "--bootstrap must be between 100 and 1,000,000"),
        (["--bootstrap", "-5"], "--bootstrap must be between 100 and 1,000,000"),
        (["--bootstrap", "1000000000"], "--bootstrap must be between 100 and 1,000,000 resamples, not 1,000,000,000"),
        (["--seed", "-1"], "--seed must be a non-negative integer, not -1"),
        (["--baseline", "A", "A"], "--baseline 'A' is given twice"),  # each test twice, Holm over twice as many
    ],
)
def test_resamples_and_seed_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], message: str
) -> None:
    """A huge B was a MemoryError traceback (every resample's indices in one array), a negative
    seed numpy's ValueError traceback, a baseline given twice doubled every test."""
    a, b = two_systems(tmp_path)
    code = cli.main(["compare", f"A={a}", f"B={b}", "--no-plot", "--out", str(tmp_path / "c"), *args])
    assert code == 2 and message in capsys.readouterr().err


# --- the statistics against independent references ---------------------------------------------


def test_a_regression_task_with_constant_predictions_scores_zero_as_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    gold = [0.5, 1.0, 2.5, 4.0, 3.5, 2.0]
    systems = [
        write_system(tmp_path / name, {"t/reg": _task("regression", "pearson", gold, [(1, p)])})
        for name, p in (("A", [2.0] * 6), ("B", [0.4, 1.2, 2.4, 4.1, 3.2, 2.2]))
    ]
    code, out, err = compare(capsys, *map(str, systems), out=tmp_path / "c")
    assert code == 0, err
    assert "| A | 0.0 | 0.0 |" in out


def test_tagging_span_f1_reproduces_the_recorded_f1_with_bioes_tags() -> None:
    rng = np.random.default_rng(3)
    tags = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "E-LOC", "S-LOC", "I-LOC"]
    for _ in range(30):
        gold = [[str(t) for t in rng.choice(tags, rng.integers(1, 7))] for _ in range(int(rng.integers(2, 8)))]
        pred = [[t if rng.random() < 0.6 else str(rng.choice(tags)) for t in s] for s in gold]
        value = stats.build_metric("tagging", "f1", gold, [pred], tags).full()[0]
        assert value == pytest.approx(metrics.span_f1(gold, pred, scheme="BIOES").f1, abs=1e-9)


def _exact_p(gold: list[int], a: list[list[int]], b: list[list[int]]) -> float:
    """The shifted-bootstrap p over ALL n^n resamples, in exact rational arithmetic."""
    n = len(gold)

    def delta(idx: tuple[int, ...]) -> Fraction:
        def mean_accuracy(runs: list[list[int]]) -> Fraction:
            return sum(Fraction(sum(gold[i] == r[i] for i in idx), n) for r in runs) / len(runs)

        return mean_accuracy(a) - mean_accuracy(b)

    observed = delta(tuple(range(n)))
    resamples = list(itertools.product(range(n), repeat=n))
    return sum(delta(idx) >= 2 * observed for idx in resamples) / len(resamples)


@pytest.mark.parametrize(
    ("gold", "a", "b"),
    [
        (
            [1, 0, 0, 1, 0],
            [[0, 0, 1, 1, 0], [1, 0, 0, 1, 1], [1, 0, 1, 1, 1]],
            [[0, 1, 0, 0, 1], [1, 1, 0, 0, 0], [1, 0, 1, 0, 1]],
        ),
        (
            [1, 1, 1, 1, 0],
            [[0, 0, 1, 1, 1], [0, 1, 0, 1, 0], [1, 1, 1, 1, 1]],
            [[0, 1, 1, 1, 0], [0, 1, 0, 0, 1], [1, 0, 1, 0, 1]],
        ),
        ([1, 0, 1, 1, 0], [[1, 0, 1, 0, 0], [1, 0, 1, 1, 1]], [[0, 0, 1, 0, 1]]),
    ],
)
def test_paired_bootstrap_p_matches_brute_force_over_every_resample(gold: list, a: list, b: list) -> None:
    """Δ* = 2Δ exactly is common for accuracy over few examples and seeds, and float rounding
    dropped a share of those ties from the count: p came out about half the exact value."""
    label = lambda values: [str(v) for v in values]  # noqa: E731
    ma = stats.build_metric("classification", "accuracy", label(gold), [label(r) for r in a], LABELS)
    mb = stats.build_metric("classification", "accuracy", label(gold), [label(r) for r in b], LABELS)
    exact = _exact_p(gold, a, b)
    result = stats.paired_bootstrap([ma], [mb], 20_000, seed=0)
    assert result.p == pytest.approx(exact, abs=0.012)  # 4 standard errors of 20,000 resamples


def test_bootstrap_holds_a_bounded_number_of_indices_and_is_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    """All B resamples' indices were drawn into one [B, n] array (298 GiB for B = 1e9, n = 40)."""
    rng = np.random.default_rng(4)
    gold = list(rng.choice(LABELS, 8))
    largest = []

    def metric(runs: list) -> stats.Metric:
        inner = stats.build_metric("classification", "accuracy", gold, runs, LABELS)

        def values(idx: np.ndarray) -> np.ndarray:
            largest.append(idx.size)
            return inner(idx)

        return stats.Metric(inner.n, values)

    a, b = metric([list(rng.choice(LABELS, 8))]), metric([list(rng.choice(LABELS, 8))])
    unbatched = stats.paired_bootstrap([a], [b], 300, seed=7)
    monkeypatch.setattr(stats, "MAX_INDICES", 64, raising=False)
    largest.clear()
    batched = stats.paired_bootstrap([a], [b], 300, seed=7)
    assert max(largest) <= 64
    assert batched == unbatched == stats.paired_bootstrap([a], [b], 300, seed=7)


def _holm_reference(p: list[float]) -> list[float]:
    """Holm's step-down procedure written from its definition: reject H(1..k) while
    p(j) <= alpha / (m - j + 1); the adjusted p of H(i) is the smallest alpha that rejects it."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    for rank, i in enumerate(order):
        adjusted[i] = min(1.0, max((m - r) * p[order[r]] for r in range(rank + 1)))
    return adjusted


def test_holm_matches_a_reference_and_its_rejections() -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):
        p = [float(x) for x in rng.choice([0.001, 0.01, 0.02, 0.04, 0.3], rng.integers(1, 9))] + list(
            rng.uniform(0, 1, 3)
        )
        adjusted = stats.holm(p)
        assert adjusted == pytest.approx(_holm_reference(p))
        for alpha in (0.01, 0.05):  # step-down rejections: the smallest k first, stop at the first kept
            rejected = set()
            for rank, i in enumerate(sorted(range(len(p)), key=lambda i: p[i])):
                if p[i] > alpha / (len(p) - rank):
                    break
                rejected.add(i)
            assert {i for i, q in enumerate(adjusted) if q <= alpha} == rejected


def test_the_printed_table_and_json_agree_and_are_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a, b = two_systems(tmp_path)
    code, first, _ = compare(capsys, f"Base={a}", f"New={b}", "--seed", "3", out=tmp_path / "c1")
    code2, second, _ = compare(capsys, f"Base={a}", f"New={b}", "--seed", "3", out=tmp_path / "c2")
    assert code == code2 == 0
    assert first.replace("c1", "c2") == second
    saved = json.loads((tmp_path / "c1/compare.json").read_text())
    assert saved["bootstrap"] == {"resamples": 200, "seed": 3} and saved["baselines"] == ["Base"]
    assert [t["task"] for t in saved["tests"]] == ["glue/cls", "glue/reg", "conll/tag", "average"]
    assert [t["p_holm"] for t in saved["tests"]] == pytest.approx(stats.holm([t["p"] for t in saved["tests"]]))
    for test in saved["tests"]:
        row = f"| {test['task']} | New | Base | {test['delta']:+.2f} | [{test['low']:+.2f}, {test['high']:+.2f}] | {test['p']:.4f} |"
        assert row in first
        assert test["low"] <= test["delta"] <= test["high"] or test["task"] == "average"
    assert (tmp_path / "c1/compare.md").read_text() == first[: first.index("\nwritten:")]


def test_a_task_scored_by_two_metrics_is_refused_even_between_untested_systems(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """B and C are both tested only against A, which lacks the task: B's F1 and C's accuracy were
    printed in one column under B's metric name."""
    rng = random.Random(3)
    gold = [rng.choice(LABELS) for _ in range(20)]
    a, _ = two_systems(tmp_path / "ab")
    systems = [
        write_system(
            tmp_path / name, {"t/cls": _task("classification", metric, gold, [(1, _noisy(rng, gold, 0.7, LABELS))])}
        )
        for name, metric in (("B", "f1"), ("C", "accuracy"))
    ]
    code, _, err = compare(capsys, f"A={a}", *(f"{s.name}={s}" for s in systems), out=tmp_path / "c")
    assert code == 2 and "t/cls: B reports f1, C accuracy" in err

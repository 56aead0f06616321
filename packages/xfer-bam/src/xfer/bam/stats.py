"""Significance tests for `xfer compare`: paired bootstrap over dev examples, Holm-Bonferroni.

A system is a set of runs (seeds) with per-example dev predictions. Comparing systems A and B
on a task, the statistic is Δ = mean over A's runs of the metric − mean over B's runs, both
computed on the SAME resampled dev examples (that is the pairing: each bootstrap sample is one
draw of a dev set both systems are scored on). Resampling and percentile intervals come from
`scipy.stats.bootstrap`; the one-sided p-value of "A is better than B" is the shifted-bootstrap
estimate of Berg-Kirkpatrick et al. (2012): how often Δ* − Δ ≥ Δ, i.e. the resampled difference
exceeds twice the observed one, as (count + 1) / (B + 1). The average over tasks (the GLUE score)
is tested the same way, with every task's dev set resampled independently.

Metrics are recomputed from per-example sufficient statistics, vectorised over resamples, for
the main metrics of classification (accuracy, MCC, binary F1, their mean), regression (Pearson,
Spearman, their mean) and tagging (span F1 from per-sentence counts, token accuracy) tasks.
`check_against` verifies the recomputation reproduces each run's recorded metric.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as scipy_stats


@dataclass(frozen=True)
class Metric:
    """A task metric of several runs on resampled dev sets of `n` examples.

    `metric(idx)`: idx [..., n] example indices (one resampled dev set per row) -> [runs, ...]
    values in percent; `metric.full()`: each run's value on the dev set itself.
    """

    n: int
    values: Callable[[np.ndarray], np.ndarray]

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        return self.values(idx)

    def full(self) -> np.ndarray:
        return self.values(np.arange(self.n))


# --- metrics on resampled index sets ---------------------------------------------------------


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson correlation along the last axis (0 where either side is constant), x100."""
    x = x - x.mean(-1, keepdims=True)
    y = y - y.mean(-1, keepdims=True)
    denominator = np.sqrt((x * x).sum(-1) * (y * y).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(denominator > 0, (x * y).sum(-1) / np.where(denominator > 0, denominator, 1.0), 0.0)
    return 100.0 * r


def _spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _pearson(scipy_stats.rankdata(x, axis=-1), scipy_stats.rankdata(y, axis=-1))


def _mcc(gold: np.ndarray, pred: np.ndarray, classes: int) -> np.ndarray:
    """Multi-class MCC (sklearn's formula) along the last axis, x100."""
    n = gold.shape[-1]
    c = (gold == pred).sum(-1).astype(float)
    t = np.stack([(gold == k).sum(-1) for k in range(classes)], -1).astype(float)
    p = np.stack([(pred == k).sum(-1) for k in range(classes)], -1).astype(float)
    numerator = c * n - (t * p).sum(-1)
    denominator = np.sqrt((n * n - (p * p).sum(-1)) * (n * n - (t * t).sum(-1)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100.0 * np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1.0), 0.0)


def _f1(gold: np.ndarray, pred: np.ndarray, positive: int) -> np.ndarray:
    tp = ((gold == positive) & (pred == positive)).sum(-1).astype(float)
    wrong = ((gold == positive) != (pred == positive)).sum(-1).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100.0 * np.where(tp > 0, 2 * tp / (2 * tp + wrong), 0.0)


Values = Callable[[np.ndarray], np.ndarray]


def _classification(
    metric: str, gold: list[Any], runs: list[list[Any]], labels: Sequence[str], positive_label: str | None
) -> Values | None:
    """`positive_label`: the class whose F1 the task reported (a glue/tsv task's `positive_label`);
    None (a gold.json written before it was recorded) takes the last label, the default of every
    task that reports F1 (GLUE's "1" of "0"/"1", glue/tsv)."""
    index = {label: i for i, label in enumerate(labels)}
    unknown = [v for v in [*gold, *(p for r in runs for p in r)] if v not in index]
    if unknown:
        raise ValueError(f"label {unknown[0]!r} is not one of {list(labels)}")
    if positive_label is not None and positive_label not in index:
        raise ValueError(f"the positive label {positive_label!r} is not one of {list(labels)}")
    g = np.array([index[v] for v in gold])
    preds = np.array([[index[v] for v in r] for r in runs])
    positive = index[positive_label] if positive_label is not None else len(labels) - 1

    def accuracy(idx: np.ndarray) -> np.ndarray:
        return np.stack([100.0 * (g[idx] == p[idx]).mean(-1) for p in preds])

    def f1(idx: np.ndarray) -> np.ndarray:
        return np.stack([_f1(g[idx], p[idx], positive) for p in preds])

    table: dict[str, Values] = {
        "accuracy": accuracy,
        "mcc": lambda idx: np.stack([_mcc(g[idx], p[idx], len(labels)) for p in preds]),
        "f1": f1,
        "acc_f1_avg": lambda idx: (accuracy(idx) + f1(idx)) / 2,
    }
    return table.get(metric)


def _regression(metric: str, gold: list[Any], runs: list[list[Any]]) -> Values | None:
    g = np.asarray(gold, dtype=float)
    preds = np.asarray(runs, dtype=float)

    def pearson(idx: np.ndarray) -> np.ndarray:
        return np.stack([_pearson(g[idx], p[idx]) for p in preds])

    def spearman(idx: np.ndarray) -> np.ndarray:
        return np.stack([_spearman(g[idx], p[idx]) for p in preds])

    table: dict[str, Values] = {
        "pearson": pearson,
        "spearman": spearman,
        "pearson_spearman_avg": lambda idx: (pearson(idx) + spearman(idx)) / 2,
    }
    return table.get(metric)


def _tagging(metric: str, gold: list[list[str]], runs: list[list[list[str]]]) -> Values | None:
    from seqeval.metrics.sequence_labeling import get_entities

    if metric == "accuracy":
        words = np.array([len(s) for s in gold], dtype=float)
        correct = np.array(
            [[sum(a == b for a, b in zip(s, p, strict=True)) for s, p in zip(gold, r, strict=True)] for r in runs],
            dtype=float,
        )

        def token_accuracy(idx: np.ndarray) -> np.ndarray:
            # 0 on a resample of empty sentences only (a dev set may hold some): 0/0 put NaN into the
            # bootstrap distribution, which no comparison counts (p too small) and the interval became NaN
            n_words = words[idx].sum(-1)
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.stack(
                    [
                        np.where(n_words > 0, 100.0 * c[idx].sum(-1) / np.where(n_words > 0, n_words, 1.0), 0.0)
                        for c in correct
                    ]
                )

        return token_accuracy
    if metric != "f1":
        return None
    gold_spans = [set(get_entities(list(s))) for s in gold]
    n_gold = np.array([len(s) for s in gold_spans], dtype=float)
    counts = []
    for run in runs:
        pred_spans = [set(get_entities(list(p))) for p in run]
        counts.append(
            (
                np.array([len(g & p) for g, p in zip(gold_spans, pred_spans, strict=True)], dtype=float),
                np.array([len(p) for p in pred_spans], dtype=float),
            )
        )

    def span_f1(idx: np.ndarray) -> np.ndarray:
        out = []
        for tp, n_pred in counts:
            t, p, g = tp[idx].sum(-1), n_pred[idx].sum(-1), n_gold[idx].sum(-1)
            with np.errstate(invalid="ignore", divide="ignore"):
                out.append(100.0 * np.where(t > 0, 2 * t / np.where(p + g > 0, p + g, 1.0), 0.0))
        return np.stack(out)

    return span_f1


def build_metric(
    task_type: str,
    metric: str,
    gold: list[Any],
    runs: list[list[Any]],
    labels: Sequence[str],
    positive_label: str | None = None,
) -> Metric:
    """The vectorised `metric` of a task over `runs` (each a list of predictions aligned with `gold`);
    `positive_label`: the class of a classification task's F1 (see `_classification`)."""
    if task_type == "classification":
        found = _classification(metric, gold, runs, labels, positive_label)
    elif task_type == "regression":
        found = _regression(metric, gold, runs)
    elif task_type == "tagging":
        found = _tagging(metric, gold, runs)
    else:
        found = None
    if found is None:
        raise ValueError(f"cannot resample metric {metric!r} of a {task_type} task")
    return Metric(len(gold), found)


def check_against(metric: Metric, recorded: Sequence[float], what: str) -> None:
    """The recomputed metric on the full dev set must equal what each run recorded."""
    for run, (mine, theirs) in enumerate(zip(metric.full(), recorded, strict=True)):
        if not np.isclose(mine, theirs, atol=1e-3):
            raise ValueError(f"{what}: run {run}: resampling metric gives {mine:.4f}, the run recorded {theirs:.4f}")


# --- tests -----------------------------------------------------------------------------------


@dataclass
class TestResult:
    delta: float  # observed difference (mean over seeds of A minus of B), in metric points
    low: float  # 95% percentile interval of the difference
    high: float
    p: float  # one-sided p-value that A is better
    p_holm: float = float("nan")


def paired_bootstrap(a: Sequence[Metric], b: Sequence[Metric], resamples: int, seed: int) -> TestResult:
    """Test Δ = mean over tasks of (mean_runs a_t − mean_runs b_t) with each task's dev set resampled.

    `a[t]`, `b[t]` are the two systems' metrics on task t (the same dev examples); one task is
    the per-task test, several the average-score test.
    """
    sizes = [m.n for m in a]
    if sizes != [m.n for m in b]:
        raise ValueError(f"the systems were scored on dev sets of different sizes ({sizes} vs {[m.n for m in b]})")
    if min(sizes) < 2:
        raise ValueError(f"a dev set of {min(sizes)} example(s) cannot be resampled (the bootstrap needs 2 or more)")

    def statistic(*idx: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean([fa(i).mean(0) - fb(i).mean(0) for fa, fb, i in zip(a, b, idx, strict=True)], axis=0)

    data = tuple(np.arange(n) for n in sizes)
    observed = float(statistic(*data))
    result = scipy_stats.bootstrap(
        data,
        statistic,
        n_resamples=resamples,
        vectorized=True,
        paired=False,
        confidence_level=0.95,
        method="percentile",
        batch=_batch(resamples, sum(sizes)),
        random_state=np.random.default_rng(seed),
    )
    distribution = np.asarray(result.bootstrap_distribution)
    # Δ* − Δ ≥ Δ with exact ties counted: a discrete metric (accuracy of n examples averaged over
    # seeds) often gives Δ* = 2Δ exactly, and rounding in the float sums dropped some of those
    # ties (p too small) — so "≥" within a rounding tolerance.
    exceed = int(np.count_nonzero(distribution - observed >= observed - TIE_TOLERANCE * max(1.0, abs(observed))))
    return TestResult(
        delta=observed,
        low=float(result.confidence_interval.low),
        high=float(result.confidence_interval.high),
        p=(exceed + 1) / (resamples + 1),
    )


TIE_TOLERANCE = 1e-9  # relative; metrics are percentages whose float sums err by ~1e-13

# Resampled example indices held at once (int64: 8 bytes each): scipy resamples all B samples in one
# array unless told to batch, which for a large B (or dev set) is a MemoryError after the training.
MAX_INDICES = 1 << 24


def _batch(resamples: int, examples: int) -> int | None:
    """scipy's `batch`: None (one call, the historical random stream) when all resamples fit in
    MAX_INDICES indices, else as many as fit."""
    return None if resamples * examples <= MAX_INDICES else max(1, MAX_INDICES // examples)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down; monotone; capped at 1), in input order."""
    m = len(p_values)
    order = np.argsort(p_values, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted.tolist()


def stars(p: float) -> str:
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""

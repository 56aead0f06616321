"""GLUE metrics on top of `xfer.core.metrics`, which returns every metric in percent (x100).

That is how the GLUE leaderboard and the BERT/ELECTRA papers print them (CoLA MCC 60.5, STS-B
Spearman 89.2), and the GLUE average is taken over those numbers.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from xfer.core import metrics as core


def _base(name: str, positive: str | None) -> Callable[[Sequence[Any], Sequence[Any]], float]:
    table: dict[str, Callable[[Sequence[Any], Sequence[Any]], float]] = {
        "accuracy": core.accuracy,
        "f1": lambda g, p: _f1(g, p, positive),
        "mcc": core.mcc,
        "pearson": core.pearson,
        "spearman": core.spearman,
    }
    return table[name]


def _f1(golds: Sequence[Any], preds: Sequence[Any], positive: str | None) -> float:
    """F1 of the `positive` class, computed on positive/other flags.

    Why flags: `gather` has already checked every prediction against the task's labels and the
    config checked `positive` against them, so a `positive` absent from golds and predictions is
    a dev set without that class, not a label mix-up. Given the labels themselves, `core.f1`
    raised "not one of the labels" when two other classes were seen (a three-label glue/tsv task
    whose small dev set lacks the positive class), crashing evaluation after training; binary
    tasks scored 0 in the same situation, which flags give for every number of labels.
    """
    if positive is None:
        raise ValueError("f1 needs a positive label")
    return core.f1([g == positive for g in golds], [p == positive for p in preds], positive=True)


def is_component(name: str) -> bool:
    """A namespaced name (`core.mcc`, `mytask.kappa`) is a registered metric component."""
    return "." in name


def _component(name: str) -> Callable[[Sequence[Any], Sequence[Any]], float]:
    """The metric component `name` (plugin hook `xfer_metrics`), checked to return a number."""
    from xfer.core.plugins import default_host

    metric = default_host().load("metric", name)

    def call(golds: Sequence[Any], preds: Sequence[Any]) -> float:
        value = metric(golds, preds)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"metric {name!r} returned {type(value).__name__}, expected a number (in percent)")
        return float(value)

    return call


AVERAGES = ("acc_f1_avg", "pearson_spearman_avg")
"""The means `compute` derives from two other metrics (every other name is computed itself)."""


def compute(
    names: Sequence[str], golds: Sequence[Any], preds: Sequence[Any], positive: str | None = None
) -> dict[str, float]:
    """The requested metrics; the `*_avg` ones are the means GLUE reports for MRPC/QQP/STS-B."""
    needed = set(names)
    if "acc_f1_avg" in needed:
        needed |= {"accuracy", "f1"}
    if "pearson_spearman_avg" in needed:
        needed |= {"pearson", "spearman"}
    values = {
        name: _component(name)(golds, preds) if is_component(name) else _base(name, positive)(golds, preds)
        for name in sorted(needed)
        if name not in AVERAGES  # not `endswith("_avg")`: that dropped a component named `mine.kappa_avg`
    }
    if "acc_f1_avg" in needed:
        values["acc_f1_avg"] = (values["accuracy"] + values["f1"]) / 2
    if "pearson_spearman_avg" in needed:
        values["pearson_spearman_avg"] = (values["pearson"] + values["spearman"]) / 2
    return values


def gather(
    task: str,
    examples: Sequence[Any],
    predictions: Mapping[str, Any],
    *,
    labels: Sequence[str] | None,
) -> tuple[list[Any], list[Any]]:
    """Gold and predicted values in example order, checking every prediction's type.

    `labels=None` means regression (predictions must be real numbers). Raising on a label that
    is not a label string catches the classic mistake of passing class ids instead of labels.
    """
    golds: list[Any] = []
    preds: list[Any] = []
    for example in examples:
        if example.id not in predictions:
            raise ValueError(f"{task}: no prediction for example {example.id!r}")
        if example.label is None:
            raise ValueError(f"{task}: example {example.id!r} has no gold label (unlabelled split?)")
        golds.append(example.label)
        preds.append(checked_prediction(task, example.id, predictions[example.id], labels))
    if not golds:
        raise ValueError(f"{task}: cannot evaluate zero examples")
    return golds, preds


def checked_prediction(task: str, example_id: str, value: Any, labels: Sequence[str] | None) -> Any:
    """`value` as a valid prediction: a finite float for regression (`labels=None`), else one of
    `labels`; a ValueError naming the example otherwise. Shared by scoring and the submission
    writer, so a file never holds a prediction (`nan`, a class id, `True`) that scoring refuses."""
    if labels is None:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ValueError(f"{task}: prediction for {example_id!r} must be a finite number, not {value!r}")
        return float(value)
    if not isinstance(value, str) or value not in labels:
        raise ValueError(f"{task}: prediction {value!r} for {example_id!r} is not one of the labels {list(labels)}")
    return value

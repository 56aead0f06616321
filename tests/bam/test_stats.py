"""`xfer compare`'s statistics: resampled metrics equal the official ones, the bootstrap test, Holm."""

from __future__ import annotations

import numpy as np
import pytest

from xfer.bam import stats
from xfer.core import metrics


def _resample(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, n, size=n)


def test_classification_metrics_match_the_official_ones_on_any_resample() -> None:
    rng = np.random.default_rng(0)
    labels = ["a", "b", "c"]
    gold = list(rng.choice(labels, 200))
    runs = [list(rng.choice(labels, 200)) for _ in range(2)]
    for name, official in (("accuracy", metrics.accuracy), ("mcc", metrics.mcc)):
        metric = stats.build_metric("classification", name, gold, runs, labels)
        idx = _resample(rng, 200)
        values = metric(idx[None])[:, 0]
        for run, value in zip(runs, values, strict=True):
            assert value == pytest.approx(official([gold[i] for i in idx], [run[i] for i in idx]), abs=1e-9)
    binary_gold = list(rng.choice(["0", "1"], 100))
    binary = [list(rng.choice(["0", "1"], 100))]
    f1 = stats.build_metric("classification", "f1", binary_gold, binary, ["0", "1"])
    assert f1.full()[0] == pytest.approx(metrics.f1(binary_gold, binary[0], positive="1"))


def test_regression_and_tagging_metrics_match_the_official_ones() -> None:
    rng = np.random.default_rng(1)
    gold = list(np.round(rng.uniform(0, 5, 80), 1))  # ties, as STS-B has
    runs = [list(np.round(np.array(gold) + rng.normal(0, 1.5, 80), 1))]
    idx = _resample(rng, 80)
    for name, official in (("spearman", metrics.spearman), ("pearson", metrics.pearson)):
        value = stats.build_metric("regression", name, gold, runs, [])(idx[None])[0, 0]
        assert value == pytest.approx(official([gold[i] for i in idx], [runs[0][i] for i in idx]), abs=1e-9)
    tags = ["O", "B-NP", "I-NP", "B-VP"]
    gold_tags = [list(rng.choice(tags, rng.integers(1, 8))) for _ in range(60)]
    pred_tags = [[t if rng.random() < 0.7 else rng.choice(tags) for t in s] for s in gold_tags]
    idx = _resample(rng, 60)
    value = stats.build_metric("tagging", "f1", gold_tags, [pred_tags], tags)(idx[None])[0, 0]
    official = metrics.span_f1([gold_tags[i] for i in idx], [pred_tags[i] for i in idx]).f1
    assert value == pytest.approx(official, abs=1e-9)
    with pytest.raises(ValueError, match="cannot resample"):
        stats.build_metric("span_qa", "f1", [], [], [])


def test_check_against_catches_a_metric_that_does_not_reproduce() -> None:
    metric = stats.build_metric("classification", "accuracy", ["1", "0"], [["1", "1"]], ["0", "1"])
    stats.check_against(metric, [50.0], "t")
    with pytest.raises(ValueError, match="recorded 75"):
        stats.check_against(metric, [75.0], "t")


def test_bootstrap_finds_a_real_difference_and_not_a_fake_one() -> None:
    rng = np.random.default_rng(2)
    gold = list(rng.choice(["0", "1"], 400))
    good = [[g if rng.random() < 0.85 else ("1" if g == "0" else "0") for g in gold] for _ in range(3)]
    bad = [[g if rng.random() < 0.70 else ("1" if g == "0" else "0") for g in gold] for _ in range(3)]

    def metric(runs: list) -> stats.Metric:
        return stats.build_metric("classification", "accuracy", gold, runs, ["0", "1"])

    better = stats.paired_bootstrap([metric(good)], [metric(bad)], 500, seed=0)
    assert better.delta > 10 and better.p < 0.01 and better.low > 0
    reverse = stats.paired_bootstrap([metric(bad)], [metric(good)], 500, seed=0)
    assert reverse.p > 0.5
    same = stats.paired_bootstrap([metric(good)], [metric(good)], 500, seed=0)
    assert same.delta == 0 and same.p == 1.0
    averaged = stats.paired_bootstrap([metric(good), metric(good)], [metric(bad), metric(good)], 500, seed=0)
    assert averaged.delta == pytest.approx(better.delta / 2) and averaged.p < 0.05


def test_holm_bonferroni() -> None:
    # m = 4: sorted p 0.01, 0.02, 0.03, 0.5 -> 0.04, 0.06, 0.06 (monotone), 0.5
    assert stats.holm([0.03, 0.01, 0.5, 0.02]) == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert stats.holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])
    assert stats.stars(0.0009) == "***" and stats.stars(0.04) == "*" and stats.stars(0.2) == ""


def test_f1_is_that_of_the_given_positive_label() -> None:
    """It was label "1" (else the last label) whatever the task's `positive_label` was."""
    rng = np.random.default_rng(3)
    labels = ["1", "0", "2"]
    gold = list(rng.choice(labels, 120))
    runs = [list(rng.choice(labels, 120)) for _ in range(2)]
    for positive in labels:
        metric = stats.build_metric("classification", "f1", gold, runs, labels, positive_label=positive)
        expected = [metrics.f1(gold, run, positive=positive) for run in runs]
        assert metric.full() == pytest.approx(expected, abs=1e-9)
    default = stats.build_metric("classification", "f1", gold, runs, labels)  # a gold.json without it: the last label
    assert default.full() == pytest.approx([metrics.f1(gold, run, positive="2") for run in runs], abs=1e-9)
    with pytest.raises(ValueError, match="positive label 'yes' is not one of"):
        stats.build_metric("classification", "f1", gold, runs, labels, positive_label="yes")

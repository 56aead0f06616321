"""GLUE metrics against hand-computed values, on the x100 scale."""

from __future__ import annotations

import math

import pytest

from xfer.core.tasks import SentenceExample
from xfer.tasks.glue.tasks import CoLATask, MNLITask, MRPCTask, QQPTask, STSBTask

GOLD = ["1", "1", "0", "0", "1"]
PRED = ["1", "0", "0", "1", "1"]  # TP=2 FN=1 TN=1 FP=1


def examples(labels):
    return [SentenceExample(id=f"dev-{i}", text_a="x", label=y) for i, y in enumerate(labels)]


def preds(values):
    return {f"dev-{i}": v for i, v in enumerate(values)}


def test_cola_mcc_x100():
    scores = CoLATask("glue/cola").evaluate(examples(GOLD), preds(PRED))
    # (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (2 - 1) / sqrt(3*3*2*2) = 1/6
    assert scores["mcc"] == pytest.approx(100 / 6)
    assert scores["accuracy"] == pytest.approx(60.0)
    assert CoLATask.main_metric == "mcc"


@pytest.mark.parametrize("cls", [MRPCTask, QQPTask])
def test_mrpc_qqp_accuracy_f1_average(cls):
    scores = cls("t").evaluate(examples(GOLD), preds(PRED))
    assert scores["accuracy"] == pytest.approx(60.0)
    assert scores["f1"] == pytest.approx(200 / 3)  # P = R = 2/3 for class "1"
    assert scores["acc_f1_avg"] == pytest.approx((60 + 200 / 3) / 2)
    assert cls.main_metric == "accuracy"


def test_stsb_correlations_x100():
    golds, predicted = [0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 2.0, 3.0, 5.0]
    scores = STSBTask("glue/stsb").evaluate(examples(golds), preds(predicted))
    # Pearson: sum(dx*dy) = 12, sum(dx^2) = 10, sum(dy^2) = 14.8
    assert scores["pearson"] == pytest.approx(100 * 12 / math.sqrt(148))
    assert scores["spearman"] == pytest.approx(100.0)  # monotonic
    assert scores["pearson_spearman_avg"] == pytest.approx((scores["pearson"] + 100) / 2)
    assert STSBTask.main_metric == "spearman"
    # correlations are scale-invariant: predicting score/5 gives the same numbers
    scaled = STSBTask("glue/stsb").evaluate(examples(golds), preds([v / 5 for v in predicted]))
    assert scaled["pearson"] == pytest.approx(scores["pearson"])


def test_mnli_accuracy():
    gold = ["entailment", "neutral", "contradiction", "neutral"]
    scores = MNLITask("glue/mnli").evaluate(examples(gold), preds(["entailment", "neutral", "neutral", "neutral"]))
    assert scores == {"accuracy": pytest.approx(75.0)}


def test_bad_predictions_raise():
    task = CoLATask("glue/cola")
    with pytest.raises(ValueError, match="not one of the labels"):
        task.evaluate(examples(GOLD), preds([1, 0, 0, 1, 1]))  # class ids instead of label strings
    with pytest.raises(ValueError, match="no prediction for example 'dev-4'"):
        task.evaluate(examples(GOLD), preds(PRED[:4]))
    with pytest.raises(ValueError, match="no gold label"):
        task.evaluate(examples([None]), preds(["1"]))
    with pytest.raises(ValueError, match="finite number"):
        STSBTask("glue/stsb").evaluate(examples([1.0, 2.0]), preds([1.0, "2.0"]))


def test_stsb_constant_predictions_score_zero_not_nan():
    """A collapsed model predicts one float for every pair: correlations are undefined and reported
    as 0 (docstring of xfer.core.metrics.pearson), not NaN as np.std's 4e-16 let through."""
    golds = [float(i % 6) for i in range(50)]
    scores = STSBTask("glue/stsb").evaluate(examples(golds), preds([2.7] * 50))
    assert scores == {"pearson": 0.0, "spearman": 0.0, "pearson_spearman_avg": 0.0}


def test_tsv_f1_of_one_of_three_labels():
    """glue/tsv accepts f1 with positive_label for three labels; it crashed after training
    (scikit-learn: "Target is multiclass but average='binary'")."""
    from xfer.tasks.glue.config import TsvTaskConfig
    from xfer.tasks.glue.tasks import TsvTask

    config = TsvTaskConfig(labels=["a", "b", "c"], metrics=["accuracy", "f1"], positive_label="a")
    gold, pred = ["a", "b", "c", "a"], ["a", "a", "c", "b"]
    scores = TsvTask("glue/tsv", config).evaluate(examples(gold), preds(pred))
    # class "a": tp 1, fp 1, fn 1 -> F1 1/2
    assert scores == {"accuracy": pytest.approx(50.0), "f1": pytest.approx(50.0)}

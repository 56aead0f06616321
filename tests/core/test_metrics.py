"""Metric wrappers against hand-computed values and the reference implementations."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
import torch

from xfer.core import metrics
from xfer.core.errors import PluginError
from xfer.core.evaluation import TaskEvaluator
from xfer.core.tasks import Example, SentenceExample, Task

GOLD = [1, 1, 0, 0, 1, 0, 1, 0]
PRED = [1, 0, 0, 1, 1, 0, 1, 1]  # tp=3 fn=1 fp=2 tn=2


def test_accuracy() -> None:
    assert metrics.accuracy(GOLD, PRED) == pytest.approx(100 * 5 / 8)
    assert metrics.accuracy(["a", "b"], ["a", "b"]) == 100.0
    assert metrics.accuracy(["a", "b"], ["b", "a"]) == 0.0


def test_f1_binary_positive_class() -> None:
    precision, recall = 3 / 5, 3 / 4
    assert metrics.f1(GOLD, PRED) == pytest.approx(100 * 2 * precision * recall / (precision + recall))
    # the other class as positive: tp=2 fp=1 fn=2
    assert metrics.f1(GOLD, PRED, positive=0) == pytest.approx(100 * 2 * (2 / 3) * (2 / 4) / (2 / 3 + 2 / 4))
    # string labels (MRPC-style)
    gold = ["equivalent" if g else "not" for g in GOLD]
    pred = ["equivalent" if p else "not" for p in PRED]
    assert metrics.f1(gold, pred, positive="equivalent") == pytest.approx(metrics.f1(GOLD, PRED))
    assert metrics.f1([0, 0, 1], [0, 0, 0]) == 0.0, "no predicted positives: F1 0, no warning-as-error"


def test_mcc() -> None:
    tp, tn, fp, fn = 3, 2, 2, 1
    expected = (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert metrics.mcc(GOLD, PRED) == pytest.approx(100 * expected), "MCC is reported x100"
    assert metrics.mcc(GOLD, GOLD) == pytest.approx(100.0)
    assert metrics.mcc(GOLD, [1 - g for g in GOLD]) == pytest.approx(-100.0)


def test_correlations() -> None:
    gold = [1.0, 2.0, 3.0, 4.0, 5.0]
    pred = [2.0, 1.0, 4.0, 3.0, 10.0]
    g, p = np.array(gold), np.array(pred)
    pearson = ((g - g.mean()) * (p - p.mean())).sum() / math.sqrt(
        ((g - g.mean()) ** 2).sum() * ((p - p.mean()) ** 2).sum()
    )
    assert metrics.pearson(gold, pred) == pytest.approx(100 * pearson)
    # ranks of pred: 2 1 4 3 5 -> d^2 = 1+1+1+1+0 = 4; rho = 1 - 6*4 / (5*24)
    assert metrics.spearman(gold, pred) == pytest.approx(100 * (1 - 6 * 4 / (5 * 24)))
    assert metrics.spearman(gold, [x**3 for x in gold]) == pytest.approx(100.0), "rank correlation ignores scale"
    assert metrics.pearson(gold, [3.0] * 5) == 0.0, "constant predictions score 0, not NaN"
    assert metrics.spearman([3.0] * 5, pred) == 0.0


def test_against_reference_libraries() -> None:
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import f1_score, matthews_corrcoef

    rng = np.random.default_rng(0)
    gold, pred = rng.integers(0, 2, 50).tolist(), rng.integers(0, 2, 50).tolist()
    assert metrics.f1(gold, pred) == pytest.approx(100 * f1_score(gold, pred))
    assert metrics.mcc(gold, pred) == pytest.approx(100 * matthews_corrcoef(gold, pred))
    x, y = rng.normal(size=30), rng.normal(size=30)
    assert metrics.pearson(x.tolist(), y.tolist()) == pytest.approx(100 * pearsonr(x, y)[0])
    assert metrics.spearman(x.tolist(), y.tolist()) == pytest.approx(100 * spearmanr(x, y)[0])


# --- spans ---------------------------------------------------------------------------------------

# two gold spans: PER (0-1) and LOC (3); predictions get PER exactly and LOC with the wrong type
BIO_GOLD = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG", "I-ORG", "I-ORG"]]
BIO_PRED = [["B-PER", "I-PER", "O", "B-ORG"], ["O", "B-ORG", "I-ORG", "O"]]
BIOES_GOLD = [["B-PER", "E-PER", "O", "S-LOC"], ["O", "B-ORG", "I-ORG", "E-ORG"]]
BIOES_PRED = [["B-PER", "E-PER", "O", "S-ORG"], ["O", "B-ORG", "E-ORG", "O"]]


def test_span_f1_hand_computed() -> None:
    scores = metrics.span_f1([BIO_GOLD[0]], [BIO_PRED[0]])
    assert (scores.precision, scores.recall, scores.f1) == pytest.approx((50.0, 50.0, 50.0))
    # a spurious extra span separates precision from recall: P 1/3, R 1/2, F 0.4
    scores = metrics.span_f1([[*BIO_GOLD[0], "O"]], [[*BIO_PRED[0], "B-MISC"]])
    assert (scores.precision, scores.recall, scores.f1) == pytest.approx((100 / 3, 50.0, 40.0))
    # a boundary error is a miss: 3 gold, 3 predicted, 1 correct over both sentences
    scores = metrics.span_f1(BIO_GOLD, BIO_PRED)
    assert (scores.precision, scores.recall, scores.f1) == pytest.approx((100 / 3, 100 / 3, 100 / 3))


def test_span_f1_bio_and_bioes_agree() -> None:
    assert metrics.span_f1(BIO_GOLD, BIO_PRED, "BIO") == metrics.span_f1(BIOES_GOLD, BIOES_PRED, "BIOES")
    assert metrics.span_f1(BIOES_GOLD, BIOES_GOLD, "BIOES").f1 == 100.0


def test_span_f1_errors() -> None:
    with pytest.raises(ValueError, match="BIO or BIOES"):
        metrics.span_f1(BIO_GOLD, BIO_PRED, "IOB1")
    with pytest.raises(ValueError, match="sequence 1: 4 gold tags but 3 predicted tags"):
        metrics.span_f1(BIO_GOLD, [BIO_PRED[0], BIO_PRED[1][:3]])


# --- BLEU ----------------------------------------------------------------------------------------


def test_corpus_bleu() -> None:
    import sacrebleu

    refs = ["the cat sat on the mat", "a quick brown fox jumps over the lazy dog"]
    hyps = ["the cat sat on a mat", "the quick brown fox jumped over the lazy dog"]
    result = metrics.corpus_bleu(refs, hyps)
    assert result.score == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs], tokenize="13a").score)
    assert "tok:13a" in result.signature and "nrefs:1" in result.signature
    # single segment by hand: n-gram precisions 5/6, 3/5, 2/4, 1/3, no brevity penalty
    single = metrics.corpus_bleu(refs[:1], hyps[:1])
    assert single.score == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25)
    assert metrics.corpus_bleu(refs, refs).score == pytest.approx(100.0)


# --- input checks --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "one", "two"),
    [
        ("accuracy", [1], [1, 0]),
        ("f1", [1], [1, 0]),
        ("mcc", [1], [1, 0]),
        ("pearson", [1.0], [1.0, 2.0]),
        ("spearman", [1.0], [1.0, 2.0]),
        ("span_f1", [["O"]], [["O"], ["B-PER"]]),
        ("corpus_bleu", ["a b"], ["a b", "c d"]),
    ],
)
def test_length_mismatch_and_empty_input(name: str, one: list, two: list) -> None:
    fn = getattr(metrics, name)
    with pytest.raises(ValueError, match="1 gold values but 2 predictions"):
        fn(one, two)
    with pytest.raises(ValueError, match="zero examples"):
        fn([], [])


# --- adversarial inputs --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pearson", "spearman"])
def test_correlation_of_a_float_constant_is_zero_not_nan(name: str) -> None:
    """A collapsed regression model predicts one float; np.std of 1000 copies of 2.7 is 4e-16, not 0,
    so the old check let it through to scipy, which returned NaN (STS-B main metric NaN)."""
    fn = getattr(metrics, name)
    gold = [float(i % 6) for i in range(1000)]
    for value in (2.7, 0.1, 1 / 3):
        assert fn(gold, [value] * 1000) == 0.0
        assert fn([value] * 1000, gold) == 0.0
    # tiny but varying values correlate perfectly (their std underflowed to 0 before)
    assert fn([1.0, 2.0, 3.0], [1e-200, 2e-200, 3e-200]) == pytest.approx(100.0)


@pytest.mark.parametrize("name", ["pearson", "spearman"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_correlation_of_non_finite_values(name: str, bad: float) -> None:
    """A diverged model's NaN/inf prediction scores NaN (Spearman ranked inf as the largest value and
    scored 50); a gold value that is not finite is bad data."""
    fn = getattr(metrics, name)
    assert math.isnan(fn([1.0, 2.0, 3.0], [1.0, bad, 3.0]))
    assert math.isnan(fn([1.0, 2.0, 3.0], [bad] * 3)), "NaN wins over 'constant'"
    with pytest.raises(ValueError, match=r"gold value 0 is .*finite numbers"):
        fn([bad, 2.0, 3.0], [1.0, 2.0, 3.0])


def test_f1_of_one_class_among_several() -> None:
    """glue/tsv allows f1 with positive_label and three or more labels: one-vs-rest F1 (sklearn's
    binary average raised "Target is multiclass" at the end of training)."""
    from sklearn.metrics import f1_score

    gold = ["a", "b", "c", "a", "c", "a"]
    pred = ["a", "a", "c", "b", "c", "a"]
    for positive in "abc":
        expected = 100 * f1_score(gold, pred, labels=[positive], average=None)[0]
        assert metrics.f1(gold, pred, positive=positive) == pytest.approx(expected)
    # tp=2 (0, 5), fp=1 (1), fn=1 (3): 2*2 / (2*2 + 1 + 1)
    assert metrics.f1(gold, pred, positive="a") == pytest.approx(100 * 4 / 6)


def test_f1_positive_label_must_be_a_label() -> None:
    with pytest.raises(ValueError, match=r"positive label 1 is not one of the labels \('0', '1'\)"):
        metrics.f1(["0", "1"], ["1", "1"])  # int 1 for string labels: not an F1 of 0
    assert metrics.f1(["0", "0"], ["0", "0"], positive="1") == 0.0, "a dev set without positives scores 0"


def test_numpy_inputs() -> None:
    gold, pred = np.array(GOLD), np.array(PRED)
    assert metrics.accuracy(gold, pred) == metrics.accuracy(GOLD, PRED)
    assert metrics.f1(gold, pred) == pytest.approx(metrics.f1(GOLD, PRED))
    assert metrics.pearson(gold.astype(float), pred.astype(float)) == pytest.approx(
        metrics.pearson([float(g) for g in GOLD], [float(p) for p in PRED])
    )
    with pytest.raises(ValueError, match="zero examples"):
        metrics.accuracy(np.array([]), np.array([]))


# --- evaluation on gathered predictions ----------------------------------------------------------


class _Agreement(Task):
    """A classification task scored with accuracy: enough for the evaluator."""

    type = "classification"
    main_metric = "accuracy"

    def examples(self, split: str) -> list[Example]:
        return []

    @property
    def labels(self) -> tuple[str, ...]:
        return ("0", "1")

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        return {"accuracy": metrics.accuracy([e.label for e in examples], [predictions[e.id] for e in examples])}


def _evaluator(features: list[int], ids: list[str], predict: Any, batch_size: int = 2) -> TaskEvaluator:
    examples = [SentenceExample(id=i, text_a="x", label="1") for i in dict.fromkeys(ids)]
    return TaskEvaluator(
        _Agreement("t"), examples, features, list, predict, torch.device("cpu"), batch_size, feature_ids=ids
    )


def test_evaluator_pairs_each_feature_with_its_example() -> None:
    evaluator = _evaluator([1, 0, 1], ["a", "b", "c"], lambda model, batch: [str(f) for f in batch])
    assert evaluator.predictions(torch.nn.Identity()) == {"a": "1", "b": "0", "c": "1"}
    assert evaluator(torch.nn.Identity()) == {"accuracy": pytest.approx(200 / 3)}


def test_evaluator_refuses_several_features_per_id() -> None:
    """Two windows of example "a": the default pairing kept only the second window's output."""
    with pytest.raises(ValueError, match=r"example 'a' has several features.*postprocess"):
        _evaluator([0, 1, 1], ["a", "a", "b"], lambda model, batch: [str(f) for f in batch])
    with pytest.raises(ValueError, match="2 feature_ids for 3 features"):
        _evaluator([0, 1, 1], ["a", "b"], lambda model, batch: [str(f) for f in batch])


def test_evaluator_refuses_a_wrong_number_of_outputs() -> None:
    """An output too many in one batch and one too few in the next summed to the right total and
    shifted predictions onto the wrong features; too many overall was an IndexError."""
    calls = iter([["1", "1", "0"], ["0"], ["1"]])
    evaluator = _evaluator([1, 1, 0, 0], ["a", "b", "c", "d"], lambda model, batch: next(calls))
    with pytest.raises(
        PluginError, match="task 't': its predict function returned 3 outputs for a batch of 2 features"
    ):
        evaluator.outputs(torch.nn.Identity())


def test_the_default_prediction_writer_refuses_what_would_corrupt_its_file(tmp_path: Any) -> None:
    """Task.write_predictions streamed into the file: a missing prediction stopped it on a bare
    KeyError with a truncated file in place of the previous one, predictions of another split were
    dropped silently, and a value holding a line break split its row in two."""
    task = _Agreement("t")
    examples = [SentenceExample(id=i, text_a="x", label="1") for i in ("a", "b")]
    path = task.write_predictions(tmp_path, "dev", examples, {"a": "1", "b": ["B-NP", "I-NP"]})
    assert path.read_text(encoding="utf-8") == "id\tprediction\na\t1\nb\tB-NP I-NP\n"
    for predictions, message in [
        ({"a": "0"}, r"t: no prediction for example 'b' \(1 missing\)"),
        ({"a": "0", "b": "1", "z": "1"}, r"t: 1 prediction\(s\) for ids that are not examples of this split"),
        ({"a": "0", "b": "one\ntwo"}, r"t: example 'b': its id or prediction 'one\\ntwo' holds a tab or a line break"),
        ({"a": "0\t1", "b": "1"}, r"t: example 'a': .* holds a tab"),
    ]:
        with pytest.raises(ValueError, match=message):
            task.write_predictions(tmp_path, "dev", examples, predictions)
        assert path.read_text(encoding="utf-8") == "id\tprediction\na\t1\nb\tB-NP I-NP\n", "the file is kept"

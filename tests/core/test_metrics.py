"""Metric wrappers against hand-computed values and the reference implementations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xfer.core import metrics

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

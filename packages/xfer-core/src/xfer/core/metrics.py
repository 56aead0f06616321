"""Corpus-level metrics, computed on complete (gathered) prediction lists.

Thin, typed wrappers over the reference implementations (scikit-learn, scipy, seqeval,
sacrebleu) so that every package reports the same numbers as the official scripts. Each
function takes gold values first, predictions second, and returns a plain float in percent:
accuracy, F1 and BLEU in [0, 100], correlations and MCC in [-100, 100] (x100, as the GLUE
leaderboard and the thesis tables print them). One convention everywhere: logs, reports,
results.json and tables never mix fractions and percentages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def _check_lengths(golds: Sequence, preds: Sequence) -> None:
    if len(golds) != len(preds):
        raise ValueError(f"{len(golds)} gold values but {len(preds)} predictions")
    if len(golds) == 0:  # not `not golds`: that raises on a numpy array ("truth value ... is ambiguous")
        raise ValueError("cannot compute a metric on zero examples")


def accuracy(golds: Sequence, preds: Sequence) -> float:
    _check_lengths(golds, preds)
    return 100.0 * float(np.mean([g == p for g, p in zip(golds, preds, strict=True)]))


def f1(golds: Sequence, preds: Sequence, positive: object = 1) -> float:
    """F1 of the `positive` class against every other label (MRPC/QQP report it for the paraphrase
    class; with more than two labels, e.g. a glue/tsv task with `positive_label`, it is that class's
    one-vs-rest F1, which scikit-learn's binary average refuses with an error after training).

    A `positive` that is none of the labels seen while two or more are (`1` for labels "0"/"1")
    is an error, as in scikit-learn, rather than an F1 of 0."""
    from sklearn.metrics import f1_score

    _check_lengths(golds, preds)
    seen = set(golds) | set(preds)
    if positive not in seen and len(seen) > 1:
        labels = ", ".join(sorted(map(repr, seen)))
        raise ValueError(f"the positive label {positive!r} is not one of the labels ({labels})")
    gold_flags, pred_flags = [g == positive for g in golds], [p == positive for p in preds]
    return 100.0 * float(f1_score(gold_flags, pred_flags, pos_label=True, average="binary", zero_division=0))


def mcc(golds: Sequence, preds: Sequence) -> float:
    """Matthews correlation coefficient (CoLA's official metric), x100."""
    from sklearn.metrics import matthews_corrcoef

    _check_lengths(golds, preds)
    return 100.0 * float(matthews_corrcoef(list(golds), list(preds)))


def _correlation_inputs(golds: Sequence[float], preds: Sequence[float]) -> tuple[np.ndarray, np.ndarray] | float:
    """Golds and predictions as float arrays, or the score itself when the correlation is undefined:
    NaN for a prediction that is not finite, 0 when either side is constant.

    Why exact equality rather than `np.std(...) == 0`: the std of n copies of 2.7 is 4e-16, so a
    collapsed STS-B model predicting one value reached scipy, which returns NaN for constant input,
    and scored NaN instead of 0 (and values around 1e-200 have a std of 0 and scored 0). A diverged
    model's NaN/inf prediction scores NaN, as the trainer expects of a diverged model (Spearman
    ranked inf as the largest value and scored it); a gold value that is not finite is bad data.
    """
    _check_lengths(golds, preds)
    gold, pred = np.asarray(golds, dtype=float), np.asarray(preds, dtype=float)
    bad = np.flatnonzero(~np.isfinite(gold))
    if bad.size:
        raise ValueError(f"gold value {bad[0]} is {gold[bad[0]]}: a correlation needs finite numbers")
    if not np.isfinite(pred).all():
        return math.nan
    if (gold == gold[0]).all() or (pred == pred[0]).all():
        return 0.0
    return gold, pred


def pearson(golds: Sequence[float], preds: Sequence[float]) -> float:
    """Pearson correlation, x100; 0 when either side is constant (undefined: 0 is what a constant
    predictor deserves), NaN when a prediction is NaN/inf."""
    from scipy.stats import pearsonr

    arrays = _correlation_inputs(golds, preds)
    return arrays if isinstance(arrays, float) else 100.0 * float(pearsonr(*arrays)[0])


def spearman(golds: Sequence[float], preds: Sequence[float]) -> float:
    """Spearman rank correlation, x100; 0 when either side is constant, NaN when a prediction is
    NaN/inf (see `pearson`)."""
    from scipy.stats import spearmanr

    arrays = _correlation_inputs(golds, preds)
    return arrays if isinstance(arrays, float) else 100.0 * float(spearmanr(*arrays)[0])


@dataclass(frozen=True)
class SpanScores:
    precision: float
    recall: float
    f1: float


def span_f1(golds: Sequence[Sequence[str]], preds: Sequence[Sequence[str]], scheme: str = "BIO") -> SpanScores:
    """Exact-match span precision/recall/F1 (conlleval semantics) via seqeval.

    `scheme` is "BIO" (IOB2) or "BIOES"; it only documents the input since seqeval's
    conlleval-compatible mode reads B/I/E/S prefixes in both.
    """
    from seqeval.metrics import f1_score, precision_score, recall_score

    if scheme not in ("BIO", "BIOES"):
        raise ValueError(f"span scheme must be BIO or BIOES, not {scheme!r}")
    _check_lengths(golds, preds)
    gold_lists, pred_lists = [list(g) for g in golds], [list(p) for p in preds]
    for i, (g, p) in enumerate(zip(gold_lists, pred_lists, strict=True)):
        if len(g) != len(p):
            raise ValueError(f"sequence {i}: {len(g)} gold tags but {len(p)} predicted tags")
    return SpanScores(
        precision=100.0 * float(precision_score(gold_lists, pred_lists, zero_division=0)),
        recall=100.0 * float(recall_score(gold_lists, pred_lists, zero_division=0)),
        f1=100.0 * float(f1_score(gold_lists, pred_lists, zero_division=0)),
    )


@dataclass(frozen=True)
class BleuScore:
    score: float
    signature: str  # sacrebleu's signature string, to be recorded next to the score


def corpus_bleu(references: Sequence[str], hypotheses: Sequence[str], tokenize: str = "13a") -> BleuScore:
    """Detokenised corpus BLEU via sacrebleu with one reference per segment."""
    from sacrebleu.metrics import BLEU

    _check_lengths(references, hypotheses)
    bleu = BLEU(tokenize=tokenize)
    result = bleu.corpus_score(list(hypotheses), [list(references)])
    return BleuScore(score=float(result.score), signature=str(bleu.get_signature()))


@dataclass(frozen=True)
class AttachmentScores:
    uas: float  # unlabelled attachment score: head correct
    las: float  # labelled attachment score: head and relation correct
    label_accuracy: float  # relation correct (whatever the head)
    scored: int  # words scored (after exclusions such as punctuation)


def attachment_scores(
    gold_heads: Sequence[Sequence[int]],
    gold_relations: Sequence[Sequence[str]],
    pred_heads: Sequence[Sequence[int]],
    pred_relations: Sequence[Sequence[str]],
    scored: Sequence[Sequence[bool]] | None = None,
) -> AttachmentScores:
    """UAS / LAS / label accuracy in percent over every word whose `scored` flag is true (all words
    when `scored` is None), micro-averaged over the corpus as CoNLL-2007's eval.pl does. Callers
    decide what is excluded (CoNLL-2007: punctuation tokens).

    Every argument holds one entry per sentence and, per sentence, one per word; a mismatch is a
    ValueError that names it: `scored` one sentence short was a bare IndexError, and a relation list
    or flag list of the wrong length a "zip() argument 5 is shorter" naming neither."""
    _check_lengths(gold_heads, pred_heads)
    for name, values in (("gold relations", gold_relations), ("predicted relations", pred_relations)):
        if len(values) != len(gold_heads):
            raise ValueError(f"{len(gold_heads)} sentences of gold heads but {len(values)} of {name}")
    if scored is not None and len(scored) != len(gold_heads):
        raise ValueError(f"{len(gold_heads)} sentences of gold heads but {len(scored)} of scored flags")
    head_ok = label_ok = both_ok = total = 0
    for i, (gh, gr, ph, pr) in enumerate(zip(gold_heads, gold_relations, pred_heads, pred_relations, strict=True)):
        if not (len(gh) == len(gr) == len(ph) == len(pr)):
            raise ValueError(
                f"sentence {i}: {len(gh)} gold heads, {len(gr)} gold relations, "
                f"{len(ph)} predicted heads, {len(pr)} predicted relations"
            )
        flags = scored[i] if scored is not None else [True] * len(gh)
        if len(flags) != len(gh):
            raise ValueError(f"sentence {i}: {len(gh)} words but {len(flags)} scored flags")
        for g_head, g_rel, p_head, p_rel, use in zip(gh, gr, ph, pr, flags, strict=True):
            if not use:
                continue
            total += 1
            head_ok += g_head == p_head
            label_ok += g_rel == p_rel
            both_ok += g_head == p_head and g_rel == p_rel
    if total == 0:
        raise ValueError("no word to score (every word excluded?)")
    return AttachmentScores(100.0 * head_ok / total, 100.0 * both_ok / total, 100.0 * label_ok / total, total)

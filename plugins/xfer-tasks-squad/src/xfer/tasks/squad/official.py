"""SQuAD's official EM/F1, re-implemented from the behaviour of the official scripts.

Behaviour of `evaluate-v1.1.py` and `evaluate-v2.0.py` (https://rajpurkar.github.io/SQuAD-explorer/):

* Answers are normalised by: lower-casing; removing every character in `string.punctuation`;
  replacing the whole words `a`, `an`, `the` by a space; collapsing whitespace. Tokens are the
  whitespace-split normalised string.
* EM is 1 if the normalised prediction equals a normalised gold answer. F1 is the bag-of-tokens
  F1 between prediction and gold. Each is the maximum over the gold answers, averaged over
  questions and multiplied by 100.
* v1.1: every gold answer counts; F1 is 0 whenever no token is shared (also when both sides
  normalise to nothing).
* v2.0: gold answers that normalise to "" are dropped, and a question without gold answers
  (unanswerable) has the single gold answer "". When either side has no tokens, F1 is 1 if both
  have none, else 0. So predicting "" (= no answer) scores 1 on an unanswerable question and 0
  on an answerable one. Scores are also broken down into HasAns_ (questions with answers) and
  NoAns_ (without). Without a no-answer probability file, the v2.0 script's threshold leaves
  predictions untouched, which is what we compute.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact(gold: str, prediction: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(prediction))


def f1(gold: str, prediction: str, *, version: int) -> float:
    gold_tokens = normalize_answer(gold).split()
    pred_tokens = normalize_answer(prediction).split()
    if version == 2 and (not gold_tokens or not pred_tokens):
        return float(gold_tokens == pred_tokens)
    common = sum((Counter(gold_tokens) & Counter(pred_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def gold_texts(answers: Sequence[str], *, version: int) -> list[str]:
    """The gold answers scored against (v2.0: empty-after-normalisation answers dropped, [""] if none)."""
    if version == 1:
        return list(answers)
    kept = [a for a in answers if normalize_answer(a)]
    return kept or [""]


def score(answers: Sequence[str], prediction: str, *, version: int) -> tuple[int, float]:
    """(EM, F1) of one prediction, each the max over the gold answers."""
    golds = gold_texts(answers, version=version)
    if not golds:
        raise ValueError("SQuAD 1.1 questions need at least one gold answer")
    return max(exact(g, prediction) for g in golds), max(f1(g, prediction, version=version) for g in golds)


def evaluate(golds: Sequence[Sequence[str]], predictions: Sequence[str], *, version: int) -> dict[str, float]:
    """Corpus scores x100: v1 {exact_match, f1}; v2 {exact, f1, total, HasAns_*, NoAns_*} as the
    official scripts name them (a breakdown is omitted when it has no questions, as there)."""
    if len(golds) != len(predictions):
        raise ValueError(f"{len(golds)} questions but {len(predictions)} predictions")
    if not golds:
        raise ValueError("cannot evaluate zero questions")
    scores = [score(g, p, version=version) for g, p in zip(golds, predictions, strict=True)]

    def mean(values: list[float]) -> float:
        return 100.0 * sum(values) / len(values)

    if version == 1:
        return {"exact_match": mean([s[0] for s in scores]), "f1": mean([s[1] for s in scores])}
    result = {"exact": mean([s[0] for s in scores]), "f1": mean([s[1] for s in scores]), "total": float(len(scores))}
    for prefix, keep in (("HasAns", True), ("NoAns", False)):
        subset = [s for s, g in zip(scores, golds, strict=True) if bool(g) == keep]
        if subset:
            result[f"{prefix}_exact"] = mean([s[0] for s in subset])
            result[f"{prefix}_f1"] = mean([s[1] for s in subset])
            result[f"{prefix}_total"] = float(len(subset))
    return result

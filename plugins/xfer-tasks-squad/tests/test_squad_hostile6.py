"""Hostile-review regressions (6) for squad/v2 null odds: numpy numbers from a third-party objective,
NaN odds named as NaN."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from xfer.core.tasks import SpanQAExample
from xfer.tasks.squad.tasks import SquadV2Task

np = pytest.importorskip("numpy")

QUESTIONS = [
    SpanQAExample(id="q1", question="Who ran?", context="Bob ran.", answers=(), is_impossible=True),
    SpanQAExample(id="q2", question="What did Bob do?", context="Bob ran.", answers=(), is_impossible=True),
]


class Predictions(dict):
    """What a span-QA objective hands to `write_predictions` for SQuAD 2.0 (`SpanQAPredictions`' shape)."""

    def __init__(self, odds: dict[str, Any]):
        super().__init__({"q1": "", "q2": "ran"})
        self.best_non_null = {"q1": "Bob", "q2": "ran"}
        self.null_odds = odds


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (np.float32(0.5), 0.5),
        (np.float16(-2.0), -2.0),
        (np.int64(3), 3.0),
        (np.float32("inf"), 1e30),
        (Fraction(1, 4), 0.25),
    ],
)
def test_numpy_and_other_real_null_odds_are_written(tmp_path: Path, value: Any, written: float) -> None:
    """A third-party objective computing odds in numpy hands float32s: they were refused with
    "null odds for 'q1' must be a number, not np.float32(0.5)" (only Python int/float passed), and
    no prediction file was written. Every real number is a number; the file holds plain floats."""
    task = SquadV2Task("squad/v2")
    task.write_predictions(tmp_path, "dev", QUESTIONS, Predictions({"q1": value, "q2": -1.0}))
    odds = json.loads((tmp_path / "dev-null-odds.json").read_text(encoding="utf-8"))
    assert odds == {"q1": written, "q2": -1.0}
    assert json.loads((tmp_path / "dev-predictions.json").read_text(encoding="utf-8")) == {"q1": "", "q2": "ran"}


@pytest.mark.parametrize("value", [float("nan"), np.float32("nan"), np.float64("nan")])
def test_nan_null_odds_are_refused_as_nan_not_as_a_non_number(tmp_path: Path, value: Any) -> None:
    """NaN odds (a diverged model) were refused as "must be a number, not nan" only, which reads
    as a type problem. The error names the question and says NaN and why; nothing is written."""
    task = SquadV2Task("squad/v2")
    with pytest.raises(ValueError, match=r"null odds for 'q2' .*: NaN, from a diverged model"):
        task.write_predictions(tmp_path, "dev", QUESTIONS, Predictions({"q1": 0.0, "q2": value}))
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("value", [True, np.bool_(False), "0.5", None, 1 + 2j])
def test_non_numbers_and_bools_are_still_refused(tmp_path: Path, value: Any) -> None:
    """A bool (or numpy bool) is no odds, nor a string, None or a complex number."""
    task = SquadV2Task("squad/v2")
    with pytest.raises(ValueError, match=r"null odds for 'q1' must be a number"):
        task.write_predictions(tmp_path, "dev", QUESTIONS, Predictions({"q1": value, "q2": 0.0}))


def test_an_unlabelled_v2_question_is_not_scored_as_unanswerable() -> None:
    """A question with neither answers nor `is_impossible` is unlabelled (the Task contract's
    hidden test set). SQuAD 2.0's scorer takes "no answers" for "unanswerable": the "" prediction
    scored 100 on it, and any answer 0, a score of a question nobody labelled."""
    task = SquadV2Task("squad/v2")
    unlabelled = SpanQAExample(id="t1", question="Who ran?", context="Bob ran.", answers=(), is_impossible=False)
    with pytest.raises(ValueError, match=r"question 't1' has no answers and is not is_impossible: an unlabelled"):
        task.evaluate([QUESTIONS[0], unlabelled], {"q1": "", "t1": ""})
    assert task.evaluate(QUESTIONS, {"q1": "", "q2": ""})["f1"] == 100.0  # unanswerable questions still score

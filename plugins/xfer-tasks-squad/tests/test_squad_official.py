"""Official SQuAD EM/F1 behaviour against hand-computed values."""

from __future__ import annotations

import pytest

from xfer.core.tasks import Answer, SpanQAExample
from xfer.tasks.squad import official
from xfer.tasks.squad.tasks import SquadV1Task, SquadV2Task


def test_normalization():
    # lower-case, drop punctuation, drop articles a/an/the as whole words, collapse whitespace
    assert official.normalize_answer("The  Cat's, hat!") == "cats hat"
    assert official.normalize_answer("An apple a day; theatre") == "apple day theatre"
    assert official.normalize_answer("  ") == ""


def test_token_f1_and_max_over_golds():
    # gold tokens [big, red, dog], predicted [red, dog, barked]: 2 shared -> P = R = 2/3
    assert official.f1("the big red dog", "red dog barked", version=1) == pytest.approx(2 / 3)
    assert official.score(["Denver Broncos", "Broncos"], "the Broncos", version=1) == (1, 1.0)


def example(qid: str, answers: list[str], impossible: bool = False) -> SpanQAExample:
    context = " ".join(answers) or "ctx"
    return SpanQAExample(
        id=qid,
        question="q?",
        context=context,
        answers=tuple(Answer(a, context.index(a)) for a in answers),
        is_impossible=impossible,
    )


def test_v2_scores_with_breakdown():
    examples = [
        example("q1", ["Denver Broncos"]),
        example("q2", [], impossible=True),
        example("q3", [], impossible=True),
        example("q4", ["1 2 3"]),
    ]
    predictions = {"q1": "Broncos", "q2": "", "q3": "something", "q4": ""}
    scores = SquadV2Task("squad/v2").evaluate(examples, predictions)
    # q1: EM 0, F1 2*1*0.5/1.5 = 2/3; q2: no answer predicted on unanswerable -> 1/1; q3, q4: 0/0
    assert scores == pytest.approx(
        {
            "exact": 25.0,
            "f1": 100 * (2 / 3 + 1) / 4,
            "total": 4.0,
            "HasAns_exact": 0.0,
            "HasAns_f1": 100 * (2 / 3) / 2,
            "HasAns_total": 2.0,
            "NoAns_exact": 50.0,
            "NoAns_f1": 50.0,
            "NoAns_total": 2.0,
        }
    )


def test_v1_scores():
    examples = [example("a", ["Denver Broncos", "Broncos"]), example("b", ["seven"])]
    scores = SquadV1Task("squad/v1").evaluate(examples, {"a": "the Broncos", "b": "eight"})
    assert scores == pytest.approx({"exact_match": 50.0, "f1": 50.0})


def test_v1_and_v2_differ_on_answers_that_normalise_to_nothing():
    # v1.1: gold "the" vs "" -> EM 1 (both normalise to ""), F1 0 (no shared token)
    assert official.score(["the"], "", version=1) == (1, 0.0)
    # v2.0: "the" is dropped as a gold answer, leaving [""] -> EM 1, F1 1
    assert official.score(["the"], "", version=2) == (1, 1.0)


def test_no_breakdown_without_unanswerable_questions():
    scores = SquadV2Task("squad/v2").evaluate([example("a", ["x"])], {"a": "x"})
    assert "NoAns_exact" not in scores and scores["HasAns_exact"] == 100.0


def test_bad_predictions():
    task = SquadV2Task("squad/v2")
    with pytest.raises(ValueError, match="no prediction for question 'a'"):
        task.evaluate([example("a", ["x"])], {})
    with pytest.raises(ValueError, match="must be a string"):
        task.evaluate([example("a", ["x"])], {"a": None})

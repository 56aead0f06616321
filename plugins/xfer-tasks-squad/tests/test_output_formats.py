"""The SQuAD prediction file as the official evaluate-v1.1.py / evaluate-v2.0.py read it:
`json.load(open(path))` in the locale's encoding, one answer string per question."""

from __future__ import annotations

import json

import pytest

from xfer.core.tasks import Answer, SpanQAExample
from xfer.tasks.squad.tasks import SquadV1Task, SquadV2Task


def questions() -> list[SpanQAExample]:
    return [
        SpanQAExample(id="q1", question="Where?", context="in Zürich", answers=(Answer("Zürich", 3),)),
        SpanQAExample(id="q2", question="Who?", context="nobody", answers=(), is_impossible=True),
    ]


def test_the_file_is_ascii_and_answers_read_back_verbatim(tmp_path):
    """Non-ASCII answers were written as raw UTF-8: the official scripts `open()` the file in the
    locale's encoding, so under a non-UTF-8 locale they fail (or read mojibake)."""
    answers = {"q1": " Zürich\u00a0東京\u2028 ", "q2": ""}
    out = SquadV2Task("squad/v2").write_predictions(tmp_path, "dev", questions(), answers)
    assert out.name == "dev-predictions.json"
    with open(out, encoding="ascii") as handle:  # what json.load(open(path)) sees under LANG=C
        assert json.load(handle) == answers
    assert list(json.loads(out.read_text())) == ["q1", "q2"]


@pytest.mark.parametrize("value", [None, ["Zürich"], 3.0])
def test_non_string_predictions_are_errors(tmp_path, value):
    """They were written through str(): None became the answer "None", a list "['Zürich']"."""
    with pytest.raises(ValueError, match=r"prediction for 'q2' must be a string"):
        SquadV2Task("squad/v2").write_predictions(tmp_path, "dev", questions(), {"q1": "Zürich", "q2": value})
    assert not (tmp_path / "dev-predictions.json").exists()


def test_a_prediction_for_an_unknown_question_is_an_error(tmp_path):
    with pytest.raises(ValueError, match=r"not questions of this split, e.g. 'q9'"):
        SquadV1Task("squad/v1").write_predictions(tmp_path, "dev", questions()[:1], {"q1": "Zürich", "q9": "elsewhere"})
    assert not (tmp_path / "dev-predictions.json").exists()


def test_a_lone_surrogate_does_not_truncate_the_previous_file(tmp_path):
    """UTF-8 cannot encode a lone surrogate: the old writer truncated the file, then failed. As a
    JSON escape it is written, and reads back as the same string."""
    task = SquadV1Task("squad/v1")
    out = task.write_predictions(tmp_path, "dev", questions()[:1], {"q1": "Zürich"})
    task.write_predictions(tmp_path, "dev", questions()[:1], {"q1": "Z\udc80"})
    assert json.loads(out.read_text()) == {"q1": "Z\udc80"}

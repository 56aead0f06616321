"""Hostile-review regressions (7): blind SQuAD test sets (questions without gold, as the official
hidden test sets hold them) are read as unlabelled questions, predicted and written, never scored."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from xfer.core.errors import DataError
from xfer.core.tasks import check_examples
from xfer.tasks.squad.config import SquadConfig
from xfer.tasks.squad.tasks import SquadTask, SquadV1Task, SquadV2Task

CONTEXT = "Super Bowl 50 was won by the Denver Broncos in Santa Clara."


def squad_file(path: Path, qas: list[dict[str, Any]]) -> Path:
    data = {"version": "v2.0", "data": [{"title": "SB", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def blind_qas() -> list[dict[str, Any]]:
    """One question without an `answers` key, one with `answers: []`; neither has is_impossible."""
    return [
        {"id": "t1", "question": "Who won Super Bowl 50?"},
        {"id": "t2", "question": "Where was it played?", "answers": []},
    ]


def task_for(cls: type[SquadTask], **files: Path) -> SquadTask:
    return cls(cls.__name__, SquadConfig(**{f"{split}_file": path for split, path in files.items()}))


@pytest.mark.parametrize("cls", [SquadV1Task, SquadV2Task])
def test_a_blind_test_file_is_read_as_unlabelled_questions_and_written(tmp_path: Path, cls: type[SquadTask]) -> None:
    """A test file without gold was refused ("question 't1' has no answers"), so a blind test set
    could not be predicted. Its questions are unlabelled (no answers, not is_impossible), pass the
    Task contract as an unlabelled split, are written, and are refused by `evaluate`; no
    "a SQuAD 1.1 file?" warning (v2) for a file that has no gold at all."""
    task = task_for(cls, test=squad_file(tmp_path / "test.json", blind_qas()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        examples = task.examples("test")
    assert [(e.id, e.answers, e.is_impossible, e.context) for e in examples] == [
        ("t1", (), False, CONTEXT),
        ("t2", (), False, CONTEXT),
    ]
    check_examples(task, "test", examples)  # an unlabelled split: allowed
    path = task.write_predictions(tmp_path / "out", "test", examples, {"t1": "Denver Broncos", "t2": ""})
    assert json.loads(path.read_text(encoding="utf-8")) == {"t1": "Denver Broncos", "t2": ""}
    with pytest.raises(
        ValueError, match=r"question 't1' has no answers and is not is_impossible: an unlabelled question"
    ):
        task.evaluate(examples, {"t1": "Denver Broncos", "t2": ""})


@pytest.mark.parametrize("split", ["train", "dev"])
def test_train_and_dev_questions_without_answers_are_still_refused(tmp_path: Path, split: str) -> None:
    """Only the test split may be blind: a train or dev question without answers is a broken record,
    refused at its line, the message saying that only a test file may be blind."""
    qas = blind_qas()
    path = squad_file(tmp_path / f"{split}.json", qas[1:])
    with pytest.raises(DataError, match=r"question 't2' has no answers.*only a test file may be a blind") as err:
        task_for(SquadV1Task, **{split: path}).examples(split)
    assert err.value.key == "answers"
    path = squad_file(tmp_path / f"{split}-nokey.json", qas[:1])
    with pytest.raises(DataError, match=r"missing key in question 't1'"):
        task_for(SquadV2Task, **{split: path}).examples(split)


def test_a_test_file_mixing_labelled_and_blind_questions_is_refused_at_the_line(tmp_path: Path) -> None:
    """A labelled test file with one question that lost its answers must not become a half-blind
    split (the Task contract would refuse it later, without a line, as a plugin's fault): a
    DataError at the unlabelled question's line, naming a labelled one."""
    qas = [
        {"id": "ok", "question": "Who won?", "answers": [{"text": "Denver Broncos", "answer_start": 29}]},
        {"id": "lost", "question": "Where?", "answers": []},
    ]
    path = squad_file(tmp_path / "test.json", qas)
    with pytest.raises(DataError, match=r"question 'lost' has no answers .* but question 'ok' is labelled") as err:
        task_for(SquadV1Task, test=path).examples("test")
    assert err.value.line == next(
        n for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if '"lost"' in text
    )
    qas[0] = {"id": "ok", "question": "Who lost?", "answers": [], "is_impossible": True}  # v2 unanswerable = labelled
    with pytest.raises(DataError, match=r"question 'lost' .* but question 'ok' is labelled"):
        task_for(SquadV2Task, test=squad_file(tmp_path / "test2.json", qas)).examples("test")


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"is_impossible": False, "answers": []}, r"has no answers .*a blind test question has no is_impossible key"),
        ({"answers": None}, r"expected list, found NoneType"),
    ],
)
def test_a_broken_blind_question_is_still_an_error(tmp_path: Path, extra: dict[str, Any], match: str) -> None:
    """`is_impossible: false` without answers contradicts itself (not blind: gold that says
    answerable), and `answers: null` is a broken record, in the test split as elsewhere."""
    qas = [{"id": "t1", "question": "Who won?", **extra}]
    with pytest.raises(DataError, match=match):
        task_for(SquadV2Task, test=squad_file(tmp_path / "test.json", qas)).examples("test")

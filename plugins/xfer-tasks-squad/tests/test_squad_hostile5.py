"""Hostile review (5) of the SQuAD plugin: empty questions."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from xfer.tasks.squad.readers import read_squad

CONTEXT = "The dog sleeps near the house."


def squad_file(path: Path, questions: list[tuple[str, str]]) -> Path:
    """A pretty-printed SQuAD 1.1 file with one paragraph, one answerable question per (id, text)."""
    qas = [
        {"id": qid, "question": text, "answers": [{"text": "the house", "answer_start": 20}]} for qid, text in questions
    ]
    document = {"version": "1.1", "data": [{"title": "Dogs", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


@pytest.mark.parametrize("text", ["", "   ", "\t\n"])
def test_an_empty_question_is_kept_with_a_warning_naming_count_id_and_line(tmp_path: Path, text: str) -> None:
    """An empty or whitespace-only question text was read without a word (the model answers from
    the context alone); it is kept (an official file must stay readable) but warned about."""
    path = squad_file(tmp_path / "dev.json", [("q1", "Where?"), ("q2", text), ("q3", text)])
    with pytest.warns(UserWarning) as record:
        examples = read_squad(path, version=1)
    assert [e.id for e in examples] == ["q1", "q2", "q3"]
    assert examples[1].question == text
    (message,) = [str(w.message) for w in record]
    line = next(n for n, row in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if '"id": "q2"' in row)
    assert message.startswith(f"{path}:{line}: 2 of 3 question(s) have an empty or whitespace-only question text")
    assert "(first 'q2')" in message


def test_real_questions_give_no_warning(tmp_path: Path) -> None:
    path = squad_file(tmp_path / "dev.json", [("q1", "Where?"), ("q2", " Where does it sleep? ")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_squad(path, version=1)) == 2


def test_a_squad11_file_read_by_squad_v2_is_warned_about(tmp_path: Path) -> None:
    """squad/v2 read `train-v1.1.json` without a word: a model that never sees "no answer", scored
    under the v2 metric names, comparable with neither SQuAD version. Now a warning names the file
    and its version field; the questions are all kept."""
    path = squad_file(tmp_path / "train-v1.1.json", [("q1", "Where?"), ("q2", "Where again?")])
    with pytest.warns(UserWarning) as record:
        assert len(read_squad(path, version=2)) == 2
    (message,) = [str(w.message) for w in record]
    assert message == (
        f"{path}: none of its 2 questions is unanswerable (is_impossible) and its version field says '1.1': "
        "a SQuAD 1.1 file? squad/v1 scores SQuAD 1.1 (exact_match, f1, never a no-answer)"
    )


def test_a_squad20_file_or_squad_v1_gives_no_such_warning(tmp_path: Path) -> None:
    path = squad_file(tmp_path / "train.json", [("q1", "Where?")])
    document = json.loads(path.read_text(encoding="utf-8"))
    document["data"][0]["paragraphs"][0]["qas"].append(
        {"id": "q2", "question": "Why?", "answers": [], "is_impossible": True}
    )
    v2 = tmp_path / "train-v2.0.json"
    v2.write_text(json.dumps(document), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_squad(v2, version=2)) == 2
        assert len(read_squad(path, version=1)) == 1

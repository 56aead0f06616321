"""Hostile review (4) of the SQuAD reader: a user's own files in the layouts they usually come in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.tasks.squad.readers import read_squad

CONTEXT = "The dog sleeps near the house."
RECORD = {
    "id": "q1",
    "title": "Dogs",
    "context": CONTEXT,
    "question": "Where does the dog sleep?",
    "answers": {"text": ["the house"], "answer_start": [20]},
}
"""One question as Hugging Face `datasets` hold SQuAD (and `Dataset.to_json` exports it)."""
LAYOUT = r'squad tasks read the official SQuAD JSON: \{"data": \[\{"paragraphs"'


def test_a_json_lines_file_is_named_as_json_lines(tmp_path: Path) -> None:
    """`Dataset.to_json` writes JSON Lines; the reader said "malformed JSON: Extra data (column 1)"
    at line 2, a file every JSON tool reads line by line without complaint."""
    path = tmp_path / "train.json"
    path.write_text("".join(json.dumps(dict(RECORD, id=f"q{i}")) + "\n" for i in range(3)), encoding="utf-8")
    with pytest.raises(
        DataError, match=rf"train\.json:2: malformed JSON: Extra data \(column 1\): .*JSON Lines.*{LAYOUT}"
    ):
        read_squad(path, version=1)
    path.write_text('{"data": []} x', encoding="utf-8")  # other extra data: the parser's message alone
    with pytest.raises(DataError, match=r"train\.json:1: malformed JSON: Extra data \(column 14\)$"):
        read_squad(path, version=1)


@pytest.mark.parametrize(
    ("document", "where"),
    [
        (RECORD, r":2: data: missing key in top level"),
        ({"data": [RECORD]}, r":\d+: paragraphs: missing key in data\[0\]"),
    ],
)
def test_a_flat_question_record_is_named_as_such(tmp_path: Path, document: dict, where: str) -> None:
    """A flat record (one question with its context, the Hugging Face layout) was "missing key
    data" or "missing key paragraphs": the user was sent to add a key to a file of another layout."""
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    with pytest.raises(
        DataError, match=rf"{where}: a flat question record \(Hugging Face layout\)\? {LAYOUT}"
    ) as caught:
        read_squad(path, version=2)
    assert caught.value.key in ("data", "paragraphs")


def test_a_missing_key_in_the_squad_layout_is_reported_as_before(tmp_path: Path) -> None:
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t"}]}), encoding="utf-8")
    with pytest.raises(DataError, match=r"dev\.json:1: paragraphs: missing key in data\[0\]$"):
        read_squad(path, version=1)


def _with_answer(path: Path, text: str, start: int) -> Path:
    qa = {"id": "q1", "question": "Where?", "answers": [{"text": text, "answer_start": start}]}
    path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": [qa]}]}]}))
    return path


@pytest.mark.parametrize("start", [-5, 30, 10**6])
def test_an_answer_start_outside_the_context_says_so(tmp_path: Path, start: int) -> None:
    """A negative start was reported as "(the context there reads None)", one past the end as
    "(the context there reads '')": neither says that the offset is outside the context."""
    with pytest.raises(
        DataError,
        match=rf"answer_start {start} does not match the answer text 'the house' \(outside the context, which has "
        r"30 characters; the answer text is at character 20\)",
    ) as caught:
        read_squad(_with_answer(tmp_path / "train.json", "the house", start), version=1)
    assert caught.value.key == "answer_start"


def test_a_wrong_answer_start_names_where_the_answer_is(tmp_path: Path) -> None:
    """An offset off by one (a context stripped after the offsets were computed, datasets#2585)
    left the user to search the context; an answer written with other whitespace than the
    context's is nowhere in it, which the message now says."""
    path = _with_answer(tmp_path / "train.json", "the house", 19)
    with pytest.raises(DataError, match=r"reads ' the hous'; the answer text is at character 20\)$"):
        read_squad(path, version=1)
    with pytest.raises(DataError, match=r"reads 'the house\.'; the answer text is nowhere in the context\)$"):
        read_squad(_with_answer(path, "the  house", 20), version=1)
    assert read_squad(_with_answer(path, "the house", 20), version=1)[0].answers[0].start == 20


def _numbered(path: Path, qas: list[dict]) -> Path:
    path.write_text(
        json.dumps(
            {"data": [{"title": "t", "paragraphs": [{"context": "He has 3 dogs and 1 cat.", "qas": qas}]}]}, indent=2
        )
    )
    return path


def _line(path: Path, text: str, occurrence: int = 1) -> int:
    return [i for i, line in enumerate(path.read_text().splitlines(), start=1) if text in line][occurrence - 1]


def test_errors_name_the_line_of_the_question_id_not_an_answer_equal_to_it(tmp_path: Path) -> None:
    """Ids are numbers in many hand-made files, and so are answers to "how many" questions: the
    line of question "3" was that of an earlier answer "3", and a duplicate id "1" was reported
    at the answer "1" (two lines that had nothing wrong)."""
    qas = [
        {"id": "1", "question": "How many cats?", "answers": [{"text": "1", "answer_start": 18}]},
        {"id": "2", "question": "How many dogs?", "answers": [{"text": "3", "answer_start": 7}]},
        {"id": "3", "question": "Who?", "answers": [{"text": "He", "answer_start": 1}]},
    ]
    path = _numbered(tmp_path / "train.json", qas)
    line = _line(path, '"id": "3"')
    with pytest.raises(DataError, match=rf"train\.json:{line}: answer_start: question '3'"):
        read_squad(path, version=1)
    qas[2]["answers"][0]["answer_start"] = 0
    qas.append({"id": "1", "question": "Again?", "answers": [{"text": "He", "answer_start": 0}]})
    path = _numbered(path, qas)
    first, again = _line(path, '"id": "1"'), _line(path, '"id": "1"', 2)
    with pytest.raises(
        DataError, match=rf"train\.json:{again}: id: duplicate question id '1' \(first on line {first}\)"
    ):
        read_squad(path, version=1)
    path.write_text(path.read_text().replace('"id": "3",', '"id": "3", "id": "3",'))  # a key twice
    line = _line(path, '"id": "3"')
    with pytest.raises(DataError, match=rf"train\.json:{line}: id: key 'id' twice"):
        read_squad(path, version=1)


@pytest.mark.parametrize("key", ["context", "question"])
def test_a_nul_character_in_a_text_is_refused_naming_the_question(tmp_path: Path, key: str) -> None:
    """JSON's \\u0000 escape passed, where text files refuse a NUL byte: the normaliser deletes it,
    gluing the words on either side ("Re\\u0000eve" read as "Reeve")."""
    qa = {"id": "q1", "question": "Where does the dog sleep?", "answers": [{"text": "the house", "answer_start": 20}]}
    paragraph = {"context": CONTEXT, "qas": [qa]}
    (paragraph if key == "context" else qa)[key] = "The\u0000dog" + (CONTEXT[7:] if key == "context" else " sleep?")
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"data": [{"title": "Dogs", "paragraphs": [paragraph]}]}), encoding="utf-8")
    with pytest.raises(DataError, match=rf"{key}: .*NUL character \(\\u0000\) at character 3"):
        read_squad(path, version=1)

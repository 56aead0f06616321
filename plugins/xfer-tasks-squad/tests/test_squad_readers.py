"""SQuAD JSON reader on generated files, and every bad-input path (file:line)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from xfer.core.errors import DataError, UserError
from xfer.tasks.squad.config import SquadConfig
from xfer.tasks.squad.tasks import SquadV1Task, SquadV2Task

CONTEXT = "Super Bowl 50 was won by the Denver Broncos in Santa Clara."
V1 = {
    "version": "1.1",
    "data": [
        {
            "title": "Super_Bowl_50",
            "paragraphs": [
                {
                    "context": CONTEXT,
                    "qas": [
                        {
                            "id": "q-winner",
                            "question": "Who won Super Bowl 50?",
                            "answers": [
                                {"text": "Denver Broncos", "answer_start": 29},
                                {"text": "the Denver Broncos", "answer_start": 25},
                                {"text": "Denver Broncos", "answer_start": 29},
                            ],
                        },
                        {
                            "id": "q-where",
                            "question": "Where?",
                            "answers": [{"text": "Santa Clara", "answer_start": 47}],
                        },
                    ],
                }
            ],
        }
    ],
}


def v2_data() -> dict:
    data = copy.deepcopy(V1)
    data["version"] = "v2.0"
    qas = data["data"][0]["paragraphs"][0]["qas"]
    for qa in qas:
        qa["is_impossible"] = False
    qas.append(
        {
            "id": "q-none",
            "question": "Who lost Super Bowl 51?",
            "answers": [],
            "plausible_answers": [{"text": "Denver Broncos", "answer_start": 29}],
            "is_impossible": True,
        }
    )
    return data


def write(path: Path, data: dict | str) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2), encoding="utf-8")
    return path


def test_v1_examples_keep_every_gold_answer(tmp_path):
    task = SquadV1Task("squad/v1", SquadConfig(dev_file=write(tmp_path / "dev-v1.1.json", V1)))
    winner, where = task.examples("dev")
    assert (winner.id, winner.question, winner.title) == ("q-winner", "Who won Super Bowl 50?", "Super_Bowl_50")
    assert winner.context == CONTEXT
    assert [(a.text, a.start) for a in winner.answers] == [
        ("Denver Broncos", 29),
        ("the Denver Broncos", 25),
        ("Denver Broncos", 29),
    ]
    assert not winner.is_impossible and where.answers[0].text == "Santa Clara"
    scores = task.evaluate([winner, where], {"q-winner": "Broncos", "q-where": "Santa Clara"})
    assert scores == pytest.approx({"exact_match": 50.0, "f1": 100 * (2 / 3 + 1) / 2})


def test_v2_unanswerable(tmp_path):
    task = SquadV2Task("squad/v2", SquadConfig(train_file=write(tmp_path / "train-v2.0.json", v2_data())))
    examples = task.examples("train")
    assert [e.id for e in examples] == ["q-winner", "q-where", "q-none"]
    assert examples[2].is_impossible and examples[2].answers == ()


def test_max_examples_and_prediction_file(tmp_path):
    task = SquadV1Task("squad/v1", SquadConfig(dev_file=write(tmp_path / "dev.json", V1), max_examples=1))
    (only,) = task.examples("dev")
    out = task.write_predictions(tmp_path / "out", "dev", [only], {"q-winner": "Dénver"})
    assert out == tmp_path / "out" / "dev-predictions.json"
    assert json.loads(out.read_text(encoding="utf-8")) == {"q-winner": "Dénver"}


def test_a_valid_file_is_read_without_searching_the_raw_text(tmp_path, monkeypatch):
    """Every question's line was searched for in the raw text (O(file size) each) even when
    nothing was wrong: reading the official 30 MB train-v1.1.json took about half an hour
    (quadratic). Lines are now searched for only to report an error."""
    from xfer.tasks.squad import readers

    calls: list[tuple] = []
    monkeypatch.setattr(readers._Locator, "line", lambda self, *values: calls.append(values) or 1)
    path = write(tmp_path / "train.json", v2_data())
    assert len(SquadV2Task("squad/v2", SquadConfig(train_file=path)).examples("train")) == 3
    assert calls == []
    data = copy.deepcopy(V1)
    data["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] = 46
    with pytest.raises(DataError, match="does not match"):  # an error still gets its line
        SquadV1Task("squad/v1", SquadConfig(train_file=write(tmp_path / "bad.json", data))).examples("train")
    assert calls == [("q-where",)]


# --- bad input -----------------------------------------------------------------------------------


def raises_at(task, split: str, where: str, match: str) -> DataError:
    with pytest.raises(DataError, match=match) as info:
        task.examples(split)
    assert where in str(info.value), str(info.value)
    return info.value


def v1(path: Path) -> SquadV1Task:
    return SquadV1Task("squad/v1", SquadConfig(train_file=path))


def line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


def test_malformed_json_reports_line(tmp_path):
    text = json.dumps(V1, indent=2).replace('"Where?",', '"Where?"', 1)
    path = write(tmp_path / "bad.json", text)
    raises_at(v1(path), "train", f"{path}:{line_of(path, 'Where?') + 1}:", "malformed JSON")


def test_missing_key_names_key_and_question(tmp_path):
    data = copy.deepcopy(V1)
    del data["data"][0]["paragraphs"][0]["qas"][1]["answers"]
    path = write(tmp_path / "train.json", data)
    err = raises_at(v1(path), "train", f"{path}:{line_of(path, 'q-where')}:", "missing key in question 'q-where'")
    assert err.key == "answers"
    data = copy.deepcopy(V1)
    del data["data"][0]["paragraphs"][0]["qas"][0]["answers"][1]["answer_start"]
    path = write(tmp_path / "train2.json", data)
    raises_at(v1(path), "train", f"{path}:{line_of(path, 'q-winner')}: answer_start:", "question 'q-winner', answer 1")
    path = write(tmp_path / "nodata.json", {"version": "1.1"})
    raises_at(v1(path), "train", f"{path}:1: data:", "missing key in top level")


def test_answer_start_mismatch(tmp_path):
    data = copy.deepcopy(V1)
    data["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] = 46
    path = write(tmp_path / "train.json", data)
    raises_at(v1(path), "train", f"{path}:{line_of(path, 'q-where')}: answer_start:", "'q-where'.*does not match")


def test_wrong_types_and_duplicates(tmp_path):
    data = copy.deepcopy(V1)
    data["data"][0]["paragraphs"][0]["qas"][1]["answers"][0]["answer_start"] = "47"
    path = write(tmp_path / "a.json", data)
    raises_at(v1(path), "train", f"{path}:{line_of(path, 'q-where')}:", "expected int, found str")
    data = copy.deepcopy(V1)
    data["data"][0]["paragraphs"][0]["qas"][1]["id"] = "q-winner"
    path = write(tmp_path / "b.json", data)
    lines = [n for n, text in enumerate(path.read_text().splitlines(), 1) if '"q-winner"' in text]
    assert len(lines) == 2
    # the repeat's line (it pointed at the first, which is fine), naming the first
    raises_at(
        v1(path), "train", f"{path}:{lines[1]}:", f"duplicate question id 'q-winner' \\(first on line {lines[0]}\\)"
    )


@pytest.mark.parametrize(("field", "value"), [("text", ""), ("text", "  "), ("id", ""), ("id", " ")])
def test_empty_answer_text_or_question_id_names_the_line(tmp_path, field, value):
    """An empty answer text or question id was read without a word; only the generic pre-flight
    caught them later, without file:line, and called an empty id a plugin bug."""
    data = copy.deepcopy(V1)
    qa = data["data"][0]["paragraphs"][0]["qas"][1]
    if field == "text":
        qa["answers"][0] = {"text": value, "answer_start": 47}
    else:
        qa["id"] = value
    path = write(tmp_path / "train.json", data)
    line = line_of(path, "q-where" if field == "text" else "Where?")  # the question's id, else its text
    err = raises_at(v1(path), "train", f"{path}:{line}:", f"empty .*{value!r}")
    assert err.key == field


def test_duplicate_json_keys_are_an_error(tmp_path):
    """json.loads keeps the last of two equal keys: a second `answers` silently replaced the first."""
    text = json.dumps(V1, indent=2).replace(
        '"question": "Where?",', '"question": "Where?",\n"answers": [{"text": "Clara", "answer_start": 53}],', 1
    )
    path = write(tmp_path / "train.json", text)
    err = raises_at(v1(path), "train", f"{path}:{line_of(path, 'q-where')}:", "key 'answers' twice in one JSON")
    assert err.key == "answers"


def test_lone_surrogate_escape_is_an_error(tmp_path):
    """`\\ud800` is valid JSON but no character: the tokenizer later failed with a bare TypeError."""
    text = json.dumps(V1, indent=2).replace("Santa Clara.", "Santa Clara \\ud800.", 1)
    path = write(tmp_path / "train.json", text)
    err = raises_at(v1(path), "train", f"{path}:", r"lone surrogate escape \\ud800")
    assert err.key == "context"
    # a complete pair (an emoji written by json.dumps' default ensure_ascii) is fine
    data = copy.deepcopy(V1)
    data["data"][0]["paragraphs"][0]["context"] = CONTEXT + " \U0001f3c8"
    assert v1(write(tmp_path / "ok.json", data)).examples("train")[0].context.endswith("\U0001f3c8")


@pytest.mark.parametrize("title", [None, 3])
def test_a_title_that_is_not_a_string_is_an_error(tmp_path, title):
    """`title` is optional, but null or 3 were kept as the titles 'None' and '3'."""
    data = copy.deepcopy(V1)
    data["data"][0]["title"] = title
    path = write(tmp_path / "train.json", data)
    err = raises_at(v1(path), "train", f"{path}:{line_of(path, 'q-winner')}:", "data\\[0\\]: expected str")
    assert err.key == "title"
    del data["data"][0]["title"]  # absent: ""
    assert v1(write(tmp_path / "ok.json", data)).examples("train")[0].title == ""


def test_version_consistency(tmp_path):
    path = write(tmp_path / "v2.json", v2_data())
    raises_at(v1(path), "train", f"{path}:{line_of(path, 'q-none')}:", "use squad/v2")
    data = v2_data()
    data["data"][0]["paragraphs"][0]["qas"][2]["is_impossible"] = False
    path = write(tmp_path / "v2b.json", data)
    task = SquadV2Task("squad/v2", SquadConfig(dev_file=path))
    raises_at(task, "dev", f"{path}:{line_of(path, 'q-none')}: answers:", "has no answers")


def test_empty_and_badly_encoded_files(tmp_path):
    path = write(tmp_path / "empty.json", "")
    raises_at(v1(path), "train", f"{path}:1:", "file is empty")
    path = write(tmp_path / "none.json", {"data": []})
    raises_at(v1(path), "train", f"{path}:1:", "no questions")
    text = json.dumps(V1, indent=2).replace("Santa Clara.", "S\u00e3o Paulo.")
    path = tmp_path / "latin1.json"
    path.write_bytes(text.encode("latin-1"))
    context_line = next(i for i, line in enumerate(text.splitlines(), start=1) if '"context"' in line)
    raises_at(v1(path), "train", f"{path}:{context_line}:", "not valid UTF-8")


def test_unconfigured_split():
    with pytest.raises(UserError, match="no test file configured"):
        SquadV2Task("squad/v2").examples("test")


def test_config_checks():
    with pytest.raises(ValueError, match="max_examples must be a positive integer"):
        SquadConfig(max_examples=0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"data": [' + "1" * 5000 + "]}", "malformed JSON: Exceeds the limit"),
        ("[" * 100_000 + "]" * 100_000, "malformed JSON: arrays or objects nested too deeply"),
    ],
)
def test_json_that_python_refuses_outside_json_decode_error_is_a_data_error(tmp_path, text, message):
    """`json.loads` reports a huge integer as ValueError and deep nesting as RecursionError: bare
    tracebacks, not errors naming the file."""
    from xfer.tasks.squad.readers import read_squad

    path = tmp_path / "train.json"
    path.write_text(text)
    with pytest.raises(DataError, match=message):
        read_squad(path, version=1)

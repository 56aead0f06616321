"""Hostile review (8) of the SQuAD reader: a file whose top level is a JSON array."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.tasks.squad.readers import read_squad

CONTEXT = "Super Bowl 50 was won by the Denver Broncos in Santa Clara."
RECORD = {
    "id": "56be4db0acb8001400a502ec",
    "title": "Super_Bowl_50",
    "context": CONTEXT,
    "question": "Which team won Super Bowl 50?",
    "answers": {"text": ["Denver Broncos"], "answer_start": [29]},
}
"""One question as Hugging Face `datasets` hold SQuAD."""
ARTICLE = {
    "title": "Super_Bowl_50",
    "paragraphs": [
        {
            "context": CONTEXT,
            "qas": [{"id": "q1", "question": "Who won?", "answers": [{"text": "Denver Broncos", "answer_start": 29}]}],
        }
    ],
}
LAYOUT = r'squad tasks read the official SQuAD JSON: \{"data": \[\{"paragraphs"'


def write(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def test_a_json_array_of_flat_question_records_is_named_as_such(tmp_path: Path) -> None:
    """`Dataset.to_json(path, lines=False)` and pandas' `to_json(orient="records")` write a JSON
    array of flat records: it was "top level: expected a JSON object, found list", naming neither
    the layout nor the expected `data` key (a single flat record was already named)."""
    path = write(tmp_path / "dev.json", [RECORD, dict(RECORD, id="q2")])
    with pytest.raises(
        DataError,
        match=rf"dev\.json:3: data: top level: expected a JSON object, found a JSON array of flat question "
        rf"records \(Hugging Face or pandas records layout\)\? {LAYOUT}",
    ) as caught:
        read_squad(path, version=2)
    assert caught.value.key == "data" and caught.value.line == 3  # the first record's "id" line


def test_a_json_array_of_articles_is_named_as_the_data_array_saved_alone(tmp_path: Path) -> None:
    """`json.dump(squad["data"], f)` (the article list without its wrapper) was the same bare
    "expected a JSON object, found list"; the fix is one wrapper, so the message says it."""
    path = write(tmp_path / "train.json", [ARTICLE])
    with pytest.raises(
        DataError,
        match=r"train\.json:1: data: top level: expected a JSON object, found a JSON array of SQuAD articles: "
        r'the "data" array saved alone\? Wrap it: \{"version": \.\.\., "data": \[\.\.\.\]\}$',
    ):
        read_squad(path, version=1)


@pytest.mark.parametrize("document", [[], [1, 2], [{"x": 1}], "text", None])
def test_other_top_levels_are_reported_as_before(tmp_path: Path, document: object) -> None:
    """Arrays of anything else, and other JSON values, keep the plain type error."""
    path = write(tmp_path / "dev.json", document)
    with pytest.raises(DataError, match=r"dev\.json:1: top level: expected a JSON object, found \w+$") as caught:
        read_squad(path, version=2)
    assert caught.value.key is None

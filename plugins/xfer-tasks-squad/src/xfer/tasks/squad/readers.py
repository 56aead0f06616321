"""Reader for SQuAD JSON files (v1.1 and v2.0 layouts).

    {"version": "v2.0", "data": [{"title": ..., "paragraphs": [{"context": ...,
        "qas": [{"id": ..., "question": ..., "answers": [{"text": ..., "answer_start": 0}],
                 "is_impossible": false}]}]}]}

JSON carries no line numbers once parsed, so errors are located by searching the raw text for
the question id (or the nearest identifiable string): `file:line` stays useful in pretty-printed
files, while the official one-line files all report line 1. Every problem is a `DataError`; a
question is never dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xfer.core.errors import DataError
from xfer.core.tasks import Answer, SpanQAExample
from xfer.core.textfile import read_text


class _Locator:
    """Finds the line of a JSON string value in the raw text (1 if it cannot be found)."""

    def __init__(self, text: str):
        self.text = text

    def line(self, *values: Any) -> int:
        for value in values:
            if not isinstance(value, str) or not value:
                continue
            for needle in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
                position = self.text.find(needle)
                if position >= 0:
                    return self.text.count("\n", 0, position) + 1
        return 1


def _require(obj: Any, key: str, kind: type | tuple[type, ...], path: Path, line: int, where: str) -> Any:
    if not isinstance(obj, dict):
        raise DataError(path, line, f"{where}: expected a JSON object, found {type(obj).__name__}")
    if key not in obj:
        raise DataError(path, line, f"missing key in {where}", key=key)
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise DataError(path, line, f"{where}: expected {names}, found {type(value).__name__}", key=key)
    return value


def read_squad(path: Path, *, version: int) -> list[SpanQAExample]:
    """All questions of a SQuAD file in file order, with every gold answer.

    Checks: well-formed JSON, required keys and their types, unique question ids, each
    `answer_start` pointing at its answer text in the context, and `is_impossible` consistent
    with the answers (v2) or absent/false (v1, which has no unanswerable questions).
    `plausible_answers` of unanswerable v2 questions are not kept.
    """
    text = read_text(path)
    try:
        root = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(path, err.lineno, f"malformed JSON: {err.msg} (column {err.colno})") from None
    locate = _Locator(text)
    articles = _require(root, "data", list, path, 1, "top level")
    examples: list[SpanQAExample] = []
    seen: set[str] = set()
    for a, article in enumerate(articles):
        title = article.get("title", "") if isinstance(article, dict) else ""
        paragraphs = _require(article, "paragraphs", list, path, locate.line(title), f"data[{a}]")
        for p, paragraph in enumerate(paragraphs):
            where = f"data[{a}].paragraphs[{p}]"
            context = _require(paragraph, "context", str, path, locate.line(_first_qid(paragraph), title), where)
            qas = _require(paragraph, "qas", list, path, locate.line(context, title), where)
            for q, qa in enumerate(qas):
                examples.append(_question(qa, context, str(title), f"{where}.qas[{q}]", path, locate, version, seen))
    if not examples:
        raise DataError(path, 1, "no questions in file")
    return examples


def _first_qid(paragraph: Any) -> str | None:
    """The first question id of a paragraph: the best anchor to locate paragraph-level errors."""
    if isinstance(paragraph, dict) and isinstance(paragraph.get("qas"), list):
        for qa in paragraph["qas"]:
            if isinstance(qa, dict) and isinstance(qa.get("id"), str):
                return qa["id"]
    return None


def _question(
    qa: Any, context: str, title: str, where: str, path: Path, locate: _Locator, version: int, seen: set[str]
) -> SpanQAExample:
    hint = qa.get("question") if isinstance(qa, dict) else None
    qid = _require(qa, "id", str, path, locate.line(hint), where)
    line = locate.line(qid)
    where = f"question {qid!r}"
    if qid in seen:
        raise DataError(path, line, f"duplicate question id {qid!r}", key="id")
    seen.add(qid)
    question = _require(qa, "question", str, path, line, where)
    raw_answers = _require(qa, "answers", list, path, line, where)
    impossible = qa.get("is_impossible", False)
    if not isinstance(impossible, bool):
        raise DataError(path, line, f"{where}: expected true/false, found {impossible!r}", key="is_impossible")
    if version == 1 and impossible:
        raise DataError(path, line, f"{where} is unanswerable (is_impossible), which SQuAD 1.1 has not: use squad/v2")
    if impossible and raw_answers:
        raise DataError(path, line, f"{where} is_impossible but has {len(raw_answers)} answers", key="answers")
    if not impossible and not raw_answers:
        hint = " (set is_impossible: true for an unanswerable question)" if version == 2 else ""
        raise DataError(path, line, f"{where} has no answers{hint}", key="answers")
    answers = []
    for i, answer in enumerate(raw_answers):
        answer_where = f"{where}, answer {i}"
        answer_text = _require(answer, "text", str, path, line, answer_where)
        start = _require(answer, "answer_start", int, path, line, answer_where)
        found = context[start : start + len(answer_text)] if start >= 0 else None
        if found != answer_text:
            raise DataError(
                path,
                line,
                f"{answer_where}: answer_start {start} does not match the answer text {answer_text!r} "
                f"(the context there reads {found!r})",
                key="answer_start",
            )
        answers.append(Answer(text=answer_text, start=start))
    return SpanQAExample(
        id=qid, question=question, context=context, answers=tuple(answers), is_impossible=impossible, title=title
    )

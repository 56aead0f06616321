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

import itertools
import json
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xfer.core.errors import DataError
from xfer.core.tasks import Answer, SpanQAExample
from xfer.core.textfile import lone_surrogate, read_text

Line = Callable[[], int]
"""A line number computed only when an error is raised: searching the raw text is O(file size),
and doing it for every question (as this reader once did, eagerly) made reading the official
30 MB train-v1.1.json quadratic: about half an hour before training could start."""


class _QuestionId(str):
    """A question id to locate: `_Locator` looks for it as the value of an `"id"` key first. The
    id "3" of a file whose ids are numbers was found as the answer text "3" of an earlier question,
    and its errors (a duplicate id's two lines too) named that line."""


class _Locator:
    """Finds the line of a JSON string value in the raw text (1 if it cannot be found)."""

    def __init__(self, text: str):
        self.text = text

    def at(self, *values: Any) -> Line:
        """The line of the first of `values` found, searched for when called (on an error)."""
        return lambda: self.line(*values)

    def line(self, *values: Any, occurrence: int = 1) -> int:
        """The line of the `occurrence`-th appearance (1-based) of the first of `values` found
        (a `_QuestionId` as the value of "id" if it is so anywhere)."""
        for value in values:
            if not isinstance(value, str) or not value:
                continue
            prefixes = (r'"id"\s*:\s*', "") if isinstance(value, _QuestionId) else ("",)
            for prefix in prefixes:
                for needle in dict.fromkeys((json.dumps(value), json.dumps(value, ensure_ascii=False))):
                    found = re.compile(prefix + re.escape(needle)).finditer(self.text)
                    match = next(itertools.islice(found, occurrence - 1, None), None)
                    if match is not None:
                        return self.text.count("\n", 0, match.start()) + 1
        return 1


class _DuplicateKey(Exception):
    """Raised by `_no_duplicate_keys` while parsing; turned into a DataError by `read_squad`."""

    def __init__(self, key: str, anchors: list[str]):
        super().__init__(key)
        self.key, self.anchors = key, anchors  # string values of the object, to locate its line


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads` hook: a key twice in one object is an error. JSON parsers keep the last value
    silently, so `{"id": "a", ..., "id": "b"}` (a hand-merged file) lost a question's id or answers."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                # the question id first: it is the most distinctive string of a question
                anchors = [
                    _QuestionId(v) if k == "id" else v
                    for k, v in sorted(pairs, key=lambda kv: kv[0] != "id")
                    if isinstance(v, str)
                ]
                raise _DuplicateKey(key, anchors)
            seen.add(key)
    return obj


def _require(obj: Any, key: str, kind: type | tuple[type, ...], path: Path, line: Line, where: str) -> Any:
    if not isinstance(obj, dict):
        raise DataError(path, line(), f"{where}: expected a JSON object, found {type(obj).__name__}")
    if key not in obj:
        raise DataError(path, line(), f"missing key in {where}", key=key)
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise DataError(path, line(), f"{where}: expected {names}, found {type(value).__name__}", key=key)
    if isinstance(value, str) and (bad := lone_surrogate(value)):
        raise DataError(path, line(), f"{where}: {bad}", key=key)
    if isinstance(value, str) and "\x00" in value:
        # JSON's \u0000 escape: the text readers refuse a NUL byte, and the WordPiece normaliser deletes it,
        # gluing the words on either side ("Re\u0000eve" read as "Reeve"), and moving answer offsets
        raise DataError(
            path,
            line(),
            f"{where}: NUL character (\\u0000) at character {value.index(chr(0))}: a damaged file? (text holds none)",
            key=key,
        )
    return value


def _require_text(obj: Any, key: str, path: Path, line: Line, where: str) -> str:
    """A string field that must hold a word: an empty question id or answer text is a broken
    record (the official scorer silently drops empty v2 answers; an empty id cannot be keyed)."""
    value = _require(obj, key, str, path, line, where)
    if not value.strip():
        raise DataError(path, line(), f"{where}: empty {'answer text' if key == 'text' else key} {value!r}", key=key)
    return value


def read_squad(path: Path, *, version: int, blind: bool = False) -> list[SpanQAExample]:
    """All questions of a SQuAD file in file order, with every gold answer.

    `blind` (the test split): the file may be a blind test set, whose questions carry no gold
    (`answers` absent or empty, and no `is_impossible` key, as the official hidden test sets hold
    them): they are read as unlabelled questions (no answers, `is_impossible` False), to predict
    and write, never to score (`SquadTask.evaluate` refuses them). Such a question was refused as
    "has no answers", so a blind test set could not be predicted at all. A file is blind or
    labelled throughout: one mixing both (a labelled question that lost its answers) is an error.
    `is_impossible: false` with no answers stays an error in every split.

    Checks: well-formed JSON without duplicate keys or lone surrogate escapes, required keys and
    their types, unique non-empty question ids, non-empty answer texts, each `answer_start`
    pointing at its answer text in the context, and `is_impossible` consistent with the answers
    (v2) or absent/false (v1, which has no unanswerable questions). Empty question texts are
    kept with a warning (`_warn_empty_questions`).
    `plausible_answers` of unanswerable v2 questions are not kept.
    """
    text = read_text(path)
    locate = _Locator(text)
    try:
        root = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as err:
        hint = ""
        if err.msg == "Extra data" and err.colno == 1:  # a second value at the start of a line
            hint = (
                ": a second JSON value starts here: JSON Lines (one record per line, as Hugging Face datasets' "
                f"to_json writes) or files concatenated? {_LAYOUT}"
            )
        raise DataError(path, err.lineno, f"malformed JSON: {err.msg} (column {err.colno}){hint}") from None
    except _DuplicateKey as dup:
        raise DataError(
            path,
            locate.line(*dup.anchors),
            f"key {dup.key!r} twice in one JSON object (a JSON reader would keep only the last value)",
            key=dup.key,
        ) from None
    except ValueError as err:  # an integer literal of more than 4300 digits (Python's int_max_str_digits)
        raise DataError(path, 0, f"malformed JSON: {err}") from None
    except RecursionError:
        raise DataError(path, 0, "malformed JSON: arrays or objects nested too deeply") from None
    _not_an_array(root, path, locate)
    _not_flat(root, "data", path, locate, "top level")
    articles = _require(root, "data", list, path, lambda: 1, "top level")
    examples: list[SpanQAExample] = []
    seen: set[str] = set()
    for a, article in enumerate(articles):
        title = article.get("title", "") if isinstance(article, dict) else ""
        _not_flat(article, "paragraphs", path, locate, f"data[{a}]")
        paragraphs = _require(article, "paragraphs", list, path, locate.at(title), f"data[{a}]")
        if "title" in article:  # optional, but a title of null or 3 became the text 'None' or '3'
            title = _require(
                article,
                "title",
                str,
                path,
                locate.at(_first_qid(paragraphs[0]) if paragraphs else None),
                f"data[{a}]",
            )
        for p, paragraph in enumerate(paragraphs):
            where = f"data[{a}].paragraphs[{p}]"
            context = _require(paragraph, "context", str, path, locate.at(_first_qid(paragraph), title), where)
            qas = _require(paragraph, "qas", list, path, locate.at(context, title), where)
            for q, qa in enumerate(qas):
                examples.append(_question(qa, context, title, f"{where}.qas[{q}]", path, locate, version, seen, blind))
    if not examples:
        raise DataError(path, 1, "no questions in file")
    _warn_empty_questions(path, locate, examples)
    unlabelled = [example.id for example in examples if not example.answers and not example.is_impossible]
    labelled = next((example.id for example in examples if example.answers or example.is_impossible), None)
    if unlabelled and labelled is not None:
        # The Task contract refuses a split mixing both later, as a plugin's fault and without a line;
        # the likely cause is a labelled test file with a question that lost its answers.
        raise DataError(
            path,
            locate.line(_QuestionId(unlabelled[0])),
            f"question {unlabelled[0]!r} has no answers and no is_impossible (a blind test question) but question "
            f"{labelled!r} is labelled: a test file is blind or labelled throughout "
            f"({len(unlabelled)} of {len(examples)} questions without gold)",
            key="answers",
        )
    if version == 2 and labelled is not None and not any(example.is_impossible for example in examples):
        _warn_no_unanswerable(path, root.get("version"), len(examples))
    return examples


def _warn_no_unanswerable(path: Path, file_version: Any, count: int) -> None:
    """A warning that a file read by squad/v2 has no unanswerable question: a SQuAD 1.1 file
    (`train-v1.1.json` given to squad/v2) was read without a word, and then trained a model that
    never sees "no answer" while its null score may still answer "" (0 on every such question),
    under the v2 metric names (`exact`, not `exact_match`): numbers that compare with neither
    SQuAD 1.1 nor 2.0 results. A warning, not an error: the v2 scores of such a file are well
    defined, and a small file of one's own may simply have no unanswerable question."""
    said = f" and its version field says {file_version!r}" if isinstance(file_version, str) else ""
    warnings.warn(
        f"{path}: none of its {count} questions is unanswerable (is_impossible){said}: a SQuAD 1.1 file? "
        "squad/v1 scores SQuAD 1.1 (exact_match, f1, never a no-answer)",
        stacklevel=3,
    )


def _warn_empty_questions(path: Path, locate: _Locator, examples: list[SpanQAExample]) -> None:
    """A warning (count, first id and its line) for questions whose text is empty or only
    whitespace. They were read without a word: the model then sees `[CLS] [SEP] context` and
    answers from the context alone, a dev or test score measuring no question. They are kept, not
    refused, as the GLUE readers keep QQP's empty sentences: the official files are crowd-sourced,
    and no copy was at hand to prove them free of such a record (the shared data has no SQuAD),
    which must not make an official file unreadable; the official scorer scores it like any other."""
    empty = [example.id for example in examples if not example.question.strip()]
    if empty:
        line = locate.line(_QuestionId(empty[0]))
        warnings.warn(
            f"{path}:{line}: {len(empty)} of {len(examples)} question(s) have an empty or whitespace-only question "
            f"text (first {empty[0]!r}); kept, answered from the context alone",
            stacklevel=3,
        )


_LAYOUT = 'squad tasks read the official SQuAD JSON: {"data": [{"paragraphs": [{"context": ..., "qas": [...]}]}]}'


def _not_flat(obj: Any, key: str, path: Path, locate: _Locator, where: str) -> None:
    """A DataError saying so when `obj`, lacking `key`, is one flat question record
    (`id`/`context`/`question`/`answers` side by side, as Hugging Face datasets hold SQuAD and
    export it): "missing key data" or "paragraphs" alone sent the user to look for a key in a
    file whose layout is the problem."""
    if isinstance(obj, dict) and key not in obj and "question" in obj and "context" in obj:
        qid = obj.get("id")
        raise DataError(
            path,
            locate.line(_QuestionId(qid)) if isinstance(qid, str) else 1,
            f"missing key in {where}: a flat question record (Hugging Face layout)? {_LAYOUT}",
            key=key,
        )


def _not_an_array(root: Any, path: Path, locate: _Locator) -> None:
    """A DataError naming the layout when the file is a JSON array of flat question records (what
    `Dataset.to_json(..., lines=False)` and pandas' `to_json(orient="records")` write) or of SQuAD
    articles (the `data` array saved alone). Both were "top level: expected a JSON object, found
    list", which named neither the layout nor the missing `data` key: `_not_flat` only knew a flat
    record as the top-level object."""
    if not isinstance(root, list):
        return
    first = next((item for item in root if isinstance(item, dict)), None)
    if first is not None and "question" in first and "context" in first:
        qid = first.get("id")
        what = f"flat question records (Hugging Face or pandas records layout)? {_LAYOUT}"
        line = locate.line(_QuestionId(qid)) if isinstance(qid, str) else 1
    elif first is not None and "paragraphs" in first:
        what = 'SQuAD articles: the "data" array saved alone? Wrap it: {"version": ..., "data": [...]}'
        line = 1
    else:
        return  # `_require` says "expected a JSON object, found list"
    raise DataError(path, line, f"top level: expected a JSON object, found a JSON array of {what}", key="data")


def _first_qid(paragraph: Any) -> str | None:
    """The first question id of a paragraph: the best anchor to locate paragraph-level errors."""
    if isinstance(paragraph, dict) and isinstance(paragraph.get("qas"), list):
        for qa in paragraph["qas"]:
            if isinstance(qa, dict) and isinstance(qa.get("id"), str):
                return _QuestionId(qa["id"])
    return None


def _question(
    qa: Any,
    context: str,
    title: str,
    where: str,
    path: Path,
    locate: _Locator,
    version: int,
    seen: set[str],
    blind: bool = False,
) -> SpanQAExample:
    hint = qa.get("question") if isinstance(qa, dict) else None
    qid = _require_text(qa, "id", path, locate.at(hint), where)
    line = locate.at(_QuestionId(qid))
    where = f"question {qid!r}"
    if qid in seen:  # the line of the repeat (the id's second appearance), naming the first
        first, again = locate.line(_QuestionId(qid)), locate.line(_QuestionId(qid), occurrence=2)
        raise DataError(path, again, f"duplicate question id {qid!r} (first on line {first})", key="id")
    seen.add(qid)
    question = _require(qa, "question", str, path, line, where)
    if blind and isinstance(qa, dict) and "is_impossible" not in qa and not qa.get("answers", []):
        # A blind test question (no gold at all): unlabelled, predicted and written, never scored.
        if "answers" in qa:
            _require(qa, "answers", list, path, line, where)  # "answers": null or "" is a broken record
        return SpanQAExample(id=qid, question=question, context=context, answers=(), is_impossible=False, title=title)
    raw_answers = _require(qa, "answers", list, path, line, where)
    impossible = qa.get("is_impossible", False)
    if not isinstance(impossible, bool):
        raise DataError(path, line(), f"{where}: expected true/false, found {impossible!r}", key="is_impossible")
    if version == 1 and impossible:
        raise DataError(path, line(), f"{where} is unanswerable (is_impossible), which SQuAD 1.1 has not: use squad/v2")
    if impossible and raw_answers:
        raise DataError(path, line(), f"{where} is_impossible but has {len(raw_answers)} answers", key="answers")
    if not impossible and not raw_answers:
        hint = " (set is_impossible: true for an unanswerable question)" if version == 2 else ""
        if not blind:
            hint += "; only a test file may be a blind test set, without answers"
        elif "is_impossible" in qa:
            hint += "; a blind test question has no is_impossible key"
        raise DataError(path, line(), f"{where} has no answers{hint}", key="answers")
    answers = []
    for i, answer in enumerate(raw_answers):
        answer_where = f"{where}, answer {i}"
        answer_text = _require_text(answer, "text", path, line, answer_where)
        start = _require(answer, "answer_start", int, path, line, answer_where)
        if start < 0 or context[start : start + len(answer_text)] != answer_text:
            raise DataError(
                path,
                line(),
                f"{answer_where}: answer_start {start} does not match the answer text {answer_text!r} "
                f"({_misplaced(context, answer_text, start)})",
                key="answer_start",
            )
        answers.append(Answer(text=answer_text, start=start))
    return SpanQAExample(
        id=qid, question=question, context=context, answers=tuple(answers), is_impossible=impossible, title=title
    )


def _misplaced(context: str, text: str, start: int) -> str:
    """What the context holds at a wrong `answer_start`, and where `text` is nearest to it. A start
    outside the context was reported as "the context there reads None" (or ''), and an offset off
    by a few characters (a context stripped or edited after the offsets were computed) left the
    user to search the context for the answer."""
    if not 0 <= start < len(context):
        there = f"outside the context, which has {len(context)} characters"
    else:
        there = f"the context there reads {context[start : start + len(text)]!r}"
    found, position = None, context.find(text)
    while position >= 0:
        if found is None or abs(position - start) < abs(found - start):
            found = position
        position = context.find(text, position + 1)
    if found is None:  # e.g. other whitespace or quotes than the context's
        return f"{there}; the answer text is nowhere in the context"
    return f"{there}; the answer text is at character {found}"

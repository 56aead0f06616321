"""n-best re-ranking with pseudo-log-likelihoods (thesis 5.4.5): argmax_x f(x | s) + λ·PLL(x).

Torch-free: it takes the PLLs as numbers, so any scorer (or a test) can feed it.

Input: JSONL, one object per source sentence (blank lines are skipped):

    {"id": "utt-17",                          # optional (default: the line number); unique per set
     "hypotheses": [{"text": "the cat sat", "score": -4.21},   # score: the base system's f(x | s),
                    {"text": "the cat sad", "score": -4.35}],  #   higher is better (a log-prob)
     "reference": "the cat sat"}               # needed in the dev file; optional in the test file

When several files form one set (the `electra.score` stage's `nbest_dev: [a.jsonl, b.jsonl]`),
ids must be unique across them, or the re-ranked output could not tell their lists apart: a list
without an id gets "<file>:<line>" instead of its line number (<file>: its path relative to the
files' common folder), and an explicit id found in two files is an error naming both (`merge_nbest`).

Other keys of a hypothesis (e.g. "am_score") are carried to the output unchanged. A hypothesis
may not carry keys the output writes ("pll", "total", "rank_before"). A key given twice in an
object, and NaN, Infinity or a lone surrogate escape in a text, reference, id or carried key
(`unwritable`), are refused too: the first would drop a value silently, the others crashed the
tokenizer or the writer after the scoring. Errors name file and line.

Choosing λ: every value of the grid (default 0, 0.05, ..., 1.0: the thesis's grid plus 0, so that
re-ranking never makes dev worse than the base system) is tried on the dev file; the best dev
metric wins, ties go to the smallest λ. The metric is corpus BLEU (sacrebleu, detokenised,
13a tokenisation, one reference; higher is better, its signature is recorded) or WER (word edit
distance over whitespace-split words, summed over the corpus, divided by the reference words, in
percent; case-sensitive; lower is better). Within a list, equal totals keep the list's order
(the earlier hypothesis wins), so "before" (λ = 0) is the base system's argmax, not necessarily
the first hypothesis. For WER the oracle (the best hypothesis of each list) is reported too.
When every λ gives the same dev metric, the report says λ was a tie-break, not a choice (corpus
BLEU is 0 at every λ when no 4-gram matches); when the chosen λ is the grid's largest value (or
its smallest, above 0), it says the best λ may lie beyond the grid. Dev references must have a
word for BLEU as for WER (against none, BLEU is 0 whatever is picked), and a test file may not be
a dev file.

A PLL is a sum over tokens, so it favours short hypotheses (each token adds a negative term); λ
chosen on dev is what balances that against the base score. λ is never negative: a negative λ
would reward hypotheses the model finds unlikely. A PLL that is not a finite number (a diverged
or corrupt checkpoint gives NaN) is an error naming the list and hypothesis: with NaN every total
is NaN, no comparison is true, and the first hypothesis of every list would win silently. An empty hypothesis is an error
naming its file and line unless empty texts are scored 0 (`empty: zero` / `--empty zero`): that
is the highest PLL possible, so only use it when the base score already penalises empty output.

Output per list: the hypotheses sorted by total = score + λ·PLL (best first), each with its
"pll", "total" and "rank_before" (its 0-based rank under the base score), and "best" (text).

Test lists without references: the metric is computed only when every list has its reference.
When some lack one, the summary says how many have one and that the metric is skipped, rather
than computing it on the subset: a corpus metric on part of the test set is not comparable with
the full set's or with dev's, and would be easy to report as if it were the test result.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xfer.core.errors import DataError, UserError
from xfer.core.textfile import BOM_INSIDE, lone_surrogate, read_text, split_lines

METRICS = ("bleu", "wer")
DEFAULT_LAMBDAS: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(21))
_OUTPUT_KEYS = ("pll", "total", "rank_before")


@dataclass(frozen=True)
class Hypothesis:
    text: str
    score: float
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NBestList:
    id: Any
    hypotheses: tuple[Hypothesis, ...]
    reference: str | None
    path: str
    line: int
    default_id: bool = False  # no "id" in the file: `id` is the line number


# --- reading ------------------------------------------------------------------------------------


def read_nbest(path: str | Path, need_reference: bool = False) -> list[NBestList]:
    """The n-best lists of a JSONL file, validated (see the module doc for the schema)."""
    path = Path(path)
    lists: list[NBestList] = []
    seen: dict[Any, NBestList] = {}
    rows = split_lines(path, read_text(path))  # a stray CR (CR-only line endings) is an error naming its line
    for number, raw in enumerate(rows, start=1):
        if not raw.strip():
            continue
        entry = _entry(json_object(raw, path, number, rows), path, number, need_reference)
        key = json.dumps(entry.id, sort_keys=True)
        first = seen.get(key)
        if first is not None:
            raise DataError(path, number, _duplicate_id(entry, first), key="id")
        seen[key] = entry
        lists.append(entry)
    if not lists:
        raise DataError(path, 0, "no n-best lists")
    return lists


def _duplicate_id(entry: NBestList, first: NBestList) -> str:
    """The message for two lists of one file with one id. A list without an id has its line number
    as id, which an explicit integer id of another list can equal: "duplicate id 2" on a line that
    gives no id said nothing of where the 2 came from."""
    if not (entry.default_id or first.default_id):
        return f"duplicate id {entry.id!r} (first on line {first.line})"
    implicit, explicit = (entry, first) if entry.default_id else (first, entry)
    return (
        f"duplicate id {entry.id!r}: line {implicit.line} has no id, so its line number is its id, and line "
        f"{explicit.line} gives that id explicitly (give every list an id, or none)"
    )


def merge_nbest(per_file: Sequence[Sequence[NBestList]]) -> list[NBestList]:
    """The lists of several n-best files (each as `read_nbest` gives it) as one set with unique ids.

    `read_nbest` checks ids within a file only, and a list without an id defaults to its line
    number, so two files' lists collided in the re-ranked output (line 1 of each was id 1). With
    several files a default id becomes "<file>:<line>", the file named relative to the files'
    common folder (distinct files, distinct names: unique by construction). An explicit id in two
    files is refused, naming both: qualifying it would change ids the user chose and must match
    their other data. One file: returned as it is.
    """
    if len(per_file) <= 1:
        return [nbest for lists in per_file for nbest in lists]
    paths = [Path(lists[0].path) for lists in per_file if lists]
    resolved = [p.resolve() for p in paths]
    for index, path in enumerate(resolved):
        if path in resolved[:index]:
            raise DataError(paths[index], 0, "given twice in one set of n-best files: its lists would count twice")
    common = os.path.commonpath([str(p.parent) for p in resolved])
    labels = {str(p): Path(os.path.relpath(r, common)).as_posix() for p, r in zip(paths, resolved, strict=True)}
    merged: list[NBestList] = []
    seen: dict[str, NBestList] = {}
    for lists in per_file:
        for nbest in lists:
            if nbest.default_id:
                nbest = dataclasses.replace(nbest, id=f"{labels[nbest.path]}:{nbest.line}")
            key = json.dumps(nbest.id, sort_keys=True)
            first = seen.get(key)
            if first is not None:
                raise DataError(nbest.path, nbest.line, _merged_duplicate(nbest, first), key="id")
            seen[key] = nbest
            merged.append(nbest)
    return merged


def check_held_out(dev: Sequence[str | Path], test: Sequence[str | Path]) -> None:
    """Refuse a test n-best file that is also a dev file (the same file by path, link or glob).

    Why: λ is chosen on the dev lists, so a test metric computed on them is the dev result again,
    reported as held out (`nbest_test: dev.jsonl`, or a glob matching both, was accepted silently)."""
    seen: dict[tuple[int, int], Path] = {}
    for path in map(Path, dev):
        try:
            stat = path.stat()
        except OSError:
            continue  # reported, with its path, when the file is read
        seen.setdefault((stat.st_dev, stat.st_ino), path)
    for path in map(Path, test):
        try:
            stat = path.stat()
        except OSError:
            continue
        first = seen.get((stat.st_dev, stat.st_ino))
        if first is not None:
            also = "" if first == path else f" (as {first})"
            raise DataError(
                path,
                0,
                f"is a dev file too{also}: λ is chosen on the dev lists, so their test result would not be held "
                "out; give the test set lists of its own",
                key="nbest_test",
            )


def _merged_duplicate(entry: NBestList, first: NBestList) -> str:
    """The message for two lists of a merged set with one id. A default id "<file>:<line>" can
    equal an explicit id of another file: "a.jsonl line 2 has it too" was said of a line that
    gives no id at all."""
    unique = "ids must be unique across the n-best files of one set, or their re-ranked lists cannot be told apart"
    if not (entry.default_id or first.default_id):
        return f"duplicate id {entry.id!r}: {first.path} line {first.line} has it too ({unique})"
    implicit, explicit = (entry, first) if entry.default_id else (first, entry)
    return (
        f"duplicate id {entry.id!r}: {implicit.path} line {implicit.line} gives no id, so its id is the default "
        f"<file>:<line>, and {explicit.path} line {explicit.line} gives that id explicitly ({unique}: give "
        "every list an id, or another one)"
    )


class _DuplicateKey(Exception):
    """Raised by `_unique_keys` (inside `json.loads`) with the repeated key."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's pairs as a dict, refusing a key given twice: `json.loads` keeps the last value
    silently, so `{"text": "a", "text": "b"}` scored "b" and dropped "a" without a word."""
    value: dict[str, Any] = {}
    for key, item in pairs:
        if key in value:
            raise _DuplicateKey(key)
        value[key] = item
    return value


def json_object(raw: str, path: Path, number: int, rows: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON object on line `number` of `path`; not JSON, not an object or a key given twice
    (in any nested object too) is a DataError naming the line. `json.loads` reports some invalid
    input as ValueError (an integer of 4300+ digits) or RecursionError (nesting too deep), not as
    JSONDecodeError: those were bare tracebacks. `rows`, the file's lines, let the message say when
    the file is one JSON document rather than JSON lines."""
    try:
        value = json.loads(raw, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        if raw[error.pos : error.pos + 1] == "\ufeff":
            raise DataError(path, number, _bom(raw, error.pos, error.colno)) from None
        raise DataError(path, number, f"not valid JSON: {error.msg} (column {error.colno}){_document(rows)}") from None
    except _DuplicateKey as error:
        raise DataError(path, number, f"key {error.args[0]!r} given twice (JSON keeps only the last value)") from None
    except ValueError as error:  # an integer literal of more than 4300 digits (Python's int_max_str_digits)
        raise DataError(path, number, f"not valid JSON: {error}") from None
    except RecursionError:
        raise DataError(path, number, "not valid JSON: arrays or objects nested too deeply") from None
    if not isinstance(value, dict):
        raise DataError(path, number, f"expected a JSON object, got {type(value).__name__}")
    return value


def _bom(raw: str, position: int, column: int) -> str:
    """The message for a byte-order mark where JSON fails on it: what `cat a.jsonl b.jsonl` leaves of
    b's BOM (`read_text` drops only the file's own). `json.loads` said "Unexpected UTF-8 BOM (decode
    using utf-8-sig)" at the start of a line, advice for a program that does not apply to a BOM
    inside a file, and "Extra data" when a's last line had no newline, which named no BOM at all."""
    before = raw[:position].rstrip()
    if not before:
        return BOM_INSIDE
    if before.endswith("}"):
        return (
            f"byte-order mark (U+FEFF) at column {column}, after a complete object: concatenated files, "
            "the first without a final newline? Remove it and start a new line there"
        )
    return f"byte-order mark (U+FEFF) at column {column}: not valid in JSON outside a string; remove it"


def _document(rows: Sequence[str]) -> str:
    """A hint when the lines together are one JSON document (a pretty-printed list or object, often
    named .json): "Expecting value (column 2)" on its "[" said nothing of what was wrong."""
    if len(rows) < 2:
        return ""
    try:
        json.loads("\n".join(rows))
    except (ValueError, RecursionError):
        return ""
    return ": the file is one JSON document over several lines, not JSON lines (one JSON object per line)"


def unwritable(value: Any) -> str | None:
    """Why a parsed JSON value cannot be written back as JSON (None when it can).

    `json.loads` accepts NaN, Infinity and 1e400 (read as inf), and `\\ud800` escapes (a lone
    surrogate). A value carried to the output (an id, a hypothesis's extra keys, a reference)
    that holds one made the writer crash with a bare ValueError or UnicodeEncodeError after the
    whole scoring, with other outputs already written: it is refused when the file is read."""
    stack = [value]  # not recursive: JSON nested a few hundred deep would overflow Python's stack
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f"{item} is not a finite number (JSON has no NaN or Infinity; a literal beyond 1e308 reads as inf)"
        if isinstance(item, str) and (problem := lone_surrogate(item)) is not None:
            return problem
        if isinstance(item, dict):
            stack += [*item, *item.values()]
        elif isinstance(item, list):
            stack += item
    return None


def _entry(value: dict[str, Any], path: Path, number: int, need_reference: bool) -> NBestList:
    unknown = sorted(set(value) - {"id", "hypotheses", "reference"})
    if unknown:
        raise DataError(path, number, f"unknown key(s) {', '.join(unknown)} (expected id, hypotheses, reference)")
    identifier = value.get("id", number)
    if not isinstance(identifier, (str, int)) or isinstance(identifier, bool):
        raise DataError(path, number, f"must be a string or an integer, got {type(identifier).__name__}", key="id")
    if (problem := unwritable(identifier)) is not None:
        raise DataError(path, number, problem, key="id")
    reference = value.get("reference")
    if reference is None and need_reference:
        raise DataError(path, number, "missing: the dev file needs a reference to choose λ", key="reference")
    if reference is not None and not isinstance(reference, str):
        raise DataError(path, number, f"must be a string, got {type(reference).__name__}", key="reference")
    if (problem := unwritable(reference) or bom_in_text(reference)) is not None:
        raise DataError(path, number, problem, key="reference")
    raw = value.get("hypotheses")
    if not isinstance(raw, list) or not raw:
        raise DataError(path, number, "must be a non-empty list of {text, score} objects", key="hypotheses")
    hypotheses = []
    for i, item in enumerate(raw):
        where = f"hypotheses[{i}]"
        if not isinstance(item, dict):
            raise DataError(path, number, f"expected an object, got {type(item).__name__}", key=where)
        missing = [key for key in ("text", "score") if key not in item]
        if missing:
            raise DataError(path, number, f"missing {' and '.join(repr(k) for k in missing)}", key=where)
        text, score = item["text"], item["score"]
        if not isinstance(text, str):
            raise DataError(path, number, f"'text' must be a string, got {type(text).__name__}", key=where)
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not _finite(score):
            raise DataError(path, number, f"'score' must be a finite number, got {score!r}", key=where)
        clash = [k for k in _OUTPUT_KEYS if k in item]
        if clash:
            raise DataError(path, number, f"{', '.join(clash)}: reserved for the output", key=where)
        extra = {k: v for k, v in item.items() if k not in ("text", "score")}
        # the text goes to the tokenizer (a bare TypeError on a lone surrogate), the extras to the output
        for name, item_value in (("text", text), *extra.items()):
            if (problem := unwritable(item_value) or unwritable(name)) is not None:
                raise DataError(path, number, problem, key=f"{where}.{name}")
        if (problem := bom_in_text(text)) is not None:
            raise DataError(path, number, problem, key=f"{where}.text")
        hypotheses.append(Hypothesis(text, float(score), extra))
    return NBestList(identifier, tuple(hypotheses), reference, str(path), number, "id" not in value)


def bom_in_text(text: Any) -> str | None:
    """The message for a byte-order mark (U+FEFF) in a hypothesis or reference text, or None. It is
    what a generator leaves when it read its source with the BOM (`open(f).read()` keeps it on the
    first line) or read concatenated files. The tokenizer drops it, so "\\ufeffthe" was scored as
    "the" (and "a\\ufeffb" as one word "ab"), but BLEU and WER counted "\\ufeffthe" as a word no
    other text has: a silently wrong metric and λ."""
    if not isinstance(text, str) or (column := text.find("\ufeff")) < 0:
        return None
    return (
        f"byte-order mark (U+FEFF) at character {column}: left by a file read with its BOM, or by "
        "concatenated files? Remove it (the metric would count it as part of a word)"
    )


def _finite(number: int | float) -> bool:
    """Whether a JSON number is a finite float: an integer literal of 309+ digits does not fit one
    (math.isfinite raised OverflowError on it)."""
    try:
        return math.isfinite(number)
    except OverflowError:
        return False


# --- metrics ------------------------------------------------------------------------------------


def word_errors(reference: str, hypothesis: str) -> int:
    """Levenshtein distance between the whitespace-split words (substitutions, insertions, deletions)."""
    ref, hyp = reference.split(), hypothesis.split()
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        current = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h))
        previous = current
    return previous[-1]


def wer(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Corpus word error rate in percent: total word edits / total reference words."""
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    words = sum(len(r.split()) for r in references)
    if words == 0:
        raise UserError("WER is undefined: the references have no words")
    return 100.0 * sum(word_errors(r, h) for r, h in zip(references, hypotheses, strict=True)) / words


def corpus_metric(metric: str, references: Sequence[str], hypotheses: Sequence[str]) -> tuple[float, str | None]:
    """(value in percent, sacrebleu signature or None)."""
    if metric == "wer":
        return wer(references, hypotheses), None
    if metric == "bleu":
        from xfer.core.metrics import corpus_bleu

        result = corpus_bleu(list(references), list(hypotheses))
        return result.score, result.signature
    raise UserError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")


def better(metric: str, a: float, b: float) -> bool:
    """Whether `a` is strictly better than `b` for `metric`."""
    return a < b if metric == "wer" else a > b


# --- re-ranking ---------------------------------------------------------------------------------


def _check_aligned(lists: Sequence[NBestList], plls: Sequence[Sequence[float]]) -> None:
    if len(lists) != len(plls) or any(len(n.hypotheses) != len(p) for n, p in zip(lists, plls, strict=False)):
        raise ValueError("plls must hold one value per hypothesis of every list")


NON_FINITE = "the checkpoint gives non-finite scores (diverged or corrupt weights?)"


def check_plls(lists: Sequence[NBestList], plls: Sequence[Sequence[float]]) -> None:
    """Refuse a PLL that is not a finite number, naming file, line, list id and hypothesis.

    Why: a NaN total compares false with everything, so `max` keeps the first hypothesis of every
    list, at every λ (even λ = 0, as base + 0·NaN is NaN): the metric looks plausible, or perfect,
    and the output JSON holds NaN, which is not JSON.
    """
    _check_aligned(lists, plls)
    for nbest, values in zip(lists, plls, strict=True):
        for index, value in enumerate(values):
            if not math.isfinite(value):
                text = nbest.hypotheses[index].text
                raise DataError(
                    nbest.path,
                    nbest.line,
                    f"list id {nbest.id!r}, hypothesis {index} ({text[:60]!r}): the PLL is {value}: {NON_FINITE}",
                    key=f"hypotheses[{index}]",
                )


def _totals(nbest: NBestList, values: Sequence[float], lam: float) -> list[float]:
    """score + lam * pll of every hypothesis of `nbest`, each a finite number.

    Scores, PLLs and λ are each finite, but a large λ (`--lambdas 1e308`) overflowed the product
    to -inf: every hypothesis tied at -inf, the first one won (not the base system's best), and the
    output writer crashed with a bare ValueError after the whole scoring."""
    totals = [h.score + lam * p for h, p in zip(nbest.hypotheses, values, strict=True)]
    bad = next((i for i, total in enumerate(totals) if not math.isfinite(total)), None)
    if bad is not None:
        raise UserError(
            f"λ = {lam:g}: score + λ·PLL of hypothesis {bad} of list {nbest.id!r} ({nbest.path}:{nbest.line}) is "
            f"{totals[bad]} (score {nbest.hypotheses[bad].score:g}, PLL {values[bad]:g}): λ is too large for these "
            "scores; use a smaller λ"
        )
    return totals


def best_indices(lists: Sequence[NBestList], plls: Sequence[Sequence[float]], lam: float) -> list[int]:
    """The index of the best hypothesis of every list under score + lam * pll (ties: the earliest)."""
    _check_aligned(lists, plls)
    chosen = []
    for nbest, values in zip(lists, plls, strict=True):
        totals = _totals(nbest, values, lam)
        chosen.append(max(range(len(totals)), key=lambda i: (totals[i], -i)))
    return chosen


def evaluate(metric: str, lists: Sequence[NBestList], plls: Sequence[Sequence[float]], lam: float) -> float:
    references = _references(lists, metric)
    picks = best_indices(lists, plls, lam)
    return corpus_metric(metric, references, [n.hypotheses[i].text for n, i in zip(lists, picks, strict=True)])[0]


def _references(lists: Sequence[NBestList], metric: str = "") -> list[str]:
    """Every list's reference; for WER at least one must have a word. `wer` said only "WER is
    undefined: the references have no words", not whether the dev or the test file was at fault."""
    missing = next((n for n in lists if n.reference is None), None)
    if missing is not None:
        raise DataError(missing.path, missing.line, "missing: needed to compute the metric", key="reference")
    if metric == "wer" and lists and not any(n.reference.split() for n in lists):  # type: ignore[union-attr]
        files = sorted({n.path for n in lists})
        raise DataError(
            ", ".join(files), 0, f"WER is undefined: none of the {len(lists)} references has a word", key="reference"
        )
    return [n.reference for n in lists]  # type: ignore[misc]


def check_references(metric: str, lists: Sequence[NBestList]) -> None:
    """Before any scoring: the references of `lists` can give `metric` (when all are there; a test
    set without some has its metric skipped, see `summary`). References without a single word left
    WER undefined, and that was found after the whole n-best scoring."""
    if all(n.reference is not None for n in lists):
        _references(lists, metric)


def check_dev_references(metric: str, lists: Sequence[NBestList]) -> None:
    """`check_references` for the lists λ is chosen on: for BLEU too, at least one reference must
    have a word. sacrebleu gives BLEU 0 against references without a word, whatever the hypotheses:
    every λ of the grid tied, and λ = 0 was reported as "chosen on dev" (BLEU 0.00 before and
    after) when nothing had been chosen. (A test set's BLEU against them is reported: 0.)"""
    check_references(metric, lists)
    if metric == "bleu" and lists and not any((n.reference or "").split() for n in lists):
        files = sorted({n.path for n in lists})
        raise DataError(
            ", ".join(files),
            0,
            f"none of the {len(lists)} references has a word: BLEU against them is 0 whatever the hypotheses, so "
            "every λ ties and none can be chosen on these lists",
            key="reference",
        )


def choose_lambda(
    metric: str,
    lists: Sequence[NBestList],
    plls: Sequence[Sequence[float]],
    grid: Sequence[float] = DEFAULT_LAMBDAS,
) -> tuple[float, list[tuple[float, float]]]:
    """(best λ on these lists, [(λ, metric)] for the whole grid); ties go to the smallest λ.

    Each λ is tried once, and -0.0 (`--lambdas -0`, YAML `-0.0`: not negative) counts as 0: it was
    reported as "λ = -0", and next to a 0 in the grid it was a second row of the same λ."""
    if not grid:
        raise UserError("the λ grid is empty")
    table = [(lam, evaluate(metric, lists, plls, lam)) for lam in sorted({float(lam) + 0.0 for lam in grid})]
    best_lam, best_value = table[0]
    for lam, value in table[1:]:
        if better(metric, value, best_value):
            best_lam, best_value = lam, value
    return best_lam, table


def oracle(lists: Sequence[NBestList]) -> float:
    """WER of the best hypothesis of each list (fewest word errors; the floor any re-ranker can reach)."""
    references = _references(lists, "wer")
    picks = [
        min((h.text for h in n.hypotheses), key=lambda t, r=r: word_errors(r, t))
        for n, r in zip(lists, references, strict=True)
    ]
    return wer(references, picks)


def reranked(lists: Sequence[NBestList], plls: Sequence[Sequence[float]], lam: float) -> list[dict[str, Any]]:
    """Output records: every list's hypotheses sorted by total (best first) with pll, total, rank_before."""
    _check_aligned(lists, plls)
    out = []
    for nbest, values in zip(lists, plls, strict=True):
        base_order = sorted(range(len(nbest.hypotheses)), key=lambda i: (-nbest.hypotheses[i].score, i))
        rank_before = {index: rank for rank, index in enumerate(base_order)}
        totals = _totals(nbest, values, lam)
        order = sorted(range(len(totals)), key=lambda i: (-totals[i], i))
        hypotheses = [
            {
                "text": nbest.hypotheses[i].text,
                "score": nbest.hypotheses[i].score,
                **nbest.hypotheses[i].extra,
                "pll": values[i],
                "total": totals[i],
                "rank_before": rank_before[i],
            }
            for i in order
        ]
        record: dict[str, Any] = {"id": nbest.id, "best": nbest.hypotheses[order[0]].text}
        if nbest.reference is not None:
            record["reference"] = nbest.reference
        record["hypotheses"] = hypotheses
        out.append(record)
    return out


def summary(metric: str, lists: Sequence[NBestList], plls: Sequence[Sequence[float]], lam: float) -> dict[str, Any]:
    """Metric before (λ = 0) and after (λ) when every list has a reference; else counts and a note
    saying how many have one (the metric is skipped, not computed on a subset: see the module doc)."""
    result: dict[str, Any] = {"lists": len(lists), "hypotheses": sum(len(n.hypotheses) for n in lists)}
    with_reference = sum(1 for n in lists if n.reference is not None)
    if with_reference == 0:
        return {**result, "references": 0, "note": "no references: metric not computed"}
    if with_reference < len(lists):
        note = (
            f"only {with_reference} of {len(lists)} lists have a reference: metric skipped "
            "(on a subset it would not be comparable with the whole set's)"
        )
        return {**result, "references": with_reference, "note": note}
    result |= {"before": evaluate(metric, lists, plls, 0.0), "after": evaluate(metric, lists, plls, lam)}
    if metric == "wer":
        result["oracle"] = oracle(lists)
    return result


@dataclass
class RerankResult:
    """λ chosen on dev, the grid's dev metrics, before/after summaries and the re-ranked records."""

    metric: str
    lam: float
    grid: list[tuple[float, float]]
    signature: str | None
    dev: dict[str, Any]
    test: dict[str, Any] | None
    dev_records: list[dict[str, Any]]
    test_records: list[dict[str, Any]] | None

    def report(self) -> dict[str, Any]:
        """What `report.json` holds."""
        out: dict[str, Any] = {"metric": self.metric, "lambda": self.lam}
        if self.signature:
            out["signature"] = self.signature
        out["dev"] = self.dev
        if self.test is not None:
            out["test"] = self.test
        out["grid"] = [{"lambda": lam, "dev": value} for lam, value in self.grid]
        if (note := self.tie_note() or self.edge_note()) is not None:
            out["note"] = note
        return out

    def edge_note(self) -> str | None:
        """What to say when the best dev metric is at an open edge of the grid (None otherwise).

        Why: the best dev metric at the grid's largest λ, or at its smallest when that is above 0,
        says only that the metric was best at the edge: the optimum may lie beyond the grid, and
        "λ = 1 chosen on dev" read as the optimum. (A best value the tie-break left to a smaller λ
        is not noted: a flat metric up to the edge, often at the oracle, is no sign of a better λ.)
        λ = 0 is a closed edge (λ is never negative, and 0 is the base system), so it is not noted;
        nor is a grid of one value, or a tie of the whole grid (λ is no choice at all: `tie_note`)."""
        if len(self.grid) < 2 or self.tie_note() is not None:
            return None
        name = "BLEU" if self.metric == "bleu" else "WER"
        smallest, largest = self.grid[0][0], self.grid[-1][0]
        if self.lam == largest:
            return (
                f"λ = {self.lam:g} is the largest value of the grid: dev {name} was still improving there, so a "
                f"larger λ may be better; extend the grid (lambdas / --lambdas) beyond {largest:g}"
            )
        if self.lam == smallest and self.lam > 0:
            return (
                f"λ = {self.lam:g} is the smallest value of the grid: a smaller λ (0 is the base system) may be "
                f"better; extend the grid (lambdas / --lambdas) below {smallest:g}"
            )
        return None

    def tie_note(self) -> str | None:
        """What to say when every λ of the grid gave the same dev metric (None otherwise).

        Why: λ then goes to the smallest value by the tie rule, and "λ = 0 chosen on dev" read as a
        finding (re-ranking does not help) when the metric could not tell the values apart. The
        common cause with BLEU: corpus BLEU is 0 when the hypotheses have no 4-gram (short segments),
        whatever is picked."""
        if len(self.grid) < 2 or len({value for _, value in self.grid}) != 1:
            return None
        name = "BLEU" if self.metric == "bleu" else "WER"
        value = self.grid[0][1]
        note = (
            f"every λ of the grid gave dev {name} {value:.2f}: λ = {self.lam:g} is the tie-break (the smallest), "
            "not a choice"
        )
        if self.metric == "bleu" and value == 0:
            note += (
                "; corpus BLEU is 0 whatever is picked when no 4-gram matches (segments under 4 words?): "
                "metric wer may suit these lists"
            )
        return note

    def markdown(self) -> str:
        """A report section: λ, and the metric before/after on dev and test."""
        name = "BLEU" if self.metric == "bleu" else "WER"
        rows = [
            f"| {split} | {s['lists']} | {_fmt(s.get('before'))} | {_fmt(s.get('after'))} |"
            for split, s in (("dev", self.dev), ("test", self.test))
            if s is not None
        ]
        text = (
            f"## n-best re-ranking\n\nλ = {self.lam:g} chosen on dev from {len(self.grid)} values "
            f"({'higher' if self.metric == 'bleu' else 'lower'} {name} is better).\n\n"
            f"| split | lists | {name} before | {name} after |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"
        )
        notes = [f"{split}: {s['note']}" for split, s in (("dev", self.dev), ("test", self.test)) if s and "note" in s]
        if (tie := self.tie_note() or self.edge_note()) is not None:
            notes.insert(0, f"dev: {tie}")
        if notes:  # what a "–" in the table means, and a λ that was no choice
            text += "\n" + "\n".join(notes) + "\n"
        if self.signature:
            text += f"\nsacrebleu: `{self.signature}`\n"
        return text


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def rerank_nbest(
    metric: str,
    dev: Sequence[NBestList],
    dev_plls: Sequence[Sequence[float]],
    test: Sequence[NBestList] | None = None,
    test_plls: Sequence[Sequence[float]] | None = None,
    grid: Sequence[float] = DEFAULT_LAMBDAS,
) -> RerankResult:
    """Choose λ on dev, then re-rank dev and (optionally) test with it."""
    if metric not in METRICS:
        raise UserError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")
    check_plls(dev, dev_plls)
    if test is not None:
        assert test_plls is not None
        check_plls(test, test_plls)
    check_dev_references(metric, dev)
    lam, table = choose_lambda(metric, dev, dev_plls, grid)
    references = _references(dev, metric)
    signature = corpus_metric(metric, references, [n.hypotheses[0].text for n in dev])[1]
    test_summary = test_records = None
    if test is not None:
        assert test_plls is not None
        test_summary, test_records = summary(metric, test, test_plls, lam), reranked(test, test_plls, lam)
    return RerankResult(
        metric,
        lam,
        table,
        signature,
        summary(metric, dev, dev_plls, lam),
        test_summary,
        reranked(dev, dev_plls, lam),
        test_records,
    )


_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)


def parse_grid(text: str) -> list[float]:
    """`"0,0.1,0.5"` -> [0.0, 0.1, 0.5] (finite numbers, not negative; for --lambdas; -0 is 0).

    Plain decimal numbers only: `float` also reads "0_5" as 5 and "١" (an Arabic digit) as 1, so a
    typo silently became another λ."""
    values = []
    for part in text.split(","):
        value: float | None
        try:
            value = float(part) + 0.0  # -0.0 + 0.0 is 0.0
        except ValueError:
            value = None
        if value is None or (math.isfinite(value) and not _DECIMAL.fullmatch(part.strip())):
            raise UserError(f"--lambdas: {part.strip()!r} is not a number")
        if not math.isfinite(value):
            raise UserError(f"--lambdas: {part.strip()!r} is not finite")
        if value < 0:
            raise UserError(
                f"--lambdas: {part.strip()!r} is negative (it would reward hypotheses the model finds unlikely)"
            )
        values.append(value)
    return values


def write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> None:
    """Write records atomically; allow_nan=False: NaN is not JSON, so a non-finite value that got past
    the checks is a crash here rather than a file that JSON readers reject."""
    from xfer.core.atomic import atomic_write_text

    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in records))

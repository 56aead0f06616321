"""Readers for delimited text files (GLUE's .tsv files and user TSV/CSV files).

Every malformed line raises `DataError` naming `file:line` (1-based, header included) so that a
user can open the file at the right place; nothing is skipped silently. GLUE's own files are
read with quoting disabled (fields verbatim, `"` included), exactly as the reference GLUE
loaders do: several GLUE sentences contain unbalanced quotes that CSV quoting would swallow.
"""

from __future__ import annotations

import csv
import io
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from xfer.core.errors import DataError
from xfer.core.tasks import SentenceExample
from xfer.core.textfile import BOM_INSIDE, read_text, split_lines

Column = int | str


@dataclass(frozen=True)
class Row:
    line: int  # 1-based line where the record starts
    fields: list[str]


def read_rows(path: Path, *, delimiter: str = "\t", quoting: bool = False) -> list[Row]:
    """All records of a delimited file, with their line numbers.

    Without quoting, a record is one physical line (`split_lines`: CRLF endings are fine, a CR
    elsewhere is an error) split on `delimiter`; with quoting, Python's csv module parses
    double-quoted fields. An empty line is an error (it is either a truncated record or a
    formatting accident), except after the last record: blank lines that end a file are dropped.
    """
    text = read_text(path)
    rows: list[Row] = []
    if not quoting:
        lines = split_lines(path, text)
        while lines and not lines[-1]:
            lines.pop()
        for number, line in enumerate(lines, start=1):
            if not line:
                raise DataError(path, number, "empty line (blank lines may only end the file)")
            rows.append(Row(number, line.split(delimiter)))
        return rows
    # Lines end at LF only (`newline="\n"`), as without quoting: with universal newlines a stray CR
    # in an unquoted field silently cut its record in two (one more example, every later id and
    # test prediction shifted), and a CR inside a quoted field shifted every later line number.
    reader = csv.reader(io.StringIO(text, newline="\n"), delimiter=delimiter, quotechar='"', strict=True)
    blank: list[int] = []
    while True:
        start = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as err:
            if "new-line character seen in unquoted field" in str(err):
                raise DataError(path, reader.line_num, CARRIAGE_RETURN_UNQUOTED) from None
            # Named at the record's first line: csv's `line_num` is where it gave up, which for a
            # quote never closed was the last line of the file, far from the quote to fix.
            end = reader.line_num
            where = f" (it starts here; csv gave up on line {end}: an unbalanced double quote?)" if end > start else ""
            raise DataError(path, start, f"malformed CSV record{where}: {err}") from None
        if not fields:
            blank.append(start)
            continue
        if blank:  # a blank line before this record
            raise DataError(path, blank[0], "empty line (blank lines may only end the file)")
        _check_bom(path, start, fields[0])
        rows.append(Row(start, fields))
    return rows


CARRIAGE_RETURN_UNQUOTED = (
    "carriage return (CR) inside an unquoted field: CR-only (classic Mac) line endings? "
    "Convert the file to LF or CRLF endings (a CR that belongs to the text must be inside a quoted field)"
)


def _check_bom(path: Path, line: int, text: str) -> None:
    """Refuse a byte-order mark that starts a record of a quoted file (csv cuts those records;
    `split_lines` refuses it in every other line reader): what `cat` leaves of concatenated files' BOMs. MRPC's train.tsv and
    dev.tsv joined for a final training reported "unknown label '\\ufeffQuality'" at dev's header
    line, and a glued BOM went silently into a glue/tsv id or text."""
    if text.startswith("\ufeff"):
        raise DataError(path, line, BOM_INSIDE)


def check_widths(path: Path, rows: Sequence[Row], width: int, what: str) -> None:
    """Every row must have `width` fields (`what` says where that number comes from)."""
    for row in rows:
        if len(row.fields) != width:
            raise DataError(path, row.line, f"expected {width} columns ({what}), found {len(row.fields)}")


def _check_header_width(path: Path, line: int, header: list[str], rows: Sequence[Row]) -> None:
    """Blame the header (at `line`) when every row agrees on a width the header lacks: a stray
    trailing delimiter on the header alone was reported as "expected 3 columns (as in the
    header), found 2" at line 2, a correct line, sending the user to the wrong place."""
    widths = {len(row.fields) for row in rows}
    if len(widths) != 1 or len(header) in widths:
        return  # rows disagree among themselves: check_widths names the first odd one
    if len(rows) < 2 and header[-1]:
        return  # one row against the header: no majority says which one is wrong
    found = widths.pop()
    hint = " (its last name is empty: a trailing delimiter?)" if len(header) > found and not header[-1] else ""
    raise DataError(path, line, f"the header has {len(header)} columns{hint} but every row has {found}")


def resolve_column(path: Path, header: list[str] | None, column: Column, width: int, key: str) -> int:
    """Turn a column given by header name (which must occur once) or 0-based index into an
    index, or raise DataError."""
    if isinstance(column, str):
        if header is None:
            raise DataError(path, 1, f"column {column!r} is given by name but the file has no header", key=key)
        if column not in header:
            raise DataError(path, 1, f"no column named {column!r} in the header (columns: {header})", key=key)
        positions = [i for i, name in enumerate(header) if name == column]
        if len(positions) > 1:  # header.index() would silently take the first
            raise DataError(path, 1, f"column name {column!r} is ambiguous: the header has it at {positions}", key=key)
        return positions[0]
    if not -width <= column < width:
        raise DataError(path, 1, f"column {column} does not exist: the file has {width} columns", key=key)
    return column % width


# A decimal number in ASCII: float() also takes '4_2' (as 42.0) and other scripts' digits ('٤').
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)


def parse_score(path: Path, line: int, value: str, key: str, bounds: tuple[float, float] | None = None) -> float:
    """A finite float label (regression), optionally within `bounds` (STS-B: 0..5), written as a
    plain decimal number (surrounding spaces allowed)."""
    if not _DECIMAL.fullmatch(value.strip()):
        raise DataError(path, line, f"not a number: {value!r}", key=key)
    score = float(value)
    if not math.isfinite(score):
        raise DataError(path, line, f"not a finite number: {value!r}", key=key)
    if bounds is not None and not bounds[0] <= score <= bounds[1]:
        raise DataError(path, line, f"score {score} outside [{bounds[0]}, {bounds[1]}]", key=key)
    return score


def parse_label(path: Path, line: int, value: str, labels: Sequence[str], key: str) -> str:
    if value not in labels:
        raise DataError(path, line, f"unknown label {value!r}; expected one of {list(labels)}", key=key)
    return value


@dataclass(frozen=True)
class TableLayout:
    """How to find the fields of a sentence(-pair) example in one delimited file.

    Columns are header names or 0-based indices. `label=None` means unlabelled; with
    `label_optional`, a label column named in the layout but absent from the header also means
    unlabelled (GLUE test files). `index=None` (or an absent optional index column) numbers
    the rows from 0.
    """

    text_a: Column
    text_b: Column | None = None
    label: Column | None = None
    index: Column | None = None
    header: bool = True
    width: int | None = None  # required number of columns for headerless files (None: first row's)
    label_optional: bool = False
    index_optional: bool = False


def read_sentence_examples(
    path: Path,
    split: str,
    layout: TableLayout,
    *,
    labels: Sequence[str] = (),
    regression_bounds: tuple[float, float] | None = None,
    regression: bool = False,
    delimiter: str = "\t",
    quoting: bool = False,
    max_examples: int | None = None,
    subsample: str = "first",
    subsample_seed: int = 0,
) -> list[SentenceExample]:
    """Read `path` into SentenceExamples with ids `<split>-<index>`; labels are validated.

    Every row is validated even when `max_examples` keeps only the first rows, so a quick run
    reports the same errors as a full one.
    """
    rows = read_rows(path, delimiter=delimiter, quoting=quoting)
    header: list[str] | None = None
    if layout.header:
        header = [name.strip() for name in rows[0].fields]
        header_line = rows[0].line
        rows = rows[1:]
        if not rows:
            raise DataError(path, 2, "no examples after the header")
        width, what = len(header), "as in the header"
        _check_header_width(path, header_line, header, rows)
    else:
        width = layout.width or len(rows[0].fields)
        what = "as GLUE's format requires" if layout.width else f"as on line {rows[0].line}"
    check_widths(path, rows, width, what)

    def optional(column: Column | None, is_optional: bool, key: str) -> int | None:
        if column is None:
            return None
        if is_optional and isinstance(column, str) and header is not None and column not in header:
            return None
        # A column given by index is just as absent when the file is narrower than it: a
        # headerless test file without its label column is unlabelled, not malformed (every row
        # has the same width, checked above, so no row can carry a label the others lack).
        if is_optional and isinstance(column, int) and column >= width:
            return None
        return resolve_column(path, header, column, width, key)

    a = resolve_column(path, header, layout.text_a, width, "text_a_column")
    b = optional(layout.text_b, False, "text_b_column")
    y = optional(layout.label, layout.label_optional, "label_column")
    idx = optional(layout.index, layout.index_optional, "id_column")

    examples: list[SentenceExample] = []
    seen: dict[str, int] = {}
    empty: list[tuple[int, str]] = []  # (line, column) of empty sentences
    for number, row in enumerate(rows):
        if idx is not None and not row.fields[idx].strip():
            # An empty id would become `<split>-` (and an empty index in a GLUE submission file):
            # it is a truncated or shifted row, not an id.
            raise DataError(path, row.line, "empty example id", key=header[idx] if header else "id")
        ident = f"{split}-{row.fields[idx] if idx is not None else number}"
        if ident in seen:
            raise DataError(path, row.line, f"duplicate example id {ident!r} (first on line {seen[ident]})", key="id")
        seen[ident] = row.line
        label: str | float | None = None
        if y is not None:
            key = header[y] if header else "label"
            if regression:
                label = parse_score(path, row.line, row.fields[y], key, regression_bounds)
            else:
                label = parse_label(path, row.line, row.fields[y], labels, key)
        for column in (a, b):
            if column is not None and not row.fields[column].strip():
                empty.append((row.line, header[column] if header else f"column {column}"))
        examples.append(
            SentenceExample(
                id=ident,
                text_a=row.fields[a],
                text_b=row.fields[b] if b is not None else None,
                label=label,
            )
        )
    if empty:  # official files have some (QQP's train.tsv: two empty question2): kept, as GLUE's own code does
        line, column = empty[0]
        print(
            f"warning: {path}: {len(empty)} empty sentence(s), kept as empty inputs (first: line {line}, {column})",
            file=sys.stderr,
            flush=True,
        )
    return keep_examples(examples, max_examples, subsample, subsample_seed)


def keep_examples(
    examples: list[SentenceExample], max_examples: int | None, subsample: str = "first", seed: int = 0
) -> list[SentenceExample]:
    """The examples `max_examples` keeps: the first N (`first`) or a seeded random N (`random`).

    A random subset stays in file order and depends only on the seed and the split's size, so
    every system of a comparison sees the same examples. It exists because "the first N" is a
    biased sample of files sorted by genre or label (STS-B's training pairs are image captions
    first).
    """
    if max_examples is None or max_examples >= len(examples):
        return examples
    if subsample == "first":
        return examples[:max_examples]
    import random

    chosen = sorted(random.Random(seed).sample(range(len(examples)), max_examples))
    return [examples[i] for i in chosen]

"""Readers for one-token-per-line column files (CoNLL-2000/2003 style) and CoNLL-U.

They return sentences with the line number of every token, so that later checks (tag scheme,
label set) can still name `file:line`. Nothing is dropped silently: the only lines that do not
become tokens are blank lines and `-DOCSTART-` lines (sentence/document separators) in column
files, and comments, multiword-token ranges and empty nodes in CoNLL-U (which the CoNLL-U
format defines as not being syntactic words).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from xfer.core.errors import DataError
from xfer.core.textfile import read_text, split_lines

DOCSTART = "-DOCSTART-"
SPACES = " \t"  # the column separators of `separator: whitespace`, and what a blank line may hold
_SPACE_RUN = re.compile(f"[{SPACES}]+")


@dataclass
class ColumnSentence:
    """One sentence of a column file: a row of fields per token, with its 1-based line."""

    lines: list[int]
    rows: list[list[str]]

    @property
    def line(self) -> int:
        return self.lines[0]


def read_columns(path: Path, *, separator: str = "whitespace") -> list[ColumnSentence]:
    """Sentences of a column file; every token line must have as many columns as the first one.

    Blank lines (nothing but spaces and tabs) separate sentences; `-DOCSTART-` lines separate
    documents (and therefore sentences) and are not tokens. `separator="whitespace"` splits on
    runs of spaces and tabs only, not on every Unicode space as `str.split()` does: a no-break
    space inside a token (French `1\u00a0000`) stays in the token instead of becoming a column.
    `separator="tab"` keeps spaces inside a field but refuses them around one (`NN ` next to `NN`);
    a `-DOCSTART-` line is recognised by its first space-separated field under both separators.
    """
    text = read_text(path)
    sentences: list[ColumnSentence] = []
    current = ColumnSentence([], [])
    width = 0
    first_line = first_tabs = 0
    for number, line in enumerate(split_lines(path, text), start=1):  # a BOM starting a line is refused there
        if not line.strip(SPACES):
            if current.rows:
                sentences.append(current)
                current = ColumnSentence([], [])
            continue
        fields = line.split("\t") if separator == "tab" else _SPACE_RUN.split(line.strip(SPACES))
        # by its first space-separated field also under `separator: tab`: the original CoNLL-2003
        # `-DOCSTART- -X- -X- O` kept in a file whose tokens were converted to tabs was read as a
        # one-column token, and line 1 then set the file's column count for every later line
        if _SPACE_RUN.split(fields[0].strip(SPACES), 1)[0] == DOCSTART:
            if current.rows:
                sentences.append(current)
                current = ColumnSentence([], [])
            continue
        if not width:
            width, first_line, first_tabs = len(fields), number, len(line.split("\t"))
        elif len(fields) != width:
            raise DataError(
                path,
                number,
                f"expected {width} columns (as on line {first_line}), found {len(fields)}"
                + _space_in_field_hint(separator, line, first_line, first_tabs),
            )
        if any(not field for field in fields):
            raise DataError(path, number, "empty column (two separators in a row?)")
        padded = next((i for i, f in enumerate(fields) if f != f.strip(SPACES)), None) if separator == "tab" else None
        if padded is not None:  # a space an editor left before a tab made 'NN ' a tag of its own next to 'NN'
            raise DataError(
                path,
                number,
                f"column {padded} ({fields[padded]!r}) has leading or trailing spaces: `separator: tab` keeps "
                "spaces inside a field, but around it they would make another word or tag",
            )
        current.lines.append(number)
        current.rows.append(fields)
    if current.rows:
        sentences.append(current)
    if not sentences:
        raise DataError(path, 1, "no sentences in file")
    return sentences


def _space_in_field_hint(separator: str, line: str, first_line: int, first_tabs: int) -> str:
    """What to add to a column-count error of `separator: whitespace` when, split on tabs only, the
    line has as many columns as the first token line: a tab-separated file with a space inside a
    word (`New York`, a multiword token of UD-derived data). The bare message blamed a regular line
    when the first line held the space ("expected 5 columns, found 4") and suggested no way out."""
    tabs = len(line.split("\t"))
    if separator != "whitespace" or tabs < 2 or tabs != first_tabs:
        return ""
    return (
        f" (split on tabs only, it has {tabs} columns like line {first_line}: a field of one of the two lines "
        "holds a space? set `separator: tab` to read a tab-separated file whose words hold spaces)"
    )


@dataclass
class ConlluSentence:
    """The syntactic words of one CoNLL-U sentence and the chosen tag of each."""

    line: int  # first line of the sentence (comment or word)
    sent_id: str | None
    words: list[str]
    tags: list[str]
    lines: list[int]
    raw: list[str] = field(default_factory=list)  # the sentence's lines as read (`ConlluRows.raw`)


@dataclass
class ConlluRows:
    """One CoNLL-U sentence as read: the 10 fields of each syntactic word and its line, and
    `raw`, every line of the sentence as read (comments, multiword tokens, empty nodes and words,
    without the line ending), so a prediction file can keep them (`UdParseTask.write_predictions`)."""

    line: int  # first line of the sentence (comment or word)
    sent_id: str | None
    rows: list[list[str]]
    lines: list[int]
    raw: list[str] = field(default_factory=list)


TAG_INDEX = {"upos": 3, "xpos": 4}  # the 0-based CoNLL-U column of each `tag_column`


CONLLU_COLUMNS = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")
_MAY_HOLD_SPACES = {"FORM", "LEMMA", "MISC"}


def _bad_field(fields: list[str]) -> tuple[str, str] | None:
    """(column, reason) of the first field the CoNLL-U format forbids: an empty one ('_' marks a
    missing value), whitespace in a column other than FORM, LEMMA and MISC, and whitespace around
    a FORM or LEMMA. Unchecked, DEPREL ' ' became a relation label and FORM '' a word."""
    for column, value in zip(CONLLU_COLUMNS, fields, strict=True):
        if not value:
            return column, "empty field (CoNLL-U marks a missing value with '_')"
        if column not in _MAY_HOLD_SPACES and any(c.isspace() for c in value):
            return column, f"{value!r} contains whitespace"
        if column in ("FORM", "LEMMA") and value.strip() != value:
            return column, f"{value!r} has leading or trailing whitespace"
    return None


def _is_index(text: str) -> bool:
    """An ID or HEAD: ASCII digits only, without a leading zero (`0` alone is ROOT). str.isdigit()
    alone also accepts '²', which int() then rejects with a traceback, and '١' or '１', which int()
    silently reads as 1. The UD format writes integers: `01` was read as word 1 and HEAD `00` as
    ROOT, silently, in a file a tool had padded or a hand had edited."""
    return text.isascii() and text.isdigit() and (text == "0" or not text.startswith("0"))


def _zero_hint(text: str) -> str:
    """What to add to an error on an ID or HEAD that is digits with a leading zero."""
    padded = text.isascii() and text.isdigit() and len(text) > 1 and text.startswith("0")
    return " (written with a leading zero: CoNLL-U IDs and HEADs are plain integers)" if padded else ""


def _check_skipped_id(
    path: Path, number: int, ident: str, words: int, ranges: list[tuple[int, int, int]], empty_nodes: dict[int, int]
) -> None:
    """Check the ID of a line that is not a syntactic word, after `words` words of its sentence.

    A multiword token `a-b` comes just before its first word (a = words + 1), spans at least
    two words (a < b) and does not overlap the previous one; its end is checked against the
    sentence length when the sentence closes. An empty node `k.m` comes after word k (k = words)
    with m = 1, 2, ... as in the UD format. Unchecked, `3-2`, `2-9` or `1.0` were skipped
    silently although they show a shifted, truncated or hand-edited sentence.
    """
    empty_node = "." in ident
    low, _, high = ident.partition("." if empty_node else "-")
    if not (_is_index(low) and _is_index(high)):  # also `1-2.1` and `1.2.3`
        hint = _zero_hint(low) or _zero_hint(high)
        raise DataError(path, number, f"malformed ID {ident!r}{hint}", key="ID")
    first, second = int(low), int(high)
    if empty_node:
        if first != words:
            raise DataError(
                path,
                number,
                f"empty node {ident} out of place: it must follow word {first}, not word {words}",
                key="ID",
            )
        expected = empty_nodes.get(first, 0) + 1
        if second != expected:
            raise DataError(path, number, f"empty node {ident} out of sequence (expected {first}.{expected})", key="ID")
        empty_nodes[first] = second
        return
    if first != words + 1:
        raise DataError(
            path,
            number,
            f"multiword token {ident} out of place: it must precede word {first}, the next is {words + 1}",
            key="ID",
        )
    if second <= first:
        raise DataError(path, number, f"multiword token {ident} does not span two or more words", key="ID")
    if ranges and ranges[-1][2] >= first:
        raise DataError(
            path,
            number,
            f"multiword token {ident} overlaps {ranges[-1][1]}-{ranges[-1][2]} (line {ranges[-1][0]})",
            key="ID",
        )
    ranges.append((number, first, second))


def _check_comment(path: Path, number: int, line: str, token_line: int, sent_id_line: int) -> None:
    """A comment must come before the word lines of its sentence, and `# sent_id` must be given
    at most once and not be empty, as the UD format (and its validator) require. Unchecked, a
    comment among the words (a lost blank line) or a second `sent_id` silently renamed the
    sentence, and an empty one gave it the `<split>-<n>` fallback id."""
    key, sep, value = line[1:].partition("=")
    if token_line:
        raise DataError(
            path,
            number,
            f"comment after the word lines of a sentence (first on line {token_line}): comments precede "
            "the words, and a blank line ends each sentence",
        )
    if not (sep and key.strip() == "sent_id"):
        return
    if sent_id_line:
        raise DataError(path, number, f"second sent_id of one sentence (first on line {sent_id_line})", key="sent_id")
    if not value.strip():
        raise DataError(path, number, "empty sent_id", key="sent_id")


def _refuse_no_words(path: Path, start: int, ranges: list[tuple[int, int, int]], empty_nodes: dict[int, int]) -> None:
    """Raise for a sentence without word lines, starting on line `start`. A sentence of multiword
    tokens only (`1-2 du` without `1 de`, `2 le`) or of empty nodes only (`0.1`) was said to be
    "comments without word lines", also when it had no comment: the message now says what it holds."""
    if ranges:
        line, low, high = ranges[0]
        raise DataError(
            path,
            line,
            f"sentence has no words: multiword token {low}-{high} is not followed by its words {low}..{high} "
            "(a range line only groups the word lines after it; every word needs its own line)",
            key="ID",
        )
    if empty_nodes:
        raise DataError(path, start, "sentence has no words, only empty nodes (0.1, ...): a sentence needs word lines")
    raise DataError(path, start, "sentence has no words (comments without word lines)")


def read_conllu_rows(path: Path) -> list[ConlluRows]:
    """Sentences of a CoNLL-U file (https://universaldependencies.org/format.html), fields unparsed.

    Word lines have an integer ID (1, 2, ...); ranges `1-2` (multiword tokens) and decimal IDs
    `1.1` (empty nodes) are skipped, as the format prescribes for word-level annotation, once
    their IDs are checked against the words around them (`_check_skipped_id`), but kept with the
    comments in `raw`. Every
    non-comment line must have exactly 10 tab-separated columns, none of them empty and only
    FORM, LEMMA and MISC holding spaces (`_bad_field`), and word IDs must count 1, 2, ...; a file
    whose every FORM is `_` (its text withheld) is refused.
    """
    text = read_text(path)
    sentences: list[ConlluRows] = []
    start, sent_id, sent_id_line, token_line = 0, None, 0, 0
    rows: list[list[str]] = []
    lines: list[int] = []
    raw: list[str] = []

    ranges: list[tuple[int, int, int]] = []  # (line, first word, last word) of multiword tokens
    empty_nodes: dict[int, int] = {}  # word k -> last m of the empty nodes k.m read so far

    def close() -> None:
        nonlocal start, sent_id, sent_id_line, token_line, rows, lines, raw, ranges, empty_nodes
        if start:
            if not rows:
                _refuse_no_words(path, start, ranges, empty_nodes)
            for line, low, high in ranges:
                if high > len(rows):
                    raise DataError(
                        path, line, f"multiword token {low}-{high} ends after the last word ({len(rows)})", key="ID"
                    )
            sentences.append(ConlluRows(start, sent_id, rows, lines, raw))
        start, sent_id, sent_id_line, token_line = 0, None, 0, 0
        rows, lines, raw, ranges, empty_nodes = [], [], [], [], {}

    for number, line in enumerate(split_lines(path, text), start=1):  # a BOM starting a line is refused there
        if not line.strip():
            close()
            continue
        start = start or number
        raw.append(line)
        if line.startswith("#"):
            _check_comment(path, number, line, token_line, sent_id_line)
            key, sep, value = line[1:].partition("=")
            if sep and key.strip() == "sent_id":
                sent_id, sent_id_line = value.strip(), number
            continue
        token_line = token_line or number
        fields = line.split("\t")
        if len(fields) != 10:
            raise DataError(path, number, f"CoNLL-U word lines have 10 tab-separated columns, found {len(fields)}")
        problem = _bad_field(fields)
        if problem is not None:
            raise DataError(path, number, problem[1], key=problem[0])
        ident = fields[0]
        if "-" in ident or "." in ident:
            _check_skipped_id(path, number, ident, len(rows), ranges, empty_nodes)
            continue
        if not _is_index(ident) or int(ident) != len(rows) + 1:
            raise DataError(
                path,
                number,
                f"word ID {ident!r} out of sequence (expected {len(rows) + 1}){_zero_hint(ident)}",
                key="ID",
            )
        rows.append(fields)
        lines.append(number)
    close()
    if not sentences:
        raise DataError(path, 1, "no sentences in file")
    _refuse_withheld_text(path, sentences)
    return sentences


def _refuse_withheld_text(path: Path, sentences: list[ConlluRows]) -> None:
    """Refuse a file whose every FORM is `_`: the UD treebanks whose text may not be redistributed
    (UD_English-ESL, UD_Arabic-NYUAD, UD_Japanese-BCCWJ, ...) ship with each word written `_` until
    the licensed text is merged in. Read as they are, every word was the word '_': a tagger or parser
    trained and scored on the tags or arcs alone, without a word said. One `_` among real words is
    the underscore token, which the format allows."""
    if any(fields[1] != "_" for sentence in sentences for fields in sentence.rows):
        return
    raise DataError(
        path,
        sentences[0].lines[0],
        "every FORM of the file is '_': a treebank distributed without its text (merge the licensed "
        "words in first, with the treebank's own script)",
        key="FORM",
    )


def word_line_id(line: str) -> int | None:
    """The ID of a CoNLL-U word line as read (an integer), None for comments, multiword tokens
    (`3-4`) and empty nodes (`5.1`), which are not syntactic words: the lines of `ConlluRows.raw`
    a prediction file replaces columns of."""
    if line.startswith("#"):
        return None
    ident = line.split("\t", 1)[0]
    return int(ident) if ident.isascii() and ident.isdigit() else None


def word_forms(raw: list[str]) -> list[str]:
    """FORMs of the word lines of a sentence's lines as read (`ConlluRows.raw`)."""
    return [line.split("\t")[1] for line in raw if word_line_id(line) is not None]


def duplicate_sentence_id(ident: str, split: str, first: tuple[int, bool], line: int, default: bool) -> str:
    """The message for a sentence id already used by the sentence starting on line `first[0]`.

    A sentence without `# sent_id` gets the id `<split>-<n>` (n: its 0-based position), which a
    sent_id of another sentence can equal: "sentence id 'dev-1' already used on line 1" was said of
    a sentence that has no sent_id, or pointed at one that has none. `first[1]` and `default` say
    whether each of the two ids is such a default."""
    if not (default or first[1]):
        return f"sentence id {ident!r} already used on line {first[0]}"
    implicit, explicit = (line, first[0]) if default else (first[0], line)
    return (
        f"sentence id {ident!r}: the sentence on line {implicit} has no sent_id, so its id is {split}-<n> "
        f"(its position in the file), and the sentence on line {explicit} has that sent_id "
        "(give every sentence a sent_id, or another one)"
    )


def read_conllu(path: Path, *, tag_column: str = "upos") -> list[ConlluSentence]:
    """Sentences of a CoNLL-U file with one tag column (UPOS or XPOS) per syntactic word.

    See `read_conllu_rows` for what is a word; a missing tag (`_` or empty) is an error.
    """
    index = TAG_INDEX[tag_column]
    sentences = []
    for sentence in read_conllu_rows(path):
        for number, fields in zip(sentence.lines, sentence.rows, strict=True):
            if fields[index] in ("", "_"):
                raise DataError(
                    path, number, f"no {tag_column.upper()} tag ('{fields[index]}')", key=tag_column.upper()
                )
        words = [fields[1] for fields in sentence.rows]
        tags = [fields[index] for fields in sentence.rows]
        sentences.append(
            ConlluSentence(sentence.line, sentence.sent_id, words, tags, list(sentence.lines), sentence.raw)
        )
    return sentences


@dataclass
class ConlluTree:
    """One CoNLL-U sentence with its dependency tree: `heads` 1-based (0 = ROOT), `relations`
    the DEPREL column (subtypes kept unless the caller strips them), `upos` the UPOS column."""

    line: int
    sent_id: str | None
    words: list[str]
    heads: list[int]
    relations: list[str]
    upos: list[str]
    lines: list[int]
    raw: list[str] = field(default_factory=list)  # the sentence's lines as read (`ConlluRows.raw`)


def read_conllu_trees(path: Path) -> list[ConlluTree]:
    """Sentences of a CoNLL-U file with HEAD and DEPREL checked: every HEAD an integer in
    0..n (n words), never the word itself, the arcs a tree (every word reaches ROOT, no cycle)
    with exactly one word attached to ROOT (as UD requires, and as the parser's decoder
    predicts), and every DEPREL given, without an empty part around a `:` subtype separator.
    Errors name the line of the offending word."""
    trees = []
    for sentence in read_conllu_rows(path):
        n = len(sentence.rows)
        heads: list[int] = []
        for position, (number, fields) in enumerate(zip(sentence.lines, sentence.rows, strict=True), start=1):
            head, relation = fields[6], fields[7]
            if not _is_index(head) or int(head) > n:
                raise DataError(
                    path, number, f"HEAD {head!r} is not a word index in 0..{n}{_zero_hint(head)}", key="HEAD"
                )
            if int(head) == position:
                raise DataError(path, number, f"word {position} is its own head", key="HEAD")
            if relation in ("", "_"):
                raise DataError(path, number, f"no dependency relation ({relation!r})", key="DEPREL")
            if any(not part for part in relation.split(":")):  # `relations: universal` made ':nsubj' ''
                raise DataError(path, number, f"relation {relation!r} has an empty part around ':'", key="DEPREL")
            heads.append(int(head))
        roots = [position for position, head in enumerate(heads, start=1) if head == 0]
        if len(roots) > 1:  # UD: exactly one; the tree decoder always predicts one, so this gold is unreachable
            words = ", ".join(str(w) for w in roots)
            raise DataError(
                path,
                sentence.lines[roots[1] - 1],
                f"{len(roots)} words (words {words}) have HEAD 0; a tree has exactly one root word",
                key="HEAD",
            )
        cycle = _first_cycle(heads)
        if cycle:
            words = ", ".join(str(w) for w in cycle)
            raise DataError(path, sentence.lines[cycle[0] - 1], f"heads form a cycle through words {words}", key="HEAD")
        trees.append(
            ConlluTree(
                sentence.line,
                sentence.sent_id,
                [fields[1] for fields in sentence.rows],
                heads,
                [fields[7] for fields in sentence.rows],
                [fields[3] for fields in sentence.rows],
                list(sentence.lines),
                sentence.raw,
            )
        )
    return trees


def tree_problem(heads: list[int]) -> str | None:
    """Why `heads` (1-based, 0 = ROOT) is not a UD tree (several words attached to ROOT, or a
    cycle, a word its own head included), or None when it is one."""
    roots = [position for position, head in enumerate(heads, start=1) if head == 0]
    if len(roots) != 1:
        return f"{len(roots)} words attached to ROOT ({', '.join(str(w) for w in roots)})"
    cycle = _first_cycle(heads)
    if cycle:
        return f"heads form a cycle through words {', '.join(str(w) for w in cycle)}"
    return None


def _first_cycle(heads: list[int]) -> list[int]:
    """Words (1-based, sorted) of the first cycle found in `heads` (heads[i] = head of word i+1),
    or [] when every word reaches ROOT."""
    state = [0] * (len(heads) + 1)  # 0 unvisited, 1 on the current path, 2 reaches ROOT
    state[0] = 2
    for start in range(1, len(heads) + 1):
        path = []
        word = start
        while state[word] == 0:
            state[word] = 1
            path.append(word)
            word = heads[word - 1]
        if state[word] == 1:  # walked back into the current path: a cycle
            return sorted(path[path.index(word) :])
        for visited in path:
            state[visited] = 2
    return []

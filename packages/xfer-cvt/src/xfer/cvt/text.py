"""A small reversible tokenizer for raw text (translation sources and targets, raw unlabeled text).

Words are runs of letters/digits/underscore and the combining marks that belong to them (accents
written apart, the vowel signs of Devanagari, Hebrew points: `\\w` does not match them, and
"हिन्दी" became six one-letter tokens); every other non-space character is a token of its own,
with any marks on it, and so is every character of a script written without spaces (Chinese,
Japanese, Thai, Lao, Khmer, Burmese: `UNSPACED_RANGES`). `tokenize_joined` marks a token that was written without a space before it
with a leading joiner `￭` (OpenNMT's convention), so `detokenize(tokenize_joined(s))` gives back
`s` with its whitespace normalised to single spaces (a `￭` written in the text included): a
translation model trained on joined target tokens produces detokenised text for sacrebleu without
a language-specific detokenizer.

Also the line-level reading of unlabeled text files (`decode_line`, `index_file`),
torch-free so that the pre-flight (`xfer.cvt.checks`) reads them as the stage does.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from xfer.core.errors import DataError
from xfer.core.textfile import BOM_INSIDE, CARRIAGE_RETURN, not_utf8, nul_byte

JOINER = "￭"


# Scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, kana, CJK ideographs
# (with their extensions and compatibility forms), halfwidth katakana.
UNSPACED_RANGES = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x3040, 0x30FF), (0x31F0, 0x31FF))
UNSPACED_RANGES += ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0x20000, 0x3134F))


def _class(ranges: Iterable[Sequence[int]]) -> str:
    return "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


def _add(ranges: list[list[int]], code: int) -> None:
    """Adds `code` to sorted ranges [first, last] built in increasing order."""
    if ranges and ranges[-1][1] == code - 1:
        ranges[-1][1] = code
    else:
        ranges.append([code, code])


@functools.cache
def _unspaced() -> re.Pattern[str]:
    return re.compile(f"[{_class(UNSPACED_RANGES)}]")


@functools.cache
def _token_pattern(unspaced: bool = False) -> re.Pattern[str]:
    """Words (`\\w` and combining marks) or one other non-space character with its marks; with
    `unspaced`, each character of a script written without spaces (UNSPACED_RANGES) is a token of
    its own, with its marks. The marks (Unicode categories Mn, Mc, Me) are listed once per process,
    as ranges (0.2 s); the `unspaced` pattern, slower, only reads text that holds such characters.

    Why characters: `\\w` runs cut Chinese, Japanese or Thai text at punctuation only, so a clause
    was one token ("我爱北京天安门"): a translation target in those languages had next to no token
    seen `target_min_count` times and trained on <unk>s, and a source was mostly <unk> words. One
    token per character is what BLEU's `char` (for Chinese also `zh`) tokenizer counts, and the
    joiners still detokenise it exactly."""
    marks: list[list[int]] = []
    words: list[list[int]] = []  # `\\w` (isalnum or "_", as `re` has it) or a mark, not unspaced
    inside = _unspaced().match
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if unicodedata.category(char).startswith("M"):
            _add(marks, code)
            if unspaced and not inside(char):
                _add(words, code)
        elif unspaced and (char.isalnum() or char == "_") and not inside(char):
            _add(words, code)
    if not unspaced:
        return re.compile(rf"[\w{_class(marks)}]+|[^\w\s][{_class(marks)}]*")
    return re.compile(rf"[{_class(words)}]+|[{_class(UNSPACED_RANGES)}][{_class(marks)}]*|[^\w\s][{_class(marks)}]*")


def _pattern(text: str) -> re.Pattern[str]:
    return _token_pattern(_unspaced().search(text) is not None)


def tokenize(text: str) -> list[str]:
    """Words and single punctuation characters (no joiners): encoder input."""
    return _pattern(text).findall(text)


def tokenize_joined(text: str) -> list[str]:
    """Tokens; those not preceded by whitespace (except the first) carry a leading JOINER."""
    tokens = []
    for match in _pattern(text).finditer(text):
        start = match.start()
        attached = bool(tokens) and start > 0 and not text[start - 1].isspace()
        tokens.append(JOINER + match.group() if attached else match.group())
    return tokens


def _literal_joiner(token: str) -> bool:
    """Whether `token` is the character JOINER itself written after a space (or first), not a token
    carrying the joiner mark: nothing but combining marks follows its JOINER. A marked token never
    looks so, as the text after the mark is a token, and a token written without a space before it
    never starts with a combining mark (the token before it took its marks). Without this check
    `detokenize` dropped the character: "Hund ￭" came back "Hund", a reference word no output could
    produce, and an accent on a spaced-off `￭` moved onto the word before it."""
    rest = token[len(JOINER) :]
    return token.startswith(JOINER) and (not rest or unicodedata.category(rest[0]).startswith("M"))


def detokenize(tokens: list[str]) -> str:
    """Inverse of `tokenize_joined` (up to whitespace normalisation)."""
    out: list[str] = []
    for token in tokens:
        if _literal_joiner(token):
            out.append(" " + token if out else token)
        elif token.startswith(JOINER) and out:
            out.append(token[len(JOINER) :])
        else:
            if out:
                out.append(" ")
            out.append(token.removeprefix(JOINER))
    return "".join(out)


# --- unlabeled text files -----------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    file: Path
    offset: int  # byte offset of the chunk's first line
    line: int  # 1-based number of that line
    lines: int
    crc: int = 0  # CRC-32 of its bytes: a chunk read later must hold the lines indexed


def decode_line(path: Path, number: int, raw: bytes) -> str:
    """Line `number` (1-based) of an unlabeled file as text, or a DataError naming file and line:
    bytes that are not UTF-8; a NUL byte (a binary or damaged file: it became part of a word, and
    `cvt.vectors` wrote that word into a vectors file `cvt.train` then refused); a CR inside the
    line (CR-only endings: the whole file one line, cut across sentence ends); a byte-order mark
    starting a later line, as the task readers refuse it (files concatenated with `cat`: it was
    glued to the line's first word, U+FEFF + "the", a word of its own in the vocabulary and in the
    file `cvt.vectors` writes). A byte-order mark at the start of the file is not part of the
    first word."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(path, number, not_utf8(path, raw[err.start], err.start + 1)) from None
    if number == 1:
        text = text.removeprefix("\ufeff")
    elif text.startswith("\ufeff"):
        raise DataError(path, number, BOM_INSIDE)
    column = text.rstrip("\r\n").find("\r") + 1
    if column:
        raise DataError(path, number, CARRIAGE_RETURN.format(column=column))
    if "\x00" in text:
        raise DataError(path, number, nul_byte(text.index("\x00") + 1))
    return text


def index_file(path: Path, chunk_lines: int) -> tuple[list[Chunk], bool]:
    """The file's chunks of `chunk_lines` lines, and whether a line is not blank. Every line is
    decoded and checked here, when the stage starts (and in the pre-flight), not only when the
    stream reaches its chunk: with `vocab_lines` a bad byte past the counted lines stopped the stage
    hours into training."""
    chunks, offset, start_offset, start_line, count, crc, has_words = [], 0, 0, 1, 0, 0, False
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                text = decode_line(path, number, raw)  # every line, even once a word was seen
                has_words = has_words or bool(text.strip())
                if count == 0:
                    start_offset, start_line, crc = offset, number, 0
                count += 1
                offset += len(raw)
                crc = zlib.crc32(raw, crc)
                if count == chunk_lines:
                    chunks.append(Chunk(path, start_offset, start_line, count, crc))
                    count = 0
    except OSError as exc:
        raise DataError(path, 0, f"cannot read: {exc.strerror or exc}") from None
    if count:
        chunks.append(Chunk(path, start_offset, start_line, count, crc))
    return chunks, has_words

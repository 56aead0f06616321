"""Reading text data files with errors that name the file and line.

Every reader in every plugin needs the same thing: bytes -> UTF-8 text, with a missing file, an
unreadable file, a bad byte or a NUL byte (reported at its line and column) or an empty file turned
into a `DataError` rather than a traceback. A leading byte-order mark (GLUE's MRPC files have one) is
dropped. `split_lines` is the one way line-based readers cut the text into lines.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from xfer.core.errors import DataError

BOM_INSIDE = "byte-order mark (U+FEFF) at the start of a line inside the file: concatenated files? Remove it"
"""The message for a BOM that starts a later line (`read_text` drops the file's own): what `cat` leaves
of concatenated files' BOMs. `split_lines` refuses it for every line reader: glued to the first word it
made `\ufeff-DOCSTART-` a one-word sentence, `\ufeffPeter` an unknown word and `\ufeffEine` a
reference word no hypothesis has."""

CARRIAGE_RETURN = (
    "carriage return (CR) inside the line at column {column}: "
    "CR-only (classic Mac) line endings? Convert the file to LF or CRLF endings"
)
"""The message for a CR that does not end its line (`.format(column=...)`), for every reader that
cuts lines: with CR-only endings a whole file would be one line."""


_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"(\xb5/\xfd": "zstd", b"PK\x03\x04": "zip"}


def not_utf8(path: str | Path, byte: int, column: int) -> str:
    """The message for a byte that is not UTF-8, naming the compression when the file is compressed
    (text readers take plain text only; "byte 0x8b at column 2" alone does not say why)."""
    message = f"not valid UTF-8 (byte 0x{byte:02x} at column {column})"
    try:
        with open(path, "rb") as handle:
            start = handle.read(6)
    except OSError:
        return message
    kind = next((name for magic, name in _COMPRESSED.items() if start.startswith(magic)), None)
    if kind:
        return f"{message}: the file is {kind}-compressed; decompress it first"
    if start.startswith((b"\xff\xfe", b"\xfe\xff")):  # Windows tools' "Unicode" text
        return f"{message}: the file is UTF-16 (it starts with a UTF-16 byte-order mark); save it as UTF-8"
    return message


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> str | None:
    """The message for a lone UTF-16 surrogate in `text`, or None. JSON's `\\ud800` escape decodes
    to one: not a Unicode character (UTF-8 cannot encode it), on which the tokenizer fails with a
    bare TypeError, long after the reader accepted it. A complete pair decodes to its character."""
    bad = _LONE_SURROGATE.search(text)
    if bad is None:
        return None
    return (
        f"lone surrogate escape \\u{ord(bad.group()):04x} at character {bad.start()} (not a Unicode character; "
        "write the character itself or a complete surrogate pair)"
    )


def nul_byte(column: int) -> str:
    """The message for a NUL byte in a text file. Valid UTF-8, but no text has one: it marks a binary
    or damaged file, and the WordPiece normaliser (as BERT's) deletes it without a space, merging
    the words on either side ("Re\\x00eve" read as "Reeve") without a word."""
    return f"NUL byte at column {column}: a binary or damaged file? (text files hold none)"


def _link_target(path: Path) -> str | None:
    """Where `path` leads when it is a symbolic link (the end of a chain of links, made absolute),
    else None."""
    try:
        return os.path.realpath(path) if path.is_symlink() else None
    except OSError:
        return None


def read_error(path: Path, error: OSError) -> DataError:
    """The `DataError` for a file that cannot be opened or read (for readers that stream).

    A dangling symbolic link is named as one, with its target: "file not found" for a path that
    `ls` lists (a data folder of links into a moved or unmounted store) sent the user looking for
    a typo in the recipe."""
    if isinstance(error, FileNotFoundError):
        target = _link_target(path)
        if target is not None:
            return DataError(path, 0, f"broken symbolic link: its target {target} does not exist")
        return DataError(path, 0, "file not found")
    if isinstance(error, IsADirectoryError):
        return DataError(path, 0, "is a directory, expected a file")
    if isinstance(error, PermissionError):
        return DataError(path, 0, "permission denied")
    return DataError(path, 0, f"cannot read file: {error.strerror or error}")


def stream_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, text without its newline) of each line, for files too large to read whole
    (word vectors run to gigabytes); decoding and reading errors as in `read_text`, and a
    byte-order mark starting a later line refused as in `split_lines` (`BOM_INSIDE`)."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise DataError(
                        path,
                        number,
                        not_utf8(path, raw[err.start], err.start + 1),
                        key="encoding",
                    ) from None
                if number == 1:
                    text = text.removeprefix("\ufeff")
                if "\x00" in text:
                    raise DataError(path, number, nul_byte(text.index("\x00") + 1), key="encoding")
                if text.startswith("\ufeff"):  # as `split_lines`: glued to the line's first word (a
                    # word vector keyed "\ufeffthe", so "the" had none, silently)
                    raise DataError(path, number, BOM_INSIDE)
                yield number, text.rstrip("\r\n")
    except OSError as error:
        raise read_error(path, error) from None


def read_text(path: str | Path, *, allow_empty: bool = False) -> str:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise read_error(path, error) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise DataError(path, line, not_utf8(path, data[err.start], column), key="encoding") from None
    text = text.removeprefix("\ufeff")
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise DataError(path, line, nul_byte(nul - (text.rfind("\n", 0, nul) + 1) + 1), key="encoding")
    if not allow_empty and not text.strip():
        raise DataError(path, 1, "file is empty")
    return text


def split_lines(path: str | Path, text: str) -> list[str]:
    """The physical lines of `text` (read from `path`): split on LF only, the CR of a CRLF ending
    removed, no empty last line for the file's final newline.

    `str.splitlines` would also split on U+2028 and friends, which are legitimate characters
    inside a token or a sentence. A CR anywhere but before LF is an error naming its line: a
    file with CR-only (classic Mac) line endings would otherwise be one long line, silently
    merging every sentence into one (and `str.split()` cuts columns on it). So is a byte-order
    mark starting a line (`BOM_INSIDE`; `read_text` drops the file's own): every line reader
    refused it with a check of its own, and one that did not kept it glued to the first word.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out = []
    for number, line in enumerate(lines, start=1):
        line = line.removesuffix("\r")
        column = line.find("\r") + 1
        if column:
            raise DataError(path, number, CARRIAGE_RETURN.format(column=column))
        if line.startswith("\ufeff"):
            raise DataError(path, number, BOM_INSIDE)
        out.append(line)
    return out


def check_distinct(files: Sequence[Path], key: str) -> None:
    """Refuse a file list that holds one file twice (overlapping globs such as `a.txt` and `*.txt`,
    or a symlink beside its target): its text was read, counted and trained on twice, with nothing
    said. `key` names the list in the message (`corpus.files`). A file seen before is one already
    recorded, not one recorded as another object: one `Path` object listed twice (`[path] * 2`)
    passed as a single file."""
    seen: dict[tuple[int, int], Path] = {}
    for path in files:
        try:
            stat = path.stat()
        except OSError:
            continue  # reported, with its path, when the file is read
        first = seen.get((stat.st_dev, stat.st_ino))
        if first is not None:
            raise DataError(
                path,
                0,
                f"listed twice in {key} (also as {first}): its text would be read twice; make the paths and "
                f"globs of {key} match each file once",
            )
        seen[(stat.st_dev, stat.st_ino)] = path

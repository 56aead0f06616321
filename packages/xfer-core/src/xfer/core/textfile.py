"""Reading text data files with errors that name the file and line.

Every reader in every plugin needs the same thing: bytes -> UTF-8 text, with a missing file, an
unreadable file, a bad byte (reported at its line and column) or an empty file turned into a
`DataError` rather than a traceback. A leading byte-order mark (GLUE's MRPC files have one) is
dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from xfer.core.errors import DataError


def read_error(path: Path, error: OSError) -> DataError:
    """The `DataError` for a file that cannot be opened or read (for readers that stream)."""
    if isinstance(error, FileNotFoundError):
        return DataError(path, 0, "file not found")
    if isinstance(error, IsADirectoryError):
        return DataError(path, 0, "is a directory, expected a file")
    if isinstance(error, PermissionError):
        return DataError(path, 0, "permission denied")
    return DataError(path, 0, f"cannot read file: {error.strerror or error}")


def stream_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, text without its newline) of each line, for files too large to read whole
    (word vectors run to gigabytes); decoding and reading errors as in `read_text`."""
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
                        f"not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1})",
                        key="encoding",
                    ) from None
                if number == 1:
                    text = text.removeprefix("\ufeff")
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
        raise DataError(
            path, line, f"not valid UTF-8 (byte 0x{data[err.start]:02x} at column {column})", key="encoding"
        ) from None
    text = text.removeprefix("\ufeff")
    if not allow_empty and not text.strip():
        raise DataError(path, 1, "file is empty")
    return text

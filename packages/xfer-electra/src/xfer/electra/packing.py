"""ELECTRA's pre-training examples: sentences of a document packed into `[CLS] a [SEP] b [SEP]`.

Pure Python (no torch, no `datasets`) so it can run inside `datasets.map` worker processes and be
tested on its own. Two parts:

* `ExamplePacker` reproduces the example builder of google-research/electra
  (`build_pretraining_dataset.py`, class `ExampleBuilder`) decision for decision, including the
  order of its random draws, so a packer seeded like the original makes the same examples:
  sentences accumulate until their token count reaches the target length (or the document ends);
  with probability `single_segment_prob` (0.1) everything goes to the first segment, otherwise
  the first segment aims at `(target - 3) // 2` tokens and a sentence joins it when the segment is
  empty, when it stays strictly below that target, or — while the second segment is still empty
  and the first below target — on a fair coin flip; the segments are then cut to
  `max_length - 2` and `max_length - len(first) - 3` tokens; and with probability
  `short_seq_prob` (0.05) the *next* example's target length is uniform in [5, max_length].
* Blocks: a corpus is cut into blocks of about `block_bytes` (1 MiB) of text that end at document
  boundaries (bytes counted in the text with LF line ends and no byte-order mark: a CRLF or BOM
  file is cut where its LF twin is), and every block is packed from a fresh packer with its own
  seeded RNG. That is what makes the examples independent of the number of worker processes, and
  what gives streaming and ranks their shards. It is the one deliberate difference from the
  original, which carried one RNG and its target length across a whole process's files: here they
  restart at each block.
  A document with no blank line for `MAX_SCAN_BLOCKS` blocks (64 MiB by default) is cut there,
  as if the file had a blank line at that point (a single extra, shorter example).

The original truncates silently: the tokens past `max_length` of the sentence that fills an
example are lost (routine: 15% of the toy corpus's tokens at max_length 64, 7% at 128), and so is
everything past one example of a line longer than that — a corpus with a paragraph or a whole
document per line loses most of its text. `PackStats` counts both, so the data pipeline can
record and warn about it.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from itertools import pairwise
from pathlib import Path
from typing import BinaryIO

from xfer.core.errors import DataError
from xfer.core.textfile import CARRIAGE_RETURN, not_utf8, nul_byte, read_error

BLOCK_BYTES = 1 << 20
"""Text per block (files): large enough that per-block overhead vanishes, small enough to spread over
processes and ranks, and to bound what a streaming resume re-reads."""

BLOCK_ROWS = 10_000
"""Rows per block (`datasets` sources): about 1 MiB of typical one-sentence-per-line text."""

MAX_SCAN_BLOCKS = 64
"""How far (in blocks) a cut point may move forward looking for a blank line before it cuts the document."""

_READ_CHUNK_BYTES = 1 << 20
_LONE_CR = re.compile(rb"\r(?!\n|\Z)")  # a CR ending the file's last line is a line end, as in split_lines
_SINGLE_SEGMENT_TARGET = 100_000


@dataclass(frozen=True, slots=True)
class PackedExample:
    """One pre-training example, unpadded.

    `input_ids` is `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`; `segment_split` is the index of the
    first token of segment b (token type 1 from there on), or `len(input_ids)` when there is no
    second segment. `single_segment` and `target_length` record the packer's two random decisions
    (for tests and statistics; they are not stored in the Arrow cache).
    """

    input_ids: list[int]
    segment_split: int
    single_segment: bool
    target_length: int

    @property
    def token_type_ids(self) -> list[int]:
        return [0] * self.segment_split + [1] * (len(self.input_ids) - self.segment_split)


@dataclass(slots=True)
class PackStats:
    """What packing kept and dropped, summed over blocks (the truncation the original never reports).

    `lines` and `tokens` count the sentences with at least one token and their tokens (without
    [CLS]/[SEP]); `tokens_dropped` is every token cut because an example was full;
    `long_lines` are the lines with more tokens than one example holds (`max_length - 2`), of
    which at most that many can ever be kept, and `long_line_tokens_dropped` the part of
    `tokens_dropped` that came from them.
    """

    lines: int = 0
    tokens: int = 0
    tokens_dropped: int = 0
    long_lines: int = 0
    long_line_tokens_dropped: int = 0

    def add(self, other: PackStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, values: dict[str, int]) -> PackStats:
        return cls(**{f.name: int(values.get(f.name, 0)) for f in fields(cls)})


class ExamplePacker:
    """Turns one block's stream of tokenized sentences and document ends into examples.

    Feed `add_sentence(ids)` for each non-empty sentence and `end_document()` at each blank line
    and at the end of the block; each may return a finished example. Deterministic given `rng`.
    `stats` counts the lines, tokens and truncation (`PackStats`); counting draws nothing.
    """

    def __init__(
        self,
        max_length: int,
        cls_id: int,
        sep_id: int,
        rng: random.Random,
        short_seq_prob: float = 0.05,
        single_segment_prob: float = 0.1,
    ):
        if max_length < 5:
            raise ValueError(f"max_length must be at least 5 (room for [CLS] and two [SEP]), got {max_length}")
        for name, p in (("short_seq_prob", short_seq_prob), ("single_segment_prob", single_segment_prob)):
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {p}")
        self.max_length, self.cls_id, self.sep_id, self.rng = max_length, cls_id, sep_id, rng
        self.short_seq_prob, self.single_segment_prob = short_seq_prob, single_segment_prob
        self._sentences: list[tuple[Sequence[int], int]] = []  # (its first `keep_tokens` ids, its token count)
        self._length = 0
        self._target = max_length
        self.stats = PackStats()

    def add_sentence(self, ids: Sequence[int], length: int | None = None) -> PackedExample | None:
        """Add one sentence's token ids; returns an example once the target length is reached.

        A sentence with no tokens is ignored: in the original it joins a segment without changing
        any length or any random draw, so ignoring it gives the same examples.

        `length`: the sentence's token count when `ids` holds only its first tokens (at least
        `max_length - 2` of them, all an example can keep). The decisions and counts use `length`,
        so the examples are those of the whole sentence: a line of a billion tokens need not be held
        as a list of ids to be packed (`keep_tokens`).
        """
        length = len(ids) if length is None else length
        if length == 0:
            return None
        if len(ids) < min(length, self.keep_tokens):
            raise ValueError(f"a sentence of {length} tokens needs its first {self.keep_tokens} ids, got {len(ids)}")
        self.stats.lines += 1
        self.stats.tokens += length
        self.stats.long_lines += length > self.max_length - 2
        self._sentences.append((ids if len(ids) <= self.keep_tokens else ids[: self.keep_tokens], length))
        self._length += length
        if self._length >= self._target:
            return self._create_example()
        return None

    @property
    def keep_tokens(self) -> int:
        """The most tokens of one sentence an example can keep: the first segment's `max_length - 2`.
        The first k tokens of a concatenation are those of its sentences' first k tokens each."""
        return self.max_length - 2

    def end_document(self) -> PackedExample | None:
        """A blank line or the end of the block: flush what has accumulated (if anything)."""
        if self._length == 0:
            return None
        return self._create_example()

    def _create_example(self) -> PackedExample:
        single = self.rng.random() < self.single_segment_prob
        # The first-segment target leaves room for [CLS] and two [SEP]. "Single" uses the original's
        # 100,000 (not infinity): a sentence that long still goes through the coin flip, as there.
        first_target = _SINGLE_SEGMENT_TARGET if single else (self._target - 3) // 2
        first: list[int] = []
        second: list[int] = []
        first_length = second_length = 0  # tokens of the whole sentences (`first` holds their kept prefixes)
        placed: list[tuple[int, bool, int]] = []  # (tokens, in segment b, offset there): for the counts
        for sentence, length in self._sentences:
            if (
                not first_length
                or first_length + length < first_target
                or (not second_length and first_length < first_target and self.rng.random() < 0.5)
            ):
                placed.append((length, False, first_length))
                first.extend(sentence)
                first_length += length
            else:
                placed.append((length, True, second_length))
                second.extend(sentence)
                second_length += length
        first = first[: self.max_length - 2]
        second = second[: max(0, self.max_length - len(first) - 3)]
        self._count_dropped(placed, len(first), len(second))
        target = self._target

        self._sentences, self._length = [], 0
        if self.rng.random() < self.short_seq_prob:
            self._target = self.rng.randint(5, self.max_length)
        else:
            self._target = self.max_length

        input_ids = [self.cls_id, *first, self.sep_id]
        split = len(input_ids)
        if second:
            input_ids += [*second, self.sep_id]
        return PackedExample(input_ids, split, single, target)

    def _count_dropped(self, placed: list[tuple[int, bool, int]], kept_a: int, kept_b: int) -> None:
        """Add the tokens the segment cuts removed, per sentence, to `stats`."""
        for tokens, in_b, offset in placed:
            lost = tokens - min(tokens, max(0, (kept_b if in_b else kept_a) - offset))
            self.stats.tokens_dropped += lost
            if tokens > self.max_length - 2:
                self.stats.long_line_tokens_dropped += lost


def block_rng(seed: int, block: int) -> random.Random:
    """The packer RNG of block `block`: a function of (seed, block) only, in every process.

    `random.Random` seeded with a string hashes it with SHA-512 (independent of PYTHONHASHSEED).
    """
    return random.Random(f"xfer.electra.packing/{seed}/{block}")


# -- text files -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Bytes `[start, end)` of one file; `start` is a line start and follows a document end."""

    file: int
    start: int
    end: int


def prefix_ends(paths: Sequence[Path], max_lines: int | None) -> list[int]:
    """Byte length of each file to read so that at most `max_lines` lines are read in total.

    Files past the limit get 0. A final line without a newline counts as a line.
    """
    sizes = [_file_size(p) for p in paths]
    if max_lines is None:
        return sizes
    remaining, ends = max_lines, []
    for path, size in zip(paths, sizes, strict=True):
        if remaining <= 0:
            ends.append(0)
            continue
        end, lines = _offset_after_lines(path, remaining)
        ends.append(min(end, size))
        remaining -= lines
    return ends


NOT_A_REGULAR_FILE = (
    "is not a regular file (a FIFO, device or socket): a corpus file is read several times (hashed for the "
    "fingerprint and the cache key, cut into blocks, packed), which a pipe allows once and an endless device "
    "never; save the text to a file"
)


def _file_size(path: Path) -> int:
    try:
        if not path.is_file():
            if path.is_dir():
                raise DataError(path, 0, "is a directory, expected a file")
            raise DataError(path, 0, NOT_A_REGULAR_FILE if path.exists() else "file not found")
        return path.stat().st_size
    except OSError as error:
        raise DataError(path, 0, f"cannot read file: {error.strerror or error}") from None


def _offset_after_lines(path: Path, count: int) -> tuple[int, int]:
    """(byte offset just after the `count`-th line or the file end, lines found up to there)."""
    offset, lines, last = 0, 0, b"\n"
    with _open(path) as handle:
        while chunk := handle.read(_READ_CHUNK_BYTES):
            start = 0
            while lines < count and (at := chunk.find(b"\n", start)) >= 0:
                lines, start = lines + 1, at + 1
            if lines == count:
                return offset + start, lines
            offset, last = offset + len(chunk), chunk[-1:]
    return offset, lines + (last != b"\n")  # a last line without a newline is a line too


def plan_text_blocks(
    paths: Sequence[Path], ends: Sequence[int], block_bytes: int = BLOCK_BYTES, has_cr: Sequence[bool] | None = None
) -> list[TextBlock]:
    """Cut each file's first `ends[i]` bytes into blocks that start after a blank line (or at 0).

    Only the neighbourhood of each cut is read (seek, then scan forward to the next blank line),
    so planning a large corpus costs little I/O. The cuts depend only on the text and `block_bytes`,
    not on how its lines end: positions (every `block_bytes`, and the scan limit) count the bytes of
    the file's text with LF line ends and without a byte-order mark, so a CRLF or BOM file gets the
    blocks of its LF twin, each with the same lines, hence the same examples (counted in raw bytes, a
    CRLF file over one block packed into other examples than its LF twin). Finding those positions
    in a file with CRs takes one sequential read; an LF file costs one fast search for a CR, which
    `has_cr` (`text_has_cr` of each file, known from an earlier plan) spares.
    """
    if block_bytes < 1:
        raise ValueError("block_bytes must be positive")
    blocks: list[TextBlock] = []
    for index, (path, end) in enumerate(zip(paths, ends, strict=True)):
        if end <= 0:
            continue
        cuts = [0]
        with _open(path) as handle:
            bom = len(_BOM) if handle.read(len(_BOM)) == _BOM else 0
            crs = _has_cr(handle, end) if has_cr is None else has_cr[index]
            raw, text, candidate = bom, 0, block_bytes  # (raw, text): one position, in the file and in its text
            while True:
                if crs:
                    position = _raw_position(handle, raw, text, candidate, end)
                else:
                    position = candidate + bom if candidate + bom < end else None
                found = (
                    None
                    if position is None
                    else _next_document_start(handle, position, end, block_bytes * MAX_SCAN_BLOCKS)
                )
                if found is None:
                    break
                cut, advance = found
                cuts.append(cut)
                raw, text = cut, candidate + advance
                candidate = (text // block_bytes + 1) * block_bytes  # the first multiple past the cut
        cuts.append(end)
        blocks.extend(TextBlock(index, a, b) for a, b in pairwise(cuts) if b > a)
    return blocks


_BOM = b"\xef\xbb\xbf"


def starts_with_bom(path: Path) -> bool:
    """Whether `path` starts with a UTF-8 byte-order mark (its text starts after it)."""
    with _open(path) as handle:
        return handle.read(len(_BOM)) == _BOM


def text_has_cr(path: Path, end: int) -> bool:
    """Whether the first `end` bytes of `path` hold a CR (what `plan_text_blocks` needs to know)."""
    with _open(path) as handle:
        return _has_cr(handle, end)


def _has_cr(handle: BinaryIO, end: int) -> bool:
    """Whether the first `end` bytes hold a CR: one sequential read into a reused buffer and a memchr
    per MiB (~5 ms per 50 MB cached; not a memory map, which a file truncated meanwhile turns into SIGBUS)."""
    handle.seek(0)
    buffer = bytearray(_READ_CHUNK_BYTES)
    view = memoryview(buffer)
    position = 0
    while position < end and (count := handle.readinto(view[: min(len(buffer), end - position)])):
        if buffer.find(b"\r", 0, count) >= 0:
            return True
        position += count
    return False


def _raw_position(handle: BinaryIO, raw: int, text: int, target: int, end: int) -> int | None:
    """The file offset of text offset `target` (>= `text`, the text offset of file offset `raw`), where
    the text is the file's with each CRLF read as LF; None if the first `end` bytes hold less text.

    Reads on from `raw` in chunks, counting CRLFs (a chunk never ends between the CR and the LF).
    Inside the chunk that holds `target`, the offset k solves k = d + (CRLFs starting before k), with d
    = target - the chunk's text start: iterated from k = d (counting only the new bytes each time), it
    rises to the least solution, which is the CR, not the LF, of a CRLF the target falls on: the byte
    before a line start is then always its LF.
    """
    while raw < end:
        handle.seek(raw)
        chunk = handle.read(min(_READ_CHUNK_BYTES, end - raw))
        if not chunk:
            return None
        if chunk.endswith(b"\r") and raw + len(chunk) < end:
            chunk += handle.read(1)
        size = len(chunk) - chunk.count(b"\r\n")
        if target < text + size:
            offset, counted, crlfs = target - text, 0, 0  # crlfs: the CRLFs starting before `counted`
            while True:
                crlfs += chunk.count(b"\r\n", counted, offset + 1)
                counted, offset = offset, target - text + crlfs
                if offset == counted:
                    return raw + offset
        raw, text = raw + len(chunk), text + size
    return None


def _next_document_start(handle: BinaryIO, position: int, end: int, limit: int) -> tuple[int, int] | None:
    """The start of the first line after a blank line at or after `position` (None: none before
    `end`), with the length of the text from `position` to there (its bytes, less one per CRLF).

    If no blank line comes within `limit` bytes of text, the line start reached there is returned:
    the document is cut (see the module docstring).
    """
    handle.seek(position - 1)
    line_start, text = position, 0
    if handle.read(1) != b"\n":  # finish the line `position` falls into
        size, _, crlf = _next_line(handle)
        line_start, text = position + size, size - crlf
    while line_start < end:
        size, blank, crlf = _next_line(handle)
        if size == 0:
            return None
        line_start, text = line_start + size, text + size - crlf
        if blank or text > limit:
            return min(line_start, end), text
    return None


def _next_line(handle: BinaryIO) -> tuple[int, bool, bool]:
    """(bytes of the next line with its line end, whether it is blank, whether it ends with CRLF);
    size 0 at the end of the file. Read in bounded pieces: a file without newlines is not loaded whole."""
    size, blank, previous = 0, True, b""
    while piece := handle.readline(_READ_CHUNK_BYTES):
        size += len(piece)
        blank = blank and not piece.strip()
        if piece.endswith(b"\n"):
            return size, blank, piece.endswith(b"\r\n") or (piece == b"\n" and previous.endswith(b"\r"))
        previous = piece
    return size, blank, False


def iter_text_lines(path: Path, start: int, end: int) -> Iterator[list[str]]:
    """The lines (without the newline) of bytes `[start, end)` of `path`, in chunks of ~1 MiB.

    Raises DataError naming file, line and column for bytes that are not UTF-8. A byte-order
    mark at the very start of the file is dropped.
    """
    with _open(path) as handle:
        handle.seek(start)
        position = start
        # the start of a line whose end is not read yet: a bytearray, since re-joining it to every new
        # chunk (bytes) made reading a line of n MiB cost n^2/2 MiB of copying (a 1 GB line: ~500 GB)
        carry = bytearray()
        while position < end:
            data = handle.read(min(_READ_CHUNK_BYTES, end - position))
            if not data:
                break
            chunk_start = position - len(carry)
            position += len(data)
            if position < end:
                cut = data.rfind(b"\n") + 1
                if cut == 0:  # one very long line: keep reading
                    if b"\r" in data and (lone := _LONE_CR.search(data)) is not None:
                        raise _lone_cr_error(path, position - len(data) + lone.start())  # now, not at the end
                    carry += data
                    continue
                text, carry = bytes(carry) + data[:cut], bytearray(data[cut:])
            else:
                text, carry = bytes(carry) + data, bytearray()
            yield _decode_lines(path, text, chunk_start)
        if carry:
            yield _decode_lines(path, bytes(carry), position - len(carry))


def _decode_lines(path: Path, data: bytes, offset: int) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _utf8_error(path, offset + error.start, data[error.start]) from None
    if offset == 0:
        text = text.removeprefix("\ufeff")
    if "\r" in text and (lone := _LONE_CR.search(data)) is not None:
        raise _lone_cr_error(path, offset + lone.start())
    if "\x00" in text:  # as core's text readers: a NUL-filled damaged file read as nothing, "the\x00cat" as "thecat"
        line, column = _line_and_column(path, offset + data.index(b"\x00"))
        raise WorkerDataError(path, line, nul_byte(column), key="encoding")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the text ended with a newline
    return lines


def _lone_cr_error(path: Path, position: int) -> DataError:
    """The DataError for a CR at `position` that ends no line: CR-only line endings make the file one
    line, which the packer cuts to max_length tokens."""
    line, column = _line_and_column(path, position)
    return WorkerDataError(path, line, CARRIAGE_RETURN.format(column=column))


def _utf8_error(path: Path, position: int, byte: int) -> DataError:
    """The DataError for a bad byte at `position`."""
    line, column = _line_and_column(path, position)
    return WorkerDataError(path, line, not_utf8(path, byte, column), key="encoding")


def _line_and_column(path: Path, position: int) -> tuple[int, int]:
    """1-based line and byte column of byte `position`: counts lines from the start (error path only)."""
    line, line_start, offset = 1, 0, 0
    with _open(path) as handle:
        while offset < position and (chunk := handle.read(min(_READ_CHUNK_BYTES, position - offset))):
            line += chunk.count(b"\n")
            if (last := chunk.rfind(b"\n")) >= 0:
                line_start = offset + last + 1
            offset += len(chunk)
    return line, position - line_start + 1


def _open(path: Path) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as error:
        raise read_error(path, error) from None


class WorkerDataError(DataError):
    """A `DataError` that survives pickling, so `datasets.map` worker processes can raise it.

    (`DataError.__init__` takes four arguments, and exceptions are unpickled by calling the
    class with `args`, which holds only the formatted message.)
    """

    def __init__(self, path: str | Path, line: int, message: str, key: str | None = None):
        super().__init__(path, line, message, key)
        self._parts = (str(path), line, message, key)

    def __reduce__(self) -> tuple[type, tuple[str, int, str, str | None]]:
        return (type(self), self._parts)

"""ELECTRA pre-training data: corpus -> WordPiece -> packed examples (Arrow) -> padded batches.

`build_examples` turns a corpus (`CorpusConfig`) into packed examples with `datasets`:

* The corpus is cut into blocks that end at document boundaries (`xfer.electra.packing`); a
  `datasets.map` over the block list (`num_proc` processes) reads, tokenizes (HF `tokenizers`,
  one batched call per chunk of lines) and packs each block with its own seeded RNG. Examples
  therefore depend on the seed and the data, never on `num_proc`.
* The result is an Arrow table memory-mapped from `cache_dir/electra-examples-<key>/`, where the
  key hashes everything the examples depend on: the file contents (not their names or mtimes),
  the tokenizer's full serialised pipeline, max_length, the two probabilities, the seed,
  max_lines and the block size. A second call with the same inputs loads it without tokenizing;
  any change builds a new one. Builds run in a hidden temporary folder that is renamed into place
  only once complete (with a manifest listing every file, its size and sha256), under a file
  lock, so a killed or concurrent build (several ranks, several runs) never leaves a cache that
  looks complete but is not. Every open re-hashes the cache files against the manifest (one
  sequential read, ~0.1 s per 100 MB when cached by the OS): a damaged cache (missing,
  truncated or altered file) is rebuilt with a warning instead of training on garbage.
* The key must describe the bytes actually tokenized, but it is computed before they are read.
  So every input file's (size, mtime, inode, ctime) is recorded before it is hashed, checked
  again after each block is read, and after the build the files are hashed once more: a file
  that changed in between fails the build (DataError naming it; nothing is cached) instead of
  storing examples of the new text under the old text's key.
* A file end is a document end, as in the original ELECTRA: for `files:`, for a stream (a shard
  per file) and for a map-style load_dataset folder of .txt or JSON-lines files, which `datasets`
  loads as one table (`_file_row_ends` cuts its blocks at the files' ends).
* Packing truncates as the original ELECTRA does; the manifest records how much
  (`xfer.electra.packing.PackStats`), and lines longer than one example are warned about.
* `streaming=True` builds nothing: a `datasets.IterableDataset` whose shards are the blocks,
  packed on the fly while training (same examples as the map-style build, for files and
  `save_to_disk` folders). A streamed local data file or load_dataset folder is one block per file
  (its shards are its files; `datasets` cannot start a JSON or CSV file at a row): the same examples
  as the map-style build when no file has more than `block_rows` rows, which then also ends a block
  at each file end; past that the map-style build cuts a file into several blocks, each with its own
  RNG, so the same documents get other random draws (segment splits, short targets). Neither packs
  across a document end, as the original ELECTRA. A resume re-reads the shard it stopped in up to its
  cursor: for one large file, everything read before in that pass. Text files are checked after every
  block read as above, the files of a local `dataset:` after every chunk of rows (a corpus edited
  while it is streamed stops the run), and a line longer than an example is warned about (stderr,
  once per process) when first met: nothing is counted ahead. A streamed local data file (`dataset:` a .json/.jsonl/.csv/.tsv/.txt
  file) is parsed once, a line at a time, before the stream is returned (`_check_streamed_file`):
  a bad line fails the stage before training, with its line.

Columns: `input_ids` (int32 list, `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`) and
`segment_split` (int32: index of the first token of segment b, i.e. where token type 1 starts;
`len(input_ids)` for a single segment). Storing the split instead of `token_type_ids` halves the
cache; `PretrainBatches` expands it.

`PretrainBatches` is the `xfer.core.data.BatchSource` the trainer consumes: dynamic padding to
the longest example of each micro-batch, no masking (objectives mask on the fly with the
trainer's RNG), exact resume for both kinds of examples.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import glob
import hashlib
import json
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, islice, pairwise
from pathlib import Path
from typing import Any, Literal

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from xfer.core.atomic import fsync_dir, fsync_file, read_json, write_json
from xfer.core.data import BatchStream, per_process_share
from xfer.core.errors import DataError, UserError
from xfer.core.runs.fingerprint import file_sha256
from xfer.core.textfile import check_distinct
from xfer.electra.corpus import CorpusConfig
from xfer.electra.packing import (
    BLOCK_BYTES,
    BLOCK_ROWS,
    MAX_SCAN_BLOCKS,
    NOT_A_REGULAR_FILE,
    ExamplePacker,
    PackedExample,
    PackStats,
    TextBlock,
    WorkerDataError,
    block_rng,
    iter_text_lines,
    plan_text_blocks,
    prefix_ends,
    starts_with_bom,
    text_has_cr,
)

try:  # POSIX; elsewhere concurrent builders are still safe (rename), only not serialised
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

CACHE_FORMAT = "xfer.electra.examples/3"
"""Bump when the packing or the stored layout changes: old caches are then never reused.
(/2: the manifest records each file's sha256 and the packing counts; /3: text spelling a special
token such as "[SEP]" is tokenized as text, see `_backend`.)"""

EXAMPLE_FEATURES = datasets.Features(
    {"input_ids": datasets.List(datasets.Value("int32")), "segment_split": datasets.Value("int32")}
)
MANIFEST = "manifest.json"
_CACHE_PREFIX = "electra-examples-"
_LINE_ENDS = ".line-ends.json"  # which corpus files hold a CR (see _files_with_cr)
_CHECKED_TEXT = ".checked-text.json"  # streamed text files already decoded whole (see _check_streamed_text)
_CACHE_OWN = {"hf-datasets", ".file-hashes.json", _LINE_ENDS, _CHECKED_TEXT}  # besides the example folders
_PACK_STATS = "pack-stats"  # per-process block counts, inside a build's temporary folder only
_ROWS_PER_CHUNK = 2000
_FILE_ROWS = "xfer-file-rows.json"  # rows per file of a load_dataset folder, beside its copy (see _file_row_ends)
_FILE_BUILDERS = {
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".txt": "text",
}


# --- the public entry point ----------------------------------------------------------------------


def build_examples(
    corpus: CorpusConfig,
    files: list[Path],
    tokenizer_dir: Path,
    max_length: int,
    cache_dir: Path,
    seed: int,
    short_seq_prob: float = 0.05,
    single_segment_prob: float = 0.1,
    *,
    block_bytes: int = BLOCK_BYTES,
    block_rows: int = BLOCK_ROWS,
    warn: Callable[[str], None] | None = None,
) -> datasets.Dataset | datasets.IterableDataset:
    """Packed pre-training examples of `corpus` (see the module docstring).

    `files` is the resolved file list when `corpus.files` is set (the stage resolves globs and
    stage outputs with `ctx.resolve_files`); it is ignored for `corpus.dataset`. Safe to call on
    every rank at once: one process builds, the others wait for it and load the result.
    `block_bytes`/`block_rows` set the block size (tests make it small to get many blocks).
    `warn` receives the warnings (a damaged cache rebuilt, lines longer than an example); by
    default they are printed to stderr as `warning: ...`. The stage also puts them in its report.

    Raises DataError for unreadable/non-UTF-8 files (file and line), a file that changed while
    it was read, a dataset that cannot be loaded, a missing or non-text column, or a corpus
    without a single token.
    """
    from xfer.transformer.tokenization import WordPieceTokenizer

    _check_regular_files(corpus)
    _check_arguments(corpus, files, max_length, short_seq_prob, single_segment_prob, block_bytes, block_rows)
    warn = warn or _print_warning
    # read now, and handed to the workers as its JSON: the examples are packed with exactly the
    # tokenizer the cache key describes, whatever happens to the folder later in this process
    tokenizer = WordPieceTokenizer.from_dir(Path(tokenizer_dir))
    cache_dir = Path(cache_dir)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file in the way (of `data_cache` or of a parent), no permission: was a traceback
        why = "a file is in the way" if cache_dir.exists() else (error.strerror or str(error))
        raise DataError(cache_dir, 0, f"cannot create the example cache folder: {why}", key="data_cache") from None
    source = _open_source(corpus, [Path(f) for f in files], cache_dir, block_bytes, block_rows)
    tokenizer_json = tokenizer.backend.to_str()
    spec = _PackSpec(
        tokenizer_json,
        hashlib.sha256(tokenizer_json.encode()).hexdigest(),
        tokenizer.cls_id,
        tokenizer.sep_id,
        max_length,
        seed,
        short_seq_prob,
        single_segment_prob,
        source,
    )
    if source.num_blocks == 0:
        raise DataError(source.name, 0, "the corpus is empty (no lines to read)")
    if corpus.streaming:
        stream = _streaming_examples(spec, source.num_blocks, cache_dir)  # reads nothing until iterated
        if isinstance(source, _TextSource):
            _check_streamed_text(source, cache_dir)
            _mark_layout(stream, source)
        elif isinstance(source, _IterableRowSource):
            _check_streamed_file(corpus, cache_dir)
        return stream
    parts = {
        "format": CACHE_FORMAT,
        "source": source.key_parts(_FileHashes(cache_dir)),
        "tokenizer": spec.tokenizer_sha256,
        "max_length": max_length,
        "seed": seed,
        "short_seq_prob": short_seq_prob,
        "single_segment_prob": single_segment_prob,
        "max_lines": corpus.max_lines,
    }
    key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    digests = parts["source"].get("sha256", [])

    def inputs_unchanged() -> None:  # run after the build, before the cache is renamed into place
        source.snapshot.verify(digests)

    examples = _build_or_load(spec, key, parts, cache_dir, corpus.num_proc, inputs_unchanged, warn)
    manifest = cache_manifest(examples) or {}
    message = truncation_warning(manifest.get("packing"), max_length)
    if message:
        warn(message)
    return examples


def cache_manifest(examples: datasets.Dataset) -> dict[str, Any] | None:
    """The manifest of the cache `examples` was loaded from (inputs, counts, statistics), if any."""
    files = examples.cache_files
    return read_json(Path(files[0]["filename"]).parent / MANIFEST) if files else None


def truncation_warning(packing: dict[str, int] | None, max_length: int) -> str | None:
    """The warning for a corpus with lines longer than one example (None if it has none).

    Packing keeps at most `max_length - 2` tokens of such a line, as the original ELECTRA does,
    which silently throws away most of a corpus written one paragraph or document per line.
    `packing` is the manifest's `PackStats` record.
    """
    if not packing:
        return None
    stats = PackStats.from_dict(packing)
    if stats.long_lines == 0:
        return None
    tokens = max(stats.tokens, 1)
    return (
        f"{stats.long_lines} of the corpus's {stats.lines} line{'s' if stats.lines != 1 else ''} "
        f"({100 * stats.long_lines / max(stats.lines, 1):.3g}%) {'has' if stats.long_lines == 1 else 'have'} "
        f"more tokens than one example holds ({max_length - 2} = max_length - 2); packing cuts them, "
        f"as the original ELECTRA does, which dropped {stats.long_line_tokens_dropped} of their tokens: "
        f"{100 * stats.long_line_tokens_dropped / tokens:.1f}% of the corpus's {stats.tokens} tokens "
        f"({100 * stats.tokens_dropped / tokens:.1f}% dropped in all, with the usual cut of the sentence that "
        "fills an example). The corpus should have one sentence per line, with a blank line between documents."
    )


def _print_warning(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def example_statistics(examples: datasets.Dataset) -> dict[str, float]:
    """Counts for reports: examples, tokens, mean length, share of two-segment examples (percent)."""
    table = examples.with_format("arrow")[:]
    lengths = pc.list_value_length(table.column("input_ids")).to_numpy(zero_copy_only=False)
    splits = table.column("segment_split").to_numpy()
    count = len(lengths)
    return {
        "examples": count,
        "tokens": int(lengths.sum()),
        "mean_length": float(lengths.mean()) if count else 0.0,
        "two_segment_percent": 100.0 * float((splits < lengths).mean()) if count else 0.0,
    }


def _check_arguments(
    corpus: CorpusConfig,
    files: Sequence[Path],
    max_length: int,
    short_seq_prob: float,
    single_segment_prob: float,
    block_bytes: int,
    block_rows: int,
) -> None:
    if max_length < 5:
        raise ValueError(f"max_length must be at least 5 ([CLS], two [SEP] and tokens), got {max_length}")
    for name, p in (("short_seq_prob", short_seq_prob), ("single_segment_prob", single_segment_prob)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1], got {p}")
    if block_bytes < 1 or block_rows < 1:
        raise ValueError("block_bytes and block_rows must be positive")
    if corpus.dataset is None and not files:
        raise DataError("corpus.files", 0, "no files to read (the patterns matched nothing)")
    if corpus.dataset is not None and corpus.files is not None:
        raise ValueError("corpus: give either files or dataset, not both")


def _check_regular_files(corpus: CorpusConfig) -> None:
    """Refuse a FIFO, device or socket that a pattern of `corpus.files` names or matches.

    The stage's file list keeps regular files only, so such a path was dropped without a word:
    named alone, the build said "no files to read (the patterns matched nothing)", though the
    path exists; beside other files, the corpus silently lacked it. It cannot be read as a
    corpus file anyway (`NOT_A_REGULAR_FILE`)."""
    if corpus.files is None:
        return
    for pattern in corpus.files.patterns:
        for match in glob.glob(pattern, recursive=True):
            path = Path(match)
            if path.exists() and not path.is_file() and not path.is_dir():
                raise DataError(path, 0, f"matched by corpus.files {pattern!r}: {NOT_A_REGULAR_FILE}")


def _check_outside_cache(files: Sequence[Path], cache_dir: Path) -> None:
    """Refuse corpus files that are the example cache's own: a glob such as `data/**` around the cache
    (or `**` around the run directory, which holds the default cache) matched them on the next run:
    a manifest was packed as corpus text, or the build stopped on an Arrow file's bytes
    ("examples.arrow:1: not valid UTF-8"), which did not say why it was read. (Text files of the
    user's in the cache folder, `data_cache` set to the corpus folder, are fine.)"""
    cache = cache_dir.resolve()
    for path in files:
        resolved = path.resolve()
        if cache not in resolved.parents:
            continue
        top = resolved.relative_to(cache).parts[0]
        if top.lstrip(".").startswith(_CACHE_PREFIX) or top in _CACHE_OWN:
            raise DataError(
                path,
                0,
                f"is a file of the pre-training example cache in {cache_dir} (data_cache; by default the stage's "
                "`data` folder in the run directory), not corpus text: the corpus patterns match the cache's own "
                "files; make them match the text files only (e.g. *.txt), or keep the cache out of the corpus folder",
                key="corpus.files",
            )


# --- sources: where a block's lines come from ----------------------------------------------------


FileIdentity = tuple[int, int, int, int]
"""(size, mtime_ns, inode, ctime_ns): changes whenever a file is written or replaced (the ctime
cannot be set back by any tool)."""


def _identity(path: str) -> FileIdentity | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns)


def _changed_while_read(path: str) -> DataError:
    return WorkerDataError(
        path,
        0,
        "changed while it was being read for the pre-training examples (its contents, size, modification time "
        "or inode differ from when reading started): the examples would mix its old and new text, or not be of "
        "the text their cache key and the run's fingerprint name, so nothing built from it is used. Re-run once "
        "it no longer changes",
    )


@dataclass
class _InputSnapshot:
    """The identity of every file whose contents key the cache, taken before they are hashed or read.

    The key is computed from the files' sha256 before packing reads them; this is what makes
    the key hold for the bytes actually tokenized: `check` after each block, `verify` after the
    whole build (identity unchanged and contents hashing to the digests in the key).
    """

    paths: list[str] = field(default_factory=list)
    identities: list[FileIdentity | None] = field(default_factory=list)

    @classmethod
    def take(cls, paths: Sequence[str]) -> _InputSnapshot:
        return cls(list(paths), [_identity(p) for p in paths])

    def check(self, index: int) -> None:
        """Raise if file `index` was written, replaced or removed since the snapshot."""
        if _identity(self.paths[index]) != self.identities[index]:
            raise _changed_while_read(self.paths[index])

    def verify(self, digests: Sequence[str]) -> None:
        """`check` every file, then hash it again: its contents must still be `digests` (the key's).

        The re-hash also covers a same-size rewrite within the file system's timestamp
        granularity of the snapshot, which the identity alone can miss. One sequential read of
        the corpus, after a build that read and tokenized it (far slower).
        """
        if len(digests) != len(self.paths):
            return  # nothing hashed by file (an in-memory dataset)
        for index, (path, digest) in enumerate(zip(self.paths, digests, strict=True)):
            self.check(index)
            try:
                now = file_sha256(Path(path))
            except OSError:
                raise _changed_while_read(path) from None
            if now != digest:
                raise _changed_while_read(path)


@dataclass
class _TextSource:
    """Plain-text files cut into byte-range blocks."""

    paths: list[str]
    blocks: list[TextBlock]
    ends: list[int]
    snapshot: _InputSnapshot = field(default_factory=_InputSnapshot)
    # a file with CRs or a BOM over one block: xfer before its LF-text cut rule cut it elsewhere
    cuts_moved: bool = False

    @property
    def name(self) -> str:
        return self.paths[0] if len(self.paths) == 1 else f"{self.paths[0]} (+{len(self.paths) - 1} files)"

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def lines(self, block: int) -> Iterator[list[str]]:
        b = self.blocks[block]
        yield from iter_text_lines(Path(self.paths[b.file]), b.start, b.end)
        if self.snapshot.paths:  # the bytes just read are the ones hashed (and, streaming, fingerprinted)
            self.snapshot.check(b.file)

    def key_parts(self, hashes: _FileHashes) -> dict[str, Any]:
        return {
            "kind": "files",
            "sha256": hashes.files(self.paths),
            "bytes_read": self.ends,
            "blocks": [[b.file, b.start, b.end] for b in self.blocks],
        }


@dataclass
class _RowSource:
    """A map-style `datasets.Dataset` (one row per line) cut into row-range blocks."""

    dataset: datasets.Dataset
    name: str
    column: str
    blocks: list[tuple[int, int]]
    identity: dict[str, Any]
    snapshot: _InputSnapshot = field(default_factory=_InputSnapshot)

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def lines(self, block: int) -> Iterator[list[str]]:
        start, end = self.blocks[block]
        for a in range(start, end, _ROWS_PER_CHUNK):
            b = min(a + _ROWS_PER_CHUNK, end)
            try:
                values = self.dataset[a:b][self.column]
            except UnicodeDecodeError:
                raise self._undecodable(a, b) from None
            yield _row_texts(values, self.name, self.column, a)

    def _undecodable(self, start: int, end: int) -> DataError:
        """pyarrow's JSON reader keeps bytes that are not UTF-8 in a string column; reading them back
        raised a bare UnicodeDecodeError from inside `datasets.map`. Name the line of a local file,
        else the row."""
        path = Path(self.name)
        located = _locate_malformed(path) if path.is_file() else None
        if located is not None:
            return WorkerDataError(located.path, located.line, located.message, located.key)
        for row in range(start, end):
            try:
                self.dataset[row][self.column]
            except UnicodeDecodeError:
                return WorkerDataError(self.name, 0, f"row {row + 1} is not valid UTF-8 text", key=self.column)
        return WorkerDataError(self.name, 0, f"rows {start + 1}-{end} are not valid UTF-8 text", key=self.column)

    def key_parts(self, hashes: _FileHashes) -> dict[str, Any]:
        identity = dict(self.identity)
        files = identity.pop("files", None)
        if files:
            identity["sha256"] = hashes.files(files)
        return {"kind": "dataset", **identity, "blocks": self.blocks}


@dataclass
class _IterableRowSource:
    """A streaming `datasets.IterableDataset` of lines; its own shards (data files) are the blocks."""

    dataset: datasets.IterableDataset
    name: str
    column: str
    max_lines: int | None
    # the local files read (none for a Hub name): a stream is not cached, but it reads them every pass
    snapshot: _InputSnapshot = field(default_factory=_InputSnapshot)

    @property
    def num_blocks(self) -> int:
        return 1 if self.max_lines is not None else self.dataset.num_shards

    def lines(self, block: int) -> Iterator[list[str]]:
        if self.max_lines is not None:  # a deterministic prefix of the whole stream
            rows: Iterator[dict[str, Any]] = iter(self.dataset.take(self.max_lines))
        else:
            rows = iter(self.dataset.shard(num_shards=self.dataset.num_shards, index=block, contiguous=True))
        index = 0
        part = "the stream" if self.max_lines is not None else f"shard {block} of {self.dataset.num_shards}"
        while chunk := self._next_rows(rows, index, part):
            if self.column not in chunk[0]:
                raise _missing_column(self.name, self.column, list(chunk[0]))
            values = [r[self.column] for r in chunk]
            if any(v is not None and not isinstance(v, str) for v in values):
                # a column typed Json by such a row also decodes its strings ("007" as 7, "null" as None), so
                # the row found here may be text in the file: name the line that is not
                located = _json_lines_problem(Path(self.name), self.column)
                if located is not None:
                    raise WorkerDataError(located.path, located.line, located.message, located.key)
            yield _row_texts(values, self.name, self.column, index)
            index += len(chunk)
            self._check_unchanged()
        self._check_unchanged()

    def _check_unchanged(self) -> None:
        """Raise if a local file of the stream was written or replaced since the stream was opened.

        As `_TextSource` does for `files:` streams: a `dataset:` file edited while training read it was
        read on, so the model trained on text the run's fingerprint does not name; killed and the file
        put back, the run even resumed without a word (two corpora in one model). A stat per file."""
        for index in range(len(self.snapshot.paths)):
            self.snapshot.check(index)

    def key_parts(self, hashes: _FileHashes) -> dict[str, Any]:  # pragma: no cover - streams are not cached
        raise NotImplementedError

    def _next_rows(self, rows: Iterator[dict[str, Any]], index: int, part: str) -> list[dict[str, Any]]:
        """Up to `_ROWS_PER_CHUNK` more rows. A stream is parsed only while training reads it, so a
        malformed file (a bad JSON line, a ragged CSV row) or a lost connection surfaced there as
        pyarrow's/pandas' own exception and a traceback; it becomes a DataError naming the source."""
        try:
            return list(islice(rows, _ROWS_PER_CHUNK))
        except DataError:
            raise
        except Exception as error:  # datasets raises many types (pyarrow, pandas, fsspec, connection)
            # a byte that is not UTF-8 or a bad JSON line in a local file said "at or after row 1" and a
            # position in pyarrow's chunk: name its line, as `corpus.files` and a map-style dataset do
            # (the file passed `_check_streamed_file` before training: it was changed since)
            path = Path(self.name)
            located = None
            if path.is_file() and path.suffix.lower() in (".json", ".jsonl"):
                located = _json_lines_problem(path, self.column)  # a line at a time, never the file whole
            elif path.is_file():  # .csv/.tsv/.txt: streamed a line at a time too
                located = _locate_malformed(path)
            if located is not None:
                raise WorkerDataError(located.path, located.line, located.message, located.key) from None
            raise WorkerDataError(
                self.name,
                0,
                f"reading failed at or after row {index + 1} of {part}: {type(error).__name__}: {error}",
                key=self.column,
            ) from None


def _row_texts(values: list[Any], name: str, column: str, first_row: int) -> list[str]:
    """Row values as lines; a null is an empty line (CSV loads empty cells as null): a document end."""
    for offset, value in enumerate(values):
        if value is not None and not isinstance(value, str):
            raise WorkerDataError(
                name, first_row + offset + 1, f"expected text, got {type(value).__name__}", key=column
            )
    return [v or "" for v in values]


def _missing_column(name: str, column: str, available: Sequence[str]) -> DataError:
    return DataError(
        name, 0, f"no column {column!r} (columns: {', '.join(available) or 'none'}); set corpus.text_column", key=column
    )


def _open_source(
    corpus: CorpusConfig, files: list[Path], cache_dir: Path, block_bytes: int, block_rows: int
) -> _TextSource | _RowSource | _IterableRowSource:
    if corpus.dataset is None:
        check_distinct(files, "corpus.files")
        _check_outside_cache(files, cache_dir)
        paths = [str(f) for f in files]
        snapshot = _InputSnapshot.take(paths)  # before anything reads them: planning, hashing, packing
        ends = prefix_ends(files, corpus.max_lines)
        crs = _files_with_cr(files, ends, snapshot, cache_dir)
        blocks = plan_text_blocks(files, ends, block_bytes, crs)
        cuts_moved = any(
            end > block_bytes and (cr or starts_with_bom(path)) for path, end, cr in zip(files, ends, crs, strict=True)
        )
        return _TextSource(paths, blocks, ends, snapshot, cuts_moved)
    # the local files' identity from before anything read them: a stream reads them while training, and
    # a map-style load copies them under the sha256 it hashed first (`_local_dataset_cache`)
    local = _InputSnapshot.take([str(f) for f in _local_files(corpus, cache_dir)])
    loaded = _load_dataset(corpus, cache_dir)
    name, column = corpus.dataset, corpus.text_column
    if not isinstance(loaded, datasets.IterableDataset):  # (a stream checks them after every chunk it reads)
        _check_loaded_unchanged(local, loaded, cache_dir)
    else:
        if loaded.column_names is not None and column not in loaded.column_names:
            raise _missing_column(name, column, loaded.column_names)
        # a typed source (parquet) says on opening what the map-style build says: a column of numbers
        # failed only at the first training step, as "row 1: expected text, got int"
        feature = (loaded.features or {}).get(column)
        if feature is not None and not (
            isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string", "null")
        ):
            located = _json_lines_problem(Path(name), column)
            raise located or DataError(name, 0, f"column {column!r} holds {feature}, not text", key=column)
        return _IterableRowSource(loaded, name, column, corpus.max_lines, local)
    if column not in loaded.column_names:
        raise _missing_column(name, column, loaded.column_names)
    feature = loaded.features[column]
    if not (isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")):
        located = _json_lines_problem(Path(name), column)
        raise located or DataError(name, 0, f"column {column!r} holds {feature}, not text", key=column)
    # rows as Python strings whatever format the folder was saved with: save_to_disk keeps a dataset's
    # format, and an "arrow" one gave pyarrow scalars, refused as "row 1: expected text, got StringScalar"
    loaded = loaded.select_columns([column]).with_format(None)
    all_rows = len(loaded)
    if corpus.max_lines is not None and corpus.max_lines < len(loaded):
        loaded = loaded.select(range(corpus.max_lines))
    files = _split_data_files(corpus) if corpus.max_lines is None or Path(name).is_file() else []
    if loaded.data.column(column).null_count:  # a JSON-lines row without the key is loaded as a null too
        _check_json_rows(files, corpus, cache_dir)  # (a file that passed before is not read again)
    else:  # nothing to parse; the pre-flight's pass, if this process ran it, is kept for the next run's
        _check_json_rows(files, corpus, cache_dir, read=False)
    identity: dict[str, Any] = {"rows": len(loaded), "column": column, "split": corpus.split}
    file_ends = _file_row_ends(corpus, cache_dir, all_rows, local)
    cache_files = [f["filename"] for f in loaded.cache_files]
    snapshot = _InputSnapshot()
    if cache_files:
        identity["files"] = sorted(cache_files)
        snapshot = _InputSnapshot.take(identity["files"])
    else:  # in memory: fall back on the fingerprint datasets computed
        identity["fingerprint"] = loaded._fingerprint
    blocks = _plan_row_blocks(loaded, column, block_rows, file_ends)
    return _RowSource(loaded, name, column, blocks, identity, snapshot)


def _file_row_ends(corpus: CorpusConfig, cache_dir: Path, rows: int, local: _InputSnapshot) -> list[int]:
    """The row after each file's last (but the last file's) of a map-style load_dataset folder of .txt
    or JSON-lines files.

    `datasets` loads such a folder as one table, so the last document of a file and the first of the
    next were packed into one example ("aaa ... bbb ..."), where the original ELECTRA, a `files:`
    corpus and the same folder streamed (a shard per file) end a document at each file end:
    `_plan_row_blocks` ends a block there (a block end is a document end). The builders make a row
    of each line (text: universal newlines; JSON lines: each line that is not blank), so the counts
    are line counts; they are kept beside the folder's copy (`_local_dataset_cache`, named by the
    files' contents), so a cached build does not read the folder again. No ends when the files
    cannot be told (a configuration, a dataset card, CSV, mixed formats) or their counts do not add
    up to `rows` (not the layout assumed, e.g. a JSON array): the folder is packed as one table."""
    path = Path(str(corpus.dataset))
    if not path.is_dir():
        return []
    files = _split_data_files(corpus)
    kinds = {f.suffix.lower() for f in files}
    count = _text_rows if kinds == {".txt"} else _json_line_rows if kinds <= {".json", ".jsonl"} else None
    if len(files) < 2 or count is None:
        return []
    names = [str(f.resolve()) for f in files]
    record = Path(_local_dataset_cache(cache_dir, _folder_files(path), False)) / _FILE_ROWS
    saved = read_json(record) or {}
    counts = saved.get("rows") if saved.get("files") == names and saved.get("format") == 1 else None
    if not (isinstance(counts, list) and len(counts) == len(files) and all(isinstance(c, int) for c in counts)):
        counts = [count(f) for f in files]
        for index in range(len(local.paths)):  # the counts are of the text loaded
            local.check(index)
        with contextlib.suppress(OSError):  # only spares the next start a read: never fatal
            write_json(record, {"format": 1, "files": names, "rows": counts}, indent=None)
    ends = list(accumulate(counts))
    return ends[:-1] if ends[-1] == rows else []


def _text_rows(path: Path) -> int:
    """The rows `datasets`' text builder makes of `path`: its lines, "\\n", "\\r\\n" and "\\r" ending one."""
    breaks, last, previous_cr = 0, b"", False
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 24):
            breaks += chunk.count(b"\n") + chunk.count(b"\r") - chunk.count(b"\r\n")
            breaks -= previous_cr and chunk.startswith(b"\n")  # a CRLF cut between two reads
            previous_cr, last = chunk.endswith(b"\r"), chunk[-1:]
    return breaks + (last not in (b"", b"\n", b"\r"))


def _json_line_rows(path: Path) -> int:
    """The rows `datasets`' JSON builder makes of a JSON-lines file: its lines that are not blank."""
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip())


def _check_loaded_unchanged(snapshot: _InputSnapshot, loaded: datasets.Dataset, cache_dir: Path) -> None:
    """Raise if a local file changed while `datasets` copied it into the stage's cache, and drop that copy.

    The copy's folder is named by the sha256 hashed before `load_dataset` read the file: edited in between
    (converting a large file takes minutes), the examples were of the new text, the run's fingerprint
    and the copy's folder of the old one; the stage completed, and with the file put back a next run
    skipped it as done. The copy is deleted (only inside the cache's `hf-datasets`), so no later load of
    the old text can be served the new one."""
    for index, path in enumerate(snapshot.paths):
        if _identity(path) == snapshot.identities[index]:
            continue
        root = (cache_dir / "hf-datasets").resolve()
        for folder in {Path(f["filename"]).resolve().parent for f in loaded.cache_files}:
            if root in folder.parents:
                shutil.rmtree(folder, ignore_errors=True)
        raise _changed_while_read(path)


def _local_files(corpus: CorpusConfig, cache_dir: Path) -> list[Path]:
    """The local files `corpus.dataset` may read: the file itself, every file `load_dataset` may read in a
    folder (`_folder_files`; not the example cache's, should `data_cache` be inside it), none for a Hub name."""
    path = Path(str(corpus.dataset))
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    cache = cache_dir.resolve()
    return [f for f in _folder_files(path) if cache not in f.resolve().parents]


def local_dataset_files(corpus: CorpusConfig, cache_dir: Path) -> list[Path]:
    """The local files a `dataset:` corpus reads (`_local_files`; none for a Hub name): the stage
    compares them with the run's fingerprint (`check_fingerprinted_corpus`)."""
    return _local_files(corpus, Path(cache_dir))


def _json_lines_problem(path: Path, column: str, max_rows: int | None = None) -> DataError | None:
    """The first line of a local JSON-lines file that is not a row of text, or None: a line that is
    not a JSON object, an object without `column`, or one whose `column` is not text (a number, a
    list, an object; null is an empty row, a document end, as an empty CSV cell). Reads the file
    once, a line at a time (never whole); stops after `max_rows` rows (`corpus.max_lines`).

    Why each: one non-text row types the whole column `Json`, and the error said only "column 'text'
    holds Json(decode=True), not text"; a row without the key was loaded as a null, i.e. silently
    read as a document end, its text lost (a misspelt key, a record of another kind): a CSV row
    missing its cell is an error too. A file whose first record is not an object on one line (one
    JSON document, an array) is not JSON lines: None, `datasets` reads it whole."""
    from xfer.core.textfile import stream_lines

    if not path.is_file() or path.suffix.lower() not in (".json", ".jsonl"):
        return None
    rows = 0
    try:
        for number, line in stream_lines(path):
            if not line.strip():
                continue
            if max_rows is not None and rows >= max_rows:
                return None
            rows += 1
            try:
                value = json.loads(line)
            except ValueError as bad:
                if rows == 1:
                    return None  # one JSON document over several lines, not JSON lines
                return DataError(
                    path, number, f"not valid JSON at column {bad.colno}: {bad.msg} (one JSON object per line)"
                )
            if not isinstance(value, dict):
                if rows == 1:
                    return None
                return DataError(path, number, f"a JSON {type(value).__name__}, not an object")
            if column not in value:
                keys = ", ".join(map(repr, value)) or "none"
                return DataError(
                    path,
                    number,
                    f"no {column!r} key (keys: {keys}): a row without the text column is not a document end "
                    f'(write "{column}": "" for one), or set corpus.text_column',
                    key=column,
                )
            cell = value[column]
            if cell is not None and not isinstance(cell, str):
                return DataError(path, number, f"expected text, got {type(cell).__name__}", key=column)
    except DataError as located:  # a byte that is not UTF-8, a NUL: with its line
        return located
    except OSError:
        return None
    return None


def _files_with_cr(files: Sequence[Path], ends: Sequence[int], snapshot: _InputSnapshot, cache_dir: Path) -> list[bool]:
    """Whether each file's first `ends[i]` bytes hold a CR (`plan_text_blocks` cuts such a file where
    its LF twin is cut), remembered in `cache_dir` by the file's identity.

    Finding out reads the whole file: fast when it is in the OS cache (~5 ms per 50 MB), but minutes
    at every start or resume of a run over a corpus of hundreds of GB on a slow disk, where planning
    used to read only around each cut. A file's answer is kept with its identity (size, mtime,
    inode, ctime: any write changes it) and the bytes planned, as `_check_streamed_text` keeps its
    checks; a file modified within `RACY_SECONDS` of the scan is not recorded."""
    from xfer.core.runs.fingerprint import RACY_SECONDS

    record = cache_dir / _LINE_ENDS
    entries = (read_json(record) or {}).get("files")
    known = {  # (a damaged record only costs a scan)
        json.dumps(e[:-1]): e[-1] for e in entries or () if isinstance(e, list) and len(e) == 4 and e[-1] in (0, 1)
    }
    found: list[bool] = []
    new: dict[str, bool] = {}
    names: set[str] = set()
    used: set[str] = set()
    for index, (path, end) in enumerate(zip(files, ends, strict=True)):
        identity, name = snapshot.identities[index], str(Path(path).resolve())
        mark = json.dumps([name, identity, end])
        names.add(name)
        if end <= 0 or mark in known:
            found.append(end > 0 and bool(known[mark]))
            used.add(mark)
            continue
        started = time.time()
        found.append(text_has_cr(Path(path), end))
        if identity is not None and started - identity[1] / 1e9 > RACY_SECONDS:
            new[mark] = found[-1]
    if new:  # (an earlier answer for a file's other contents is dropped)
        kept = {m: crs for m, crs in known.items() if json.loads(m)[0] not in names or m in used}
        listing = [[*json.loads(m), crs] for m, crs in sorted({**kept, **new}.items())]
        with contextlib.suppress(OSError):  # only spares the next start a read: never fatal
            write_json(record, {"files": listing}, indent=None)
    return found


def _check_streamed_text(source: _TextSource, cache_dir: Path) -> None:
    """Decode every byte a stream of text files will pack, before training starts.

    A stream is read only while training: a byte that is not UTF-8 or a CR-only line end in a late
    block stopped the run hours in, and the fix (editing the file) changes the run's fingerprint, so
    the stage started over. One sequential read (no tokenizing). A file that passed is recorded in
    `cache_dir` by its identity (size, mtime, inode, ctime: any write changes it) and the bytes read,
    so a resume or a second run does not read it again; as for the fingerprint's hashes, a file
    modified within `RACY_SECONDS` of the check is not recorded (a next write could keep its identity)."""
    from xfer.core.runs.fingerprint import RACY_SECONDS

    record = cache_dir / _CHECKED_TEXT
    checked = {json.dumps(entry) for entry in (read_json(record) or {}).get("checked", [])}
    passed = []
    for index, (path, end) in enumerate(zip(source.paths, source.ends, strict=True)):
        identity = source.snapshot.identities[index]
        mark = [str(Path(path).resolve()), identity, end]
        if end <= 0 or json.dumps(mark) in checked:
            continue
        started = time.time()
        for _ in iter_text_lines(Path(path), 0, end):
            pass
        source.snapshot.check(index)  # the bytes decoded are those of the identity recorded
        if identity is not None and started - identity[1] / 1e9 > RACY_SECONDS:
            passed.append(json.dumps(mark))
    if passed:
        entries = [json.loads(m) for m in sorted(checked.union(passed))]
        with contextlib.suppress(OSError):  # only spares the next start a read: never fatal
            write_json(record, {"checked": entries}, indent=None)


def _check_streamed_file(corpus: CorpusConfig, cache_dir: Path | None) -> None:
    """Parse a streamed local data file (`dataset:` a .json/.jsonl/.csv/.tsv/.txt file, or those of the
    split read from a load_dataset folder) once, before training starts, and raise the first problem
    with its line.

    A stream is parsed only while training reads it: a malformed line late in the file stopped the run
    hours in (as "reading failed at or after row 1 of shard 0", the line not named), and a JSON-lines row
    without the text key was read as a document end without a word, while `files:` corpora are decoded
    whole before training (`_check_streamed_text`). One sequential read, a line at a time, no tokenizing
    (a .parquet file is typed and its column checked on opening: not read). A file that passed is
    recorded in `cache_dir` (None: not recorded) by its identity, as `_check_streamed_text` records text
    files, so a resume does not read it again; a file modified within `RACY_SECONDS` of the check is not
    recorded."""
    files = _split_data_files(corpus)
    if len(files) > 1 and corpus.max_lines is not None:
        return  # a prefix over several files: which rows it holds is the stream's business

    def problem(path: Path) -> DataError | None:
        if path.suffix.lower() in (".json", ".jsonl"):
            return _json_lines_problem(path, corpus.text_column, corpus.max_lines)
        return _locate_malformed(path)  # bad bytes (with their line), ragged CSV/TSV rows: streams the file

    _check_files_once(files, corpus, cache_dir, problem)


def _check_json_rows(files: Sequence[Path], corpus: CorpusConfig, cache_dir: Path | None, *, read: bool = True) -> None:
    """`_json_lines_problem` on the JSON-lines files among `files`, each read once per identity: a map-style
    dataset with legitimate nulls (empty rows as `"text": null`) was parsed whole again at every stage
    start and every resume. The record is the streamed check's (`_check_streamed_file` runs the same
    check on a JSON-lines file), so one passed either way is not read again by the other. `read=False`
    parses nothing: it only records the files this process has already passed (see `_PASSED_HERE`)."""
    json_files = [path for path in files if path.suffix.lower() in (".json", ".jsonl")]
    _check_files_once(
        json_files,
        corpus,
        cache_dir,
        (lambda path: _json_lines_problem(path, corpus.text_column, corpus.max_lines)) if read else None,
    )


_PASSED_HERE: set[str] = set()
"""The marks (`_check_files_once`) of the files this process found to pass, not modified within
`RACY_SECONDS` of their check. `xfer run` runs the pre-flight and then the stage in one process, and
the pre-flight has no record to read or write without `data_cache` (it is not told the stage's folder):
a streamed JSON-lines file was parsed whole by the pre-flight and at once again by the stage, and a
map-style one's pass was never recorded in the stage's folder, where a later pre-flight could find it.
A mark holds the file's identity, so a file written since is not in it."""


def _check_files_once(
    files: Sequence[Path],
    corpus: CorpusConfig,
    cache_dir: Path | None,
    problem: Callable[[Path], DataError | None] | None,
) -> None:
    """Raise the first `problem` of `files`, skipping those recorded in `cache_dir`, or passed in this
    process (`_PASSED_HERE`), under this identity, column and `max_lines`, and record the files that pass
    (not those modified within `RACY_SECONDS`: a next write could keep their identity). `cache_dir` None:
    nothing recorded there. `problem` None: nothing read, only the files passed in this process recorded."""
    from xfer.core.runs.fingerprint import RACY_SECONDS

    record = cache_dir / _CHECKED_TEXT if cache_dir is not None else None
    checked = {json.dumps(entry) for entry in (read_json(record) or {}).get("checked", [])} if record else set()
    passed: set[str] = set()
    for path in files:
        identity = _identity(str(path))
        mark = json.dumps([str(path.resolve()), identity, f"rows {corpus.text_column} {corpus.max_lines}"])
        if identity is None or mark in checked:
            continue
        if mark in _PASSED_HERE:  # (the pre-flight of this `xfer run`): recorded, not read again
            passed.add(mark)
            continue
        if problem is None:
            continue
        started = time.time()
        found = problem(path)
        if found is not None:
            raise found
        if _identity(str(path)) != identity:
            raise _changed_while_read(str(path))
        if started - identity[1] / 1e9 > RACY_SECONDS:
            passed.add(mark)
    _PASSED_HERE.update(passed)
    if passed and record is not None:
        entries = [json.loads(m) for m in sorted(checked | passed)]
        with contextlib.suppress(OSError):  # only spares the next start a read: never fatal
            write_json(record, {"checked": entries}, indent=None)


def check_local_dataset(corpus: CorpusConfig, cache_dir: Path | None = None) -> None:
    """The checks of a local `dataset:` file's lines the stage runs when it starts, for the pre-flight
    (`xfer validate --data`, `xfer run` before any stage trains): a streamed file parsed as
    `_check_streamed_file` does, a map-style one's JSON-lines files as `_open_source` does (a row without
    the text key, a bad line, a value that is not text). Reads no more than those; raises the first
    problem (DataError with its line). `cache_dir`: where passed files are recorded (the stage's
    `data_cache`), None to record nothing."""
    if corpus.dataset is None:
        return
    if corpus.streaming:
        _check_streamed_file(corpus, cache_dir)
        return
    single = Path(str(corpus.dataset)).is_file()
    _check_json_rows(_split_data_files(corpus) if corpus.max_lines is None or single else [], corpus, cache_dir)


def _split_data_files(corpus: CorpusConfig) -> list[Path]:
    """The local line-based data files (.json/.jsonl/.csv/.tsv/.txt) `corpus.dataset` reads for its split:
    the file itself, or those a load_dataset folder (no configuration named) resolves for the split by
    `datasets`' own file-name patterns; none when that cannot be told (the checks are then skipped)."""
    path = Path(str(corpus.dataset))
    kinds = (".json", ".jsonl", ".csv", ".tsv", ".txt")
    if path.is_file():
        return [path] if path.suffix.lower() in kinds else []
    if not path.is_dir() or corpus.dataset_config is not None or (path / "README.md").exists():
        return []  # a configuration (or a dataset card's YAML) may choose other files
    if (path / "state.json").is_file() or (path / "dataset_dict.json").is_file():
        return []  # a save_to_disk folder: Arrow files, typed
    try:
        from datasets.data_files import DataFilesDict, get_data_patterns

        resolved = DataFilesDict.from_patterns(get_data_patterns(str(path)), base_path=str(path))
        files = [Path(f) for f in resolved.get(corpus.split, [])]
    except Exception:  # no pattern matched, an unknown layout: datasets' own error, or nothing to check
        return []
    return [f for f in files if f.is_file() and f.suffix.lower() in kinds]


def _local_dataset_cache(cache_dir: Path, files: Sequence[Path], streaming: bool) -> str:
    """The `datasets` cache folder for a local data file or folder: one per content of its files.

    `datasets` decides whether its Arrow copy of a local file is current from the file's path and
    modification time, so a file rewritten with its old mtime (`cp -p`, `rsync -t`, `tar x`) kept
    its stale copy, and the examples (keyed by that copy) were of the old text. Keyed by the files'
    sha256, a changed file always gets a fresh copy. A stream reads the files themselves.
    """
    root = cache_dir / "hf-datasets"
    if streaming:
        return str(root)
    digests = _FileHashes(cache_dir).files([str(f) for f in files])
    listing = [[str(f), d] for f, d in zip(files, digests, strict=True)]
    return str(root / f"local-{hashlib.sha256(json.dumps(listing).encode()).hexdigest()[:16]}")


def _folder_files(folder: Path) -> list[Path]:
    """The files `load_dataset` may read in a local dataset folder (it skips hidden ones too)."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


_LAYOUT = "xfer.electra text blocks: "  # how a stream of text files carries its blocks (see _mark_layout)


def _mark_layout(stream: datasets.IterableDataset, source: _TextSource) -> None:
    """Record in `stream.info` which byte ranges its shards are, for `PretrainBatches`' cursor.

    A stream's cursor names shards by number: blocks cut elsewhere (another cut rule after an
    upgrade: CRLF or BOM text has been cut as its LF twin since stop 36) kept the number and
    resumed onto other text without a word. The digest of the blocks goes into the cursor and
    a resume compares it; `moved` tells a cursor saved before the digest existed whether the old
    rule cut this corpus elsewhere."""
    blocks = [[b.file, b.start, b.end] for b in source.blocks]
    digest = hashlib.sha256(json.dumps(blocks).encode()).hexdigest()
    stream.info.description = _LAYOUT + json.dumps({"digest": digest, "moved": source.cuts_moved})


def _stream_layout(stream: datasets.IterableDataset) -> dict[str, Any] | None:
    description = stream.info.description or ""
    return json.loads(description[len(_LAYOUT) :]) if description.startswith(_LAYOUT) else None


def _streaming_examples(spec: _PackSpec, num_blocks: int, cache_dir: Path) -> datasets.IterableDataset:
    """The packed examples of every block, generated while training reads them.

    What `IterableDataset.from_generator` does, but with the builder's cache in `cache_dir`:
    from_generator always opens the user's default datasets cache (~/.cache/huggingface/datasets),
    which left a lock file there per run and failed with a traceback where that folder cannot be
    written (a read-only home on a cluster)."""
    from datasets.io.generator import GeneratorDatasetInputStream

    return GeneratorDatasetInputStream(
        generator=_generate_examples,
        features=EXAMPLE_FEATURES,
        gen_kwargs={"blocks": list(range(num_blocks)), "spec": spec},
        cache_dir=str(cache_dir / "hf-datasets"),
        streaming=True,
    ).read()


def _load_dataset(corpus: CorpusConfig, cache_dir: Path) -> datasets.Dataset | datasets.IterableDataset:
    """Open `corpus.dataset`: a save_to_disk folder, a local data file, or a load_dataset name/folder.

    A save_to_disk folder stays map-style even when streaming (it is memory-mapped already, and
    then streaming gets the exact blocks of the map-style build).
    """
    name, split = str(corpus.dataset), corpus.split
    path = Path(name)
    try:
        if path.is_dir():
            _check_cache_outside_folder(path, cache_dir)
        if path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file()):
            return _load_saved(path, name, split)
        if not path.exists() and _names_a_path(name):
            raise DataError(name, 0, "no such file or folder")
        if path.exists() and not path.is_file() and not path.is_dir():  # was "Couldn't find any data file"
            raise DataError(name, 0, NOT_A_REGULAR_FILE)
        if path.is_file():
            builder = _FILE_BUILDERS.get(path.suffix.lower())
            if builder is None:
                raise DataError(
                    name, 0, f"unknown data file type {path.suffix!r} (use {', '.join(sorted(_FILE_BUILDERS))})"
                )
            options = _csv_options(path.suffix.lower(), corpus.text_column)
            return datasets.load_dataset(
                builder,
                data_files={split: str(path)},
                split=split,
                cache_dir=_local_dataset_cache(cache_dir, [path], corpus.streaming),
                streaming=corpus.streaming,
                **options,
            )
        if path.is_dir():  # a load_dataset folder of data files: local, so cached with the stage
            files = _folder_files(path)
            kinds = {f.suffix.lower() for f in files if f.suffix.lower() in _FILE_BUILDERS}
            return datasets.load_dataset(
                name,
                corpus.dataset_config,
                split=split,
                cache_dir=_local_dataset_cache(cache_dir, files, corpus.streaming),
                streaming=corpus.streaming,
                **(_csv_options(kinds.pop(), corpus.text_column) if len(kinds) == 1 else {}),  # all .csv, or .tsv
            )
        # A Hub name: the user's own datasets cache (HF_DATASETS_CACHE), as `datasets` and the GLUE
        # tasks' `source: hub` use it. A cache private to the stage would download the corpus again
        # for every run directory, and offline (HF_DATASETS_OFFLINE=1) it would never hold the copy
        # the user fetched beforehand.
        return datasets.load_dataset(name, corpus.dataset_config, split=split, streaming=corpus.streaming)
    except DataError:
        raise
    except Exception as error:  # datasets raises many types for bad names, splits, files and formats
        # Only an unreachable Hub gets the offline advice (datasets raises ConnectionError for it, online
        # and offline); a misspelt name is a DatasetNotFoundError, where that advice would mislead.
        located = _locate_malformed(path) if path.is_file() else None
        if located is not None:
            raise located from None
        hint = _offline_hint() if not path.exists() and isinstance(error, ConnectionError) else ""
        raise DataError(name, 0, f"cannot load this dataset: {type(error).__name__}: {error}.{hint}") from None


def _check_cache_outside_folder(folder: Path, cache_dir: Path) -> None:
    """Refuse an example cache inside the local dataset folder `dataset:` names.

    `load_dataset` reads every file of the folder: from the second build on it read the cache's own
    files too, and its choice of builder follows the most common file type, so the corpus became the
    cache's Arrow copies of itself (the corpus several times over) without a word; each build also
    hashed the cache into the name of a fresh copy, so the cache grew by a copy of the corpus at
    every stage start. And the run's fingerprint signs every file of the folder (a save_to_disk one
    too, a hidden cache too): the cache written while the stage ran made it stale, so the completed
    stage pre-trained again at the next `xfer run`."""
    root, cache = folder.resolve(), cache_dir.resolve()
    if cache == root or root in cache.parents:
        raise DataError(
            cache_dir,
            0,
            f"the example cache is inside the dataset folder {folder} (corpus.dataset): load_dataset would read "
            "the cache's own files as corpus data, and the run's fingerprint signs them with the folder (the "
            "stage would pre-train again at every run). Set data_cache to a folder outside it",
            key="data_cache",
        )


def _load_saved(path: Path, name: str, split: str) -> datasets.Dataset:
    """A `save_to_disk` folder: a Dataset, or the split `split` of a DatasetDict.

    Only the split read is opened: `load_from_disk` of a whole DatasetDict failed with a bare
    "IndexError: list index out of range" when any split had no rows (an empty `validation`, say),
    so its non-empty `train` could not be used; and a Dataset without rows said the same. Such a
    split is the error "holds no rows" instead (an empty corpus)."""
    splits = (read_json(path / "dataset_dict.json") or {}).get("splits")
    folder = path
    if not (path / "state.json").is_file() and isinstance(splits, list):
        if split not in splits:
            raise DataError(name, 0, f"no split {split!r} (splits: {', '.join(map(str, splits))})", key="split")
        folder = path / split
    state = read_json(folder / "state.json") or {}
    if state.get("_data_files") == []:  # what save_to_disk writes for a dataset of no rows
        what = f"split {split!r}" if folder != path else "the dataset"
        raise DataError(name, 0, f"{what} holds no rows: the corpus is empty", key="split" if folder != path else None)
    loaded = datasets.load_from_disk(str(folder))
    if isinstance(loaded, datasets.DatasetDict):  # a dataset_dict.json we could not read
        if split not in loaded:
            raise DataError(name, 0, f"no split {split!r} (splits: {', '.join(loaded)})", key="split")
        loaded = loaded[split]
    return loaded


def _csv_options(suffix: str, column: str) -> dict[str, Any]:
    """`load_dataset("csv")` options that read a .csv/.tsv corpus's cells as the text they hold.

    pandas' defaults made other text of it without a word: a blank line (a document end in a
    one-column file) was skipped, so documents ran together; a cell reading "NA", "null", "None",
    "N/A" or "nan" became a null, read as a document end, its text lost; a column of numbers-only
    lines was loaded as integers ("007" as 7) or refused as not text. A .tsv is read as plain
    tab-separated text (no quoting, as GLUE's TSV files and BERT's readers): with quoting, a line
    starting with a quote that does not close on it ("Hello, he said.) swallowed every following
    line, blank lines included, into one cell, its quotes removed. Other files are not affected."""
    if suffix not in (".csv", ".tsv"):
        return {}
    options: dict[str, Any] = {
        "keep_default_na": False,
        "na_filter": False,
        "skip_blank_lines": False,
        "converters": {column: str},
    }
    if suffix == ".tsv":
        options.update(delimiter="\t", quoting=csv.QUOTE_NONE)
    return options


def _locate_malformed(path: Path) -> DataError | None:
    """The first bad line of a local JSON-lines, CSV/TSV or text file that `datasets` failed to parse, or None.

    `datasets` says only "An error occurred while generating the dataset" (pyarrow's row number goes
    to its log, 0-based, and not for every error): the user was left to bisect the file. Parsing it
    again line by line, only on that failure path, names the line: a bad byte, a line that is not a
    JSON object, a CSV/TSV row with another field count than the header (a text file: a bad byte)."""

    from xfer.core.textfile import read_text, stream_lines

    suffix = path.suffix.lower()
    try:
        if suffix in (".json", ".jsonl"):
            try:
                json.loads(read_text(path))
                return None  # one JSON document: the problem is not a line's syntax
            except ValueError:
                pass
            for number, line in stream_lines(path):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except ValueError as bad:
                    return DataError(
                        path, number, f"not valid JSON at column {bad.colno}: {bad.msg} (one JSON object per line)"
                    )
                if not isinstance(value, dict):
                    return DataError(path, number, f"a JSON {type(value).__name__}, not an object")
        elif suffix == ".txt":  # datasets' text builder said only "An error occurred while generating the dataset"
            for _ in stream_lines(path):  # bad bytes, with their line
                pass
        elif suffix in (".csv", ".tsv"):
            for _ in stream_lines(path):  # bad bytes, with their line
                pass
            with open(path, newline="", encoding="utf-8-sig") as handle:
                tsv = suffix == ".tsv"  # read as `_csv_options` has datasets read it
                reader = csv.reader(
                    handle, delimiter="\t" if tsv else ",", quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL
                )
                header = next(reader, [])
                for row in reader:
                    if row and len(row) != len(header):
                        return DataError(
                            path, reader.line_num, f"{len(row)} fields where the header line has {len(header)}"
                        )
    except DataError as located:
        return located
    except (OSError, csv.Error):
        return None
    return None


def _names_a_path(name: str) -> bool:
    """Whether a `dataset` that does not exist can only be a path (so: "no such file"), not a Hub
    name: absolute or ./-relative, more than one "/" (Hub ids are `name` or `owner/name`), or the
    suffix of a data file the stage reads."""
    return (
        Path(name).is_absolute()
        or name.startswith(".")
        or name.count("/") > 1
        or Path(name).suffix.lower() in _FILE_BUILDERS
    )


def _offline_hint() -> str:
    """What to do when a Hub dataset cannot be reached: offline use reads the user's datasets cache."""
    where = f"the datasets cache ({datasets.config.HF_DATASETS_CACHE})"
    instead = "or give a Dataset.save_to_disk folder or a local data file as `dataset`"
    if datasets.config.HF_HUB_OFFLINE:
        return f" Offline mode is on and it is not in {where}: fetch it once with network into that cache, {instead}."
    return (
        f" Without network, fetch it once where there is, then run with HF_DATASETS_OFFLINE=1 and {where}; {instead}."
    )


def _plan_row_blocks(
    dataset: datasets.Dataset, column: str, block_rows: int, file_ends: Sequence[int] = ()
) -> list[tuple[int, int]]:
    """Row ranges of about `block_rows` rows that end after an empty row (a document end) or at the end,
    and at each of `file_ends` (the end of a file is the end of a document, `_file_row_ends`)."""
    total = len(dataset)
    arrow = dataset.with_format("arrow")
    cuts = [0]
    candidate = block_rows
    while candidate < total:
        if candidate > cuts[-1]:
            cut = _next_empty_row(arrow, column, candidate, total, block_rows * MAX_SCAN_BLOCKS)
            if cut is None:
                break
            cuts.append(cut)
        candidate += block_rows
    if cuts[-1] < total:
        cuts.append(total)
    cuts = sorted(set(cuts).union(end for end in file_ends if 0 < end < total))
    return [(a, b) for a, b in pairwise(cuts) if b > a]


def _next_empty_row(arrow: datasets.Dataset, column: str, start: int, total: int, limit: int) -> int | None:
    position = start
    while position < total:
        end = min(total, position + _ROWS_PER_CHUNK)
        values = arrow[position:end].column(column)
        blank = pc.or_kleene(pc.is_null(values), pc.equal(pc.utf8_trim_whitespace(values), ""))
        hits = np.flatnonzero(blank.to_numpy(zero_copy_only=False))
        if len(hits):
            return position + int(hits[0]) + 1
        position = end
        if position - start >= limit:  # a document longer than the scan limit: cut it here
            return position if position < total else None
    return None


# --- packing one block (runs in datasets.map workers) --------------------------------------------

_BACKENDS: dict[str, Any] = {}
_WHITESPACE = re.compile(r"\s")
_BACKENDS_LOCK = threading.Lock()


def _backend(tokenizer_json: str, sha256: str) -> Any:
    """The HF `tokenizers` pipeline serialised as `tokenizer_json` (whose digest is `sha256`),
    built once per process and pipeline. Keyed by the content, not by a folder: a tokenizer
    retrained in place (a notebook running a recipe twice) used to be served from the first load,
    so the examples were packed with the old vocabulary while the stage had fingerprinted the new one.

    Corpus text that spells a special token ("[SEP]", "[CLS]", "[MASK]", "[PAD]") is tokenized as
    text, as the original ELECTRA's BERT tokenizer does ("[", "sep", "]"): the added-token matching
    of `tokenizers` put a [SEP] inside a segment, a [CLS] past position 0, a [MASK] the objective
    never chose and a [PAD] inside the sequence into the examples."""
    from tokenizers import Tokenizer

    with _BACKENDS_LOCK:
        if sha256 not in _BACKENDS:
            backend = Tokenizer.from_str(tokenizer_json)
            backend.encode_special_tokens = True  # (not part of to_str(): the cache key needs CACHE_FORMAT)
            _BACKENDS[sha256] = backend
        return _BACKENDS[sha256]


@dataclass
class _PackSpec:
    """Everything a worker needs to pack a block (pickled once per worker process)."""

    tokenizer_json: str
    tokenizer_sha256: str  # of tokenizer_json: the cache key's, and the workers' cache of built pipelines
    cls_id: int
    sep_id: int
    max_length: int
    seed: int
    short_seq_prob: float
    single_segment_prob: float
    source: _TextSource | _RowSource | _IterableRowSource

    def pack_block(self, block: int, stats: PackStats | None = None) -> Iterator[PackedExample]:
        """The examples of block `block`; once exhausted, its counts are added to `stats`."""
        packer = ExamplePacker(
            self.max_length,
            self.cls_id,
            self.sep_id,
            block_rng(self.seed, block),
            self.short_seq_prob,
            self.single_segment_prob,
        )
        backend = _backend(self.tokenizer_json, self.tokenizer_sha256)
        for lines in self.source.lines(block):
            stripped = [line.strip() for line in lines]
            texts = [s for s in stripped if s and len(s) <= _LONG_LINE_CHARS]
            encoded = iter(backend.encode_batch_fast(texts, add_special_tokens=False) if texts else ())
            for text in stripped:
                if not text:
                    example = packer.end_document()
                elif len(text) > _LONG_LINE_CHARS:
                    example = packer.add_sentence(*_encode_long_line(backend, text, packer.keep_tokens))
                else:
                    example = packer.add_sentence(next(encoded).ids)
                if example is not None:
                    yield example
        example = packer.end_document()  # the end of a block is the end of a document
        if example is not None:
            yield example
        if stats is not None:
            stats.add(packer.stats)


_LONG_LINE_CHARS = 1 << 16
"""A line longer than this (in characters) is tokenized in pieces (`_encode_long_line`)."""
_LONG_LINE_PIECES = 16  # pieces tokenized in one call


def _encode_long_line(backend: Any, text: str, keep: int) -> tuple[list[int], int]:
    """(the first `keep` token ids, the token count) of a line too long to tokenize in one call.

    Packing keeps at most `keep` tokens of a line, but the whole line was tokenized and its ids
    listed: a 100 MB single-line corpus (text8, a file without newlines) took 12 GB of memory to
    make one example, and a 1 GB one could not be packed at all. The line is cut at spaces into
    pieces of about `_LONG_LINE_CHARS` characters: WordPiece's BERT normaliser works character by
    character and its pre-tokenizer splits words at whitespace, so the pieces' ids are the line's.
    """
    kept: list[int] = []
    count, start, pieces = 0, 0, []
    while start < len(text):
        end = start + _LONG_LINE_CHARS
        if end < len(text):
            space = text.rfind(" ", start + 1, end)
            if space < 0:  # no space in the window: the next whitespace, or the rest of the line
                found = _WHITESPACE.search(text, end)
                space = found.start() if found is not None else len(text)
            end = space
        pieces.append(text[start:end])
        start = end
        if len(pieces) == _LONG_LINE_PIECES or start >= len(text):
            for encoding in backend.encode_batch_fast(pieces, add_special_tokens=False):
                if len(kept) < keep:
                    kept.extend(encoding.ids[: keep - len(kept)])
                count += len(encoding)
            pieces = []
    return kept, count


def _pack_blocks(
    batch: dict[str, list[int]], rank: int | None, spec: _PackSpec, stats_dir: str | None = None
) -> dict[str, list[Any]]:
    """`datasets.map` function: block indices in, packed examples out.

    Each block's `PackStats` is appended to `stats_dir/blocks-<pid>.jsonl`: the map's output
    rows are examples, so the counts of a build spread over processes travel by file.
    """
    if rank is not None:  # a worker process: a forked tokenizer must not start its own thread pool
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    input_ids: list[list[int]] = []
    splits: list[int] = []
    for block in batch["block"]:
        stats = PackStats()
        for example in spec.pack_block(block, stats):
            input_ids.append(example.input_ids)
            splits.append(example.segment_split)
        if stats_dir is not None:
            with open(Path(stats_dir) / f"blocks-{os.getpid()}.jsonl", "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"block": block, **stats.as_dict()}) + "\n")
    return {"input_ids": input_ids, "segment_split": splits}


def _read_pack_stats(stats_dir: Path, num_blocks: int) -> PackStats:
    """The sum of the per-block counts `_pack_blocks` wrote (each block once)."""
    per_block: dict[int, PackStats] = {}
    for path in sorted(stats_dir.glob("blocks-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            per_block[int(record.pop("block"))] = PackStats.from_dict(record)
    missing = sorted(set(range(num_blocks)) - per_block.keys())
    if missing:  # pragma: no cover - every block goes through _pack_blocks
        raise RuntimeError(f"packing counts missing for blocks {missing[:5]} (a bug in xfer.electra.data)")
    total = PackStats()
    for stats in per_block.values():
        total.add(stats)
    return total


_STREAM_WARNED: set[str] = set()
_STREAM_WARNED_LOCK = threading.Lock()


def _generate_examples(blocks: list[int], spec: _PackSpec) -> Iterator[dict[str, Any]]:
    """`IterableDataset.from_generator` function: the examples of the given blocks, in order.

    A stream is never counted ahead, so a line longer than one example is warned about when it
    is first met (stderr, once per source and process) rather than in the report.
    """
    for block in blocks:
        stats = PackStats()
        for example in spec.pack_block(block, stats):
            yield {"input_ids": example.input_ids, "segment_split": example.segment_split}
        if stats.long_lines:
            with _STREAM_WARNED_LOCK:
                first = spec.source.name not in _STREAM_WARNED
                _STREAM_WARNED.add(spec.source.name)
            if first:
                _print_warning(
                    f"{spec.source.name}: a block of the streamed corpus has {stats.long_lines} line(s) with more "
                    f"tokens than one example holds ({spec.max_length - 2} = max_length - 2); packing cuts them "
                    f"(as the original ELECTRA does), which dropped {stats.long_line_tokens_dropped} of the "
                    f"block's {stats.tokens} tokens. A stream is not counted ahead; the corpus should have one "
                    "sentence per line, with a blank line between documents."
                )


# --- the Arrow cache ------------------------------------------------------------------------------


class _FileHashes:
    """sha256 of file contents, reused while (size, mtime_ns, inode, ctime_ns) is unchanged (core's FileHasher)."""

    def __init__(self, cache_dir: Path):
        from xfer.core.runs.fingerprint import FileHasher

        self._hasher = FileHasher(cache_dir / ".file-hashes.json")

    def files(self, paths: Sequence[str]) -> list[str]:
        try:
            digests = [self._hasher.file(Path(p)) for p in paths]
        except OSError as error:
            raise DataError(error.filename or "corpus", 0, f"cannot read file: {error.strerror or error}") from None
        with contextlib.suppress(OSError):  # only a speed-up for the next call: never fatal
            self._hasher.save()  # (another builder in this process may be replacing the same file)
        return digests


def _build_or_load(
    spec: _PackSpec,
    key: str,
    parts: dict[str, Any],
    cache_dir: Path,
    num_proc: int,
    inputs_unchanged: Callable[[], None],
    warn: Callable[[str], None],
) -> datasets.Dataset:
    """Load the cache of `key`, or build it; `inputs_unchanged` must pass before a build is kept."""
    final = cache_dir / f"{_CACHE_PREFIX}{key[:24]}"
    loaded, _ = _load_cache(final, key)
    if loaded is not None:
        return loaded
    with _exclusive(cache_dir / f".{final.name}.lock"):
        # another process may have built it while we waited; damage is reported here, under the
        # lock, once, for the cache that is about to be replaced
        loaded, damage = _load_cache(final, key)
        if loaded is not None:
            return loaded
        if damage:
            warn(
                f"the pre-training example cache is damaged: {damage}. It is rebuilt (if this recurs, check the disk)."
            )
        shutil.rmtree(final, ignore_errors=True)  # damaged (we hold the lock, nobody is writing it)
        for stale in cache_dir.glob(f".{final.name}.tmp-*"):  # left by killed builds
            shutil.rmtree(stale, ignore_errors=True)
        temp = cache_dir / f".{final.name}.tmp-{os.getpid()}"
        temp.mkdir()
        try:
            manifest = _build(spec, key, parts, temp, num_proc)
            inputs_unchanged()  # else the examples are not those of the text the key names: discard them
            write_json(temp / MANIFEST, manifest)
            fsync_dir(temp)
            os.rename(temp, final)
            fsync_dir(cache_dir)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
    loaded, damage = _load_cache(final, key, verify=False)  # just hashed by _build
    if loaded is None:  # pragma: no cover - only if the folder is tampered with right after the build
        raise DataError(final, 0, f"the example cache just built cannot be read back: {damage}")
    return loaded


_BUILDER_PID: int | None = None
"""The process whose `datasets.map` is forking build workers right now (None: no build forks)."""
_PRCTL: Any = None  # libc's prctl (Linux), looked up before the first build forks


def _die_with_builder() -> None:
    """`os.register_at_fork` hook, run in every forked child: one forked by a build (the map's workers,
    datasets' Manager process) gets SIGKILL when the builder dies. Forked children share the builder's
    open files, the runner's run-directory flock among them: after a SIGKILL of the stage's process
    alone (`kill -9 PID`, the OOM killer) they stayed alive and idle forever, and the re-run was refused
    as "in use by pid N", a dead pid, until someone found and killed them. (Linux; elsewhere a no-op.
    `subprocess` does not run fork hooks, and the child's own children are left alone.)"""
    global _BUILDER_PID
    builder, _BUILDER_PID = _BUILDER_PID, None
    if builder is None or _PRCTL is None:
        return
    _PRCTL(1, 9)  # PR_SET_PDEATHSIG, SIGKILL (libc resolved in the parent: no dlopen after a fork)
    if os.getppid() != builder:  # the builder died before the signal was armed
        os._exit(1)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_die_with_builder)


@contextlib.contextmanager
def _forking_build() -> Iterator[None]:
    """Mark the processes forked inside as a build's: they die with this process (`_die_with_builder`)."""
    global _BUILDER_PID, _PRCTL
    if _PRCTL is None and sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
    previous, _BUILDER_PID = _BUILDER_PID, os.getpid()
    try:
        yield
    finally:
        _BUILDER_PID = previous


def _available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, e.g. under taskset or a batch scheduler's
    cgroup cpuset), else `os.cpu_count()`: more packing processes than that only contend."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def _build(spec: _PackSpec, key: str, parts: dict[str, Any], folder: Path, num_proc: int) -> dict[str, Any]:
    blocks = datasets.Dataset.from_dict({"block": list(range(spec.source.num_blocks))})
    workers = min(num_proc, spec.source.num_blocks, _available_cpus())
    if workers < num_proc:  # `num_proc: 64` on 2 cores forked 64 processes fighting over them
        print(
            f"note: corpus.num_proc {num_proc}: packing with {workers} process(es) "
            f"({_available_cpus()} CPU(s) available, {spec.source.num_blocks} block(s)); the examples are the same",
            file=sys.stderr,
            flush=True,
        )
    stats_dir = folder / _PACK_STATS
    stats_dir.mkdir()
    with _forking_build() if workers > 1 else contextlib.nullcontext():
        examples = blocks.map(
            _pack_blocks,
            batched=True,
            batch_size=1,
            with_rank=True,
            num_proc=workers if workers > 1 else None,
            remove_columns=["block"],
            features=EXAMPLE_FEATURES,
            cache_file_name=str(folder / "examples.arrow"),
            load_from_cache_file=False,
            new_fingerprint=key[:32],
            fn_kwargs={"spec": spec, "stats_dir": str(stats_dir)},
            desc="ELECTRA examples: tokenize + pack corpus blocks",
        )
    if len(examples) == 0:
        raise DataError(spec.source.name, 0, "the corpus has no tokens: no example could be built")
    names = [Path(f["filename"]).name for f in examples.cache_files]
    statistics = example_statistics(examples)
    del examples
    packing = _read_pack_stats(stats_dir, spec.source.num_blocks)
    shutil.rmtree(stats_dir)
    entries = []
    for name in names:
        fsync_file(folder / name)
        entries.append({"name": name, "bytes": (folder / name).stat().st_size, "sha256": file_sha256(folder / name)})
    return {
        "format": CACHE_FORMAT,
        "key": key,
        "inputs": parts,
        "files": entries,
        "statistics": statistics,
        "packing": packing.as_dict(),
    }


def _load_cache(folder: Path, key: str, *, verify: bool = True) -> tuple[datasets.Dataset | None, str | None]:
    """(the cached examples, None), or (None, what is wrong with them: None when simply absent).

    The cache is used only when it is exactly what its manifest promises: every file of the
    size and (when `verify`) the sha256 recorded at build time, and the recorded number of
    examples. Without the hash, a file damaged in place (same size) trained silently on other
    examples, or crashed the embedding lookup on out-of-range token ids.
    """
    manifest_path = folder / MANIFEST
    manifest = read_json(manifest_path)
    if manifest is None:
        return None, (f"{manifest_path} is missing or unreadable" if folder.is_dir() else None)
    if manifest.get("format") != CACHE_FORMAT or manifest.get("key") != key:
        return None, None  # another layout or another key's folder (a 24-hex-digit prefix clash): not ours
    try:
        entries = manifest["files"]
        for entry in entries:
            path = folder / entry["name"]
            size = path.stat().st_size
            if size != entry["bytes"]:
                return None, f"{path} has {size} bytes, {entry['bytes']} when it was built"
            if verify and file_sha256(path) != entry["sha256"]:
                return None, f"{path} does not have the contents it was built with (its sha256 differs)"
        parts = [datasets.Dataset.from_file(str(folder / e["name"])) for e in entries]
        examples = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    except FileNotFoundError as error:
        return None, f"{error.filename} is missing"
    except (OSError, KeyError, TypeError, ValueError, pa.ArrowException) as error:
        return None, f"{folder} cannot be read ({type(error).__name__}: {error})"
    expected = manifest.get("statistics", {}).get("examples")
    if len(examples) != expected:
        return None, f"{folder} holds {len(examples)} examples, {expected} when it was built"
    return examples, None


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `lock_path` against other processes and threads (released by the OS
    if the process dies).

    A POSIX record lock (`lockf`), not an `flock`: an flock belongs to the open file, which the
    `datasets.map` workers forked during the build share; a SIGKILL of the stage's process alone left
    them alive and idle, holding it forever, and every later build of the same examples (another run
    sharing `data_cache`) waited without a word. A record lock belongs to the process. It does not
    exclude the threads of one process (and a second open of the file there would drop it): hence the
    per-file thread lock taken first, so only one handle to the file is ever open in this process."""
    with _THREAD_LOCKS_GUARD:
        local = _THREAD_LOCKS.setdefault(os.path.realpath(lock_path), threading.Lock())  # one per file
    with local, open(lock_path, "a+b") as handle:
        if fcntl is not None:
            try:
                fcntl.lockf(handle.fileno(), fcntl.LOCK_EX)
            except OSError as error:
                raise _lock_error(lock_path, error) from None
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.lockf(handle.fileno(), fcntl.LOCK_UN)


def _lock_error(lock_path: Path, error: OSError) -> DataError:
    """The error for a cache folder whose file system refuses POSIX record locks: NFS without its lock
    daemon (ENOLCK), Lustre mounted without `flock` (ENOSYS). It was a bare OSError traceback, after
    the corpus had been hashed, that named neither the cache nor `data_cache`."""
    return DataError(
        lock_path.parent,
        0,
        f"cannot lock {lock_path.name} to build the pre-training examples here ({error.strerror or error}): "
        "builds are serialised by a POSIX lock, which this file system refuses; set data_cache to a folder on "
        "one that has them (a local disk)",
        key="data_cache",
    )


# --- batches --------------------------------------------------------------------------------------


def collate_examples(
    input_ids: Sequence[Sequence[int]], segment_splits: Sequence[int], pad_id: int
) -> dict[str, torch.Tensor]:
    """Pad examples to the longest one: `input_ids`, `attention_mask` (1 = real), `token_type_ids`."""
    lengths = np.fromiter((len(s) for s in input_ids), dtype=np.int64, count=len(input_ids))
    flat = np.fromiter((t for s in input_ids for t in s), dtype=np.int64, count=int(lengths.sum()))
    return _pad(flat, lengths, np.asarray(segment_splits, dtype=np.int64), pad_id)


def _pad(flat: np.ndarray, lengths: np.ndarray, splits: np.ndarray, pad_id: int) -> dict[str, torch.Tensor]:
    rows, width = len(lengths), int(lengths.max(initial=0))
    positions = np.arange(width)
    real = positions[None, :] < lengths[:, None]
    ids = np.full((rows, width), pad_id, dtype=np.int64)
    ids[real] = flat  # row-major order of `real` is exactly the concatenation of the rows
    types = real & (positions[None, :] >= splits[:, None])
    return {
        "input_ids": torch.from_numpy(ids),
        "attention_mask": torch.from_numpy(real.astype(np.int64)),
        "token_type_ids": torch.from_numpy(types.astype(np.int64)),
    }


class PretrainBatches:
    """Padded pre-training batches with an exact cursor: a `xfer.core.data.BatchSource`.

    Map-style examples (`datasets.Dataset`): `xfer.core.data.BatchStream` over row indices —
    epoch permutations seeded by (seed, epoch), every rank computes the same global batch and
    takes its slice `[rank::world_size]`, each share split into `accumulation` micro-batches;
    rows are fetched with one Arrow `take` per micro-batch.

    Streaming examples (`datasets.IterableDataset`): its shards (the corpus blocks) are read in an
    order permuted every pass by (seed, pass), through a shuffle window: `shuffle_buffer` examples
    per rank are read, permuted by (seed, rank, window) and served (two separate random streams:
    see `SHARD_ORDER`). The cursor is (pass, shard,
    example in shard) at the start of the current window plus the offset inside it; resuming
    re-reads that window (and the part of its first shard before it: at most one block) and
    continues with exactly the batches the interrupted run would have produced. (Not
    `IterableDataset.state_dict()`: it loses the contents of a shuffle buffer by design.)

    `stream_sharding` chooses how ranks split a stream:
    * `"examples"` (default): every rank reads the whole stream and keeps every `world_size`-th
      example. Every rank's cursor is then the same (the trainer saves it once). Costs redundant
      tokenization (each rank tokenizes the global batch's text each step, in the prefetch thread).
    * `"shards"`: ranks read disjoint shards (shard i goes to rank i % world_size; needs at least
      `world_size` shards) — no redundant work, but every rank has its own cursor: the trainer
      saves every rank's `state_dict()` and restores each to its rank. `load_state_dict` also
      accepts a list of per-rank states and refuses another rank's cursor.

    Never touches the global torch/numpy/python RNGs (the trainer prefetches in a thread).
    """

    def __init__(
        self,
        examples: datasets.Dataset | datasets.IterableDataset,
        global_batch: int,
        seed: int,
        pad_id: int,
        rank: int = 0,
        world_size: int = 1,
        accumulation: int = 1,
        *,
        shuffle_buffer: int = 10_000,
        stream_sharding: Literal["examples", "shards"] = "examples",
        source_name: str = "the corpus stream",
    ):
        per_process_share(global_batch, world_size, accumulation)
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world size {world_size}")
        if shuffle_buffer < 1:
            raise ValueError("shuffle_buffer must be at least 1")
        if stream_sharding not in ("examples", "shards"):
            raise ValueError(f"stream_sharding must be 'examples' or 'shards', got {stream_sharding!r}")
        self.global_batch, self.seed, self.pad_id = global_batch, seed, pad_id
        self.rank, self.world_size, self.accumulation = rank, world_size, accumulation
        self._batches: BatchStream | None = None
        self._stream: _ShuffledStream | None = None
        self._source_name = source_name
        self._layout: dict[str, Any] | None = None
        self._inputs_key: str | None = None
        if isinstance(examples, datasets.IterableDataset):
            self._layout = _stream_layout(examples)
            reader = _StreamReader(examples, seed, rank, world_size, stream_sharding, source_name)
            self._stream = _ShuffledStream(reader, shuffle_buffer, seed, rank)
        else:
            # which examples the cursor indexes (the cache key: corpus bytes, tokenizer, packing), so a
            # resume onto other examples is refused (see load_state_dict)
            manifest = (cache_manifest(examples) or {}) if examples.cache_files else {}
            self._examples_key = manifest.get("key")
            self._inputs_key = _inputs_key(manifest.get("inputs"))
            self._examples = _check_columns(examples)
            self._batches = BatchStream(
                range(len(examples)),
                global_batch,
                self._collate_rows,
                seed,
                shuffle=True,
                rank=rank,
                world_size=world_size,
                accumulation=accumulation,
            )

    @property
    def steps_per_epoch(self) -> int | None:
        return self._batches.steps_per_epoch if self._batches is not None else None

    def next_step(self) -> list[dict[str, torch.Tensor]]:
        """This rank's micro-batches for one optimizer step."""
        if self._batches is not None:
            return self._batches.next_step()
        assert self._stream is not None
        size = self.global_batch // (self.world_size * self.accumulation)
        taken = self._stream.take(size * self.accumulation)
        return [
            collate_examples([ids for ids, _ in part], [split for _, split in part], self.pad_id)
            for part in (taken[k * size : (k + 1) * size] for k in range(self.accumulation))
        ]

    def __iter__(self) -> Iterator[list[dict[str, torch.Tensor]]]:
        return self

    def __next__(self) -> list[dict[str, torch.Tensor]]:
        return self.next_step()

    def state_dict(self) -> dict[str, Any]:
        if self._batches is not None:
            key = {"examples": self._examples_key} if self._examples_key else {}
            if self._inputs_key:
                key["inputs"] = self._inputs_key
            return {"kind": "map", **self._batches.state_dict(), **key}
        assert self._stream is not None
        layout = {"blocks": self._layout["digest"]} if self._layout else {}
        state = {"kind": "stream", "seed": self.seed, "world_size": self.world_size, **self._stream.state_dict()}
        return {**state, **layout}

    def load_state_dict(self, state: dict[str, Any] | list[dict[str, Any]]) -> None:
        if isinstance(state, list):  # one state per rank (a trainer that saves every rank's cursor)
            if len(state) != self.world_size:
                raise ValueError(f"{len(state)} per-rank data cursors for world size {self.world_size}")
            state = state[self.rank]
        kind = "map" if self._batches is not None else "stream"
        if state.get("kind") != kind:
            raise ValueError(f"data cursor is for {state.get('kind')} examples, this run has {kind} examples")
        if self._batches is not None:
            self._load_map_cursor(state)
            return
        assert self._stream is not None
        if state.get("seed") != self.seed or state.get("world_size") != self.world_size:
            raise ValueError(
                f"data cursor was saved with seed {state.get('seed')} and world size {state.get('world_size')}, "
                f"this run has {self.seed} and {self.world_size}; cannot resume exactly"
            )
        self._check_layout(state)
        self._stream.load_state_dict({k: v for k, v in state.items() if k != "blocks"})

    def _check_layout(self, state: dict[str, Any]) -> None:
        """Refuse a stream cursor whose shard numbers name other byte ranges of the corpus.

        The run's fingerprint signs the corpus files, so what can move the blocks under a cursor is
        xfer's cut rule: CRLF or BOM text over one block is cut where its LF twin is (before, at raw
        byte offsets). A cursor saved then kept its shard numbers and resumed on shifted text."""
        if not self._layout:
            return
        saved = state.get("blocks")
        if saved is None and not self._layout["moved"]:
            return  # saved before cursors named their blocks; the old rule cut this corpus the same way
        if saved == self._layout["digest"]:
            return
        raise UserError(
            f"{self._source_name}: the checkpoint's data cursor was saved over other corpus blocks than this run "
            "cuts (the files are unchanged: an upgrade of xfer cuts text with CRLF line ends or a byte-order mark "
            "where its LF twin is cut), so resuming would continue on shifted text. Delete the stage's "
            "checkpoints/ folder to pre-train from the start, or finish this run with the xfer that started it"
        )

    def _load_map_cursor(self, state: dict[str, Any]) -> None:
        """Resume the map-style cursor, refusing one saved over other examples.

        The run's fingerprint signs `corpus.files` but not a `corpus.dataset` file or folder: one edited
        between a kill and the re-run resumed the checkpoint onto the new text, mixing two corpora in one
        model without a word when the example count stayed the same, and with a bare ValueError
        traceback when it did not (another seed, which the fingerprint does sign, stays that ValueError)."""
        assert self._batches is not None
        saved, ours = state.get("examples"), self._examples_key
        if saved is not None and ours is not None and saved != ours:
            detail = f"examples {saved[:12]}... -> {ours[:12]}..."
        elif state.get("size", len(self._examples)) != len(self._examples):  # a checkpoint from before the key
            detail = f"{state['size']} packed examples then, {len(self._examples)} now"
        else:
            self._batches.load_state_dict({k: v for k, v in state.items() if k not in ("kind", "examples", "inputs")})
            return
        if self._inputs_key is not None and state.get("inputs") == self._inputs_key:
            raise UserError(
                f"the pre-training examples changed since the checkpoint was saved ({detail}) while the corpus, "
                "its tokenizer and the packing settings did not: an upgrade of xfer packs them differently, and "
                "resuming would mix two packings in one model. Delete the stage's checkpoints/ folder to "
                "pre-train on the new examples from the start, or finish this run with the xfer that started it"
            ) from None
        raise UserError(
            f"the pre-training examples changed since the checkpoint was saved ({detail}): the corpus text, its "
            "tokenizer or its packing is not what this stage trained on so far (or, with the same files, an "
            "upgrade of xfer packs them differently: text with CRLF line ends or a byte-order mark over 1 MiB is "
            "now cut where its LF twin is), and resuming would mix the two in one model. Restore what it read "
            "to resume, or delete the stage's checkpoints/ folder to train on the new examples from the start"
        ) from None

    def _collate_rows(self, indices: list[int]) -> dict[str, torch.Tensor]:
        table = self._examples[indices]
        column = table.column("input_ids").combine_chunks()
        lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False).astype(np.int64)
        flat = column.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
        if "segment_split" in table.column_names:
            splits = table.column("segment_split").to_numpy().astype(np.int64)
        else:  # token_type_ids: the first 1, or the length
            types = table.column("token_type_ids").to_pylist()
            splits = np.array([t.index(1) if 1 in t else len(t) for t in types], dtype=np.int64)
        return _pad(flat, lengths, splits, self.pad_id)


def _inputs_key(inputs: Any) -> str | None:
    """What the examples were packed from, without how (the cache key's parts but its format and
    the corpus's cut into blocks): equal in a cursor whose examples key differs, xfer's packing
    changed (an upgrade), not the corpus, its tokenizer or a setting."""
    if not isinstance(inputs, dict) or not isinstance(inputs.get("source"), dict):
        return None
    what = {k: v for k, v in inputs.items() if k != "format"}
    what["source"] = {k: v for k, v in inputs["source"].items() if k != "blocks"}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def _check_columns(examples: datasets.Dataset) -> datasets.Dataset:
    """Arrow-formatted view with the columns batches need (input_ids + segment_split or token_type_ids)."""
    columns = examples.column_names
    if "input_ids" not in columns:
        raise ValueError(f"examples need an 'input_ids' column, got {columns}")
    kept = ["input_ids", *[c for c in ("segment_split", "token_type_ids") if c in columns][:1]]
    if len(kept) == 1:
        raise ValueError(f"examples need a 'segment_split' or 'token_type_ids' column, got {columns}")
    if len(examples) == 0:
        raise ValueError("cannot train on an empty set of examples")
    return examples.select_columns(kept).with_format("arrow")


# --- the streaming cursor -------------------------------------------------------------------------


SHARD_ORDER = 0x73686172  # "shar"
WINDOW_ORDER = 0x77696E64  # "wind"
"""The first entropy words of a stream's two random uses: each pass's shard order
`default_rng([SHARD_ORDER, seed, pass])` and each shuffle window's order
`default_rng([WINDOW_ORDER, seed, rank, window])`.

numpy's SeedSequence ignores trailing zeros, so the untagged `[seed, rank, 0]` (a rank's first
window) was `[seed, rank]`, the shard order of pass `rank`: on one process window 0 and pass 0
were permutations from one stream (correlated), on rank r window 0 and pass r. With a word of its
own in front, no window's entropy can be a pass's, whatever the seed, rank, window or pass.
(Map-style examples use `BatchStream`'s `[seed, epoch]`; a run has either, never both.)"""


@dataclass
class _Cursor:
    """Where a stream reader is: pass over the shards, position in that pass's shard order,
    examples already read from that shard, and examples read in total (assigns examples to ranks)."""

    epoch: int = 0
    shard_pos: int = 0
    in_shard: int = 0
    read: int = 0
    epoch_read: int = 0


class _StreamReader:
    """Reads examples from an IterableDataset's shards in a seeded order, one pass after another."""

    def __init__(
        self,
        examples: datasets.IterableDataset,
        seed: int,
        rank: int,
        world_size: int,
        sharding: str,
        name: str = "the corpus stream",
    ):
        self.examples, self.seed, self.rank, self.world_size, self.name = examples, seed, rank, world_size, name
        self.num_shards = examples.num_shards
        self.by_shard = sharding == "shards" and world_size > 1
        if self.by_shard:
            if self.num_shards < world_size:
                raise ValueError(
                    f"stream_sharding='shards' needs at least {world_size} shards, the stream has {self.num_shards}; "
                    "use stream_sharding='examples'"
                )
            self.shards = list(range(rank, self.num_shards, world_size))
        else:
            self.shards = list(range(self.num_shards))
        self.cursor = _Cursor()
        self._order: list[int] | None = None
        self._iterator: Iterator[dict[str, Any]] | None = None

    def _shard_order(self, epoch: int) -> list[int]:
        # The same on every rank in "examples" mode (all ranks must read the same sequence).
        permutation = np.random.default_rng([SHARD_ORDER, self.seed, epoch]).permutation(len(self.shards))
        return [self.shards[i] for i in permutation]

    def next_global(self) -> tuple[list[int], int, bool]:
        """The next example of the sequence this rank reads, and whether it belongs to this rank."""
        c = self.cursor
        while True:
            if self._order is None:
                self._order = self._shard_order(c.epoch)
            if c.shard_pos >= len(self._order):
                if c.epoch_read == 0:
                    raise UserError(f"{self.name}: the corpus yields no examples: a whole pass over it found no tokens")
                c.epoch, c.shard_pos, c.in_shard, c.epoch_read = c.epoch + 1, 0, 0, 0
                self._order = None
                continue
            if self._iterator is None:
                shard = self.examples.shard(num_shards=self.num_shards, index=self._order[c.shard_pos], contiguous=True)
                self._iterator = islice(iter(shard), c.in_shard, None)
            example = next(self._iterator, None)
            if example is None:
                c.shard_pos, c.in_shard, self._iterator = c.shard_pos + 1, 0, None
                continue
            mine = self.by_shard or self.world_size == 1 or c.read % self.world_size == self.rank
            c.in_shard, c.read, c.epoch_read = c.in_shard + 1, c.read + 1, c.epoch_read + 1
            return example["input_ids"], _split_of(example), mine

    def seek(self, cursor: _Cursor) -> None:
        self.cursor = dataclasses.replace(cursor)
        self._order, self._iterator = None, None


def _split_of(example: dict[str, Any]) -> int:
    if "segment_split" in example:
        return int(example["segment_split"])
    types = example.get("token_type_ids")
    if types is None:
        raise ValueError(f"streamed examples need 'segment_split' or 'token_type_ids', got {sorted(example)}")
    return types.index(1) if 1 in types else len(types)


class _ShuffledStream:
    """A shuffle window over a `_StreamReader` whose state is small and exact (see PretrainBatches).

    A window is filled by reading `size * reads_per_kept` examples of the reader's sequence, which
    gives this rank exactly `size` examples in every mode, so all ranks fill windows in lockstep.
    """

    def __init__(self, reader: _StreamReader, size: int, seed: int, rank: int):
        self.reader, self.size, self.seed, self.rank = reader, size, seed, rank
        self.reads = size if reader.by_shard or reader.world_size == 1 else size * reader.world_size
        self.window: list[tuple[list[int], int]] | None = None
        self.window_no = -1  # number of the current window (-1: none yet)
        self.window_start = _Cursor()
        self.offset = 0

    def take(self, count: int) -> list[tuple[list[int], int]]:
        out: list[tuple[list[int], int]] = []
        if self.window is None and self.window_no >= 0:  # resumed: rebuild the current window
            self._fill(self.window_no)
        while len(out) < count:
            if self.window is None or self.offset >= len(self.window):
                self._fill(self.window_no + 1)
                self.offset = 0
            assert self.window is not None
            part = self.window[self.offset : self.offset + count - len(out)]
            out.extend(part)
            self.offset += len(part)
        return out

    def _fill(self, number: int) -> None:
        """Read window `number` from the reader's cursor (which must be at that window's start)."""
        self.window_start = dataclasses.replace(self.reader.cursor)
        kept: list[tuple[list[int], int]] = []
        for _ in range(self.reads):
            ids, split, mine = self.reader.next_global()
            if mine:
                kept.append((ids, split))
        order = np.random.default_rng([WINDOW_ORDER, self.seed, self.rank, number]).permutation(len(kept))
        self.window = [kept[i] for i in order]
        self.window_no = number

    def state_dict(self) -> dict[str, Any]:
        return {
            "window": self.window_no,
            "offset": self.offset,
            "window_size": self.size,
            "cursor": dataclasses.asdict(self.window_start if self.window_no >= 0 else self.reader.cursor),
            "num_shards": self.reader.num_shards,
            "sharding": "shards" if self.reader.by_shard else "examples",
            "rank": self.rank if self.reader.by_shard else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        expected = {
            "window_size": self.size,
            "num_shards": self.reader.num_shards,
            "sharding": "shards" if self.reader.by_shard else "examples",
            "rank": self.rank if self.reader.by_shard else None,
        }
        changed = {k: (state.get(k), v) for k, v in expected.items() if state.get(k) != v}
        if changed:
            raise ValueError(
                "the data stream changed since the checkpoint ("
                + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items())
                + "); cannot resume exactly"
            )
        self.reader.seek(_Cursor(**state["cursor"]))
        # the window is re-read on the next take; until then state_dict() must still name its start
        # (it reported the cursor of before the load: a checkpoint taken then restarted the stream)
        self.window_start = _Cursor(**state["cursor"])
        self.window, self.window_no, self.offset = None, int(state["window"]), int(state["offset"])

"""Batches for CVT: word/char tensors, length-pooled labeled streams, and the unlabeled corpus stream.

Both kinds of data are endless streams cut into fixed-size global batches (every step sees the
same number of sentences, every DDP rank takes its slice, the cursor is all resume needs), with
one addition over `xfer.core.data.BatchStream`: sentences are sorted by length inside pools of
`pool_batches` batches and the pool's batches are then shuffled, so a batch holds sentences of
similar length (an LSTM's cost grows with the longest sentence of the batch; the original code
bucketed by length for the same reason).

The unlabeled corpus is never loaded whole: files are indexed once into chunks of `chunk_lines`
lines (byte offsets), each epoch visits the chunks in a seeded random order and shuffles the
sentences inside a chunk, and the cursor names the chunk and the position in it, so a resumed
run re-reads one chunk and continues with exactly the sentences the interrupted run would have
seen (tested with SIGKILL). Long lines are cut into pieces of `max_length` words; blank lines
(document breaks) are not sentences; nothing else is skipped.

Sources draw randomness from `numpy.random.default_rng([seed, ...])` only (they run in the
trainer's prefetch thread, where the global RNGs must not be touched).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xfer.core.data import _Iterable, per_process_share
from xfer.core.errors import DataError, UserError
from xfer.core.textfile import check_distinct
from xfer.cvt.text import Chunk, decode_line, index_file, tokenize
from xfer.cvt.vocab import BOW, CHAR_PAD, END, EOW, MISSING, PAD, START, Vocab

IGNORE = -100


# --- word inputs ---------------------------------------------------------------------------------


class Featurizer:
    """Turns sentences (lists of word strings) into the encoder's input tensors.

    Positions: 0 = <start>, 1..n = the words, n+1 = <end>, then padding. `chars` holds one row
    per distinct word of the batch (row 0: padding, row 1: the <missing> characters of <start>
    and <end>), in order of first occurrence, and `slots` points each position at its row, so the
    char-CNN runs once per word type of the batch. `wordpieces` (a `WordPieceTokenizer`) adds the
    inputs of Transformer features (first sub-token of each word, windows for long sentences).
    """

    def __init__(self, vocab: Vocab, max_word_chars: int, wordpieces: Any = None, wordpiece_length: int = 128):
        self.vocab, self.max_word_chars = vocab, max_word_chars
        self.wordpieces, self.wordpiece_length = wordpieces, wordpiece_length
        self._chars: dict[str, list[int]] = {}

    def char_ids(self, word: str) -> list[int]:
        ids = self._chars.get(word)
        if ids is None:
            ids = self._chars[word] = self.vocab.char_ids(word, self.max_word_chars)
        return ids

    def inputs(self, sentences: Sequence[Sequence[str]]) -> dict[str, torch.Tensor]:
        batch = len(sentences)
        width = max(len(s) for s in sentences) + 2
        words = torch.full((batch, width), PAD, dtype=torch.long)
        slots = torch.zeros((batch, width), dtype=torch.long)
        rows: dict[str, int] = {}
        char_rows: list[list[int]] = [[CHAR_PAD], [BOW, MISSING, EOW]]
        word_id = self.vocab.word_id
        for b, sentence in enumerate(sentences):
            n = len(sentence)
            ids = [START, *(word_id(w) for w in sentence), END]
            words[b, : n + 2] = torch.tensor(ids)
            slot_ids = [1]
            for w in sentence:
                row = rows.get(w)
                if row is None:
                    row = rows[w] = len(char_rows)
                    char_rows.append(self.char_ids(w))
                slot_ids.append(row)
            slot_ids.append(1)
            slots[b, : n + 2] = torch.tensor(slot_ids)
        char_width = max(len(r) for r in char_rows)
        chars = torch.full((len(char_rows), char_width), CHAR_PAD, dtype=torch.long)
        for i, row in enumerate(char_rows):
            chars[i, : len(row)] = torch.tensor(row)
        out = {
            "words": words,
            "slots": slots,
            "chars": chars,
            "char_lengths": torch.tensor([len(r) for r in char_rows]),
            "lengths": torch.tensor([len(s) + 2 for s in sentences]),
        }
        if self.wordpieces is not None:
            out.update(self._wordpiece_inputs(sentences))
        return out

    def _wordpiece_inputs(self, sentences: Sequence[Sequence[str]]) -> dict[str, torch.Tensor]:
        """Windows of word pieces: row r covers words [wp_first[r], wp_first[r] + wp_count[r]) of
        sentence wp_sentence[r]; wp_starts are the first sub-token of each of those words."""
        ids, starts, sentence_of, first = [], [], [], []
        for b, sentence in enumerate(sentences):
            for window in self.wordpieces.encode_words_windows(list(sentence), max_length=self.wordpiece_length):
                ids.append(window.input_ids)
                starts.append(window.word_starts)
                sentence_of.append(b)
                first.append(window.first_word)
        length = max(len(i) for i in ids)
        words = max(max((len(s) for s in starts), default=0), 1)
        wp_ids = torch.full((len(ids), length), self.wordpieces.pad_id, dtype=torch.long)
        wp_mask = torch.zeros((len(ids), length), dtype=torch.long)
        wp_starts = torch.zeros((len(ids), words), dtype=torch.long)
        wp_count = torch.tensor([len(s) for s in starts])
        for r, (row, row_starts) in enumerate(zip(ids, starts, strict=True)):
            wp_ids[r, : len(row)] = torch.tensor(row)
            wp_mask[r, : len(row)] = 1
            if row_starts:
                wp_starts[r, : len(row_starts)] = torch.tensor(row_starts)
        return {
            "wp_ids": wp_ids,
            "wp_mask": wp_mask,
            "wp_starts": wp_starts,
            "wp_count": wp_count,
            "wp_sentence": torch.tensor(sentence_of),
            "wp_first": torch.tensor(first),
        }


def pad_rows(rows: Sequence[Sequence[int]], width: int, offset: int = 1, fill: int = IGNORE) -> torch.Tensor:
    """[len(rows), width] with rows[b] written from column `offset` (position 1 = first word)."""
    out = torch.full((len(rows), width), fill, dtype=torch.long)
    for b, row in enumerate(rows):
        if row:
            out[b, offset : offset + len(row)] = torch.tensor(row)
    return out


# --- labeled items -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """One labeled sentence: input words, and labels as ids (`labels` tags or target tokens;
    `heads` for parsing, whose `labels` are the relation ids)."""

    id: str
    words: tuple[str, ...]
    labels: tuple[int, ...] = ()
    heads: tuple[int, ...] = ()

    @property
    def length(self) -> int:
        return len(self.words)


def subsample(count: int, fraction: float, seed: int) -> list[int]:
    """Indices (in file order) of a random `fraction` of `count` examples, at least one."""
    if fraction >= 1.0:
        return list(range(count))
    keep = max(1, round(fraction * count))
    return sorted(np.random.default_rng([seed, 7919]).choice(count, size=keep, replace=False).tolist())


# --- streams -------------------------------------------------------------------------------------


def _pool_batches(lengths: Sequence[int], batch_size: int, seed_key: list[int]) -> list[list[int]]:
    """Positions 0..P-1 of a pool sorted by length (ties keep stream order), cut into batches of
    `batch_size`, in a seeded random order."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    permutation = np.random.default_rng(seed_key).permutation(len(batches))
    return [batches[i] for i in permutation]


def _rank_slices(
    items: list[Any], rank: int, world_size: int, accumulation: int, collate: Callable[[list[Any]], Any]
) -> list[Any]:
    mine = items[rank::world_size]
    size = len(mine) // accumulation
    return [collate(mine[k * size : (k + 1) * size]) for k in range(accumulation)]


class PooledStream(_Iterable):
    """Endless fixed-size batches over `items` (seeded epoch permutations laid end to end),
    length-sorted within pools of `pool_batches` batches. Cursor: (pool, batch in pool)."""

    def __init__(
        self,
        items: Sequence[Any],
        lengths: Sequence[int],
        batch_size: int,
        collate: Callable[[list[Any]], Any],
        seed: int,
        *,
        rank: int = 0,
        world_size: int = 1,
        accumulation: int = 1,
        pool_batches: int = 50,
    ):
        if not len(items):
            raise ValueError("cannot train on an empty dataset")
        per_process_share(batch_size, world_size, accumulation)
        self.items, self.lengths, self.batch_size, self.collate = items, list(lengths), batch_size, collate
        self.seed, self.rank, self.world_size, self.accumulation = seed, rank, world_size, accumulation
        self.pool_size = pool_batches * batch_size
        self.pool, self.batch = 0, 0
        self._cache: tuple[int, list[list[int]]] | None = None
        self._orders: dict[int, np.ndarray] = {}

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.items) / self.batch_size)

    def _order(self, epoch: int) -> np.ndarray:
        if epoch not in self._orders:
            self._orders = {epoch: np.random.default_rng([self.seed, epoch]).permutation(len(self.items))}
        return self._orders[epoch]

    def _batches(self, pool: int) -> list[list[int]]:
        if self._cache is None or self._cache[0] != pool:
            n = len(self.items)
            indices = []
            for position in range(pool * self.pool_size, (pool + 1) * self.pool_size):
                indices.append(int(self._order(position // n)[position % n]))
            ordered = _pool_batches([self.lengths[i] for i in indices], self.batch_size, [self.seed, pool, 1])
            self._cache = (pool, [[indices[p] for p in batch] for batch in ordered])
        return self._cache[1]

    def next_step(self) -> list[Any]:
        batch = self._batches(self.pool)[self.batch]
        self.batch += 1
        if self.batch == len(self._batches(self.pool)):
            self.pool, self.batch = self.pool + 1, 0
        return _rank_slices([self.items[i] for i in batch], self.rank, self.world_size, self.accumulation, self.collate)

    def state_dict(self) -> dict[str, int]:
        return {"pool": self.pool, "batch": self.batch, "seed": self.seed, "size": len(self.items)}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state.get("size") != len(self.items) or state.get("seed") != self.seed:
            raise ValueError(
                f"data changed since the checkpoint (size {state.get('size')} -> {len(self.items)}, "
                f"seed {state.get('seed')} -> {self.seed}); cannot resume exactly"
            )
        self.pool, self.batch, self._cache = state["pool"], state["batch"], None


class UnlabeledCorpus:
    """The unlabeled files as chunks of `chunk_lines` lines, read on demand."""

    def __init__(
        self,
        files: Sequence[Path],
        chunk_lines: int,
        max_length: int,
        tokenizer: str,
        key: str = "unlabeled.files",
        pretokenized: Sequence[Path] = (),
    ):
        """`pretokenized`: those of `files` whose lines are words joined by spaces already (the tasks'
        own training sentences): split on whitespace whatever `tokenizer` says, or `punct` cut the
        tasks' tokens again ("U.S." into "U . S .") and the unlabeled view of a task sentence was
        not the sentence the task trains on."""
        if not files:
            raise DataError(key, 0, "no unlabeled files")
        check_distinct(files, key)
        self.files, self.chunk_lines, self.max_length, self.tokenizer = list(files), chunk_lines, max_length, tokenizer
        self.pretokenized = {Path(p) for p in pretokenized}
        self.chunks: list[Chunk] = []
        self.has_words = False  # a line that is not blank
        for path in self.files:
            chunks, has_words = index_file(path, chunk_lines)
            self.chunks += chunks
            self.has_words = self.has_words or has_words
        if not self.chunks:
            raise DataError(self.files[0], 0, "the unlabeled files are empty")

    def split(self, text: str, pretokenized: bool = False) -> list[list[str]]:
        """The sentences of one line: its words cut into pieces of at most max_length."""
        words = text.split() if self.tokenizer == "whitespace" or pretokenized else tokenize(text)
        return [words[i : i + self.max_length] for i in range(0, len(words), self.max_length)]

    def read(self, index: int, lines: int | None = None) -> list[list[str]]:
        """The sentences of chunk `index` (of its first `lines` lines if given), in file order."""
        chunk = self.chunks[index]
        sentences: list[list[str]] = []
        crc, count = 0, chunk.lines if lines is None else min(lines, chunk.lines)
        with open(chunk.file, "rb") as handle:
            handle.seek(chunk.offset)
            for i in range(count):
                raw = handle.readline()
                crc = zlib.crc32(raw, crc)
                sentences += self.split(decode_line(chunk.file, chunk.line + i, raw), chunk.file in self.pretokenized)
        if count == chunk.lines and crc != chunk.crc:  # the chunk's lines are not those indexed
            raise DataError(
                chunk.file,
                chunk.line,
                "the file changed since the stage indexed it when it started (its chunks are byte offsets, which "
                "now point into other lines): leave the unlabeled files alone while the stage runs (`xfer run` "
                "then starts it afresh, as its inputs changed)",
            )
        return sentences

    def words(self, lines: int | None = None) -> Iterator[str]:
        """Every word of the corpus in file order (of its first `lines` lines only, if given)."""
        left = lines
        for index, chunk in enumerate(self.chunks):
            if left is not None and left <= 0:
                return
            for sentence in self.read(index, left):
                yield from sentence
            if left is not None:
                left -= chunk.lines


def unlabeled_share(batch_size: int, world_size: int, accumulation: int) -> int:
    """`per_process_share` of an unlabeled batch, whose error names `unlabeled.batch_size`: the
    shared check names `train.batch_size`, so `unlabeled.batch_size: 30` on 4 processes was blamed
    on a train.batch_size that every process divided evenly."""
    try:
        return per_process_share(batch_size, world_size, accumulation)
    except UserError:
        raise UserError(
            f"unlabeled.batch_size {batch_size} (its default: train.batch_size) must be a multiple of the number "
            f"of processes ({world_size}) x train.grad_accum ({accumulation}): every process takes an equal share "
            "of every unlabeled micro-batch"
        ) from None


class UnlabeledStream(_Iterable):
    """Endless fixed-size batches of unlabeled sentences (see the module docstring).

    Position in the stream: (epoch, chunk position in that epoch's chunk order, sentence offset in
    the shuffled chunk). A pool = the next `pool_batches * batch_size` sentences from a position.
    Cursor: the current pool's start position, its index, and the batch within it.
    """

    def __init__(
        self,
        corpus: UnlabeledCorpus,
        batch_size: int,
        collate: Callable[[list[Any]], Any],
        seed: int,
        *,
        rank: int = 0,
        world_size: int = 1,
        accumulation: int = 1,
        pool_batches: int = 50,
    ):
        unlabeled_share(batch_size, world_size, accumulation)
        self.corpus, self.batch_size, self.collate, self.seed = corpus, batch_size, collate, seed
        self.rank, self.world_size, self.accumulation = rank, world_size, accumulation
        self.pool_size = pool_batches * batch_size
        self.start = (0, 0, 0)
        self.pool, self.batch = 0, 0
        self._pool: tuple[tuple[int, int, int], list[list[list[str]]], tuple[int, int, int]] | None = None
        self._chunk: tuple[tuple[int, int], list[list[str]]] | None = None
        self._content: list[int] | None = None

    @property
    def steps_per_epoch(self) -> None:
        return None

    def _chunk_sentences(self, epoch: int, position: int) -> list[list[str]]:
        if self._chunk is None or self._chunk[0] != (epoch, position):
            order = np.random.default_rng([self.seed, epoch]).permutation(len(self.corpus.chunks))
            index = int(order[position])
            sentences = self.corpus.read(index)
            shuffle = np.random.default_rng([self.seed, epoch, index, 2]).permutation(len(sentences))
            self._chunk = ((epoch, position), [sentences[i] for i in shuffle])
        return self._chunk[1]

    def _read_pool(self, start: tuple[int, int, int]) -> tuple[list[list[str]], tuple[int, int, int]]:
        epoch, position, offset = start
        pool: list[list[str]] = []
        whole_epoch, seen = position == 0 and offset == 0, 0
        while len(pool) < self.pool_size:
            sentences = self._chunk_sentences(epoch, position)
            seen += len(sentences)
            take = sentences[offset : offset + self.pool_size - len(pool)]
            pool += take
            offset += len(take)
            if offset >= len(sentences):
                position, offset = position + 1, 0
                if position == len(self.corpus.chunks):
                    if whole_epoch and seen == 0:
                        raise DataError(self.corpus.files[0], 0, "the unlabeled files contain no words")
                    epoch, position, whole_epoch, seen = epoch + 1, 0, True, 0
        return pool, (epoch, position, offset)

    def _batches(self) -> list[list[list[str]]]:
        if self._pool is None or self._pool[0] != self.start:
            sentences, end = self._read_pool(self.start)
            order = _pool_batches([len(s) for s in sentences], self.batch_size, [self.seed, self.pool, 1])
            self._pool = (self.start, [[sentences[i] for i in batch] for batch in order], end)
        return self._pool[1]

    def next_step(self) -> list[Any]:
        batches = self._batches()
        batch = batches[self.batch]
        self.batch += 1
        if self.batch == len(batches):
            assert self._pool is not None
            self.start, self.pool, self.batch = self._pool[2], self.pool + 1, 0
        return _rank_slices(batch, self.rank, self.world_size, self.accumulation, self.collate)

    def content_key(self) -> list[int]:
        """What the cursor's positions index: the number of chunks and a CRC-32 over every chunk's
        line count and CRC, in order. Bytes only, no paths: the stage's task-sentence file lives in
        the run directory, so a cursor that named paths was refused after `--fork` or a moved run
        directory, though every sentence was where it had been. Computed once: every step's cursor
        holds it."""
        if self._content is None:
            digest = 0
            for chunk in self.corpus.chunks:
                digest = zlib.crc32(f"{chunk.lines}:{chunk.crc};".encode(), digest)
            self._content = [len(self.corpus.chunks), digest]
        return list(self._content)

    def state_dict(self) -> dict[str, Any]:
        return {
            "start": list(self.start),
            "pool": self.pool,
            "batch": self.batch,
            "seed": self.seed,
            "content": self.content_key(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "content" in state:
            same = state["content"] == self.content_key()
        else:  # a checkpoint of an older xfer: [[path, offset, lines] of the first chunk, number of chunks]
            legacy = state.get("chunks")
            first = self.corpus.chunks[0]
            same = legacy is not None and [c[1:] for c in legacy[:1]] + legacy[1:] == [
                [first.offset, first.lines],
                len(self.corpus.chunks),
            ]
        if state.get("seed") != self.seed or not same:
            raise ValueError("the unlabeled files or the seed changed since the checkpoint; cannot resume exactly")
        self.start = tuple(state["start"])  # type: ignore[assignment]
        self.pool, self.batch, self._pool = state["pool"], state["batch"], None

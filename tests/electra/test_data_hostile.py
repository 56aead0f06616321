"""ELECTRA pre-training data against hostile input and hostile kills: corpus text that spells the
tokenizer's special tokens, bad bytes in a `dataset:` text file or a stream (found before training),
a corpus too large to copy into memory, and a build whose process alone is SIGKILLed while its
forked workers run."""

from __future__ import annotations

import contextlib
import os
import random
import sys
import time
from pathlib import Path

import pytest

from xfer.core.config import Files
from xfer.electra.corpus import CorpusConfig
from xfer.electra.data import build_examples
from xfer.transformer.tokenization import WordPieceTokenizer

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "sep", "cls", "mask", "pad", "unk"]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A WordPiece vocabulary that knows the words, and "[" / "]" as pieces of their own."""
    root = tmp_path_factory.mktemp("hostile-vocab")
    text = root / "train.txt"
    text.write_text("\n".join(f"{w} [ ] {' '.join(WORDS)}" for w in WORDS) + "\n", encoding="utf-8")
    tokenizer = WordPieceTokenizer.train([text], vocab_size=80)
    tokenizer.save(root / "vocab")
    return root / "vocab"


def corpus_of(*files: Path, **options) -> CorpusConfig:
    return CorpusConfig(files=Files(tuple(str(f) for f in files)), **options)


@pytest.mark.parametrize("options", [{}, {"streaming": True}, {"num_proc": 2}])
def test_corpus_text_that_spells_a_special_token_is_text_not_that_token(
    vocab: Path, tmp_path: Path, options: dict
) -> None:
    """A line reading "see [SEP] or [PAD]" was tokenized with the tokenizer's added-token matching,
    so the examples got a [SEP] inside a segment, a [CLS] after position 0, a [MASK] the objective
    never chose and a [PAD] inside the sequence: not `[CLS] a [SEP] b [SEP]` any more. The original
    ELECTRA's BERT tokenizer splits such text into "[", "sep", "]" like any other punctuation."""
    tokenizer = WordPieceTokenizer.from_dir(vocab)
    specials = {tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id, tokenizer.pad_id}
    path = tmp_path / "corpus.txt"
    path.write_text(
        "the cat [SEP] sat on [CLS] a mat\nthe dog [MASK] ran [PAD] far [UNK]\n\nthe cat sat\n", encoding="utf-8"
    )
    corpus = corpus_of(path, path.with_name("copy.txt"), **options)
    path.with_name("copy.txt").write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    examples = build_examples(corpus, [path, path.with_name("copy.txt")], vocab, 64, tmp_path / "cache", 1)
    names = {i: t for t, i in tokenizer.vocab.items()}
    pieces = []
    for row in examples:
        ids, split = row["input_ids"], row["segment_split"]
        assert ids[0] == tokenizer.cls_id and ids[split - 1] == tokenizer.sep_id and ids[-1] == tokenizer.sep_id
        inner = [t for i, t in enumerate(ids) if i not in (0, split - 1, len(ids) - 1)]
        assert not specials & set(inner), (ids, split)
        pieces += [names[t] for t in inner]
    assert pieces.count("[") == pieces.count("]") == 10 and pieces.count("sep") == 2 and pieces.count("pad") == 2


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(
    ("name", "data", "where"),
    [
        ("latin1.txt", b"the cat sat\n\nthe dog ran\na caf\xe9 far\n", r"latin1\.txt:4: encoding: not valid UTF-8"),
        ("latin1.jsonl", b'{"text": "the cat"}\n{"text": "caf\xe9"}\n', r"latin1\.jsonl:2: encoding: not valid UTF-8"),
    ],
)
def test_non_utf8_bytes_in_a_local_data_file_name_its_line(
    vocab: Path, tmp_path: Path, name: str, data: bytes, where: str, streaming: bool
) -> None:
    """A `.txt` given as `corpus.dataset` (datasets' text builder) with a Latin-1 byte failed with
    "cannot load this dataset: DatasetGenerationError: An error occurred while generating the
    dataset" (no line, not even "encoding"); streamed, any local file said "reading failed at or
    after row 1" with a byte position inside pyarrow's chunk. The same bytes in `corpus.files`
    name their line: so must they here, before any training."""
    from xfer.core.errors import DataError
    from xfer.electra.data import PretrainBatches

    path = tmp_path / name
    path.write_bytes(data)
    corpus = CorpusConfig(dataset=str(path), streaming=streaming)
    with pytest.raises(DataError, match=where):
        examples = build_examples(corpus, [], vocab, 24, tmp_path / "cache", 1)
        PretrainBatches(examples, 2, seed=1, pad_id=0, shuffle_buffer=2).next_step()


def test_a_streamed_corpus_with_bad_bytes_fails_before_training_and_is_checked_once(
    vocab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streamed text corpus was read only while training: a byte that is not UTF-8 (or a CR-only
    line end) in a late block stopped the run hours in, and the fix (editing the file) changes the
    fingerprint, so the whole run started over. It is now found when the stream is opened; a file
    already checked (same contents) is not read again on the next start or resume."""
    from xfer.core.errors import DataError
    from xfer.electra import data as electra_data

    good = tmp_path / "good.txt"
    good.write_text("".join(f"the cat sat on a mat {i}\n\nthe dog ran far\n\n" for i in range(200)), encoding="utf-8")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(good.read_bytes() + b"the caf\xe9 ran\n")
    stream = CorpusConfig(files=Files((str(good), str(bad))), streaming=True)
    with pytest.raises(DataError, match=r"bad\.txt:801: encoding: not valid UTF-8"):
        build_examples(stream, [good, bad], vocab, 24, tmp_path / "cache", 1, block_bytes=100)
    mac = tmp_path / "mac.txt"
    mac.write_bytes(good.read_bytes() + b"the cat\rsat\n")
    with pytest.raises(DataError, match=r"mac\.txt:801: carriage return"):
        build_examples(stream, [good, mac], vocab, 24, tmp_path / "cache", 1, block_bytes=100)
    old = time.time() - 60  # a file written just now is checked again next time (racy timestamps)
    os.utime(good, (old, old))
    first = list(build_examples(stream, [good], vocab, 24, tmp_path / "cache", 1, block_bytes=100))

    def unread(*args, **kwargs):
        raise AssertionError("a checked file was read again before training")

    monkeypatch.setattr(electra_data, "iter_text_lines", unread)
    again = build_examples(stream, [good], vocab, 24, tmp_path / "cache", 1, block_bytes=100)
    monkeypatch.undo()
    assert list(again) == first
    with good.open("ab") as handle:  # written since: read again, and its new bad byte found
        handle.write(b"\xff\n")
    with pytest.raises(DataError, match=r"good\.txt:801: encoding: not valid UTF-8"):
        build_examples(stream, [good], vocab, 24, tmp_path / "cache", 1, block_bytes=100)


def test_token_counts_do_not_copy_the_whole_memory_mapped_corpus() -> None:
    """The unigram counts (for the unknown-token warning, the corpus entropy and the unigram
    generator), computed at the start of every map-style run, copied the whole `input_ids` column
    into memory (~12 bytes per token): a corpus of billions of tokens did not fit."""
    import tracemalloc

    import numpy as np
    import pyarrow as pa

    from xfer.electra.stage import table_token_counts

    rng = np.random.default_rng(0)
    flat = rng.integers(0, 1000, 64 * 40_000, dtype=np.int32)
    offsets = pa.array(np.arange(0, len(flat) + 1, 64, dtype=np.int32))
    table = pa.table({"input_ids": pa.ListArray.from_arrays(offsets, pa.array(flat))})  # one chunk of 20 MB as int64
    tracemalloc.start()
    try:
        counts = table_token_counts(table, 1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.array_equal(counts, np.bincount(flat, minlength=1000))
    assert peak < 6_000_000, f"{peak / 1e6:.1f} MB to count {len(flat)} tokens"


def test_the_build_lock_dies_with_its_process_not_with_its_forked_workers(tmp_path: Path) -> None:
    """`datasets.map(num_proc=N)` forks its workers while the build lock is held. With an flock
    (which belongs to the open file, shared by forked children) a SIGKILL of the stage's process
    alone left the idle workers alive holding the lock forever: every later build of the same
    examples (another run sharing `data_cache`) then waited without a word."""
    import signal
    import subprocess
    import sys
    import threading

    from xfer.electra import data as electra_data

    lock = tmp_path / ".examples.lock"
    script = f"""
import os, signal, sys, time
from pathlib import Path
from xfer.electra.data import _exclusive
with _exclusive(Path({str(lock)!r})):
    child = os.fork()
    if child == 0:  # a forked worker: outlives its parent, idle
        time.sleep(60)
        os._exit(0)
    print(child, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(process.stdout.readline())
    try:
        assert process.wait(timeout=30) == -signal.SIGKILL
        acquired = threading.Event()

        def take() -> None:
            with electra_data._exclusive(lock):
                acquired.set()

        threading.Thread(target=take, daemon=True).start()
        assert acquired.wait(timeout=10), "the lock is still held by the dead builder's forked worker"
    finally:
        os.kill(child, signal.SIGKILL)


def _state_and_parent(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of process `pid` from /proc, None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


def _alive(pid: int) -> bool:
    found = _state_and_parent(pid)
    return found is not None and found[0] not in ("Z", "X")


def _children(pid: int) -> list[int]:
    """Live child processes of `pid`."""
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    return [c for c in pids if (_state_and_parent(c) or ("", 0))[1] == pid and _alive(c)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal and /proc are Linux's")
def test_a_build_killed_alone_takes_its_worker_processes_with_it(vocab: Path, tmp_path: Path) -> None:
    """SIGKILL of the stage's process alone (`kill -9 PID`, the OOM killer) during a `num_proc`
    build left its `datasets.map` workers and datasets' Manager process alive and idle forever,
    holding the run directory's lock (the re-run was refused: "in use by pid N", a dead pid) and the
    cache's: they now die with it."""
    import signal
    import subprocess

    files = []
    for index in range(4):
        path = tmp_path / f"part{index}.txt"
        path.write_text("".join(f"the cat sat on a mat {i}\n\n" for i in range(40)), encoding="utf-8")
        files.append(path)
    cache = tmp_path / "cache"
    script = """
import sys, time
from pathlib import Path
from xfer.core.config import Files
from xfer.electra import data
from xfer.electra.corpus import CorpusConfig
real = data._PackSpec.pack_block
def slow(self, block, *stats):
    time.sleep(0.2)
    return real(self, block, *stats)
data._PackSpec.pack_block = slow
files = [Path(p) for p in sys.argv[3:]]
corpus = CorpusConfig(files=Files(tuple(map(str, files))), num_proc=2)
data.build_examples(corpus, files, Path(sys.argv[1]), 24, Path(sys.argv[2]), 1, block_bytes=200)
"""
    args = [sys.executable, "-c", script, str(vocab), str(cache), *map(str, files)]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children: list[int] = []
    try:
        deadline = time.time() + 60
        while not list(cache.glob(".*.tmp-*/pack-stats/blocks-*.jsonl")) and time.time() < deadline:
            assert process.poll() is None, "the build ended before it could be killed"
            time.sleep(0.02)
        children = _children(process.pid)
        assert len(children) >= 2, children  # the map's workers (and datasets' Manager)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        deadline = time.time() + 10
        while (alive := [c for c in children if _alive(c)]) and time.time() < deadline:
            time.sleep(0.05)
        assert not alive, f"worker processes {alive} outlived the killed build"
    finally:
        process.kill()
        for child in children:
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)


def test_a_line_longer_than_an_example_is_tokenized_in_pieces_with_the_same_examples(
    vocab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A corpus that is one enormous line (text8, a file without newlines) was tokenized whole to
    keep `max_length - 2` of its tokens: 12 GB of memory for a 100 MB line, so a 1 GB one could not
    be packed at all. Long lines are now tokenized in pieces of bounded size, and the examples and
    the counts in the manifest (tokens, tokens cut) are exactly those of tokenizing them whole."""
    from xfer.electra import data as electra_data
    from xfer.electra.data import cache_manifest

    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "[SEP]", "\t", "mask"]
    rng = random.Random(3)
    lines = []
    for _document in range(30):
        for _ in range(rng.randint(1, 4)):
            lines.append(" ".join(rng.choice(words) for _ in range(rng.choice([3, 8, 40, 300]))))
        lines.append("")
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n" + "  ".join(["dog"] * 5000), encoding="utf-8")
    corpus = corpus_of(path)

    def build(cache: str):
        examples = build_examples(corpus, [path], vocab, 24, tmp_path / cache, 1, warn=lambda message: None)
        return [(r["input_ids"], r["segment_split"]) for r in examples], cache_manifest(examples)["packing"]

    whole = build("whole")
    real_backend = electra_data._backend
    longest: list[int] = [0]

    class Watched:
        def __init__(self, backend) -> None:
            self.backend = backend

        def encode_batch_fast(self, texts, **options):
            longest[0] = max([longest[0], *(len(t) for t in texts)])
            return self.backend.encode_batch_fast(texts, **options)

    monkeypatch.setattr(electra_data, "_LONG_LINE_CHARS", 50, raising=False)
    monkeypatch.setattr(electra_data, "_backend", lambda *args: Watched(real_backend(*args)))
    pieces = build("pieces")
    assert pieces == whole and whole[1]["long_lines"] > 10
    assert 0 < longest[0] <= 60, f"a text of {longest[0]} characters was tokenized at once"


def test_cr_only_line_endings_are_found_at_the_start_of_a_long_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With CR-only (classic Mac) endings a file is one line, which was read whole (re-joining every
    1 MiB chunk to it, quadratic in its size) before its first CR was reported: minutes and gigabytes
    for a large corpus. The first chunk without a newline already shows the CR."""
    from xfer.core.errors import DataError
    from xfer.electra import packing

    path = tmp_path / "mac.txt"
    path.write_bytes(b"the cat sat on the mat\r" * 20_000)
    read = [0]
    real_open = packing._open

    class Counting:
        def __init__(self, handle) -> None:
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.handle.close()

        def seek(self, offset: int) -> None:
            self.handle.seek(offset)

        def read(self, size: int) -> bytes:
            data = self.handle.read(size)
            read[0] += len(data)
            return data

    monkeypatch.setattr(packing, "_READ_CHUNK_BYTES", 4096)
    monkeypatch.setattr(
        packing, "_open", lambda p: Counting(real_open(p)) if p == path and not read[0] else real_open(p)
    )
    with pytest.raises(DataError, match=r"mac\.txt:1: carriage return \(CR\) inside the line at column 23"):
        for _ in packing.iter_text_lines(path, 0, path.stat().st_size):
            pass
    assert read[0] <= 4096, f"{read[0]} bytes read before the error"

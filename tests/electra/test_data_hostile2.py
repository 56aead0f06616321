"""ELECTRA pre-training data against hostile corpus files, continued: the same text with other line
ends (CRLF, mixed) or a byte-order mark, the number of packing processes, a FIFO or a device as a
corpus file, a glob matching the example cache's own files, and a corpus without newlines."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from xfer.core.config import Files
from xfer.electra.corpus import CorpusConfig
from xfer.electra.data import build_examples
from xfer.electra.packing import BLOCK_BYTES, plan_text_blocks, prefix_ends
from xfer.transformer.tokenization import WordPieceTokenizer

BOM = b"\xef\xbb\xbf"


def lf_text(seed: int, docs: int, words: int = 20, long: int = 60) -> bytes:
    """Documents of 1-9 lines (some `long`) of up to `words` words, a blank line between documents."""
    rng = random.Random(seed)
    lines = []
    for d in range(docs):
        letter = "abcdefghij"[d % 10]
        for _ in range(rng.choice([rng.randint(1, 9), long])):
            lines.append(" ".join(letter * rng.randint(1, 4) for _ in range(rng.randint(1, words))))
        lines.append(rng.choice(["", "  "]))  # a line of spaces is blank too
    return ("\n".join(lines) + "\n").encode()


def twins(lf: bytes, seed: int) -> dict[str, bytes]:
    """The same text with CRLF line ends, a BOM, both, and a random mix of LF and CRLF."""
    rng = random.Random(seed)
    lines = lf.split(b"\n")
    mixed = b"".join(line + rng.choice([b"\n", b"\r\n"]) for line in lines[:-1]) + lines[-1]
    crlf = lf.replace(b"\n", b"\r\n")
    return {"crlf": crlf, "bom": BOM + lf, "bom+crlf": BOM + crlf, "mixed": mixed}


def block_texts(path: Path, block_bytes: int, max_lines: int | None = None) -> list[bytes]:
    """The text of each planned block of `path`, with LF line ends and without BOM."""
    data = path.read_bytes()
    blocks = plan_text_blocks([path], prefix_ends([path], max_lines), block_bytes)
    return [data[b.start : b.end].replace(b"\r\n", b"\n").removeprefix(BOM) for b in blocks]


def test_a_crlf_or_bom_file_over_one_block_is_cut_into_the_blocks_of_its_lf_twin(tmp_path: Path) -> None:
    """Blocks were cut every `block_bytes` raw bytes: a CRLF file (one byte more per line) or a BOM
    file (three more) over 1 MiB had its cuts at other lines than its LF twin, so its blocks, each
    packed with its own seeded RNG, made other examples of the same text. Cuts now count the text."""
    lf = tmp_path / "lf.txt"
    lf.write_bytes(lf_text(seed=1, docs=2300))
    assert lf.stat().st_size > 2.5 * BLOCK_BYTES
    expected = block_texts(lf, BLOCK_BYTES)
    assert len(expected) >= 3
    for name, data in twins(lf.read_bytes(), seed=2).items():
        twin = tmp_path / f"{name}.txt"
        twin.write_bytes(data)
        assert block_texts(twin, BLOCK_BYTES) == expected, name


@pytest.mark.parametrize("block_bytes", [40, 300, 1000])
def test_twins_get_the_same_blocks_with_scan_limit_cuts_and_max_lines(tmp_path: Path, block_bytes: int) -> None:
    """Small blocks: many cuts, documents longer than the scan limit (cut there, counted in text
    bytes too), and a `max_lines` prefix."""
    for seed in range(4):
        text = lf_text(seed=seed, docs=60, words=8, long=200)
        lf = tmp_path / "lf.txt"
        lf.write_bytes(text)
        for max_lines in (None, 1000):
            expected = block_texts(lf, block_bytes, max_lines)
            assert len(expected) > (3 if max_lines is None else 1)
            if block_bytes == 40 and max_lines is None:  # a document longer than the scan limit was cut
                assert any(not block.endswith((b"\n\n", b"\n  \n")) for block in expected[:-1])
            for name, data in twins(text, seed=seed).items():
                twin = tmp_path / f"{name}.txt"
                twin.write_bytes(data)
                assert block_texts(twin, block_bytes, max_lines) == expected, (seed, name, max_lines)


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile2-vocab")
    text = root / "train.txt"
    text.write_bytes(lf_text(seed=0, docs=30))
    tokenizer = WordPieceTokenizer.train([text], vocab_size=80)
    tokenizer.save(root / "vocab")
    return root / "vocab"


def rows(examples) -> list[tuple[tuple[int, ...], int]]:
    return [(tuple(r["input_ids"]), r["segment_split"]) for r in examples]


def test_the_same_text_packs_into_the_same_examples_whatever_its_line_ends_or_processes(
    vocab: Path, tmp_path: Path
) -> None:
    """End to end: a corpus of several files and many blocks gives the examples of its LF twin with
    CRLF, mixed line ends or a BOM; and `num_proc` (1, 2 or 3 processes) changes none of them."""
    text = [lf_text(seed=10 + i, docs=40, words=8) for i in range(3)]
    lf = []
    for i, data in enumerate(text):
        (tmp_path / f"lf{i}.txt").write_bytes(data)
        lf.append(tmp_path / f"lf{i}.txt")

    def build(files: list[Path], cache: str, num_proc: int = 1):
        corpus = CorpusConfig(files=Files(tuple(map(str, files))), num_proc=num_proc)
        return rows(build_examples(corpus, files, vocab, 24, tmp_path / cache, 1, block_bytes=500))

    expected = build(lf, "lf")
    assert len(expected) > 100
    for name in ("crlf", "bom+crlf", "mixed"):
        files = []
        for i, data in enumerate(text):
            (tmp_path / f"{name}{i}.txt").write_bytes(twins(data, seed=i)[name])
            files.append(tmp_path / f"{name}{i}.txt")
        assert build(files, name) == expected, name
    assert build(lf, "np2", num_proc=2) == build(lf, "np3", num_proc=3) == expected


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_fifo_or_a_device_in_corpus_files_is_refused_by_name_not_dropped(vocab: Path, tmp_path: Path) -> None:
    """The stage's file list keeps regular files only: a FIFO named in `corpus.files` was dropped
    without a word, so alone it failed with "the patterns matched nothing" (it exists), and beside
    another file the corpus silently lacked it; given directly, /dev/zero was "file not found", and
    a FIFO as `corpus.dataset` "Couldn't find any data file"."""
    from xfer.core.errors import DataError

    good = tmp_path / "good.txt"
    good.write_bytes(lf_text(seed=3, docs=5))
    pipe = tmp_path / "pipe.txt"
    os.mkfifo(pipe)
    not_regular = r"not a regular file \(a FIFO, device or socket\)"
    for patterns, files in (((pipe,), []), ((good, pipe), [good]), ((tmp_path / "*.txt",), [good])):
        corpus = CorpusConfig(files=Files(tuple(map(str, patterns))))
        with pytest.raises(DataError, match=rf"pipe\.txt: matched by corpus\.files .*: is {not_regular}"):
            build_examples(corpus, files, vocab, 24, tmp_path / "cache", 1)
    with pytest.raises(DataError, match=rf"pipe\.txt: is {not_regular}"):  # was "Couldn't find any data file"
        build_examples(CorpusConfig(dataset=str(pipe)), [], vocab, 24, tmp_path / "cache", 1)
    with pytest.raises(DataError, match=rf"^/dev/zero: matched by corpus\.files '/dev/zero': is {not_regular}"):
        build_examples(CorpusConfig(files=Files(("/dev/zero",))), [Path("/dev/zero")], vocab, 24, tmp_path / "c", 1)
    with pytest.raises(DataError, match=rf"^/dev/zero: is {not_regular}"):
        prefix_ends([Path("/dev/zero")], None)


def test_the_example_caches_own_files_matched_by_a_corpus_glob_are_refused(vocab: Path, tmp_path: Path) -> None:
    """`files: [data/**]` with the cache in `data/cache` (or `**` around the run directory, which
    holds the default cache) matched the cache's own files on the next run: its manifest was packed
    as corpus text, or the build stopped on "examples.arrow:1: not valid UTF-8", not saying why."""
    from xfer.core.errors import DataError

    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_bytes(lf_text(seed=4, docs=5))
    corpus = CorpusConfig(files=Files((str(data / "**"),)))
    cache = data / "cache"
    build_examples(corpus, [data / "a.txt"], vocab, 24, cache, 1)
    matched = sorted(p for p in data.glob("**/*") if p.is_file())  # what the stage's glob finds now
    assert any(p.name == "manifest.json" for p in matched)
    with pytest.raises(DataError, match=r"corpus\.files: is a file of the pre-training example cache in"):
        build_examples(corpus, matched, vocab, 24, cache, 1)
    with pytest.raises(DataError, match=r"manifest\.json: corpus\.files: is a file of the pre-training example cache"):
        build_examples(corpus, [data / "a.txt", *(p for p in matched if p.suffix == ".json")], vocab, 24, cache, 1)
    # the user's own text in the cache folder (data_cache: the corpus folder) is corpus text
    assert len(build_examples(corpus, [data / "a.txt"], vocab, 24, data, 1)) > 0


def test_planning_a_corpus_without_newlines_does_not_load_it(tmp_path: Path) -> None:
    """A corpus that is one line (text8, a file without newlines) is packed in bounded memory, but
    planning its blocks read the rest of that line in one `readline()` from the first cut on: a
    copy of the whole file in memory (twice, while it grew), so a 1 GB line needed GBs to plan."""
    import tracemalloc

    path = tmp_path / "one-line.txt"
    path.write_bytes(b"the cat sat on the mat " * 1_000_000)  # 23 MB, no newline
    tracemalloc.start()
    try:
        blocks = plan_text_blocks([path], prefix_ends([path], None))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [(b.start, b.end) for b in blocks] == [(0, path.stat().st_size)]
    assert peak < 8_000_000, f"{peak / 1e6:.1f} MB to plan a file of {path.stat().st_size / 1e6:.0f} MB"


def test_which_files_hold_a_cr_is_found_once_per_file_contents(
    vocab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cutting by the text needs to know whether a file holds a CR, which reads all of it: remembered
    by the file's identity, so a later start or resume plans a large corpus by reading around its cuts
    only, as before; a file written since is read again (here: rewritten with CRLF line ends)."""
    import time

    from xfer.electra import data as electra_data

    path = tmp_path / "corpus.txt"
    text = lf_text(seed=5, docs=40, words=8)
    path.write_bytes(text)
    old = time.time() - 60  # a file written just now is scanned again next time (racy timestamps)
    os.utime(path, (old, old))
    corpus = CorpusConfig(files=Files((str(path),)))

    def build() -> list[tuple[tuple[int, ...], int]]:
        return rows(build_examples(corpus, [path], vocab, 24, tmp_path / "cache", 1, block_bytes=500))

    first = build()
    scanned: list[Path] = []
    real = electra_data.text_has_cr
    monkeypatch.setattr(electra_data, "text_has_cr", lambda p, end: scanned.append(p) or real(p, end))
    assert build() == first and scanned == []
    path.write_bytes(text.replace(b"\n", b"\r\n"))
    assert build() == first and scanned == [path]


def test_num_proc_is_signed_as_one_so_changing_it_reruns_nothing(tmp_path: Path) -> None:
    """The examples do not depend on `corpus.num_proc` (pinned above), yet the fingerprint signed it:
    `corpus.num_proc=2` on an existing run re-ran the whole pre-training."""
    from xfer.core.recipes.recipe import load_recipe
    from xfer.testing import make_host, write_recipe

    from .electra_recipes import pretrain_recipe

    recipe = write_recipe(tmp_path, pretrain_recipe(50, "electra.rtd", "{steps: 1, batch_size: 8, warmup_steps: 0}"))
    host = make_host(autoload=True)
    signed = [
        load_recipe(recipe, [f"stages.fit.corpus.num_proc={n}"], host).stages["fit"].resolved(signing=True)
        for n in (1, 3)
    ]
    assert signed[0] == signed[1] and signed[0]["corpus"]["num_proc"] == 1
    assert (
        load_recipe(recipe, ["stages.fit.corpus.num_proc=3"], host).stages["fit"].resolved()["corpus"]["num_proc"] == 3
    )


def test_a_corpus_of_byte_order_marks_and_blank_lines_is_empty_in_the_pre_flight(tmp_path: Path) -> None:
    """A BOM counted as text: the pre-flight passed such a corpus, found empty only once packed."""
    from xfer.electra.checks import _empty_corpus
    from xfer.electra.stage_config import PretrainConfig

    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf\n\n  \n")
    config = PretrainConfig(corpus=CorpusConfig(files=Files([str(tmp_path / "*.txt")])))
    [problem] = _empty_corpus(config)
    assert f"{tmp_path / 'bom.txt'}" in str(problem) and "the corpus has no text" in str(problem)
    (tmp_path / "text.txt").write_bytes(b"\xef\xbb\xbfa line\n")
    assert _empty_corpus(config) == []

"""ELECTRA pre-training data: packing rules, the Arrow cache, determinism, sources and batches.

Everything runs on tiny generated corpora and a WordPiece vocabulary trained on them. Documents
use words made of one letter each ("aaa", "ab" never occurs), so the letter of every real token
in an example names its document: an example mixing two documents would show two letters.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import signal
import string
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch

from xfer.core.config import FieldError, Files
from xfer.core.errors import DataError, UserError
from xfer.electra import data as electra_data
from xfer.electra.corpus import CorpusConfig
from xfer.electra.data import PretrainBatches, build_examples, cache_manifest, collate_examples
from xfer.electra.packing import ExamplePacker, iter_text_lines, plan_text_blocks, prefix_ends
from xfer.transformer.tokenization import WordPieceTokenizer

CLS, SEP = 2, 3
LETTERS = string.ascii_lowercase[:10]
SMALL_BLOCKS = 1500  # bytes: the small corpora get many blocks (processes, shards)


# --- fixtures -------------------------------------------------------------------------------------


def write_corpus(path: Path, seed: int, docs: int, first_doc: int = 0) -> Path:
    """Documents of 1-9 lines of 1-20 words; every word of document d is letter d % 10, repeated."""
    rng = random.Random(seed)
    lines = []
    for d in range(first_doc, first_doc + docs):
        letter = LETTERS[d % len(LETTERS)]
        for _ in range(rng.randint(1, 9)):
            lines.append(" ".join(letter * rng.randint(1, 4) for _ in range(rng.randint(1, 20))))
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("electra-data")
    files = [write_corpus(root / f"part{i}.txt", seed=i, docs=30, first_doc=30 * i) for i in range(3)]
    tokenizer = WordPieceTokenizer.train(files, vocab_size=80)
    tokenizer.save(root / "vocab")
    tokens = sorted(tokenizer.vocab, key=tokenizer.vocab.get)
    (root / "vocab-other").mkdir()  # the same tokens with other ids
    (root / "vocab-other" / "vocab.txt").write_text("\n".join(tokens[:5] + tokens[:4:-1]) + "\n")
    return {
        "root": root,
        "files": files,
        "vocab": root / "vocab",
        "other_vocab": root / "vocab-other",
        "tok": tokenizer,
    }


def corpus_of(files: list[Path], **options) -> CorpusConfig:
    return CorpusConfig(files=Files(tuple(str(f) for f in files)), **options)


def build(kit: dict, cache: Path, corpus: CorpusConfig | None = None, files: list[Path] | None = None, **options):
    files = files if files is not None else kit["files"]
    settings = {"max_length": 24, "seed": 1, "block_bytes": SMALL_BLOCKS, **options}
    vocab = settings.pop("vocab", kit["vocab"])
    return build_examples(corpus or corpus_of(files), files, vocab, cache_dir=cache, **settings)


@pytest.fixture(scope="module")
def examples(kit: dict) -> datasets.Dataset:
    return build(kit, kit["root"] / "cache-main")


def rows(dataset) -> list[tuple[tuple[int, ...], int]]:
    return [(tuple(r["input_ids"]), r["segment_split"]) for r in dataset]


# --- the packer (ExampleBuilder semantics) --------------------------------------------------------


class Scripted(random.Random):
    """A random source that returns scripted draws, and fails if the packer draws more or less."""

    def __init__(self, draws: list[float], ints: list[int] | None = None):
        super().__init__(0)
        self.draws, self.ints = list(draws), list(ints or [])

    def random(self) -> float:
        return self.draws.pop(0)

    def randint(self, a: int, b: int) -> int:
        assert (a, b) == (5, 20)
        return self.ints.pop(0)


def sentence(n: int, start: int = 10) -> list[int]:
    return list(range(start, start + n))


def test_two_segments_follow_the_original_draws() -> None:
    # Not single (0.5), first-segment target (20 - 3) // 2 = 8: the 1st sentence starts it, the 2nd
    # would overflow it but wins the coin flip (0.3 < 0.5), the rest goes to segment b, which is cut
    # to 20 - 10 - 3 = 7 tokens; then no short target (0.9).
    rng = Scripted([0.5, 0.3, 0.9])
    packer = ExamplePacker(20, CLS, SEP, rng)
    outs = [packer.add_sentence(sentence(5, 10 * k)) for k in range(1, 5)]
    assert outs[:3] == [None, None, None]
    example = outs[3]
    assert example.input_ids == [CLS, *sentence(5, 10), *sentence(5, 20), SEP, *sentence(5, 30), 40, 41, SEP]
    assert example.segment_split == 12 and not example.single_segment and example.target_length == 20
    assert example.token_type_ids == [0] * 12 + [1] * 8
    assert rng.draws == []


def test_lost_coin_flip_starts_segment_b_and_a_fitting_sentence_still_joins_a() -> None:
    # Not single (0.5), first target 8: 3 tokens start a; 9 would overflow a and lose the flip (0.7)
    # so b starts; 4 more fit a (3 + 4 < 8) and join it without a draw; the last 4 go to b.
    rng = Scripted([0.5, 0.7, 0.9])
    packer = ExamplePacker(20, CLS, SEP, rng)
    for ids in (sentence(3), sentence(9), sentence(4, 50)):
        assert packer.add_sentence(ids) is None
    example = packer.add_sentence(sentence(4, 70))
    b = (sentence(9) + sentence(4, 70))[: 20 - 7 - 3]
    assert example.input_ids == [CLS, *sentence(3), *sentence(4, 50), SEP, *b, SEP]
    assert example.segment_split == 9 and len(example.input_ids) == 20
    assert rng.draws == []


def test_fitting_means_strictly_below_the_first_segment_target() -> None:
    # 4 + 4 = 8 does not fit a target of 8, so the coin is flipped (and lost: 0.6).
    rng = Scripted([0.5, 0.6, 0.9])
    packer = ExamplePacker(20, CLS, SEP, rng)
    packer.add_sentence(sentence(4))
    packer.add_sentence(sentence(4, 40))
    example = packer.add_sentence(sentence(12, 60))
    assert example.input_ids == [CLS, *sentence(4), SEP, *(sentence(4, 40) + sentence(12, 60))[:13], SEP]
    assert rng.draws == []


def test_single_segment_takes_everything_and_is_cut_to_max_length() -> None:
    rng = Scripted([0.05, 0.9])  # single (< 0.1), no short target; no coin flips are drawn
    packer = ExamplePacker(20, CLS, SEP, rng)
    packer.add_sentence(sentence(12))
    example = packer.add_sentence(sentence(12, 100))
    assert example.input_ids == [CLS, *(sentence(12) + sentence(12, 100))[:18], SEP]
    assert example.segment_split == 20 and example.single_segment
    assert rng.draws == []


def test_short_target_applies_to_the_next_example() -> None:
    rng = Scripted([0.5, 0.01, 0.5, 0.9], ints=[7])
    packer = ExamplePacker(20, CLS, SEP, rng)
    first = packer.add_sentence(sentence(25))  # one long sentence: flushed at once, cut to 18 tokens
    assert first.input_ids == [CLS, *sentence(18), SEP] and first.target_length == 20
    assert packer.add_sentence(sentence(3)) is None
    second = packer.add_sentence(sentence(4, 60))  # 7 tokens reach the short target 7
    assert second is not None and second.target_length == 7
    assert second.input_ids == [CLS, *sentence(3), SEP, *sentence(4, 60), SEP]  # target (7-3)//2 = 2
    assert rng.draws == [] and rng.ints == []


def test_document_end_flushes_and_empty_sentences_change_nothing() -> None:
    rng = Scripted([0.5, 0.9])
    packer = ExamplePacker(20, CLS, SEP, rng)
    assert packer.end_document() is None  # nothing accumulated: no draw
    assert packer.add_sentence([]) is None
    packer.add_sentence(sentence(3))
    example = packer.end_document()
    assert example.input_ids == [CLS, *sentence(3), SEP] and rng.draws == []


def test_packer_counts_what_its_cuts_drop_without_changing_its_draws() -> None:
    """ELECTRA's cuts are kept; PackStats says how many tokens they drop, and how many of those came
    from lines longer than one example (max_length - 2 = 18 tokens here)."""
    rng = Scripted([0.5, 0.9, 0.5, 0.7, 0.9, 0.5, 0.7, 0.9])
    packer = ExamplePacker(20, CLS, SEP, rng)
    long = packer.add_sentence(sentence(30))  # one line longer than an example: 12 of its tokens go
    assert long.input_ids == [CLS, *sentence(18), SEP]
    packer.add_sentence(sentence(7))
    usual = packer.add_sentence(sentence(13, 50))  # the usual cut: segment b keeps 10 of the 13
    assert usual.input_ids == [CLS, *sentence(7), SEP, *sentence(10, 50), SEP]
    packer.add_sentence(sentence(5))
    late = packer.add_sentence(sentence(25, 50))  # a long line in segment b keeps 12 of its 25
    assert late.input_ids == [CLS, *sentence(5), SEP, *sentence(12, 50), SEP]
    assert rng.draws == []
    assert packer.stats.as_dict() == {
        "lines": 5,
        "tokens": 80,
        "tokens_dropped": 12 + 3 + 13,
        "long_lines": 2,
        "long_line_tokens_dropped": 12 + 13,
    }


def test_packing_rules_and_frequencies_over_many_examples() -> None:
    rng = random.Random(0)
    packer = ExamplePacker(128, CLS, SEP, random.Random(1))
    made = []
    for doc in range(6000):
        ids_of_doc = 1000 + doc  # every token of document `doc` has this id
        for _ in range(rng.randint(1, 12)):
            example = packer.add_sentence([ids_of_doc] * rng.randint(1, 60))
            made += [example] if example else []
        example = packer.end_document()
        made += [example] if example else []
    assert len(made) > 8000
    for ex in made:
        ids, split = ex.input_ids, ex.segment_split
        assert len(ids) <= 128 and ids[0] == CLS and ids[split - 1] == SEP and ids[-1] == SEP
        body = [t for t in ids if t not in (CLS, SEP)]
        assert len(set(body)) == 1, "an example mixes two documents"
        assert ids.count(SEP) == (2 if split < len(ids) else 1)
        if not ex.single_segment and split < len(ids):
            assert split - 2 >= 1 and len(ids) - split - 1 >= 1
    single = np.mean([ex.single_segment for ex in made])
    short = np.mean([ex.target_length < 128 for ex in made])
    assert abs(single - 0.1) < 0.015, single
    assert abs(short - 0.05 * 123 / 124) < 0.01, short


# --- blocks of text files -------------------------------------------------------------------------


def test_blocks_start_after_blank_lines_and_cover_each_file(tmp_path: Path) -> None:
    path = write_corpus(tmp_path / "c.txt", seed=3, docs=80)
    data = path.read_bytes()
    blocks = plan_text_blocks([path], [len(data)], block_bytes=300)
    assert len(blocks) > 5
    assert blocks[0].start == 0 and blocks[-1].end == len(data)
    for a, b in itertools.pairwise(blocks):
        assert a.end == b.start
        assert data[: b.start].endswith(b"\n\n"), "a block must start right after a blank line"


def test_a_document_longer_than_the_scan_limit_is_cut_at_a_line_start(tmp_path: Path) -> None:
    path = tmp_path / "one-doc.txt"
    path.write_text("".join(f"line {i} of one long document\n" for i in range(2000)))
    blocks = plan_text_blocks([path], [path.stat().st_size], block_bytes=100)  # scan limit 6,400 bytes
    data = path.read_bytes()
    assert len(blocks) > 3 and all(data[b.start - 1 : b.start] == b"\n" for b in blocks[1:])


def test_max_lines_is_a_prefix_across_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("1\n2\n\n3\n")
    b.write_text("4\n5")  # no final newline: still a line
    assert prefix_ends([a, b], 2) == [4, 0]
    assert prefix_ends([a, b], 5) == [7, 2]
    assert prefix_ends([a, b], 6) == [7, 3]
    assert prefix_ends([a, b], None) == [7, 3]


def test_non_utf8_bytes_name_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine line\nsecond\nthird \xff here\n")
    with pytest.raises(DataError) as info:
        for _ in iter_text_lines(path, 0, path.stat().st_size):
            pass
    assert str(info.value).startswith(f"{path}:3: encoding: not valid UTF-8 (byte 0xff at column 7)")
    assert "compressed" not in str(info.value)
    path.write_bytes(bytes.fromhex("28b52ffd") + b"\xff\xfe zstd frame")  # named, not just "byte 0xb5"
    with pytest.raises(DataError, match=r"bad\.txt:1: encoding: not valid UTF-8 .*: the file is zstd-compressed"):
        list(iter_text_lines(path, 0, path.stat().st_size))


def test_cr_only_line_endings_are_an_error_and_crlf_is_not(tmp_path: Path) -> None:
    """With CR-only (classic Mac) endings the whole file was one line, which the packer cut to one
    example of max_length tokens: all the rest of the corpus was silently dropped."""
    path = tmp_path / "mac.txt"
    path.write_bytes(b"fine line\nthe cat\rsat on\rthe mat\r")
    with pytest.raises(DataError, match=r"mac\.txt:2: carriage return \(CR\) inside the line at column 8"):
        list(iter_text_lines(path, 0, path.stat().st_size))
    path.write_bytes(b"the cat\r\nsat\r\n\r\nlast line\r")
    assert [line for chunk in iter_text_lines(path, 0, path.stat().st_size) for line in chunk] == [
        "the cat\r",
        "sat\r",
        "\r",
        "last line\r",
    ]


# --- build_examples: layout, cache, determinism ---------------------------------------------------


def test_examples_layout_and_documents(kit: dict, examples: datasets.Dataset) -> None:
    tok = kit["tok"]
    specials = {tok.cls_id, tok.sep_id, tok.pad_id, tok.mask_id}
    assert examples.features["input_ids"].feature.dtype == "int32"
    assert len(examples) > 100
    two_segments = 0
    for ids, split in rows(examples):
        assert 3 <= len(ids) <= 24 and ids[0] == tok.cls_id and ids[-1] == tok.sep_id and ids[split - 1] == tok.sep_id
        assert tok.pad_id not in ids and tok.unk_id not in ids
        assert [t for t in ids if t == tok.sep_id] == [tok.sep_id] * (2 if split < len(ids) else 1)
        letters = set(tok.decode([t for t in ids if t not in specials]).replace(" ", ""))
        assert len(letters) == 1, f"example mixes documents: {letters}"
        two_segments += split < len(ids)
    assert two_segments > len(examples) / 3
    manifest = cache_manifest(examples)
    assert manifest["statistics"]["examples"] == len(examples)


def test_second_build_reuses_the_cache_without_tokenizing(kit: dict, examples, monkeypatch) -> None:
    def no_tokenizing(self, block, *stats):
        raise AssertionError("the cache should have been reused")

    monkeypatch.setattr(electra_data._PackSpec, "pack_block", no_tokenizing)
    again = build(kit, kit["root"] / "cache-main")
    assert rows(again) == rows(examples)
    for f in kit["files"]:  # a new mtime with the same content is not a change
        os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    assert len(build(kit, kit["root"] / "cache-main")) == len(examples)


@pytest.mark.parametrize("change", ["file", "vocab", "max_length", "seed", "max_lines"])
def test_any_input_change_builds_a_new_cache(kit: dict, examples, tmp_path: Path, change: str) -> None:
    files, options, corpus = list(kit["files"]), {}, None
    if change == "file":
        files[1] = tmp_path / "part1.txt"
        files[1].write_text(kit["files"][1].read_text() + "aaa aaa\n")
    elif change == "vocab":
        options["vocab"] = kit["other_vocab"]
    elif change == "max_length":
        options["max_length"] = 23
    elif change == "seed":
        options["seed"] = 2
    else:
        corpus = corpus_of(files, max_lines=200)
    rebuilt = build(kit, kit["root"] / "cache-main", corpus=corpus, files=files, **options)
    assert rebuilt.cache_files[0]["filename"] != examples.cache_files[0]["filename"]
    assert rows(rebuilt) != rows(examples)


def test_failed_build_leaves_no_cache_and_damage_is_rebuilt(kit: dict, tmp_path: Path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    real = electra_data._PackSpec.pack_block

    def fail_on_block_3(self, block, *stats):
        if block == 3:
            raise RuntimeError("interrupted")
        return real(self, block, *stats)

    with monkeypatch.context() as patch:
        patch.setattr(electra_data._PackSpec, "pack_block", fail_on_block_3)
        with pytest.raises(RuntimeError, match="interrupted"):
            build(kit, cache)
    assert [p.name for p in cache.iterdir() if "electra-examples" in p.name and not p.name.endswith(".lock")] == []
    built = build(kit, cache)
    expected, arrow = rows(built), Path(built.cache_files[0]["filename"])
    del built
    with open(arrow, "r+b") as handle:  # a truncated cache file is noticed and rebuilt
        handle.truncate(arrow.stat().st_size // 2)
    assert rows(build(kit, cache)) == expected


def build_in_subprocess(kit: dict, cache: Path, kill_at_block: int | None = None) -> subprocess.Popen:
    """`build_examples` in a fresh interpreter that dies (SIGKILL) when it reaches block `kill_at_block`."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from xfer.core.config import Files
        from xfer.electra import data
        from xfer.electra.corpus import CorpusConfig
        real = data._PackSpec.pack_block
        def pack(self, block, *stats):
            if block == {kill_at_block!r}:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(self, block, *stats)
        data._PackSpec.pack_block = pack
        files = [Path(p) for p in {[str(f) for f in kit["files"]]!r}]
        corpus = CorpusConfig(files=Files(tuple(map(str, files))))
        examples = data.build_examples(corpus, files, Path({str(kit["vocab"])!r}), 24, Path({str(cache)!r}), 1,
                                       block_bytes={SMALL_BLOCKS})
        print(len(examples))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_killed_build_leaves_nothing_usable(kit: dict, tmp_path: Path) -> None:
    """SIGKILL in the middle of a build: only a hidden temporary folder remains, and it is never used."""
    cache = tmp_path / "cache"
    process = build_in_subprocess(kit, cache, kill_at_block=4)
    _, err = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, err.decode()[-2000:]
    leftovers = [p.name for p in cache.iterdir() if not p.name.endswith(".lock")]
    assert not [n for n in leftovers if n.startswith("electra-examples-")], leftovers
    assert any(".tmp-" in n for n in leftovers), leftovers
    assert len(build(kit, cache)) > 0
    assert not [p for p in cache.iterdir() if ".tmp-" in p.name], "stale temporary build not cleaned up"


def test_concurrent_builds_build_once(kit: dict, examples, tmp_path: Path, monkeypatch) -> None:
    """Two builders of the same examples at once (ranks, runs): one builds, the other waits and loads.

    Threads stand in for processes: the build lock is an flock on a file opened by each caller,
    which excludes another open file of the same process exactly as it excludes another process.
    """
    real, packed = electra_data._PackSpec.pack_block, []

    def slow_pack(self, block, *stats):
        packed.append(block)
        time.sleep(0.02)  # long enough for the second builder to arrive mid-build
        return real(self, block, *stats)

    monkeypatch.setattr(electra_data._PackSpec, "pack_block", slow_pack)
    results: list = [None, None]

    def run(index: int) -> None:
        results[index] = rows(build(kit, tmp_path / "cache"))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results[0] == results[1] == rows(examples)
    assert sorted(packed) == sorted(set(packed)), "two builders packed the same blocks"


def test_same_seed_same_examples_and_num_proc_does_not_matter(kit: dict, examples, tmp_path: Path) -> None:
    two = build(kit, tmp_path / "two", corpus=corpus_of(kit["files"], num_proc=2))
    assert len(two.cache_files) == 2  # really built by two processes
    assert rows(two) == rows(examples)
    assert rows(build(kit, tmp_path / "again")) == rows(examples)
    assert rows(build(kit, tmp_path / "seed", seed=7)) != rows(examples)


def test_max_lines_equals_a_truncated_corpus(kit: dict, tmp_path: Path) -> None:
    first = kit["files"][0]
    lines = first.read_text().splitlines(keepends=True)
    prefix = tmp_path / "prefix.txt"
    prefix.write_text("".join(lines[:57]))
    limited = build(kit, tmp_path / "a", corpus=corpus_of([first], max_lines=57), files=[first])
    assert rows(limited) == rows(build(kit, tmp_path / "b", files=[prefix]))


def test_lines_without_tokens_are_skipped_not_fatal(kit: dict, tmp_path: Path) -> None:
    text = kit["files"][0].read_text()
    noisy = tmp_path / "noisy.txt"
    noisy.write_text(text.replace("\n", "\n\x01\u200b\n", 5))  # non-blank lines that tokenize to nothing
    clean = build(kit, tmp_path / "a", files=[kit["files"][0]], block_bytes=1 << 20)
    assert rows(build(kit, tmp_path / "b", files=[noisy], block_bytes=1 << 20)) == rows(clean)


def test_bad_inputs_are_data_errors(kit: dict, tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"aaa aa\n\nbbb\nb \xc3\x28 b\n")
    with pytest.raises(DataError, match=r"bad.txt:4: encoding: not valid UTF-8"):
        build(kit, tmp_path / "c1", files=[bad])
    with pytest.raises(DataError, match=r"bad.txt:4: encoding"):  # also from a worker process
        build(kit, tmp_path / "c2", corpus=corpus_of([kit["files"][0], bad], num_proc=2), files=[kit["files"][0], bad])
    with pytest.raises(DataError, match="file not found"):
        build(kit, tmp_path / "c3", files=[tmp_path / "missing.txt"])
    nul = tmp_path / "nul.txt"  # a NUL-filled damaged file was read as nothing, "the\x00cat" as "thecat"
    nul.write_bytes(b"aaa aa\nb\x00b\n")
    with pytest.raises(DataError, match=r"nul.txt:2: encoding: NUL byte at column 2"):
        build(kit, tmp_path / "c6", files=[nul])
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n  \n")
    with pytest.raises(DataError, match="no tokens"):
        build(kit, tmp_path / "c4", files=[blank])
    with pytest.raises(DataError, match=r"no tokenizer\.json or vocab\.txt"):
        build(kit, tmp_path / "c5", vocab=tmp_path)


def test_streaming_yields_the_map_style_examples(kit: dict, examples) -> None:
    stream = build(kit, kit["root"] / "cache-main", corpus=corpus_of(kit["files"], streaming=True))
    assert isinstance(stream, datasets.IterableDataset) and stream.num_shards > 5
    assert rows(stream) == rows(examples)


# --- the key holds for the bytes read; damage is noticed; truncation is counted -----------------


def copies(kit: dict, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for original in kit["files"]:
        (folder / original.name).write_bytes(original.read_bytes())
    return [folder / f.name for f in kit["files"]]


def cache_folders(cache: Path) -> list[str]:
    return [p.name for p in cache.iterdir() if p.name.startswith("electra-examples-")] if cache.exists() else []


def same_size_edit(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"b", b"c"))


@pytest.mark.parametrize("edited", ["before its blocks are read", "after its blocks were read"])
def test_a_file_edited_during_the_build_fails_it_and_caches_nothing(
    kit: dict, examples, tmp_path: Path, monkeypatch, edited: str
) -> None:
    """The key hashes the files before packing reads them. A file edited mid-build used to file
    examples of its new text under its old text's hash, reused silently by any later build of the
    old text (and the stage's fingerprint named the old text)."""
    files = copies(kit, tmp_path / "corpus")
    victim = files[1] if edited.startswith("before") else files[0]
    original = victim.read_bytes()
    real, done = electra_data._PackSpec.pack_block, []

    def edit_then_pack(self, block, *stats):
        first_of_file_1 = self.source.blocks[block].file == 1
        trigger = first_of_file_1 if edited.startswith("before") else block == self.source.num_blocks - 1
        if trigger and not done:
            same_size_edit(victim)
            done.append(block)
        return real(self, block, *stats)

    cache = tmp_path / "cache"
    with monkeypatch.context() as patch:
        patch.setattr(electra_data._PackSpec, "pack_block", edit_then_pack)
        with pytest.raises(DataError, match=rf"{victim.name}: changed while it was being read.*Re-run"):
            build(kit, cache, files=files)
    assert done and cache_folders(cache) == []
    assert not [p for p in cache.iterdir() if ".tmp-" in p.name], "the discarded build was left behind"
    victim.write_bytes(original)  # the text the first attempt's key named
    assert rows(build(kit, cache, files=files)) == rows(examples)


def test_a_file_edited_while_it_is_streamed_stops_the_stream(kit: dict, tmp_path: Path) -> None:
    """Streaming has no cache, but it re-reads the files every pass (and on resume): an edited file
    would mix texts within one training run, under a fingerprint of the old text."""
    files = copies(kit, tmp_path / "corpus")
    stream = build(kit, tmp_path / "cache", corpus=corpus_of(files, streaming=True), files=files)
    iterator = iter(stream)
    next(iterator)
    same_size_edit(files[0])
    with pytest.raises(DataError, match=r"part0.txt: changed while it was being read"):
        for _ in iterator:
            pass


def sha256_of(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("damage", ["flipped bytes", "out-of-range token ids"])
def test_a_cache_damaged_in_place_is_noticed_by_its_hash_warned_about_and_rebuilt(
    kit: dict, tmp_path: Path, capsys, damage: str
) -> None:
    """Same size, other contents: the manifest used to record only sizes, so this resumed silently
    on other examples, or crashed in the embedding lookup (IndexError) on out-of-range ids."""
    cache = tmp_path / "shared-cache"
    built = build(kit, cache)
    arrow, expected = Path(built.cache_files[0]["filename"]), rows(built)
    del built
    manifest = json.loads((arrow.parent / "manifest.json").read_text())
    assert manifest["files"] == [{"name": arrow.name, "bytes": arrow.stat().st_size, "sha256": sha256_of(arrow)}]
    data = bytearray(arrow.read_bytes())
    middle = len(data) // 2 & ~3
    if damage == "flipped bytes":
        data[middle : middle + 100] = bytes(b ^ 0x5A for b in data[middle : middle + 100])
    else:
        data[middle : middle + 64] = np.full(16, 10**6, dtype=np.int32).tobytes()
    arrow.write_bytes(bytes(data))
    assert rows(datasets.Dataset.from_file(str(arrow))) != expected, "the damage must change the examples"
    capsys.readouterr()
    again = build(kit, cache)  # a cache hit, as from another run sharing the data_cache
    assert rows(again) == expected
    err = capsys.readouterr().err
    assert "warning: the pre-training example cache is damaged" in err and str(arrow) in err
    assert "sha256 differs" in err and "rebuilt" in err
    capsys.readouterr()
    assert rows(build(kit, cache)) == expected  # and the rebuilt cache is trusted again, quietly
    assert "damaged" not in capsys.readouterr().err


def content_tokens(dataset) -> int:
    """Tokens of the examples without [CLS] and the one or two [SEP]."""
    return sum(len(ids) - (3 if split < len(ids) else 2) for ids, split in rows(dataset))


def one_line_per_document(text: str) -> str:
    documents = [d for d in text.split("\n\n") if d.strip()]
    return "\n\n".join(" ".join(d.split("\n")) for d in documents) + "\n"


def test_lines_longer_than_an_example_are_counted_and_warned_about(kit: dict, examples, tmp_path: Path, capsys) -> None:
    """The packing truncates as the original ELECTRA does, but no longer silently: the manifest
    counts lines and tokens, and lines longer than an example raise a warning on every build or reuse."""
    packing = cache_manifest(examples)["packing"]
    assert packing["long_lines"] == packing["long_line_tokens_dropped"] == 0  # one sentence per line
    assert packing["tokens"] - packing["tokens_dropped"] == content_tokens(examples)
    assert 0 < packing["tokens_dropped"] < packing["tokens"] / 4  # the usual cut where an example fills up
    assert packing["lines"] == sum(1 for f in kit["files"] for line in f.read_text().splitlines() if line.strip())

    joined = tmp_path / "joined.txt"
    joined.write_text(one_line_per_document(kit["files"][0].read_text()))
    lengths = [
        len(kit["tok"].backend.encode(line, add_special_tokens=False).ids) for line in joined.read_text().split("\n")
    ]
    capsys.readouterr()
    built = build(kit, tmp_path / "cache", files=[joined])
    first_err = capsys.readouterr().err
    packing = cache_manifest(built)["packing"]
    assert packing["long_lines"] == sum(n > 22 for n in lengths) > 10
    assert packing["tokens"] == sum(lengths)
    assert packing["tokens"] - packing["tokens_dropped"] == content_tokens(built)
    assert 0 < packing["long_line_tokens_dropped"] <= packing["tokens_dropped"]
    share = 100 * packing["long_line_tokens_dropped"] / packing["tokens"]
    build(kit, tmp_path / "cache", files=[joined])  # reused from the cache: the warning comes again
    for err in (first_err, capsys.readouterr().err):
        assert f"warning: {packing['long_lines']} of the corpus's {packing['lines']} lines" in err
        assert f"{share:.1f}% of the corpus's {packing['tokens']} tokens" in err
        assert "one sentence per line" in err

    single = tmp_path / "single.txt"  # one 100k-character line: one example of 22 tokens
    single.write_text(" ".join(itertools.islice(itertools.cycle(["aaa", "bb", "cccc", "d"]), 40_000))[:100_000] + "\n")
    capsys.readouterr()
    one = build(kit, tmp_path / "cache", files=[single])
    assert len(one) == 1 and content_tokens(one) == 22
    packing = cache_manifest(one)["packing"]
    assert packing["long_lines"] == 1 and packing["tokens_dropped"] == packing["tokens"] - 22 > 20_000
    assert "99.9% of the corpus's" in capsys.readouterr().err


def test_a_stream_warns_once_about_lines_longer_than_an_example(kit: dict, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(electra_data, "_STREAM_WARNED", set(), raising=False)
    joined = tmp_path / "joined.txt"
    joined.write_text(one_line_per_document(kit["files"][0].read_text()))
    stream = build(kit, tmp_path / "cache", corpus=corpus_of([joined], streaming=True), files=[joined])
    assert stream.num_shards > 1
    capsys.readouterr()
    assert len(rows(stream)) > 0
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "joined.txt: a block of the streamed corpus has" in err
    assert "one sentence per line" in err


# --- datasets sources -----------------------------------------------------------------------------


def corpus_lines(kit: dict) -> list[str]:
    return kit["files"][0].read_text().splitlines()


def test_save_to_disk_dataset_matches_the_text_file(kit: dict, tmp_path: Path) -> None:
    lines = corpus_lines(kit)
    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"sentence": lines, "id": list(range(len(lines)))}).save_to_disk(str(folder))
    corpus = CorpusConfig(dataset=str(folder), text_column="sentence")
    from_rows = build(kit, tmp_path / "c", corpus=corpus, files=[], block_bytes=1 << 20)
    from_file = build(kit, tmp_path / "d", files=[kit["files"][0]], block_bytes=1 << 20)
    assert rows(from_rows) == rows(from_file)  # one block each: rows are lines, empty rows end documents
    streamed = build(
        kit, tmp_path / "c", corpus=CorpusConfig(dataset=str(folder), text_column="sentence", streaming=True), files=[]
    )
    assert rows(streamed) == rows(from_rows)


def test_json_and_csv_files_load_and_missing_columns_are_named(kit: dict, tmp_path: Path) -> None:
    lines = corpus_lines(kit)
    jsonl = tmp_path / "corpus.jsonl"
    jsonl.write_text("".join(json.dumps({"text": line}) + "\n" for line in lines))
    csv = tmp_path / "corpus.csv"
    datasets.Dataset.from_dict({"text": lines}).to_csv(str(csv), index=False)
    reference = rows(build(kit, tmp_path / "ref", files=[kit["files"][0]], block_bytes=1 << 20))
    for path in (jsonl, csv):
        loaded = build(
            kit, tmp_path / path.suffix, corpus=CorpusConfig(dataset=str(path)), files=[], block_bytes=1 << 20
        )
        assert rows(loaded) == reference, path.suffix  # CSV's empty cells (null) are document ends too
    streamed = build(
        kit, tmp_path / "s", corpus=CorpusConfig(dataset=str(jsonl), streaming=True), files=[], block_bytes=1 << 20
    )
    assert rows(streamed) == reference
    with pytest.raises(DataError, match=r"no column 'body' \(columns: text\)"):
        build(kit, tmp_path / "x", corpus=CorpusConfig(dataset=str(jsonl), text_column="body"), files=[])
    with pytest.raises(DataError, match="no column 'body'"):
        list(
            build(
                kit,
                tmp_path / "y",
                corpus=CorpusConfig(dataset=str(jsonl), text_column="body", streaming=True),
                files=[],
            )
        )
    with pytest.raises(DataError, match="nowhere: no such file or folder"):
        build(kit, tmp_path / "z", corpus=CorpusConfig(dataset=str(tmp_path / "nowhere")), files=[])
    broken = tmp_path / "broken.json"
    broken.write_text('{"text": "aaa"}\n{"text": ')
    with pytest.raises(DataError, match=r"broken\.json:2: not valid JSON at column 10"):
        build(kit, tmp_path / "z", corpus=CorpusConfig(dataset=str(broken)), files=[])


def test_corpus_config_needs_exactly_one_source() -> None:
    with pytest.raises(FieldError, match="not both"):
        CorpusConfig(files=Files(("a.txt",)), dataset="wikitext")
    with pytest.raises(FieldError, match="either files"):
        CorpusConfig().check_recipe()
    CorpusConfig(dataset="wikitext").check_recipe()


# --- PretrainBatches ------------------------------------------------------------------------------


def steps(source: PretrainBatches, count: int) -> list[list[dict[str, torch.Tensor]]]:
    return [source.next_step() for _ in range(count)]


def assert_same_steps(a, b) -> None:
    assert len(a) == len(b)
    for step_a, step_b in zip(a, b, strict=True):
        assert len(step_a) == len(step_b)
        for x, y in zip(step_a, step_b, strict=True):
            assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def real_rows(batch: dict[str, torch.Tensor]) -> list[tuple[int, ...]]:
    return [tuple(r[m.bool()].tolist()) for r, m in zip(batch["input_ids"], batch["attention_mask"], strict=True)]


def test_collate_pads_dynamically_with_types_and_mask() -> None:
    batch = collate_examples([[2, 7, 3, 8, 3], [2, 9, 3]], [3, 3], pad_id=0)
    assert batch["input_ids"].tolist() == [[2, 7, 3, 8, 3], [2, 9, 3, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]]
    assert all(t.dtype == torch.long for t in batch.values())


def test_map_style_batches_resume_exactly(examples) -> None:
    uninterrupted = steps(PretrainBatches(examples, 16, seed=3, pad_id=0), 30)  # crosses epochs
    first = PretrainBatches(examples, 16, seed=3, pad_id=0)
    head = steps(first, 11)
    state = json.loads(json.dumps(first.state_dict()))
    resumed = PretrainBatches(examples, 16, seed=3, pad_id=0)
    resumed.load_state_dict(state)
    assert_same_steps(head + steps(resumed, 19), uninterrupted)
    assert first.steps_per_epoch == -(-len(examples) // 16)
    batch = uninterrupted[0][0]
    lengths = batch["attention_mask"].sum(1)
    assert batch["input_ids"].shape[1] == int(lengths.max()) <= 24  # padded to the longest, not max_length
    with pytest.raises(ValueError, match="seed"):
        PretrainBatches(examples, 16, seed=4, pad_id=0).load_state_dict(state)


def test_map_style_ranks_split_the_global_batch_and_accumulation_splits_a_share(examples) -> None:
    whole = steps(PretrainBatches(examples, 16, seed=3, pad_id=0), 3)
    ranks = [
        steps(PretrainBatches(examples, 16, seed=3, pad_id=0, rank=r, world_size=2, accumulation=2), 3) for r in (0, 1)
    ]
    for step in range(3):
        mine = [real_rows(b) for r in (0, 1) for b in ranks[r][step]]
        assert all(len(m) == 4 for m in mine)  # 16 = 2 ranks x 2 micro-batches x 4
        rank0, rank1 = mine[0] + mine[1], mine[2] + mine[3]
        assert not set(rank0) & set(rank1)
        assert sorted(rank0 + rank1) == sorted(real_rows(whole[step][0]))
    with pytest.raises(UserError, match="multiple of the number of processes"):
        PretrainBatches(examples, 10, seed=3, pad_id=0, world_size=4)


def test_streaming_batches_resume_exactly_across_windows_and_passes(kit: dict, examples) -> None:
    stream = build(kit, kit["root"] / "cache-main", corpus=corpus_of(kit["files"], streaming=True))
    make = lambda: PretrainBatches(stream, 8, seed=5, pad_id=0, accumulation=2, shuffle_buffer=50)  # noqa: E731
    assert make().steps_per_epoch is None
    uninterrupted = steps(make(), 45)  # 360 examples: more than one pass, many windows
    for cut in (0, 7, 25):
        first = make()
        head = steps(first, cut)
        resumed = make()
        resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
        assert_same_steps(head + steps(resumed, 45 - cut), uninterrupted)
    corpus_order = [tuple(ids) for ids, _ in rows(examples)]
    seen = [r for step in uninterrupted for b in step for r in real_rows(b)]
    whole_windows = seen[: len(examples) // 50 * 50]  # windows inside the first pass
    assert len(set(whole_windows)) == len(whole_windows) and set(whole_windows) <= set(corpus_order)
    unshuffled = PretrainBatches(stream, 8, seed=5, pad_id=0, shuffle_buffer=1)
    first_pass = [r for step in steps(unshuffled, len(examples) // 8 + 1) for b in step for r in real_rows(b)]
    first_pass = first_pass[: len(examples)]
    assert sorted(first_pass) == sorted(corpus_order) and first_pass != corpus_order  # shard order is shuffled
    assert whole_windows != first_pass[: len(whole_windows)]  # and the window shuffles within


@pytest.mark.parametrize("sharding", ["examples", "shards"])
def test_streaming_ranks_read_disjoint_examples(kit: dict, examples, sharding: str) -> None:
    stream = build(kit, kit["root"] / "cache-main", corpus=corpus_of(kit["files"], streaming=True))
    per_rank = 80  # two whole windows of 40 per rank: within the first pass (188 examples)
    assert len(examples) >= 2 * per_rank + 20
    ranks = []
    for r in (0, 1):
        source = PretrainBatches(
            stream, 2, seed=5, pad_id=0, rank=r, world_size=2, shuffle_buffer=40, stream_sharding=sharding
        )
        ranks.append([row for step in steps(source, per_rank) for row in real_rows(step[0])])
    everything = [tuple(ids) for ids, _ in rows(examples)]
    assert len(set(everything)) > len(everything) - 5  # (almost) no duplicate examples in the corpus
    assert not set(ranks[0]) & set(ranks[1]) - {e for e in everything if everything.count(e) > 1}
    assert len(set(ranks[0]) | set(ranks[1])) > 0.75 * len(set(everything))


def test_examples_sharding_resumes_every_rank_from_rank_zeros_cursor(kit: dict) -> None:
    """With stream_sharding='examples' every rank's cursor is rank 0's (the trainer saves it once): it fits every rank."""
    stream = build(kit, kit["root"] / "cache-main", corpus=corpus_of(kit["files"], streaming=True))
    make = lambda r, mode="examples": PretrainBatches(  # noqa: E731
        stream, 4, seed=5, pad_id=0, rank=r, world_size=2, shuffle_buffer=30, stream_sharding=mode
    )
    rank0, rank1 = make(0), make(1)
    steps(rank0, 9)
    rank1_head = steps(rank1, 9)
    state = rank0.state_dict()
    expected = steps(make(1), 20)
    resumed = make(1)
    resumed.load_state_dict(state)
    assert_same_steps(rank1_head + steps(resumed, 11), expected)
    sharded = make(0, "shards")
    steps(sharded, 3)
    with pytest.raises(ValueError, match="rank"):
        make(1, "shards").load_state_dict(sharded.state_dict())
    per_rank = [make(r, "shards") for r in (0, 1)]
    expected1 = steps(make(1, "shards"), 8)
    steps(per_rank[0], 5)
    head = steps(per_rank[1], 5)
    restored = make(1, "shards")
    restored.load_state_dict([s.state_dict() for s in per_rank])  # a trainer that saves every rank's cursor
    assert_same_steps(head + steps(restored, 3), expected1)


def test_a_hub_dataset_name_is_read_offline_from_the_users_datasets_cache(kit: dict, tmp_path: Path) -> None:
    """`dataset: user/name` goes through the user's datasets cache (HF_DATASETS_CACHE), so a corpus
    fetched once beforehand trains offline (HF_DATASETS_OFFLINE=1). With a cache private to the stage
    (as before) the offline run failed: the copy the user had was never looked at. The Hub copy is
    faked by placing a prepared `text` dataset where `datasets` keeps a Hub dataset's cache.
    Streaming a text file must not touch that cache at all (it left a lock file there per run, and
    failed where the folder cannot be written)."""
    script = textwrap.dedent(
        f"""
        import glob, json, os, shutil
        from pathlib import Path
        import datasets
        from xfer.core.config import Files
        from xfer.electra import data
        from xfer.electra.corpus import CorpusConfig
        cache, stage = os.environ["HF_DATASETS_CACHE"], Path({str(tmp_path / "stage")!r})
        vocab, text = Path({str(kit["vocab"])!r}), Path({str(kit["files"][0])!r})
        os.makedirs(cache)
        streamed = CorpusConfig(files=Files((str(text),)), streaming=True)
        n_streamed = sum(1 for _ in data.build_examples(streamed, [text], vocab, 24, stage / "s", 1))
        out = {{"streamed": n_streamed, "left": os.listdir(cache)}}
        datasets.load_dataset("text", data_files={{"train": str(text)}}, split="train")
        prepared = glob.glob(os.path.join(cache, "text", "*", "*", "*"))[0]
        version, digest = prepared.split(os.sep)[-2:]
        hub_copy = os.path.join(cache, "someuser___tinycorpus", "default", version, digest)
        shutil.copytree(prepared, hub_copy)
        shutil.rmtree(os.path.join(cache, "text"))
        for arrow in glob.glob(os.path.join(hub_copy, "*.arrow")):
            os.rename(arrow, arrow.replace("text-train", "tinycorpus-train"))
        info = json.load(open(os.path.join(hub_copy, "dataset_info.json")))
        info.update(dataset_name="tinycorpus", builder_name="tinycorpus")
        json.dump(info, open(os.path.join(hub_copy, "dataset_info.json"), "w"))
        hub = CorpusConfig(dataset="someuser/tinycorpus")
        examples = data.build_examples(hub, [], vocab, 24, stage / "hub", 1, block_bytes=1 << 20)
        out["hub"] = [[list(r["input_ids"]), r["segment_split"]] for r in examples]
        print(json.dumps(out))
        """
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "HF_DATASETS_CACHE": str(tmp_path / "hf-cache"),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    reference = rows(build(kit, tmp_path / "ref", files=[kit["files"][0]], block_bytes=1 << 20))
    assert out["hub"] == [[list(ids), split] for ids, split in reference]  # one block: the rows are the lines
    assert out["streamed"] > 0 and out["left"] == [], out["left"]


def test_a_local_load_dataset_folder_is_cached_with_the_stage_not_in_the_users_cache(kit: dict, tmp_path: Path) -> None:
    """A folder of data files given as `dataset:` is local: its Arrow cache belongs to the stage.
    It had been sent to the user's datasets cache with the Hub names, which the test session makes
    uncreatable (root conftest), so the build failed there with NotADirectoryError."""
    folder = tmp_path / "folder-dataset"
    folder.mkdir()
    shutil.copy(kit["files"][0], folder / "train.txt")
    stage = tmp_path / "stage"
    built = build(kit, stage, corpus=CorpusConfig(dataset=str(folder)), files=[], block_bytes=1 << 20)
    reference = build(kit, tmp_path / "ref", files=[kit["files"][0]], block_bytes=1 << 20)
    assert rows(built) == rows(reference)
    assert (stage / "hf-datasets").is_dir()


@pytest.mark.parametrize(
    ("raised", "offline_advice"),
    [
        (ConnectionError("Couldn't reach 'someorg/corpus' on the Hub (OfflineModeIsEnabled)"), True),
        (FileNotFoundError("Dataset 'someorg/corpsu' doesn't exist on the Hub or cannot be accessed."), False),
    ],
)
def test_only_an_unreachable_hub_gets_the_offline_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: Exception, offline_advice: bool
) -> None:
    """A misspelt Hub name (datasets' DatasetNotFoundError is a FileNotFoundError) was told to fetch
    the dataset once with network, as if the network were the problem."""

    def fail(*args, **kwargs):
        raise raised

    monkeypatch.setattr(electra_data.datasets, "load_dataset", fail)
    with pytest.raises(DataError) as caught:
        electra_data._load_dataset(CorpusConfig(dataset="someorg/corpus"), tmp_path)
    assert type(raised).__name__ in str(caught.value)
    assert ("fetch it once" in str(caught.value)) is offline_advice


@pytest.mark.parametrize("name", ["corpus/missing.txt", "data/texts/part", "./missing", "missing.jsonl"])
def test_a_missing_path_given_as_dataset_is_said_to_be_missing(tmp_path: Path, name: str) -> None:
    """Names that cannot be Hub ids (a data file's suffix, more than one "/") were looked up on the
    Hub, and the error advised fetching them with network."""
    with pytest.raises(DataError, match="no such file or folder"):
        electra_data._load_dataset(CorpusConfig(dataset=name), tmp_path)


def test_a_vocabulary_replaced_in_place_is_read_again_in_the_same_process(kit: dict, tmp_path: Path) -> None:
    """Tokenizers were cached per process by folder: a vocabulary retrained at the same path (a
    notebook running a recipe twice) was served from the first load, so the second build packed
    with the old ids under a cache key naming the new tokenizer."""
    folder = tmp_path / "vocab"
    shutil.copytree(kit["vocab"], folder)
    first = rows(build(kit, tmp_path / "a", vocab=folder))
    shutil.rmtree(folder)
    shutil.copytree(kit["other_vocab"], folder)  # the same tokens with other ids
    again = rows(build(kit, tmp_path / "b", vocab=folder))
    assert again == rows(build(kit, tmp_path / "c", vocab=kit["other_vocab"])) != first


# --- review fixes: stale local datasets, streamed read errors, cursor round trip, files listed twice


def test_a_local_data_file_rewritten_with_its_old_mtime_is_read_again(kit: dict, tmp_path: Path) -> None:
    """`datasets` judges its Arrow copy of a local file by path and mtime: a file rewritten with its
    old mtime (`cp -p`, `rsync -t`) kept the old copy, and the pipeline packed the old text."""
    jsonl = tmp_path / "corpus.jsonl"
    documents = [kit["files"][0].read_text().splitlines(), kit["files"][1].read_text().splitlines()]
    jsonl.write_text("".join(json.dumps({"text": line}) + "\n" for line in documents[0]))
    mtime = jsonl.stat().st_mtime_ns
    cache = tmp_path / "cache"
    first = rows(build(kit, cache, corpus=CorpusConfig(dataset=str(jsonl)), files=[], block_bytes=1 << 20))
    jsonl.write_text("".join(json.dumps({"text": line}) + "\n" for line in documents[1]))
    os.utime(jsonl, ns=(mtime, mtime))
    again = rows(build(kit, cache, corpus=CorpusConfig(dataset=str(jsonl)), files=[], block_bytes=1 << 20))
    expected = rows(build(kit, tmp_path / "ref", files=[kit["files"][1]], block_bytes=1 << 20))
    assert again == expected != first


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [("bad.jsonl", '{"text": "aaa aa"}\n{"text": "bbb" oops}\n', 2), ("ragged.csv", "text,x\naaa,1\nbbb,2,3\n", 3)],
)
def test_a_malformed_streamed_data_file_is_a_data_error_naming_it(
    kit: dict, tmp_path: Path, name: str, text: str, line: int
) -> None:
    """A bad JSON line or CSV row in a streamed file came out of the trainer as pyarrow's ArrowInvalid /
    pandas' ParserError and a traceback; the file is now parsed before training, naming the line."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataError, match=rf"{name}:{line}: "):
        build(kit, tmp_path / "c", corpus=CorpusConfig(dataset=str(path), streaming=True), files=[])


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        (
            "bad.jsonl",
            '{"text": "aaa aa"}\n\n{"text": "bbb" oops}\n',
            r"bad\.jsonl:3: not valid JSON at column 16: Expecting ',' delimiter",
        ),
        ("list.jsonl", '{"text": "aaa aa"}\n["bbb"]\n', r"list\.jsonl:2: a JSON list, not an object"),
        ("ragged.csv", 'text,x\n"aaa\naa",1\nbbb,2,3\n', r"ragged\.csv:4: 3 fields where the header line has 2"),
        ("ragged.tsv", "text\tx\naaa\t1\nbbb\t2\tc\n", r"ragged\.tsv:3: 3 fields where the header line has 2"),
        (
            "latin1.jsonl",
            '{"text": "aaa"}\n{"text": "caf\xe9"}\n',
            r"latin1\.jsonl:2: encoding: not valid UTF-8 \(byte 0xe9 at column 14\)",
        ),
    ],
)
def test_a_malformed_local_data_file_names_its_line(
    kit: dict, tmp_path: Path, name: str, text: str, where: str
) -> None:
    """`datasets` fails a malformed local file with "An error occurred while generating the
    dataset" and nothing else: the DataError said line 0 and left the user to bisect the file. A
    JSON line with Latin-1 bytes loaded (pyarrow keeps them) and crashed packing with a bare
    UnicodeDecodeError."""
    path = tmp_path / name
    path.write_bytes(text.encode("latin-1" if name.startswith("latin1") else "utf-8"))
    with pytest.raises(DataError, match=where):
        build(kit, tmp_path / "c", corpus=CorpusConfig(dataset=str(path)), files=[])


def test_a_streaming_cursor_saved_right_after_a_load_is_the_loaded_one(kit: dict) -> None:
    """load_state_dict left the window's start at the fresh cursor until the next batch, so a
    cursor saved in between named the stream's very start with the loaded window number."""
    stream = build(kit, kit["root"] / "cache-main", corpus=corpus_of(kit["files"], streaming=True))
    make = lambda: PretrainBatches(stream, 8, seed=5, pad_id=0, shuffle_buffer=10)  # noqa: E731
    uninterrupted = steps(make(), 20)
    first = make()
    steps(first, 7)
    state = first.state_dict()
    reloaded = make()
    reloaded.load_state_dict(json.loads(json.dumps(state)))
    assert reloaded.state_dict() == state
    again = make()
    again.load_state_dict(reloaded.state_dict())
    assert_same_steps(steps(again, 13), uninterrupted[7:])


def test_a_file_listed_twice_in_corpus_files_is_refused(kit: dict, tmp_path: Path) -> None:
    """Overlapping patterns (`part0.txt` and `*.txt`) or a symlink beside its target gave the same
    file twice, and its text was packed and trained on twice without a word."""
    part = kit["files"][0]
    with pytest.raises(DataError, match=r"part0\.txt: listed twice in corpus\.files"):
        build(kit, tmp_path / "a", files=[part, kit["files"][1], part])
    link = tmp_path / "link.txt"
    link.symlink_to(part)
    with pytest.raises(DataError, match=r"link\.txt: listed twice in corpus\.files \(also as .*part0\.txt\)"):
        build(kit, tmp_path / "b", files=[part, link])
    assert not list((tmp_path / "a").glob("electra-examples-*"))

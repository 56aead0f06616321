"""ELECTRA pre-training data from local `dataset:` files, continued: a JSON-lines row without the text
key (was read as a document end), a streamed local file checked only while training (a bad line late
in it stopped the run hours in, its line not named), and `num_proc` beyond the CPUs available."""

from __future__ import annotations

import json
import os
from pathlib import Path

import datasets
import pytest

from xfer.core.config import Files
from xfer.core.errors import DataError
from xfer.electra import data as electra_data
from xfer.electra.corpus import CorpusConfig
from xfer.electra.data import build_examples
from xfer.transformer.tokenization import WordPieceTokenizer

from .test_data_hostile3 import WORDS, offline, rows  # noqa: F401 (offline: an autouse fixture)

LINES = [" ".join(WORDS[i : i + 3 + i % 4]) for i in range(9)]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile4-vocab")
    text = root / "train.txt"
    text.write_text("\n".join(" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))) + "\n")
    tokenizer = WordPieceTokenizer.train([text], vocab_size=80)
    tokenizer.save(root / "vocab")
    return root / "vocab"


def build(vocab: Path, cache: Path, *, files: Path | None = None, dataset: Path | None = None, **kw):
    corpus = (
        CorpusConfig(files=Files([str(files)]), **kw) if files is not None else CorpusConfig(dataset=str(dataset), **kw)
    )
    return build_examples(
        corpus, [files] if files else [], vocab, 12, cache, seed=3, short_seq_prob=0.0, single_segment_prob=0.0
    )


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


@pytest.mark.parametrize("streaming", [False, True])
def test_a_json_lines_row_without_the_text_key_is_an_error_naming_its_line(
    vocab: Path, tmp_path: Path, streaming: bool
) -> None:
    """A row without the key was loaded as a null and read as a document end: its text (under a
    misspelt key, say) silently lost. Like a CSV row missing its cell, it is an error with its line."""
    records = [{"text": line} for line in LINES]
    records.insert(5, {"txt": "the dog ran"})
    data = write_jsonl(tmp_path / "corpus.jsonl", records)
    with pytest.raises(DataError, match=r"corpus\.jsonl:6: text: no 'text' key \(keys: 'txt'\)") as caught:
        build(vocab, tmp_path / "cache", dataset=data, streaming=streaming)  # a stream: before training too
    assert caught.value.line == 6


@pytest.mark.parametrize("streaming", [False, True])
def test_an_empty_or_null_json_lines_text_is_still_a_document_end(vocab: Path, tmp_path: Path, streaming: bool) -> None:
    """The documented separator (an empty row; null as an empty CSV cell) still packs as the text file's blank line."""
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join([*LINES[:4], "", *LINES[4:]]) + "\n")
    expected = rows(build(vocab, tmp_path / "cache-text", files=text))
    for separator in ("", None):
        records = [{"text": line} for line in LINES[:4]] + [{"text": separator}] + [{"text": x} for x in LINES[4:]]
        data = write_jsonl(tmp_path / "corpus.jsonl", records)
        cache = tmp_path / f"cache-{separator!r}"
        assert rows(build(vocab, cache, dataset=data, streaming=streaming)) == expected


def test_a_max_lines_prefix_is_not_failed_by_a_row_after_it(vocab: Path, tmp_path: Path) -> None:
    records = [{"text": line} for line in LINES] + [{"body": "x"}]
    data = write_jsonl(tmp_path / "corpus.jsonl", records)
    assert rows(build(vocab, tmp_path / "cache", dataset=data, max_lines=len(LINES), streaming=True))


@pytest.mark.parametrize(
    ("name", "bad", "message"),
    [
        ("corpus.jsonl", '{"text": "the cat"', r"corpus\.jsonl:41: not valid JSON at column 19"),
        ("corpus.jsonl", '["the cat"]', r"corpus\.jsonl:41: a JSON list, not an object"),
        ("corpus.jsonl", '{"text": "the \xff cat"}'.encode("latin-1"), r"corpus\.jsonl:41: encoding"),
        ("corpus.csv", "the cat,sat", r"corpus\.csv:42: 2 fields where the header line has 1"),
        ("corpus.tsv", "the cat\tsat", r"corpus\.tsv:42: 2 fields where the header line has 1"),
    ],
)
def test_a_streamed_local_file_is_checked_before_training(
    vocab: Path, tmp_path: Path, name: str, bad: str | bytes, message: str
) -> None:
    """A stream is parsed only while training reads it: a bad line late in the file stopped the run
    hours in (as "reading failed at or after row 1 of shard 0", no line). It now fails when the stream
    is opened, with its line, as `files:` corpora (decoded whole before training) do."""
    path = tmp_path / name
    lines = [json.dumps({"text": LINES[i % len(LINES)]}) for i in range(40)]
    if path.suffix != ".jsonl":
        lines = ["text"] + [LINES[i % len(LINES)] for i in range(40)]
    body = "\n".join(lines).encode() + b"\n"
    path.write_bytes(body + (bad if isinstance(bad, bytes) else bad.encode()) + b"\n")
    with pytest.raises(DataError, match=message):
        build(vocab, tmp_path / "cache", dataset=path, streaming=True)  # not iterated: before any training step


def test_a_streamed_file_that_passed_is_not_read_again(
    vocab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resume does not parse the file again (recorded by its identity), but any write makes it checked anew."""
    data = write_jsonl(tmp_path / "corpus.jsonl", [{"text": line} for line in LINES])
    os.utime(data, (1_000_000_000, 1_000_000_000))  # not modified just now (a racy write is never recorded)
    build(vocab, tmp_path / "cache", dataset=data, streaming=True)
    calls: list[Path] = []
    real = electra_data._json_lines_problem
    monkeypatch.setattr(electra_data, "_json_lines_problem", lambda p, *a: calls.append(p) or real(p, *a))
    build(vocab, tmp_path / "cache", dataset=data, streaming=True)
    assert calls == []
    write_jsonl(data, [{"text": line} for line in LINES] + [{"body": "x"}])
    with pytest.raises(DataError, match=r"corpus\.jsonl:10: text: no 'text' key"):
        build(vocab, tmp_path / "cache", dataset=data, streaming=True)


def test_a_streamed_json_lines_file_broken_while_training_names_its_line(vocab: Path, tmp_path: Path) -> None:
    """A file that passed the check and was broken afterwards fails while it is read: with its line,
    not "reading failed at or after row 1 of shard 0 of 1" and pyarrow's 0-based row."""
    data = write_jsonl(tmp_path / "corpus.jsonl", [{"text": LINES[i % len(LINES)]} for i in range(30)])
    stream = build(vocab, tmp_path / "cache", dataset=data, streaming=True)
    with data.open("a") as handle:
        handle.write('{"text": "the cat", }\n')
    with pytest.raises(DataError, match=r"corpus\.jsonl:31: not valid JSON"):
        list(stream)


def test_num_proc_is_capped_at_the_cpus_available_with_the_same_examples(
    vocab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`num_proc: 64` on a 1-CPU allowance forked 64 packing processes (capped only at the block count);
    it packs with 1, says so once, and the examples are those of num_proc 1 (the key ignores num_proc)."""
    text = tmp_path / "corpus.txt"
    text.write_text("\n\n".join("\n".join(LINES[i:] + LINES[:i]) for i in range(len(LINES))) + "\n")
    used: list[int | None] = []
    real_map = datasets.Dataset.map

    def spy(self, *args, **kwargs):
        used.append(kwargs.get("num_proc"))
        return real_map(self, *args, **kwargs)

    monkeypatch.setattr(datasets.Dataset, "map", spy)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)

    def packed(num_proc: int, cache: str) -> list:
        corpus = CorpusConfig(files=Files([str(text)]), num_proc=num_proc)
        return rows(build_examples(corpus, [text], vocab, 12, tmp_path / cache, seed=3, block_bytes=64))

    capped = packed(64, "cache-64")
    assert used == [None]  # one process: no worker forked
    err = capsys.readouterr().err
    assert err.count("note: corpus.num_proc 64: packing with 1 process(es) (1 CPU(s) available") == 1
    assert capped == packed(1, "cache-1")


def test_packing_with_two_processes_gives_the_examples_of_one(
    vocab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docstring's promise the cap relies on: examples depend on the seed and the data, never on num_proc."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    text = tmp_path / "corpus.txt"
    text.write_text("\n\n".join("\n".join(LINES[i:] + LINES[:i]) for i in range(len(LINES))) + "\n")

    def packed(num_proc: int) -> list:
        corpus = CorpusConfig(files=Files([str(text)]), num_proc=num_proc)
        return rows(build_examples(corpus, [text], vocab, 12, tmp_path / f"c{num_proc}", seed=3, block_bytes=64))

    one = packed(1)
    assert len(one) > 10
    assert packed(2) == one


def test_a_streamed_csv_file_broken_while_training_names_its_line(vocab: Path, tmp_path: Path) -> None:
    data = tmp_path / "corpus.csv"
    data.write_text("text\n" + "\n".join(LINES * 3) + "\n")
    stream = build(vocab, tmp_path / "cache", dataset=data, streaming=True)
    with data.open("a") as handle:
        handle.write("the cat,sat\n")
    with pytest.raises(DataError, match=r"corpus\.csv:29: 2 fields where the header line has 1"):
        list(stream)


def test_a_streamed_parquet_column_of_numbers_fails_on_opening(vocab: Path, tmp_path: Path) -> None:
    """Its type is in the file's schema: the map-style build refused it on opening, a stream only at the
    first training step ("row 1: expected text, got int")."""
    data = tmp_path / "numbers.parquet"
    datasets.Dataset.from_dict({"text": [1, 2, 3]}).to_parquet(str(data))
    message = r"numbers\.parquet: text: column 'text' holds Value\('int64'\), not text"
    with pytest.raises(DataError, match=message):
        build(vocab, tmp_path / "cache", dataset=data)
    with pytest.raises(DataError, match=message):
        build(vocab, tmp_path / "cache", dataset=data, streaming=True)  # not iterated
    text = tmp_path / "text.parquet"
    datasets.Dataset.from_dict({"text": [*LINES[:4], "", *LINES[4:]]}).to_parquet(str(text))
    assert rows(build(vocab, tmp_path / "c2", dataset=text, streaming=True)) == rows(
        build(vocab, tmp_path / "c3", dataset=text)
    )


@pytest.mark.parametrize("streaming", [False, True])
def test_a_load_dataset_folder_row_without_the_text_key_names_its_file_and_line(
    vocab: Path, tmp_path: Path, streaming: bool
) -> None:
    """The same for a folder of JSON-lines files: the split's files are checked, not the other splits'."""
    folder = tmp_path / "data"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", [{"text": line} for line in LINES])
    write_jsonl(folder / "test.jsonl", [{"text": "the cat"}, {}])  # another split: not read
    assert rows(build(vocab, tmp_path / "c1", dataset=folder, streaming=streaming))
    write_jsonl(folder / "train.jsonl", [{"text": line} for line in LINES[:3]] + [{}])
    with pytest.raises(DataError, match=r"train\.jsonl:4: text: no 'text' key \(keys: none\)"):
        build(vocab, tmp_path / "c2", dataset=folder, streaming=streaming)

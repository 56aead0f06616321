"""ELECTRA corpus, packing and masking: hostile cases.

A local `dataset:` file edited while a stream reads it (was read on: the model trained on text the
run's fingerprint does not name) or while `datasets` copies it into the stage's cache (the copy of
the new text was filed under the old text's hash, and the stage completed on it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.electra import data as electra_data
from xfer.electra.corpus import CorpusConfig
from xfer.electra.data import build_examples
from xfer.transformer.tokenization import WordPieceTokenizer

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "big", "red", "hello", "said"]
LINES = [" ".join(WORDS[i : i + 3 + i % 4]) for i in range(9)]


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("packing-hostile-vocab")
    text = root / "train.txt"
    text.write_text("\n".join(" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))) + "\n")
    tokenizer = WordPieceTokenizer.train([text], vocab_size=80)
    tokenizer.save(root / "vocab")
    return root / "vocab"


def stream_of(vocab: Path, cache: Path, dataset: Path):
    corpus = CorpusConfig(dataset=str(dataset), streaming=True)
    return build_examples(corpus, [], vocab, 12, cache, seed=3, short_seq_prob=0.0, single_segment_prob=0.0)


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.csv", "corpus.txt", "folder/train.jsonl"])
def test_a_streamed_local_dataset_file_edited_while_it_is_read_stops_the_stream(
    vocab: Path, tmp_path: Path, name: str
) -> None:
    """`files:` streams check every file after each block and stop on an edit; a streamed `dataset:`
    file was read on, so a run trained on its new text under the fingerprint of the old one, and after
    a kill and the file put back, resumed as if nothing had happened (two corpora in one model)."""
    path = tmp_path / name
    path.parent.mkdir(exist_ok=True)
    if path.suffix == ".jsonl":
        body = "\n".join(json.dumps({"text": LINES[i % len(LINES)]}) for i in range(60)) + "\n"
    else:
        body = ("text\n" if path.suffix == ".csv" else "") + "\n".join(LINES[i % len(LINES)] for i in range(60)) + "\n"
    path.write_text(body)
    dataset = path.parent if name.startswith("folder/") else path
    stream = stream_of(vocab, tmp_path / "cache", dataset)
    iterator = iter(stream)
    next(iterator)
    path.write_text(body.replace("dog", "cat"))  # same size, still valid: only the text changed
    with pytest.raises(DataError, match=rf"{path.name}: changed while it was being read"):
        for _ in iterator:
            pass
    stream = stream_of(vocab, tmp_path / "cache", dataset)  # a new run (its fingerprint has the new text) reads on
    assert len(list(stream)) > 1


def test_a_local_dataset_file_edited_while_it_is_loaded_is_refused_and_its_copy_dropped(
    vocab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `datasets` copy of a local file is filed under the sha256 hashed before `load_dataset` reads
    the file. Edited in between (a conversion of a large file takes minutes), the examples were of the
    new text, the run's fingerprint and the copy's folder of the old one, and the stage completed: with
    the file put back, the next run skipped the stage as done, trained on text it no longer has."""
    path = tmp_path / "corpus.jsonl"
    body = "\n".join(json.dumps({"text": LINES[i % len(LINES)]}) for i in range(60)) + "\n"
    path.write_text(body)
    corpus = CorpusConfig(dataset=str(path))
    real = electra_data._local_dataset_cache
    copies: list[Path] = []

    def edited_meanwhile(*args, **kwargs) -> str:
        folder = real(*args, **kwargs)  # hashed: the old text names the copy
        copies.append(Path(folder))
        path.write_text(body.replace("dog", "cat"))  # then edited before datasets reads it
        return folder

    with monkeypatch.context() as patch:
        patch.setattr(electra_data, "_local_dataset_cache", edited_meanwhile)
        with pytest.raises(DataError, match=r"corpus\.jsonl: changed while it was being read"):
            build_examples(corpus, [], vocab, 12, tmp_path / "cache", seed=3)
    assert not list(copies[0].rglob("*.arrow")), "the copy of the new text filed under the old text's hash is kept"
    path.write_text(body)  # put back
    clean = build_examples(corpus, [], vocab, 12, tmp_path / "clean-cache", seed=3)
    again = build_examples(corpus, [], vocab, 12, tmp_path / "cache", seed=3)
    assert [r["input_ids"] for r in again] == [r["input_ids"] for r in clean]

"""ELECTRA pre-training data against hostile `dataset:` sources and cache folders, continued: CSV/TSV
corpora whose cells pandas' defaults turned into other text, a save_to_disk folder saved in Arrow
format or as a DatasetDict with an empty split, a JSON-lines row whose text is a number, and a cache
folder on a file system without POSIX locks."""

from __future__ import annotations

import errno
import json
import os
import types
from pathlib import Path

import pytest

from xfer.core.config import Files
from xfer.electra.corpus import CorpusConfig
from xfer.electra.data import build_examples
from xfer.transformer.tokenization import WordPieceTokenizer

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "big", "red", "hello", "said"]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile3-vocab")
    text = root / "train.txt"
    text.write_text("\n".join(" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))) + "\nna null none 007 1.50\n")
    tokenizer = WordPieceTokenizer.train([text], vocab_size=80)
    tokenizer.save(root / "vocab")
    return root / "vocab"


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def rows(examples) -> list[tuple[tuple[int, ...], int]]:
    return [(tuple(r["input_ids"]), r["segment_split"]) for r in examples]


def pack(vocab: Path, cache: Path, *, files: Path | None = None, dataset: Path | None = None, **kw) -> list:
    corpus = (
        CorpusConfig(files=Files([str(files)]), **kw) if files is not None else CorpusConfig(dataset=str(dataset), **kw)
    )
    examples = build_examples(
        corpus, [files] if files else [], vocab, 12, cache, seed=3, short_seq_prob=0.0, single_segment_prob=0.0
    )
    return rows(examples)


# Lines that pandas' read_csv defaults changed: blank lines (document ends), "NA"-like words, numbers,
# and a line starting with a quote that does not close on it.
LINES = [
    "the cat sat on a mat",
    "a dog ran",
    "",
    "NA",
    "the big red dog",
    "null",
    "",
    "007",
    "1.50",
    "",
    '"hello, the dog said.',
    "the cat ran",
    "",
    "None",
    "a red mat",
]


@pytest.mark.parametrize("streaming", [False, True])
def test_a_one_column_tsv_or_csv_corpus_packs_as_its_text_file(vocab: Path, tmp_path: Path, streaming: bool) -> None:
    """Each row of a .tsv/.csv is one line of text, an empty row a document end (corpus.py): pandas'
    defaults skipped the blank lines (documents ran together), read "NA"/"null"/"None" as nulls (their
    text lost, a document end instead), and a .tsv line opening a quote swallowed the lines after it."""
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(LINES) + "\n")
    expected = pack(vocab, tmp_path / "cache", files=text)
    tsv = tmp_path / "corpus.tsv"
    tsv.write_text("text\n" + "\n".join(LINES) + "\n")
    assert pack(vocab, tmp_path / "cache", dataset=tsv, streaming=streaming) == expected
    csv_lines = [line.replace('"', "").replace(",", "") for line in LINES]  # CSV quoting is the format's: none
    text.write_text("\n".join(csv_lines) + "\n")
    expected_csv = pack(vocab, tmp_path / "cache", files=text)
    csv_file = tmp_path / "corpus.csv"
    csv_file.write_text("text\n" + "\n".join(csv_lines) + "\n")
    assert pack(vocab, tmp_path / "cache", dataset=csv_file, streaming=streaming) == expected_csv


def test_a_tsv_corpus_of_numbers_only_is_text(vocab: Path, tmp_path: Path) -> None:
    """A column whose every line reads as a number was loaded as integers and refused as "not text"
    (or, beside text, its "007" packed as "7")."""
    tsv = tmp_path / "numbers.tsv"
    tsv.write_text("text\n007\n1990\n\n1.50\n")
    text = tmp_path / "numbers.txt"
    text.write_text("007\n1990\n\n1.50\n")
    assert pack(vocab, tmp_path / "cache", dataset=tsv) == pack(vocab, tmp_path / "cache", files=text)


@pytest.mark.parametrize("streaming", [False, True])
def test_a_save_to_disk_folder_saved_in_arrow_format_is_read_as_text(
    vocab: Path, tmp_path: Path, streaming: bool
) -> None:
    """`save_to_disk` keeps a dataset's format; one saved `with_format("arrow")` served pyarrow scalars,
    and the stage refused it as "row 1: expected text, got StringScalar"."""
    import datasets

    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(LINES) + "\n")
    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"text": LINES, "id": list(range(len(LINES)))}).with_format("arrow").save_to_disk(
        str(folder), num_shards=2
    )
    expected = pack(vocab, tmp_path / "cache", files=text)
    assert pack(vocab, tmp_path / "cache", dataset=folder, streaming=streaming) == expected


def test_a_dataset_dict_with_an_empty_split_still_serves_its_other_splits(vocab: Path, tmp_path: Path) -> None:
    """`load_from_disk` of the whole DatasetDict failed with "IndexError: list index out of range" when
    any split had no rows, so its `train` could not be pre-trained on; an empty split (or an empty
    Dataset folder) is now said to be empty."""
    import datasets

    from xfer.core.errors import DataError

    features = datasets.Features({"text": datasets.Value("string")})
    folder = tmp_path / "saved"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"text": LINES}, features=features),
            "validation": datasets.Dataset.from_dict({"text": []}, features=features),
        }
    ).save_to_disk(str(folder))
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(LINES) + "\n")
    assert pack(vocab, tmp_path / "cache", dataset=folder) == pack(vocab, tmp_path / "cache", files=text)
    with pytest.raises(DataError, match=r"saved: split: split 'validation' holds no rows: the corpus is empty"):
        pack(vocab, tmp_path / "cache", dataset=folder, split="validation")
    with pytest.raises(DataError, match=r"no split 'test' \(splits: train, validation\)"):
        pack(vocab, tmp_path / "cache", dataset=folder, split="test")
    empty = tmp_path / "empty"
    datasets.Dataset.from_dict({"text": []}, features=features).save_to_disk(str(empty))
    with pytest.raises(DataError, match=r"empty: the dataset holds no rows: the corpus is empty"):
        pack(vocab, tmp_path / "cache", dataset=empty)


def test_a_json_lines_row_whose_text_is_not_text_is_named_by_its_line(vocab: Path, tmp_path: Path) -> None:
    """One row with a number (or a list) as its text types the whole column `Json`: the error said
    only "column 'text' holds Json(decode=True), not text", leaving the user to search the file."""
    from xfer.core.errors import DataError

    data = tmp_path / "corpus.jsonl"
    rows = [{"text": line} for line in LINES]
    rows.insert(9, {"text": 1990, "id": 3})
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(DataError, match=r"corpus\.jsonl:10: text: expected text, got int"):
        pack(vocab, tmp_path / "cache", dataset=data)
    with pytest.raises(DataError, match=r"corpus\.jsonl:10: text: expected text, got int"):  # as a stream says it
        list(pack(vocab, tmp_path / "cache", dataset=data, streaming=True))


@pytest.mark.parametrize("number", [errno.ENOLCK, errno.ENOSYS])
def test_a_cache_folder_without_posix_locks_is_a_data_error_naming_data_cache(
    vocab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, number: int
) -> None:
    """NFS without its lock daemon (ENOLCK) or Lustre mounted without flock (ENOSYS) refuse the build
    lock: that was a bare OSError traceback naming neither the cache folder nor `data_cache`."""
    from xfer.core.errors import DataError
    from xfer.electra import data

    def refuse(*_: object) -> None:
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(data, "fcntl", types.SimpleNamespace(lockf=refuse, LOCK_EX=2, LOCK_UN=0))
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(LINES) + "\n")
    with pytest.raises(
        DataError, match=r"cache: data_cache: cannot lock \.electra-examples-.*set data_cache"
    ) as caught:
        pack(vocab, tmp_path / "cache", files=text)
    assert caught.value.path == str(tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("electra-examples-*"))  # nothing half-built


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_a_load_dataset_folder_of_csv_or_tsv_files_reads_its_cells_as_text(
    vocab: Path, tmp_path: Path, suffix: str
) -> None:
    """The same pandas defaults applied to a folder of .csv/.tsv files given as `dataset:`."""
    lines = [line.replace('"', "").replace(",", "") for line in LINES]
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / f"train{suffix}").write_text("text\n" + "\n".join(lines) + "\n")
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(lines) + "\n")
    assert pack(vocab, tmp_path / "cache", dataset=folder) == pack(vocab, tmp_path / "cache", files=text)


def test_a_local_dataset_without_its_text_column_fails_the_pre_flight(tmp_path: Path) -> None:
    """`xfer validate --data` said ok to a .csv/.tsv/.parquet file or save_to_disk folder without the
    column: the stage found it only once the stages before it had run."""
    import datasets

    from xfer.core.errors import DataError
    from xfer.electra.checks import preflight
    from xfer.electra.stage_config import PretrainConfig

    table = datasets.Dataset.from_dict({"id": [1, 2], "body": ["the cat", "a dog"]})
    sources = {"c.csv": "id,body\n1,the cat\n", "t.tsv": "id\tbody\n1\tthe cat\n"}
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
    table.to_parquet(str(tmp_path / "p.parquet"))
    table.save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict({"train": table}).save_to_disk(str(tmp_path / "saved-dict"))
    for name in [*sources, "p.parquet", "saved", "saved-dict"]:
        config = PretrainConfig(corpus=CorpusConfig(dataset=tmp_path / name))
        problems = [p for p in preflight(config) if isinstance(p, DataError)]
        assert [str(p) for p in problems] == [
            f"{tmp_path / name}: text: no column 'text' (columns: id, body); set corpus.text_column"
        ], name
        assert not [
            p
            for p in preflight(PretrainConfig(corpus=CorpusConfig(dataset=tmp_path / name, text_column="body")))
            if isinstance(p, DataError)
        ], name

"""Hostile-review regressions (5) for mt/parallel: a blind test set (a test source file without its
target file) is read as unlabelled sentences, predicted and written, never scored."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.core.tasks import TranslationExample, check_examples
from xfer.tasks.mt.config import ParallelConfig
from xfer.tasks.mt.tasks import ParallelTextTask

EN = "A dog runs .\nTwo men talk .\n"
DE = "Ein Hund rennt .\nZwei Männer reden .\n"


def corpus(folder: Path, test_en: str = "A cat sleeps .\nA child plays .\nA man cooks .\n") -> ParallelTextTask:
    """train and dev with references, test with its source file only (a blind test set)."""
    for split in ("train", "dev"):
        (folder / f"{split}.en").write_text(EN, encoding="utf-8")
        (folder / f"{split}.de").write_text(DE, encoding="utf-8")
    (folder / "test.en").write_text(test_en, encoding="utf-8")
    return ParallelTextTask("mt/parallel", ParallelConfig(data_dir=str(folder)))


def test_a_test_source_without_its_target_file_is_an_unlabelled_split(tmp_path: Path) -> None:
    """A blind test set (WMT's, a shared task's: no references given) could not be translated:
    "test.de: no test file", although the Task contract allows unlabelled test splits (target
    None, as GLUE test sets' labels None) and cvt.train's `predict: [test]` only writes them."""
    task = corpus(tmp_path)
    examples = task.examples("test")
    assert examples == [
        TranslationExample("test-1", "A cat sleeps ."),
        TranslationExample("test-2", "A child plays ."),
        TranslationExample("test-3", "A man cooks ."),
    ]
    check_examples(task, "test", examples)  # the contract: an unlabelled test split throughout
    assert task.check_data(["train", "dev", "test"]) == []  # the pre-flight of `xfer run`
    predictions = {"test-1": "Eine Katze schläft .", "test-2": "Ein Kind spielt .", "test-3": "Ein Mann kocht ."}
    path = task.write_predictions(tmp_path / "out", "test", examples, predictions)
    assert path.name == "test.de"
    assert path.read_text(encoding="utf-8") == "Eine Katze schläft .\nEin Kind spielt .\nEin Mann kocht .\n"


def test_a_blind_test_set_is_not_scored(tmp_path: Path) -> None:
    """Scoring it is a clear error naming the sentence and why, as GLUE's unlabelled splits are."""
    task = corpus(tmp_path)
    examples = task.examples("test")
    with pytest.raises(ValueError, match=r"sentence 'test-1' has no reference \(unlabelled split: .*blind test set"):
        task.evaluate(examples, {e.id: "x" for e in examples})


def test_a_blind_test_source_file_is_checked_as_a_parallel_one(tmp_path: Path) -> None:
    """Its lines are the sentences whose outputs go to the file line by line: an empty line or a
    BOM inside a line (concatenated files) is an error at that line, trailing blank lines are
    dropped, and max_examples applies."""
    with pytest.raises(DataError, match=r"test\.en:2: empty line: no sentence to translate"):
        corpus(tmp_path, "A cat sleeps .\n\nA man cooks .\n").examples("test")
    with pytest.raises(DataError, match=r"test\.en:1: byte-order mark"):
        corpus(tmp_path, "A cat sleeps .\ufeffA man cooks .\n").examples("test")
    with pytest.raises(DataError, match=r"test\.en:1: file is empty"):
        corpus(tmp_path, "\n\n").examples("test")
    assert len(corpus(tmp_path, "A cat .\nA dog .\n\n\n").examples("test")) == 2
    (tmp_path / "test.en").write_text("A cat .\nA dog .\nA man .\n", encoding="utf-8")
    task = ParallelTextTask("mt/parallel", ParallelConfig(data_dir=str(tmp_path), max_examples=2))
    assert [e.id for e in task.examples("test")] == ["test-1", "test-2"]


def test_only_the_test_split_may_lack_its_references(tmp_path: Path) -> None:
    """Training and model selection need references: an absent dev or train target file stays an
    error, and so does an absent test source, a folder or a dangling symlink in the target's place."""
    corpus(tmp_path)
    (tmp_path / "dev.de").unlink()
    task = ParallelTextTask("mt/parallel", ParallelConfig(data_dir=str(tmp_path)))
    with pytest.raises(DataError, match=r"dev\.de: no dev file"):
        task.examples("dev")
    (tmp_path / "test.en").unlink()
    with pytest.raises(DataError, match=r"test\.en: no test file"):
        task.examples("test")
    (tmp_path / "test.en").write_text(EN, encoding="utf-8")
    (tmp_path / "test.de").mkdir()
    with pytest.raises(DataError, match=r"test\.de: is a directory"):
        ParallelTextTask("mt/parallel", ParallelConfig(data_dir=str(tmp_path))).examples("test")
    (tmp_path / "test.de").rmdir()
    os.symlink(tmp_path / "elsewhere.de", tmp_path / "test.de")
    with pytest.raises(DataError, match=r"test\.de: no test file"):
        ParallelTextTask("mt/parallel", ParallelConfig(data_dir=str(tmp_path))).examples("test")


def test_a_test_split_with_its_target_file_stays_labelled(tmp_path: Path) -> None:
    corpus(tmp_path, EN)
    (tmp_path / "test.de").write_text(DE, encoding="utf-8")
    task = ParallelTextTask("mt/parallel", ParallelConfig(data_dir=str(tmp_path)))
    examples = task.examples("test")
    assert [e.target for e in examples] == DE.splitlines()
    assert task.evaluate(examples, {e.id: e.target for e in examples})["bleu"] == pytest.approx(100.0)

"""Counts on the shared corpora (skipped when /work/shared/data is not available)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xfer.tasks.conll.config import ChunkingConfig, SpanTaggingConfig, UdParseConfig, UdPosConfig
from xfer.tasks.conll.parsing import UdParseTask
from xfer.tasks.conll.tasks import ChunkingTask, SpanTaggingTask, UdPosTask

SHARED = Path(os.environ.get("XFER_DATA", Path(__file__).resolve().parents[3].parent / "shared" / "data"))


def need(folder: str) -> Path:
    path = SHARED / folder
    if not path.is_dir():
        pytest.skip(f"shared data folder not found: {path} (set XFER_DATA)")
    return path


def words(examples) -> int:
    return sum(len(e.words) for e in examples)


def test_conll2003():
    data = need("conll2003")
    task = SpanTaggingTask("conll/ner", SpanTaggingConfig(train_file=data / "train.txt", dev_file=data / "dev.txt"))
    train, dev = task.examples("train"), task.examples("dev")
    assert (len(train), words(train)) == (14041, 203621)
    assert (len(dev), words(dev)) == (3250, 51362)
    assert {tag.split("-")[-1] for tag in task.labels} == {"O", "PER", "LOC", "ORG", "MISC"}
    assert len(task.labels) == 17  # B/I/E/S x 4 types + O
    assert task.evaluate(dev, {e.id: list(e.tags) for e in dev})["f1"] == pytest.approx(100.0)


def test_conll2000_dev_carve():
    data = need("conll2000")
    task = ChunkingTask("conll/chunking", ChunkingConfig(train_file=data / "train.txt"))
    train, dev = task.examples("train"), task.examples("dev")
    assert (len(train), len(dev)) == (8936 - 1500, 1500)
    assert words(train) + words(dev) == 211727


def test_ud_ewt():
    data = need("ud_ewt")
    task = UdPosTask("conll/ud-pos", UdPosConfig(train_file=data / "train.conllu", dev_file=data / "dev.conllu"))
    dev = task.examples("dev")
    assert (len(dev), words(dev)) == (2001, 25147)
    train = task.examples("train")
    assert (len(train), words(train)) == (12544, 204577)
    assert len(task.labels) == 17  # the 17 UPOS tags


def test_ud_ewt_trees():
    data = need("ud_ewt")
    task = UdParseTask("conll/ud-parse", UdParseConfig(train_file=data / "train.conllu", dev_file=data / "dev.conllu"))
    dev = task.examples("dev")
    assert (len(dev), words(dev)) == (2001, 25147)
    assert sum(sum(task.scored(e)) for e in dev) == 22042  # CoNLL-2007 punctuation left out
    assert task.evaluate(dev, {e.id: (list(e.heads), list(e.relations)) for e in dev})["las"] == 100.0
    assert len(task.labels) == 51 and "nmod:poss" in task.labels

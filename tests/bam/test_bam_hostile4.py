"""Hostile review, second pass, of the BAM teacher-prediction cache (misnamed entries, publishing)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from xfer.bam import cache
from xfer.core.tasks import SentenceExample

EXAMPLES = [SentenceExample("train-0", "a cat", label="1"), SentenceExample("train-1", "a dog", "runs", label="0")]


def _entry(key: str, first: float = 0.5) -> cache.TeacherPredictions:
    rows = [np.array([[first, -0.5]], np.float32), np.array([[-1.0, 2.0]], np.float32)]
    return cache.assemble(key, "glue/rte", "classification", ["0", "1"], EXAMPLES, [e.id for e in EXAMPLES], rows)


def test_a_misnamed_cache_entry_is_moved_aside_and_recomputed_not_fatal(tmp_path: Path) -> None:
    store = cache.PredictionStore(tmp_path)
    wrong = store.save(_entry("a" * 64))
    wanted = store.path("b" * 64)
    os.replace(wrong, wanted)  # holds key a..., named b...
    with pytest.warns(UserWarning, match="holds key a+, not b+"):
        assert store.lookup("b" * 64) is None
    assert not wanted.exists() and wanted.with_name(wanted.name + ".misnamed").exists()
    store.save(_entry("b" * 64))
    found = store.lookup("b" * 64)
    assert found is not None and found.key == "b" * 64


def test_publish_replaces_a_stale_output_file_with_the_recomputed_entry(tmp_path: Path) -> None:
    store = cache.PredictionStore(tmp_path / "shared")
    output = tmp_path / "predictions"
    key = "c" * 64
    first = cache.publish(store.save(_entry(key)), output)
    # The shared entry is found damaged, moved aside and recomputed: a new file at the same path.
    store.path(key).unlink()
    entry_path = store.save(_entry(key, first=0.25))
    target = cache.publish(entry_path, output)
    assert target == first
    assert target.read_bytes() == entry_path.read_bytes()
    assert cache.load_predictions(target).rows("train-0")[0, 0] == pytest.approx(0.25)
    assert not list(output.glob("*.publish-tmp"))
    # An identical file already in place is kept as it is.
    inode = target.stat().st_ino
    assert cache.publish(entry_path, output) == target and target.stat().st_ino == inode


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_the_teachers_export_refuses_non_finite_predictions_naming_task_and_example(tmp_path: Path, bad: float) -> None:
    rows = [np.array([[0.5, -0.5]], np.float32), np.array([[bad, 2.0]], np.float32)]
    entry = cache.assemble("d" * 64, "glue/rte", "classification", ["0", "1"], EXAMPLES, [e.id for e in EXAMPLES], rows)
    store = cache.PredictionStore(tmp_path)
    with pytest.raises(cache.CacheError, match=r"glue/rte: .*training example 'train-1' is NaN or infinite"):
        store.save(entry)
    assert not list(tmp_path.iterdir())  # nothing stored

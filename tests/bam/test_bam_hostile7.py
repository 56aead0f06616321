"""Hostile review 7: the teacher-prediction cache, task sampling and the student's data."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from xfer.bam import cache
from xfer.bam.sampling import task_probabilities
from xfer.core.errors import UserError
from xfer.core.tasks import SentenceExample

EXAMPLES = [SentenceExample("train-0", "a cat", label="1"), SentenceExample("train-1", "a dog", "runs", label="0")]
KEY = "k" * 64


def _entry(key: str = KEY, first: float = 0.5) -> cache.TeacherPredictions:
    rows = [np.array([[first, -0.5]], np.float32), np.array([[-1.0, 2.0]], np.float32)]
    return cache.assemble(key, "glue/rte", "classification", ["0", "1"], EXAMPLES, [e.id for e in EXAMPLES], rows)


def _damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # flip bits inside the values
    path.write_bytes(bytes(data))


def test_a_damaged_entry_replaced_by_another_run_while_read_is_not_thrown_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs share a cache_dir: while this one reads a damaged entry, the other recomputes and
    saves it. The good entry must be kept (and served), not moved aside as the damaged one was."""
    store = cache.PredictionStore(tmp_path)
    path = store.save(_entry())
    _damage(path)
    real_load = cache.load_predictions
    calls = []

    def racing_load(p: Path) -> cache.TeacherPredictions:
        calls.append(p)
        if len(calls) == 1:
            try:
                return real_load(p)  # reads the damaged bytes ...
            finally:
                cache.PredictionStore(tmp_path).save(_entry(first=0.25))  # ... as the other run saves
        return real_load(p)

    monkeypatch.setattr(cache, "load_predictions", racing_load)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is moved aside, so nothing to warn about
        entry = store.lookup(KEY)
    assert entry is not None and np.array_equal(entry.rows("train-0"), [[0.25, -0.5]])
    assert path.is_file() and not path.with_name(path.name + ".damaged").exists()


def test_a_damaged_entry_another_run_moved_aside_first_is_absent_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = cache.PredictionStore(tmp_path)
    path = store.save(_entry())
    _damage(path)
    real_load = cache.load_predictions

    def racing_load(p: Path) -> cache.TeacherPredictions:
        try:
            return real_load(p)
        finally:
            p.replace(p.with_name(p.name + ".damaged"))  # the other run's lookup set it aside first

    monkeypatch.setattr(cache, "load_predictions", racing_load)
    assert store.lookup(KEY) is None  # was: FileNotFoundError from os.replace


def test_a_damaged_entry_is_still_set_aside_with_a_warning(tmp_path: Path) -> None:
    store = cache.PredictionStore(tmp_path)
    path = store.save(_entry())
    _damage(path)
    with pytest.warns(UserWarning, match=r"checksum.*moved to .*\.damaged, recomputing"):
        assert store.lookup(KEY) is None
    assert not path.exists() and path.with_name(path.name + ".damaged").is_file()
    misnamed = store.save(_entry("m" * 64)).replace(path)  # a file under another key's name
    assert misnamed == path
    with pytest.warns(UserWarning, match=r"holds key m+, not k+; moved to .*\.misnamed"):
        assert store.lookup(KEY) is None


# --- task sampling past the float range -----------------------------------------------------------


def test_sampling_past_the_float_range_gives_no_nan_probabilities() -> None:
    """exponent * log |D| itself overflowed for a tiny temperature (or a huge alpha): inf - inf made
    the probabilities NaN, refused only later by the source as "invalid task probabilities"."""
    equal = task_probabilities({"a": 5, "b": 5}, "temperature", temperature=1e-320)
    assert equal == {"a": 0.5, "b": 0.5}
    with pytest.raises(UserError, match=r"task 'small' \(1 examples\).*never be sampled; raise the temperature"):
        task_probabilities({"big": 1000, "small": 1}, "temperature", temperature=1e-320)
    with pytest.raises(UserError, match=r"task 'small' \(3 examples\).*never be sampled; lower alpha"):
        task_probabilities({"big": 1000, "small": 3, "big2": 1000}, "power", alpha=math.inf)
    # still exact where only the powers overflow
    p = task_probabilities({"a": 100_000, "b": 99_000}, "temperature", temperature=0.01)
    assert math.isclose(p["b"] / p["a"], 0.99**100, rel_tol=1e-9) and math.isclose(sum(p.values()), 1.0)

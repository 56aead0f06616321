"""The content-addressed teacher-prediction cache: keys, integrity, ids, and attaching to features."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from xfer.bam import cache
from xfer.bam.data import attach_teacher_outputs
from xfer.bam.objective import TASK_KINDS
from xfer.core.errors import UserError
from xfer.core.tasks import SentenceExample, TaggingExample

EXAMPLES = [SentenceExample("train-0", "a cat", label="1"), SentenceExample("train-1", "a dog", "runs", label="0")]
BASE = dict(
    teacher_weights="w" * 64,
    task="glue/rte",
    task_config={"data_dir": "/data/RTE", "max_examples": None},
    train_data=cache.data_digest(EXAMPLES),
    objective="transformer.sequence",
    objective_config=None,
    max_length=128,
    tokenizer="t" * 64,
    precision="torch.bfloat16",
)


def _entry(key: str = "k" * 64, examples=EXAMPLES) -> cache.TeacherPredictions:
    rows = [np.array([[0.5, -0.5]], np.float32), np.array([[-1.0, 2.0]], np.float32)]
    return cache.assemble(key, "glue/rte", "classification", ["0", "1"], examples, [e.id for e in examples], rows)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("teacher_weights", "v" * 64),  # a changed teacher
        ("train_data", cache.data_digest([EXAMPLES[0], SentenceExample("train-1", "a dog", "runs", label="1")])),
        ("task_config", {"data_dir": "/data/RTE", "max_examples": 100}),
        ("max_length", 64),  # featurisation
        ("tokenizer", "u" * 64),
        ("objective_config", {"dropout": 0.2}),
        ("precision", "None"),
    ],
)
def test_key_changes_with_everything_predictions_depend_on(field: str, value: object) -> None:
    assert cache.prediction_key(**BASE) == cache.prediction_key(**dict(BASE))  # stable
    assert cache.prediction_key(**{**BASE, field: value}) != cache.prediction_key(**BASE)


def test_weights_digest_sees_one_changed_value() -> None:
    state = {"a": torch.zeros(3), "b": torch.ones(2, dtype=torch.bfloat16)}
    before = cache.weights_digest(state)
    state["a"][1] = 1e-7
    assert cache.weights_digest(state) != before


def test_round_trip_and_lookup(tmp_path: Path) -> None:
    store = cache.PredictionStore(tmp_path)
    assert store.lookup("k" * 64) is None
    store.save(_entry())
    loaded = store.lookup("k" * 64)
    assert loaded is not None and loaded.ids == ["train-0", "train-1"] and loaded.labels == ("0", "1")
    assert np.array_equal(loaded.rows("train-1"), [[-1.0, 2.0]])
    assert loaded.digest("train-0") == cache.example_digest(EXAMPLES[0]) and loaded.digest("nope") is None


def test_duplicate_example_ids_are_an_error(tmp_path: Path) -> None:
    twice = [EXAMPLES[0], SentenceExample("train-0", "other text", label="0")]
    with pytest.raises(cache.CacheError, match="duplicate example id 'train-0'"):
        _entry(examples=twice)
    entry = _entry()
    with pytest.raises(cache.CacheError, match="duplicate example id"):
        cache.TeacherPredictions(
            entry.key, entry.task, entry.type, entry.labels, ["x", "x"], entry.values, entry.offsets, entry.digests
        )


def test_damaged_entries_are_set_aside_and_recomputed(tmp_path: Path) -> None:
    store = cache.PredictionStore(tmp_path)
    path = store.save(_entry())
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # flip bits inside the values
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="checksum"):
        assert store.lookup("k" * 64) is None
    assert not path.exists() and path.with_name(path.name + ".damaged").exists()
    store.save(_entry())
    path.write_bytes(path.read_bytes()[:40])  # truncated
    with pytest.warns(UserWarning, match="unreadable"):
        assert store.lookup("k" * 64) is None
    with pytest.raises(cache.CacheError, match=r"no index\.json"):
        cache.load_teacher_predictions(tmp_path, "glue/rte")


def test_index_names_a_task_it_lacks(tmp_path: Path) -> None:
    cache.PredictionStore(tmp_path).save(_entry())
    cache.write_index(tmp_path, {"glue/rte": {"file": "k" * 64 + ".safetensors", "key": "k" * 64}})
    assert len(cache.load_teacher_predictions(tmp_path, "glue/rte")) == 2
    with pytest.raises(cache.CacheError, match="no predictions for 'glue/mrpc'"):
        cache.load_teacher_predictions(tmp_path, "glue/mrpc")


def test_students_refuse_predictions_made_on_other_data() -> None:
    entry = _entry()
    kind = TASK_KINDS["classification"]
    features = [{"id": e.id} for e in EXAMPLES]
    attach_teacher_outputs("glue/rte", EXAMPLES, features, entry, kind)
    assert np.array_equal(features[1]["teacher"], [[-1.0, 2.0]])
    edited = [EXAMPLES[0], SentenceExample("train-1", "a dog", "sleeps", label="0")]
    with pytest.raises(UserError, match="differ from the examples the teacher predicted on"):
        attach_teacher_outputs("glue/rte", edited, [{"id": e.id} for e in edited], entry, kind)
    extra = [*EXAMPLES, SentenceExample("train-2", "new", label="1")]
    with pytest.raises(UserError, match=r"have no teacher prediction .*'train-2'"):
        attach_teacher_outputs("glue/rte", extra, [{"id": e.id} for e in extra], entry, kind)


def test_tagging_windows_take_consecutive_word_rows() -> None:
    sentence = TaggingExample("s0", ("a", "b", "c", "d", "e"), ("X",) * 5)
    rows = np.arange(10, dtype=np.float32).reshape(5, 2)
    entry = cache.assemble("k" * 64, "t", "tagging", ["X", "Y"], [sentence], ["s0", "s0"], [rows[:3], rows[3:]])
    assert entry.offsets.tolist() == [0, 5]
    windows = [{"id": "s0", "word_starts": [1, 2]}, {"id": "s0", "word_starts": [1, 2, 3]}]  # another max_length
    attach_teacher_outputs("t", [sentence], windows, entry, TASK_KINDS["tagging"])
    assert np.array_equal(windows[0]["teacher"], rows[:2]) and np.array_equal(windows[1]["teacher"], rows[2:])
    with pytest.raises(UserError, match="fewer words"):
        attach_teacher_outputs("t", [sentence], [{"id": "s0", "word_starts": [1, 2]}], entry, TASK_KINDS["tagging"])


@pytest.mark.parametrize("damage", ["offsets", "digests", "labels", "ids"])
def test_damage_outside_the_values_is_caught_too(tmp_path: Path, damage: str) -> None:
    """The checksum covered `values` only: rows moved between examples (offsets) or a label order
    changed in the metadata loaded silently as the teacher's predictions."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    store = cache.PredictionStore(tmp_path)
    path = store.save(_entry())
    with safe_open(str(path), framework="numpy") as handle:
        metadata = dict(handle.metadata())
        tensors = {name: handle.get_tensor(name).copy() for name in ("values", "offsets", "digests")}
    if damage in ("offsets", "digests"):
        tensors[damage][1] += 1
    else:
        metadata[damage] = json.dumps(list(reversed(json.loads(metadata[damage]))))
    save_file(tensors, str(path), metadata=metadata)
    with pytest.warns(UserWarning, match="checksum"):
        assert store.lookup("k" * 64) is None

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


def test_preflight_names_a_teachers_index_entry_whose_file_is_missing(tmp_path: Path) -> None:
    """An index.json copied without its .safetensors files passed the pre-flight and stopped the
    student when it started, after every stage before it had trained."""
    import json

    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.runs.preflight import preflight
    from xfer.testing import make_host

    folder = tmp_path / "predictions"
    folder.mkdir()
    entry = {"file": "x.safetensors", "key": "x", "type": "classification", "labels": ["0", "1"], "examples": 3}
    (folder / "index.json").write_text(json.dumps({"format": 1, "tasks": {"toy/agreement": entry}}))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"name: t\nstages:\n  student:\n    kind: bam.student\n    teachers: {folder}\n"
        "    tasks: [{name: toy/agreement}]\n"
    )
    host = make_host(autoload=True)
    problems = preflight(load_recipe(recipe, host=host), host)
    assert any(
        "tasks.0: 'toy/agreement'" in p and "names the predictions file x.safetensors, which is missing" in p
        for p in problems
    ), problems
    (folder / "x.safetensors").write_bytes(b"")  # present: its contents are checked when the stage reads it
    assert not any("x.safetensors" in p for p in preflight(load_recipe(recipe, host=host), host))


def test_an_empty_training_sentence_is_named_as_such_not_as_unlabelled() -> None:
    """A tagging sentence of zero words (tags `()`) was refused with "has no label", which sent the
    user looking for a missing tag column."""
    from types import SimpleNamespace

    from xfer.bam.stage import load_task
    from xfer.core.config import TaskRef
    from xfer.core.errors import UserError
    from xfer.core.tasks import TaggingExample
    from xfer.testing import make_host

    host = make_host(autoload=True)
    toy_pos = host.load("task", "toy/pos")

    class WithEmptySentence(toy_pos):  # type: ignore[misc, valid-type]
        def examples(self, split: str) -> list:
            found = super().examples(split)
            return [*found[:2], TaggingExample(id="empty", words=(), tags=())] if split == "train" else found

    loads = {"task": WithEmptySentence, "objective": host.load("objective", "transformer.tagging")}
    ctx = SimpleNamespace(host=SimpleNamespace(load=lambda kind, name: loads[kind]))
    setup = SimpleNamespace(config=SimpleNamespace(objective=None))
    ref = TaskRef(name="toy/pos")
    with pytest.raises(UserError, match=r"training example 'empty' has no words \(an empty sentence\)"):
        load_task(ctx, setup, ref)  # type: ignore[arg-type]

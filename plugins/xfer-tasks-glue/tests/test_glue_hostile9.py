"""Hostile review, ninth pass: `source: hub` and the stage fingerprint. The Hub copy a hub task reads
(nyu-mll/glue in the `datasets` cache) was signed nowhere: another snapshot downloaded into the cache
left a completed stage, trained on the old one, skipped as unchanged. And a `data_dir` given with
`source: hub` was ignored without a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import RecipeError
from xfer.core.plugins import set_default_host
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.fingerprint import FileHasher, explain_change, stage_signature
from xfer.testing import make_host, write_recipe
from xfer.transformer.testing import tiny_finetune_recipe

from .glue_hub_cache import fill_cache, rte_split

datasets = pytest.importorskip("datasets")


@pytest.fixture(autouse=True)
def host(monkeypatch, tmp_path):
    """Every plugin, offline, with the `datasets` cache in tmp_path."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    set_default_host(make_host(autoload=True))
    yield
    set_default_host(None)


def _signature(path: Path) -> dict:
    """The fine-tuning stage's fingerprint parts, as `xfer run` computes them (its vocab stage, an
    upstream one, is signed by its own fingerprint: a fixed stand-in here)."""
    recipe = load_recipe(path)
    plan = recipe.stages["fit"]
    upstream = {dep: "0" * 64 for dep in plan.deps}
    return stage_signature(plan, recipe.seed, upstream, make_host(autoload=True), FileHasher()).parts


def test_another_cached_snapshot_of_the_hub_copy_changes_the_fingerprint(tmp_path):
    cache = tmp_path / "cache"
    fill_cache(cache, "rte", {"train": rte_split(), "validation": rte_split()})
    path = write_recipe(tmp_path, tiny_finetune_recipe("{name: glue/rte, source: hub}"))
    before = _signature(path)
    assert _signature(path) == before, "nothing changed: the stage is skipped"
    # Another subset downloaded (another task's) is not this task's input.
    fill_cache(cache, "cola", {"validation": rte_split()})
    assert _signature(path) == before
    # Another snapshot of rte (a new revision: a folder of its own beside the old one, which offline
    # `datasets` now reads) makes the completed stage stale, naming the input.
    newer = cache / "nyu-mll___glue" / "rte" / "0.0.0" / "fedcba9876543210"
    newer.mkdir(parents=True)
    (newer / "glue-validation.arrow").write_bytes(b"another snapshot")
    after = _signature(path)
    assert after != before
    reasons = explain_change(before, after, "fit")
    assert any(
        "stages.fit.tasks.0.hub.rte:" in r and "fedcba9876543210/glue-validation.arrow added" in r for r in reasons
    )
    # A snapshot's file replaced in place is a change too.
    (newer / "glue-validation.arrow").write_bytes(b"edited in place")
    assert _signature(path) != after


def test_mnli_signs_the_diagnostic_subset_only_when_it_reads_it(tmp_path):
    fill_cache(tmp_path / "cache", "mnli", {"validation_matched": rte_split()})
    fill_cache(tmp_path / "cache", "ax", {"test": rte_split()})
    path = write_recipe(tmp_path, tiny_finetune_recipe("{name: glue/mnli, source: hub}"))
    assert sorted(_signature(path)["inputs"]) == ["stages.fit.tasks.0.hub.mnli"]
    diagnostic = tiny_finetune_recipe("{name: glue/mnli, source: hub, diagnostic: true}", predict="[dev, test]")
    path = write_recipe(tmp_path, diagnostic)
    assert sorted(_signature(path)["inputs"]) == ["stages.fit.tasks.0.hub.ax", "stages.fit.tasks.0.hub.mnli"]
    path = write_recipe(tmp_path, tiny_finetune_recipe("{name: glue/mnli-mm, source: hub}"))
    assert sorted(_signature(path)["inputs"]) == ["stages.fit.tasks.0.hub.mnli"]


def test_a_local_task_signs_no_hub_copy(tmp_path):
    """A local task's fingerprint is what it was: its data_dir's files, no `datasets` cache."""
    fill_cache(tmp_path / "cache", "rte", {"validation": rte_split()})
    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\tA\tB\tentailment\n")
    path = write_recipe(tmp_path, tiny_finetune_recipe("{name: glue/rte, data_dir: RTE}"))
    assert [k for k in _signature(path)["inputs"] if ".hub." in k] == []


def test_data_dir_with_source_hub_is_refused_at_its_key(tmp_path):
    """It was ignored: a recipe meant to read a local copy trained on the Hub's."""
    (tmp_path / "RTE").mkdir()
    task = "\n".join(["{name: glue/rte, source: hub,", "         data_dir: RTE}"])
    path = write_recipe(tmp_path, tiny_finetune_recipe(task))
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    line = next(n for n, text in enumerate(path.read_text().splitlines(), start=1) if "data_dir: RTE" in text)
    message = str(caught.value)
    assert f"{path}:{line}:" in message and "stages.fit.tasks.0.data_dir" in message, message
    assert "source: hub" in message and "source: local" in message, message

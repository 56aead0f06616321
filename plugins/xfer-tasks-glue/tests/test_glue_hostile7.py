"""Hostile review: the pre-flight of `source: hub` tasks reads the `datasets` cache (never the network)."""

from __future__ import annotations

import pytest

from xfer.core.errors import UserError
from xfer.tasks.glue.config import GlueTaskConfig, MnliTaskConfig

from .glue_hub_cache import fill_cache, rte_split

datasets = pytest.importorskip("datasets")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_preflight_reports_a_split_missing_from_the_cached_hub_copy(monkeypatch, tmp_path):
    # The pre-flight returned nothing for source: hub, so a cached copy without the test split was
    # reported only when the stage ran, after the earlier stages had trained.
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)  # the user is online
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    fill_cache(tmp_path / "cache", "rte", {"train": rte_split(), "validation": rte_split()})
    from xfer.tasks.glue.tasks import RTETask

    task = RTETask("glue/rte", GlueTaskConfig(source="hub"))
    problems = task.check_data(["train", "dev", "test"])
    assert len(problems) == 1 and isinstance(problems[0], UserError)
    assert "glue/rte" in str(problems[0]) and "has no split 'test'" in str(problems[0])
    assert datasets.config.HF_HUB_OFFLINE is False  # the user's setting is restored
    # What the pre-flight read is what the stage gets, without a second read.
    assert [(e.id, e.label) for e in task.examples("dev")] == [("dev-0", "not_entailment")]


def test_preflight_leaves_an_uncached_subset_to_the_download_unless_offline(monkeypatch, tmp_path):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    fill_cache(tmp_path / "cache", "rte", {"validation": rte_split()})
    from xfer.tasks.glue.tasks import MNLITask

    # Online: mnli is not cached, the run will download it; the pre-flight must not (nor complain).
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    assert MNLITask("glue/mnli", MnliTaskConfig(source="hub")).check_data(["dev"]) == []
    assert datasets.config.HF_HUB_OFFLINE is False
    # Offline: it never will be downloaded, so the pre-flight says so.
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    problems = MNLITask("glue/mnli", MnliTaskConfig(source="hub")).check_data(["dev"])
    assert len(problems) == 1 and "subset 'mnli'" in str(problems[0]) and "offline" in str(problems[0])


def test_preflight_reports_a_bad_hub_copy_and_reads_each_split_once(monkeypatch):
    # Duplicate idx in a copy found by `datasets`: a stage-time error before, a pre-flight one now.
    data = datasets.Dataset.from_dict(
        {"sentence1": ["A", "B"], "sentence2": ["C", "D"], "label": [0, 1], "idx": [3, 3]}
    )
    good = rte_split()
    calls: list[str] = []

    def load(name, subset, split):
        calls.append(split)
        return {"validation": data, "train": good}[split]

    monkeypatch.setattr(datasets, "load_dataset", load)
    from xfer.tasks.glue.tasks import RTETask

    task = RTETask("glue/rte", GlueTaskConfig(source="hub"))
    problems = task.check_data(["train", "dev"])
    assert [str(p) for p in problems] == [
        "glue/rte: nyu-mll/glue subset 'rte' split 'validation': duplicate row idx 3 "
        "(the idx column must number the rows uniquely: it is the example id)"
    ]
    task.examples("train")
    assert calls == ["train", "validation"]  # train was not loaded a second time

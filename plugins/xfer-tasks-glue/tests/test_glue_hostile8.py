"""Hostile review 8: the hub pre-flight's offline switch, ..."""

from __future__ import annotations

import logging
import threading

import pytest

datasets = pytest.importorskip("datasets")

from .glue_hub_cache import fill_cache, rte_split  # noqa: E402


@pytest.fixture
def online(monkeypatch):
    """The user is online (the suite's conftest sets the environment offline)."""
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)


def test_overlapping_preflights_on_two_threads_leave_the_process_online(online):
    # Flipped without a lock, the second pre-flight saved the first one's True as "the user's
    # setting": the first restored False while the second was still reading "cache only" (so it
    # could download), and the second then restored True, leaving the process offline for good.
    from xfer.tasks.glue.hub import cache_only

    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[object] = []

    def first() -> None:
        with cache_only():
            first_in.set()
            second_in.wait(0.3)  # the second thread must not get in while we are inside
        first_out.set()

    def second() -> None:
        with cache_only() as was_offline:
            second_in.set()
            first_out.wait(5)
            seen.append((was_offline, datasets.config.HF_HUB_OFFLINE))

    one = threading.Thread(target=first)
    one.start()
    assert first_in.wait(5)
    two = threading.Thread(target=second)
    two.start()
    one.join(10)
    two.join(10)
    assert seen == [(False, True)]  # the second was still cache-only, and knew the user is online
    assert datasets.config.HF_HUB_OFFLINE is False


def test_an_online_load_on_another_thread_waits_for_the_preflight(online, monkeypatch):
    # A stage's download on another thread ran while the pre-flight had `datasets` offline, so it
    # failed as "Are you offline?" although the user was online.
    from xfer.tasks.glue.benchmark import GLUE_SPECS
    from xfer.tasks.glue.hub import cache_only, load_hub_split

    offline_at_load: list[object] = []

    def load(name, subset, split):
        offline_at_load.append(datasets.config.HF_HUB_OFFLINE)
        return datasets.Dataset.from_dict({"sentence1": ["A"], "sentence2": ["B"], "label": [0], "idx": [0]})

    monkeypatch.setattr(datasets, "load_dataset", load)
    inside = threading.Event()
    loaded = threading.Event()

    def preflight() -> None:
        with cache_only():
            inside.set()
            loaded.wait(0.3)  # the online load must not run now

    def stage() -> None:
        inside.wait(5)
        load_hub_split(GLUE_SPECS["rte"], "dev", "glue/rte")
        loaded.set()

    threads = [threading.Thread(target=preflight), threading.Thread(target=stage)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert offline_at_load == [False]
    assert datasets.config.HF_HUB_OFFLINE is False


class _BrokenDatasets:
    """A meta-path finder that fails `import datasets` as a broken install does (its own import of
    a dependency failing), not as a missing one."""

    def find_spec(self, name, path=None, target=None):
        if name == "datasets":
            raise ImportError("cannot import name 'HfFileSystem' from 'huggingface_hub'", name="huggingface_hub")
        return None


def test_a_datasets_install_that_fails_to_import_is_not_reported_as_missing(monkeypatch):
    # The pre-flight said "needs the `datasets` library (pip install ...)": pip answered "already
    # satisfied", and the import error that said what was wrong was dropped.
    import sys

    from xfer.core.errors import UserError
    from xfer.tasks.glue.config import GlueTaskConfig
    from xfer.tasks.glue.tasks import RTETask

    for module in [m for m in sys.modules if m == "datasets" or m.startswith("datasets.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(sys, "meta_path", [_BrokenDatasets(), *sys.meta_path])
    problems = RTETask("glue/rte", GlueTaskConfig(source="hub")).check_data(["dev"])
    assert len(problems) == 1 and isinstance(problems[0], UserError)
    assert "installed but fails to import" in str(problems[0])
    assert "cannot import name 'HfFileSystem' from 'huggingface_hub'" in str(problems[0])
    # Not installed at all: still the pip hint.
    monkeypatch.setitem(sys.modules, "datasets", None)
    problems = RTETask("glue/rte", GlueTaskConfig(source="hub")).check_data(["dev"])
    assert [str(p) for p in problems] == [
        "glue/rte: source 'hub' needs the `datasets` library (pip install 'xfer-tasks-glue[hub]'), "
        "or use source: local with data_dir"
    ]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_the_preflight_does_not_tell_an_online_user_that_offline_mode_is_on(online, monkeypatch, tmp_path):
    # The pre-flight switches `datasets` offline to read only its cache, and `datasets` then told the
    # online user "nyu-mll/glue couldn't be found on the Hugging Face Hub (offline mode is enabled)".
    from xfer.tasks.glue.config import GlueTaskConfig
    from xfer.tasks.glue.tasks import RTETask

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    fill_cache(tmp_path / "cache", "rte", {"train": rte_split(), "validation": rte_split()})
    records = _Records()
    root = logging.getLogger("datasets")
    root.addHandler(records)
    try:
        assert RTETask("glue/rte", GlueTaskConfig(source="hub")).check_data(["train", "dev"]) == []
        assert not [m for m in records.messages if "offline mode is enabled" in m or "latest cached" in m]
        assert all(not logging.getLogger(name).filters for name in ("datasets.load",))  # taken off again
        # A user who is offline asked for it: `datasets` says so as usual.
        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
        RTETask("glue/rte", GlueTaskConfig(source="hub")).check_data(["dev"])
        assert any("offline mode is enabled" in m for m in records.messages)
    finally:
        root.removeHandler(records)


def test_an_interrupted_preflight_restores_online_mode_and_the_loggers(online):
    # Not a defect of the old code (its `finally` restored the flag): a guard for the lock and the
    # log filters added since, which must not outlive a Ctrl-C either.
    from xfer.tasks.glue.hub import _OFFLINE_LOCK, cache_only

    with pytest.raises(KeyboardInterrupt), cache_only():
        raise KeyboardInterrupt
    assert datasets.config.HF_HUB_OFFLINE is False
    assert not logging.getLogger("datasets.load").filters
    free: list[bool] = []

    def try_lock() -> None:  # from another thread: this one could re-enter the RLock anyway
        free.append(_OFFLINE_LOCK.acquire(blocking=False))
        if free[-1]:
            _OFFLINE_LOCK.release()

    thread = threading.Thread(target=try_lock)
    thread.start()
    thread.join(5)
    assert free == [True]

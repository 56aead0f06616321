"""A Hub id whose cached `main` snapshot a killed download left incomplete: some files only (config.json
but no weights), links to blobs that are gone, an unfinished `.incomplete` blob. huggingface_hub returns
such a folder as it is (unless its tree listing shows files missing: then it reports the model as not
cached at all), so xfer said "not in the local cache" of a model that was there, or passed the folder
on and the model loader failed on it. Now the recipe's check says the snapshot is incomplete and what
it misses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core import hub
from xfer.testing import write_recipe

from .recipes import BARE, testing_host  # noqa: F401 (autouse fixture)
from .recipes import validate_errors as _errors

pytest.importorskip("huggingface_hub")

REPO = "someone/toy"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
INIT = BARE + "  second:\n    kind: testing.fit\n    init: someone/toy\n    task: toy/agreement\n"


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """REPO's folder in an empty Hugging Face cache under tmp_path (offline throughout)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "hub" / f"models--{REPO.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(COMMIT)
    (folder / "snapshots" / COMMIT).mkdir(parents=True)
    (folder / "blobs").mkdir()
    return folder


def _blob(cache: Path, name: str, text: str | None, blob: str) -> None:
    """The snapshot's file `name` as huggingface_hub writes it: a link to ../../blobs/<blob>, whose
    content is `text` (None: the blob is gone, so the link dangles)."""
    if text is not None:
        (cache / "blobs" / blob).write_text(text)
    (cache / "snapshots" / COMMIT / name).symlink_to(f"../../blobs/{blob}")


def test_a_complete_snapshot_is_still_found(cache: Path) -> None:
    _blob(cache, "config.json", "{}", "aaa")
    _blob(cache, "model.safetensors", "weights", "bbb")
    assert hub.cached_snapshot(REPO) == cache / "snapshots" / COMMIT
    assert hub.incomplete_snapshot(REPO) is None


def test_a_dangling_link_in_the_snapshot_is_named(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No tree listing (a snapshot `transformers` fetched file by file), the weights blob gone: the
    folder was taken as the model, and only the loader found out."""
    _blob(cache, "config.json", "{}", "aaa")
    _blob(cache, "model.safetensors", None, "bbb")
    assert hub.cached_snapshot(REPO) is None
    err = _errors(write_recipe(tmp_path, INIT), capsys)
    assert "stages.second.init: path not found" in err, err
    assert f"the cached snapshot of {REPO}" in err and "is incomplete" in err, err
    assert "missing model.safetensors (dangling link to ../../blobs/bbb)" in err, err
    assert "not in the local cache" not in err and f"hf download {REPO}" in err, err


def test_files_the_tree_listing_names_are_named(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hf download` killed after config.json: huggingface_hub's tree listing names model.safetensors,
    and the snapshot was reported as "not in the local cache"."""
    _blob(cache, "config.json", "{}", "aaa")
    files = {"config.json": {"size": 2, "blob_id": "aaa"}, "model.safetensors": {"size": 7, "blob_id": "bbb"}}
    (cache / "trees").mkdir()
    (cache / "trees" / f"{COMMIT}.json").write_text(json.dumps({"format_version": 1, "files": files}))
    assert hub.cached_snapshot(REPO) is None
    err = _errors(write_recipe(tmp_path, INIT), capsys)
    assert "is incomplete" in err and "missing model.safetensors" in err, err
    assert "not in the local cache" not in err, err


def test_an_unfinished_weights_download_is_named(cache: Path) -> None:
    """A download killed in the middle of the weights: config.json in the snapshot, the weights blob
    still `.incomplete` (its link is only made once the blob is whole)."""
    _blob(cache, "config.json", "{}", "aaa")
    (cache / "blobs" / "bbb.incomplete").write_text("weig")
    assert hub.cached_snapshot(REPO) is None
    folder, missing = hub.incomplete_snapshot(REPO) or (None, [])
    assert folder == cache / "snapshots" / COMMIT
    assert missing and "bbb.incomplete" in missing[0] and "weights" in missing[0]
    assert "is incomplete" in hub.not_cached_hint(REPO)


def test_a_stray_unfinished_blob_beside_a_whole_snapshot_is_not_an_error(cache: Path) -> None:
    """Blobs are shared by every revision: an unfinished download of another one leaves main whole."""
    _blob(cache, "config.json", "{}", "aaa")
    _blob(cache, "model.safetensors", "weights", "bbb")
    (cache / "blobs" / "ccc.incomplete").write_text("x")
    assert hub.cached_snapshot(REPO) == cache / "snapshots" / COMMIT

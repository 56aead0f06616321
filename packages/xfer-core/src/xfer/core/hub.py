"""Hugging Face Hub model ids (`init: google/electra-small-discriminator`) read from the local cache.

A released checkpoint is usually already on disk, in the Hugging Face cache that `transformers`,
`hf download` (`huggingface-cli download` before huggingface_hub 1.0) or `snapshot_download` filled (`HF_HUB_CACHE`, by default
~/.cache/huggingface/hub). A recipe may name it by its Hub id wherever it takes a checkpoint folder:
the id resolves to the cached snapshot of the `main` revision, a plain folder from then on (its
files are what the stage's fingerprint signs). xfer never downloads a model: a run must not
depend on the network, and a checkpoint that silently changes upstream would change results; an
id that is not cached is an error that says how to fetch it, and so is a snapshot a killed download
left incomplete (`incomplete_snapshot`): taken as it was, it failed later in the model loader.

`huggingface_hub` comes with `datasets` (a dependency of the data-reading packages); without it a
Hub id is simply not a path.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_HUB_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
HUB_ID = re.compile(rf"{_HUB_NAME}/{_HUB_NAME}")
"""`owner/name` as the Hub spells repository ids (no leading ./ or ../, exactly one slash): each
part 1 to 96 ASCII letters, digits, `_`, `.` or `-`, starting with a letter or digit and ending
with neither `.` nor `-` (`huggingface_hub.utils.validate_repo_id`; the Hub takes ASCII only)."""


def looks_like_hub_id(text: str) -> bool:
    """Whether `text` could name a Hub repository; a path that cannot (`runs/exp--2`, `data/très`,
    `a/b.git`) is reported as a missing path, without advice to `hf download` it. The Hub refuses
    `--` and `..` anywhere (its cache folders are `models--owner--name`) and a `.git` ending."""
    return HUB_ID.fullmatch(text) is not None and "--" not in text and ".." not in text and not text.endswith(".git")


def cached_snapshot(repo_id: str) -> Path | None:
    """The local snapshot folder of `repo_id`'s `main` revision in the Hugging Face cache, or None
    (not an id, not cached, cached incompletely, or huggingface_hub not installed). Never touches
    the network. `not_cached_hint` says which of these it was."""
    found = _snapshot(repo_id)
    if found is None:
        return None
    folder, missing = found
    return None if missing else folder


def incomplete_snapshot(repo_id: str) -> tuple[Path, list[str]] | None:
    """(snapshot folder, what is missing from it) when `repo_id`'s cached `main` snapshot is
    incomplete, else None. A download killed half-way leaves a snapshot folder with only some of its
    files: huggingface_hub returns it as it is unless its cached tree listing (`trees/<commit>.json`,
    written by `snapshot_download` / `hf download` only, never by `hf_hub_download`, which
    `transformers` uses) shows files missing, and then reports it as not cached at all, so xfer
    said "not in the local cache" of a model that was there, or passed the folder on and the model
    loader failed on it. Missing are: the files the tree listing names that are not there, every
    dangling symlink (its blob is gone) and, when the snapshot holds no weights file while blobs/
    holds an unfinished `.incomplete` download, the weights."""
    found = _snapshot(repo_id)
    if found is None or not found[1]:
        return None
    return found


def _snapshot(repo_id: str) -> tuple[Path, list[str]] | None:
    """(the `main` snapshot folder of `repo_id`, what is missing from it), or None when there is none."""
    if not looks_like_hub_id(repo_id):
        return None
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    listed: list[str] = []
    try:
        folder = Path(snapshot_download(repo_id, cache_dir=hub_cache(), local_files_only=True))
    except Exception as error:  # LocalEntryNotFoundError, a damaged cache, a bad id: not cached
        partial = getattr(error, "snapshot_path", None)  # IncompleteSnapshotError (huggingface_hub >= 1.x)
        if not partial:
            return None
        folder = Path(partial)
        listed = _unlisted_files(repo_id, folder) or [f"files its tree listing names ({error})"]
    if not folder.is_dir():
        return None
    missing = sorted({*listed, *(f"{name} (dangling link to {target})" for name, target in _dangling_links(folder))})
    if not missing and not _has_weights(folder):
        unfinished = sorted(p.name for p in (folder.parent.parent / "blobs").glob("*.incomplete"))
        if unfinished:
            missing = [f"its weights (no weights file; unfinished download in blobs/: {', '.join(unfinished[:3])})"]
    return folder, missing


def _unlisted_files(repo_id: str, folder: Path) -> list[str]:
    """The files of the cached tree listing of `repo_id`'s `main` that `folder` lacks (a dangling
    link counts as lacking; [] if the listing cannot be read)."""
    try:
        from huggingface_hub import get_cached_repo_tree

        entries = get_cached_repo_tree(repo_id, cache_dir=hub_cache())
    except Exception:  # an older huggingface_hub, an unreadable listing: the caller says what it can
        return []
    dangling = {name for name, _ in _dangling_links(folder)}
    return [entry.path for entry in entries if not (folder / entry.path).is_file() and entry.path not in dangling]


def _dangling_links(folder: Path) -> list[tuple[str, str]]:
    """(path relative to `folder`, link target) of every symlink under `folder` whose target is gone:
    the snapshot's files are links into blobs/, and a blob deleted (or never finished) leaves one."""
    found = []
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            if path.is_symlink() and not path.exists():
                found.append((path.relative_to(folder).as_posix(), os.readlink(path)))
    return sorted(found)


_WEIGHTS = ("*.safetensors", "*.bin", "*.h5", "*.msgpack", "*.pt", "*.pth", "*.ckpt", "*.index.json")
"""What a model snapshot keeps its weights in (any framework, sharded or not)."""


def _has_weights(folder: Path) -> bool:
    """Whether `folder` holds any file a model's weights could be in."""
    return any(path.is_file() for pattern in _WEIGHTS for path in folder.rglob(pattern))


def hub_cache() -> str:
    """The Hugging Face cache folder as huggingface_hub finds it, read at call time (huggingface_hub
    reads the environment once, at its import). Like huggingface_hub, `~` and `$VAR` in
    HF_HUB_CACHE and HF_HOME are expanded: `HF_HOME=~/hf` set where no shell expands it (a .env
    file, a service unit) named a folder `~` under the working directory, so a model `hf download`
    had put in ~/hf/hub was "not in the local cache", with advice to download it again."""

    def expand(path: str) -> str:
        return os.path.expandvars(os.path.expanduser(path))

    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
    )
    return expand(explicit) if explicit else os.path.join(expand(home), "hub")


def not_cached_hint(repo_id: str) -> str:
    """What to say when `repo_id` names no local path and `cached_snapshot` found none: that its
    snapshot is incomplete, naming what is missing (dangling links included), or that it is not cached."""
    incomplete = incomplete_snapshot(repo_id)
    if incomplete is not None:
        folder, missing = incomplete
        shown = ", ".join(missing[:5]) + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else "")
        return (
            f"; as a Hugging Face Hub id: the cached snapshot of {repo_id} ({folder}) is incomplete "
            f"(an interrupted or partly deleted download): missing {shown}; xfer never downloads models, "
            f"complete it with `hf download {repo_id}`"
        )
    return (
        f"; as a Hugging Face Hub id it is not in the local cache ({hub_cache()}): xfer never downloads models, "
        f"fetch it first with `hf download {repo_id}` (or give the folder's path)"
    )

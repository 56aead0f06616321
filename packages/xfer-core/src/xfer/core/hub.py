"""Hugging Face Hub model ids (`init: google/electra-small-discriminator`) read from the local cache.

A released checkpoint is usually already on disk, in the Hugging Face cache that `transformers`,
`hf download` (`huggingface-cli download` before huggingface_hub 1.0) or `snapshot_download` filled (`HF_HUB_CACHE`, by default
~/.cache/huggingface/hub). A recipe may name it by its Hub id wherever it takes a checkpoint folder:
the id resolves to the cached snapshot of the `main` revision, a plain folder from then on (its
files are what the stage's fingerprint signs). xfer never downloads a model: a run must not
depend on the network, and a checkpoint that silently changes upstream would change results; an
id that is not cached is an error that says how to fetch it.

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
    (not an id, not cached, or huggingface_hub not installed). Never touches the network."""
    if not looks_like_hub_id(repo_id):
        return None
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        folder = Path(snapshot_download(repo_id, cache_dir=hub_cache(), local_files_only=True))
    except Exception:  # LocalEntryNotFoundError, a damaged cache, a bad id: not cached
        return None
    return folder if folder.is_dir() else None


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
    """What to say when `repo_id` names no local path and is not cached."""
    return (
        f"; as a Hugging Face Hub id it is not in the local cache ({hub_cache()}): xfer never downloads models, "
        f"fetch it first with `hf download {repo_id}` (or give the folder's path)"
    )

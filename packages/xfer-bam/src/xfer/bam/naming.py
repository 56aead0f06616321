"""Folder and module names derived from task names (torch-free: `xfer compare` uses it too)."""

from __future__ import annotations

import re


def module_name(task: str) -> str:
    """A module-name-safe form of a task name (`glue/rte` -> `glue-rte`); no dots (state-dict separators)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", task)

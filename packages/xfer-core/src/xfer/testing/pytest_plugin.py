"""pytest plugin of xfer.testing (registered through the `pytest11` entry point)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from xfer.core.plugins import PluginHost
from xfer.testing.helpers import make_host, run_recipe_file, write_recipe

if TYPE_CHECKING:
    from xfer.core.runs.runner import RunResult


@pytest.fixture
def xfer_host() -> Callable[..., PluginHost]:
    """Factory: `xfer_host(["my.plugin"], autoload=False)` -> a host with only those plugins."""
    return make_host


@pytest.fixture
def xfer_run(tmp_path: Path) -> Callable[..., RunResult]:
    """Run a recipe given as YAML text in a temp dir: `xfer_run(text, host, overrides=[...])`.

    The run directory is `tmp_path / "run"` unless `run_dir` is given. As `xfer run`, it reads every
    stage's data first (`run_recipe_file`; `preflight=False` skips that)."""

    def run(
        text: str, host: PluginHost, overrides: Iterable[str] = (), run_dir: Path | None = None, **kwargs: object
    ) -> RunResult:
        path = write_recipe(tmp_path, textwrap.dedent(text).strip() + "\n")
        return run_recipe_file(path, run_dir or tmp_path / "run", host, list(overrides), **kwargs)

    return run

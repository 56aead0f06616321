"""Fixtures shared by the core tests."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest


@pytest.fixture
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A fresh importable package (unique per test), as a third-party plugin would ship."""
    name = f"plug_{uuid.uuid4().hex[:12]}"
    root = tmp_path / "site"
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(root))
    return name, root / name


@pytest.fixture
def lines_host():
    """A host with the test plugin and the `lines/cls` task (tests/core/lines_task.py), set as the default."""
    from xfer.core.plugins import set_default_host
    from xfer.testing import make_host

    from .lines_task import LinesPlugin, LinesTask

    host = make_host(["xfer.testing.plugin"])
    host.add_object(LinesPlugin, "lines")
    set_default_host(host)
    LinesTask.reads = []
    yield host
    set_default_host(None)

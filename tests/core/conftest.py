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

"""Shared fixtures: where the real datasets live (tests skip with a reason when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    return Path(os.environ.get("XFER_DATA", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture
def shared_data() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"real datasets not found at {path} (set XFER_DATA)")
    return path

"""Fixtures shared by the ELECTRA tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module")
def one_thread() -> object:
    """Tiny models gain nothing from threads, and spinning threads on a loaded machine cost seconds.
    Modules that want it say `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

"""Fixtures of the BAM tests: one module-scoped run of the tiny recipe that several tests read.

Speed: the repository's conftest.py runs every test on one torch thread without report plots.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.testing import make_host, run_recipe_file

from .bam_recipes import STUDENTS, prepare, recipe


@pytest.fixture(scope="module")
def bam_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """teachers (2 seeds) -> Single->Multi student (annealed) and Multi, 2 seeds each."""
    root = tmp_path_factory.mktemp("bam")
    run_recipe_file(prepare(root, recipe(STUDENTS)), root / "run", make_host(autoload=True))
    return root / "run"

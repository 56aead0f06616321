"""Fixtures of the BAM tests: one module-scoped run of the tiny recipe that several tests read.

Speed (tests/bam must stay <= 45 s on a shared 2-core machine): tiny models train several times
faster on one torch thread than on threads that fight other processes for the cores, and the
stage reports' matplotlib training curves (core's `report._plot`, tested in tests/core) cost
about a second per stage, so the in-process runs here skip drawing them (report.md is still written).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from xfer.testing import make_host, run_recipe_file

from .bam_recipes import STUDENTS, prepare, recipe

SUBPROCESS_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
    "XFER_PLUGIN_MODULES": ",".join(
        [*filter(None, os.environ.get("XFER_PLUGIN_MODULES", "").split(",")), "bam_no_plots"]
    ),
}
"""Environment of the subprocess runs (run_cli, torchrun): one torch thread per process, no report plots."""


@pytest.fixture(scope="module", autouse=True)
def _fast_tiny_runs() -> Iterator[None]:
    from xfer.core import report

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report, "_plot", lambda *args, **kwargs: None)
        yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def bam_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """teachers (2 seeds) -> Single->Multi student (annealed) and Multi, 2 seeds each."""
    root = tmp_path_factory.mktemp("bam")
    run_recipe_file(prepare(root, recipe(STUDENTS)), root / "run", make_host(autoload=True))
    return root / "run"

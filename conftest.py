"""Defaults of every test session of the monorepo (tests/ and each plugin's tests).

Set before torch is imported (the xfer.testing pytest plugin never imports it), and inherited by
the subprocesses the tests start (SIGKILL-and-resume, torchrun):
- one OpenMP thread per process: the tests' models are tiny, and a second thread only spins (on a
  shared 2-core machine it costs several times the CPU time of a run);
- no matplotlib training curves in stage reports (`XFER_REPORT_PLOTS=0`, about a second per
  stage); tests/core/test_runner.py turns them back on where it checks them;
- Hugging Face libraries offline (`HF_HUB_OFFLINE`, `HF_DATASETS_OFFLINE`): tests must not need the
  network, and a test that reached for it would otherwise spend ~30 s in retries before failing;
- a datasets cache that cannot be created (`HF_DATASETS_CACHE` under /dev/null, always): xfer keeps
  its Arrow files in the run directory, and a code path that falls back to the user's cache (as
  `IterableDataset.from_generator` does) fails the tests instead of writing to ~/.cache.
"""

import os

for _name, _value in (
    ("OMP_NUM_THREADS", "1"),
    ("MKL_NUM_THREADS", "1"),
    ("XFER_REPORT_PLOTS", "0"),
    ("HF_HUB_OFFLINE", "1"),
    ("HF_DATASETS_OFFLINE", "1"),
):
    os.environ.setdefault(_name, _value)
os.environ["HF_DATASETS_CACHE"] = "/dev/null/xfer-tests-never-use-the-users-datasets-cache"

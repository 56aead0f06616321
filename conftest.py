"""Defaults of every test session of the monorepo (tests/ and each plugin's tests).

Set before torch is imported (the xfer.testing pytest plugin never imports it), and inherited by
the subprocesses the tests start (SIGKILL-and-resume, torchrun):
- one OpenMP thread per process: the tests' models are tiny, and a second thread only spins (on a
  shared 2-core machine it costs several times the CPU time of a run);
- no matplotlib training curves in stage reports (`XFER_REPORT_PLOTS=0`, about a second per
  stage); tests/core/test_runner.py turns them back on where it checks them.
"""

import os

for _name, _value in (("OMP_NUM_THREADS", "1"), ("MKL_NUM_THREADS", "1"), ("XFER_REPORT_PLOTS", "0")):
    os.environ.setdefault(_name, _value)

"""Test plugin (loaded in `torchrun` subprocesses by test_distributed_hostile5.py through
XFER_PLUGIN_MODULES): with HOSTILE5_TERM_RUN set to a run directory, the rank HOSTILE5_TERM_RANK
(default 1) sends SIGTERM to itself alone once the run's first checkpoint is complete, as a
scheduler preempting one process, or a user's `kill PID`, would. It adds no component."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path


def _stop_after_first_checkpoint(run_dir: Path) -> None:
    deadline = time.monotonic() + 50
    while not list(run_dir.glob("*/checkpoints/step-*/manifest.json")) and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(os.getpid(), signal.SIGTERM)


if os.environ.get("HOSTILE5_TERM_RUN") and os.environ.get("RANK") == os.environ.get("HOSTILE5_TERM_RANK", "1"):
    threading.Thread(
        target=_stop_after_first_checkpoint, args=(Path(os.environ["HOSTILE5_TERM_RUN"]),), daemon=True
    ).start()

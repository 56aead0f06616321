"""The run directory lock: exclusive, names its owner, released by the kernel when the owner dies."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from xfer.core.errors import RunDirError
from xfer.core.runs import runlock
from xfer.core.runs.runlock import RunLock

HOLDER = """
import sys, time
from xfer.core.runs.runlock import RunLock
RunLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(60)
"""


def test_lock_is_exclusive_and_names_its_owner(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert runlock.holder(run) is None, "never locked"
    with RunLock(run):
        info = json.loads((run / ".lock").read_text())
        assert info["pid"] == os.getpid() and info["host"] and info["started"]
        assert runlock.holder(run) == info
        with pytest.raises(RunDirError) as refused:
            RunLock(run).acquire(attempts=2, wait=0.01)
        assert str(refused.value).startswith(f"run directory {run} is in use by pid {os.getpid()} on {info['host']}")
        assert f"(started {info['started']})" in str(refused.value)
    assert runlock.holder(run) is None
    with RunLock(run):  # free again, and the file is reused, not replaced
        assert runlock.holder(run) is not None


def test_a_run_starting_during_a_status_probe_waits_for_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    RunLock(run).acquire().release()
    probe = os.open(run / ".lock", os.O_RDONLY)
    fcntl.flock(probe, fcntl.LOCK_SH)  # what `xfer status` holds for an instant
    threading.Timer(0.15, os.close, [probe]).start()  # closing the file drops its lock
    lock = RunLock(run).acquire(attempts=20, wait=0.05)
    try:
        assert runlock.holder(run)["pid"] == os.getpid()
    finally:
        lock.release()


def test_sigkilled_owner_releases_the_lock(tmp_path: Path) -> None:
    run = tmp_path / "run"
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        assert runlock.holder(run) == json.loads((run / ".lock").read_text())
        assert runlock.holder(run)["pid"] == child.pid
        with pytest.raises(RunDirError, match=f"in use by pid {child.pid}"):
            RunLock(run).acquire(attempts=1)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert runlock.holder(run) is None, "the kernel drops a flock when its owner dies"
    with RunLock(run):
        pass


def test_a_run_dir_that_is_a_file_or_lies_under_one_is_refused_clearly(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "results.txt"
    not_a_dir.write_text("kept\n", encoding="utf-8")
    with pytest.raises(RunDirError, match=r"results\.txt is a file; pass a directory"):
        RunLock(not_a_dir).acquire()
    with pytest.raises(RunDirError, match=r"results\.txt/run: cannot be created or written: Not a directory"):
        RunLock(not_a_dir / "run").acquire()
    assert not_a_dir.read_text(encoding="utf-8") == "kept\n"


def test_a_lock_file_that_is_a_symlink_is_refused_and_its_target_left_alone(tmp_path: Path) -> None:
    """The lock was opened through a symbolic link at `run/.lock` and truncated and overwritten
    whatever file the link named with its pid record."""
    precious = tmp_path / "notes.txt"
    precious.write_text("precious\n", encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    (run / runlock.LOCK_FILE).symlink_to(precious)
    with pytest.raises(RunDirError, match=r"\.lock is a symbolic link; the run lock must be a plain file"):
        RunLock(run).acquire()
    assert precious.read_text(encoding="utf-8") == "precious\n"

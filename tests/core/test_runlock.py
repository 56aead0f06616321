"""The run directory lock: exclusive, names its owner, released by the kernel when the owner dies."""

from __future__ import annotations

import contextlib
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


FORKING_HOLDER = """
import os, sys, time
from xfer.core.runs.runlock import RunLock
lock = RunLock(sys.argv[1]).acquire()
ready, say_ready = os.pipe()
worker = os.fork()
if worker == 0:  # an idle worker, as a datasets.map or DataLoader worker would be
    os.write(say_ready, b"x")  # its at-fork hooks have run: the lock's copy is closed (else the test
    time.sleep(60)  # could kill the owner first under load and see the child's copy, a flaky failure)
    os._exit(0)
os.read(ready, 1)
print(worker, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_worker_does_not_keep_the_lock_after_its_owner_is_killed(tmp_path: Path) -> None:
    """A forked child inherited the lock's open file: after a SIGKILL of the owner alone the idle
    worker held the run directory "in use by pid N" (a dead pid) for as long as it lived."""
    run = tmp_path / "run"
    owner = subprocess.Popen([sys.executable, "-c", FORKING_HOLDER, str(run)], stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        assert owner.stdout is not None
        worker = int(owner.stdout.readline())
        assert runlock.holder(run)["pid"] == owner.pid, "the owner still holds it while the worker lives"
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
        os.kill(worker, 0)  # the worker is still alive ...
        assert runlock.holder(run) is None, "... and holds no lock"
        with RunLock(run):
            pass
    finally:
        if owner.poll() is None:
            owner.kill()
        if worker is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)

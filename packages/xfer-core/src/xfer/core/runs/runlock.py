"""One `xfer run` per run directory, and a way to tell a running stage from a dead one.

`run_dir/.lock` is held with `flock` on an open file for the whole run. The kernel drops the
lock when the owner exits for any reason, SIGKILL included, so a lock that nobody holds means
its owner is gone, whatever `stage.json` still says (`xfer status` then shows `interrupted`).
The file's content (pid, host, start time) is only for messages: the lock itself is the truth.

The file is never removed or replaced: a lock lives on an inode, and replacing the file would
let two processes each hold a lock on a different inode of the "same" file.

A forked child (a `datasets.map` or DataLoader worker) would inherit the open file and with it the
lock: after a SIGKILL of the run's process alone, the idle worker kept the directory "in use by pid
N", a dead pid, until someone found it. Children close their copy when forked (`_close_in_child`),
which leaves the parent's lock alone: an flock lasts while any descriptor of it is open.

On a filesystem that keeps no file locks (Lustre without `flock`, NFS without its lock daemon)
`xfer run` is refused with a message naming the lock file (`LocksUnsupported`), while `xfer status`
and `--fork` from there read the directory as having no owner: no run can hold it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xfer.core.errors import RunDirError

LOCK_FILE = ".lock"


def _owner_text(path: Path) -> str:
    """'pid N on HOST (started ...)' from the lock file, as far as it can be read."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {info['pid']} on {info['host']} (started {info['started']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


_NO_LOCKS = frozenset({errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL})
"""flock's errors on a filesystem that keeps no file locks: NFS without a lock daemon (ENOLCK), Lustre
mounted without `flock` (ENOSYS), some FUSE and network filesystems (EOPNOTSUPP, EINVAL)."""


class LocksUnsupported(RunDirError):
    """The run directory's filesystem keeps no file locks, so no run can own it (see `_flock`)."""


def _flock(fd: int, mode: int, attempts: int, wait: float, path: Path) -> bool:
    """Take `mode` (LOCK_EX or LOCK_SH) on `fd` without blocking, retrying a few times: whether it
    was taken. The retries cover `xfer status`, which holds a shared lock for an instant to probe.

    A filesystem without file locks raises `LocksUnsupported` naming the lock file: its OSError
    (ENOSYS, ENOLCK...) was no BlockingIOError and ended `xfer run` and `xfer status` in a traceback."""
    for attempt in range(attempts):
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if attempt < attempts - 1:
                time.sleep(wait)
        except OSError as exc:
            if exc.errno not in _NO_LOCKS:
                raise
            raise LocksUnsupported(
                f"{path}: its filesystem does not support file locks ({exc.strerror or exc}), so xfer cannot keep "
                "a second `xfer run` out of the run directory; give a --run-dir on a local disk (or mount the "
                "filesystem with locking enabled, e.g. Lustre's `flock` option, NFS with its lock daemon)"
            ) from None
    return False


_HELD: weakref.WeakSet[RunLock] = weakref.WeakSet()
"""The locks this process holds, for `_close_in_child`."""


def _close_in_child() -> None:
    """`os.register_at_fork` hook: a forked child closes its copies of the held run locks (not
    `LOCK_UN`, which would drop the parent's lock too), so only the run's own process holds them.
    `subprocess` children get no copy (`close_fds`)."""
    for lock in list(_HELD):
        if lock._fd is not None:
            with contextlib.suppress(OSError):
                os.close(lock._fd)
            lock._fd = None
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


class RunLock:
    """The exclusive lock of one run directory; `acquire` refuses clearly when it is taken."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, attempts: int = 5, wait: float = 0.1) -> RunLock:
        """Take the lock or raise RunDirError naming the owner.

        A few short retries cover `xfer status`, which takes a shared lock for an instant to probe.
        """
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise RunDirError(f"run directory {self.run_dir} is a file; pass a directory (--run-dir)")
        if self.path.is_symlink():
            # opened through the link, the lock would truncate and overwrite whatever file it names
            raise RunDirError(
                f"{self.path} is a symbolic link; the run lock must be a plain file there: remove the link"
            )
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError as exc:
            raise RunDirError(
                f"run directory {self.run_dir}: cannot be created or written: {exc.strerror or exc}"
            ) from None
        try:
            taken = _flock(fd, fcntl.LOCK_EX, attempts, wait, self.path)
        except Exception:  # LocksUnsupported, or another OSError: the descriptor is not leaked either way
            os.close(fd)
            raise
        if not taken:
            os.close(fd)
            raise RunDirError(
                f"run directory {self.run_dir} is in use by {_owner_text(self.path)}; "
                "wait for it to finish or stop it first"
            )
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self._fd = fd
        _HELD.add(self)
        return self

    def release(self) -> None:
        _HELD.discard(self)
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextlib.contextmanager
def no_writer(run_dir: Path, purpose: str, attempts: int = 5, wait: float = 0.1) -> Iterator[None]:
    """Hold a shared lock on `run_dir` while reading it whole (`purpose`, e.g. "fork it"): refused
    when a run is writing it, and no run can start there meanwhile (theirs is exclusive). A copy
    taken mid-run could pair a stage.json with checkpoints of another moment."""
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        yield  # never run by xfer: no writer to wait for
        return
    try:
        try:
            taken = _flock(fd, fcntl.LOCK_SH, attempts, wait, path)
        except LocksUnsupported:
            taken = True  # no lock can be held there, so no `xfer run` writes it (`RunLock.acquire` refuses)
        if not taken:
            raise RunDirError(
                f"run directory {run_dir} is in use by {_owner_text(path)}; {purpose} once that run has "
                "finished or been stopped (a copy taken now could hold half-written stages)"
            )
        yield
    finally:
        os.close(fd)  # drops the lock


def check_free(run_dir: Path, remedy: str = "wait for it to finish or stop it first") -> None:
    """Raise RunDirError, as `RunLock.acquire` would, when another process holds `run_dir`'s lock:
    a look before work that comes ahead of taking the lock (`xfer run`'s data check), which then
    went on for minutes only to be refused."""
    if holder(run_dir) is not None:
        raise RunDirError(f"run directory {run_dir} is in use by {_owner_text(Path(run_dir) / LOCK_FILE)}; {remedy}")


def holder(run_dir: Path) -> dict[str, Any] | None:
    """Who holds the run directory's lock ({"pid", "host", "started"}, possibly empty), or None if nobody.

    Probes with a shared lock taken and dropped at once, so it never blocks a live owner.
    """
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None  # never locked
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                info = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                info = {}
            return info if isinstance(info, dict) else {}
        except OSError as exc:
            if exc.errno not in _NO_LOCKS:
                raise
            return None  # no lock can be held there, so no `xfer run` owns it (`RunLock.acquire` refuses)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)

"""The one way xfer writes a small file that must never be seen half-written.

Every small state file of a run (``stage.json``, ``environment.json``, the checkpoint
pointers, trial records, reports, vocab files ...) goes through :func:`atomic_write_bytes`:
the data goes to a temporary file in the same directory, the file is fsynced, renamed over
the target (atomic on POSIX), and the directory is fsynced so the rename itself survives a
power cut. A reader therefore sees either the old content or the new, never a mix, and after
the call returns the new content is durable. One helper means one durability guarantee: there
used to be five writers with five different ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def fsync_file(path: Path) -> None:
    """Flush an already-written file's data to disk (used for files written by other libraries)."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def fsync_dir(path: Path) -> None:
    """Make renames/creations inside `path` durable; a no-op where directories cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # e.g. Windows; nothing more can be done there
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on a directory
        pass
    finally:
        os.close(fd)


_STANDARD_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def process_umask() -> int:
    """This process's umask, read without changing it where Linux shows it (/proc/self/status,
    since 4.7): setting it to read it back would race with other threads creating files."""
    with (
        contextlib.suppress(OSError, ValueError, IndexError),
        open("/proc/self/status", encoding="ascii", errors="replace") as status,
    ):
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def as_created(path: Path) -> None:
    """Give `path` the mode a plain `open()` or `mkdir()` would have given it under the umask.

    What writes through a temporary file of its own creates it private, and the rename keeps that:
    safetensors (0.8) writes every `.safetensors` file 0600 and `tempfile.mkdtemp` makes 0700
    folders. So a run's model weights, checkpoints and shared BAM cache entries were readable by
    their owner alone, while the config and tokenizer beside them followed the umask: a colleague,
    a container user or a serving process got "permission denied" (or, through `transformers`,
    "no file named model.safetensors") on a model that looked complete."""
    os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~process_umask())


def _open_descriptor(path: Path) -> int | None:
    """N when `path` names this process's open descriptor N (`/dev/stdout`, `/dev/fd/N`,
    `/proc/self/fd/N`, or a link to one of them), else None. Followed link by link: resolving
    the whole chain would give the file behind the descriptor, or a `pipe:[...]` name."""
    text = str(path)
    for _ in range(16):  # a link chain, never a loop
        if text in _STANDARD_STREAMS:
            return _STANDARD_STREAMS[text]
        match = re.fullmatch(r"/(?:dev|proc/self|proc/(\d+))/fd/(\d+)", os.path.normpath(text))
        if match and (match.group(1) is None or int(match.group(1)) == os.getpid()):
            return int(match.group(2))
        try:
            target = os.readlink(text)
        except OSError:
            return None
        text = os.path.join(os.path.dirname(text), target)
    return None


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def _temp_name(path: Path) -> Path:
    """A per-process hidden sibling of `path`: same filesystem (so rename is atomic), no clash between ranks."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path to write `path` through, for writers that want a file name.

    Whatever the body writes to the yielded path is fsynced and renamed onto `path` when the
    block ends without an exception; on an exception the temporary file is removed and `path`
    is untouched.

    A rename replaces whatever is at `path`, so three kinds of target are treated apart (a user's
    `--out /dev/stdout` or `--out link.jsonl` must not turn a device or a link into a file):
    one of this process's open descriptors (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`) gets
    the bytes written to the descriptor itself, so `>> file` appends and `( ... ) > file` keeps
    the shell's other output (reopening or replacing the file it names would lose both); a device,
    FIFO or socket cannot be replaced atomically at all, so it is written in place (the yielded
    path is `path`); any other symbolic link is followed, and its target replaced atomically.
    """
    path = Path(path)
    descriptor = _open_descriptor(path)
    if descriptor is not None:  # /dev/stdout, /dev/fd/N: this process's open file, whatever it is
        with tempfile.TemporaryDirectory() as folder:
            tmp = Path(folder) / path.name
            yield tmp
            _write_all(descriptor, tmp.read_bytes())
        return
    if path.exists() and not path.is_file() and not path.is_dir():
        yield path  # write through: a rename would replace the device/pipe with a regular file
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    tmp = _temp_name(path)
    try:
        yield tmp
        as_created(tmp)  # a library's own temp-and-rename write (safetensors) left it 0600
        fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Replace `path` with `data`: temp file, fsync, rename, fsync the directory."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        handle.write(data)


def atomic_write_text(path: Path | str, text: str, encoding: str = "utf-8") -> None:
    """Replace `path` with `text` (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode(encoding))


def atomic_write_with(path: Path | str, write: Callable[[Path], Any]) -> None:
    """Replace `path` with whatever `write(tmp_path)` writes (for libraries that take a file name)."""
    with atomic_path(path) as tmp:
        write(tmp)


def write_json(path: Path | str, obj: Any, *, indent: int | None = 1, sort_keys: bool = False) -> None:
    """Atomically write `obj` as JSON plus a final newline; non-JSON values (paths, ...) become strings."""
    atomic_write_text(path, json.dumps(obj, indent=indent, sort_keys=sort_keys, default=str) + "\n")


def read_json(path: Path | str) -> dict[str, Any] | None:
    """The JSON object in `path`, or None when it is missing, unreadable, not JSON or not an object.

    For state files whose absence or damage means "no state yet"; files where damage must be
    reported (checkpoints, user configs) parse their JSON themselves and raise a clear error.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None

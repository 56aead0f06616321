"""The one atomic writer: old or new content only, durable (file and directory fsynced), no leftovers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xfer.core import atomic


def test_write_and_read_json(tmp_path: Path) -> None:
    atomic.write_json(tmp_path / "s.json", {"path": tmp_path, "n": 1})
    assert atomic.read_json(tmp_path / "s.json") == {"path": str(tmp_path), "n": 1}
    assert (tmp_path / "s.json").read_text().endswith("}\n")
    assert atomic.read_json(tmp_path / "missing.json") is None
    for damaged in ('{"status": "runn', "[1, 2]", "\xff"):
        (tmp_path / "bad.json").write_text(damaged, encoding="latin-1")
        assert atomic.read_json(tmp_path / "bad.json") is None, damaged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "s.json"], "no temp files left"


def test_file_and_directory_are_fsynced_before_and_after_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync-file")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic.atomic_write_text(tmp_path / "a.txt", "new")
    assert events == ["fsync-file", "rename", "fsync-dir"]
    assert (tmp_path / "a.txt").read_text() == "new"


def test_a_failed_write_leaves_the_old_content(tmp_path: Path) -> None:
    target = tmp_path / "vocab.txt"
    atomic.atomic_write_text(target, "old\n")

    def dies(tmp: Path) -> None:
        tmp.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic.atomic_write_with(target, dies)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.txt"]


def test_a_symlink_is_followed_and_its_target_replaced(tmp_path: Path) -> None:
    target = tmp_path / "target.jsonl"
    target.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    atomic.atomic_write_text(link, "new\n")
    assert link.is_symlink(), "the link stays a link"
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl", "target.jsonl"], "no temp files left"


def test_a_fifo_is_written_through_not_replaced_by_a_file(tmp_path: Path) -> None:
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    atomic.atomic_write_text(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert received == [b"through the pipe\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode), "still a FIFO, not a regular file"


def test_a_link_to_a_pipe_is_written_through_like_dev_stdout_under_a_pipe(tmp_path: Path) -> None:
    """`--out /dev/stdout` is a link to /proc/self/fd/1, a pipe under `| head`, whose target
    resolves to "pipe:[N]": resolving the link first gave a path that cannot be created."""
    read_end, write_end = os.pipe()
    if not Path(f"/proc/self/fd/{write_end}").exists():
        os.close(read_end), os.close(write_end)
        pytest.skip("no /proc/self/fd on this system")
    link = tmp_path / "stdout"
    link.symlink_to(f"/proc/self/fd/{write_end}")
    with os.fdopen(read_end, "rb") as reader:
        with os.fdopen(write_end, "wb"):  # closed after the write, so the read below sees the end
            atomic.atomic_write_text(link, "through the link\n")
        assert reader.read() == b"through the link\n"


def test_an_open_descriptor_is_written_through_so_appending_keeps_what_was_there(tmp_path: Path) -> None:
    """`xfer score --out /dev/stdout >> scores.jsonl` replaced scores.jsonl, losing its first lines
    (the link was followed to the file, which was then renamed over)."""
    if not Path("/dev/fd").is_dir():
        pytest.skip("no /dev/fd on this system")
    target = tmp_path / "scores.jsonl"
    target.write_text('{"header": 1}\n')
    descriptor = os.open(target, os.O_WRONLY | os.O_APPEND)
    try:
        atomic.atomic_write_text(f"/dev/fd/{descriptor}", '{"line": 1}\n')
    finally:
        os.close(descriptor)
    assert target.read_text() == '{"header": 1}\n{"line": 1}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.jsonl"], "no temp files left"

"""xfer.core.textfile: the one way readers turn bytes into text, with errors at file:line."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_text_readers_refuse_a_nul_byte_at_its_line_and_column(tmp_path) -> None:
    """Both ways of reading a text file (whole and streamed) name the line and column of a NUL."""
    from xfer.core.errors import DataError
    from xfer.core.textfile import read_text, stream_lines

    path = tmp_path / "t.txt"
    path.write_bytes(b"first line\nab\x00cd\n")
    for read in (read_text, lambda p: list(stream_lines(p))):
        with pytest.raises(DataError, match=r"t\.txt:2: encoding: NUL byte at column 3"):
            read(path)


def test_a_utf16_file_is_named_as_such(tmp_path) -> None:
    """A UTF-16 file (Windows tools' "Unicode" text) said only "byte 0xff at column 1"."""
    from xfer.core.errors import DataError
    from xfer.core.textfile import read_text, stream_lines

    path = tmp_path / "t.txt"
    path.write_bytes("one line\n".encode("utf-16"))
    for read in (read_text, lambda p: list(stream_lines(p))):
        with pytest.raises(DataError, match=r"t\.txt:1: encoding: .*: the file is UTF-16 .*; save it as UTF-8"):
            read(path)


def test_a_broken_symbolic_link_among_a_stages_files_is_named_not_dropped(tmp_path: Path) -> None:
    """`StageContext.resolve_files` kept regular files only: a glob matching a dangling link trained
    every stage on the other files without a word."""
    import torch

    from xfer.core.config import Files
    from xfer.core.errors import DataError
    from xfer.core.plugins import default_host
    from xfer.core.stage import StageContext

    (tmp_path / "a.txt").write_text("the cat .\n")
    (tmp_path / "b.txt").symlink_to(tmp_path / "missing.txt")
    ctx = StageContext(tmp_path, "s", "k", None, 1, tmp_path, torch.device("cpu"), default_host(), {})
    with pytest.raises(DataError, match=r"b\.txt.*broken symbolic link"):
        ctx.resolve_files(Files((str(tmp_path / "*.txt"),)))
    (tmp_path / "b.txt").unlink()
    assert ctx.resolve_files(Files((str(tmp_path / "*.txt"),))) == [tmp_path / "a.txt"]


def test_split_lines_refuses_a_bom_starting_a_line_for_every_reader(tmp_path):
    """Each line reader (CoNLL, GLUE, scoring, translation) refused a BOM starting a later line with
    a check of its own; one written from the scaffold or by a plugin author kept it glued to the
    first word. `split_lines` refuses it; a BOM inside a line is the reader's business."""
    from xfer.core.errors import DataError
    from xfer.core.textfile import BOM_INSIDE, read_text, split_lines

    path = tmp_path / "joined.txt"
    path.write_bytes("\ufeffone\n\ufefftwo\nthree\ufeff\n".encode())
    text = read_text(path)
    with pytest.raises(DataError) as caught:
        split_lines(path, text)
    assert str(caught.value) == f"{path}:2: {BOM_INSIDE}"
    assert split_lines(path, "one\nthree\ufeff\n") == ["one", "three\ufeff"]

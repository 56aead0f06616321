"""Hostile use of the `xfer` sub-commands other than `run` and `results`, fourth round:
`xfer new-plugin` with a file in the way or a write failing half-way."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from xfer.core import cli


def test_new_plugin_into_a_file_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--dir` naming a file (or a dangling symbolic link) was a bare NotADirectoryError traceback."""
    afile = tmp_path / "afile"
    afile.write_text("keep me\n")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    for target in (afile, dangling):
        assert cli.main(["new-plugin", "hostile131", "--dir", str(target)]) == 2
        err = capsys.readouterr().err
        assert f"error: {target} already exists and is not a directory" in err
        assert "Traceback" not in err
    assert afile.read_text() == "keep me\n"  # untouched
    assert not (tmp_path / "nowhere").exists()


def test_new_plugin_that_failed_half_way_can_be_run_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write failing half-way (a full disk) left a partial scaffold, so the same command run again
    after freeing space was refused ("already exists and is not empty") and the plugin had missing files."""
    target = tmp_path / "plugins" / "xfer-hostile131"
    write_text = Path.write_text
    written: list[Path] = []

    def fail_third(self: Path, *args: object, **kwargs: object) -> int:
        if len(written) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        written.append(self)
        return write_text(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", fail_third)
    assert cli.main(["new-plugin", "hostile131", "--dir", str(target)]) == 1
    err = capsys.readouterr().err
    assert f"error: {target.parent}/" in err and "No space left on device; fix that and re-run the same command" in err
    assert "checkpoint" not in err  # no stages or checkpoints outside `xfer run`: that hint misled
    assert not target.exists()  # nothing half-written under the name asked for
    assert [p.name for p in (tmp_path / "plugins").iterdir()] == []  # and no temporary folder left behind
    monkeypatch.setattr(Path, "write_text", write_text)

    assert cli.main(["new-plugin", "hostile131", "--dir", str(target)]) == 0
    assert f"created {target}" in capsys.readouterr().out
    assert (target / "pyproject.toml").is_file()
    assert (target / "src/xfer/hostile131/plugin.py").is_file()
    assert (target / "tests/test_hostile131.py").is_file()
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o777 & ~umask  # not the temporary folder's 0o700


def test_new_plugin_into_an_empty_folder_still_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An existing empty folder is filled (documented: only a non-empty one is refused)."""
    target = tmp_path / "empty"
    target.mkdir()
    target.chmod(0o750)
    assert cli.main(["new-plugin", "hostile131", "--dir", str(target)]) == 0
    assert (target / "src/xfer/hostile131/task.py").is_file()
    assert target.stat().st_mode & 0o777 == 0o750  # the folder given, not a replacement
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # no temporary folder left
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert cli.main(["new-plugin", "hostile131", "--dir", str(tmp_path / "full")]) == 2
    assert "already exists and is not empty" in capsys.readouterr().err


@pytest.mark.parametrize(
    "failure",
    [
        OSError(errno.ENOSPC, "No space left on device", "somewhere/file"),
        RuntimeError("Error while serializing: I/O error: Disk quota exceeded (os error 122)"),
    ],
)
def test_a_machine_error_outside_run_does_not_speak_of_checkpoints(
    failure: Exception, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk or a quota met by another command than `xfer run` said "(completed stages and the
    last checkpoint are kept)": there are none, and the hint sent users looking for a run."""
    from xfer.core import scaffold

    def fail(*args: object, **kwargs: object) -> Path:
        raise failure

    monkeypatch.setattr(scaffold, "scaffold_plugin", fail)
    assert cli.main(["new-plugin", "hostile131"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "fix that and re-run the same command" in err and err.count("\n") == 1
    assert "checkpoint" not in err
    assert "checkpoint are kept" in cli._kept(cli.argparse.Namespace(command="run"))  # `xfer run` keeps it


def test_vocab_min_frequency_beyond_the_trainers_range_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`xfer vocab train --min-frequency 99999999999999999999` (a typo'd count) was a bare
    OverflowError traceback from the Rust trainer (u64); the largest value it takes still works."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world the cat\nthe dog sat\n")
    too_large = str(2**64)
    with pytest.raises(SystemExit) as exited:
        cli.main(["vocab", "train", str(corpus), "--size", "100", "--min-frequency", too_large, "--out", "v"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --min-frequency: {too_large} is too large (at most {2**64 - 1})" in err
    assert "Traceback" not in err
    out = tmp_path / "v"
    assert (
        cli.main(["vocab", "train", str(corpus), "--size", "100", "--min-frequency", str(2**64 - 1), "--out", str(out)])
        == 0
    )
    assert (out / "vocab.txt").is_file()

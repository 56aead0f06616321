"""Hostile checkpoint cases (h43): a re-save at the same step must never lose the only good checkpoint,
whatever moment the process is killed at; pointers and pruning under hostile conditions."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest
from torch import nn

from xfer.core import checkpoint as ckpt
from xfer.core.errors import CheckpointError


class Killed(BaseException):
    """A SIGKILL stand-in: nothing after the point it is raised at runs."""


def _payload(step: int, **state: object) -> ckpt.CheckpointPayload:
    return ckpt.CheckpointPayload(
        step=step, modules={"model": nn.Linear(2, 2)}, tensors={}, torch_state={}, state={"step": step, **state}
    )


def _hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def _resumable(directory: Path, step: int) -> Path:
    """The checkpoint a resume takes, checked to be the complete one at `step`."""
    warnings: list[str] = []
    found = ckpt.load_latest_intact(directory, warn=warnings.append)
    assert found == directory / ckpt.step_dir_name(step), (found, warnings)
    assert warnings == []
    ckpt.verify_checkpoint(found)
    return found


def test_a_resave_at_the_same_step_replaces_it_and_leaves_nothing_behind(tmp_path: Path) -> None:
    ckpt.save_checkpoint(tmp_path, _payload(2, note="periodic"), keep=1)
    path = ckpt.save_checkpoint(tmp_path, _payload(2, note="final"), keep=1, best=True)
    assert ckpt.load_state(path)["note"] == "final"
    assert _hidden(tmp_path) == []
    assert _resumable(tmp_path, 2) == path


def test_killed_between_removing_the_old_copy_and_renaming_the_new_one_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old copy was rmtree'd before the new one was renamed in: a kill between the two left `latest`
    naming a folder that did not exist, and (keep=1) nothing to resume: the run started over from step 0."""
    ckpt.save_checkpoint(tmp_path, _payload(1), keep=1)
    ckpt.save_checkpoint(tmp_path, _payload(2, note="periodic"), keep=1)
    rename = os.rename

    def killed_on_the_new_copy(src: object, dst: object) -> None:
        if Path(src).name.startswith(".tmp-step-"):
            raise Killed
        rename(src, dst)

    monkeypatch.setattr(os, "rename", killed_on_the_new_copy)
    with pytest.raises(Killed):
        ckpt.save_checkpoint(tmp_path, _payload(2, note="final"), keep=1)
    monkeypatch.undo()
    # read-only look-ups (`xfer status`, the trainer's "last good checkpoint") still see a complete step 2
    seen = ckpt.latest_checkpoint(tmp_path)
    assert seen is not None and ckpt.load_state(seen)["step"] == 2
    ckpt.verify_checkpoint(seen)
    assert not (tmp_path / "step-0000002").exists(), "a read-only look-up must not rename (a save may be under way)"
    path = _resumable(tmp_path, 2)
    assert ckpt.load_state(path)["note"] == "periodic"  # the save that was killed never happened
    ckpt.save_checkpoint(tmp_path, _payload(3), keep=1)
    assert _hidden(tmp_path) == []


def test_killed_while_deleting_the_replaced_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill half-way through deleting the replaced copy: the old code deleted it in place, so `latest`
    named a half-deleted checkpoint, which resume moved aside as damaged and started over from step 0."""
    ckpt.save_checkpoint(tmp_path, _payload(1), keep=1)
    ckpt.save_checkpoint(tmp_path, _payload(2, note="periodic"), keep=1)
    rmtree = shutil.rmtree

    def killed_half_way(path: object, *args: object, **kwargs: object) -> None:
        path = Path(path)
        if not path.name.startswith(".tmp-"):
            (path / "model.safetensors").unlink()
            raise Killed
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", killed_half_way)
    with pytest.raises(Killed):
        ckpt.save_checkpoint(tmp_path, _payload(2, note="final"), keep=1)
    monkeypatch.undo()
    path = _resumable(tmp_path, 2)
    assert ckpt.load_state(path)["note"] == "final"
    assert _hidden(tmp_path) == []  # the half-deleted copy is cleaned up by the resume


def test_killed_after_the_new_copy_is_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after the new copy was renamed in, before the copy renamed aside is deleted: the new one counts,
    and the aside is cleaned up (an intermediate state only the crash-safe replacement has)."""
    ckpt.save_checkpoint(tmp_path, _payload(2, note="periodic"), keep=1)

    def killed(path: object, *args: object, **kwargs: object) -> None:
        raise Killed

    monkeypatch.setattr(shutil, "rmtree", killed)
    with pytest.raises(Killed):
        ckpt.save_checkpoint(tmp_path, _payload(2, note="final"), keep=1)
    monkeypatch.undo()
    assert ckpt.load_state(_resumable(tmp_path, 2))["note"] == "final"
    assert _hidden(tmp_path) == []


def _rewrite_zip_member(file: Path, suffix: str, data: bytes) -> None:
    """Replace the member of the torch zip `file` whose name ends in `suffix` (CRCs stay valid)."""
    with zipfile.ZipFile(file) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    with zipfile.ZipFile(file, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, data if name.endswith(suffix) else content)


@pytest.mark.parametrize(
    ("suffix", "data"),
    [
        ("/data.pkl", b""),  # EOFError
        ("/byteorder", b"middle"),  # ValueError: Unknown endianness type
        ("/data.pkl", b"\x80\x02X\x02\x00\x00\x00\xff\xfe."),  # UnicodeDecodeError, naming no file
    ],
)
def test_a_crafted_optimizer_file_is_a_checkpoint_error_naming_it(tmp_path: Path, suffix: str, data: bytes) -> None:
    """A complete zip whose torch records are not torch's, behind a manifest that matches it: an EOFError,
    ValueError or UnicodeDecodeError traceback out of the resume instead of an error naming the file."""
    path = ckpt.save_checkpoint(
        tmp_path,
        ckpt.CheckpointPayload(1, {"model": nn.Linear(2, 2)}, {}, {"optimizer": {"state": {}}}, {"step": 1}),
    )
    file = path / "optimizer.pt"
    _rewrite_zip_member(file, suffix, data)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"]["optimizer.pt"] = ckpt._describe(file)
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="truncated or corrupted") as info:
        ckpt.load_torch_state(path, "optimizer")
    assert str(file) in str(info.value)


@pytest.mark.parametrize("pointer", ["latest", "best"])
def test_a_pointer_that_is_a_symlink_is_replaced_not_written_through(tmp_path: Path, pointer: str) -> None:
    """`latest`/`best` linked to another run's pointer: the save wrote this run's step into the other
    run's file (it then named a step folder that run may not have); the link itself must be replaced."""
    other = tmp_path / "other-run" / "checkpoints"
    ckpt.save_checkpoint(other, _payload(1), keep=1, best=True)
    mine = tmp_path / "mine" / "checkpoints"
    mine.mkdir(parents=True)
    (mine / pointer).symlink_to(other / pointer)
    ckpt.save_checkpoint(mine, _payload(7), keep=1, best=True)
    assert (other / pointer).read_text() == "step-0000001\n"
    assert not (mine / pointer).is_symlink()
    assert ckpt.read_pointer(mine / pointer) == mine / "step-0000007"

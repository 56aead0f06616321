"""What a run writes is readable as the umask says, like any file the user creates.

safetensors (0.8) writes every `.safetensors` file 0600 through a temporary file of its own, and
`tempfile.mkdtemp` makes 0700 folders: a run's weights, checkpoints, HF exports and shared BAM cache
entries were their owner's alone, while the config and tokenizer beside them followed the umask.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from xfer.core import atomic
from xfer.core.checkpoint import CheckpointPayload, save_checkpoint


@pytest.fixture(params=[0o022, 0o002, 0o077])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _every_path(root: Path) -> list[Path]:
    return [root, *sorted(root.rglob("*"))] if root.is_dir() else [root]


def _assert_as_created(root: Path, umask: int) -> None:
    wrong = {
        str(p.relative_to(root.parent)): oct(_mode(p))
        for p in _every_path(root)
        if _mode(p) != (0o777 if p.is_dir() else 0o666) & ~umask
    }
    assert not wrong, f"modes other than the umask's ({oct(umask)}): {wrong}"


def test_the_umask_is_read_without_changing_it(umask: int) -> None:
    assert atomic.process_umask() == umask
    assert os.umask(umask) == umask  # left as it was


def test_a_file_written_by_a_library_through_atomic_write_follows_the_umask(tmp_path: Path, umask: int) -> None:
    """BAM's cache entries and the HF export's model.safetensors go through `atomic_write_with`."""
    target = tmp_path / "entry.safetensors"
    atomic.atomic_write_with(target, lambda tmp: save_file({"a": torch.ones(2)}, str(tmp)))
    _assert_as_created(target, umask)
    atomic.atomic_write_text(tmp_path / "plain.json", "{}\n")
    _assert_as_created(tmp_path / "plain.json", umask)


def test_a_model_directory_follows_the_umask(tmp_path: Path, umask: int) -> None:
    from xfer.transformer.modelio import save_model_dir

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n")
    folder = save_model_dir(tmp_path / "out" / "model", {"encoder": nn.Linear(2, 2)}, {"role": "x"}, files=[vocab])
    _assert_as_created(folder, umask)
    save_model_dir(folder, {"encoder": nn.Linear(2, 2)}, {"role": "y"})  # replacing one, too
    _assert_as_created(folder, umask)


def test_a_checkpoint_follows_the_umask(tmp_path: Path, umask: int) -> None:
    payload = CheckpointPayload(
        step=1,
        modules={"model": nn.Linear(2, 2)},
        tensors={"rng": {"torch_cpu": torch.get_rng_state()}},
        torch_state={},
        state={"step": 1},
    )
    _assert_as_created(save_checkpoint(tmp_path / "checkpoints", payload), umask)

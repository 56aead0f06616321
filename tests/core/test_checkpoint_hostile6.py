"""Hostile checkpoint cases (h194): damaged manifests must be reported as damage, never crash resume."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from xfer.core import checkpoint as ckpt
from xfer.core.errors import CheckpointError
from xfer.core.trainer import load_evaluated_weights


def _save(directory: Path, step: int) -> Path:
    payload = ckpt.CheckpointPayload(
        step=step, modules={"model": nn.Linear(2, 2)}, tensors={}, torch_state={}, state={"step": step}
    )
    return ckpt.save_checkpoint(directory, payload, keep=3)


@pytest.mark.parametrize(
    ("name", "entry"),
    [("model.safetensors", "deadbeef"), ("model.safetensors", None), ("../state.json", {"size": 1, "sha256": "x"})],
)
def test_damaged_manifest_entry_is_moved_aside_not_a_traceback(tmp_path: Path, name: str, entry: object) -> None:
    """A manifest entry that is not an object (or names a file outside the checkpoint) raised AttributeError
    out of resume; it is damage: moved aside, and the previous intact checkpoint is resumed."""
    _save(tmp_path, 1)
    newest = _save(tmp_path, 2)
    manifest = json.loads((newest / "manifest.json").read_text())
    manifest["files"][name] = entry
    (newest / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="bad entry"):
        ckpt.verify_checkpoint(newest)
    warnings: list[str] = []
    assert ckpt.load_latest_intact(tmp_path, warn=warnings.append) == tmp_path / "step-0000001"
    assert len(warnings) == 1 and "manifest.json" in warnings[0]
    assert not newest.exists()


@pytest.mark.parametrize("header", [[], {"w": {"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}}])
def test_legacy_checkpoint_with_tampered_safetensors_header_is_moved_aside(tmp_path: Path, header: object) -> None:
    """A checkpoint without a manifest is checked structurally; a safetensors header that is a JSON array,
    or whose offsets are strings, raised AttributeError/TypeError out of resume instead of being damage."""
    _save(tmp_path, 1)
    newest = _save(tmp_path, 2)
    (newest / "manifest.json").unlink()  # as written before manifests existed
    raw = json.dumps(header).encode()
    (newest / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 4)
    with pytest.raises(CheckpointError, match=r"model\.safetensors: truncated or corrupted"):
        ckpt.verify_checkpoint(newest)
    warnings: list[str] = []
    assert ckpt.load_latest_intact(tmp_path, warn=warnings.append) == tmp_path / "step-0000001"
    assert len(warnings) == 1 and "model.safetensors" in warnings[0]


def test_weights_file_not_in_manifest_is_refused(tmp_path: Path) -> None:
    """A `.safetensors` the save did not write (a stray EMA file copied in) was loaded unverified, and
    `load_evaluated_weights` applied it over the model; it is refused, and resume moves the checkpoint aside."""
    _save(tmp_path, 1)
    newest = _save(tmp_path, 2)
    save_file({"weight": torch.full((2, 2), 7.0), "bias": torch.zeros(2)}, str(newest / "ema.safetensors"))
    with pytest.raises(CheckpointError, match=r"ema.safetensors: not part of the checkpoint"):
        ckpt.load_tensors(newest, "ema")
    with pytest.raises(CheckpointError, match=r"ema.safetensors: not part of the checkpoint"):
        load_evaluated_weights(newest, nn.Linear(2, 2))
    warnings: list[str] = []
    assert ckpt.load_latest_intact(tmp_path, warn=warnings.append) == tmp_path / "step-0000001"
    assert len(warnings) == 1 and "ema.safetensors" in warnings[0]
    ckpt.load_module(tmp_path / "step-0000001", "model", nn.Linear(2, 2))  # an intact one still loads

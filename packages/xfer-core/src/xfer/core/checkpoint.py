"""Crash-safe checkpoints: safetensors weights, JSON state, weights-only optimizer state.

Layout of `checkpoints/`:

    step-000400/          one complete checkpoint
      model.safetensors   module weights (shared/tied tensors handled by safetensors)
      ema.safetensors     EMA weights, when EMA is on
      optimizer.pt        optimizer state, read back with torch.load(weights_only=True)
      rng.safetensors     torch CPU/CUDA generator states
      state.json          step, data cursor, Python/NumPy RNG, best metric, ...
    latest                text file naming the newest complete checkpoint
    best                  text file naming the best checkpoint (by the evaluator's metric)

A checkpoint is written into `.tmp-step-000400-<pid>/`, every file fsynced, then renamed into
place; only after that is `latest` replaced (atomically). A crash at any moment leaves the
previous checkpoint and pointer intact. Nothing is ever unpickled: a pickled object inside
`optimizer.pt` makes loading fail with a CheckpointError.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from xfer.core.errors import CheckpointError

_STEP_DIR = re.compile(r"^step-(\d+)$")


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_pointer(path: Path, target: str) -> None:
    """Atomically point `path` (e.g. checkpoints/latest) at `target`."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(target + "\n", encoding="utf-8")
    _fsync_file(tmp)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read_pointer(path: Path) -> Path | None:
    if not path.exists():
        return None
    target = path.parent / path.read_text(encoding="utf-8").strip()
    return target if (target / "state.json").exists() else None


def step_dir_name(step: int) -> str:
    return f"step-{step:07d}"


@dataclass
class CheckpointPayload:
    """What the trainer stores; `modules` are saved with safetensors, `torch_state` weights-only."""

    step: int
    modules: dict[str, nn.Module]
    tensors: dict[str, dict[str, torch.Tensor]]
    torch_state: dict[str, Any]
    state: dict[str, Any]


def save_checkpoint(directory: Path, payload: CheckpointPayload, keep: int = 1, best: bool = False) -> Path:
    """Write a complete checkpoint, update `latest` (and `best`), prune old ones. Returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    name = step_dir_name(payload.step)
    tmp = directory / f".tmp-{name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    for key, module in payload.modules.items():
        save_model(module, str(tmp / f"{key}.safetensors"), force_contiguous=True)
    for key, tensors in payload.tensors.items():
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp / f"{key}.safetensors"))
    for key, obj in payload.torch_state.items():
        torch.save(obj, tmp / f"{key}.pt")
    (tmp / "state.json").write_text(json.dumps(payload.state, indent=1, sort_keys=True), encoding="utf-8")
    for file in tmp.iterdir():
        _fsync_file(file)
    final = directory / name
    if final.exists():  # a leftover from a run that died after renaming but before `latest`
        shutil.rmtree(final)
    os.rename(tmp, final)
    _fsync_dir(directory)
    write_pointer(directory / "latest", name)
    if best:
        write_pointer(directory / "best", name)
    prune(directory, keep)
    return final


def prune(directory: Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints, never the one `best` or `latest` names."""
    protected = {p.name for p in (read_pointer(directory / "best"), read_pointer(directory / "latest")) if p}
    steps = sorted((p for p in directory.iterdir() if _STEP_DIR.match(p.name)), key=lambda p: p.name)
    for old in steps[: max(0, len(steps) - keep)]:
        if old.name not in protected:
            shutil.rmtree(old, ignore_errors=True)
    for stale in directory.glob(".tmp-*"):
        if not stale.name.endswith(f"-{os.getpid()}"):
            shutil.rmtree(stale, ignore_errors=True)


def latest_checkpoint(directory: Path) -> Path | None:
    """The checkpoint `latest` names; if the pointer is missing, the newest complete step dir."""
    pointed = read_pointer(directory / "latest")
    if pointed is not None:
        return pointed
    if not directory.exists():
        return None
    complete = sorted(p for p in directory.iterdir() if _STEP_DIR.match(p.name) and (p / "state.json").exists())
    return complete[-1] if complete else None


def load_state(path: Path) -> dict[str, Any]:
    try:
        return json.loads((path / "state.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path / 'state.json'}: unreadable checkpoint state: {exc}") from None


def load_module(path: Path, key: str, module: nn.Module) -> None:
    file = path / f"{key}.safetensors"
    if not file.exists():
        raise CheckpointError(f"{file}: missing from checkpoint")
    try:
        missing, unexpected = load_model(module, str(file), strict=False)
    except RuntimeError as exc:  # load_state_dict: size mismatch (raised even with strict=False)
        details = "; ".join(line.strip() for line in str(exc).splitlines()[1:4]) or str(exc)
        raise CheckpointError(f"{file}: does not match the model ({details})") from None
    if missing or unexpected:
        raise CheckpointError(
            f"{file}: does not match the model (missing: {sorted(missing)[:5]}, unexpected: {sorted(unexpected)[:5]})"
        )


def load_tensors(path: Path, key: str) -> dict[str, torch.Tensor]:
    file = path / f"{key}.safetensors"
    if not file.exists():
        raise CheckpointError(f"{file}: missing from checkpoint")
    return load_file(str(file))


def load_torch_state(path: Path, key: str, map_location: str | torch.device = "cpu") -> Any:
    """Load `key.pt` with `weights_only=True`: tensors and plain containers only, never code."""
    file = path / f"{key}.pt"
    if not file.exists():
        raise CheckpointError(f"{file}: missing from checkpoint")
    try:
        return torch.load(file, map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, AttributeError, TypeError) as exc:
        raise CheckpointError(
            f"{file}: refused to load: it is not a weights-only file (it would unpickle arbitrary objects): "
            f"{str(exc).splitlines()[0]}"
        ) from None

"""Seeding and capture/restore of every random generator a training step may touch.

Exact resume needs the Python, NumPy and torch (CPU and CUDA) generators to continue where
they were; their states are stored in checkpoints (tensors in safetensors, the rest as JSON).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def capture() -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(JSON-able states, tensor states) of all generators."""
    py_state = random.getstate()
    np_state = np.random.get_state()
    json_state = {
        "python": [py_state[0], list(py_state[1]), py_state[2]],
        "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])],
    }
    tensors = {"torch_cpu": torch.get_rng_state()}
    # Only once CUDA is in use: asking for the states initialises it, and a `--device cpu` run on a GPU
    # machine took a CUDA context (GPU memory another job may need) at its first checkpoint. Until CUDA
    # starts, its generators hold what `seed_everything` gave them, which a resume gives them again.
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, state in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"torch_cuda_{i}"] = state
    return json_state, tensors


def restore(json_state: dict[str, Any], tensors: dict[str, torch.Tensor]) -> None:
    version, internal, gauss = json_state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = json_state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(tensors["torch_cpu"])
    if torch.cuda.is_available():
        _restore_cuda(tensors)


def _restore_cuda(tensors: dict[str, torch.Tensor]) -> None:
    """Give each CUDA device of this machine its saved generator state (`torch_cuda_<index>`).

    By the index in the key, not by the keys' order: sorted as strings, `torch_cuda_10` came before
    `torch_cuda_2`, and on a machine with more than 10 GPUs the states went to the wrong devices.
    States of devices this machine does not have are left out, as all of them are on a CPU-only
    machine: a checkpoint from an 8-GPU node resumed on a 4-GPU one failed in
    `torch.cuda.set_rng_state_all` with a bare IndexError."""
    prefix = "torch_cuda_"
    count = torch.cuda.device_count()
    for key, state in tensors.items():
        index = key[len(prefix) :]
        if key.startswith(prefix) and index.isdigit() and int(index) < count:
            torch.cuda.set_rng_state(state, int(index))

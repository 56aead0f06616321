"""Distributed data parallel helpers for `torchrun` (gloo on CPU, nccl on CUDA).

Everything degrades to single-process no-ops when `WORLD_SIZE` is unset, so stages and the
trainer call these unconditionally. Rule: only rank 0 writes files; every rank computes.
"""

from __future__ import annotations

import atexit
import os
from typing import Any

import torch
import torch.distributed as dist

from xfer.core.errors import UserError


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def is_main() -> bool:
    return rank() == 0


def init_from_env() -> None:
    """Join the process group that `torchrun` describes in the environment (once)."""
    if is_distributed() or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend=backend)
    # Tear the group down before interpreter exit: left to process teardown, gloo's threads were
    # destroyed while joinable and a rank aborted ("terminate called without an active exception").
    atexit.register(_destroy_process_group)


def _destroy_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def select_device(name: str = "auto") -> torch.device:
    """`auto` -> this rank's GPU when CUDA is available, else CPU."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise UserError(f"--device {name!r}: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {name!r}: CUDA is not available on this machine (use auto or cpu)")
    return device


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's `obj`, in rank order, on every rank (for corpus-level metrics)."""
    if not is_distributed():
        return [obj]
    gathered: list[Any] = [None] * world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def broadcast_object(obj: Any) -> Any:
    """Rank 0's `obj` on every rank."""
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_reduce_mean(values: torch.Tensor) -> torch.Tensor:
    if is_distributed():
        values = values.clone()
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
        values /= world_size()
    return values


def any_rank(flag: bool, device: torch.device) -> bool:
    """True if `flag` is true on any rank (e.g. a non-finite loss seen anywhere)."""
    if not is_distributed():
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item() > 0)

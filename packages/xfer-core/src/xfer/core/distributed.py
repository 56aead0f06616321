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


_RENDEZVOUS = ("RANK", "MASTER_ADDR", "MASTER_PORT")
"""What `init_process_group`'s env:// rendezvous reads besides WORLD_SIZE (torchrun sets them all)."""


def _env_int(name: str, default: str) -> int:
    text = os.environ.get(name, default)
    try:
        return int(text)
    except ValueError:
        raise UserError(f"environment variable {name}={text!r} is not a whole number") from None


def init_from_env() -> None:
    """Join the process group that `torchrun` describes in the environment (once).

    A WORLD_SIZE above 1 without the rest of torchrun's environment (a variable left exported
    from another job, or `WORLD_SIZE=2 xfer run ...`) is refused by name: torch's own error was a
    traceback from deep in its rendezvous code, and a RANK outside the world waited for peers
    that can never come."""
    if is_distributed():
        return
    size = _env_int("WORLD_SIZE", "1")
    if size <= 1:
        return
    missing = [name for name in _RENDEZVOUS if not os.environ.get(name)]
    if missing:
        raise UserError(
            f"WORLD_SIZE={size} is set but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not: "
            f"launch the {size} processes with `torchrun --nproc_per_node={size} -m xfer.core.cli ...` "
            "(it sets them all), or unset WORLD_SIZE to run one process"
        )
    rank = _env_int("RANK", "0")
    if not 0 <= rank < size:
        raise UserError(f"RANK={rank} is outside WORLD_SIZE={size} (ranks are 0 to {size - 1})")
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


def check_same(what: str, settings: dict[str, Any]) -> None:
    """Raise UserError on every rank, naming the first setting that differs, unless every rank
    has the same `settings` (plain, comparable values).

    Why: each rank builds its stage from its own recipe and data, and nothing else compares them.
    Ranks that disagree on the step count or the data waited in mismatched collectives, and ranks
    with different learning rates trained different weights, of which rank 0's were saved."""
    if not is_distributed():
        return
    everyone = gather_objects(settings)
    reference = everyone[0]
    for other_rank, other in enumerate(everyone[1:], start=1):
        for key in sorted(set(reference) | set(other)):
            mine, theirs = reference.get(key, "<missing>"), other.get(key, "<missing>")
            if mine != theirs:
                raise UserError(
                    f"{what} differ between ranks: {key} is {_short(mine)} on rank 0 but {_short(theirs)} on "
                    f"rank {other_rank}; every process of a torchrun launch must run the same recipe on the same "
                    "data (same file contents, overrides and environment variables on every node)"
                )


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

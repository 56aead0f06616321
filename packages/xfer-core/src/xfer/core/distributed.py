"""Distributed data parallel helpers for `torchrun` (gloo on CPU, nccl on CUDA).

Everything degrades to single-process no-ops when `WORLD_SIZE` is unset, so stages and the
trainer call these unconditionally. Rule: only rank 0 writes files; every rank computes.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import os
import re
import sys
import threading
import time
from typing import Any

import torch
import torch.distributed as dist

from xfer.core.errors import UserError


class RankFailed(UserError):
    """Another rank stopped with an error, which ended this rank too (its collectives lost their peer,
    or torchrun stopped it): the error rank 0 reports and records, naming that rank and its error,
    instead of gloo's "Connection closed by peer" traceback. The exit code is that rank's."""

    def __init__(self, failed_rank: int, error: str, exit_code: int = 1) -> None:
        super().__init__(f"rank {failed_rank} failed: {error}")
        self.failed_rank, self.error, self.exit_code = failed_rank, error, exit_code
        _RELAYED[str(self)] = (failed_rank, error)


class PeerLost(UserError):
    """Another rank vanished without recording an error (SIGKILL, the out-of-memory killer, a lost
    node, or a SIGTERM sent to that rank alone: a scheduler's preemption, `kill PID`), which ended this
    rank's collectives: said without the backend's traceback.

    A rank stopped by SIGTERM records no error either (it was stopped, it did not fail), so this is
    what the other ranks see of it too: the message named only a kill or a lost node, and kept gloo's
    "This is typically caused by a remote worker crashing ... GLHF!", which sent users looking for a
    crash that never happened."""

    exit_code = 1

    def __init__(self, error: str) -> None:
        super().__init__(
            "another process of this torchrun launch stopped without an error of its own (killed, e.g. by "
            "the out-of-memory killer, or stopped by a SIGTERM sent to it alone, e.g. by a scheduler or `kill`, "
            "or its node was lost; torchrun's summary names its rank and exit code: 143 for SIGTERM), and "
            f"this one lost it: {_without_advice(error)}; re-run the same command to resume from the last "
            "checkpoint"
        )
        _RELAYED[str(self)] = None


def _without_advice(error: str) -> str:
    """The backend's lost-peer error up to the end of the sentence that says so: gloo goes on with
    "This is typically caused by a remote worker crashing. Check the logs ... GLHF! 🏖️"."""
    found = _PEER_LOST.search(error)
    end = error.find(". ", found.end()) if found else -1
    return (error if end < 0 else error[:end]).rstrip(".")


_RELAYED: dict[str, tuple[int, str] | None] = {}
"""The messages of this process's `RankFailed` (the failed rank and its error) and `PeerLost` (None):
another rank's failure, which `note_failure` must not leave as this rank's own."""


_PEER_LOST = re.compile(r"Connection (closed|reset) by peer|remote process exited|NCCL communicator was aborted")
"""How gloo and nccl word a collective whose peer process is gone (their errors are RuntimeErrors)."""


def lost_a_peer(exc: BaseException) -> bool:
    """Whether `exc` is a collective failing because another rank's process is gone."""
    return is_distributed() and isinstance(exc, RuntimeError) and _PEER_LOST.search(str(exc)) is not None


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


def _master_port() -> int:
    """MASTER_PORT as a TCP port, refused by name otherwise: `MASTER_PORT=abc` or `99999` failed inside
    torch's rendezvous at once, and was reported as peers that did not join ("Are the other processes
    running? ... set XFER_DIST_INIT_TIMEOUT=SECONDS to wait longer"), which no wait fixes."""
    port = _env_int("MASTER_PORT", "")
    if not 0 < port < 65536:
        raise UserError(
            f"environment variable MASTER_PORT={os.environ['MASTER_PORT']!r} is not a TCP port (1 to 65535)"
        )
    return port


_PORT_TAKEN = re.compile(r"EADDRINUSE|address already in use", re.IGNORECASE)
"""How torch's TCPStore says rank 0 could not listen on MASTER_PORT: another program holds it."""


INIT_TIMEOUT_VARIABLE = "XFER_DIST_INIT_TIMEOUT"
DEFAULT_INIT_TIMEOUT = 600.0
"""Seconds `init_from_env` waits for every process of the launch to join (torchrun's own rendezvous
waits 600 s by default too): long enough for ranks whose recipes' data checks take minutes apart."""


MAX_INIT_TIMEOUT = 1e9
"""The longest $XFER_DIST_INIT_TIMEOUT (about 31 years). torch counts its deadlines in nanoseconds
(64 bits): from about 9.2e9 s on they overflowed, and a wait meant to be endless (`1e10`) ended at
once with "timed out after 10000000000000ms ... set XFER_DIST_INIT_TIMEOUT=SECONDS to wait longer"
(or an OverflowError, from 1e15 s)."""


def init_timeout() -> float:
    """How long joining the process group may take, in seconds: $XFER_DIST_INIT_TIMEOUT, else 600."""
    text = os.environ.get(INIT_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_INIT_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise UserError(f"environment variable {INIT_TIMEOUT_VARIABLE}={text!r} is not a positive number of seconds")
    if seconds > MAX_INIT_TIMEOUT:
        raise UserError(
            f"environment variable {INIT_TIMEOUT_VARIABLE}={text!r} is more seconds than torch can wait: "
            f"at most {MAX_INIT_TIMEOUT:g} (about 31 years) waits as good as forever"
        )
    return seconds


def init_from_env(device: str = "auto") -> None:
    """Join the process group that `torchrun` describes in the environment (once).

    A WORLD_SIZE above 1 without the rest of torchrun's environment (a variable left exported
    from another job, or `WORLD_SIZE=2 xfer run ...`) is refused by name: torch's own error was a
    traceback from deep in its rendezvous code, and a RANK outside the world waited for peers
    that can never come. So is a MASTER_PORT that is no TCP port, and one that another program
    holds is said as such: both were reported as peers that did not join ("wait longer").

    The backend follows `device`, the run's `--device` (see `select_device`): nccl for a CUDA
    device, gloo otherwise. nccl was chosen whenever CUDA existed, so a `--device cpu` run on a
    GPU machine failed in its first collective (nccl cannot reduce CPU tensors).

    Joining waits at most $XFER_DIST_INIT_TIMEOUT seconds (default 600, `init_timeout`; up to 5 more
    for torch's own timeout to report first) for the other processes at MASTER_ADDR:MASTER_PORT, then
    raises a UserError saying what it waited for; the collectives after it keep torch's default
    timeout. Ctrl-C and SIGTERM stop the wait: it runs in a helper thread, because torch's, in C++,
    ran no Python signal handler for its 30 minutes (a torchrun environment left exported, with no
    peer, hung `xfer run` unkillably)."""
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
    _master_port()
    chosen = select_device(device)
    backend = "nccl" if chosen.type == "cuda" else "gloo"
    local_size = _env_int("LOCAL_WORLD_SIZE", "1")
    if backend == "nccl" and ":" in device and local_size > 1:
        # nccl refuses two ranks on one GPU ("Duplicate GPU detected"), in the first collective, as a traceback
        raise UserError(
            f"--device {device!r} would put all {local_size} processes of this node on one GPU: use --device cuda "
            "(or auto), which gives each process the GPU of its LOCAL_RANK"
        )
    _join(backend, rank, size, init_timeout())
    # Tear the group down before interpreter exit: left to process teardown, gloo's threads were
    # destroyed while joinable and a rank aborted ("terminate called without an active exception").
    atexit.register(_destroy_process_group)


def _join(backend: str, rank: int, size: int, timeout: float) -> None:
    """Rendezvous through env:// and make the default process group within `timeout` seconds.

    torch does it in a daemon thread, which the main thread waits for in short, interruptible joins,
    up to a deadline of its own: under torchrun the store is its agent's, always there, and gloo
    then waited for a missing peer with the collectives' timeout (30 minutes), not the store's. A
    thread left waiting at the deadline is abandoned to the process's exit."""
    outcome: list[BaseException | None] = []

    def join() -> None:
        try:
            store, _, _ = next(dist.rendezvous("env://", timeout=datetime.timedelta(seconds=timeout)))
            # as init_process_group(init_method="env://") does, but with torch's default timeout for collectives
            dist.init_process_group(backend, store=dist.PrefixStore("default_pg", store), rank=rank, world_size=size)
            outcome.append(None)
        except BaseException as exc:  # handed to the main thread
            outcome.append(exc)

    where = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    started = time.monotonic()
    # torch's own timeout first (it overshoots by a second or two): its error says more
    deadline = started + timeout + min(5.0, max(2.0, timeout))
    thread = threading.Thread(target=join, name="xfer-rendezvous", daemon=True)
    thread.start()
    noted = False
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(0.1)
        if not noted and thread.is_alive() and time.monotonic() - started > 10:
            noted = True
            print(
                f"rank {rank}: waiting for the other {size - 1} process(es) of WORLD_SIZE={size} at {where} "
                f"(up to {timeout:g} s, ${INIT_TIMEOUT_VARIABLE}; Ctrl-C stops)",
                file=sys.stderr,
                flush=True,
            )
    if outcome and outcome[0] is None:
        return
    error = outcome[0] if outcome else None
    if error is not None and _PORT_TAKEN.search(str(error)):
        raise UserError(
            f"rank {rank} could not listen on MASTER_ADDR:MASTER_PORT {where}: another program uses port "
            f"{os.environ['MASTER_PORT']}; set MASTER_PORT to a free port on every process (torchrun: "
            "--master_port=PORT, or --standalone, which picks a free one)"
        ) from None
    problem = "they did not all join" if error is None else f"{type(error).__name__}: {_first_line(error)}"
    if os.environ.get("TORCHELASTIC_RUN_ID"):  # set by torchrun
        remedy = "Another process of this torchrun launch did not join in time (still checking its data?)"
    else:
        remedy = (
            "Are the other processes running (launch them all with torchrun)? Variables left exported from "
            "another job wait like this: unset WORLD_SIZE to run one process"
        )
    raise UserError(
        f"rank {rank} could not join the {size} processes of WORLD_SIZE={size} at MASTER_ADDR:MASTER_PORT "
        f"{where} after {time.monotonic() - started:.0f} s (limit {timeout:g} s, ${INIT_TIMEOUT_VARIABLE}): "
        f"{problem}. {remedy}; set {INIT_TIMEOUT_VARIABLE}=SECONDS to wait longer"
    ) from None


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0].rstrip(".")


def _destroy_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def select_device(name: str = "auto") -> torch.device:
    """`auto` -> this rank's GPU when CUDA is available, else CPU; `cuda` -> this rank's GPU
    (LOCAL_RANK under torchrun), as `auto` picks it: the process group's nccl device is this one.

    A device this machine cannot use is refused here, by name, before anything is written: `mps`
    on Linux or `cuda:5` with two GPUs started the run and failed its first stage with torch's
    RuntimeError traceback ("PyTorch is not linked with support for mps devices")."""
    if name == "auto":
        if torch.cuda.is_available():
            return _cuda_device(name, None)
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise UserError(f"--device {name!r}: {exc}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"--device {name!r}: CUDA is not available on this machine (use auto or cpu)")
        return _cuda_device(name, device.index)
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise UserError(f"--device {name!r}: MPS is not available on this machine (use auto or cpu)")
    if device.type not in ("cpu", "mps"):
        raise UserError(f"--device {name!r}: xfer runs on auto, cpu, cuda or cuda:N (or mps where available)")
    return device


def _cuda_device(name: str, index: int | None) -> torch.device:
    """`cuda:index`, or this rank's GPU (LOCAL_RANK) for index None, if this machine has it."""
    count = torch.cuda.device_count()
    if index is None:
        index = _env_int("LOCAL_RANK", "0")
        if index < 0:  # torch's "Device index must not be negative" traceback (-1: some launchers' "no rank")
            raise UserError(
                f"--device {name!r}: this process is LOCAL_RANK={index}, but a node's processes are numbered "
                "from 0: unset LOCAL_RANK to run one process, or launch with torchrun (it sets LOCAL_RANK)"
            )
        if index >= count:
            raise UserError(
                f"--device {name!r}: this process is LOCAL_RANK={index}, but this machine has {count} CUDA "
                f"device(s): start at most {count} processes per node (torchrun --nproc_per_node={count})"
            )
    elif index >= count:
        raise UserError(f"--device {name!r}: this machine has {count} CUDA device(s) (cuda:0 to cuda:{count - 1})")
    # The chosen GPU becomes the current one: a single-process `--device cuda:1` run never set it (only
    # torchrun's ranks did), so whatever says plain `cuda` or asks torch.cuda without an index (a
    # plugin's `torch.zeros(..., device="cuda")`, `torch.cuda.is_bf16_supported()`) meant cuda:0.
    device = torch.device("cuda", index)
    torch.cuda.set_device(device)
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


_FAILED_KEY = "xfer/failed/"
"""Prefix of the launch store's keys where a rank that fails outside a stage leaves its error."""


def _failure_key(rank: int | str) -> str:
    """The launch store's key for `rank`'s error in this attempt: torchrun's store outlives a restart
    (`--max-restarts`), and a key without the attempt named the previous attempt's error as the cause
    of this one's end (a rank killed outright, torchrun's SIGTERM)."""
    return f"{_FAILED_KEY}{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{rank}"


def _launch_store() -> Any | None:
    """A client of torchrun's store (MASTER_ADDR:MASTER_PORT, its agent's, there for the whole launch),
    or None outside torchrun or when it cannot be reached within 2 s."""
    if not os.environ.get("TORCHELASTIC_RUN_ID") or not all(os.environ.get(name) for name in _RENDEZVOUS):
        return None
    try:
        return dist.TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            is_master=False,
            timeout=datetime.timedelta(seconds=2),
        )
    except Exception:  # a note for the other ranks, never a new failure
        return None


def note_failure(error: str) -> None:
    """Leave this rank's error (a failure outside a stage, e.g. its data check) where the other ranks
    of a torchrun launch can read it: it exits before, or without, joining them, torchrun then stops
    them with SIGTERM, and rank 0 said "terminated; re-run to resume", which nothing would. Before
    this process exits, so before that SIGTERM: `failed_peer` finds it. A no-op outside torchrun.

    Another rank's failure that ended this one (`RankFailed`, `PeerLost`) is not this rank's error:
    left under this rank, a third rank named it first ("rank 0 failed: rank 2 failed: ..."), or named
    rank 0 for a peer killed outright. A `RankFailed` is left under the failed rank, if it left none."""
    relayed = _RELAYED.get(error, ())  # (): this rank's own error
    if relayed is None:  # PeerLost: the lost rank left no error, and neither does this one
        return
    store = _launch_store()
    if store is None:
        return
    with contextlib.suppress(Exception):  # a note for the other ranks, never a new failure
        if relayed:
            failed_rank, cause = relayed
            if not store.check([_failure_key(failed_rank)]):
                store.set(_failure_key(failed_rank), cause)
            return
        store.set(_failure_key(os.environ["RANK"]), error)


def failed_peer() -> tuple[int, str] | None:
    """The lowest other rank of this torchrun launch that left an error with `note_failure` in this
    attempt, and that error; None if none did (or outside torchrun)."""
    store = _launch_store()
    if store is None:
        return None
    mine = os.environ.get("RANK")
    try:
        size = int(os.environ.get("WORLD_SIZE", "1"))
        for other in range(size):
            key = _failure_key(other)
            if str(other) != mine and store.check([key]):
                return other, store.get(key).decode("utf-8", "replace")
    except Exception:  # the store went away: nothing known
        return None
    return None

"""Test plugin (loaded in `torchrun` subprocesses by test_distributed_hostile2.py through
XFER_PLUGIN_MODULES): the stage `hostile2.fail`, which fails on one rank only, as a data file
that only one node has broken would (or is killed there, as by the out-of-memory killer). The other ranks wait in a barrier for
it, as they would in the next step's gradient all-reduce.

Run as a script under torchrun (`late`, below), it has rank 1 join the process group late."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from xfer.core import distributed as dist
from xfer.core.config import knob
from xfer.core.errors import DataError, UserError
from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec
from xfer.core.stage import StageContext

XFER_NAMESPACE = "hostile2"


@dataclass
class FailConfig:
    fail_rank: int = knob(1, "The rank that raises.")
    kill: bool = knob(False, "The rank SIGKILLs itself instead (as the out-of-memory killer would).")


def run_fail(ctx: StageContext) -> None:
    if dist.rank() == ctx.config.fail_rank:
        if ctx.config.kill:
            time.sleep(1.0)  # the other ranks are waiting in the barrier by then
            os.kill(os.getpid(), signal.SIGKILL)
        raise DataError("/data/rank-only.tsv", 7, "no tab between the sentence and the label", key="label")
    time.sleep(0.3)  # the failing rank has exited, or is exiting, when this one reaches the barrier
    dist.barrier()
    ctx.output_dir("out")


@hookimpl
def xfer_stages() -> list[ComponentSpec]:
    spec = "ddp_hostile2_worker"
    return [
        ComponentSpec(
            "stage",
            "hostile2.fail",
            f"{spec}:run_fail",
            "1",
            f"{spec}:FailConfig",
            "Fails on one rank.",
            outputs=("out",),
        )
    ]


def late(out: Path, delay: float) -> None:
    """Rank 1 reaches init_from_env `delay` seconds after rank 0 (as if its data check were slow);
    each rank writes what init_from_env did, and after how long, to `<out>/late-rank<r>.json`."""
    rank = int(os.environ["RANK"])
    if rank == 1:
        time.sleep(delay)
    started = time.monotonic()
    record: dict[str, object] = {"error": None}
    try:
        dist.init_from_env()
    except UserError as exc:
        record["error"] = str(exc)
    record["seconds"] = time.monotonic() - started
    (out / f"late-rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":  # torchrun --standalone --nproc_per_node=2 ddp_hostile2_worker.py OUT DELAY
    late(Path(sys.argv[1]), float(sys.argv[2]))

"""Test plugin (loaded in subprocesses): takes 3 s to hear that a stage failed, as a slow report or
notification would, so a rank that does not wait for rank 0 has exited (and torchrun has killed
rank 0) before rank 0 is done."""

import time

from xfer.core.hookspecs import hookimpl

XFER_NAMESPACE = "slowfailure"


@hookimpl
def xfer_stage_finish(status: str) -> None:
    if status == "failed":
        time.sleep(3)

"""Test plugin (loaded in subprocesses): appends the pid of every process that fires a
lifecycle hook to $XFER_TEST_PID_FILE, to prove only rank 0 reports and writes."""

import os

from xfer.core.hookspecs import hookimpl

XFER_NAMESPACE = "pidrecorder"


def _record(event: str) -> None:
    with open(os.environ["XFER_TEST_PID_FILE"], "a") as out:
        out.write(f"{os.getpid()} {os.environ.get('RANK', '-')} {event}\n")


@hookimpl
def xfer_metrics_logged(step: int, split: str) -> None:
    _record(f"metrics {split} {step}")


@hookimpl
def xfer_checkpoint_saved(step: int) -> None:
    _record(f"checkpoint {step}")

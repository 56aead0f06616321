"""Run the `xfer` CLI with an injected fault, for crash and resume tests.

    python -m xfer.testing.faults --kill-at-step 7 run recipe.yaml --run-dir D
    python -m xfer.testing.faults --crash-in-checkpoint 2 run recipe.yaml --run-dir D

`--kill-at-step N` sends SIGKILL to the process right after training step N is logged (so
set `log_every: 1`): no handler, no cleanup, exactly like an OOM kill or a pulled plug.
`--term-at-step N` sends SIGTERM instead (a scheduler's polite stop), once.
`--crash-in-checkpoint K` makes the K-th checkpoint write die half-way (model weights
written, optimizer state not) with SIGKILL.
Faults are plugins/patches installed in this process only; production code has no fault hooks.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from xfer.core.hookspecs import hookimpl


class KillAtStep:
    """Lifecycle-hook plugin that sends a signal (SIGKILL by default) to the process at a training step."""

    def __init__(self, step: int, signum: int = signal.SIGKILL):
        self.step = step
        self.signum = signum
        self.sent = False

    @hookimpl
    def xfer_metrics_logged(self, run_dir: Path, stage: str, step: int, split: str, metrics: dict[str, float]) -> None:
        if split == "train" and step >= self.step and not self.sent:
            self.sent = True
            os.kill(os.getpid(), self.signum)


def crash_in_checkpoint(nth: int) -> None:
    """Patch torch.save (used for optimizer state, after the weights) to die on the nth checkpoint."""
    import torch

    from xfer.core import checkpoint

    calls = {"n": 0}
    original = torch.save

    def dying_save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == nth:
            with open(f, "wb") as handle:  # leave a truncated file behind, like a real crash
                handle.write(b"\x80\x02partial")
            os.kill(os.getpid(), signal.SIGKILL)
        original(obj, f, *args, **kwargs)

    checkpoint.torch.save = dying_save  # type: ignore[attr-defined]


FAULT_OPTIONS = ("--kill-at-step", "--term-at-step", "--crash-in-checkpoint")


def split_fault_options(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the leading fault options, the `xfer` arguments after them).

    Only leading options are the wrapper's: `parse_known_args` over the whole command line took `-h`
    anywhere for its own (`run_cli(["run", "--help"])` printed this wrapper's usage, not xfer's) and any
    abbreviation of a fault option (`--term` of a plugin command) away from `xfer`."""
    i = 0
    while i < len(argv) and argv[i].partition("=")[0] in FAULT_OPTIONS:
        i += 1 if "=" in argv[i] else 2
    return argv[:i], argv[i:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xfer.testing.faults", add_help=False, allow_abbrev=False)
    parser.add_argument("--kill-at-step", type=int)
    parser.add_argument("--term-at-step", type=int)
    parser.add_argument("--crash-in-checkpoint", type=int)
    lead, rest = split_fault_options(sys.argv[1:] if argv is None else list(argv))
    args = parser.parse_args(lead)
    from xfer.core import cli
    from xfer.core.plugins import default_host

    host = default_host()
    if args.kill_at_step is not None:
        host.add_object(KillAtStep(args.kill_at_step), "fault-kill")
    if args.term_at_step is not None:
        host.add_object(KillAtStep(args.term_at_step, signal.SIGTERM), "fault-term")
    if args.crash_in_checkpoint is not None:
        crash_in_checkpoint(args.crash_in_checkpoint)
    return cli.main(rest)


if __name__ == "__main__":
    sys.exit(main())

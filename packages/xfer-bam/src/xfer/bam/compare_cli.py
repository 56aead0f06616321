"""`xfer compare`: argument parsing only (imported whenever the `xfer` CLI builds its parser, so no
torch, numpy or scipy here); the work is in `xfer.bam.compare`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

EPILOG = """\
SYSTEM is a stage folder with outputs/results (bam.teachers, bam.student), optionally named
NAME=FOLDER, or a run folder (every such stage in it). Example, as the thesis's Table 3.1:

  xfer compare Single=runs/bam-glue/teachers Multi=runs/bam-glue/multi \\
      S2M=runs/bam-glue/distill "S2M (lambda=0)"=runs/bam-glue/distill_l0 --baseline Single Multi

Stars mark a significant improvement over EVERY baseline (Holm-Bonferroni-corrected paired
bootstrap p < .05 *, .01 **, .001 ***)."""


def _names_a_folder(spec: str) -> bool:
    """Whether `spec` is a SYSTEM rather than a baseline NAME: an existing folder, or NAME=FOLDER with
    an existing folder after one of its '=' (as `xfer.bam.compare` splits it)."""
    return Path(spec).is_dir() or any(
        char == "=" and spec[i + 1 :] and Path(spec[i + 1 :]).is_dir() for i, char in enumerate(spec)
    )


class _Baselines(argparse.Action):
    """`--baseline NAME...` that leaves the systems after its names to SYSTEM.

    `nargs="+"` took every argument after `--baseline`: `xfer compare --baseline A A=x B=y` read
    "A A=x B=y" as three baselines and stopped with "the following arguments are required: SYSTEM".
    The trailing arguments that all name folders (`_names_a_folder`) are systems, as given; at least
    the first argument stays a baseline name."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        names = list(values)
        first_system = len(names)
        while first_system > 1 and _names_a_folder(names[first_system - 1]):
            first_system -= 1
        systems = names[first_system:]
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), *names[:first_system]])
        # not into `systems` itself: argparse sets that positional after the options, to [] when
        # nothing stood before `--baseline`; `all_systems` joins the two
        namespace.systems_after_baseline = [*getattr(namespace, "systems_after_baseline", []), *systems]


def all_systems(args: argparse.Namespace) -> list[str]:
    """The SYSTEM arguments in the order given: those before `--baseline` and those after its names."""
    return [*args.systems, *getattr(args, "systems_after_baseline", [])]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    # "*", not "+": systems may follow `--baseline NAME...` (`_Baselines`); none at all is refused in `run`
    parser.add_argument("systems", nargs="*", metavar="SYSTEM", help="[NAME=]FOLDER of a stage or a run")
    parser.add_argument(
        "--baseline",
        nargs="+",
        action=_Baselines,
        metavar="NAME",
        help="systems every other system is tested against (default: the first system; a run folder gives its stages in recipe order)",
    )
    parser.add_argument(
        "--bootstrap", type=int, default=1000, metavar="B", help="bootstrap resamples, 100 to 1,000,000 (default 1000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling, >= 0 (default 0)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for compare.md, compare.json and compare.png (default: compare/ in the run folder of the "
        "first system; ./compare when that stage is not in a run folder)",
    )
    parser.add_argument("--no-plot", action="store_true", help="do not draw compare.png")


def run(args: argparse.Namespace) -> int:
    from xfer.bam.compare import main
    from xfer.core.errors import UserError

    args.systems = all_systems(args)
    if not args.systems:
        raise UserError(
            "no SYSTEM to compare: give [NAME=]FOLDER of a stage or a run"
            + (f" (--baseline took {' '.join(args.baseline)} as names of baselines)" if args.baseline else "")
        )

    return main(args)

"""`xfer compare`: argument parsing only (imported whenever the `xfer` CLI builds its parser, so no
torch, numpy or scipy here); the work is in `xfer.bam.compare`."""

from __future__ import annotations

import argparse
from pathlib import Path

EPILOG = """\
SYSTEM is a stage folder with outputs/results (bam.teachers, bam.student), optionally named
NAME=FOLDER, or a run folder (every such stage in it). Example, as the thesis's Table 3.1:

  xfer compare Single=runs/bam-glue/teachers Multi=runs/bam-glue/multi \\
      S2M=runs/bam-glue/distill "S2M (lambda=0)"=runs/bam-glue/distill_l0 --baseline Single Multi

Stars mark a significant improvement over EVERY baseline (Holm-Bonferroni-corrected paired
bootstrap p < .05 *, .01 **, .001 ***)."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("systems", nargs="+", metavar="SYSTEM", help="[NAME=]FOLDER of a stage or a run")
    parser.add_argument(
        "--baseline",
        nargs="+",
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
        default=Path("compare"),
        help="folder for compare.md, compare.json and compare.png (default ./compare)",
    )
    parser.add_argument("--no-plot", action="store_true", help="do not draw compare.png")


def run(args: argparse.Namespace) -> int:
    from xfer.bam.compare import main

    return main(args)

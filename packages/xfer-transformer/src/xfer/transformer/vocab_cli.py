"""`xfer vocab train FILES... --size N --out DIR`: train a WordPiece vocabulary for pre-training.

The CLI host imports `configure` and `run` lazily (by path), so this module must stay cheap to
import: `tokenizers` is only imported inside `run`.
"""

from __future__ import annotations

import argparse
import glob
import sys
from collections.abc import Sequence
from pathlib import Path

from xfer.core.errors import UserError

_GLOB_CHARS = frozenset("*?[")


def configure(parser: argparse.ArgumentParser) -> None:
    """Add `vocab`'s sub-commands (currently only `train`) to the host's `vocab` parser."""
    commands = parser.add_subparsers(dest="vocab_command", required=True, metavar="COMMAND")
    train = commands.add_parser(
        "train",
        help="train a BERT-style WordPiece vocabulary on text files",
        description=(
            "Train a WordPiece vocabulary (BERT normalisation and pre-tokenisation) and write "
            "vocab.txt and tokenizer.json into --out. Special tokens get fixed ids: "
            "[PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4. The same files always give the same vocabulary."
        ),
    )
    train.add_argument(
        "files",
        nargs="+",
        metavar="FILES",
        help="UTF-8 text files or glob patterns (quote them; '**' recurses); each must match a file",
    )
    train.add_argument("--size", type=_positive_int, required=True, metavar="N", help="target vocabulary size")
    train.add_argument("--out", type=Path, required=True, metavar="DIR", help="directory to write into")
    train.add_argument(
        "--cased", action="store_true", help="keep case and accents (default: lower-case, strip accents)"
    )
    train.add_argument(
        "--min-frequency",
        type=_min_frequency,
        default=2,
        metavar="K",
        help="merge only pairs seen at least K times (default: 2)",
    )


def run(args: argparse.Namespace) -> int:
    """Execute the selected `vocab` sub-command; returns the exit code."""
    if args.vocab_command == "train":
        return _train(args)
    raise UserError(f"unknown vocab command {args.vocab_command!r}")


def expand_files(patterns: Sequence[str]) -> list[Path]:
    """Files named by paths or glob patterns, in argument order, each pattern's matches sorted.

    A path that exists is taken literally (even with `[` in its name); a pattern that matches no
    file is an error rather than silently training on less data. Duplicates are dropped so a file
    named twice does not count twice.
    """
    files: list[Path] = []
    seen: set[Path] = set()
    for pattern in patterns:
        for path in _expand_one(pattern):
            key = path.resolve()
            if key not in seen:
                seen.add(key)
                files.append(path)
    return files


def _expand_one(pattern: str) -> list[Path]:
    expanded = str(Path(pattern).expanduser())
    if Path(expanded).exists():
        if not Path(expanded).is_file():
            raise UserError(f"{pattern}: not a file")
        return [Path(expanded)]
    if not _GLOB_CHARS.intersection(expanded):
        raise UserError(f"{pattern}: no such file")
    found = sorted(Path(m) for m in glob.glob(expanded, recursive=True))
    broken = next((m for m in found if m.is_symlink() and not m.exists()), None)
    if broken is not None:  # left out as "not a file", its text was missing from the vocabulary
        raise UserError(f"{pattern}: matches {broken}, a broken symbolic link: its text would be left out")
    matches = [m for m in found if m.is_file()]
    if not matches:
        raise UserError(f"{pattern}: pattern matches no file")
    return matches


def _train(args: argparse.Namespace) -> int:
    from xfer.transformer.tokenization import WordPieceTokenizer

    files = expand_files(args.files)
    _refuse_own_outputs(files, args.out)
    _make_out_dir(args.out)  # before training, which can take long, not after
    try:
        tokenizer = WordPieceTokenizer.train(
            files, args.size, lowercase=not args.cased, min_frequency=args.min_frequency
        )
    except ValueError as error:  # settings the trainer rejects, e.g. --size too small
        raise UserError(f"vocab train: {error}") from None
    try:
        out = tokenizer.save(args.out)
    except OSError as error:
        raise UserError(f"vocab train: cannot write into --out {args.out}: {error.strerror or error}") from None
    print(f"{out}: vocab size {tokenizer.vocab_size} (vocab.txt, tokenizer.json) from {len(files)} file(s)")
    if tokenizer.vocab_size != args.size:
        print(
            f"note: asked for {args.size} tokens; the corpus gave {tokenizer.vocab_size} "
            "(alphabet larger than the target, or no pair left with enough occurrences)",
            file=sys.stderr,
        )
    return 0


def _refuse_own_outputs(files: Sequence[Path], out: Path) -> None:
    """`xfer vocab train 'corpus/*' --out corpus` run twice trained the second time on the first
    run's vocab.txt and tokenizer.json too, so the same command gave another vocabulary."""
    from xfer.transformer.tokenization.encodings import TOKENIZER_FILE, VOCAB_FILE

    outputs = {(out / name).resolve() for name in (VOCAB_FILE, TOKENIZER_FILE)}
    for path in files:
        if path.resolve() in outputs:
            raise UserError(
                f"vocab train: {path} is what --out {out} writes (a previous run's output); training on it "
                "would change the vocabulary: write the vocabulary elsewhere or leave the file out"
            )


def _make_out_dir(out: Path) -> None:
    """Create `--out`; a file in the way or a read-only parent is a one-line error."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        what = "is a file, not a directory" if out.is_file() else f"cannot be created: {error.strerror or error}"
        raise UserError(f"vocab train: --out {out} {what}") from None


_MAX_FREQUENCY = 2**64 - 1
"""The largest `--min-frequency` the trainer (Rust, u64) takes; a larger one was a bare OverflowError traceback."""


def _min_frequency(text: str) -> int:
    value = _positive_int(text)
    if value > _MAX_FREQUENCY:
        raise argparse.ArgumentTypeError(f"{value} is too large (at most {_MAX_FREQUENCY})")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value

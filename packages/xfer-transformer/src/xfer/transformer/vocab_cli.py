"""`xfer vocab train FILES... --size N --out DIR`: train a WordPiece vocabulary for pre-training.

The CLI host imports `configure` and `run` lazily (by path), so this module must stay cheap to
import: `tokenizers` is only imported inside `run`.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from xfer.core.atomic import fsync_dir
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
    train.add_argument(  # the `transformer.vocab` stage's `limit_alphabet`, which the CLI could not set
        "--limit-alphabet",
        type=_positive_int,
        default=_LIMIT_ALPHABET,
        metavar="C",
        help=f"keep at most the C most frequent characters (default: {_LIMIT_ALPHABET})",
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
    # a FIFO, device or socket among the matches was dropped as "not a file" without a word (the
    # `transformer.vocab` stage refuses it): its text was missing from the vocabulary
    special = next((m for m in found if m.exists() and not m.is_file() and not m.is_dir()), None)
    if special is not None:
        raise UserError(
            f"{pattern}: matches {special}, not a regular file (a FIFO, device or socket): its text would be "
            "left out; save the text to a file"
        )
    matches = [m for m in found if m.is_file()]
    if not matches:
        raise UserError(f"{pattern}: pattern matches no file")
    return matches


def _train(args: argparse.Namespace) -> int:
    from xfer.transformer.tokenization import WordPieceTokenizer
    from xfer.transformer.vocab_stage import check_file_names

    files = expand_files(args.files)
    check_file_names(files)  # a non-UTF-8 name was the trainer's "'utf-8' codec can't encode", naming no file
    _refuse_own_outputs(files, args.out)
    staged = _stage_out_dir(args.out)  # before training, which can take long, not after
    try:
        try:
            tokenizer = WordPieceTokenizer.train(
                files,
                args.size,
                lowercase=not args.cased,
                min_frequency=args.min_frequency,
                limit_alphabet=_limit_alphabet(args),
            )
        except ValueError as error:  # settings the trainer rejects, e.g. --size too small
            raise UserError(f"vocab train: {error}") from None
        try:
            tokenizer.save(args.out if staged is None else staged[1])
            if staged is not None:
                _publish(staged[0], staged[2])
        except OSError as error:
            raise UserError(f"vocab train: cannot write into --out {args.out}: {error.strerror or error}") from None
    finally:
        if staged is not None:
            shutil.rmtree(staged[0], ignore_errors=True)  # gone already after a successful rename
    print(f"{args.out}: vocab size {tokenizer.vocab_size} (vocab.txt, tokenizer.json) from {len(files)} file(s)")
    if tokenizer.vocab_size != args.size:
        why = (
            "the 5 special tokens and the alphabet, each character with its ## form, are always kept: "
            f"lower --limit-alphabet ({_limit_alphabet(args)}) or raise --size"
            if tokenizer.vocab_size > args.size
            else f"no further pair of pieces occurs --min-frequency={args.min_frequency} times"
        )
        print(f"note: asked for {args.size} tokens; the corpus gave {tokenizer.vocab_size} ({why})", file=sys.stderr)
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


def _stage_out_dir(out: Path) -> tuple[Path, Path, Path] | None:
    """Where to save the vocabulary so that a new `--out` appears whole or not at all.

    `--out` was created before training: a run that failed (an empty file, a `--size` the trainer
    refuses) or was stopped left an empty folder, and one killed between the two files a folder with
    `vocab.txt` alone, which `from_dir` loads as a complete tokenizer. A missing `--out` is now built
    in a hidden sibling of its topmost missing folder (`.NAME.tmp-PID`, the name every killed atomic
    write leaves) and renamed into place once both files are written: `(staging root, folder to save
    into, folder to rename it to)`. An existing `--out` (e.g. a model folder) is written into in place
    (None): each file is atomic, and `from_dir` refuses a vocab.txt that does not match tokenizer.json.
    Creating the staging folder now still reports a file in the way or a read-only parent before training.
    """
    top = out
    while not top.parent.exists() and top.parent != top:
        top = top.parent
    if out.exists() or top.is_symlink():  # a dangling link: mkdir and rename cannot replace it
        if out.is_dir():
            return None
        what = "is a file, not a directory" if out.exists() else f"cannot be created: {top} is a broken symbolic link"
        raise UserError(f"vocab train: --out {out} {what}")
    root = top.with_name(f".{top.name}.tmp-{os.getpid()}")
    target = root / out.relative_to(top)
    try:
        shutil.rmtree(root, ignore_errors=True)  # a leftover of this pid's killed run
        target.mkdir(parents=True)
    except OSError as error:
        shutil.rmtree(root, ignore_errors=True)
        what = (
            f"cannot be created: {top.parent} is a file"  # the loop stopped at a parent that exists
            if top.parent.is_file()
            else f"cannot be created: {error.strerror or error}"
        )
        raise UserError(f"vocab train: --out {out} {what}") from None
    return root, target, top


def _publish(root: Path, top: Path) -> None:
    """Rename the staging folder onto `--out`'s topmost missing folder, durably."""
    root.rename(top)  # refuses (ENOTEMPTY) a folder another process filled at `top` meanwhile
    fsync_dir(top.parent)


_LIMIT_ALPHABET = 1000
"""`--limit-alphabet`'s default, the `transformer.vocab` stage's: the same corpus and settings give one vocabulary."""


def _limit_alphabet(args: argparse.Namespace) -> int:
    """`--limit-alphabet`; a Namespace built by a caller without it (from before the option) gets the default."""
    return getattr(args, "limit_alphabet", _LIMIT_ALPHABET)


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

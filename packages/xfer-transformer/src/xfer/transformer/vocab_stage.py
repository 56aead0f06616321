"""The `transformer.vocab` stage: train a WordPiece vocabulary, the first step of any pre-training."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

from xfer.core.config import Files, knob
from xfer.core.errors import DataError, UserError
from xfer.core.stage import StageContext
from xfer.core.textfile import check_distinct
from xfer.transformer.tokenization.training import MAX_VOCAB_SIZE


@dataclass
class VocabConfig:
    files: Files = knob(
        doc="Text files (paths, globs, or stage outputs such as corpus.text), one sentence or paragraph per line.",
        takes=("text",),
    )
    size: int = knob(
        30522, "Target vocabulary size (the 5 special tokens and the alphabet included).", ge=6, le=MAX_VOCAB_SIZE
    )
    lowercase: bool = knob(True, "Lower-case and strip accents (uncased model).")
    min_frequency: int = knob(2, "Minimum count of a merge to enter the vocabulary.", ge=1)
    limit_alphabet: int = knob(1000, "Keep at most this many distinct characters (the most frequent).", ge=1)

    def preflight(self) -> list[UserError]:
        """`xfer validate --data` and `xfer run` refuse, before anything runs, what `run_vocab` refuses
        in the files the patterns match (earlier stages' outputs are only known when the stage runs)."""
        try:
            check_pattern_files(self.files)
        except UserError as problem:
            return [problem]
        return []


def check_pattern_files(files: Files) -> None:
    """Raise DataError for a file the patterns match twice (`[data/*.txt, data/a.txt]`: a.txt was
    counted twice in the statistics the vocabulary is learned from, as the pre-training and scoring
    stages refuse), for a broken symbolic link or a FIFO, device or socket among their matches
    (`resolve_files` keeps only files, so its text was left out of the vocabulary without a word;
    it now refuses them at the stage, and this says so before anything runs) or for a file name
    that is not UTF-8 (`check_file_names`)."""
    paths = [Path(p) for pattern in files.patterns for p in sorted(glob.glob(pattern, recursive=True))]
    broken = next((p for p in paths if p.is_symlink() and not p.exists()), None)
    if broken is not None:
        raise DataError(
            broken, 0, "broken symbolic link matched by files: its text would be left out of the vocabulary"
        )
    special = next((p for p in paths if p.exists() and not p.is_file() and not p.is_dir()), None)
    if special is not None:
        raise DataError(
            special,
            0,
            "not a regular file (a FIFO, device or socket) matched by files: its text would be left out of the "
            "vocabulary; save the text to a file",
        )
    paths = [p for p in paths if p.is_file()]
    check_distinct(paths, "files")
    check_file_names(paths)


def check_file_names(files: list[Path]) -> None:
    """Raise DataError for a file whose name is not valid UTF-8 (`c\\xff.txt`, written by a Latin-1
    system): Python lists it (as a lone surrogate), but the `tokenizers` trainer takes file names
    as UTF-8 strings and stopped the stage on a bare UnicodeEncodeError after every file was read."""
    for path in files:
        try:
            str(path).encode("utf-8")
        except UnicodeEncodeError:
            shown = str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise DataError(
                shown, 0, "files: the file name is not valid UTF-8 (the tokenizer trainer cannot open it); rename it"
            ) from None


def run_vocab(ctx: StageContext) -> None:
    """Write `outputs/tokenizer/{vocab.txt, tokenizer.json}`; special ids [PAD]=0 .. [MASK]=4."""
    from xfer.transformer.tokenization import WordPieceTokenizer

    config: VocabConfig = ctx.config
    check_pattern_files(config.files)  # its messages name the key and what the vocabulary would lose
    files = ctx.resolve_files(config.files)
    if not files:
        raise UserError(f"stage {ctx.name}: no text files found in {config.files}")
    check_distinct(files, "files")  # also a file of the patterns inside an earlier stage's output
    check_file_names(files)
    out = ctx.output_dir("tokenizer")
    if ctx.is_main:
        tokenizer = WordPieceTokenizer.train(
            files,
            config.size,
            lowercase=config.lowercase,
            min_frequency=config.min_frequency,
            limit_alphabet=config.limit_alphabet,
        )
        tokenizer.save(out)
        ctx.report(f"Trained a WordPiece vocabulary of {tokenizer.vocab_size} tokens on {len(files)} file(s).")
        problem = size_mismatch(config, tokenizer.vocab_size)
        if problem is not None:
            ctx.warn(problem)


def size_mismatch(config: VocabConfig, trained: int) -> str | None:
    """What to say when the trained vocabulary has not `size` tokens, or None when it has.

    The model's embedding table takes its size from the vocabulary, not from `size`, so a
    vocabulary of a third of `size` (a small corpus, or a `min_frequency` no further pair reaches)
    or above it (an alphabet larger than `size`) changed the model without a word: only the token
    count in report.md showed it, next to nothing that said it was not the one asked for.
    """
    if trained < config.size:
        why = (
            "every word of the files is already one token (more text gives more)"
            if config.min_frequency == 1
            else f"no further pair of pieces occurs min_frequency={config.min_frequency} times in the files "
            "(more text or a lower min_frequency gives more)"
        )
        return f"size: the vocabulary has {trained} tokens, fewer than size={config.size}: {why}"
    if trained > config.size:
        return (
            f"size: the vocabulary has {trained} tokens, more than size={config.size}: the 5 special tokens and "
            "the alphabet (each character with its ## form) are always kept; lower limit_alphabet "
            f"({config.limit_alphabet}) or raise size"
        )
    return None

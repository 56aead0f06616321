"""The `transformer.vocab` stage: train a WordPiece vocabulary, the first step of any pre-training."""

from __future__ import annotations

from dataclasses import dataclass

from xfer.core.config import Files, knob
from xfer.core.errors import UserError
from xfer.core.stage import StageContext
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


def run_vocab(ctx: StageContext) -> None:
    """Write `outputs/tokenizer/{vocab.txt, tokenizer.json}`; special ids [PAD]=0 .. [MASK]=4."""
    from xfer.transformer.tokenization import WordPieceTokenizer

    config: VocabConfig = ctx.config
    files = ctx.resolve_files(config.files)
    if not files:
        raise UserError(f"stage {ctx.name}: no text files found in {config.files}")
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

"""The `toy.corpus` stage: unlabeled toy-language text for vocabularies and pre-training."""

from __future__ import annotations

from dataclasses import dataclass

from xfer.core.config import FieldError, knob
from xfer.core.stage import StageContext


@dataclass
class ToyCorpusConfig:
    sentences: int = knob(20000, "Number of sentences to generate.")
    seed: int = knob(7, "Generator seed (independent of the recipe seed so the corpus stays fixed).")
    sentences_per_document: int = knob(
        8,
        "Sentences per document (blank line between documents). Pre-training packs examples "
        "within a document, so longer documents fill more of each example and pad less.",
        unsigned_at=8,  # added after runs existed: at 8 their fingerprints stay valid
    )

    def __post_init__(self) -> None:
        # An empty corpus would only fail later, in whichever stage reads it, far from the cause.
        if self.sentences < 1:
            raise FieldError("sentences", f"must be at least 1, got {self.sentences}")
        if self.sentences_per_document < 1:
            raise FieldError("sentences_per_document", f"must be at least 1, got {self.sentences_per_document}")


def run_corpus(ctx: StageContext) -> None:
    """Write `outputs/text/toy.txt`."""
    from xfer.core.toy.text import write_text

    config: ToyCorpusConfig = ctx.config
    out = ctx.output_dir("text")
    if ctx.is_main:
        files = write_text(out, config.sentences, config.seed, config.sentences_per_document)
        lines = 0
        for f in files:  # streamed: a corpus of millions of lines need not fit in memory twice
            with f.open(encoding="utf-8") as lines_of_f:
                lines += sum(1 for line in lines_of_f if line.strip())
        ctx.report(f"Wrote {lines} sentences to {', '.join(str(f) for f in files)}.")

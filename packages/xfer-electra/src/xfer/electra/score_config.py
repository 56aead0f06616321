"""Config of the `electra.score` stage (torch-free, so `xfer validate` stays fast).

score:
  kind: electra.score
  checkpoint: electric.discriminator       # a pre-training stage's output, or a model folder
  files: data/sentences.txt                # .txt (a text per line) or .jsonl ({"text": ...})
  format: auto                             # or text / jsonl, for a file whose suffix does not say
  nbest_dev: data/nbest.dev.jsonl          # optional re-ranking (schema: xfer.electra.rerank)
  nbest_test: data/nbest.test.jsonl
  metric: wer
"""

from __future__ import annotations

import glob
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from xfer.core.config import FieldError, Files, Input, knob
from xfer.electra.rerank import DEFAULT_LAMBDAS

Method = Literal["auto", "electric", "mlm", "electra-tt", "two-tower"]


@dataclass
class ScoreConfig:
    """`electra.score`: pseudo-log-likelihoods of texts, and n-best re-ranking with them."""

    checkpoint: Input = knob(
        doc="The model: an electra.pretrain stage's `discriminator` output (or its folder), or a HF "
        "ElectraForMaskedLM/ElectraForPreTraining folder. A generator's folder works too (mlm / two-tower).",
        takes=("model",),
    )
    generator: Input | None = knob(
        None,
        "The generator for electra-tt (two-tower) or mlm on an ELECTRA checkpoint; default: the `generator` "
        "folder next to the checkpoint (what electra.pretrain writes).",
        takes=("model",),
    )
    method: Method = knob(
        "auto",
        "auto: electric for Electric, electra-tt for ELECTRA with a two-tower generator, mlm for the MLM baseline "
        "and for ELECTRA with a masked-LM generator; electric (1 pass), mlm (n passes), electra-tt (1 pass of "
        "each model), two-tower (the cloze model alone).",
    )
    files: Files | None = knob(
        None,
        "Texts to score: .txt files (one text per line) and/or .jsonl files (an object with a `text` field per "
        "line); paths, globs or earlier stages' outputs (every .txt/.jsonl inside).",
        takes=("text",),
    )
    format: Literal["auto", "text", "jsonl"] = knob(
        "auto",
        "How to read `files`: auto (.jsonl/.json/.ndjson as JSON lines, anything else as text, but a text file "
        "whose first line is a JSON object is refused), text (one text per line) or jsonl.",
        unsigned_at="auto",  # what the stage did before the knob existed: old runs' fingerprints stay valid
    )
    text_field: str = knob(
        "text", "The field of a JSON-lines record that holds its text (an error when no file is read as JSON lines)."
    )
    nbest_dev: Files | None = knob(
        None,
        "n-best lists (JSONL, every list with a reference) on which λ of score + λ·PLL is chosen; several "
        "files are one dev set.",
    )
    nbest_test: Files | None = knob(None, "n-best lists re-ranked with the λ chosen on dev (references optional).")
    metric: Literal["bleu", "wer"] | None = knob(
        None, "Re-ranking metric: bleu (sacrebleu corpus BLEU, maximised) or wer (minimised). Required with nbest_dev."
    )
    lambdas: list[float] = knob(
        list(DEFAULT_LAMBDAS),
        "λ grid tried on dev (default 0, 0.05, ..., 1.0; ties go to the smallest λ; no negative values).",
    )
    batch_size: int = knob(64, "Sequences per forward pass (for mlm: masked copies, one per scored token).", ge=1)
    max_length: int | None = knob(
        None,
        "Longest input in tokens, [CLS]/[SEP] included; longer texts are scored in overlapping windows (each "
        "token once). Default: the checkpoint's recorded max_length, else its position embeddings.",
        ge=3,
    )
    empty: Literal["error", "zero"] = knob(
        "error", "An empty text is an error naming file and line (error), or scores 0 over 0 tokens (zero)."
    )
    precision: Literal["fp32", "bf16"] = knob(
        "fp32",
        "fp32 (the default; a text's PLL can move by ~1e-5 with which texts share its batch, not bit-exact) or "
        "bf16 autocast (faster on CPUs with AMX / on GPUs, far less precise).",
    )

    def implicit_inputs(self) -> dict[str, Path]:
        """The generator folder read from beside a `checkpoint` given as a path (fingerprint's hook)."""
        sibling = _sibling_generator(self.checkpoint, self.generator, self.method)
        return {"checkpoint.generator": sibling} if sibling is not None else {}

    def __post_init__(self) -> None:
        if not self.lambdas:
            raise FieldError("lambdas", "give at least one value")
        bad = [v for v in self.lambdas if not math.isfinite(v)]
        if bad:
            raise FieldError("lambdas", f"must be finite numbers, got {bad[0]!r}")
        negative = [v for v in self.lambdas if v < 0]
        if negative:  # score + λ·PLL with λ < 0 rewards the hypotheses the model finds unlikely
            raise FieldError("lambdas", f"must not be negative, got {negative[0]!r}")
        if not self.text_field.strip():
            raise FieldError("text_field", "must name a field")

    def check_recipe(self) -> None:
        if self.files is None and self.nbest_dev is None:
            raise FieldError("files", "give files to score and/or nbest_dev (n-best lists to re-rank)")
        if self.nbest_test is not None and self.nbest_dev is None:
            raise FieldError("nbest_dev", "nbest_test is re-ranked with the λ chosen on nbest_dev: give nbest_dev")
        if self.nbest_dev is not None and self.metric is None:
            raise FieldError("metric", "re-ranking needs a metric: bleu or wer")
        if self.nbest_dev is None and self.metric is not None:
            raise FieldError("metric", "metric is only used with nbest_dev")
        if self.method == "electric" and self.generator is not None:
            # load_scorer refuses it too, but only when the stage starts: after the pre-training it scores
            raise FieldError("generator", "method electric scores with the checkpoint alone: remove generator")
        if self.format == "text" and self.text_field != "text":
            raise FieldError("text_field", f"format: text reads one text per line, with no fields: {TEXT_FIELD_HINT}")
        # like `metric`, these were accepted with nothing to apply them to, and did nothing without a word
        if self.nbest_dev is None and [float(v) for v in self.lambdas] != list(DEFAULT_LAMBDAS):
            raise FieldError("lambdas", "the λ grid is only used with nbest_dev (λ is chosen on those lists)")
        if self.files is None:
            for name, default in (("format", "auto"), ("text_field", "text")):
                if getattr(self, name) != default:
                    raise FieldError(name, f"{name} only says how to read `files`, and there are none: remove it")

    def preflight(self) -> list[Any]:
        """Read every input file given as a path (not earlier stages' outputs) before anything runs.

        Blank texts and hypotheses are found here; texts that only tokenize to nothing, and special
        tokens, while scoring (they need the checkpoint's tokenizer)."""
        from xfer.core.errors import DataError, UserError
        from xfer.core.textfile import check_distinct
        from xfer.electra.rerank import check_dev_references, check_held_out, check_references, merge_nbest, read_nbest
        from xfer.electra.scoring import EMPTY_MESSAGE, blank_hypothesis, read_texts

        problems: list[UserError] = []
        paths = _paths(self.files)
        try:  # one file matched by two patterns would be scored twice (`run_score` refuses it too)
            check_distinct(paths, "files")
        except UserError as error:
            problems.append(error)
        if self.files is not None and not self.files.inputs:  # stage outputs are only known when the stage runs
            try:
                self.check_text_field(paths)
            except UserError as error:
                problems.append(error)
        for path in paths:
            try:
                lines = read_texts(path, self.format, self.text_field, recipe=True)
            except UserError as error:
                problems.append(error)
                continue
            blank = next((line for line in lines if not line.text.strip()), None)
            if blank is not None and self.empty == "error":
                problems.append(DataError(blank.path, blank.line, EMPTY_MESSAGE))
        for files, dev in ((self.nbest_dev, True), (self.nbest_test, False)):
            per_file = []
            for path in _paths(files):
                try:
                    per_file.append(read_nbest(path, need_reference=dev))
                except UserError as error:
                    problems.append(error)
                    continue
                blank = blank_hypothesis(per_file[-1])
                if blank is not None and self.empty == "error":
                    problems.append(blank)
            try:  # ids must be unique across the set's files (only those read: the others have an error already)
                lists = merge_nbest(per_file)
                # blank references leave WER (and λ by BLEU) undefined: found after scoring. Only when every
                # file of the set is here: a stage output's lists may hold the references with words
                if self.metric is not None and files is not None and not files.inputs:
                    (check_dev_references if dev else check_references)(self.metric, lists)
            except UserError as error:
                problems.append(error)
        try:
            check_held_out(_paths(self.nbest_dev), _paths(self.nbest_test))
        except UserError as error:
            problems.append(error)
        return problems

    def check_text_field(self, paths: list[Path]) -> None:
        """A `text_field` that no file would use is refused, as `xfer score --text-field` is for a text
        FILE: it would be ignored, silently. With .txt and .jsonl files mixed it applies to the JSONL ones."""
        from xfer.core.errors import UserError
        from xfer.electra.scoring import input_format

        if self.text_field == "text" or not paths:
            return
        if all(input_format(path, self.format) == "text" for path in paths):
            raise UserError(
                f"text_field: {self.text_field!r}, but every file of `files` is read as plain text (one text per "
                f"line, no fields): {TEXT_FIELD_HINT}"
            )


TEXT_FIELD_HINT = "if they are JSON lines, set format: jsonl (or name them .jsonl); if not, remove text_field"


def _sibling_generator(checkpoint: Input, generator: Input | None, method: str) -> Path | None:
    """The `generator/` folder next to a checkpoint given as a path, when `load_scorer` may read it.

    Why: a path input is signed by its own folder's files only. The generator that electra-tt and
    mlm scoring take from beside the checkpoint was read but never signed, so replacing it (a
    re-trained generator, another run's copied in) kept the stale scores "done" on the next run. A
    stage output needs nothing: its stage's fingerprint covers the sibling output. Method electric
    never reads it; every other method may (two-tower and mlm on a discriminator score with its
    generator, auto picks the method from the checkpoint), so it is signed for them."""
    if checkpoint.path is None or generator is not None or method == "electric":
        return None
    sibling = Path(checkpoint.path).parent / "generator"
    if not sibling.is_dir() or sibling == Path(checkpoint.path):
        return None
    return sibling


def _paths(files: Files | None) -> list[Path]:
    if files is None:
        return []
    return [Path(p) for pattern in files.patterns for p in sorted(glob.glob(pattern, recursive=True))]

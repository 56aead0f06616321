"""`mt/parallel`: translation from line-aligned parallel text, scored with sacrebleu BLEU.

Examples are `TranslationExample`s holding raw (untokenised) text; the model consumer
tokenises. Predictions are detokenised output strings, scored against the raw references with
sacrebleu's corpus BLEU (13a tokenisation by default), so scores compare with published
sacrebleu numbers; `info().extra["bleu_signature"]` carries sacrebleu's signature string, which
belongs next to every reported score.

Bad input is an error naming file and line, never a skip: files of different lengths, an empty
line on either side (a sentence without a translation), invalid UTF-8, a CR that does not end a
line (CR-only line endings would make a whole file one sentence), a byte-order mark past the
file's first character (concatenated files), one file read as both languages.

A test split may be blind: a test source file without its target file is read as unlabelled
sentences (`target` None, as GLUE test sets' labels), to be translated and written, not scored.
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from xfer.core.atomic import atomic_write_text
from xfer.core.errors import DataError, UserError
from xfer.core.tasks import Example, Split, Task, TaskInfo, TranslationExample, check_prediction_ids
from xfer.core.textfile import lone_surrogate, read_text, split_lines
from xfer.tasks.mt.config import ParallelConfig

SPLITS = ("train", "dev", "test")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""What ends a line for a reader of an output file (Python's universal newlines; xfer refuses a bare CR)."""
BOM_IN_LINE = (
    "byte-order mark (U+FEFF) inside the line at column {column}: concatenated files, the first without a final "
    "newline? Two sentences would be read as one; split the line and remove the mark"
)
"""The message for a BOM within a line (`.format(column=...)`); `split_lines` refuses one that starts a line."""


def output_line(hypothesis: str) -> str:
    """`hypothesis` as one line of a predictions file: a line break inside it (LF, CR or CRLF)
    becomes a space. `evaluate` scores this text too, so that its BLEU is the BLEU of the file
    (`sacrebleu ref.de -i dev.de`): sacrebleu's 13a tokenizer deletes a hyphen before a LF
    ("Hund-\\nKatze" was scored as "HundKatze", and written as "Hund- Katze")."""
    return _LINE_BREAK.sub(" ", hypothesis)


def blank(line: str) -> str | None:
    """Why `line` holds no sentence, or None: nothing but whitespace, or nothing but invisible
    format characters (zero-width space U+200B, word joiner U+2060, soft hyphen...). Such a line
    shows empty in an editor and is as empty to a reader, but `str.strip` keeps it: a reference
    of one U+200B passed as a sentence (a "word" no output has), and a source of one was
    translated, where an empty line is refused as what shifts every later pair."""
    if not line.strip():
        return "empty line"
    if all(char.isspace() or unicodedata.category(char) == "Cf" for char in line):
        invisible = next(char for char in line if not char.isspace())
        return f"empty line (only invisible characters, such as U+{ord(invisible):04X})"
    return None


def read_parallel(source: Path, target: Path) -> list[tuple[int, str, str]]:
    """(line number, source, target) for each line pair; both files must have the same number of
    lines and no empty line (`blank`: whitespace or invisible characters only) but at their ends, and be two
    files: one file read as both sides (a symlink, or language suffixes differing only in case on a
    case-insensitive file system) made every sentence its own translation, and BLEU near 100. Two
    files with the same sentences (a copy) are read, with a warning (`_warn_copy`)."""
    try:
        same = source.samefile(target)
    except OSError:  # a missing or unreadable file is reported when it is read
        same = False
    if same:
        raise DataError(target, 0, f"is the same file as {source}: every sentence would be its own translation")
    src, tgt = split_lines(source, read_text(source)), split_lines(target, read_text(target))
    for path, lines in ((source, src), (target, tgt)):
        _check_bom(path, lines)
    read = {source: len(src), target: len(tgt)}
    for lines in (src, tgt):  # blank lines that end a file are a formatting accident, not sentences
        while lines and blank(lines[-1]):
            lines.pop()
    # An empty line inside a file is the likelier cause of a length mismatch (a sentence lost or
    # an extra line break shifts every later pair): name it before comparing lengths, which would
    # point at the end of the shorter file, past the damage.
    empty = [
        (number, path, why)
        for path, lines in ((source, src), (target, tgt))
        for number, line in enumerate(lines, start=1)
        if (why := blank(line))
    ]
    if empty:
        number, path, why = min(empty, key=lambda item: item[0])
        lengths = "" if len(src) == len(tgt) else f" ({source.name} has {len(src)} lines, {target.name} {len(tgt)})"
        raise DataError(path, number, f"{why}: every sentence needs a translation{lengths}")
    if len(src) != len(tgt):
        shorter, longer = (source, target) if len(src) < len(tgt) else (target, source)
        n = min(len(src), len(tgt))
        if read[shorter] > n:  # a blank line facing a sentence of the other file
            raise DataError(shorter, n + 1, "empty line: every sentence needs a translation")
        raise DataError(
            shorter, n + 1, f"has {n} lines but {longer} has {max(len(src), len(tgt))}: files are not aligned"
        )
    if not src:
        raise DataError(source, 1, "no sentences in file")
    pairs = [(number, a.strip(), b.strip()) for number, (a, b) in enumerate(zip(src, tgt, strict=True), start=1)]
    _warn_copy(source, target, pairs)
    _warn_not_nfc(target, pairs)
    return pairs


def read_source(source: Path) -> list[tuple[int, str]]:
    """(line number, sentence) for each line of a source file without its translations (a blind
    test set), under `read_parallel`'s rules for one file: no empty line but at its end (nothing
    to translate, and every later output would be written one line off the hidden references),
    no byte-order mark past its first character, at least one sentence."""
    lines = split_lines(source, read_text(source))
    _check_bom(source, lines)
    while lines and blank(lines[-1]):
        lines.pop()
    empty = next(((number, why) for number, line in enumerate(lines, start=1) if (why := blank(line))), None)
    if empty is not None:
        number, why = empty
        raise DataError(source, number, f"{why}: no sentence to translate (every later output would be one line off)")
    if not lines:
        raise DataError(source, 1, "no sentences in file")
    return [(number, line.strip()) for number, line in enumerate(lines, start=1)]


def _check_bom(path: Path, lines: list[str]) -> None:
    """A DataError at the first line with a byte-order mark inside it. One starting a line (`cat`
    of files with BOMs) is refused by `split_lines`: it stayed glued to the sentence's first word
    (BLEU counted `\ufeffEine` as a word no hypothesis has). One inside a line is what `cat` leaves
    when the file before lacked its final newline: two sentences glued into one (in both files
    alike, nothing else noticed), around a character no hypothesis has."""
    bom = next(((number, line.find("\ufeff")) for number, line in enumerate(lines, start=1) if "\ufeff" in line), None)
    if bom is not None:
        number, column = bom
        raise DataError(path, number, BOM_IN_LINE.format(column=column + 1))


def _warn_copy(source: Path, target: Path, pairs: list[tuple[int, str, str]]) -> None:
    """A warning when every target sentence equals its source sentence: the target file is then a
    copy of the source (a `cp train.en train.de` slip, a corpus whose other side was never
    written), the split teaches or measures copying, and the identity scores BLEU 100 on it, all
    without a word. A warning, not an error: a copy task (an auto-encoder, a denoising baseline)
    is legitimate, and the two files differing only in whitespace or line endings is the same
    case. Multi30k has no identical pair at all."""
    if all(a == b for _, a, b in pairs):
        warnings.warn(
            f"{target}: each of its {len(pairs)} sentences is the same as in {source}: a copy of the source file? "
            "Copying the input would score BLEU 100 on this split",
            stacklevel=3,
        )


def _warn_not_nfc(target: Path, pairs: list[tuple[int, str, str]]) -> None:
    """A warning naming the first reference line that is not in Unicode NFC. sacrebleu compares
    code points and normalises nothing (and BLEU here is sacrebleu's, so it must not either): an
    output writing "ä" as one character, as NFC text and most tokenizers do, misses a reference
    writing it "a" + U+0308, word for word. The exact Multi30k dev references, in NFC, scored 80.2
    BLEU against an NFD copy of them, without a word. A warning, not an error: a model trained on
    NFD targets writes NFD too; what matters is that references and training targets agree."""
    lines = [number for number, _, reference in pairs if not unicodedata.is_normalized("NFC", reference)]
    if lines:
        warnings.warn(
            f"{target}:{lines[0]}: {len(lines)} of its {len(pairs)} sentences are not in Unicode NFC "
            "(decomposed accents, as macOS or some exports write them): sacrebleu compares code points, so an "
            "output in NFC misses every such word; normalise the target files to NFC (training and references "
            "alike)",
            stacklevel=3,
        )


class ParallelTextTask(Task):
    """Source -> target translation; ids are `<split>-<line>` (1-based line in the files). The test
    split is unlabelled (a blind test set: translated, not scored) when its target file is absent."""

    type = "seq2seq"
    main_metric = "bleu"

    def __init__(self, name: str, config: ParallelConfig | None = None):
        super().__init__(name, config if config is not None else ParallelConfig())
        self._splits: dict[str, list[TranslationExample]] = {}
        self.last_signature: str | None = None

    def files(self, split: Split) -> tuple[Path, Path]:
        if split not in SPLITS:
            raise UserError(f"{self.name}: unknown split {split!r} (expected one of {', '.join(SPLITS)})")
        if self.config.data_dir is None:
            raise UserError(f"{self.name}: data_dir is not set")
        folder = Path(self.config.data_dir)

        def path(lang: str) -> Path:
            return folder / self.config.file_pattern.format(split=split, lang=lang)

        return path(self.config.source_lang), path(self.config.target_lang)

    def examples(self, split: Split) -> list[Example]:
        if split not in self._splits:
            source, target = self.files(split)
            # A blind test set (WMT's, a shared task's) comes without references: its source file
            # alone is unlabelled sentences to translate. Absent means no entry at all: a dangling
            # symlink or a folder in its place is an error as for any split, and so is an absent
            # train or dev target (training and selection need references).
            blind = split == "test" and source.is_file() and not target.exists() and not target.is_symlink()
            for path in (source,) if blind else (source, target):
                # "no dev file" for a folder of that name (a corpus unpacked as dev.en/...) or a
                # data_dir that is itself a file sent the user looking for a file that is there
                if path.is_dir():
                    raise DataError(path, 0, f"is a directory, expected a file (the {split} sentences of one language)")
                if path.parent.exists() and not path.parent.is_dir():
                    raise DataError(
                        path.parent, 0, "is a file, expected the folder of the parallel files (data_dir, file_pattern)"
                    )
                if not path.is_file():
                    raise DataError(path, 0, f"no {split} file (looked for {path.name} in {path.parent})")
            self._splits[split] = (
                [TranslationExample(f"{split}-{number}", a) for number, a in read_source(source)]
                if blind
                else [TranslationExample(f"{split}-{number}", a, b) for number, a, b in read_parallel(source, target)]
            )
        examples = self._splits[split]
        limit = self.config.max_examples
        return list(examples if limit is None else examples[:limit])

    def _bleu(self) -> Any:
        from sacrebleu.metrics import BLEU

        return BLEU(tokenize=self.config.bleu_tokenize, lowercase=self.config.lowercase)

    def signature(self) -> str:
        """sacrebleu's signature of the BLEU this task computes (one reference per sentence)."""
        bleu = self._bleu()
        bleu.corpus_score(["x"], [["x"]])  # sacrebleu knows the reference count only after scoring
        return str(bleu.get_signature())

    def info(self) -> TaskInfo:
        info = super().info()
        info.extra.update(
            source_lang=self.config.source_lang, target_lang=self.config.target_lang, bleu_signature=self.signature()
        )
        return info

    def _output(self, example_id: str, hypothesis: Any) -> str:
        """The line `write_predictions` writes for `hypothesis`, or a ValueError naming the
        sentence. One check for both methods: `evaluate` scored a prediction with a lone surrogate
        (a byte-level decoder's `surrogateescape`, a JSON `\\ud800`), which the file cannot hold,
        so a BLEU was reported for outputs that `write_predictions` then refused to write."""
        if not isinstance(hypothesis, str):
            raise ValueError(f"{self.name}: prediction for {example_id!r} must be a string, not {hypothesis!r}")
        if problem := lone_surrogate(hypothesis):
            raise ValueError(f"{self.name}: prediction for {example_id!r}: {problem}")
        return output_line(hypothesis)

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        """Corpus BLEU (percent) of the predicted strings against the references; the signature of
        the computation is kept in `last_signature` (and in `info().extra`).

        `predictions` must hold exactly the sentences of `examples`, as `write_predictions` asks: a
        prediction for an id not among them (`dev-1014` against a dev file of 1013 lines) means
        outputs of another split or another version of the file, every pair after a deleted line
        shifted by one, and was scored without a word (a missing one is an error too)."""
        check_prediction_ids(self.name, examples, predictions, "sentence")
        references, hypotheses = [], []
        for example in examples:
            assert isinstance(example, TranslationExample)
            if example.target is None:
                raise ValueError(
                    f"{self.name}: sentence {example.id!r} has no reference (unlabelled split: a test split without "
                    f"its {self.config.target_lang} file is a blind test set, to predict and write, not to score)"
                )
            references.append(example.target)
            hypotheses.append(self._output(example.id, predictions[example.id]))  # what write_predictions writes
        if not references:
            raise ValueError(f"{self.name}: cannot evaluate zero sentences")
        bleu = self._bleu()
        result = bleu.corpus_score(hypotheses, [references])
        self.last_signature = str(bleu.get_signature())
        return {"bleu": float(result.score)}

    def write_predictions(
        self, directory: Path, split: Split, examples: Sequence[Example], predictions: Mapping[str, Any]
    ) -> Path:
        """One output sentence per line in example order, named `<split>.<target_lang>` (sacrebleu
        CLI input: `sacrebleu ref.de -i dev.de`): as many lines as `examples`, an empty output
        as an empty line.

        A line break inside an output (LF, CR or CRLF) becomes a space: it would otherwise shift
        every later line against the references (and a CR is an error for xfer's own readers).
        Why the checks: a missing prediction, one for an id that is not among `examples`
        (another split's), or a non-string (`None` would be written as "None") is a ValueError
        and nothing is written; the file is replaced atomically, so an error or a crash never
        leaves a shorter file in place of a good one.
        """
        check_prediction_ids(self.name, examples, predictions, "sentence")
        lines = []
        for example in examples:
            lines.append(self._output(example.id, predictions[example.id]) + "\n")
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{split}.{self.config.target_lang}"
        atomic_write_text(path, "".join(lines))
        return path

"""Tagging task components: conll/chunking, conll/ner, conll/ud-pos and conll/columns.

Examples are `TaggingExample`s (one tag per word); predictions are tag lists. Span tasks are
scored with conlleval-compatible span F1 (seqeval via `xfer.core.metrics.span_f1`), per-token
tasks with token accuracy; both on the [0, 100] scale.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from xfer.core import metrics
from xfer.core.atomic import atomic_write_text
from xfer.core.errors import DataError, UserError
from xfer.core.tasks import (
    Example,
    Split,
    TaggingExample,
    Task,
    TaskInfo,
    check_prediction_ids,
    first_unknown_label,
)
from xfer.tasks.conll import schemes
from xfer.tasks.conll.config import ChunkingConfig, ColumnsConfig, FilesConfig, SpanTaggingConfig, UdPosConfig
from xfer.tasks.conll.readers import (
    TAG_INDEX,
    ColumnSentence,
    duplicate_sentence_id,
    read_columns,
    read_conllu,
    word_forms,
    word_line_id,
)

SPLITS = ("train", "dev", "test")


NER_TYPES = frozenset({"PER", "LOC", "ORG", "MISC"})
"""CoNLL-2003's entity types: span tags of only these are NER, not chunks (`ChunkingTask.read_file`)."""


class RawSentence(NamedTuple):
    """A sentence as read from a file, before it gets its split-specific id."""

    id: str | None  # the file's own id (CoNLL-U sent_id), if any
    line: int
    words: list[str]
    tags: list[str]


# --- scoring -------------------------------------------------------------------------------------


def _gold_and_predicted(
    task: TaggingTask, examples: Sequence[Example], predictions: Mapping[str, Any]
) -> tuple[list[list[str]], list[list[str]]]:
    """Gold and predicted tag lists in example order; shapes, types and tags are checked."""
    golds: list[list[str]] = []
    preds: list[list[str]] = []
    for example in examples:
        assert isinstance(example, TaggingExample)
        if example.id not in predictions:
            raise ValueError(f"{task.name}: no prediction for sentence {example.id!r}")
        if example.tags is None:
            raise ValueError(f"{task.name}: sentence {example.id!r} has no gold tags (unlabelled split?)")
        golds.append(list(example.tags))
        preds.append(task.checked_tags(example, predictions[example.id]))
    if not golds:
        raise ValueError(f"{task.name}: cannot evaluate zero sentences")
    return golds, preds


def _predicted_tags(task: str, example: TaggingExample, predicted: Any) -> list[str]:
    """A sentence's predicted tags, checked: a list of strings, one per word (a string "OO" would
    be read as the tags O, O; a None tag failed deep in the writer; a None or a number for the
    whole sentence failed with a bare TypeError naming no sentence)."""
    try:
        tags = None if isinstance(predicted, str) else list(predicted)
    except TypeError:
        tags = None
    if tags is None:
        raise ValueError(
            f"{task}: prediction for {example.id!r} must be a list of tag strings, not {type(predicted).__name__}"
        )
    if not all(isinstance(tag, str) for tag in tags):
        raise ValueError(f"{task}: prediction for {example.id!r} must be a list of tag strings")
    if len(tags) != len(example.words):
        raise ValueError(
            f"{task}: sentence {example.id!r} has {len(example.words)} words but {len(tags)} predicted tags"
        )
    position = next((i for i, tag in enumerate(tags) if _unwritable(tag)), None)
    if position is not None:  # for every task: without a train_file there is no tag set to check against
        raise ValueError(
            f"{task}: sentence {example.id!r}, word {position + 1} ({example.words[position]!r}): predicted tag "
            f"{tags[position]!r} is empty, holds a tab or line break, or starts or ends with a space (a "
            "newline left over from reading a file?)"
        )
    return tags


def _unwritable(tag: str) -> bool:
    """A tag no file of this plugin can hold (column files split on whitespace or refuse a field
    padded with spaces, CoNLL-U tags hold none): empty, with a tab or line break, or padded. Such a
    predicted tag was scored as a tag of its own (`B-PER\\n` as type `PER\\n`, `NOUN ` as a wrong
    tag) and split the row of the prediction file in two (an empty tag dropped its third column).
    Only ASCII spaces count as padding: a no-break space is part of a token (tags too) of a
    whitespace-separated file (`read_columns`), so gold given as predictions stays valid."""
    return not tag or tag != tag.strip(" ") or any(c in tag for c in "\t\n\r")


def span_scores(golds: Sequence[Sequence[str]], preds: Sequence[Sequence[str]], scheme: str) -> dict[str, float]:
    """Exact-match span F1/precision/recall (conlleval semantics, which read BIO and BIOES alike)."""
    scores = metrics.span_f1(golds, preds, scheme=scheme)
    return {"f1": scores.f1, "precision": scores.precision, "recall": scores.recall}


def _scored_spans_as_iob2(tags: Sequence[str]) -> list[str]:
    """IOB2 tags holding exactly the spans that seqeval, the scorer of `span_scores`, reads in
    `tags` (conlleval's rules extended to E-/S-): each span `B-X I-X ...`, everything else `O`.
    Equal to `schemes.bioes_to_bio` on well-formed BIOES."""
    from seqeval.metrics.sequence_labeling import get_entities

    out = ["O"] * len(tags)
    for kind, start, end in get_entities(list(tags)):
        out[start : end + 1] = [f"B-{kind}"] + [f"I-{kind}"] * (end - start)
    return out


def token_accuracy(golds: Sequence[Sequence[str]], preds: Sequence[Sequence[str]]) -> dict[str, float]:
    flat_gold = [tag for sentence in golds for tag in sentence]
    flat_pred = [tag for sentence in preds for tag in sentence]
    return {"accuracy": metrics.accuracy(flat_gold, flat_pred)}


# --- base ----------------------------------------------------------------------------------------


class TaggingTask(Task):
    """Shared plumbing: per-split files, caching, `max_examples`, labels from the train file."""

    type = "tagging"
    main_metric = "f1"
    config_class: type[FilesConfig] = FilesConfig

    def __init__(self, name: str, config: FilesConfig | None = None):
        super().__init__(name, config if config is not None else self.config_class())
        self._splits: dict[str, list[TaggingExample]] = {}
        self._labels: tuple[str, ...] | None = None
        self._files: dict[Path, list[RawSentence]] = {}
        self._columns: dict[str, tuple[Path, int, int]] = {}  # key -> (first file, its width, resolved index)

    def _same_column(self, path: Path, sentence: ColumnSentence, key: str, column: int, resolved: int) -> int:
        """`resolved`, the index that `key` (configured as `column`) names in the file `path`, refused
        unless it names the same column as in the task's other files.

        A negative index counts from the end of each file's lines: in a dev file without the train
        file's last column (CoNLL-2003 `WORD POS CHUNK` beside `WORD POS CHUNK NER`) the default
        `tag_column: -1` read the chunk tags as the dev entities, silently (gold F1 100, every model
        near 0)."""
        width = len(sentence.rows[0])
        first = self._columns.setdefault(key, (path, width, resolved))
        if first[2] != resolved:
            raise DataError(
                path,
                sentence.line,
                f"{key} {column} is column {resolved} (0-based) of this file, whose lines have {width} columns, "
                f"but column {first[2]} of {first[0]} ({first[1]} columns): the task's files must have the same "
                f"columns, or {key} would read another column in each (count it from the start, or fix the file)",
                key=key,
            )
        return resolved

    @abc.abstractmethod
    def read_file(self, path: Path) -> list[RawSentence]:
        """The sentences of `path`, tags already validated and converted to the task's scheme."""

    def file_of(self, split: Split) -> Path | None:
        value = getattr(self.config, f"{split}_file")
        return None if value is None else Path(value)

    def read_cached(self, path: Path) -> list[RawSentence]:
        """`read_file` once per file (train is read for `labels` and, when carving, for dev)."""
        if path not in self._files:
            self._files[path] = self.read_file(path)
        return self._files[path]

    def _load(self, split: Split) -> list[TaggingExample]:
        if split not in SPLITS:
            raise UserError(f"{self.name}: unknown split {split!r} (expected one of {', '.join(SPLITS)})")
        if split not in self._splits:
            raw = self._raw_split(split)
            path = self.file_of(split) or self.file_of("train")
            examples: list[TaggingExample] = []
            seen: dict[str, tuple[int, bool]] = {}  # id -> (line, whether it is the default id)
            for number, (ident, line, words, tags) in enumerate(raw):
                default = not ident
                ident = ident or f"{split}-{number}"
                if ident in seen:
                    message = duplicate_sentence_id(ident, split, seen[ident], line, default)
                    raise DataError(path, line, message, key="sent_id")
                seen[ident] = (line, default)
                examples.append(TaggingExample(id=ident, words=tuple(words), tags=tuple(tags)))
            self._splits[split] = examples
        return self._splits[split]

    def _raw_split(self, split: Split) -> list[RawSentence]:
        path = self.file_of(split)
        if path is None:
            # A DataError (a UserError) as the Task contract asks for missing splits; "file" = the task.
            raise DataError(self.name, 0, f"no {split} file configured (set `{split}_file:` in the task config)")
        return self.read_cached(path)

    def examples(self, split: Split) -> list[Example]:
        examples = self._load(split)
        limit = self.config.max_examples
        return list(examples if limit is None else examples[:limit])

    def conlleval_tags(self, tags: Sequence[str]) -> list[str]:
        """Tags as the prediction file writes them: as they are, but BIOES span tags in IOB2.

        conlleval knows no `S-` and does not end a chunk at `E-` followed by `B-`/`S-` of the same
        type: read in BIOES, perfect CoNLL-2000 dev predictions counted 3,600 phrases for 3,783.
        The IOB2 tags are those of the spans the scorer (`span_scores`) finds, so that conlleval
        on the file finds exactly the spans xfer scored, also in the ill-formed sequences an
        unconstrained tagger predicts: renaming prefixes (E- -> I-, S- -> B-) turned `S-X I-X`
        (two spans for the scorer) and `E-X E-X` (two) into one span each."""
        return _scored_spans_as_iob2(tags) if self.span_scheme == "BIOES" else list(tags)

    @property
    def span_scheme(self) -> str | None:
        """The scheme of span tags (BIO / BIOES), None for tags that are not spans (POS)."""
        return None

    @property
    def labels(self) -> tuple[str, ...]:
        """Sorted tag set of the whole train file (in the task's scheme): a fixed order that does
        not depend on max_examples or on the dev carve."""
        if self._labels is None:
            path = self.file_of("train")
            if path is None:
                raise UserError(f"{self.name}: the tag set is read from train_file, which is not set")
            self._labels = tuple(sorted({tag for sentence in self.read_cached(path) for tag in sentence.tags}))
        return self._labels

    def checked_tags(self, example: TaggingExample, predicted: Any) -> list[str]:
        """A sentence's predicted tags, refused (ValueError) unless every tag could be the task's.

        A model predicts `labels` only, but `evaluate` and `write_predictions` are the plugin's
        API, also fed predictions read back from a file or made by another task's model: seqeval
        scored an `S-X` in a BIO task as a one-word span, and a tag of a type the task does not
        have, or of another scheme, silently moved the score. So a span tag must be well formed in
        the task's scheme and, when `train_file` gives the tag set, every tag must be in `labels`
        or among the sentence's own gold tags (a dev-only tag; gold given as predictions scores 100).
        """
        tags = _predicted_tags(self.name, example, predicted)
        scheme = self.span_scheme
        problem = schemes.bad_form(tags, scheme) if scheme is not None else None
        if problem is not None:
            position, reason = problem
            raise ValueError(
                f"{self.name}: sentence {example.id!r}, word {position + 1} ({example.words[position]!r}): "
                f"predicted {reason}"
            )
        if self.file_of("train") is not None:
            position = first_unknown_label(tags, self.labels, example.tags or ())
            if position is not None:
                raise ValueError(
                    f"{self.name}: sentence {example.id!r}, word {position + 1} ({example.words[position]!r}): "
                    f"predicted tag {tags[position]!r} is not in the task's tag set (the {len(self.labels)} tags "
                    f"of {self.file_of('train')}): predictions made for another tag set or scheme?"
                )
        return tags

    def write_predictions(
        self, directory: Path, split: Split, examples: Sequence[Example], predictions: Mapping[str, Any]
    ) -> Path:
        """CoNLL-style output: `word<TAB>gold<TAB>predicted` per token (`word<TAB>predicted` when
        the split has no gold tags), a blank line after each sentence, in example order. With
        gold tags the file is conlleval input (`conlleval -d '\\t'`); span tags are written in
        IOB2 (`conlleval_tags`). File: `<split>.conll`."""
        check_prediction_ids(self.name, examples, predictions, "sentence")
        lines: list[str] = []
        for example in examples:
            assert isinstance(example, TaggingExample)
            predicted = self.checked_tags(example, predictions[example.id])
            golds = self.conlleval_tags(example.tags) if example.tags else [None] * len(example.words)
            for word, gold, tag in zip(example.words, golds, self.conlleval_tags(predicted), strict=True):
                lines.append(f"{word}\t{tag}\n" if gold is None else f"{word}\t{gold}\t{tag}\n")
            lines.append("\n")
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{split}.conll"
        atomic_write_text(path, "".join(lines))  # checked first, replaced whole: never a shorter file
        return path


def _column_index(path: Path, sentence: ColumnSentence, column: int, key: str) -> int:
    width = len(sentence.rows[0])
    if not -width <= column < width:
        raise DataError(path, sentence.line, f"column {column} does not exist: lines have {width} columns", key=key)
    return column % width


def _tag_column(path: Path, sentence: ColumnSentence, tag_column: int, word_col: int) -> int:
    """The index of the tag column, which must not be the word column (`word_col`, resolved).
    `word_column: -1` next to the default `tag_column: -1`, or a one-column file, made every tag
    its own input word: a model learned to copy it and dev F1 was ~100, without a word."""
    tag_col = _column_index(path, sentence, tag_column, "tag_column")
    if tag_col == word_col:
        raise DataError(
            path,
            sentence.line,
            f"tag_column {tag_column} and the word column are both column {tag_col} (0-based; lines have "
            f"{len(sentence.rows[0])} columns): the tag would be the input word",
            key="tag_column",
        )
    return tag_col


# --- span tasks ----------------------------------------------------------------------------------


class SpanTaggingTask(TaggingTask):
    """conll/ner: span tags from a column file (CoNLL-2003: `WORD POS CHUNK NER`), scored with span F1.

    Files may be IOB1, IOB2 or BIOES (`input_scheme`); examples, labels and expected
    predictions use `tag_scheme`.
    """

    main_metric = "f1"
    config_class = SpanTaggingConfig

    def __init__(self, name: str, config: SpanTaggingConfig | None = None):
        super().__init__(name, config)
        self.input_schemes: dict[str, str] = {}

    def read_file(self, path: Path) -> list[RawSentence]:
        cfg: SpanTaggingConfig = self.config
        sentences = read_columns(path, separator=cfg.separator)
        word_col = 0
        tag_col = self._same_column(
            path, sentences[0], "tag_column", cfg.tag_column, _tag_column(path, sentences[0], cfg.tag_column, word_col)
        )
        input_scheme = cfg.input_scheme
        why = ""
        if input_scheme == "auto":
            first_bioes = next(
                (s.lines[i] for s in sentences for i, row in enumerate(s.rows) if schemes.is_bioes_tag(row[tag_col])),
                None,
            )
            input_scheme = "BIOES" if first_bioes else "IOB1"  # IOB1 -> IOB2 is the identity on IOB2
            if first_bioes:  # one stray E-/S- tag makes every line BIOES: say which line decided it
                why = (
                    f" (input_scheme auto reads this file as BIOES because line {first_bioes} has an E-/S- tag; "
                    "a file mixing IOB and BIOES tags needs fixing)"
                )
            if input_scheme == "IOB1":
                _refuse_mixed_iob(path, sentences, tag_col)
        detected = "IOB2" if input_scheme == "IOB1" else input_scheme  # until an IOB1 span start shows
        out = []
        for sentence in sentences:
            words = [row[word_col] for row in sentence.rows]
            tags = [row[tag_col] for row in sentence.rows]
            problem = schemes.bad_tag(tags, input_scheme)
            if problem is not None:
                position, reason = problem
                raise DataError(path, sentence.lines[position], reason + why, key="tag")
            if input_scheme == "IOB1":
                converted = schemes.iob1_to_iob2(tags)
                if converted != tags:
                    detected = "IOB1"
                tags = converted
            elif input_scheme == "BIOES":
                tags = schemes.bioes_to_bio(tags)
            if cfg.tag_scheme == "BIOES":
                tags = schemes.bio_to_bioes(tags)
            out.append(RawSentence(None, sentence.line, words, tags))
        self.input_schemes[str(path)] = detected
        return out

    @property
    def span_scheme(self) -> str | None:
        return self.config.tag_scheme

    def info(self) -> TaskInfo:
        """`extra` carries `tag_scheme` and, for the files read so far, `input_schemes`
        (file -> IOB1/IOB2/BIOES as found), so a run can record how its data was converted."""
        info = super().info()
        info.extra["tag_scheme"] = self.config.tag_scheme
        info.extra["input_schemes"] = dict(self.input_schemes)
        return info

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        golds, preds = _gold_and_predicted(self, examples, predictions)
        return span_scores(golds, preds, self.config.tag_scheme)


def _refuse_mixed_iob(path: Path, sentences: Sequence[ColumnSentence], tag_col: int) -> None:
    """For `input_scheme: auto`: raise when a file starts spans both the IOB1-only way (`I-X`
    after a non-X tag) and the IOB2-only way (`B-X` after a non-X tag).

    The error names the first tag of the rarer kind, which is most likely the typo (an `I-PER`
    after `O` in an IOB2 file), and the first line of the other kind as evidence of the file's
    scheme. Without this check such a file was read as IOB1 and the typo silently became a span
    start, while `input_schemes` recorded the IOB2 file as IOB1.
    """
    found: dict[str, list[tuple[int, str, str]]] = {"IOB1": [], "IOB2": []}
    for sentence in sentences:
        tags = [row[tag_col] for row in sentence.rows]
        if schemes.bad_form(tags, "IOB1") is not None:
            return  # a malformed tag: the scheme check that follows names it
        for scheme, positions in zip(("IOB1", "IOB2"), schemes.iob_span_starts(tags), strict=True):
            found[scheme] += [(sentence.lines[i], tags[i], tags[i - 1] if i else "O") for i in positions]
    if not (found["IOB1"] and found["IOB2"]):
        return
    rare, common = ("IOB2", "IOB1") if len(found["IOB2"]) < len(found["IOB1"]) else ("IOB1", "IOB2")
    line, tag, prev = found[rare][0]
    other_line = found[common][0][0]
    how = {"IOB1": "with I-", "IOB2": "with B-"}
    raise DataError(
        path,
        line,
        f"{tag!r} after {prev!r} starts a span {how[rare]}, as only {rare} does, but the file starts "
        f"{len(found[common])} span(s) {how[common]}, as only {common} does (first on line {other_line}): "
        "the file mixes IOB1 and IOB2, so input_scheme auto cannot tell which it is. Fix the tag, or set "
        "input_scheme: IOB1 (both kinds start spans) or IOB2 (I- must continue a span)",
        key="tag",
    )


class ChunkingTask(SpanTaggingTask):
    """conll/chunking: CoNLL-2000 `WORD POS CHUNK`; without dev_file, dev = the last
    `dev_from_train` sentences of train_file (deterministic, no shuffling)."""

    config_class = ChunkingConfig

    def read_file(self, path: Path) -> list[RawSentence]:
        """The span tags of `tag_column`, refused when the default column holds CoNLL-2003's NER types.

        Why: CoNLL-2003 files are `WORD POS CHUNK NER`, and the default `tag_column: -1` (the chunk
        column of CoNLL-2000's `WORD POS CHUNK`) is their NER column there: a chunking run on them
        trained and scored named entities as chunks, without a word."""
        sentences = super().read_file(path)
        types = {tag.split("-", 1)[1] for s in sentences for tag in s.tags if "-" in tag}
        # only under the default column: one chosen on purpose may load entities (the task's dev carve)
        if self.config.tag_column == -1 and types and types <= NER_TYPES:
            raise DataError(
                path,
                0,
                f"the tags of the default tag_column -1 (the last) are named-entity types ({', '.join(sorted(types))}), "
                "not chunks: in CoNLL-2003's `WORD POS CHUNK NER` the chunk column is 2 (set tag_column: 2), "
                "or use conll/ner for the entities",
                key="tag_column",
            )
        return sentences

    def _raw_split(self, split: Split) -> list[RawSentence]:
        cfg: ChunkingConfig = self.config
        if cfg.dev_file is not None or split == "test":
            return super()._raw_split(split)
        n = cfg.dev_from_train
        if split == "dev" and n <= 0:
            raise UserError(f"{self.name}: no dev split: set dev_file or a positive dev_from_train")
        sentences = super()._raw_split("train")
        if n <= 0:
            return sentences
        if n >= len(sentences):
            raise UserError(f"{self.name}: dev_from_train={n} but {cfg.train_file} has only {len(sentences)} sentences")
        return sentences[-n:] if split == "dev" else sentences[:-n]

    def file_of(self, split: Split) -> Path | None:
        cfg: ChunkingConfig = self.config
        if split == "dev" and cfg.dev_file is None and cfg.dev_from_train > 0:
            return super().file_of("train")
        return super().file_of(split)


# --- per-token tasks -----------------------------------------------------------------------------


class UdPosTask(TaggingTask):
    """conll/ud-pos: UPOS (or XPOS) tagging of the syntactic words of CoNLL-U files; accuracy.

    Sentence ids are the files' `# sent_id` values (a repeated id is an error), else
    `<split>-<n>`.
    """

    main_metric = "accuracy"
    config_class = UdPosConfig

    def __init__(self, name: str, config: UdPosConfig | None = None):
        super().__init__(name, config)
        self._file_lines: dict[Path, list[list[str]]] = {}  # file -> each sentence's lines as read
        self._raw: dict[str, dict[str, list[str]]] = {}  # split -> sentence id -> its lines as read

    def read_file(self, path: Path) -> list[RawSentence]:
        cfg: UdPosConfig = self.config
        sentences = read_conllu(path, tag_column=cfg.tag_column)
        self._file_lines[path] = [s.raw for s in sentences]
        return [RawSentence(s.sent_id, s.line, s.words, s.tags) for s in sentences]

    def _load(self, split: Split) -> list[TaggingExample]:
        """The split's examples, and the lines each sentence was read from, by id, for `<split>.conllu`."""
        fresh = split not in self._splits
        examples = super()._load(split)
        if fresh:
            lines = self._file_lines.get(self.file_of(split) or Path(), [])
            self._raw[split] = {e.id: raw for e, raw in zip(examples, lines, strict=True)}
        return examples

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        golds, preds = _gold_and_predicted(self, examples, predictions)
        return token_accuracy(golds, preds)

    def write_predictions(
        self, directory: Path, split: Split, examples: Sequence[Example], predictions: Mapping[str, Any]
    ) -> Path:
        """`<split>.conll` as every tagging task (returned), and beside it `<split>.conllu`, the file
        UD tools read (the CoNLL 2018 evaluator `conll18_ud_eval.py`, the UD validator).

        A sentence read from the split's file is written as read (comments, multiword tokens, empty
        nodes, every column) with only the UPOS (or XPOS, per `tag_column`) of its words replaced by
        the prediction: `word<TAB>gold<TAB>predicted` alone lost the multiword tokens the evaluator
        needs to align a file with the gold one (French `du` = `de le`), and no UD tool reads it. A
        sentence not read from it (built in code) gets `# sent_id`, ID, FORM and the tag, the other
        columns `_`. Everything is checked before either file is replaced."""
        check_prediction_ids(self.name, examples, predictions, "sentence")
        tags: dict[str, list[str]] = {}
        for example in examples:
            assert isinstance(example, TaggingExample)
            tags[example.id] = _conllu_tags(self.name, example, self.checked_tags(example, predictions[example.id]))
        text = self._conllu_text(split, examples, tags)
        path = super().write_predictions(directory, split, examples, tags)
        atomic_write_text(directory / f"{split}.conllu", text)  # replaced whole, as the .conll file
        return path

    def _conllu_text(self, split: Split, examples: Sequence[Example], tags: Mapping[str, list[str]]) -> str:
        """The CoNLL-U text of the predicted `tags` (checked), a blank line after each sentence."""
        column = TAG_INDEX[self.config.tag_column]
        read = self._raw.get(split, {})
        lines: list[str] = []
        for example in examples:
            assert isinstance(example, TaggingExample)
            predicted = tags[example.id]
            raw = read.get(example.id)
            if raw is not None and word_forms(raw) == list(example.words):
                lines.extend(_with_tag(line, column, predicted) + "\n" for line in raw)
            else:
                lines.append(f"# sent_id = {example.id}\n")
                for i, (word, tag) in enumerate(zip(example.words, predicted, strict=True)):
                    fields = [str(i + 1), word] + ["_"] * 8
                    fields[column] = tag
                    lines.append("\t".join(fields) + "\n")
            lines.append("\n")
        return "".join(lines)


def _conllu_tags(task: str, example: TaggingExample, tags: list[str]) -> list[str]:
    """`tags`, refused (ValueError) when one holds whitespace, which CoNLL-U forbids in UPOS and
    XPOS: written, `PROPN X` would be read back as a tag with a space, or refused by UD tools."""
    position = next((i for i, tag in enumerate(tags) if any(c.isspace() for c in tag)), None)
    if position is not None:
        raise ValueError(
            f"{task}: sentence {example.id!r}, word {position + 1} ({example.words[position]!r}): predicted tag "
            f"{tags[position]!r} holds whitespace, which a CoNLL-U UPOS or XPOS cannot"
        )
    return tags


def _with_tag(line: str, column: int, tags: Sequence[str]) -> str:
    """`line` with field `column` (UPOS or XPOS) of a word line replaced by its predicted tag; a
    comment, multiword token or empty node unchanged."""
    ident = word_line_id(line)
    if ident is None:
        return line
    fields = line.split("\t")
    fields[column] = tags[ident - 1]
    return "\t".join(fields)


class ColumnsTask(TaggingTask):
    """conll/columns: any column file; span F1 for BIO/BIOES tags, token accuracy for scheme none.

    Tags are validated (form only: `O` or `B-X`/`I-X`[/`E-X`/`S-X`]) but never converted.
    """

    config_class = ColumnsConfig

    def __init__(self, name: str, config: ColumnsConfig | None = None):
        super().__init__(name, config)
        self.main_metric = "accuracy" if self.config.scheme == "none" else "f1"  # type: ignore[misc]

    def read_file(self, path: Path) -> list[RawSentence]:
        cfg: ColumnsConfig = self.config
        sentences = read_columns(path, separator=cfg.separator)
        first = sentences[0]
        word_col = self._same_column(
            path, first, "word_column", cfg.word_column, _column_index(path, first, cfg.word_column, "word_column")
        )
        tag_col = self._same_column(
            path, first, "tag_column", cfg.tag_column, _tag_column(path, first, cfg.tag_column, word_col)
        )
        out = []
        for sentence in sentences:
            tags = [row[tag_col] for row in sentence.rows]
            problem = schemes.bad_form(tags, cfg.scheme) if cfg.scheme != "none" else None
            if problem is not None:
                raise DataError(path, sentence.lines[problem[0]], problem[1], key="tag")
            out.append(RawSentence(None, sentence.line, [row[word_col] for row in sentence.rows], tags))
        return out

    @property
    def span_scheme(self) -> str | None:
        return None if self.config.scheme == "none" else self.config.scheme

    def info(self) -> TaskInfo:
        info = super().info()
        info.extra["tag_scheme"] = self.config.scheme
        return info

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        golds, preds = _gold_and_predicted(self, examples, predictions)
        if self.config.scheme == "none":
            return token_accuracy(golds, preds)
        return span_scores(golds, preds, self.config.scheme)

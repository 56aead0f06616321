"""conll/ud-parse: dependency parsing from CoNLL-U, scored with LAS/UAS as CoNLL-2007's eval.pl.

Examples are `ParsingExample`s (words, 1-based heads with 0 = ROOT, relations, UPOS); a
prediction is a pair `(heads, relations)`. Punctuation is excluded from scoring by default with
eval.pl's rule (a token whose form consists only of Unicode punctuation characters, category P*);
`punctuation: upos` excludes PUNCT-tagged words instead, `none` scores everything.
"""

from __future__ import annotations

import unicodedata
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from xfer.core import metrics
from xfer.core.atomic import atomic_write_text
from xfer.core.errors import DataError, UserError
from xfer.core.tasks import (
    Example,
    ParsingExample,
    Split,
    Task,
    TaskInfo,
    check_prediction_ids,
    first_unknown_label,
)
from xfer.tasks.conll.config import UdParseConfig
from xfer.tasks.conll.readers import (
    ConlluTree,
    duplicate_sentence_id,
    read_conllu_trees,
    tree_problem,
    word_forms,
    word_line_id,
)

SPLITS = ("train", "dev", "test")


def is_punctuation(form: str) -> bool:
    """CoNLL-2007 eval.pl: every character of the form is Unicode punctuation (\\p{Punctuation})."""
    return bool(form) and all(unicodedata.category(c).startswith("P") for c in form)


class UdParseTask(Task):
    """Dependency parsing of the syntactic words of CoNLL-U files; main metric LAS.

    `labels` is the sorted relation set of the whole train file. Sentence ids are the files'
    `# sent_id` values, else `<split>-<n>`.
    """

    type = "parsing"
    main_metric = "las"

    def __init__(self, name: str, config: UdParseConfig | None = None):
        super().__init__(name, config if config is not None else UdParseConfig())
        self._trees: dict[Path, list[ConlluTree]] = {}
        self._splits: dict[str, list[ParsingExample]] = {}
        self._raw: dict[str, dict[str, list[str]]] = {}  # split -> sentence id -> its lines as read
        self._labels: tuple[str, ...] | None = None

    def file_of(self, split: Split) -> Path | None:
        value = getattr(self.config, f"{split}_file")
        return None if value is None else Path(value)

    def _read(self, path: Path) -> list[ConlluTree]:
        if path not in self._trees:
            trees = read_conllu_trees(path)
            if self.config.relations == "universal":
                for tree in trees:
                    tree.relations = [r.split(":", 1)[0] for r in tree.relations]
            self._trees[path] = trees
        return self._trees[path]

    def _load(self, split: Split) -> list[ParsingExample]:
        if split not in SPLITS:
            raise UserError(f"{self.name}: unknown split {split!r} (expected one of {', '.join(SPLITS)})")
        if split not in self._splits:
            path = self.file_of(split)
            if path is None:
                raise DataError(self.name, 0, f"no {split} file configured (set `{split}_file:` in the task config)")
            examples, seen, raw = [], {}, {}
            for number, tree in enumerate(self._read(path)):
                self._check_upos(path, tree)
                ident = tree.sent_id or f"{split}-{number}"
                if ident in seen:
                    message = duplicate_sentence_id(ident, split, seen[ident], tree.line, not tree.sent_id)
                    raise DataError(path, tree.line, message, key="sent_id")
                seen[ident] = (tree.line, not tree.sent_id)
                raw[ident] = tree.raw
                examples.append(
                    ParsingExample(ident, tuple(tree.words), tuple(tree.heads), tuple(tree.relations), tuple(tree.upos))
                )
            self._splits[split] = examples
            self._raw[split] = raw
        return self._splits[split]

    def _check_upos(self, path: Path, tree: ConlluTree) -> None:
        """Under `punctuation: upos` every word needs a UPOS: a missing one (`_`, as in a file
        parsed without a tagger) is not PUNCT, so the punctuation it hides was silently scored."""
        if self.config.punctuation != "upos":
            return
        for line, tag in zip(tree.lines, tree.upos, strict=True):
            if tag == "_":
                raise DataError(
                    path,
                    line,
                    "no UPOS ('_'), but `punctuation: upos` leaves out the words tagged PUNCT: give every "
                    "word a UPOS, or use `punctuation: form`",
                    key="UPOS",
                )

    def examples(self, split: Split) -> list[Example]:
        examples = self._load(split)
        limit = self.config.max_examples
        kept = examples if limit is None else examples[:limit]
        self._check_scored(split, kept)
        return list(kept)

    def _check_scored(self, split: Split, examples: Sequence[ParsingExample]) -> None:
        """At least one word must count for LAS/UAS. A split made only of punctuation (under the
        configured rule) has no score: evaluating it failed after training, with a traceback."""
        if any(any(self.scored(example)) for example in examples):
            return
        kept = " kept by max_examples" if self.config.max_examples is not None else ""
        raise DataError(
            self.file_of(split) or self.name,
            0,
            f"no word of the {len(examples)} sentence(s){kept} counts for LAS/UAS: every one is "
            f"punctuation under `punctuation: {self.config.punctuation}` (set `punctuation: none` to score them)",
            key="punctuation",
        )

    @property
    def labels(self) -> tuple[str, ...]:
        """Sorted relation set of the whole train file (fixed order, independent of max_examples)."""
        if self._labels is None:
            path = self.file_of("train")
            if path is None:
                raise UserError(f"{self.name}: the relation set is read from train_file, which is not set")
            self._labels = tuple(sorted({r for tree in self._read(path) for r in tree.relations}))
        return self._labels

    def info(self) -> TaskInfo:
        info = super().info()
        info.extra.update(punctuation=self.config.punctuation, relations=self.config.relations)
        return info

    def scored(self, example: ParsingExample) -> list[bool]:
        """Which words of `example` count for LAS/UAS (the punctuation rule of the config)."""
        rule = self.config.punctuation
        if rule == "none":
            return [True] * len(example.words)
        if rule == "upos":
            return [tag != "PUNCT" for tag in (example.upos or ("",) * len(example.words))]
        return [not is_punctuation(word) for word in example.words]

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        """LAS, UAS and label accuracy (percent), micro-averaged over the scored words."""
        gold_heads, gold_rels, pred_heads, pred_rels, scored = [], [], [], [], []
        for example in examples:
            assert isinstance(example, ParsingExample)
            heads, relations = self._checked(example, predictions)
            if example.heads is None or example.relations is None:
                raise ValueError(f"{self.name}: sentence {example.id!r} has no gold tree (unlabelled split?)")
            gold_heads.append(example.heads)
            gold_rels.append(example.relations)
            pred_heads.append(heads)
            pred_rels.append(relations)
            scored.append(self.scored(example))
        if not gold_heads:
            raise ValueError(f"{self.name}: cannot evaluate zero sentences")
        scores = metrics.attachment_scores(gold_heads, gold_rels, pred_heads, pred_rels, scored)
        return {"las": scores.las, "uas": scores.uas, "label_accuracy": scores.label_accuracy}

    def _checked(self, example: ParsingExample, predictions: Mapping[str, Any]) -> tuple[list[int], list[str]]:
        if example.id not in predictions:
            raise ValueError(f"{self.name}: no prediction for sentence {example.id!r}")
        try:
            heads, relations = predictions[example.id]
            heads, relations = list(heads), list(relations)  # a None or a number: a bare TypeError in len()
        except (TypeError, ValueError):
            raise ValueError(
                f"{self.name}: prediction for {example.id!r} must be a pair (heads, relations) of lists"
            ) from None
        n = len(example.words)
        if len(heads) != n or len(relations) != n:
            raise ValueError(
                f"{self.name}: sentence {example.id!r} has {n} words but {len(heads)} heads / {len(relations)} relations"
            )
        if any(not isinstance(h, int) or isinstance(h, bool) or not 0 <= h <= n for h in heads):
            raise ValueError(
                f"{self.name}: sentence {example.id!r}: heads must be integers in 0..{n}, got {list(heads)}"
            )
        if not all(isinstance(r, str) for r in relations):
            raise ValueError(f"{self.name}: sentence {example.id!r}: relations must be strings")
        if self.file_of("train") is not None:
            # a model predicts the relation set; one outside it (`nsubj:pass` under `relations: universal`,
            # predictions made for another treebank) only counted as a wrong label, silently
            unknown = first_unknown_label(relations, self.labels, example.relations or ())
            if unknown is not None:
                raise ValueError(
                    f"{self.name}: sentence {example.id!r}, word {unknown + 1} ({example.words[unknown]!r}): predicted "
                    f"relation {relations[unknown]!r} is not in the task's relation set (the {len(self.labels)} "
                    f"relations of {self.file_of('train')}, relations: {self.config.relations})"
                )
        return list(heads), list(relations)

    def write_predictions(
        self, directory: Path, split: Split, examples: Sequence[Example], predictions: Mapping[str, Any]
    ) -> Path:
        """CoNLL-U in example order, a blank line after each sentence. File: `<split>.conllu`.

        A sentence read from the split's file is written as read (comments, multiword tokens,
        empty nodes, every column) with only HEAD and DEPREL of its words replaced: the CoNLL 2018
        evaluator refuses a file whose multiword tokens are missing when a token is not its words
        joined (French `du` = `de le`), and the file compares line by line with the gold one.
        A sentence not read from it (built in code) gets `# sent_id`, ID, FORM, UPOS, HEAD and
        DEPREL, the other columns `_`.

        Predictions that are not trees (argmax decoding can predict cycles and several root
        words) are written as predicted, with a warning: the CoNLL 2018 evaluator, and this
        task reading the file back, refuse them."""
        check_prediction_ids(self.name, examples, predictions, "sentence")
        read = self._raw.get(split, {})
        lines: list[str] = []
        not_trees: list[tuple[str, str]] = []
        for example in examples:
            assert isinstance(example, ParsingExample)
            heads, relations = self._checked(example, predictions)
            problem = tree_problem(heads)
            if problem is not None:
                not_trees.append((example.id, problem))
            raw = read.get(example.id)
            if raw is not None and word_forms(raw) == list(example.words):
                lines.extend(_with_arcs(line, heads, relations) + "\n" for line in raw)
            else:
                lines.append(f"# sent_id = {example.id}\n")
                upos = example.upos or ("_",) * len(example.words)
                for i, (word, tag, head, rel) in enumerate(zip(example.words, upos, heads, relations, strict=True)):
                    lines.append(f"{i + 1}\t{word}\t_\t{tag}\t_\t_\t{head}\t{rel}\t_\t_\n")
            lines.append("\n")
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{split}.conllu"
        atomic_write_text(path, "".join(lines))  # checked first, replaced whole: never a shorter file
        if not_trees:
            first, problem = not_trees[0]
            warnings.warn(
                f"{self.name}: {len(not_trees)} of {len(examples)} predicted sentence(s) written to {path} are "
                f"not trees (first {first!r}: {problem}); the CoNLL 2018 evaluator (conll18_ud_eval.py) refuses "
                "the file: decode trees (CVT `parse_decoding: mst`) to evaluate it with that script",
                stacklevel=2,
            )
        return path


def _with_arcs(line: str, heads: Sequence[int], relations: Sequence[str]) -> str:
    """`line` with HEAD and DEPREL (columns 7 and 8) of a word line replaced by its prediction;
    any other line unchanged."""
    ident = word_line_id(line)
    if ident is None:
        return line
    fields = line.split("\t")
    fields[6], fields[7] = str(heads[ident - 1]), relations[ident - 1]
    return "\t".join(fields)

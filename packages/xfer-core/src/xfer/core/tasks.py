"""The task contract: labelled examples plus the task's official metric, independent of any model.

A task plugin turns files into typed examples and scores predictions; a method package
(a Transformer fine-tuner, a CVT tagger, a BAM student) turns examples into model inputs.
That split is what lets one task plugin serve every method.

Predictions passed to `Task.evaluate` are a mapping from example id to:
- classification: the label string; regression: a float;
- tagging: the list of tags, one per word; span QA: the answer text ("" = no answer);
- parsing: a pair `(heads, relations)` of lists, one entry per word (heads 1-based, 0 = ROOT);
- seq2seq: the output text (detokenised, as it would be written to a file).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from xfer.core.errors import UserError

TaskType = Literal["classification", "regression", "tagging", "span_qa", "parsing", "seq2seq"]
Split = Literal["train", "dev", "test"]


@dataclass(frozen=True)
class SentenceExample:
    """One sentence or sentence pair. `label` is a label string (classification), a float
    (regression) or None when the split is unlabelled (e.g. a GLUE test set)."""

    id: str
    text_a: str
    text_b: str | None = None
    label: str | float | None = None


@dataclass(frozen=True)
class TaggingExample:
    """A pre-tokenised sentence with one tag per word (None when unlabelled)."""

    id: str
    words: tuple[str, ...]
    tags: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Answer:
    text: str
    start: int  # character offset in the context


@dataclass(frozen=True)
class SpanQAExample:
    """Extractive QA: answers are character spans of `context`; `is_impossible` for SQuAD 2.0."""

    id: str
    question: str
    context: str
    answers: tuple[Answer, ...] = ()
    is_impossible: bool = False
    title: str = ""


@dataclass(frozen=True)
class ParsingExample:
    """A pre-tokenised sentence with its dependency tree (None when unlabelled).

    `heads[i]` is the 1-based index of the head of word i+1, 0 for ROOT; `relations[i]` the
    label of that arc; `upos` the universal POS tags when the file has them (scorers may use
    them, e.g. to identify punctuation)."""

    id: str
    words: tuple[str, ...]
    heads: tuple[int, ...] | None = None
    relations: tuple[str, ...] | None = None
    upos: tuple[str, ...] | None = None


@dataclass(frozen=True)
class TranslationExample:
    """A source text and its reference translation (None when unlabelled). Raw, untokenised
    text: tokenisation belongs to the consumer, scoring (BLEU) to the task."""

    id: str
    source: str
    target: str | None = None


Example = SentenceExample | TaggingExample | SpanQAExample | ParsingExample | TranslationExample


@dataclass
class TaskInfo:
    """What a consumer needs to build a head for the task.

    Conventional `extra` keys: `score_range` (regression: (low, high) of gold scores, which
    objectives scale to [0, 1]); `unanswerable` (span QA: some questions have no answer);
    `tag_scheme` (tagging: "BIO"/"BIOES"). Every metric a task returns is in percent
    (`xfer.core.metrics`' convention), so no task declares a scale.
    """

    name: str
    type: TaskType
    labels: tuple[str, ...] = ()  # classification labels or tag set (tagging)
    main_metric: str = ""
    greater_is_better: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


class Task(abc.ABC):
    """Base class of every task component.

    Subclasses set `type`, implement `examples` and `evaluate`, and may override `labels`
    and `write_predictions`. They are constructed as `TaskClass(name, config)` where `config`
    is an instance of the config dataclass registered with the task's spec (or None).
    """

    type: ClassVar[TaskType]
    main_metric: ClassVar[str]
    greater_is_better: ClassVar[bool] = True

    def __init__(self, name: str, config: Any = None):
        self.name = name
        self.config = config

    @abc.abstractmethod
    def examples(self, split: Split) -> list[Example]:
        """All examples of `split`, in file order, each with a stable unique id.

        Raise `xfer.core.errors.DataError` (file, line, key) on malformed input; never skip
        a bad line silently. Raise `KeyError`-free `DataError` too when the split is missing.
        """

    def check_data(self, splits: Sequence[Split]) -> list[UserError]:
        """Read and parse the raw data of `splits` (no tokenisation, no model) and return every
        problem found instead of raising: the pre-flight of `xfer run` / `xfer validate --data`
        calls this for every task of every stage, so that a bad file of a late stage is reported
        before an early stage trains. A reader stops at a file's first error, so expect at most
        one problem per split.

        Default: `examples(split)` for each split (also `labels`, which tagging tasks read from
        the train file). Override to skip data that is not local (e.g. a hub download).
        """
        problems: list[UserError] = []
        for split in splits:
            try:
                self.examples(split)
            except UserError as exc:
                if not any(str(exc) == str(p) for p in problems):
                    problems.append(exc)
        if not problems:
            try:
                _ = self.labels  # tagging tasks read the tag set from the train file
            except UserError as exc:
                problems.append(exc)
        return problems

    @property
    def labels(self) -> tuple[str, ...]:
        """Label set (classification) or tag set (tagging), in a fixed order. Empty otherwise."""
        return ()

    def info(self) -> TaskInfo:
        return TaskInfo(
            name=self.name,
            type=self.type,
            labels=tuple(self.labels),
            main_metric=self.main_metric,
            greater_is_better=self.greater_is_better,
        )

    @abc.abstractmethod
    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        """Official metrics of `predictions` (keyed by example id) against `examples`' gold labels.

        Must include `main_metric`. Raise ValueError if an example has no prediction.
        """

    def write_predictions(
        self, directory: Path, split: Split, examples: Sequence[Example], predictions: Mapping[str, Any]
    ) -> Path:
        """Write predictions for `split` into `directory` in the task's own format and file name
        (e.g. GLUE's submission files); returns the file. Default: `<split>.tsv` with
        `id<TAB>prediction` lines."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{split}.tsv"
        with open(path, "w", encoding="utf-8") as out:
            out.write("id\tprediction\n")
            for example in examples:
                value = predictions[example.id]
                if isinstance(value, (list, tuple)):
                    value = " ".join(map(str, value))
                out.write(f"{example.id}\t{value}\n")
        return path


def missing_predictions(examples: Sequence[Example], predictions: Mapping[str, Any]) -> list[str]:
    """Ids of examples without a prediction (tasks raise on a non-empty result)."""
    return [ex.id for ex in examples if ex.id not in predictions]


def nonempty_examples(task: Task, split: Split) -> list[Example]:
    """`task.examples(split)`, or a UserError naming the task and split when there are none:
    training on nothing, or a dev metric of nothing, would otherwise fail far from the cause."""
    examples = task.examples(split)
    if not examples:
        raise UserError(f"{task.name}: the {'training' if split == 'train' else split} set is empty")
    return examples

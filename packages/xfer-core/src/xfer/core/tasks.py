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
import difflib
import math
import re
import traceback
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from xfer.core.atomic import atomic_write_text
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

TASK_TYPES: tuple[str, ...] = get_args(TaskType)

EXAMPLE_CLASSES: dict[str, type] = {
    "classification": SentenceExample,
    "regression": SentenceExample,
    "tagging": TaggingExample,
    "span_qa": SpanQAExample,
    "parsing": ParsingExample,
    "seq2seq": TranslationExample,
}
"""The example class `examples()` must return for each task type."""


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
    labels: tuple[str, ...] = ()  # classification labels, tag set (tagging) or relation set (parsing)
    main_metric: str = ""
    greater_is_better: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


class Task(abc.ABC):
    """Base class of every task component.

    Subclasses set `type`, implement `examples` and `evaluate`, and may override `labels`
    and `write_predictions`. They are constructed as `TaskClass(name, config)` where `config`
    is an instance of the config dataclass registered with the task's spec (or None), and `name`
    is what the recipe calls this entry: the registered name, or its `as:` alias (so messages
    tell two datasets of one loader apart). Do not choose behaviour by `name`.
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

        Default: `examples(split)` for each split (also `labels`, which tagging and parsing tasks
        read from the train file), then `check_examples` on what each split returned: the Task
        contract (type, example classes, unique ids, labels within `labels`, well-formed trees and
        answer spans, labelled training data), and that no split asked for is empty.
        An exception other than a UserError, from the plugin's reader, is reported as a plugin
        bug. Override to skip data that is not local (e.g. a hub download).
        """
        problems: list[UserError] = []

        def add(problem: UserError) -> None:
            if not any(str(problem) == str(p) for p in problems):
                problems.append(problem)

        try:
            task_type(self)
        except UserError as exc:
            return [exc]  # examples cannot be checked against an unknown type
        read: dict[str, list[Example]] = {}
        for split in dict.fromkeys(splits):
            try:
                read[split] = self.examples(split)
            except UserError as exc:
                add(exc)
            except Exception as exc:  # a bug in the plugin's reader: report it, do not crash the pre-flight
                add(TaskContractError(self.name, split, f"examples() failed: {describe_failure(exc)}; plugin bug"))
        try:
            _ = self.labels  # tagging tasks read the tag set from the train file
        except UserError as exc:
            if not problems:  # a broken train file is already reported
                add(exc)
            return problems  # without labels, the examples cannot be checked
        except Exception as exc:
            add(TaskContractError(self.name, None, f"its `labels` failed: {describe_failure(exc)}; plugin bug"))
            return problems
        for split, examples in read.items():
            try:
                check_examples(self, split, examples)
            except UserError as exc:
                add(exc)
                continue  # not a list (None, a numpy array): "is empty" would be a second, wrong problem
            # The stage refuses an empty train or dev set too, but only after upstream stages ran. Any
            # other split is read only because the stage predicts it (`predict: [test]`): an empty one
            # wrote a header-only prediction file without a word (a toy task's `test_size: 0`).
            # Checked only once `check_examples` has found a list: `not examples` was a bare ValueError
            # ("truth value of an array is ambiguous") that ended the pre-flight for a numpy array, and
            # added "the training set is empty" beside "examples() returned a NoneType" for a None.
            if not examples:
                add(empty_split(self, split))
        return problems

    @property
    def labels(self) -> tuple[str, ...]:
        """Label set (classification), tag set (tagging) or relation set (parsing; may be empty),
        in a fixed order. Empty otherwise."""
        return ()

    def info(self) -> TaskInfo:
        main_metric = getattr(self, "main_metric", None)
        if not isinstance(main_metric, str) or not main_metric:
            raise TaskContractError(
                self.name,
                None,
                f"{type(self).__name__} sets no `main_metric` (the name of its main metric); plugin bug",
            )
        return TaskInfo(
            name=self.name,
            type=task_type(self),
            labels=tuple(self.labels),
            main_metric=main_metric,
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
        `id<TAB>prediction` lines (a list or tuple joined by spaces).

        The default used to stream into the file: a missing prediction stopped it halfway on a bare
        KeyError, leaving a truncated file in place of the previous one; predictions for ids of
        another split were left out without a word; a value holding a tab or a line break split
        its row in two. Now every example has exactly one prediction, no field holds a tab or a
        line break (a ValueError naming the example; nothing is written), and the file is replaced
        atomically."""
        check_prediction_ids(self.name, examples, predictions)
        lines = ["id\tprediction"]
        for example in examples:
            value = predictions[example.id]
            if isinstance(value, (list, tuple)):
                value = " ".join(map(str, value))
            row = f"{example.id}\t{value}"
            if row.count("\t") != 1 or any(c in row for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
                raise ValueError(
                    f"{self.name}: example {example.id!r}: its id or prediction {value!r} holds a tab or a line "
                    "break, which would split its row of the id<TAB>prediction file; write the task's own "
                    "write_predictions"
                )
            lines.append(row)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{split}.tsv"
        atomic_write_text(path, "\n".join(lines) + "\n")
        return path


def first_unknown_label(predicted: Sequence[str], labels: Sequence[str], gold: Sequence[str] = ()) -> int | None:
    """The position of the first predicted label that is neither one of `labels` (the task's set, as
    read from its training data) nor in `gold` (the example's own labels: a dev-only tag or relation,
    so gold given as predictions still scores 100), or None. A model predicts `labels` only; any other
    label came from elsewhere (another tag set, scheme or treebank) and was scored silently."""
    known = {*labels, *gold}
    return next((i for i, label in enumerate(predicted) if label not in known), None)


def task_slug(task: str) -> str:
    """A task's name or alias as a folder or file name part (`glue/rte` -> `glue-rte`): stages'
    trial, prediction and model folders (trials/<slug>/, predictions/<slug>/, models/<slug>/)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", task)


def missing_predictions(examples: Sequence[Example], predictions: Mapping[str, Any]) -> list[str]:
    """Ids of examples without a prediction (tasks raise on a non-empty result)."""
    return [ex.id for ex in examples if ex.id not in predictions]


def check_prediction_ids(
    task: str, examples: Sequence[Example], predictions: Mapping[str, Any], what: str = "example"
) -> None:
    """A ValueError unless `predictions` holds exactly the ids of `examples` (`what` names them in
    the message: "sentence", "question"). For `write_predictions`: a missing id makes a silently
    shorter file, and an unknown one means predictions of another split or file, which writing only
    the known ids would hide."""
    missing = missing_predictions(examples, predictions)
    if missing:
        raise ValueError(f"{task}: no prediction for {what} {missing[0]!r} ({len(missing)} missing)")
    known = {example.id for example in examples}
    unknown = [key for key in predictions if key not in known]
    if unknown:
        raise ValueError(
            f"{task}: {len(unknown)} prediction(s) for ids that are not {what}s of this split, "
            f"e.g. {unknown[0]!r} (predictions of another split?)"
        )


def nonempty_examples(task: Task, split: Split) -> list[Example]:
    """`task.examples(split)`, or a UserError naming the task and split when there are none:
    training on nothing, or a dev metric of nothing, would otherwise fail far from the cause."""
    examples = task.examples(split)
    check_examples(task, split, examples)
    if not examples:
        raise empty_split(task, split)
    return examples


def empty_split(task: Task, split: Split) -> UserError:
    """The error for a split without examples (an empty file, a filter that kept nothing)."""
    return UserError(f"{task.name}: the {'training' if split == 'train' else split} set is empty")


# --- the contract, checked -------------------------------------------------------------------


class TaskContractError(UserError):
    """A task broke the Task contract (usually a plugin bug): says which task, split and example."""

    def __init__(self, task: str, split: str | None, detail: str, example_id: str | None = None):
        self.task, self.split, self.detail, self.example_id = task, split, detail, example_id
        where = f" ({split})" if split else ""
        super().__init__(f"task {task!r}{where}: {detail}")


class UnseenTagsWarning(UserWarning):
    """A tagging task's dev or test split has gold tags outside its (training) tag set, or a
    parsing task's has gold relations outside its (training) relation set."""


def task_type(task: Task) -> str:
    """`task.type`, or a TaskContractError when it is missing or not one of TaskType's values."""
    value = getattr(task, "type", None)
    cls = type(task).__name__
    expected = ", ".join(TASK_TYPES)
    if value is None:
        raise TaskContractError(task.name, None, f"{cls} sets no `type` (one of {expected}); plugin bug")
    if not isinstance(value, str) or value not in TASK_TYPES:
        close = difflib.get_close_matches(str(value), TASK_TYPES, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise TaskContractError(
            task.name, None, f"{cls}.type is {value!r}, not a task type ({hint}expected one of {expected}); plugin bug"
        )
    return value


def describe_failure(exc: BaseException) -> str:
    """`Type: message at file:line` of the innermost frame, for a plugin error reported without a traceback."""
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        text += f" at {frames[-1].filename}:{frames[-1].lineno}"
    return text


def _show_labels(labels: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(repr(label) for label in labels[:limit])
    return f"({shown})" if len(labels) <= limit else f"({shown}, ... {len(labels)} in all)"


_LABELS_ARE = {"classification": "labels", "tagging": "labels (its tag set)", "parsing": "labels (its relation set)"}


def _check_labels(task: Task, kind: str) -> tuple[str, ...]:
    """The label set of a classification, tagging or parsing task: a sequence of unique strings,
    non-empty except for parsing (a parsing task may leave its relation set unstated)."""
    labels = task.labels
    what = _LABELS_ARE[kind]
    if not isinstance(labels, (tuple, list)):
        raise TaskContractError(
            task.name,
            None,
            f"its {what} is a {type(labels).__name__}, not a tuple of strings in a fixed order; plugin bug",
        )
    if not labels and kind != "parsing":
        raise TaskContractError(task.name, None, f"a {kind} task needs labels, but its {what} is empty; plugin bug")
    for label in labels:  # a loop, not next(..., None): a None label must be found too
        if not isinstance(label, str):
            raise TaskContractError(
                task.name, None, f"its {what} has {label!r} ({type(label).__name__}), not a string; plugin bug"
            )
    if len(set(labels)) != len(labels):
        twice = next(label for i, label in enumerate(labels) if label in labels[:i])
        raise TaskContractError(task.name, None, f"its {what} lists {twice!r} twice; plugin bug")
    return tuple(labels)


def _check_score_range(task: Task) -> None:
    """A regression task's `score_range` (TaskInfo.extra), which objectives scale targets by, must be
    two finite numbers, low < high: (5, 5) was a bare ZeroDivisionError in the objective, once the
    stages before it had run, and (5, 0) flipped every target silently."""
    score_range = task.info().extra.get("score_range")
    if score_range is None:
        return
    try:
        low, high = (float(v) for v in score_range)
        ok = math.isfinite(low) and math.isfinite(high) and low < high
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise TaskContractError(
            task.name,
            None,
            f"info().extra['score_range'] is {score_range!r}: it must be (low, high), two finite numbers with "
            "low < high (the range of the gold scores); plugin bug",
        )


def _gold(example: Any) -> Any:
    """The gold annotation of an example (None when unlabelled). A span-QA question is labelled by
    its answers or by `is_impossible`; one with neither is an unlabelled question (a hidden test
    set), which training cannot use and a labelled split must not contain: it would train, or be
    scored, as unanswerable."""
    if isinstance(example, SentenceExample):
        return example.label
    if isinstance(example, TaggingExample):
        return example.tags
    if isinstance(example, ParsingExample):
        return example.heads
    if isinstance(example, TranslationExample):
        return example.target
    if isinstance(example, SpanQAExample) and not example.answers and not example.is_impossible:
        return None
    return ()


def _no_gold(kind: str) -> tuple[str, str]:
    """How an unlabelled and a labelled example of a task type are described (span QA has no
    single label field)."""
    if kind == "span_qa":
        return "has no answers and is not is_impossible", "has answers or is_impossible"
    return "has no label", "has one"


def _is_words(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(isinstance(word, str) for word in value)


def _open_labels(example: Any) -> Sequence[Any]:
    """The gold strings of an example that a tagging or parsing task's training label set may lack
    in dev/test: tags (tagging) or relations (parsing); () when unlabelled or another kind."""
    if isinstance(example, TaggingExample):
        return example.tags or ()
    if isinstance(example, ParsingExample) and example.heads is not None:
        return example.relations or ()
    return ()


def _answer_problem(number: int, answer: Any, context: str) -> str | None:
    """What is wrong with answer `number` (1-based) of a span-QA example, or None: an `Answer`
    whose text is a string found in `context` at character offset `start` (SQuAD's invariant)."""
    if not isinstance(answer, Answer):
        return f"has answer {number} of type {type(answer).__name__}, not an Answer(text, start)"
    text, start = answer.text, answer.start
    if not isinstance(text, str):
        return f"has answer {number} with text {text!r} ({type(text).__name__}), not a string"
    if not text.strip():  # "" matches anywhere, and neither it nor " " is a token span to train on
        return (
            f"has answer {number} with {'empty' if not text else 'whitespace-only'} text {text!r}; an answer is "
            "a span of the context with a word in it (a question without one has no answers and is_impossible True)"
        )
    if isinstance(start, bool) or not isinstance(start, int):
        return (
            f"has answer {number} {text!r} with start {start!r} ({type(start).__name__}), "
            "not a character offset (an int)"
        )
    if not 0 <= start <= len(context) - len(text):
        return f"has answer {number} {text!r} at character {start}, outside its context ({len(context)} characters)"
    found = context[start : start + len(text)]
    if found != text:
        return (
            f"has answer {number} {text!r} at character {start}, but the context there reads {found!r} "
            "(an answer's start is the offset of its text in the context)"
        )
    return None


def _span_qa_problem(example: SpanQAExample) -> str | None:
    """What is wrong with a span-QA example, or None. `is_impossible` must be a real bool (a string
    "false" would read as true) and an unanswerable question has no answers: objectives ignore
    the answers of an unanswerable question and the official SQuAD 2.0 score counts them, so the
    two would disagree on what is gold."""
    if not isinstance(example.question, str) or not isinstance(example.context, str):
        return f"has question {type(example.question).__name__} / context {type(example.context).__name__}, not strings"
    if not isinstance(example.answers, (tuple, list)):
        return f"has answers of type {type(example.answers).__name__}, not a tuple of Answers"
    impossible = example.is_impossible
    if not isinstance(impossible, bool):
        return f"has is_impossible {impossible!r} ({type(impossible).__name__}), not a bool"
    if impossible and example.answers:
        count = len(example.answers)
        return (
            f"is_impossible (unanswerable) but has {count} answer{'s' if count != 1 else ''}; "
            "an unanswerable question has none"
        )
    for number, answer in enumerate(example.answers, start=1):
        problem = _answer_problem(number, answer, example.context)
        if problem is not None:
            return problem
    return None


def _example_problem(
    example: Any, kind: str, labels: tuple[str, ...], label_set: frozenset[str], in_labels: bool = True
) -> str | None:
    """What is wrong with one labelled or unlabelled example of the right class, or None.
    `in_labels` False (tagging and parsing dev/test, parsing without a relation set): tags and
    relations need only be strings, one per word."""
    if isinstance(example, SentenceExample):
        if not isinstance(example.text_a, str) or not isinstance(example.text_b, (str, type(None))):
            return f"has text_a {type(example.text_a).__name__} / text_b {type(example.text_b).__name__}, not strings"
        label = example.label
        if label is None:
            return None
        if kind == "classification" and (not isinstance(label, str) or label not in label_set):
            return f"has label {label!r}, not one of its labels {_show_labels(labels)}"
        if kind == "regression":
            if isinstance(label, bool) or not isinstance(label, (int, float)):
                return f"has label {label!r} ({type(label).__name__}), not a number (a regression label is a float)"
            if not math.isfinite(label):
                return f"has label {label!r}, not a finite number"
        return None
    if isinstance(example, TaggingExample):
        if not _is_words(example.words):
            return f"has words of type {type(example.words).__name__}, not a tuple of strings"
        tags = example.tags
        if tags is None:
            return None
        if not isinstance(tags, (tuple, list)) or len(tags) != len(example.words):
            count = f"{len(tags)} tags" if isinstance(tags, (tuple, list)) else f"tags of type {type(tags).__name__}"
            return f"has {count} for {len(example.words)} words (one tag per word expected)"
        for position, tag in enumerate(tags, start=1):
            if not isinstance(tag, str) or (in_labels and tag not in label_set):
                return f"has tag {tag!r} (word {position}), not one of its labels {_show_labels(labels)}"
        return None
    if isinstance(example, ParsingExample):
        if not _is_words(example.words):
            return f"has words of type {type(example.words).__name__}, not a tuple of strings"
        n = len(example.words)
        # `punctuation: upos` scores the words whose UPOS is not PUNCT and the CoNLL-U writer zips it with
        # the words: a tuple of another length ended the stage in a bare "zip() argument is shorter"
        # ValueError at the first evaluation, after training, far from the reader that built it
        if example.upos is not None and (not _is_words(example.upos) or len(example.upos) != n):
            count = f"{len(example.upos)} UPOS tags" if _is_words(example.upos) else f"upos {example.upos!r}"
            return f"has {count} for {n} words (one string per word expected, or upos None)"
        if example.heads is None:
            return None
        for name, value in (("heads", example.heads), ("relations", example.relations)):
            if not isinstance(value, (tuple, list)) or len(value) != n:
                count = f"{len(value)} {name}" if isinstance(value, (tuple, list)) else f"{name} {value!r}"
                return f"has {count} for {n} words (one per word expected)"
        for head in example.heads:  # a loop, not next(..., None): a None head must be found too
            if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head <= n:
                return f"has head {head!r}, not a word index in 0..{n} (1-based, 0 = ROOT)"
        for position, relation in enumerate(example.relations, start=1):
            if not isinstance(relation, str):
                return f"has relation {relation!r} (word {position}), not a string"
            if in_labels and relation not in label_set:
                return f"has relation {relation!r} (word {position}), not one of its labels {_show_labels(labels)}"
        return None
    if isinstance(example, SpanQAExample):
        return _span_qa_problem(example)
    if isinstance(example, TranslationExample) and (
        not isinstance(example.source, str) or not isinstance(example.target, (str, type(None)))
    ):
        return f"has source {type(example.source).__name__} / target {type(example.target).__name__}, not strings"
    return None


def check_examples(task: Task, split: str, examples: Any) -> None:
    """Raise a TaskContractError (a UserError naming the task, split and first offending example)
    when `examples` (what `task.examples(split)` returned) breaks the Task contract: `type` is
    missing or unknown; the result is not a list of the example class of that type; ids are not
    unique strings; `labels` is not a sequence of unique strings, or is empty for a
    classification or tagging task; a gold label is outside `labels` (regression: not a finite
    number), or tags do not match the words one to one; a parse tree has not one head (a word
    index, 0 = ROOT) and one relation (a string within `labels`) per word, or its `upos` (when not
    None) has not one string per word; a span-QA answer is
    not an `Answer` whose non-empty text is the context's at its `start` (an int offset within
    the context: SQuAD's invariant), `is_impossible` is not a bool, or an unanswerable question
    has answers; a training example is unlabelled (span QA: neither answers nor `is_impossible`),
    or a split mixes labelled and unlabelled examples.

    A tagging task's `labels` is the tag set of its training data (CoNLL reads it from the train
    file), and a parsing task's the relation set of its training data (CoNLL-U likewise), so
    only training tags and relations must be within it. A dev or test tag or relation outside it
    (an entity type or relation subtype unseen in training) is legitimate: it cannot be
    predicted and counts as a miss. Such tags or relations get one `UnseenTagsWarning` per
    split, naming how many there are and the first one. A parsing task with an empty `labels`
    (no relation set stated) has its relations checked to be strings only.

    Unlabelled dev and test splits (every example's gold None, e.g. GLUE test sets) are allowed;
    a span-QA question is unlabelled when it has no answers and is not `is_impossible`, so an
    answerable dev question missing its answers is refused (its split is otherwise labelled)
    instead of being scored as unanswerable.
    One pass over the examples: cheap next to reading them. `Task.check_data` (pre-flight) and
    `nonempty_examples` (stage time) call it.
    """
    kind = task_type(task)
    expected = EXAMPLE_CLASSES[kind]
    if not isinstance(examples, list):
        raise TaskContractError(
            task.name,
            split,
            f"examples() returned a {type(examples).__name__}, not a list of {expected.__name__}s; plugin bug",
        )
    labels: tuple[str, ...] = _check_labels(task, kind) if kind in ("classification", "tagging", "parsing") else ()
    if kind == "regression":
        _check_score_range(task)
    label_set = frozenset(labels)
    # tagging and parsing: labels is the training tag / relation set; dev/test ones outside it are
    # counted, not refused (parsing without a relation set: relations need only be strings)
    in_labels = bool(labels) and (kind == "classification" or split == "train")
    open_set = bool(labels) and not in_labels  # tagging or parsing, dev or test
    unseen_tags = 0
    first_unseen: tuple[str, str] | None = None  # (tag, example id)
    seen: dict[str, int] = {}
    first_labelled: str | None = None
    first_unlabelled: str | None = None
    for position, example in enumerate(examples, start=1):
        if not isinstance(example, expected):
            raise TaskContractError(
                task.name,
                split,
                f"example #{position} is a {type(example).__name__}, not a {expected.__name__} "
                f"(what a {kind} task's examples() must return); plugin bug",
            )
        ident = example.id
        if not isinstance(ident, str) or not ident:
            raise TaskContractError(
                task.name,
                split,
                f"example #{position} has id {ident!r}; ids must be non-empty strings (an empty id in the data that "
                "the task's reader let through, or a plugin bug)",
            )
        if ident in seen:
            raise TaskContractError(
                task.name,
                split,
                f"examples #{seen[ident]} and #{position} have the same id {ident!r}; examples() must give "
                "every example its own id (predictions are keyed by id): a duplicate id in the data that the "
                "task's reader let through, or a plugin bug",
                ident,
            )
        seen[ident] = position
        problem = _example_problem(example, kind, labels, label_set, in_labels)
        if problem is not None:
            raise TaskContractError(task.name, split, f"example {ident!r} {problem}", ident)
        if open_set:
            unseen = [tag for tag in _open_labels(example) if tag not in label_set]
            if unseen:
                unseen_tags += len(unseen)
                first_unseen = first_unseen or (unseen[0], ident)
        if _gold(example) is None:
            if split == "train":
                raise TaskContractError(
                    task.name,
                    split,
                    f"training example {ident!r} {_no_gold(kind)[0]}; a training set must be labelled",
                    ident,
                )
            first_unlabelled = first_unlabelled or ident
        else:
            first_labelled = first_labelled or ident
        if first_labelled is not None and first_unlabelled is not None:
            unlabelled, labelled = _no_gold(kind)
            raise TaskContractError(
                task.name,
                split,
                f"example {first_unlabelled!r} {unlabelled} but example {first_labelled!r} {labelled}; a split "
                "is either labelled or unlabelled throughout",
                first_unlabelled,
            )
    if first_unseen is not None:
        tag, ident = first_unseen
        what = "tag" if kind == "tagging" else "relation"
        warnings.warn(
            UnseenTagsWarning(
                f"task {task.name!r} ({split}): {unseen_tags} gold {what}{'s' if unseen_tags != 1 else ''} not in "
                f"the training {what} set, first {tag!r} in example {ident!r}; they count as misses"
            ),
            stacklevel=1,  # one location: pre-flight and the stage's own check show it once
        )

"""The Task contract, checked (`xfer.core.tasks.check_examples`): a plugin task that breaks it is
reported in pre-flight (`Task.check_data`, `xfer validate --data`, `xfer run`) and where stages
load examples (`nonempty_examples`), naming the task, split and example, never with a traceback
and never by training or scoring silently wrong data."""

# no `from __future__ import annotations`: the recipe validator reads real type objects
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from xfer.core import cli
from xfer.core.config import knob
from xfer.core.errors import UserError
from xfer.core.hookspecs import hookimpl
from xfer.core.plugins import set_default_host
from xfer.core.specs import ComponentSpec
from xfer.core.tasks import (
    Answer,
    ParsingExample,
    SentenceExample,
    SpanQAExample,
    TaggingExample,
    Task,
    TaskContractError,
    TranslationExample,
    UnseenTagsWarning,
    check_examples,
    nonempty_examples,
)
from xfer.testing import make_host, run_recipe_file, write_recipe


class MemTask(Task):
    """An in-memory task: `data` maps split -> examples (or a callable returning them)."""

    type = "classification"
    main_metric = "accuracy"
    label_set: Any = ("a", "b")

    def __init__(self, name: str, config: Any = None, data: Mapping[str, Any] | None = None):
        super().__init__(name, config)
        self.data = dict(data or {})

    @property
    def labels(self) -> Any:
        return self.label_set

    def examples(self, split):
        value = self.data[split]
        return value() if callable(value) else value

    def evaluate(self, examples: Sequence[Any], predictions: Mapping[str, Any]) -> dict[str, float]:
        return {"accuracy": 0.0}


def task(kind: str = "classification", labels: Any = ("a", "b"), **data: Any) -> MemTask:
    cls = type("MemTask", (MemTask,), {"type": kind, "label_set": labels})
    return cls("mine/task", None, data)


def sentences(split: str, *labels: Any) -> list[SentenceExample]:
    return [SentenceExample(f"{split}-{i}", f"text {i}", label=label) for i, label in enumerate(labels, start=1)]


GOOD = {"train": sentences("train", "a", "b", "a"), "dev": sentences("dev", "b", "a")}


def contract_error(t: Task, split: str) -> TaskContractError:
    """The error of `check_examples`, which `nonempty_examples` and `check_data` must agree on."""
    with pytest.raises(TaskContractError) as caught:
        check_examples(t, split, t.examples(split))
    with pytest.raises(TaskContractError) as at_stage:
        nonempty_examples(t, split)
    assert str(at_stage.value) == str(caught.value)
    assert str(caught.value) in [str(p) for p in t.check_data(["train", "dev"])]
    assert isinstance(caught.value, UserError)
    return caught.value


# --- good data passes ---------------------------------------------------------------------------


def test_clean_tasks_of_every_type_pass() -> None:
    words = ("a", "b")
    cases = [
        task(**GOOD),
        task("regression", (), train=[SentenceExample("t1", "x", label=1.5), SentenceExample("t2", "y", label=2)]),
        task("tagging", ("B", "O"), train=[TaggingExample("t1", words, ("B", "O"))], dev=[TaggingExample("d1", words)]),
        task("parsing", ("nsubj", "root"), train=[ParsingExample("t1", words, (2, 0), ("nsubj", "root"))]),
        task("seq2seq", (), train=[TranslationExample("t1", "ein Hund", "a dog")]),
        task(
            "span_qa",
            (),
            train=[SpanQAExample("t1", "who?", "me", (Answer("me", 0),)), SpanQAExample("t2", "q", "c", (), True)],
        ),
    ]
    for t in cases:
        for split in t.data:
            assert nonempty_examples(t, split) == t.examples(split)
        assert t.check_data(list(t.data)) == [], t.type


def test_unlabelled_dev_and_test_splits_are_allowed() -> None:
    """GLUE test sets (and dev sets of some tasks) have no labels: label None throughout."""
    t = task(train=GOOD["train"], dev=sentences("dev", None, None), test=sentences("test", None))
    assert t.check_data(["train", "dev", "test"]) == []
    assert nonempty_examples(t, "test")[0].label is None


# --- 1. duplicate ids -------------------------------------------------------------------------


def test_duplicate_ids_are_reported_with_both_positions() -> None:
    dev = [SentenceExample("same-id", "x", label="a"), SentenceExample("d2", "y", label="b")]
    dev.append(SentenceExample("same-id", "z", label="b"))
    error = contract_error(task(train=GOOD["train"], dev=dev), "dev")
    assert str(error) == (
        "task 'mine/task' (dev): examples #1 and #3 have the same id 'same-id'; examples() must give every "
        "example its own id (predictions are keyed by id): a duplicate id in the data that the task's reader let "
        "through, or a plugin bug"
    )
    assert error.example_id == "same-id" and error.split == "dev"


@pytest.mark.parametrize("ident", [3, "", None])
def test_ids_must_be_non_empty_strings(ident: Any) -> None:
    error = contract_error(task(train=[SentenceExample(ident, "x", label="a")], dev=GOOD["dev"]), "train")
    assert f"example #1 has id {ident!r}; ids must be non-empty strings (an empty id in the data" in str(error)


# --- 2. label sets and labels outside them ------------------------------------------------------


def test_label_outside_the_label_set() -> None:
    train = [*sentences("train", "a", "b"), SentenceExample("train-3", "x", label="neg")]
    error = contract_error(task(train=train, dev=GOOD["dev"]), "train")
    assert str(error) == "task 'mine/task' (train): example 'train-3' has label 'neg', not one of its labels ('a', 'b')"


def test_dev_label_outside_the_label_set() -> None:
    error = contract_error(task(train=GOOD["train"], dev=sentences("dev", "a", 1)), "dev")
    assert "example 'dev-2' has label 1, not one of its labels ('a', 'b')" in str(error)


def test_a_long_label_set_is_abbreviated() -> None:
    labels = tuple(f"l{i}" for i in range(40))
    error = contract_error(task(labels=labels, train=sentences("train", "zz"), dev=GOOD["dev"]), "train")
    assert ", ... 40 in all)" in str(error) and "'l11'" in str(error) and "'l12'" not in str(error)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ((), "a classification task needs labels, but its labels is empty; plugin bug"),
        ({"a", "b"}, "its labels is a set, not a tuple of strings in a fixed order; plugin bug"),
        (("a", "a", "b"), "its labels lists 'a' twice; plugin bug"),
        (("a", 1), "its labels has 1 (int), not a string; plugin bug"),
        (("a", None), "its labels has None (NoneType), not a string; plugin bug"),
    ],
)
def test_a_classification_label_set_must_be_unique_strings(labels: Any, expected: str) -> None:
    error = contract_error(task(labels=labels, **GOOD), "train")
    assert str(error) == f"task 'mine/task': {expected}"


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("3.5", "has label '3.5' (str), not a number"),
        (True, "has label True (bool), not a number"),
        (math.nan, "has label nan, not a finite number"),
        (math.inf, "has label inf, not a finite number"),
    ],
)
def test_regression_labels_are_finite_numbers(label: Any, expected: str) -> None:
    t = task("regression", (), train=[SentenceExample("t1", "x", label=1.0), SentenceExample("t2", "y", label=label)])
    assert f"example 't2' {expected}" in str(contract_error(t, "train"))


# --- 3. unlabelled training examples, wrong example objects --------------------------------------


def test_unlabelled_training_example() -> None:
    error = contract_error(task(train=sentences("train", "a", None), dev=GOOD["dev"]), "train")
    assert str(error) == (
        "task 'mine/task' (train): training example 'train-2' has no label; a training set must be labelled"
    )


def test_a_split_mixing_labelled_and_unlabelled_examples() -> None:
    """Scoring an unlabelled example as wrong would silently lower the metric."""
    error = contract_error(task(train=GOOD["train"], dev=sentences("dev", "a", None, "b")), "dev")
    assert "example 'dev-2' has no label but example 'dev-1' has one" in str(error)


def test_dicts_instead_of_examples() -> None:
    dev = [{"id": "dev-1", "text_a": "x", "label": "a"}]
    error = contract_error(task(train=GOOD["train"], dev=dev), "dev")
    assert str(error) == (
        "task 'mine/task' (dev): example #1 is a dict, not a SentenceExample (what a classification task's "
        "examples() must return); plugin bug"
    )


def test_examples_of_another_task_type() -> None:
    train = [TaggingExample("t1", ("x",), ("a",))]
    assert "example #1 is a TaggingExample, not a SentenceExample" in str(contract_error(task(train=train), "train"))


def test_examples_must_be_a_list() -> None:
    t = task(train=lambda: (e for e in GOOD["train"]), dev=GOOD["dev"])
    assert "examples() returned a generator, not a list of SentenceExamples" in str(contract_error(t, "train"))


def test_text_must_be_a_string() -> None:
    train = [SentenceExample("t1", None, label="a")]  # type: ignore[arg-type]
    assert "example 't1' has text_a NoneType / text_b NoneType, not strings" in str(
        contract_error(task(train=train), "train")
    )


def test_a_crashing_reader_is_a_reported_plugin_bug() -> None:
    def crash() -> list:
        return {}.missing  # type: ignore[attr-defined]

    problems = task(train=crash, dev=GOOD["dev"]).check_data(["train", "dev"])
    assert len(problems) == 1
    text = str(problems[0])
    assert text.startswith("task 'mine/task' (train): examples() failed: AttributeError: ")
    assert f"{__file__}:" in text and text.endswith("; plugin bug")


def test_a_crashing_labels_property_is_a_reported_plugin_bug() -> None:
    t = task(labels=(), **GOOD)
    type(t).labels = property(lambda self: 1 / 0)  # type: ignore[assignment]
    problems = [str(p) for p in t.check_data(["train"])]
    assert len(problems) == 1 and "task 'mine/task': its `labels` failed: ZeroDivisionError" in problems[0]


# --- 4. the task type ---------------------------------------------------------------------------


class NoType(Task):
    main_metric = "accuracy"

    def examples(self, split):
        return GOOD[split]

    def evaluate(self, examples, predictions):
        return {"accuracy": 0.0}


def test_a_task_without_type() -> None:
    t = NoType("mine/notype")
    expected = (
        "task 'mine/notype': NoType sets no `type` (one of classification, regression, tagging, span_qa, "
        "parsing, seq2seq); plugin bug"
    )
    for check in (t.info, lambda: nonempty_examples(t, "train"), lambda: check_examples(t, "train", [])):
        with pytest.raises(TaskContractError) as caught:
            check()
        assert str(caught.value) == expected
    assert [str(p) for p in t.check_data(["train", "dev"])] == [expected]


def test_a_misspelt_type_gets_a_suggestion() -> None:
    t = task("classifcation", **GOOD)
    with pytest.raises(
        TaskContractError, match=r"MemTask.type is 'classifcation', not a task type \(did you mean 'classification'\?"
    ):
        t.info()
    assert len(t.check_data(["train"])) == 1
    with pytest.raises(TaskContractError, match="not a task type"):
        nonempty_examples(t, "train")


def test_a_task_without_main_metric() -> None:
    t = type("NoMetric", (NoType,), {"type": "classification", "main_metric": None, "labels": ("a", "b")})("m/x")
    with pytest.raises(TaskContractError, match="NoMetric sets no `main_metric`"):
        t.info()


# --- 5. tagging and parsing ---------------------------------------------------------------------


def test_tagging_needs_one_tag_per_word() -> None:
    t = task("tagging", ("B", "O"), train=[TaggingExample("s1", ("a", "b", "c"), ("B", "O"))])
    assert "example 's1' has 2 tags for 3 words (one tag per word expected)" in str(contract_error(t, "train"))


def test_tags_must_be_in_the_tag_set() -> None:
    t = task("tagging", ("B", "O"), train=[TaggingExample("s1", ("a", "b"), ("B", "I"))])
    assert "example 's1' has tag 'I' (word 2), not one of its labels ('B', 'O')" in str(contract_error(t, "train"))


def test_dev_and_test_tags_unseen_in_training_are_a_warning_not_an_error() -> None:
    """A tagging task's labels are its training tag set (CoNLL reads them from the train file): a dev
    entity type unseen in training is real data, scored as a miss, not a contract breach."""
    words = ("a", "b", "c")
    t = task(
        "tagging",
        ("B", "O"),
        train=[TaggingExample("t1", words, ("B", "O", "O"))],
        dev=[
            TaggingExample("d1", words, ("B", "O", "O")),
            TaggingExample("d2", words, ("B-MISC", "I-MISC", "O")),
            TaggingExample("d3", words, ("O", "O", "X")),
        ],
        test=[TaggingExample("s1", words, ("O", "Y", "O"))],
    )
    for split, expected in (
        ("dev", "task 'mine/task' (dev): 3 gold tags not in the training tag set, first 'B-MISC' in example 'd2'"),
        ("test", "task 'mine/task' (test): 1 gold tag not in the training tag set, first 'Y' in example 's1'"),
    ):
        with pytest.warns(UnseenTagsWarning) as caught:
            assert nonempty_examples(t, split) == t.examples(split)
        assert [str(w.message) for w in caught] == [f"{expected}; they count as misses"]
    with pytest.warns(UnseenTagsWarning):
        assert t.check_data(["train", "dev", "test"]) == []


def test_dev_tags_must_still_be_one_string_per_word() -> None:
    words = ("a", "b")
    t = task("tagging", ("B", "O"), train=[TaggingExample("t1", words, ("B", "O"))])
    t.data["dev"] = [TaggingExample("d1", words, ("B-MISC",))]
    assert "example 'd1' has 1 tags for 2 words (one tag per word expected)" in str(contract_error(t, "dev"))
    t.data["dev"] = [TaggingExample("d1", words, ("B", 3))]
    assert "example 'd1' has tag 3 (word 2), not one of its labels" in str(contract_error(t, "dev"))


def test_a_dev_set_within_the_tag_set_gives_no_warning() -> None:
    words = ("a", "b")
    t = task("tagging", ("B", "O"), train=[TaggingExample("t1", words, ("B", "O"))])
    t.data["dev"] = [TaggingExample("d1", words, ("O", "B")), TaggingExample("d2", words, ("O", "O"))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert t.check_data(["train", "dev"]) == []


def test_tagging_words_are_a_sequence_of_strings() -> None:
    t = task("tagging", ("B", "O"), train=[TaggingExample("s1", "ab", ("B", "O"))])  # type: ignore[arg-type]
    assert "example 's1' has words of type str, not a tuple of strings" in str(contract_error(t, "train"))


def test_a_tagging_task_needs_a_tag_set() -> None:
    t = task("tagging", (), train=[TaggingExample("s1", ("a",), ("B",))])
    assert "a tagging task needs labels, but its labels (its tag set) is empty" in str(contract_error(t, "train"))


def test_parsing_trees_match_their_words() -> None:
    words = ("a", "b")
    short = task("parsing", (), train=[ParsingExample("s1", words, (0,), ("root",))])
    assert "example 's1' has 1 heads for 2 words" in str(contract_error(short, "train"))
    far = task("parsing", (), train=[ParsingExample("s1", words, (0, 3), ("root", "dep"))])
    assert "example 's1' has head 3, not a word index in 0..2" in str(contract_error(far, "train"))
    none = task("parsing", (), train=[ParsingExample("s1", words, (0, None), ("root", "dep"))])
    assert "example 's1' has head None, not a word index in 0..2" in str(contract_error(none, "train"))


def test_parsing_relations_match_their_words() -> None:
    t = task("parsing", (), train=[ParsingExample("s1", ("a", "b"), (2, 0), None)])
    assert "example 's1' has relations None for 2 words" in str(contract_error(t, "train"))


def test_parsing_relations_are_strings_even_without_a_relation_set() -> None:
    """A parsing task may leave `labels` empty: its relations need only be strings."""
    words = ("a", "b")
    fine = task("parsing", (), train=[ParsingExample("s1", words, (2, 0), ("anything", "goes"))])
    assert fine.check_data(["train"]) == []
    for split in ("train", "dev"):
        t = task("parsing", (), train=fine.data["train"], dev=fine.data["train"])
        t.data[split] = [ParsingExample("s1", words, (2, 0), ("nsubj", 3))]
        assert str(contract_error(t, split)) == (
            f"task 'mine/task' ({split}): example 's1' has relation 3 (word 2), not a string"
        )


def test_training_relations_must_be_in_the_relation_set() -> None:
    """conll/ud-parse's labels is the relation set of its train file: the relation indices of the
    parser's head (cvt.train's `index[r]`) exist only for those."""
    train = [ParsingExample("s1", ("a", "b"), (2, 0), ("obj", "root"))]
    error = contract_error(task("parsing", ("nsubj", "root"), train=train), "train")
    assert str(error) == (
        "task 'mine/task' (train): example 's1' has relation 'obj' (word 1), not one of its labels ('nsubj', 'root')"
    )
    assert error.example_id == "s1"


def test_dev_and_test_relations_unseen_in_training_are_a_warning_not_an_error() -> None:
    """UD dev/test files have relation subtypes the train file lacks: a miss, not a contract breach."""
    words = ("a", "b", "c")
    t = task(
        "parsing",
        ("nsubj", "root"),
        train=[ParsingExample("t1", words, (2, 0, 2), ("nsubj", "root", "nsubj"))],
        dev=[
            ParsingExample("d1", words, (2, 0, 2), ("nsubj", "root", "nsubj")),
            ParsingExample("d2", words, (2, 0, 2), ("nsubj:pass", "root", "obl:tmod")),
        ],
        test=[ParsingExample("s1", words, (2, 0, 2), ("nsubj", "root", "punct"))],
    )
    for split, expected in (
        (
            "dev",
            "task 'mine/task' (dev): 2 gold relations not in the training relation set, first 'nsubj:pass' "
            "in example 'd2'",
        ),
        (
            "test",
            "task 'mine/task' (test): 1 gold relation not in the training relation set, first 'punct' in example 's1'",
        ),
    ):
        with pytest.warns(UnseenTagsWarning) as caught:
            assert nonempty_examples(t, split) == t.examples(split)
        assert [str(w.message) for w in caught] == [f"{expected}; they count as misses"]
    with pytest.warns(UnseenTagsWarning):
        assert t.check_data(["train", "dev", "test"]) == []
    t.data["dev"] = [ParsingExample("d1", words)]  # unlabelled: no relations, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert t.check_data(["train", "dev"]) == []


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"nsubj", "root"}, "its labels (its relation set) is a set, not a tuple of strings in a fixed order"),
        (("root", "root"), "its labels (its relation set) lists 'root' twice"),
        (("root", None), "its labels (its relation set) has None (NoneType), not a string"),
    ],
)
def test_a_parsing_relation_set_must_be_unique_strings(labels: Any, expected: str) -> None:
    t = task("parsing", labels, train=[ParsingExample("s1", ("a",), (0,), ("root",))])
    assert str(contract_error(t, "train")) == f"task 'mine/task': {expected}; plugin bug"


def test_translation_source_must_be_a_string() -> None:
    t = task("seq2seq", (), train=[TranslationExample("p1", ["ein", "Hund"], "a dog")])  # type: ignore[arg-type]
    assert "example 'p1' has source list / target str, not strings" in str(contract_error(t, "train"))


def test_seq2seq_training_pairs_need_a_target() -> None:
    t = task("seq2seq", (), train=[TranslationExample("p1", "ein Hund")])
    assert "training example 'p1' has no label" in str(contract_error(t, "train"))


def test_checking_is_linear_and_cheap() -> None:
    """SST-2 has 67k training examples: one pass with set lookups, no quadratic scan."""
    big = [SentenceExample(f"train-{i}", "some text", label="ab"[i % 2]) for i in range(70_000)]
    check_examples(task(train=big), "train", big)  # well under a second; a quadratic check would not finish


# --- 6. span QA answers -------------------------------------------------------------------------


CONTEXT = "Die Zürcher Straßenbahn fährt seit 1882."


def qa(*answers: Any, context: Any = CONTEXT, question: Any = "Seit wann?") -> list[SpanQAExample]:
    return [SpanQAExample("q1", question, context, tuple(answers))]


def test_well_formed_answers_pass() -> None:
    """The SQuAD invariant: the context at `start` reads the answer text (offsets in characters,
    not bytes: the non-ASCII context before the answer would shift byte offsets)."""
    start = CONTEXT.index("1882")
    train = [
        *qa(Answer("1882", start), Answer("seit 1882", start - 5), Answer("Die", 0)),
        SpanQAExample("q2", "Und?", CONTEXT, (), is_impossible=True),
    ]
    t = task("span_qa", (), train=train, dev=qa(Answer("1882.", start)))
    assert t.check_data(["train", "dev"]) == []


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            Answer("1882", 0),
            "has answer 1 '1882' at character 0, but the context there reads 'Die ' (an answer's start is the "
            "offset of its text in the context)",
        ),
        (Answer("1882", 40), "has answer 1 '1882' at character 40, outside its context (40 characters)"),
        (Answer("Die", -1), "has answer 1 'Die' at character -1, outside its context (40 characters)"),
        (Answer("1882", "35"), "has answer 1 '1882' with start '35' (str), not a character offset (an int)"),
        (Answer("1882", None), "has answer 1 '1882' with start None (NoneType), not a character offset (an int)"),
        (Answer("Die", True), "has answer 1 'Die' with start True (bool), not a character offset (an int)"),
        (Answer(1882, 35), "has answer 1 with text 1882 (int), not a string"),
        ({"text": "1882", "answer_start": 35}, "has answer 1 of type dict, not an Answer(text, start)"),
    ],
)
def test_malformed_answers_are_reported(answer: Any, expected: str) -> None:
    for split in ("train", "dev"):
        t = task("span_qa", (), train=qa(Answer("Die", 0)), dev=qa(Answer("Die", 0)))
        t.data[split] = qa(Answer("Die", 0), answer)
        error = contract_error(t, split)
        assert str(error) == f"task 'mine/task' ({split}): example 'q1' {expected.replace('answer 1', 'answer 2')}"
        assert error.example_id == "q1"


def test_question_and_context_are_strings_and_answers_a_tuple() -> None:
    t = task("span_qa", (), train=qa(Answer("Die", 0), context=None))
    assert "example 'q1' has question str / context NoneType, not strings" in str(contract_error(t, "train"))
    t.data["train"] = [SpanQAExample("q1", "Seit wann?", CONTEXT, Answer("Die", 0))]  # type: ignore[arg-type]
    assert "example 'q1' has answers of type Answer, not a tuple of Answers" in str(contract_error(t, "train"))


def impossible(ident: str = "q2", *answers: Answer, flag: Any = True) -> SpanQAExample:
    return SpanQAExample(ident, "Wer baute sie?", CONTEXT, tuple(answers), is_impossible=flag)


def test_an_unanswerable_question_has_no_answers() -> None:
    """Objectives train an is_impossible question as "no answer" and ignore its answers, while the
    official SQuAD 2.0 score counts them as gold: the two would disagree on every such question."""
    for split in ("train", "dev"):
        t = task("span_qa", (), train=qa(Answer("Die", 0)), dev=qa(Answer("Die", 0)))
        t.data[split] = [*qa(Answer("Die", 0)), impossible("q2", Answer("Die", 0))]
        error = contract_error(t, split)
        assert str(error) == (
            f"task 'mine/task' ({split}): example 'q2' is_impossible (unanswerable) but has 1 answer; "
            "an unanswerable question has none"
        )
        assert error.example_id == "q2"


@pytest.mark.parametrize("flag", ["false", 0, 1, None])
def test_is_impossible_is_a_bool(flag: Any) -> None:
    """A reader passing the JSON string "false" through would mark every question unanswerable."""
    t = task("span_qa", (), train=[impossible("q2", flag=flag)], dev=qa(Answer("Die", 0)))
    assert str(contract_error(t, "train")) == (
        f"task 'mine/task' (train): example 'q2' has is_impossible {flag!r} ({type(flag).__name__}), not a bool"
    )


@pytest.mark.parametrize(("text", "what"), [("", "empty"), (" ", "whitespace-only")])
def test_an_answer_is_not_empty(text: str, what: str) -> None:
    """An empty text is found at any offset, so the context check passed it; the transformer's
    windowing then raised mid-stage ("not a non-empty span"), and SQuAD 1.1 can never score it.
    A whitespace-only one is no token span either: training silently treated the question as
    unanswerable. No answer is is_impossible=True with no answers, not an empty one."""
    for split in ("train", "dev"):
        t = task("span_qa", (), train=qa(Answer("Die", 0)), dev=qa(Answer("Die", 0)))
        t.data[split] = qa(Answer("Die", 0), Answer(text, 3))
        assert CONTEXT[3] == " "
        assert str(contract_error(t, split)) == (
            f"task 'mine/task' ({split}): example 'q1' has answer 2 with {what} text {text!r}; an answer is a "
            "span of the context with a word in it (a question without one has no answers and is_impossible True)"
        )


def test_a_training_question_without_answers_must_be_marked_unanswerable() -> None:
    """featurize() trained it as unanswerable (start and end at [CLS]), also for SQuAD 1.1."""
    t = task("span_qa", (), train=[*qa(Answer("Die", 0)), impossible(flag=False)], dev=qa(Answer("Die", 0)))
    error = contract_error(t, "train")
    assert str(error) == (
        "task 'mine/task' (train): training example 'q2' has no answers and is not is_impossible; "
        "a training set must be labelled"
    )
    assert error.example_id == "q2"


def test_a_dev_question_without_answers_in_a_labelled_split_is_refused() -> None:
    """SQuAD 2.0 would score it as unanswerable and SQuAD 1.1 fail at evaluation, after training."""
    t = task("span_qa", (), train=qa(Answer("Die", 0)), dev=[*qa(Answer("Die", 0)), impossible(flag=False)])
    assert str(contract_error(t, "dev")) == (
        "task 'mine/task' (dev): example 'q2' has no answers and is not is_impossible but example 'q1' has "
        "answers or is_impossible; a split is either labelled or unlabelled throughout"
    )


def test_unlabelled_span_qa_test_questions_are_allowed() -> None:
    """A hidden test set (questions only, for predictions) is unlabelled throughout, as GLUE's are;
    several gold answers (SQuAD dev) and unanswerable questions (2.0) are labelled."""
    start = CONTEXT.index("1882")
    dev = [*qa(Answer("1882", start), Answer("seit 1882", start - 5)), impossible()]
    test = [SpanQAExample("x1", "Seit wann?", CONTEXT), SpanQAExample("x2", "Wo?", CONTEXT)]
    t = task("span_qa", (), train=[*qa(Answer("1882", start)), impossible()], dev=dev, test=test)
    assert t.check_data(["train", "dev", "test"]) == []


# --- pre-flight and the CLI ---------------------------------------------------------------------


@dataclass
class BugConfig:
    bug: str = knob(
        "none",
        "Which contract to break: none, dup_ids, label_none, bad_label, no_train, no_dev, dicts, no_labels, crash.",
    )


class BuggyTask(MemTask):
    """A plugin task with a configurable bug, for `xfer validate --data` / `xfer run`."""

    def examples(self, split):
        bug = self.config.bug
        if bug == "crash":
            raise AttributeError("'ReviewsConfig' object has no attribute 'dev_file'")
        rows = [SentenceExample(f"{split}-{i}", f"text {i}", label="ab"[i % 2]) for i in range(1, 9)]
        if bug == "dup_ids" and split == "dev":
            return [SentenceExample("same-id", e.text_a, label=e.label) for e in rows]
        if bug == "label_none" and split == "train":
            return [SentenceExample(e.id, e.text_a) for e in rows]
        if bug == "dicts":
            return [{"id": e.id, "text_a": e.text_a, "label": e.label} for e in rows]
        if bug == "bad_label" and split == "train":
            return [*rows, SentenceExample("train-9", "x", label="neg")]
        if bug == "no_train" and split == "train":
            return []
        if bug == "no_dev" and split == "dev":
            return []
        return rows

    @property
    def labels(self) -> Any:
        return () if self.config.bug == "no_labels" else ("a", "b")


class NoTypeTask(BuggyTask):
    pass


NoTypeTask.type = None  # type: ignore[assignment]  # as if the plugin never set it


class TypoTask(BuggyTask):
    type = "classifcation"  # type: ignore[assignment]


class InitCrashTask(BuggyTask):
    def __init__(self, name: str, config: Any = None):
        super().__init__(name, config)
        self.path = Path(config.missing_knob)


class ContractPlugin:
    @staticmethod
    @hookimpl
    def xfer_tasks() -> list[ComponentSpec]:
        return [
            ComponentSpec("task", f"bad/{name}", f"{__name__}:{cls}", "1", BugConfig, "test task")
            for name, cls in (
                ("cls", "BuggyTask"),
                ("notype", "NoTypeTask"),
                ("typo", "TypoTask"),
                ("initcrash", "InitCrashTask"),
            )
        ]


RECIPE = """\
name: contract
stages:
  first:
    kind: testing.fit
    task: {name: bad/cls}
    train: {steps: 2, batch_size: 8}
  second:
    kind: testing.fit
    task: {name: TASK, bug: BUG}
    train: {steps: 2, batch_size: 8}
"""


@pytest.fixture
def host():
    host = make_host(["xfer.testing.plugin"])
    host.add_object(ContractPlugin, "bad")
    set_default_host(host)
    yield host
    set_default_host(None)


@pytest.mark.parametrize(
    ("name", "bug", "expected"),
    [
        ("bad/cls", "dup_ids", "task 'bad/cls' (dev): examples #1 and #2 have the same id 'same-id'"),
        ("bad/cls", "label_none", "task 'bad/cls' (train): training example 'train-1' has no label"),
        ("bad/cls", "bad_label", "task 'bad/cls' (train): example 'train-9' has label 'neg', not one of its labels"),
        ("bad/cls", "dicts", "task 'bad/cls' (train): example #1 is a dict, not a SentenceExample"),
        ("bad/cls", "no_labels", "task 'bad/cls': a classification task needs labels, but its labels is empty"),
        ("bad/cls", "crash", "task 'bad/cls' (train): examples() failed: AttributeError: 'ReviewsConfig' object"),
        ("bad/notype", "none", "task 'bad/notype': NoTypeTask sets no `type`"),
        ("bad/typo", "none", "task 'bad/typo': TypoTask.type is 'classifcation', not a task type (did you mean"),
        ("bad/initcrash", "none", "task 'bad/initcrash': the task failed (AttributeError: 'BugConfig' object has"),
    ],
)
def test_validate_data_reports_plugin_bugs(
    tmp_path: Path, host, capsys: pytest.CaptureFixture[str], name: str, bug: str, expected: str
) -> None:
    path = write_recipe(tmp_path, RECIPE.replace("TASK", name).replace("BUG", bug))
    assert cli.main(["validate", str(path), "--data"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"stage 'second', {expected}" in err
    assert "stage 'first'" not in err, "the clean first stage has no problem"


STAGE_ONLY = """\
name: contract
stages:
  only:
    kind: testing.fit
    task: {name: bad/cls, bug: BUG}
    train: {steps: 2, batch_size: 8}
"""


@pytest.mark.parametrize(
    ("bug", "expected"),
    [
        ("dup_ids", "task 'bad/cls' (dev): examples #1 and #2 have the same id 'same-id'"),
        ("label_none", "task 'bad/cls' (train): training example 'train-1' has no label"),
        ("bad_label", "task 'bad/cls' (train): example 'train-9' has label 'neg', not one of its labels"),
        ("dicts", "task 'bad/cls' (train): example #1 is a dict, not a SentenceExample"),
        ("no_train", "bad/cls: the training set is empty"),
        ("no_dev", "bad/cls: the dev set is empty"),
    ],
)
def test_a_stage_run_without_pre_flight_checks_the_contract_too(tmp_path: Path, host, bug: str, expected: str) -> None:
    """testing.fit loads its examples through `nonempty_examples` / `check_examples`: a recipe run
    in-process (no pre-flight) stops at the contract breach, not at a ValueError from deep inside
    the stage or, worse, a model trained and scored on broken data."""
    path = write_recipe(tmp_path, STAGE_ONLY.replace("BUG", bug))
    with pytest.raises(UserError) as caught:
        run_recipe_file(path, tmp_path / "run", host, preflight=False)
    assert str(caught.value).startswith(expected)


def test_run_stops_before_training_on_a_plugin_bug(tmp_path: Path, host, capsys) -> None:
    path = write_recipe(tmp_path, RECIPE.replace("TASK", "bad/notype").replace("BUG", "none"))
    run_dir = tmp_path / "run"
    assert cli.main(["run", str(path), "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "NoTypeTask sets no `type`" in err
    assert not (run_dir / "first" / "stage.json").exists(), "the first stage must not have trained"


def test_a_clean_recipe_still_validates(tmp_path: Path, host) -> None:
    path = write_recipe(tmp_path, RECIPE.replace("TASK", "bad/cls").replace("BUG", "none"))
    assert cli.main(["validate", str(path), "--data"]) == 0


@pytest.mark.parametrize("score_range", [(5, 5), (5.0, 0.0), (0, float("inf")), ("low", "high"), (1,)])
def test_a_regression_score_range_that_cannot_scale_targets_is_a_contract_error(score_range: Any) -> None:
    """(5, 5) was a bare ZeroDivisionError in the fine-tuning objective after earlier stages had run,
    and (5, 0) flipped every target silently."""
    from xfer.core.tasks import TaskInfo

    regression = type(
        "Scored",
        (MemTask,),
        {
            "type": "regression",
            "label_set": (),
            "info": lambda self: TaskInfo(self.name, "regression", (), "pearson", extra={"score_range": score_range}),
        },
    )
    t = regression("mine/task", None, {"train": sentences("train", 1.0, 2.0), "dev": sentences("dev", 1.5)})
    error = contract_error(t, "train")
    assert "info().extra['score_range']" in str(error) and "low < high" in str(error)


def test_a_regression_score_range_in_order_passes() -> None:
    from xfer.core.tasks import TaskInfo

    regression = type(
        "Scored",
        (MemTask,),
        {
            "type": "regression",
            "label_set": (),
            "info": lambda self: TaskInfo(self.name, "regression", (), "pearson", extra={"score_range": (0, 5)}),
        },
    )
    t = regression("mine/task", None, {"train": sentences("train", 1.0, 2.0)})
    check_examples(t, "train", t.examples("train"))

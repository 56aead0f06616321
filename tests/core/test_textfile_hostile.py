"""Hostile inputs for the core readers and the task contract: xfer.core.textfile, xfer.core.data,
xfer.core.tasks (what every task plugin uses to read files and check the examples it builds)."""

from __future__ import annotations

import queue
import re
from pathlib import Path
from typing import Any

import pytest

from xfer.core.errors import DataError, UserError


def test_a_dangling_symbolic_link_is_named_as_one_with_its_target(tmp_path: Path) -> None:
    """A data file that is a link into a moved or unmounted store was reported "file not found",
    for a path `ls` lists: both readers now name the broken link and where it leads."""
    from xfer.core.textfile import read_text, stream_lines

    link = tmp_path / "train.tsv"
    link.symlink_to(tmp_path / "store" / "train.tsv")
    for read in (read_text, lambda p: list(stream_lines(p))):
        with pytest.raises(DataError) as caught:
            read(link)
        assert str(caught.value) == (
            f"{link}: broken symbolic link: its target {tmp_path / 'store' / 'train.tsv'} does not exist"
        )
    with pytest.raises(DataError, match=r"missing\.tsv: file not found$"):  # a plain missing file: as before
        read_text(tmp_path / "missing.tsv")


def test_a_prefetch_error_queued_as_the_thread_ends_is_not_lost() -> None:
    """The consumer's wait timed out, the producer then queued its error (a DataError naming file and
    line) and ended: the consumer saw a dead thread and raised "stopped unexpectedly" instead."""
    from xfer.core.data import Prefetcher

    class Failing:
        steps_per_epoch = None

        def next_step(self) -> list[Any]:
            raise DataError("corpus.txt", 3, "not valid UTF-8")

        def state_dict(self) -> dict[str, Any]:
            return {}

        def load_state_dict(self, state: dict[str, Any]) -> None:
            pass

    prefetcher = Prefetcher(Failing(), depth=1)
    assert prefetcher._thread is not None
    prefetcher._thread.join(timeout=10)  # the error is queued and the thread has ended
    real = prefetcher._queue

    class TimedOutOnce:
        """The interleaving: the consumer's `get` times out just before the producer's `put`."""

        def __init__(self) -> None:
            self.first = True

        def get(self, timeout: float | None = None) -> Any:
            if self.first:
                self.first = False
                raise queue.Empty
            return real.get(timeout=timeout)

        def get_nowait(self) -> Any:
            return real.get_nowait()

    prefetcher._queue = TimedOutOnce()  # type: ignore[assignment]
    with pytest.raises(DataError, match=r"^corpus\.txt:3: not valid UTF-8$"):
        prefetcher.next()
    prefetcher.close()


class _Sentences:
    """A classification task whose examples() returns what the test gives it."""

    @staticmethod
    def make(returned: Any) -> Any:
        from xfer.core.tasks import Task

        class Sentences(Task):
            type = "classification"
            main_metric = "accuracy"
            labels = ("a", "b")

            def examples(self, split: Any) -> Any:
                return returned

            def evaluate(self, examples: Any, predictions: Any) -> dict[str, float]:
                return {"accuracy": 0.0}

        return Sentences("mem/sentences")


def test_check_data_reports_a_non_list_once_and_does_not_crash_on_an_array() -> None:
    """`check_data` tested `not examples` after the contract check failed: a numpy array of examples
    ended the pre-flight in a bare ValueError (truth value ambiguous), and a None (a reader that
    forgot its return) got a second, wrong problem "the training set is empty"."""
    import numpy as np

    from xfer.core.tasks import SentenceExample

    examples = [SentenceExample("1", "x", label="a"), SentenceExample("2", "y", label="b")]
    array = np.empty(2, dtype=object)
    array[:] = examples
    for returned, kind in ((array, "ndarray"), (None, "NoneType")):
        problems = [str(p) for p in _Sentences.make(returned).check_data(["train"])]
        assert problems == [
            f"task 'mem/sentences' (train): examples() returned a {kind}, not a list of SentenceExamples; plugin bug"
        ]
    assert [str(p) for p in _Sentences.make([]).check_data(["train"])] == ["mem/sentences: the training set is empty"]
    assert _Sentences.make(examples).check_data(["train"]) == []


@pytest.mark.parametrize(
    ("upos", "problem"),
    [
        (("NOUN",), "has 1 UPOS tags for 2 words"),
        (("NOUN", "PUNCT", "X"), "has 3 UPOS tags for 2 words"),
        (("NOUN", None), "has upos ('NOUN', None) for 2 words"),
        ("NOUN PUNCT", "has upos 'NOUN PUNCT' for 2 words"),
    ],
)
def test_a_parse_whose_upos_is_not_one_tag_per_word_is_refused(upos: Any, problem: str) -> None:
    """`punctuation: upos` scores the words not tagged PUNCT from `upos`: a tuple of another length
    was a bare zip ValueError at the first evaluation, after training; the contract checked heads
    and relations only."""
    from xfer.core.tasks import ParsingExample, Task, check_examples

    class Trees(Task):
        type = "parsing"
        main_metric = "las"
        labels = ("punct", "root")

        def examples(self, split: Any) -> Any:
            return []

        def evaluate(self, examples: Any, predictions: Any) -> dict[str, float]:
            return {"las": 0.0}

    task = Trees("mem/trees")
    for heads, relations in (((0, 1), ("root", "punct")), (None, None)):  # labelled and unlabelled
        bad = ParsingExample("s1", ("Hi", "!"), heads, relations, upos)
        with pytest.raises(UserError, match="^" + re.escape(f"task 'mem/trees' (dev): example 's1' {problem} ")):
            check_examples(task, "dev", [bad])
    for fine in (("INTJ", "PUNCT"), None):
        check_examples(task, "train", [ParsingExample("s1", ("Hi", "!"), (0, 1), ("root", "punct"), fine)])


def test_stream_lines_refuses_a_bom_starting_a_later_line_as_split_lines_does(tmp_path: Path) -> None:
    """`stream_lines` (word vectors) kept a BOM starting a later line, where `split_lines` refuses it:
    two vector files joined with `cat` gave the vector of "\\ufeffthe", and "the" had none, silently.
    The file's own BOM is still dropped."""
    from xfer.core.textfile import BOM_INSIDE, stream_lines
    from xfer.cvt.vocab import read_vectors

    path = tmp_path / "vectors.txt"
    path.write_bytes("\ufeffcat 0.5 0.5\n\ufeffthe 0.1 0.2\ndog 1 1\n".encode())
    with pytest.raises(DataError) as caught:
        list(stream_lines(path))
    assert str(caught.value) == f"{path}:2: {BOM_INSIDE}"
    with pytest.raises(DataError, match=rf"vectors\.txt:2: {re.escape(BOM_INSIDE)}$"):
        read_vectors(path, 2, None)
    path.write_bytes("\ufeffcat 0.5 0.5\nthe 0.1 0.2\n".encode())
    assert list(stream_lines(path)) == [(1, "cat 0.5 0.5"), (2, "the 0.1 0.2")]
    assert sorted(read_vectors(path, 2, None)) == ["cat", "the"]

"""mt/parallel output files: one hypothesis per example line, in order, as a reader counts lines."""

from __future__ import annotations

import pytest

from xfer.core.tasks import TranslationExample
from xfer.tasks.mt.tasks import ParallelTextTask


def sentences(n: int) -> list[TranslationExample]:
    return [TranslationExample(f"test-{i}", f"source {i}", f"target {i}") for i in range(1, n + 1)]


def test_one_line_per_example_whatever_the_hypothesis_holds(tmp_path):
    """A CR inside a hypothesis was written as is: Python's universal newlines (and so most
    readers) count it as a line end, shifting every later line; xfer's readers refuse it."""
    hyps = ["x\ry", "a\r\nb", "", "p\nq", "keep\u2028this", "  spaced  "]
    examples = sentences(len(hyps))
    out = ParallelTextTask("mt/parallel").write_predictions(
        tmp_path, "test", examples, {e.id: h for e, h in zip(examples, hyps, strict=True)}
    )
    assert out.name == "test.de"
    with open(out, encoding="utf-8") as handle:  # universal newlines, as Python reads text
        lines = handle.read().split("\n")[:-1]
    assert lines == ["x y", "a b", "", "p q", "keep\u2028this", "  spaced  "]


def test_a_missing_prediction_leaves_no_shorter_file(tmp_path):
    """The error came after the earlier lines had replaced the previous (complete) file."""
    task = ParallelTextTask("mt/parallel")
    out = task.write_predictions(tmp_path, "test", sentences(3), {"test-1": "a", "test-2": "b", "test-3": "c"})
    with pytest.raises(ValueError, match="no prediction for sentence 'test-3'"):
        task.write_predictions(tmp_path, "test", sentences(3), {"test-1": "A", "test-2": "B"})
    assert out.read_text(encoding="utf-8") == "a\nb\nc\n"


@pytest.mark.parametrize(
    ("value", "message"),
    [(None, "must be a string, not None"), (["Ein", "Hund"], "must be a string"), ("Hund\udc80", "lone surrogate")],
)
def test_bad_hypotheses_are_errors(tmp_path, value, message):
    """None was written as "None", a list as its repr; a lone surrogate failed with a bare
    UnicodeEncodeError after half the file was written."""
    with pytest.raises(ValueError, match=message):
        ParallelTextTask("mt/parallel").write_predictions(
            tmp_path, "test", sentences(2), {"test-1": "a", "test-2": value}
        )
    assert not (tmp_path / "test.de").exists()


def test_a_prediction_for_an_unknown_sentence_is_an_error(tmp_path):
    with pytest.raises(ValueError, match=r"not sentences of this split, e.g. 'dev-1'"):
        ParallelTextTask("mt/parallel").write_predictions(tmp_path, "test", sentences(1), {"test-1": "a", "dev-1": "b"})
    assert not (tmp_path / "test.de").exists()

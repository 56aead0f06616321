"""Token accuracy, prediction checks and the prediction file format."""

from __future__ import annotations

import pytest

from xfer.core.tasks import TaggingExample
from xfer.tasks.conll.config import ColumnsConfig, UdPosConfig
from xfer.tasks.conll.tasks import ColumnsTask, SpanTaggingTask, UdPosTask

EXAMPLES = [
    TaggingExample(id="a", words=("I", "run"), tags=("PRON", "VERB")),
    TaggingExample(id="b", words=("Dogs", "bark", "."), tags=("NOUN", "VERB", "PUNCT")),
]


def test_token_accuracy_counts_tokens_not_sentences():
    scores = UdPosTask("conll/ud-pos", UdPosConfig()).evaluate(
        EXAMPLES, {"a": ["PRON", "NOUN"], "b": ["NOUN", "VERB", "PUNCT"]}
    )
    assert scores == {"accuracy": pytest.approx(80.0)}  # 4 of 5 tokens


def test_columns_none_scheme_uses_accuracy():
    task = ColumnsTask("conll/columns", ColumnsConfig(scheme="none"))
    assert task.evaluate(EXAMPLES, {"a": ["PRON", "VERB"], "b": ["X", "X", "X"]}) == {"accuracy": pytest.approx(40.0)}


def test_prediction_errors():
    task = SpanTaggingTask("conll/ner")
    gold = [TaggingExample(id="a", words=("x", "y"), tags=("B-PER", "E-PER"))]
    with pytest.raises(ValueError, match="2 words but 1 predicted tags"):
        task.evaluate(gold, {"a": ["O"]})
    with pytest.raises(ValueError, match="no prediction for sentence 'a'"):
        task.evaluate(gold, {})
    with pytest.raises(ValueError, match="list of tag strings"):
        task.evaluate(gold, {"a": "O O"})
    with pytest.raises(ValueError, match="no gold tags"):
        task.evaluate([TaggingExample(id="a", words=("x",))], {"a": ["O"]})


def test_write_predictions(tmp_path):
    task = UdPosTask("conll/ud-pos", UdPosConfig())
    out = task.write_predictions(tmp_path, "dev", EXAMPLES, {"a": ["PRON", "NOUN"], "b": ["N", "V", "P"]})
    assert out == tmp_path / "dev.conll"
    assert out.read_text() == "I\tPRON\tPRON\nrun\tVERB\tNOUN\n\nDogs\tNOUN\tN\nbark\tVERB\tV\n.\tPUNCT\tP\n\n"
    unlabelled = [TaggingExample(id="t", words=("Hi",))]
    out = task.write_predictions(tmp_path, "test", unlabelled, {"t": ["INTJ"]})
    assert out.read_text() == "Hi\tINTJ\n\n"


def test_span_predictions_are_written_in_iob2_for_conlleval(tmp_path):
    """conlleval knows no S- and runs E-X B-X together: BIOES tags are written as IOB2, so
    conlleval on the file finds the spans xfer scored (BIO tasks and POS tags as they are)."""
    gold = [TaggingExample(id="a", words=("New", "York", "Paris", "is"), tags=("B-LOC", "E-LOC", "S-LOC", "O"))]
    task = SpanTaggingTask("conll/ner")  # tag_scheme BIOES by default
    predicted = {"a": ["S-LOC", "S-LOC", "S-LOC", "O"]}
    out = task.write_predictions(tmp_path, "dev", gold, predicted)
    assert out.read_text() == "New\tB-LOC\tB-LOC\nYork\tI-LOC\tB-LOC\nParis\tB-LOC\tB-LOC\nis\tO\tO\n\n"
    assert task.evaluate(gold, predicted)["f1"] == pytest.approx(100 * 2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    columns = ColumnsTask("conll/columns", ColumnsConfig(scheme="BIOES"))
    out = columns.write_predictions(tmp_path / "c", "dev", gold, predicted)
    assert out.read_text().splitlines()[1] == "York\tI-LOC\tB-LOC"
    bio = ColumnsTask("conll/columns", ColumnsConfig(scheme="BIO"))
    out = bio.write_predictions(tmp_path / "b", "test", [TaggingExample(id="t", words=("x",))], {"t": ["I-X"]})
    assert out.read_text() == "x\tI-X\n\n", "BIO tags are written as predicted, even ill-formed"


def test_prediction_files_are_checked_first_and_replaced_whole(tmp_path):
    """A missing sentence left a file of the sentences before it in place of the previous good one,
    an unknown id was ignored, a string "OO" was written as the tags O, O and a None tag was a bare
    TypeError after an empty file: each is now an error, and the previous file stays."""
    task = UdPosTask("conll/ud-pos", UdPosConfig())
    good = {"a": ["PRON", "NOUN"], "b": ["N", "V", "P"]}
    out = task.write_predictions(tmp_path, "dev", EXAMPLES, good)
    before = out.read_text()
    for bad, message in (
        ({"a": good["a"]}, "no prediction for sentence 'b'"),
        ({**good, "zz": ["X"]}, "not sentences of this split, e.g. 'zz'"),
        ({"a": "OO", "b": good["b"]}, "must be a list of tag strings"),
        ({"a": ["PRON", None], "b": good["b"]}, "must be a list of tag strings"),
    ):
        with pytest.raises(ValueError, match=message):
            task.write_predictions(tmp_path, "dev", EXAMPLES, bad)
        assert out.read_text() == before

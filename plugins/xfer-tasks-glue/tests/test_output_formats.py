"""GLUE submission files against what the GLUE server expects: every example exactly once, in
file order, with the file's own index and a valid value; never a file scoring would refuse."""

from __future__ import annotations

import pytest

from xfer.core.tasks import SentenceExample
from xfer.tasks.glue.config import GlueTaskConfig
from xfer.tasks.glue.tasks import CoLATask, RTETask, STSBTask


def pairs(n: int) -> list[SentenceExample]:
    return [SentenceExample(id=f"test-{i}", text_a="a", text_b="b") for i in range(n)]


def test_rows_keep_the_test_files_own_index_and_order(tmp_path):
    data = tmp_path / "RTE"
    data.mkdir()
    (data / "test.tsv").write_text("index\tsentence1\tsentence2\n17\ta\tb\n3\tc\td\n250\te\tf\n")
    task = RTETask("glue/rte", GlueTaskConfig(data_dir=data))
    examples = task.examples("test")
    labels = dict(zip([e.id for e in examples], ["entailment", "not_entailment", "entailment"], strict=True))
    out = task.write_predictions(tmp_path / "sub", "test", examples, labels)
    assert out.name == "RTE.tsv"
    assert out.read_text() == "index\tprediction\n17\tentailment\n3\tnot_entailment\n250\tentailment\n"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), None, "abc", True])
def test_stsb_refuses_what_is_not_a_finite_score(tmp_path, value):
    """NaN was written as the score `nan` (clipping leaves NaN alone), None and "abc" raised a
    bare TypeError/ValueError without the example, True was written as 1.000."""
    with pytest.raises(ValueError, match=r"'test-0' must be a finite number"):
        STSBTask("glue/stsb").write_predictions(tmp_path, "test", pairs(2), {"test-0": value, "test-1": 1.0})
    assert not (tmp_path / "STS-B.tsv").exists()


def test_a_prediction_for_an_unknown_id_is_an_error(tmp_path):
    """It was dropped silently: predictions of another split (or file) went unnoticed."""
    with pytest.raises(ValueError, match=r"not examples of this split, e.g. 'dev-7'"):
        CoLATask("glue/cola").write_predictions(
            tmp_path, "test", pairs(2), {"test-0": "1", "test-1": "0", "dev-7": "1"}
        )
    assert not (tmp_path / "CoLA.tsv").exists()


def test_a_bad_prediction_keeps_the_previous_file(tmp_path):
    task = CoLATask("glue/cola")
    out = task.write_predictions(tmp_path, "test", pairs(2), {"test-0": "1", "test-1": "0"})
    with pytest.raises(ValueError, match="no prediction for example 'test-1'"):
        task.write_predictions(tmp_path, "test", pairs(2), {"test-0": "1"})
    assert out.read_text() == "index\tprediction\n0\t1\n1\t0\n"


def test_a_test_split_cut_by_max_examples_is_not_written_as_a_submission(tmp_path):
    """A quick run (`max_examples: 2`) predicting test wrote an `RTE.tsv` of 2 rows, named like a
    submission the server would refuse: a cut test split goes to `test.tsv`; the whole one, and a
    cut that keeps every row, to the submission name."""
    data = tmp_path / "RTE"
    data.mkdir()
    (data / "test.tsv").write_text("index\tsentence1\tsentence2\n17\ta\tb\n3\tc\td\n250\te\tf\n")
    for max_examples, name in ((2, "test.tsv"), (3, "RTE.tsv"), (None, "RTE.tsv")):
        task = RTETask("glue/rte", GlueTaskConfig(data_dir=data, max_examples=max_examples))
        examples = task.examples("test")
        out = task.write_predictions(
            tmp_path / str(max_examples), "test", examples, dict.fromkeys([e.id for e in examples], "entailment")
        )
        assert (out.name, len(out.read_text().splitlines())) == (name, len(examples) + 1)

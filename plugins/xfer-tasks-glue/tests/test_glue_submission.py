"""GLUE submission files: names, header, label strings, STS-B clipping."""

from __future__ import annotations

import pytest

from xfer.core.tasks import SentenceExample
from xfer.tasks.glue.config import GlueTaskConfig
from xfer.tasks.glue.tasks import CoLATask, MNLIMismatchedTask, MNLITask, STSBTask


def test_cola_submission_from_test_file(tmp_path):
    data = tmp_path / "CoLA"
    data.mkdir()
    (data / "test.tsv").write_text("index\tsentence\n0\tA.\n1\tB.\n2\tC.\n")
    task = CoLATask("glue/cola", GlueTaskConfig(data_dir=data))
    examples = task.examples("test")
    out = task.write_predictions(
        tmp_path / "submission", "test", examples, {"test-0": "1", "test-1": "0", "test-2": "1"}
    )
    assert out == tmp_path / "submission" / "CoLA.tsv"
    assert out.read_text() == "index\tprediction\n0\t1\n1\t0\n2\t1\n"


def test_dev_predictions_use_the_split_name(tmp_path):
    examples = [SentenceExample(id="dev-0", text_a="p", text_b="h")]
    out = MNLITask("glue/mnli").write_predictions(tmp_path, "dev", examples, {"dev-0": "neutral"})
    assert out == tmp_path / "dev.tsv"
    assert out.read_text().splitlines() == ["index\tprediction", "0\tneutral"]


def test_mnli_file_names():
    assert MNLITask.spec.submission == "MNLI-m.tsv"
    assert MNLIMismatchedTask.spec.submission == "MNLI-mm.tsv"
    assert STSBTask.spec.submission == "STS-B.tsv"


def test_stsb_scores_are_clipped(tmp_path):
    examples = [SentenceExample(id=f"test-{i}", text_a="a", text_b="b") for i in range(3)]
    out = STSBTask("glue/stsb").write_predictions(
        tmp_path, "test", examples, {"test-0": -0.3, "test-1": 2.34567, "test-2": 7}
    )
    assert out.name == "STS-B.tsv"
    assert out.read_text().splitlines() == ["index\tprediction", "0\t0.000", "1\t2.346", "2\t5.000"]


def test_invalid_or_missing_prediction(tmp_path):
    examples = [SentenceExample(id="test-0", text_a="a")]
    with pytest.raises(ValueError, match="not one of"):
        CoLATask("glue/cola").write_predictions(tmp_path, "test", examples, {"test-0": "acceptable"})
    with pytest.raises(ValueError, match="no prediction"):
        CoLATask("glue/cola").write_predictions(tmp_path, "test", examples, {})

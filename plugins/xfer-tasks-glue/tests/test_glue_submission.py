"""GLUE submission files: names, header, label strings, STS-B clipping."""

from __future__ import annotations

import dataclasses

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


def _mnli_with_diagnostic(root, ax_name="diagnostic.tsv"):
    """download_glue_data.py's layout: glue_data/MNLI/*.tsv and glue_data/diagnostic/diagnostic.tsv."""
    mnli, diagnostic = root / "MNLI", root / "diagnostic"
    mnli.mkdir()
    diagnostic.mkdir()
    head = "index\tsentence1\tsentence2\tgold_label\n"
    (mnli / "train.tsv").write_text(head + "0\tA man.\tA person.\tentailment\n")
    (mnli / "dev_matched.tsv").write_text(head + "0\tA man.\tA dog.\tcontradiction\n")
    (mnli / "test_matched.tsv").write_text("index\tsentence1\tsentence2\n0\tP0.\tH0.\n1\tP1.\tH1.\n")
    (diagnostic / ax_name).write_text("index\tsentence1\tsentence2\n0\tX0.\tY0.\n1\tX1.\tY1.\n2\tX2.\tY2.\n")
    return mnli


def test_mnli_predicts_the_diagnostic_set_into_ax_tsv(tmp_path):
    """A GLUE submission needs AX.tsv, predicted by the MNLI model: with `diagnostic: true` the
    test split carries AX's examples and one write gives MNLI-m.tsv and AX.tsv."""
    from xfer.tasks.glue.config import MnliTaskConfig

    data = _mnli_with_diagnostic(tmp_path)
    task = MNLITask("glue/mnli", MnliTaskConfig(data_dir=data, diagnostic=True))
    examples = task.examples("test")
    assert [e.id for e in examples] == ["test-0", "test-1", "ax-0", "ax-1", "ax-2"]
    assert (examples[2].text_a, examples[2].text_b, examples[2].label) == ("X0.", "Y0.", None)
    predictions = dict(
        zip([e.id for e in examples], ["neutral", "entailment", "contradiction", "neutral", "entailment"], strict=True)
    )
    out = task.write_predictions(tmp_path / "sub", "test", examples, predictions)
    assert out == tmp_path / "sub" / "MNLI-m.tsv"
    assert out.read_text() == "index\tprediction\n0\tneutral\n1\tentailment\n"
    assert (
        tmp_path / "sub" / "AX.tsv"
    ).read_text() == "index\tprediction\n0\tcontradiction\n1\tneutral\n2\tentailment\n"
    assert [e.id for e in task.examples("dev")] == ["dev-0"], "dev is MNLI's alone"
    plain = MNLITask("glue/mnli", MnliTaskConfig(data_dir=data))
    assert [e.id for e in plain.examples("test")] == ["test-0", "test-1"], "off by default"


def test_the_diagnostic_file_is_checked_and_both_files_are_written_or_neither(tmp_path):
    from xfer.core.errors import DataError
    from xfer.tasks.glue.config import MnliTaskConfig

    data = _mnli_with_diagnostic(tmp_path, ax_name="AX.tsv")
    with pytest.raises(DataError, match=r"diagnostic\.tsv: glue/mnli: the diagnostic set \(AX\) is missing"):
        MNLITask("glue/mnli", MnliTaskConfig(data_dir=data, diagnostic=True)).examples("test")
    config = MnliTaskConfig(data_dir=data, diagnostic=True, diagnostic_file=tmp_path / "diagnostic" / "AX.tsv")
    task = MNLITask("glue/mnli", config)
    examples = task.examples("test")
    predictions = {e.id: "neutral" for e in examples} | {"test-1": "maybe"}
    with pytest.raises(ValueError, match="not one of"):
        task.write_predictions(tmp_path / "sub", "test", examples, predictions)
    assert not (tmp_path / "sub").exists(), "AX.tsv was written before MNLI's bad value was found"
    with pytest.raises(ValueError, match="diagnostic_file: is only read with `diagnostic: true`"):
        MnliTaskConfig(data_dir=data, diagnostic_file=tmp_path / "diagnostic" / "AX.tsv")
    cut = MNLITask("glue/mnli", dataclasses.replace(config, max_examples=2))  # AX loses a row
    examples = cut.examples("test")
    cut.write_predictions(tmp_path / "cut", "test", examples, {e.id: "neutral" for e in examples})
    assert sorted(p.name for p in (tmp_path / "cut").iterdir()) == ["ax.tsv", "test.tsv"], (
        "a cut split is no submission"
    )
    one = MNLITask("glue/mnli", dataclasses.replace(config, max_examples=1))
    # N of MNLI's and N of AX's: cut together, AX (after MNLI's rows) was in no quick run
    assert [e.id for e in one.examples("test")] == ["test-0", "ax-0"]

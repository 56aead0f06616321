"""Hostile checks of glue/mnli's `diagnostic: true` (GLUE's AX set predicted by the MNLI model)."""

from __future__ import annotations

import pytest

from xfer.core.config import FieldError, TaskRef
from xfer.core.runs.fingerprint import FileHasher, signed_inputs
from xfer.tasks.glue.config import MnliTaskConfig
from xfer.tasks.glue.tasks import MNLITask


def _glue_data(root):
    """download_glue_data.py's layout: glue_data/MNLI/*.tsv and glue_data/diagnostic/diagnostic.tsv."""
    mnli, diagnostic = root / "MNLI", root / "diagnostic"
    mnli.mkdir()
    diagnostic.mkdir()
    header = "index\tsentence1\tsentence2\tgold_label\n"
    (mnli / "train.tsv").write_text(header + "0\tA.\tB.\tentailment\n")
    (mnli / "dev_matched.tsv").write_text(header + "0\tA.\tB.\tneutral\n")
    (mnli / "test_matched.tsv").write_text("index\tsentence1\tsentence2\n0\tT0.\tU0.\n")
    (diagnostic / "diagnostic.tsv").write_text("index\tsentence1\tsentence2\n0\tX0.\tY0.\n")
    return mnli


def test_the_default_diagnostic_file_is_signed_by_the_fingerprint(tmp_path):
    """The default AX file lies outside `data_dir` (glue_data/diagnostic/): the fingerprint signs
    path-typed config fields only, so an edited diagnostic.tsv left a completed stage's stale
    AX.tsv in place. The default is now the config's `diagnostic_file`, which is signed."""
    data = _glue_data(tmp_path)
    ref = TaskRef("glue/mnli", MnliTaskConfig(data_dir=data, diagnostic=True))
    before = signed_inputs([ref], FileHasher(), "t")
    ax = tmp_path / "diagnostic" / "diagnostic.tsv"
    assert str(ax) in {file for files in before.values() for file in files}
    ax.write_text("index\tsentence1\tsentence2\n0\tX0 edited.\tY0.\n")
    assert signed_inputs([ref], FileHasher(), "t") != before
    # without `diagnostic` nothing changes: the file is neither read nor signed
    plain = MnliTaskConfig(data_dir=data)
    assert plain.diagnostic_file is None


def test_an_ax_file_with_a_label_column_is_predicted_not_refused(tmp_path):
    """AX's examples join MNLI's unlabelled test split; a split is labelled or unlabelled throughout
    (Task contract). An AX file that carries `gold_label` (a labelled copy of the diagnostic set)
    made the pre-flight refuse the run ("test-0 has no label but ax-0 has one"), naming neither
    file. Only AX's predictions are ever asked for, so its labels are not read."""
    data = _glue_data(tmp_path)
    (tmp_path / "diagnostic" / "diagnostic.tsv").write_text(
        "index\tsentence1\tsentence2\tgold_label\n0\tX0.\tY0.\tentailment\n1\tX1.\tY1.\tneutral\n"
    )
    task = MNLITask("glue/mnli", MnliTaskConfig(data_dir=data, diagnostic=True))
    assert task.check_data(("train", "dev", "test")) == []
    examples = task.examples("test")
    assert [(e.id, e.label) for e in examples] == [("test-0", None), ("ax-0", None), ("ax-1", None)]
    predictions = {"test-0": "neutral", "ax-0": "entailment", "ax-1": "contradiction"}
    task.write_predictions(tmp_path / "out", "test", examples, predictions)
    assert (tmp_path / "out" / "AX.tsv").read_text() == "index\tprediction\n0\tentailment\n1\tcontradiction\n"
    assert (tmp_path / "out" / "MNLI-m.tsv").read_text() == "index\tprediction\n0\tneutral\n"


def test_a_missing_default_diagnostic_file_is_not_filled_in(tmp_path):
    """Only an existing default is written into the config: the resolved recipe must still validate
    (a run predicting dev only never reads AX), and the task still says where it looked."""
    data = _glue_data(tmp_path)
    (tmp_path / "diagnostic" / "diagnostic.tsv").unlink()
    config = MnliTaskConfig(data_dir=data, diagnostic=True)
    assert config.diagnostic_file is None
    task = MNLITask("glue/mnli", config)
    assert [e.id for e in task.examples("dev")] == ["dev-0"]
    problems = task.check_data(("test",))
    assert len(problems) == 1 and "diagnostic.tsv: glue/mnli: the diagnostic set (AX) is missing" in str(problems[0])


def test_a_diagnostic_file_that_is_a_folder_is_refused_at_its_key(tmp_path):
    """A folder exists, so it passed the recipe's existence check; the pre-flight then said the AX
    file was "missing (no such file; set diagnostic_file)" although the recipe had set it."""
    data = _glue_data(tmp_path)
    with pytest.raises(FieldError) as caught:
        MnliTaskConfig(data_dir=data, diagnostic=True, diagnostic_file=tmp_path / "diagnostic")
    assert caught.value.key == ("diagnostic_file",)
    assert f"{tmp_path / 'diagnostic'} is a folder; name the file, e.g. " in caught.value.message

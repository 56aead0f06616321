"""Hostile checks of the GLUE submission path (fifth round): the MNLI-m/AX pair, ..."""

from __future__ import annotations

import pytest

import xfer.tasks.glue.tasks as glue_tasks
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


class _Killed(BaseException):
    """A kill between two file writes (BaseException: nothing may catch it)."""


def test_a_kill_between_the_ax_and_mnli_writes_leaves_no_mismatched_pair(tmp_path, monkeypatch):
    """AX.tsv and MNLI-m.tsv were written one after the other over an older run's pair: a kill
    between the two writes left the new model's AX.tsv beside the old model's MNLI-m.tsv, a pair
    that looks like a complete submission. MNLI-m.tsv is now removed first and written last, so
    whenever both files are present they come from the same write."""
    task = MNLITask("glue/mnli", MnliTaskConfig(data_dir=_glue_data(tmp_path), diagnostic=True))
    examples = task.examples("test")
    out = tmp_path / "out"
    task.write_predictions(out, "test", examples, {"test-0": "neutral", "ax-0": "neutral"})  # the old model
    assert (out / "MNLI-m.tsv").is_file() and (out / "AX.tsv").is_file()

    real_write = glue_tasks._write
    calls = []

    def write_then_die(path, text):
        calls.append(path.name)
        if len(calls) == 2:
            raise _Killed
        return real_write(path, text)

    monkeypatch.setattr(glue_tasks, "_write", write_then_die)
    with pytest.raises(_Killed):
        task.write_predictions(out, "test", examples, {"test-0": "entailment", "ax-0": "entailment"})
    assert calls == ["AX.tsv", "MNLI-m.tsv"]
    assert (out / "AX.tsv").read_text() == "index\tprediction\n0\tentailment\n"
    assert not (out / "MNLI-m.tsv").exists()  # was the old model's "neutral": a mismatched pair

    monkeypatch.setattr(glue_tasks, "_write", real_write)  # the re-run publishes the whole pair
    task.write_predictions(out, "test", examples, {"test-0": "entailment", "ax-0": "entailment"})
    assert (out / "MNLI-m.tsv").read_text() == "index\tprediction\n0\tentailment\n"


def test_test_predictions_without_the_diagnostic_remove_an_older_ax_file(tmp_path):
    """A stage re-run with `diagnostic: false` wrote a new MNLI-m.tsv beside the AX.tsv of the
    earlier `diagnostic: true` model: a mismatched pair that looked like a complete submission.
    The older AX file is removed with the new MNLI file (only once the new predictions passed the
    checks: a refused write leaves the older, consistent pair); other splits leave it alone."""
    data = _glue_data(tmp_path)
    out = tmp_path / "out"
    with_ax = MNLITask("glue/mnli", MnliTaskConfig(data_dir=data, diagnostic=True))
    with_ax.write_predictions(out, "test", with_ax.examples("test"), {"test-0": "neutral", "ax-0": "neutral"})
    assert (out / "AX.tsv").is_file()

    plain = MNLITask("glue/mnli", MnliTaskConfig(data_dir=data))
    plain.write_predictions(out, "dev", plain.examples("dev"), {"dev-0": "neutral"})
    assert (out / "AX.tsv").is_file()  # a dev file says nothing about the submission pair
    with pytest.raises(ValueError, match="not one of the labels"):  # refused: the older pair stays intact
        plain.write_predictions(out, "test", plain.examples("test"), {"test-0": 2})
    assert (out / "AX.tsv").is_file() and (out / "MNLI-m.tsv").read_text() == "index\tprediction\n0\tneutral\n"
    plain.write_predictions(out, "test", plain.examples("test"), {"test-0": "entailment"})
    assert (out / "MNLI-m.tsv").read_text() == "index\tprediction\n0\tentailment\n"
    assert not (out / "AX.tsv").exists()

"""Hostile review of the GLUE plugin (second pass): each test failed before its fix."""

from __future__ import annotations

import pytest

from xfer.core.errors import DataError
from xfer.tasks.glue import scoring
from xfer.tasks.glue.config import TsvTaskConfig
from xfer.tasks.glue.tasks import TsvTask


def tsv_task(tmp_path, **kw) -> TsvTask:
    (tmp_path / "data.tsv").write_text("text\tlabel\na\tx\nb\ty\n")
    config = dict(train=tmp_path / "data.tsv", test=tmp_path / "data.tsv", label_column="label", labels=["x", "y"])
    return TsvTask("glue/tsv", TsvTaskConfig(**(config | kw)))


def test_tsv_predictions_missing_one_keep_the_previous_file(tmp_path):
    """glue/tsv used the base writer, which streamed into the file: a missing prediction raised a
    bare KeyError halfway and left a truncated file in place of the previous good one."""
    task = tsv_task(tmp_path)
    examples = task.examples("test")
    out = task.write_predictions(tmp_path / "out", "test", examples, {"test-0": "x", "test-1": "y"})
    assert out == tmp_path / "out" / "test.tsv"
    assert out.read_text() == "id\tprediction\ntest-0\tx\ntest-1\ty\n"
    with pytest.raises(ValueError, match=r"glue/tsv: no prediction for example 'test-1'"):
        task.write_predictions(tmp_path / "out", "test", examples, {"test-0": "y"})
    assert out.read_text() == "id\tprediction\ntest-0\tx\ntest-1\ty\n"


@pytest.mark.parametrize(
    ("predictions", "message"),
    [
        ({"test-0": "x", "test-1": "y", "dev-9": "x"}, r"not examples of this split, e.g. 'dev-9'"),
        ({"test-0": 0, "test-1": 1}, r"prediction 0 for 'test-0' is not one of the labels"),
        ({"test-0": "x", "test-1": "z"}, r"prediction 'z' for 'test-1' is not one of the labels"),
    ],
)
def test_tsv_predictions_scoring_would_refuse_are_not_written(tmp_path, predictions, message):
    """Predictions of another split were dropped silently, class ids and unknown labels written."""
    task = tsv_task(tmp_path)
    with pytest.raises(ValueError, match=message):
        task.write_predictions(tmp_path / "out", "test", task.examples("test"), predictions)
    assert not (tmp_path / "out" / "test.tsv").exists()


def test_tsv_regression_predictions_must_be_finite(tmp_path):
    """A diverged regression model's `nan` was written as the prediction `nan`."""
    (tmp_path / "r.tsv").write_text("text\tscore\na\t1.5\nb\t2\n")
    task = TsvTask(
        "glue/tsv",
        TsvTaskConfig(train=tmp_path / "r.tsv", label_column="score", type="regression", metrics=["pearson"]),
    )
    examples = task.examples("train")
    with pytest.raises(ValueError, match=r"'train-0' must be a finite number, not nan"):
        task.write_predictions(tmp_path, "train", examples, {"train-0": float("nan"), "train-1": 1.0})
    assert not (tmp_path / "train.tsv").exists()
    out = task.write_predictions(tmp_path, "train", examples, {"train-0": 0.25, "train-1": 3})
    assert out.read_text() == "id\tprediction\ntrain-0\t0.25\ntrain-1\t3.0\n"


def test_f1_of_a_class_absent_from_a_small_dev_set_is_zero(tmp_path):
    """Three labels, positive_label `pos`, a dev set (e.g. cut by max_examples) where neither golds
    nor predictions hold `pos`: evaluation raised "the positive label 'pos' is not one of the
    labels" after training; a binary task scores 0 in the same situation."""
    (tmp_path / "dev.tsv").write_text("text\tlabel\na\tneg\nb\tneu\nc\tneu\n")
    config = TsvTaskConfig(
        train=tmp_path / "dev.tsv",
        dev=tmp_path / "dev.tsv",
        label_column="label",
        labels=["neg", "neu", "pos"],
        metrics=["accuracy", "f1", "acc_f1_avg"],
        positive_label="pos",
    )
    task = TsvTask("glue/tsv", config)
    scores = task.evaluate(task.examples("dev"), {"dev-0": "neg", "dev-1": "neu", "dev-2": "neg"})
    assert scores == {
        "accuracy": pytest.approx(200 / 3),
        "f1": 0.0,
        "acc_f1_avg": pytest.approx(100 / 3),
    }
    # with the positive class present, the one-vs-rest F1 is unchanged: tp 1, fp 1, fn 0 -> 2/3
    assert scoring.compute(["f1"], ["pos", "neu", "neg"], ["pos", "pos", "neg"], positive="pos") == {
        "f1": pytest.approx(200 / 3)
    }


def test_a_metric_component_named_like_an_average_is_computed(monkeypatch):
    """`compute` skipped every name ending in `_avg` (it meant its own two means), so a registered
    metric component `mine.kappa_avg`, accepted by the config check, was silently missing from
    the results (and as main_metric, a KeyError after training)."""
    monkeypatch.setattr(scoring, "_component", lambda name: lambda golds, preds: 42.0)
    values = scoring.compute(["accuracy", "mine.kappa_avg", "acc_f1_avg"], ["1", "0"], ["1", "1"], positive="1")
    assert values == {
        "accuracy": 50.0,
        "f1": pytest.approx(200 / 3),
        "acc_f1_avg": pytest.approx(175 / 3),
        "mine.kappa_avg": 42.0,
    }


def test_an_unclosed_quote_is_reported_on_the_line_that_opens_it(tmp_path):
    """With `quoting: true` a quote never closed was reported on the file's last line (where csv
    gave up), hundreds of lines from the quote to fix."""
    path = tmp_path / "train.csv"
    path.write_text('t,l\nok,a\n"never closed,a\n' + "fine,a\n" * 50)
    task = TsvTask(
        "glue/tsv",
        TsvTaskConfig(train=path, delimiter=",", quoting=True, label_column="l", text_a_column="t", labels=["a"]),
    )
    with pytest.raises(DataError, match=rf"{path}:3: malformed CSV record \(it starts here; csv gave up on line 53"):
        task.examples("train")


def test_data_dir_naming_a_file_is_a_config_error(tmp_path):
    """`data_dir: RTE/dev.tsv` passed validation (the path exists) and every split was then reported
    missing at a nonsensical path, `RTE/dev.tsv/dev.tsv`."""
    from xfer.tasks.glue.config import GlueTaskConfig, MnliTaskConfig

    (tmp_path / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")
    for config in (GlueTaskConfig, MnliTaskConfig):
        with pytest.raises(ValueError, match=rf"data_dir: {tmp_path / 'dev.tsv'} is a file; name the task's folder"):
            config(data_dir=tmp_path / "dev.tsv")


def test_data_dir_at_the_glue_root_says_which_folder_to_set(tmp_path):
    """`data_dir: glue_data` (the root of download_glue_data.py's layout) only said "no such file"."""
    from xfer.tasks.glue.config import GlueTaskConfig
    from xfer.tasks.glue.tasks import MNLIMismatchedTask, RTETask

    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n")
    with pytest.raises(DataError, match=rf"missing \(no such file\); data_dir looks like the GLUE root: set data_dir "
                       rf"to the task's folder, {tmp_path / 'RTE'}$"):  # fmt: skip
        RTETask("glue/rte", GlueTaskConfig(data_dir=tmp_path)).examples("dev")
    with pytest.raises(DataError, match=r"missing \(no such file\)$"):  # no RTE/train.tsv: no hint
        RTETask("glue/rte", GlueTaskConfig(data_dir=tmp_path)).examples("train")
    with pytest.raises(DataError, match=r"missing \(no such file\)$"):
        MNLIMismatchedTask("glue/mnli-mm", GlueTaskConfig(data_dir=tmp_path)).examples("dev")


def test_a_bom_inside_the_file_is_refused_as_concatenated_files(tmp_path):
    """MRPC's files start with a BOM; `cat train.tsv dev.tsv` (train on both for a submission) left
    one at the start of dev's header line, reported as "unknown label '\\ufeffQuality'"; in a
    headerless glue/tsv file it went silently into the first field."""
    from xfer.tasks.glue.config import GlueTaskConfig
    from xfer.tasks.glue.tasks import MRPCTask

    head = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n"
    part = ("\ufeff" + head + "1\t1\t2\tA man.\tA person.\r\n").encode()
    (tmp_path / "train.tsv").write_bytes(part + part)
    with pytest.raises(DataError, match=rf"{tmp_path / 'train.tsv'}:3: byte-order mark \(U\+FEFF\)"):
        MRPCTask("glue/mrpc", GlueTaskConfig(data_dir=tmp_path)).examples("train")
    (tmp_path / "t.tsv").write_bytes(("\ufeff7\ta\tx\n" * 2).encode())
    for quoting in (False, True):
        task = TsvTask(
            "glue/tsv",
            TsvTaskConfig(
                train=tmp_path / "t.tsv", header=False, id_column=0, text_a_column=1, quoting=quoting, labels=["x"]
            ),
        )
        with pytest.raises(DataError, match=r"t\.tsv:2: byte-order mark"):
            task.examples("train")

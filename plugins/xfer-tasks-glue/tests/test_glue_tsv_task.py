"""glue/tsv: a task defined in the recipe."""

from __future__ import annotations

import pytest

from xfer.core.config import FieldError
from xfer.core.errors import DataError, UserError
from xfer.tasks.glue.config import TsvTaskConfig
from xfer.tasks.glue.tasks import TsvTask


def make(**kw) -> TsvTask:
    return TsvTask("glue/tsv", TsvTaskConfig(**kw))


def test_named_columns_with_header(tmp_path):
    (tmp_path / "train.tsv").write_text("id\tq\tp\ty\na7\tHi?\tHello.\tyes\nb8\tBye?\tNo.\tno\n")
    t = make(
        train=tmp_path / "train.tsv",
        text_a_column="q",
        text_b_column="p",
        label_column="y",
        id_column="id",
        labels=["no", "yes"],
        metrics=["accuracy", "f1"],
    )
    examples = t.examples("train")
    assert [(e.id, e.text_a, e.text_b, e.label) for e in examples] == [
        ("train-a7", "Hi?", "Hello.", "yes"),
        ("train-b8", "Bye?", "No.", "no"),
    ]
    assert t.type == "classification" and t.main_metric == "accuracy" and t.labels == ("no", "yes")
    scores = t.evaluate(examples, {"train-a7": "yes", "train-b8": "yes"})
    assert scores["accuracy"] == pytest.approx(50.0)
    assert scores["f1"] == pytest.approx(100 * 2 * 1 * 0.5 / 1.5)  # positive = last label "yes"


def test_indexed_columns_csv_quoting_regression(tmp_path):
    (tmp_path / "dev.csv").write_text('0.5,"a, quoted\nfield"\n1.5,plain\n')
    t = make(
        dev=tmp_path / "dev.csv",
        header=False,
        text_a_column=1,
        label_column=0,
        delimiter=",",
        quoting=True,
        type="regression",
        metrics=["spearman", "pearson"],
    )
    examples = t.examples("dev")
    assert [(e.id, e.text_a, e.label) for e in examples] == [
        ("dev-0", "a, quoted\nfield", 0.5),
        ("dev-1", "plain", 1.5),
    ]
    assert t.type == "regression" and t.main_metric == "spearman"
    assert t.evaluate(examples, {"dev-0": 0.1, "dev-1": 0.9})["spearman"] == pytest.approx(100.0)


@pytest.mark.parametrize("score", ["4_2", "٤", "0x1", "nan", "-inf", "1e400", ""])
def test_regression_score_must_be_a_plain_decimal_number(tmp_path, score):
    """float() read '4_2' as 42.0 and '٤' (Arabic-Indic four) as 4.0: a typo became a label."""
    (tmp_path / "train.tsv").write_text(f"text\tscore\na\t1.5\nb\t{score}\n", encoding="utf-8")
    t = make(train=tmp_path / "train.tsv", label_column="score", type="regression", metrics=["pearson"])
    with pytest.raises(DataError, match=r"train\.tsv:3: score: not a (finite )?number"):
        t.examples("train")


@pytest.mark.parametrize(
    ("score", "value"), [("3", 3.0), ("-.5", -0.5), ("+2.", 2.0), ("1E-2", 0.01), (" 4.25 ", 4.25)]
)
def test_regression_scores_read(tmp_path, score, value):
    (tmp_path / "train.tsv").write_text(f"text\tscore\na\t{score}\n", encoding="utf-8")
    t = make(train=tmp_path / "train.tsv", label_column="score", type="regression", metrics=["pearson"])
    assert t.examples("train")[0].label == value


def test_unlabelled_test_file(tmp_path):
    (tmp_path / "test.tsv").write_text("text\nx\n")
    t = make(test=tmp_path / "test.tsv", text_a_column="text", label_column="label", labels=["a", "b"])
    assert t.examples("test")[0].label is None


def test_unlabelled_headerless_test_file_with_label_column_by_index(tmp_path):
    # The knob says a test file's label column may be absent; given by index in headerless
    # files, the narrower test file used to be refused ("column 1 does not exist").
    (tmp_path / "test.tsv").write_text("x\ny\n")
    (tmp_path / "test2.tsv").write_text("x\tb\ny\ta\n")
    unlabelled = make(test=tmp_path / "test.tsv", header=False, label_column=1, labels=["a", "b"])
    assert [(e.id, e.text_a, e.label) for e in unlabelled.examples("test")] == [
        ("test-0", "x", None),
        ("test-1", "y", None),
    ]
    labelled = make(test=tmp_path / "test2.tsv", header=False, label_column=1, labels=["a", "b"])
    assert [e.label for e in labelled.examples("test")] == ["b", "a"]
    # Only the test split may lack labels: the same narrow file as dev is still an error.
    narrow_dev = make(dev=tmp_path / "test.tsv", header=False, label_column=1, labels=["a", "b"])
    with pytest.raises(DataError, match="label_column: column 1 does not exist"):
        narrow_dev.examples("dev")


def test_unknown_label_names_file_and_line(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("t\tl\nx\ta\ny\tc\n")
    t = make(train=path, text_a_column="t", label_column="l", labels=["a", "b"])
    with pytest.raises(DataError, match=f"{path}:3: l: unknown label 'c'"):
        t.examples("train")


def test_wrong_column_count_headerless(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("x\ta\ny\n")
    t = make(train=path, header=False, label_column=1, labels=["a"])
    with pytest.raises(DataError, match=f"{path}:2: expected 2 columns \\(as on line 1\\), found 1"):
        t.examples("train")


def test_column_index_out_of_range(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("x\ta\n")
    with pytest.raises(DataError, match=f"{path}:1: label_column: column 5 does not exist"):
        make(train=path, header=False, label_column=5, labels=["a"]).examples("train")


def test_quoted_csv_blank_lines_only_at_the_end(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text('t,l\n"x, y",a\n\n\n')
    t = make(train=path, delimiter=",", quoting=True, label_column="l", text_a_column="t", labels=["a"])
    assert [e.text_a for e in t.examples("train")] == ["x, y"]
    path.write_text('t,l\n"x, y",a\n\nz,a\n')
    t = make(train=path, delimiter=",", quoting=True, label_column="l", text_a_column="t", labels=["a"])
    with pytest.raises(DataError, match=f"{path}:3: empty line"):
        t.examples("train")


def test_unterminated_quote(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text('t,l\nok,a\n"never closed,a\n')
    t = make(train=path, delimiter=",", quoting=True, label_column="l", text_a_column="t", labels=["a"])
    with pytest.raises(DataError, match=f"{path}:\\d+: malformed CSV"):
        t.examples("train")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({}, "labels: required for a classification task"),
        ({"labels": ["a"], "metrics": ["pearson"]}, "metrics: 'pearson' is not available for classification"),
        ({"type": "regression", "labels": ["a"], "metrics": ["pearson"]}, "labels: must not be set for a regression"),
        ({"labels": ["a", "b"], "main_metric": "mcc"}, "main_metric: 'mcc' is not in metrics"),
        ({"labels": ["a", "b", "c"], "metrics": ["f1"]}, "positive_label: f1 needs it"),
        (
            {"labels": ["a", "b"], "header": False, "text_a_column": "t"},
            "text_a_column: is a column name but header is false",
        ),
        ({"labels": ["a", "b"], "delimiter": "::"}, "delimiter: must be one character"),
    ],
)
def test_config_validation(kw, message):
    # raised by the config itself, blaming its key, so `xfer validate` reports it at the key's YAML position
    with pytest.raises(FieldError, match=message) as caught:
        TsvTaskConfig(**kw)
    assert caught.value.key == (message.split(":")[0],)


def test_a_lone_config_problem_is_reported_at_its_key_line(tmp_path):
    """Only the delimiter problems named their key: `main_metric: mcc` not in `metrics` (and the
    rest) was reported at the task's mapping, several lines from the word to fix."""
    from xfer.core.errors import RecipeError
    from xfer.core.recipes.recipe import load_recipe
    from xfer.testing import write_recipe
    from xfer.transformer.testing import tiny_finetune_recipe

    (tmp_path / "train.tsv").write_text("t\ty\na\tpos\nb\tneg\n")
    task = "\n".join(
        [
            "{name: glue/tsv, train: train.tsv, dev: train.tsv, text_a_column: t, label_column: y,",
            "         labels: [neg, pos],",
            "         main_metric: mcc}",
        ]
    )
    path = write_recipe(tmp_path, tiny_finetune_recipe(task))
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    line = next(n for n, text in enumerate(path.read_text().splitlines(), start=1) if "main_metric: mcc" in text)
    assert f"{path}:{line}:" in str(caught.value) and "main_metric: 'mcc' is not in metrics" in str(caught.value)


def test_config_reports_every_problem_at_once():
    with pytest.raises(
        ValueError,
        match=r"labels: required.*delimiter: must be one character.*max_examples: must be a positive integer",
    ):
        TsvTaskConfig(delimiter=";;", max_examples=0)


def test_missing_split_file_is_a_clear_error():
    with pytest.raises(UserError, match="no dev file configured"):
        make(labels=["a"]).examples("dev")
    assert issubclass(DataError, UserError)


def test_registered_metric_components_can_be_named(tmp_path):
    """`xfer_metrics` components had no consumer: a registered metric could not be used anywhere."""
    (tmp_path / "dev.tsv").write_text("t\ty\na\tyes\nb\tno\nc\tyes\nd\tno\n")
    t = make(
        dev=tmp_path / "dev.tsv", text_a_column="t", label_column="y", labels=["no", "yes"], metrics=["core.mcc", "mcc"]
    )
    examples = t.examples("dev")
    scores = t.evaluate(examples, {"dev-0": "yes", "dev-1": "no", "dev-2": "no", "dev-3": "no"})
    assert t.main_metric == "core.mcc" and scores["core.mcc"] == pytest.approx(scores["mcc"])
    assert 0 < scores["mcc"] < 100


def test_every_core_metric_component_scores_string_labels_or_values(tmp_path):
    """Each registered `core.*` metric meets the component contract on a task's own labels: core
    once registered f1 (no positive class: refused string labels), span_f1 and corpus_bleu (score
    objects), which the recipe accepted and which failed only after training."""
    from xfer.core.plugins import default_host

    names = sorted(name for kind, name in default_host().components if kind == "metric" and name.startswith("core."))
    assert names == ["core.accuracy", "core.mcc", "core.pearson", "core.spearman"]
    (tmp_path / "dev.tsv").write_text("t\ty\na\tyes\nb\tno\nc\tyes\nd\tno\n")
    t = make(dev=tmp_path / "dev.tsv", text_a_column="t", label_column="y", labels=["no", "yes"], metrics=names[:2])
    scores = t.evaluate(t.examples("dev"), {"dev-0": "yes", "dev-1": "no", "dev-2": "no", "dev-3": "no"})
    assert scores["core.accuracy"] == 75.0
    for gone in ("core.f1", "core.span_f1", "core.corpus_bleu"):
        with pytest.raises(ValueError, match=f"unknown metric '{gone}'"):
            TsvTaskConfig(labels=["no", "yes"], metrics=[gone])


def test_an_unknown_metric_component_is_refused_with_a_suggestion():
    with pytest.raises(ValueError, match=r"unknown metric 'core\.mccc'; did you mean 'core\.mcc'"):
        TsvTaskConfig(labels=["a", "b"], metrics=["core.mccc"])


PLUGIN = """
from xfer.core import ComponentSpec, hookimpl

XFER_NAMESPACE = "metricplug"


def agree(golds, preds):
    return 100.0 * sum(g == p for g, p in zip(golds, preds)) / len(golds)


@hookimpl
def xfer_metrics():
    return [ComponentSpec(kind="metric", name="metricplug.agree", target="metricplug_mod:agree", version="1")]
"""


def test_metric_components_come_from_the_host_the_recipe_is_loaded_with(tmp_path, monkeypatch):
    """A plugin in `make_host(modules=...)` was asked for in another (the default) host."""
    from xfer.core.errors import RecipeError
    from xfer.core.plugins import set_default_host
    from xfer.core.recipes.recipe import load_recipe
    from xfer.testing import make_host, write_recipe
    from xfer.transformer.testing import tiny_finetune_recipe

    (tmp_path / "metricplug_mod.py").write_text(PLUGIN)
    (tmp_path / "train.tsv").write_text("t\ty\na\tpos\nb\tneg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    set_default_host(make_host(autoload=True))  # the process's host knows no metricplug
    try:
        task = "{name: glue/tsv, train: train.tsv, dev: train.tsv, text_a_column: t, label_column: y, labels: [neg, pos], metrics: [metricplug.agree]}"
        path = write_recipe(tmp_path, tiny_finetune_recipe(task))
        load_recipe(path, host=make_host(["metricplug_mod"], autoload=True))
        with pytest.raises(RecipeError, match="metricplug"):
            load_recipe(path)
    finally:
        set_default_host(None)


def test_empty_id_column_value_is_an_error(tmp_path):
    """glue/tsv with id_column: an empty id was accepted as `train-`, a blank one as `train- `."""
    (tmp_path / "train.tsv").write_text("id\ttext\tlabel\na1\thello\ta\n\tworld\tb\n")
    t = make(
        train=tmp_path / "train.tsv", text_a_column="text", label_column="label", id_column="id", labels=["a", "b"]
    )
    with pytest.raises(DataError, match=r"train\.tsv:3: id: empty example id"):
        t.examples("train")


def test_a_metric_components_version_is_part_of_the_stage_fingerprint(tmp_path, monkeypatch):
    """Metrics are named by plain string (`metrics: [metricplug.agree]`), not as component
    references, so a new version of the metric's plugin left the scored stage "completed"."""
    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.runs.fingerprint import FileHasher, stage_signature
    from xfer.testing import make_host, write_recipe
    from xfer.transformer.testing import tiny_finetune_recipe

    (tmp_path / "metricplug_mod.py").write_text(PLUGIN)
    (tmp_path / "metricplug_v2.py").write_text(PLUGIN.replace('version="1"', 'version="2"'))
    (tmp_path / "train.tsv").write_text("t\ty\na\tpos\nb\tneg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    task = "{name: glue/tsv, train: train.tsv, dev: train.tsv, text_a_column: t, label_column: y, labels: [neg, pos], metrics: [metricplug.agree]}"
    path = write_recipe(tmp_path, tiny_finetune_recipe(task))

    def signature(module: str):
        host = make_host([module], autoload=True)
        recipe = load_recipe(path, host=host)
        [plan] = [p for p in recipe.stages.values() if p.kind == "transformer.finetune"]
        return stage_signature(plan, recipe.seed, {d: "x" for d in plan.deps}, host, FileHasher())

    first, second = signature("metricplug_mod"), signature("metricplug_v2")
    assert first.parts["components"]["metric metricplug.agree"]["version"] == "1"
    assert first.fingerprint != second.fingerprint

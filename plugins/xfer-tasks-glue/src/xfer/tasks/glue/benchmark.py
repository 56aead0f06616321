"""What distinguishes the GLUE tasks from each other: file layouts, labels, metrics, file names.

One table instead of ten reader classes, so that a reader fix applies to every task. The
layouts follow the files written by GLUE's `download_glue_data.py` (see /work/shared/data/glue):
headers are matched by name, so the extra columns of MNLI/STS-B/QQP files are simply ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from xfer.tasks.glue.readers import TableLayout


@dataclass(frozen=True)
class GlueSpec:
    key: str  # our short name: "rte", "mnli-mm", ...
    folder: str  # conventional folder in glue_data/
    type: Literal["classification", "regression"]
    labels: tuple[str, ...]  # label strings as in the files and as the GLUE server expects them
    metrics: tuple[str, ...]
    main_metric: str
    submission: str  # file name of the test predictions in a GLUE submission zip
    layout: TableLayout  # train/dev files
    test_layout: TableLayout  # test files (unlabelled; an index column)
    files: dict[str, str] = field(default_factory=lambda: {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"})
    score_range: tuple[float, float] | None = None  # regression only
    hub_subset: str = ""
    hub_splits: dict[str, str] = field(default_factory=lambda: {"train": "train", "dev": "validation", "test": "test"})
    hub_text: tuple[str, str | None] = ("sentence", None)
    hub_labels: tuple[str, ...] = ()  # label string for each class id of the hub dataset


def _pair(a: str, b: str, label: str, index: str = "index") -> TableLayout:
    """Header-named pair layout; the index column is optional (MRPC train/dev have none)."""
    return TableLayout(text_a=a, text_b=b, label=label, index=index, index_optional=True)


def _test(layout: TableLayout) -> TableLayout:
    """The same columns in a test file: the label column may be absent (GLUE hides test labels)."""
    return TableLayout(
        text_a=layout.text_a,
        text_b=layout.text_b,
        label=layout.label,
        index=layout.index,
        label_optional=True,
        index_optional=True,
    )


BINARY = ("0", "1")
NLI2 = ("entailment", "not_entailment")
MNLI_LABELS = ("contradiction", "entailment", "neutral")  # sorted, the order of our label ids
_MNLI_HUB = ("entailment", "neutral", "contradiction")  # nyu-mll/glue class ids
_MNLI_LAYOUT = _pair("sentence1", "sentence2", "gold_label")


def _specs() -> dict[str, GlueSpec]:
    single_sst = TableLayout(text_a="sentence", label="label", index="index", index_optional=True)
    cola_train = TableLayout(text_a=3, label=1, header=False, width=4)  # source, label, mark, sentence
    cola_test = TableLayout(text_a="sentence", index="index", label_optional=True, index_optional=True)
    mrpc = _pair("#1 String", "#2 String", "Quality")
    stsb = _pair("sentence1", "sentence2", "score")
    qqp = _pair("question1", "question2", "is_duplicate", index="id")
    qnli = _pair("question", "sentence", "label")
    rte = _pair("sentence1", "sentence2", "label")
    specs = [
        GlueSpec("cola", "CoLA", "classification", BINARY, ("mcc", "accuracy"), "mcc", "CoLA.tsv",
                 cola_train, cola_test, hub_subset="cola", hub_labels=BINARY),
        GlueSpec("sst2", "SST-2", "classification", BINARY, ("accuracy",), "accuracy", "SST-2.tsv",
                 single_sst, _test(single_sst), hub_subset="sst2", hub_labels=BINARY),
        GlueSpec("mrpc", "MRPC", "classification", BINARY, ("accuracy", "f1", "acc_f1_avg"), "accuracy",
                 "MRPC.tsv", mrpc, _test(mrpc), hub_subset="mrpc", hub_text=("sentence1", "sentence2"),
                 hub_labels=BINARY),
        GlueSpec("stsb", "STS-B", "regression", (), ("pearson", "spearman", "pearson_spearman_avg"), "spearman",
                 "STS-B.tsv", stsb, _test(stsb), score_range=(0.0, 5.0), hub_subset="stsb",
                 hub_text=("sentence1", "sentence2")),
        GlueSpec("qqp", "QQP", "classification", BINARY, ("accuracy", "f1", "acc_f1_avg"), "accuracy", "QQP.tsv",
                 qqp, _test(qqp), hub_subset="qqp", hub_text=("question1", "question2"), hub_labels=BINARY),
        GlueSpec("mnli", "MNLI", "classification", MNLI_LABELS, ("accuracy",), "accuracy", "MNLI-m.tsv",
                 _MNLI_LAYOUT, _test(_MNLI_LAYOUT),
                 files={"train": "train.tsv", "dev": "dev_matched.tsv", "test": "test_matched.tsv"},
                 hub_subset="mnli",
                 hub_splits={"train": "train", "dev": "validation_matched", "test": "test_matched"},
                 hub_text=("premise", "hypothesis"), hub_labels=_MNLI_HUB),
        GlueSpec("mnli-mm", "MNLI", "classification", MNLI_LABELS, ("accuracy",), "accuracy", "MNLI-mm.tsv",
                 _MNLI_LAYOUT, _test(_MNLI_LAYOUT),
                 files={"train": "train.tsv", "dev": "dev_mismatched.tsv", "test": "test_mismatched.tsv"},
                 hub_subset="mnli",
                 hub_splits={"train": "train", "dev": "validation_mismatched", "test": "test_mismatched"},
                 hub_text=("premise", "hypothesis"), hub_labels=_MNLI_HUB),
        GlueSpec("qnli", "QNLI", "classification", NLI2, ("accuracy",), "accuracy", "QNLI.tsv",
                 qnli, _test(qnli), hub_subset="qnli", hub_text=("question", "sentence"), hub_labels=NLI2),
        GlueSpec("rte", "RTE", "classification", NLI2, ("accuracy",), "accuracy", "RTE.tsv",
                 rte, _test(rte), hub_subset="rte", hub_text=("sentence1", "sentence2"), hub_labels=NLI2),
        # WNLI's hub class 1 is "entailment", matching the GLUE file label "1".
        GlueSpec("wnli", "WNLI", "classification", BINARY, ("accuracy",), "accuracy", "WNLI.tsv",
                 rte, _test(rte), hub_subset="wnli", hub_text=("sentence1", "sentence2"), hub_labels=BINARY),
    ]  # fmt: skip
    return {spec.key: spec for spec in specs}


GLUE_SPECS: dict[str, GlueSpec] = _specs()

# AX's labels are never read: its examples join MNLI's unlabelled test split, which must be unlabelled
# throughout (the Task contract), so an AX file with a `gold_label` column was refused by the pre-flight
# ("test-0 has no label but ax-0 has one") although only its predictions are ever asked for.
_AX_LAYOUT = TableLayout(text_a="sentence1", text_b="sentence2", index="index", index_optional=True)

AX_SPEC = GlueSpec(
    "ax", "diagnostic", "classification", MNLI_LABELS, ("accuracy",), "accuracy", "AX.tsv",
    _AX_LAYOUT, _AX_LAYOUT, files={"test": "diagnostic.tsv"}, hub_subset="ax",
    hub_splits={"test": "test"}, hub_text=("premise", "hypothesis"), hub_labels=_MNLI_HUB,
)  # fmt: skip
"""GLUE's diagnostic set: test only (no public labels), predicted by an MNLI model (glue/mnli's `diagnostic`)."""

"""Entry point of the `glue` plugin: registers the GLUE tasks and glue/tsv.

Cheap to import on purpose (no numpy, datasets or torch): the host imports every plugin at
start-up, and task modules are imported only when a recipe uses them.
"""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec

_MODULE = "xfer.tasks.glue.tasks"
_CONFIGS = "xfer.tasks.glue.config"
"""Each task's config class is GlueTaskConfig's subclass `<task class>Config` (MNLI's: MnliTaskConfig,
with the diagnostic set AX), which names the nyu-mll/glue subset its `source: hub` reads."""

# name, class, summary
_GLUE = (
    ("glue/cola", "CoLATask", "GLUE CoLA acceptability (main metric: MCC x100)"),
    ("glue/sst2", "SST2Task", "GLUE SST-2 binary sentiment (accuracy)"),
    ("glue/mrpc", "MRPCTask", "GLUE MRPC paraphrase (accuracy; F1 and acc/F1 mean also reported)"),
    ("glue/stsb", "STSBTask", "GLUE STS-B similarity regression, scores 0-5 (Spearman x100; Pearson too)"),
    ("glue/qqp", "QQPTask", "GLUE QQP duplicate questions (accuracy; F1 and acc/F1 mean also reported)"),
    ("glue/mnli", "MNLITask", "GLUE MNLI, matched dev/test (accuracy); optionally the diagnostic set AX"),
    ("glue/mnli-mm", "MNLIMismatchedTask", "GLUE MNLI, mismatched dev/test (accuracy)"),
    ("glue/qnli", "QNLITask", "GLUE QNLI question/sentence entailment (accuracy)"),
    ("glue/rte", "RTETask", "GLUE RTE textual entailment (accuracy)"),
    ("glue/wnli", "WNLITask", "GLUE WNLI Winograd NLI (accuracy)"),
)


@hookimpl
def xfer_tasks() -> list[ComponentSpec]:
    specs = [
        ComponentSpec(
            kind="task",
            name=name,
            target=f"{_MODULE}:{cls}",
            version="1",
            config=f"{_CONFIGS}:{'MnliTaskConfig' if name == 'glue/mnli' else cls + 'Config'}",
            summary=summary,
        )
        for name, cls, summary in _GLUE
    ]
    specs.append(
        ComponentSpec(
            kind="task",
            name="glue/tsv",
            target=f"{_MODULE}:TsvTask",
            version="1",
            config="xfer.tasks.glue.config:TsvTaskConfig",
            summary="Sentence(-pair) classification/regression from any TSV/CSV file, defined in the recipe",
        )
    )
    return specs

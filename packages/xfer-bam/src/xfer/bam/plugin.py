"""xfer-bam's plugin (namespace `bam`): registration only — nothing heavy is imported here."""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import CommandSpec, ComponentSpec

_M = "xfer.bam"
_OUTPUTS = ("models", "predictions", "results")


@hookimpl
def xfer_stages() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "stage",
            "bam.teachers",
            f"{_M}.stage:run_teachers",
            "1",
            f"{_M}.config:TeachersConfig",
            "BAM teachers: one single-task model per task (N seeds); training-set predictions cached for students.",
            outputs=("init", *_OUTPUTS),
        ),
        ComponentSpec(
            "stage",
            "bam.student",
            f"{_M}.stage:run_student",
            "1",
            f"{_M}.config:StudentConfig",
            "BAM student: shared encoder + head per task, |D|^0.75 task sampling, teacher annealing from cached predictions.",
            outputs=_OUTPUTS,
        ),
    ]


@hookimpl
def xfer_commands() -> list[CommandSpec]:
    return [
        CommandSpec(
            "compare",
            "compare systems over seeds: medians, paired bootstrap tests with Holm-Bonferroni, plot",
            f"{_M}.compare_cli:configure",
            f"{_M}.compare_cli:run",
        )
    ]

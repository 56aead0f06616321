"""xfer-bam's plugin (namespace `bam`): registration only — nothing heavy is imported here."""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import CommandSpec, ComponentSpec

_M = "xfer.bam"
_OUTPUTS = ("models", "predictions", "results")
# models: models.json (task -> model dir) and the dirs, which a BAM `init` reads, a finetune `init` not;
# predictions: the teachers' cached training-set outputs, which a student's `teachers` reads.
_KINDS = (("models", "bam-models"), ("predictions", "teacher-predictions"), ("results", "results"))


@hookimpl
def xfer_stages() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "stage",
            "bam.teachers",
            f"{_M}.stage:run_teachers",
            # 2: task heads drawn with the encoder's initializer_range (was always 0.02), as ELECTRA's; 3: on a bf16 CPU
            # (AMX/AVX512-BF16) matmul row counts are rounded up to a multiple of 64 and the extra rows
            # draw dropout bits, so the random stream there changes (fp32 and CUDA runs are unchanged);
            # 4: on a bf16 CPU a batch without padding is rounded up to a multiple of 64 rows too (was dense);
            # 5: on a bf16 CPU attention's length buckets come in rounded shapes (multiples of 8)
            "5",
            f"{_M}.config:TeachersConfig",
            "BAM teachers: one single-task model per task (N seeds); training-set predictions cached for students.",
            outputs=("init", *_OUTPUTS),
            output_kinds=(("init", "model"), *_KINDS),
        ),
        ComponentSpec(
            "stage",
            "bam.student",
            f"{_M}.stage:run_student",
            # 2: task draws and task orders are separate random streams (multi-task batches change);
            # heads drawn with the encoder's initializer_range; 3: on a bf16 CPU
            # (AMX/AVX512-BF16) matmul row counts are rounded up to a multiple of 64 and the extra rows
            # draw dropout bits, so the random stream there changes (fp32 and CUDA runs are unchanged);
            # 4: on a bf16 CPU a batch without padding is rounded up to a multiple of 64 rows too (was dense);
            # 5: on a bf16 CPU attention's length buckets come in rounded shapes (multiples of 8)
            "5",
            f"{_M}.config:StudentConfig",
            "BAM student: shared encoder + head per task, |D|^0.75 task sampling, teacher annealing from cached predictions.",
            outputs=_OUTPUTS,
            output_kinds=_KINDS,
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

"""Entry point of the `mt` plugin: registers the parallel-text translation task.

Cheap to import (no sacrebleu/torch): the host imports every plugin at start-up.
"""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec


@hookimpl
def xfer_tasks() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            kind="task",
            name="mt/parallel",
            target="xfer.tasks.mt.tasks:ParallelTextTask",
            version="1",
            config="xfer.tasks.mt.config:ParallelConfig",
            summary="Translation from line-aligned parallel text files (e.g. Multi30k en-de); sacrebleu BLEU",
        )
    ]

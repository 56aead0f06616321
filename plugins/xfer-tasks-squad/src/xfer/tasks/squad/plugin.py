"""Entry point of the `squad` plugin: registers squad/v1 and squad/v2 (cheap to import)."""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec

_CONFIG = "xfer.tasks.squad.config:SquadConfig"


@hookimpl
def xfer_tasks() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            kind="task",
            name="squad/v1",
            target="xfer.tasks.squad.tasks:SquadV1Task",
            version="1",
            config=_CONFIG,
            summary="SQuAD 1.1 extractive QA from the official JSON; official EM/F1 (main: f1)",
        ),
        ComponentSpec(
            kind="task",
            name="squad/v2",
            target="xfer.tasks.squad.tasks:SquadV2Task",
            version="2",  # 2: null odds and best non-null answers beside the prediction file
            config=_CONFIG,
            summary="SQuAD 2.0 extractive QA with unanswerable questions; official EM/F1 + HasAns/NoAns (main: f1)",
        ),
    ]

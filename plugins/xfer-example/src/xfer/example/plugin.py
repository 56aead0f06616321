"""The plugin module named by the `xfer` entry point. Keep it cheap: specs only, no heavy imports."""

from __future__ import annotations

from xfer.core import ComponentSpec, hookimpl


@hookimpl
def xfer_tasks() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            kind="task",
            name="example/jsonl",
            target="xfer.example.jsonl_task:JsonlTask",
            config="xfer.example.jsonl_task:JsonlConfig",
            version="1",
            summary="Text classification from JSON-lines files ({'text': ..., 'label': ...} per line).",
        )
    ]


@hookimpl
def xfer_objectives() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            kind="objective",
            name="example.focal",
            target="xfer.example.focal:FocalObjective",
            config="xfer.example.focal:FocalConfig",
            version="1",
            summary="Sentence classification with focal loss (Lin et al., 2017) instead of cross-entropy.",
        )
    ]

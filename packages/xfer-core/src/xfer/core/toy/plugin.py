"""The toy language as a plugin (namespace `toy`): three labelled tasks and a text-corpus stage.

Everything is generated deterministically from a seed, so the quickstart and the tests need
no downloaded data.
"""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec


@hookimpl
def xfer_tasks() -> list[ComponentSpec]:
    config = "xfer.core.toy.tasks:ToyTaskConfig"
    return [
        ComponentSpec(
            "task",
            "toy/pos",
            "xfer.core.toy.tasks:ToyPosTask",
            "1",
            config,
            "Toy-language part-of-speech tagging (token accuracy).",
        ),
        ComponentSpec(
            "task", "toy/chunk", "xfer.core.toy.tasks:ToyChunkTask", "1", config, "Toy-language BIO chunking (span F1)."
        ),
        ComponentSpec(
            "task",
            "toy/agreement",
            "xfer.core.toy.tasks:ToyAgreementTask",
            "1",
            config,
            "Toy-language grammaticality: is subject-verb agreement respected across clauses?",
        ),
    ]


@hookimpl
def xfer_stages() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "stage",
            "toy.corpus",
            "xfer.core.toy.stage:run_corpus",
            "1",
            "xfer.core.toy.stage:ToyCorpusConfig",
            "Write unlabeled toy-language text (one sentence per line, blank line between documents).",
            outputs=("text",),
            output_kinds=(("text", "text"),),
        )
    ]

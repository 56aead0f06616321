"""Entry point of the `conll` plugin: registers the sequence-tagging and dependency-parsing tasks.

Cheap to import (no numpy/seqeval/torch): the host imports every plugin at start-up.
"""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec

_TASKS = "xfer.tasks.conll.tasks"
_CONFIG = "xfer.tasks.conll.config"


@hookimpl
def xfer_tasks() -> list[ComponentSpec]:
    def spec(name: str, cls: str, config: str, summary: str, module: str = _TASKS, version: str = "1") -> ComponentSpec:
        return ComponentSpec(
            kind="task",
            name=name,
            target=f"{module}:{cls}",
            version=version,
            config=f"{_CONFIG}:{config}",
            summary=summary,
        )

    # span tasks, 2: ill-formed BIOES predictions are written as the spans that were scored

    return [
        spec("conll/chunking", "ChunkingTask", "ChunkingConfig",
             "CoNLL-2000 chunking (WORD POS CHUNK); dev carved from the end of train; span F1", version="2"),
        spec("conll/ner", "SpanTaggingTask", "SpanTaggingConfig",
             "CoNLL-2003 NER (IOB1/IOB2/BIOES files, BIOES tags by default); span F1", version="2"),
        spec("conll/ud-pos", "UdPosTask", "UdPosConfig", "Universal Dependencies POS tagging from CoNLL-U (UPOS/XPOS); accuracy"),
        spec("conll/columns", "ColumnsTask", "ColumnsConfig",
             "Generic column-file tagging: span F1 (BIO/BIOES) or token accuracy (scheme none)", version="2"),
        spec("conll/ud-parse", "UdParseTask", "UdParseConfig",
             "Dependency parsing from CoNLL-U (HEAD/DEPREL); LAS/UAS without punctuation (CoNLL-2007)",
             module="xfer.tasks.conll.parsing"),
    ]  # fmt: skip

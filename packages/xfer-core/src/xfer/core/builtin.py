"""Core's own plugin (namespace `core`): the reference metrics as components."""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec

_METRICS = {
    "accuracy": "Accuracy in percent.",
    "f1": "Binary F1 of the positive class, in percent (scikit-learn).",
    "mcc": "Matthews correlation coefficient x100, in [-100, 100] (scikit-learn).",
    "pearson": "Pearson correlation x100 (scipy).",
    "spearman": "Spearman rank correlation x100 (scipy).",
    "span_f1": "Exact-match span precision/recall/F1 for BIO/BIOES tags (seqeval, conlleval semantics).",
    "corpus_bleu": "Corpus BLEU with its signature (sacrebleu).",
}


@hookimpl
def xfer_metrics() -> list[ComponentSpec]:
    return [
        ComponentSpec(kind="metric", name=f"core.{name}", target=f"xfer.core.metrics:{name}", version="1", summary=doc)
        for name, doc in _METRICS.items()
    ]

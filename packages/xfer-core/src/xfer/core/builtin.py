"""Core's own plugin (namespace `core`): the reference metrics as components."""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec

# Only the metrics that meet the component contract, `(golds, predictions) -> percent` on a task's
# labels: `f1` needs its positive class and `span_f1` / `corpus_bleu` return score objects, so as
# components they failed after training (use them from `xfer.core.metrics`; glue/tsv has its own f1).
_METRICS = {
    "accuracy": "Accuracy in percent.",
    "mcc": "Matthews correlation coefficient x100, in [-100, 100] (scikit-learn).",
    "pearson": "Pearson correlation x100 (scipy).",
    "spearman": "Spearman rank correlation x100 (scipy).",
}


@hookimpl
def xfer_metrics() -> list[ComponentSpec]:
    return [
        ComponentSpec(kind="metric", name=f"core.{name}", target=f"xfer.core.metrics:{name}", version="1", summary=doc)
        for name, doc in _METRICS.items()
    ]

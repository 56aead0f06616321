"""`source: hub`: GLUE from the Hugging Face Hub (nyu-mll/glue), only when a recipe asks for it.

Local files are the default because runs must be reproducible offline; the Hub copy is a
convenience. Its class ids are mapped back to the label strings of the GLUE files so that a
model trained on either source predicts the same strings.
"""

from __future__ import annotations

from xfer.core.errors import UserError
from xfer.core.tasks import SentenceExample
from xfer.tasks.glue.benchmark import GlueSpec

HUB_DATASET = "nyu-mll/glue"


def load_hub_split(spec: GlueSpec, split: str, task: str, id_prefix: str = "") -> list[SentenceExample]:
    """Download (or take from the `datasets` cache) one split and convert it to examples with ids
    `<id_prefix or split>-<idx>`."""
    try:
        import datasets
    except ImportError:
        raise UserError(
            f"{task}: source 'hub' needs the `datasets` library (pip install 'xfer-tasks-glue[hub]'), "
            "or use source: local with data_dir"
        ) from None
    hub_split = spec.hub_splits[split]
    try:
        data = datasets.load_dataset(HUB_DATASET, spec.hub_subset, split=hub_split)
    except Exception as err:  # datasets raises many types (ConnectionError, OSError, HfHubHTTPError, ...)
        raise UserError(
            f"{task}: could not load {HUB_DATASET} subset {spec.hub_subset!r} split {hub_split!r} from the "
            f"Hugging Face Hub ({type(err).__name__}: {err}). Are you offline? Download GLUE once and use "
            "source: local with data_dir, or pre-fill the `datasets` cache."
        ) from err
    col_a, col_b = spec.hub_text
    examples = []
    for row in data:
        label: str | float | None
        raw = row["label"]
        if raw is None or (spec.type == "classification" and raw < 0):
            label = None  # GLUE test splits carry label -1
        elif spec.type == "regression":
            label = None if raw < 0 else float(raw)
            # A score outside GLUE's 0-5 range would silently skew training and Pearson/Spearman.
            if label is not None and not 0.0 <= label <= 5.0:
                raise UserError(
                    f"{task}: {HUB_DATASET} subset {spec.hub_subset!r} split {hub_split!r} row idx "
                    f"{row['idx']}: score {raw!r} is outside the 0-5 range"
                )
        elif not isinstance(raw, int) or raw >= len(spec.hub_labels):
            # A bare IndexError (or a wrong label from a float index) would not say which row is bad.
            raise UserError(
                f"{task}: {HUB_DATASET} subset {spec.hub_subset!r} split {hub_split!r} row idx "
                f"{row['idx']}: class id {raw!r} is not one of 0..{len(spec.hub_labels) - 1}"
            )
        else:
            label = spec.hub_labels[raw]
        examples.append(
            SentenceExample(
                id=f"{id_prefix or split}-{row['idx']}",
                text_a=row[col_a],
                text_b=row[col_b] if col_b else None,
                label=label,
            )
        )
    return examples

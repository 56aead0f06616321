"""`source: hub`: GLUE from the Hugging Face Hub (nyu-mll/glue), only when a recipe asks for it.

Local files are the default because runs must be reproducible offline; the Hub copy is a
convenience. Its class ids are mapped back to the label strings of the GLUE files so that a
model trained on either source predicts the same strings.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from xfer.core.errors import UserError
from xfer.core.tasks import SentenceExample
from xfer.tasks.glue.benchmark import GlueSpec

HUB_DATASET = "nyu-mll/glue"


def cached_copies(subset: str) -> dict[str, Path]:
    """{name: folder} of the copies of `subset` of nyu-mll/glue in the user's `datasets` cache, what
    `load_dataset` reads (`GlueTaskConfig.implicit_inputs`: the stage fingerprint signs them).

    A copy is `<HF_DATASETS_CACHE>/nyu-mll___glue/<subset>/` (every version and snapshot of it:
    another snapshot downloaded adds a folder there, and offline `datasets` reads the newest),
    plus the `<subset>-<hash>/` folders of datasets 2.14-2.15, which it still reads. Never imports
    `datasets` when it is not installed ({}: the stage's own "needs datasets" error follows)."""
    try:
        import datasets.config
    except Exception:  # not installed, or an install that fails to import: the loader says so
        return {}
    root = Path(datasets.config.HF_DATASETS_CACHE) / HUB_DATASET.replace("/", "___")
    legacy = sorted(root.glob(f"{subset}-*")) if root.is_dir() else []
    return {subset: root / subset, **{folder.name: folder for folder in legacy if folder.is_dir()}}


_NLI3 = ("entailment", "neutral", "contradiction")
HUB_CLASS_NAMES: dict[str, tuple[str, ...]] = {
    "cola": ("unacceptable", "acceptable"),
    "sst2": ("negative", "positive"),
    "mrpc": ("not_equivalent", "equivalent"),
    "qqp": ("not_duplicate", "duplicate"),
    "mnli": _NLI3,
    "ax": _NLI3,
    "qnli": ("entailment", "not_entailment"),
    "rte": ("entailment", "not_entailment"),
    "wnli": ("not_entailment", "entailment"),
}
"""nyu-mll/glue's ClassLabel names, in class-id order: the order `GlueSpec.hub_labels` assumes."""


class HubNotAvailableError(UserError):
    """The split could not be loaded at all (not in the `datasets` cache while offline, no network):
    the pre-flight, which reads only the cache, leaves this one to the stage, which may download."""


_OFFLINE_LOCK = threading.RLock()
"""Held while `cache_only` has `datasets` offline and around every `load_dataset` call of this module.

`datasets.config.HF_HUB_OFFLINE` is one process-wide flag, not a per-call option. Flipped without a
lock, two overlapping pre-flights (two threads) restored it in the wrong order, leaving the process
offline for good, or online in the middle of the other's cache-only read (which then downloaded);
and a stage's online load in another thread ran while the flag was on and failed as "Are you
offline?". Re-entrant: the pre-flight's own loads run inside `cache_only` on the same thread."""


@contextmanager
def cache_only() -> Iterator[bool]:
    """Let `datasets` read its cache but never the network (the pre-flight must not download a
    whole dataset); yields whether the user was offline already (then a split not in the cache is
    a real problem, not one the run's download will solve). Holds `_OFFLINE_LOCK` throughout, so
    this module's loads on other threads wait instead of seeing the flag flipped."""
    import datasets.config

    with _OFFLINE_LOCK:
        previous = datasets.config.HF_HUB_OFFLINE
        datasets.config.HF_HUB_OFFLINE = True
        # Offline mode switched on here, not by the user: `datasets` would tell an online user that
        # "nyu-mll/glue couldn't be found on the Hugging Face Hub (offline mode is enabled)".
        quiet = _ThisThreadsNotices()
        loggers = [] if previous else [logging.getLogger(name) for name in _CACHE_NOTICES]
        for logger in loggers:
            logger.addFilter(quiet)
        try:
            yield bool(previous)
        finally:
            for logger in loggers:
                logger.removeFilter(quiet)
            datasets.config.HF_HUB_OFFLINE = previous


_CACHE_NOTICES = ("datasets.load", "datasets.packaged_modules.cache.cache")
"""The `datasets` loggers that announce, at WARNING, a read from the cache in offline mode."""


class _ThisThreadsNotices(logging.Filter):
    """Drops the WARNING-or-lower records of the thread that created it (the pre-flight's own
    cache-only reads), so another thread's `datasets` messages are left alone."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self.thread or record.levelno > logging.WARNING


def load_hub_split(spec: GlueSpec, split: str, task: str, id_prefix: str = "") -> list[SentenceExample]:
    """Download (or take from the `datasets` cache) one split and convert it to examples with ids
    `<id_prefix or split>-<idx>`."""
    try:
        import datasets
    except ImportError as err:
        if err.name != "datasets":
            # Installed but broken (say a `huggingface_hub` or `pyarrow` it cannot work with): "needs the
            # library, pip install it" sent the user to a pip that answers "already satisfied".
            raise UserError(
                f"{task}: source 'hub' needs the `datasets` library, which is installed but fails to import "
                f"({type(err).__name__}: {err}); repair that install, or use source: local with data_dir"
            ) from None
        raise UserError(
            f"{task}: source 'hub' needs the `datasets` library (pip install 'xfer-tasks-glue[hub]'), "
            "or use source: local with data_dir"
        ) from None
    hub_split = spec.hub_splits[split]
    try:
        with _OFFLINE_LOCK:  # never while another thread's pre-flight has `datasets` offline
            data = datasets.load_dataset(HUB_DATASET, spec.hub_subset, split=hub_split)
    except Exception as err:  # datasets raises many types (ConnectionError, OSError, HfHubHTTPError, ...)
        if isinstance(err, ValueError) and "Unknown split" in str(err):
            # The copy was found (so not an offline problem) but lacks this split: "Are you offline?"
            # sent the user after the network for a dataset that was right there.
            raise UserError(
                f"{task}: {HUB_DATASET} subset {spec.hub_subset!r} has no split {hub_split!r} in the copy "
                f"that `datasets` found ({err}); the {split} split of {task} cannot be read from it"
            ) from None
        raise HubNotAvailableError(
            f"{task}: could not load {HUB_DATASET} subset {spec.hub_subset!r} split {hub_split!r} from the "
            f"Hugging Face Hub ({type(err).__name__}: {err}). Are you offline? Download GLUE once and use "
            "source: local with data_dir, or pre-fill the `datasets` cache."
        ) from err
    col_a, col_b = spec.hub_text
    _check_columns(data, [col_a, *([col_b] if col_b else []), "label", "idx"], task, spec, hub_split)
    _check_class_names(data, task, spec, hub_split)
    examples = []
    seen: set[object] = set()
    for row in data:
        if row["idx"] in seen:
            # Two rows with one idx made two examples with one id: the predictions of one replaced the
            # other's, reported only as a "plugin bug" by the Task contract (the TSV reader names the line).
            raise UserError(
                f"{task}: {HUB_DATASET} subset {spec.hub_subset!r} split {hub_split!r}: duplicate row idx "
                f"{row['idx']!r} (the idx column must number the rows uniquely: it is the example id)"
            )
        seen.add(row["idx"])
        for column in (col_a, col_b):
            if column and not isinstance(row[column], str):
                # A null text (a copy converted from a table with missing values) passed: a null second
                # sentence made a pair task's example a single sentence, silently (the Task contract
                # allows text_b None), where the TSV reader keeps an empty field as an empty sentence.
                raise UserError(
                    f"{task}: {HUB_DATASET} subset {spec.hub_subset!r} split {hub_split!r} row idx "
                    f"{row['idx']}: {column} is {row[column]!r}, not a string"
                )
        label: str | float | None
        raw = row["label"]
        if raw is None or raw == -1:
            # GLUE's test splits carry label -1. Nothing else means unlabelled: any negative did, so a
            # score of -0.5 (or class id -2) in a labelled split became a missing label, reported at
            # stage time as "has no label" instead of as the bad value it is.
            label = None
        elif spec.type == "regression":
            label = float(raw)
            # A score outside GLUE's 0-5 range would silently skew training and Pearson/Spearman.
            if not 0.0 <= label <= 5.0:
                raise UserError(
                    f"{task}: {HUB_DATASET} subset {spec.hub_subset!r} split {hub_split!r} row idx "
                    f"{row['idx']}: score {raw!r} is outside the 0-5 range"
                )
            label = _as_written(label)
        elif not isinstance(raw, int) or not 0 <= raw < len(spec.hub_labels):
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


def _check_columns(data: object, needed: list[str], task: str, spec: GlueSpec, hub_split: str) -> None:
    """Every column the conversion reads must be there: a copy without one (another dataset's
    layout, a column renamed before `save_to_disk`) failed with a bare KeyError on the first row."""
    columns = getattr(data, "column_names", None)
    if columns is None:  # a plain sequence of rows: its first row's keys
        first = next(iter(data), None)  # type: ignore[call-overload]
        columns = list(first) if isinstance(first, dict) else None
    if columns is None:
        return  # no rows: nothing is read
    missing = [name for name in needed if name not in columns]
    if missing:
        raise UserError(
            f"{task}: {HUB_DATASET} subset {spec.hub_subset!r} split {hub_split!r} has no column(s) "
            f"{missing} (its columns: {list(columns)}); GLUE's {spec.hub_subset} needs {needed}"
        )


def _as_written(score: float) -> float:
    """A float32 score as the decimal the GLUE file has: nyu-mll/glue stores STS-B's scores as
    float32, so 3.8 came back as 3.799999952316284 while the TSV reader gives 3.8, and the two
    sources of one task had different gold scores (and training targets). The shortest decimal
    that is the same float32 is the written one; a score float32 cannot hold is kept as it is."""
    as_float32 = struct.unpack("f", struct.pack("f", score))[0]
    if as_float32 != score:
        return score
    for digits in range(1, 10):  # 9 significant digits always round-trip a float32
        decimal = float(f"{score:.{digits}g}")
        if struct.unpack("f", struct.pack("f", decimal))[0] == score:
            return decimal
    return score


def _check_class_names(data: object, task: str, spec: GlueSpec, hub_split: str) -> None:
    """The copy's class ids must mean what `spec.hub_labels` says: class ids are mapped by position,
    so a copy whose ClassLabel has another order (say re-encoded with `class_encode_column`, which
    sorts the names: contradiction/entailment/neutral for MNLI) swapped labels silently."""
    expected = HUB_CLASS_NAMES.get(spec.hub_subset)
    features = getattr(data, "features", None)
    names = getattr(features.get("label"), "names", None) if isinstance(features, dict) else None
    if expected is None or names is None or tuple(names) == expected:
        return
    raise UserError(
        f"{task}: {HUB_DATASET} subset {spec.hub_subset!r} split {hub_split!r}: the label column's class "
        f"names are {list(names)}, not nyu-mll/glue's {list(expected)}; its class ids would map to the "
        "wrong labels (a re-encoded copy?)"
    )

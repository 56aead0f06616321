"""A local `datasets` cache of nyu-mll/glue for the `source: hub` tests, built in tmp_path (never the
network). One builder shared by the hostile tests (imported relatively, as tests/bam/bam_recipes.py is),
so a change to the cache layout `datasets` expects is made once. `datasets` is imported inside the
functions: the test modules skip themselves (pytest.importorskip) when it is not installed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any


def fill_cache(cache: Path, subset: str, splits: dict[str, Any]) -> None:
    """Put `splits` (Datasets) where `datasets`, offline, finds a cached nyu-mll/glue `subset`:
    `<cache>/nyu-mll___glue/<subset>/<version>/<hash>/glue-<split>.arrow` with its dataset_info.json,
    made by preparing the splits with the packaged parquet builder (no network involved)."""
    import datasets

    files = {}
    for name, data in splits.items():
        files[name] = str(cache.parent / f"{subset}-{name}.parquet")
        data.to_parquet(files[name])
    builder = datasets.load_dataset_builder("parquet", data_files=files, cache_dir=str(cache.parent / "build"))
    builder.download_and_prepare()
    target = cache / "nyu-mll___glue" / subset / "0.0.0" / "0123456789abcdef"
    shutil.copytree(builder.cache_dir, target)
    for arrow in target.glob("parquet-*.arrow"):
        arrow.rename(target / arrow.name.replace("parquet-", "glue-"))
    info = json.loads((target / "dataset_info.json").read_text(encoding="utf-8"))
    info.update(config_name=subset, dataset_name="glue", builder_name="glue")
    (target / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")


def rte_split() -> Any:
    """A one-row RTE split with nyu-mll/glue's features: `A` / `B`, label 1 (`not_entailment`), idx 0."""
    import datasets

    features = datasets.Features(
        {
            "sentence1": datasets.Value("string"),
            "sentence2": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["entailment", "not_entailment"]),
            "idx": datasets.Value("int32"),
        }
    )
    return datasets.Dataset.from_dict(
        {"sentence1": ["A"], "sentence2": ["B"], "label": [1], "idx": [0]}, features=features
    )

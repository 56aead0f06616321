"""xfer_model.json is strict JSON, whatever the meta a stage hands the one writer."""

from __future__ import annotations

import json
import math
from pathlib import Path

from torch import nn

from xfer.core.results import json_number
from xfer.transformer.modelio import save_model_dir


def test_a_nan_dev_score_in_the_meta_is_written_as_strict_json(tmp_path: Path) -> None:
    """BAM's and CVT's model metadata carried a diverged trial's NaN dev score as a bare `NaN` token,
    which jq, JavaScript and Go refuse; results.json writes it as "NaN"."""
    save_model_dir(tmp_path / "m", {"head": nn.Linear(2, 1)}, meta={"dev": {"spearman": math.nan, "f1": 50.0}})
    text = (tmp_path / "m" / "xfer_model.json").read_text(encoding="utf-8")
    document = json.loads(text, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
    assert document["dev"]["f1"] == 50.0 and math.isnan(json_number(document["dev"]["spearman"]))

"""`xfer-cvt results --curve` reads metrics.jsonl records, which list their tag names under `tags`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core.errors import UserError
from xfer.cvt.results import curve_metrics


def test_the_tag_list_of_a_record_is_no_dev_metric(tmp_path: Path) -> None:
    """A tagged record (cvt.train logs with trial=N) carries `"tags": ["trial"]`: it was offered as a
    dev metric (`--metric tags` chose it, and the error listing the metrics named it)."""
    record = {"step": 10, "split": "dev", "trial": 1, "conll/chunk/f1": 90.0, "time": 1.0, "tags": ["trial"]}
    (tmp_path / "metrics.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(UserError) as caught:
        curve_metrics(tmp_path, [record], "tags")
    assert "it has conll/chunk/f1" in str(caught.value) and "tags" not in str(caught.value).split("it has")[1]
    assert curve_metrics(tmp_path, [record], "f1") == ["conll/chunk/f1"]

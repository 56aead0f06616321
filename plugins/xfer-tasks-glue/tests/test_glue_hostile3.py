"""Hostile review, third pass: Hub rows with out-of-range labels must be clear user errors."""

from __future__ import annotations

import sys
import types

import pytest

from xfer.core.errors import UserError
from xfer.tasks.glue.config import GlueTaskConfig


def fake_datasets(monkeypatch, rows):
    module = types.ModuleType("datasets")
    module.load_dataset = lambda name, subset, split: rows
    monkeypatch.setitem(sys.modules, "datasets", module)


def test_hub_out_of_range_class_id_is_a_user_error_naming_the_row(monkeypatch):
    fake_datasets(monkeypatch, [{"sentence1": "A", "sentence2": "B", "label": 5, "idx": 7}])
    from xfer.tasks.glue.tasks import RTETask

    with pytest.raises(UserError, match=r"row idx 7: class id 5 is not one of 0\.\.1"):
        RTETask("glue/rte", GlueTaskConfig(source="hub")).examples("dev")


def test_hub_stsb_score_outside_0_5_is_a_user_error(monkeypatch):
    fake_datasets(monkeypatch, [{"sentence1": "A", "sentence2": "B", "label": 7.5, "idx": 3}])
    from xfer.tasks.glue.tasks import STSBTask

    with pytest.raises(UserError, match=r"row idx 3: score 7\.5 is outside the 0-5 range"):
        STSBTask("glue/sts-b", GlueTaskConfig(source="hub")).examples("dev")


def test_hub_stsb_in_range_and_unlabeled_rows_still_load(monkeypatch):
    rows = [
        {"sentence1": "A", "sentence2": "B", "label": 5.0, "idx": 0},
        {"sentence1": "C", "sentence2": "D", "label": -1.0, "idx": 1},
    ]
    fake_datasets(monkeypatch, rows)
    from xfer.tasks.glue.tasks import STSBTask

    examples = STSBTask("glue/sts-b", GlueTaskConfig(source="hub")).examples("dev")
    assert [e.label for e in examples] == [5.0, None]

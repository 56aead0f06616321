"""A BAM `models` output's models.json is read by one reader, in the pre-flight and the stage alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.bam.checks import MODELS_INDEX, init_folders, read_models_index
from xfer.core.errors import CheckpointError


@pytest.mark.parametrize("tasks", [{}, [], {"glue/rte": 3}, {"glue/rte": ""}, "rte"])
def test_an_index_naming_no_model_folders_is_refused_by_name(tmp_path: Path, tasks: object) -> None:
    """`tasks: {}` passed the pre-flight (no folder to check) and ended the stage in a bare StopIteration."""
    (tmp_path / MODELS_INDEX).write_text(json.dumps({"tasks": tasks}), encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"models\.json: `tasks` must map each task to its model folder"):
        init_folders(tmp_path)
    with pytest.raises(CheckpointError, match=r"models\.json"):
        read_models_index(tmp_path / MODELS_INDEX)


def test_a_well_formed_index_gives_its_folders(tmp_path: Path) -> None:
    (tmp_path / MODELS_INDEX).write_text(json.dumps({"tasks": {"b": "m/b", "a": "m/a"}}), encoding="utf-8")
    assert init_folders(tmp_path) == [tmp_path / "m/a", tmp_path / "m/b"]
    assert read_models_index(tmp_path / MODELS_INDEX) == {"b": "m/b", "a": "m/a"}

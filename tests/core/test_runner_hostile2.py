"""Hostile review of the runner's early checks (h105)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import RunDirError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.runner import run_recipe
from xfer.testing import write_recipe

VOCAB = "name: t\nstages:\n  vocab: {kind: transformer.vocab, files: FILES, size: 60, min_frequency: 1}\n"


def test_a_glob_reaching_into_the_run_directory_through_a_symlink_is_refused(tmp_path: Path) -> None:
    """`link/t/...` (link -> runs) matched the run's own vocab.txt, but the matches were compared as
    written, not resolved, so the early check let it pass (`..` is already normalised by the schema)."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "a.txt").write_text("the dog runs .\nthe cat sleeps .\n" * 20)
    run_dir = project / "runs" / "t"
    run_recipe(load_recipe(write_recipe(project, VOCAB.replace("FILES", "'data/*.txt'"))), run_dir, log=lambda *a: None)
    assert list(run_dir.rglob("*.txt")), "the first run wrote a .txt the second pattern matches"
    (project / "link").symlink_to(project / "runs")
    recipe = load_recipe(write_recipe(project, VOCAB.replace("FILES", "'link/t/*/*/*/*.txt'")))
    with pytest.raises(RunDirError, match=r"reaches into the run directory"):
        run_recipe(recipe, run_dir, log=lambda *a: None)

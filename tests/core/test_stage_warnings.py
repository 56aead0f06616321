"""`StageContext.warnings_reported`, which the runner wraps around every stage: a `UserWarning` a
stage or a task raises is on stderr *and* in the stage's report.md, when it is raised; other
categories are shown as before."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from xfer.core.plugins import default_host
from xfer.core.stage import StageContext


def _ctx(run_dir: Path) -> StageContext:
    return StageContext(run_dir, "s", "k", None, 1, run_dir / "s", torch.device("cpu"), default_host(), {})


def test_user_warnings_reach_the_report_when_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ctx = _ctx(tmp_path)
    with ctx.warnings_reported():
        warnings.warn("dev set: 2 tags unseen in training", UserWarning, stacklevel=1)
        assert ctx.report_sections == ["## Warning\n\ndev set: 2 tags unseen in training\n"]  # not at the end
        assert "warning: dev set: 2 tags unseen in training" in capsys.readouterr().err
        with pytest.warns(DeprecationWarning, match="old API"):  # other categories: as without the block
            warnings.warn("old API", DeprecationWarning, stacklevel=1)
    assert len(ctx.report_sections) == 1
    with pytest.warns(UserWarning, match="after"):  # the block restores how warnings are shown
        warnings.warn("after", UserWarning, stacklevel=1)
    assert len(ctx.report_sections) == 1

"""A resumed run keeps the schedule it started with; warmup_fraction rounds halves up."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core import checkpoint as ckpt

from .test_trainer import make


def test_a_resume_with_another_step_count_is_refused(tmp_path: Path) -> None:
    """A checkpoint of a 4-step run resumed by an 8-step one continued at step 4 on the 8-step schedule:
    the lr jumped back up from its decayed value, silently."""
    make(tmp_path, steps=4, checkpoint_every=2, warmup_steps=1).fit()
    with pytest.raises(ckpt.CheckpointError, match=r"4 steps.*8"):
        make(tmp_path, steps=8, checkpoint_every=2, warmup_steps=1).fit()


def test_a_resume_with_another_warmup_is_refused(tmp_path: Path) -> None:
    """constant_warmup does not depend on the step count, but on the warmup: a 2-step run resumed as a
    6-step one with another warmup is refused."""
    make(tmp_path, steps=2, checkpoint_every=2, warmup_steps=1, schedule="constant_warmup").fit()
    with pytest.raises(ckpt.CheckpointError, match="warmup"):
        make(tmp_path, steps=6, checkpoint_every=2, warmup_steps=3, schedule="constant_warmup").fit()
    trainer = make(tmp_path, steps=6, checkpoint_every=2, warmup_steps=1, schedule="constant_warmup")
    trainer.fit()
    assert trainer.step == 6


def test_warmup_fraction_halves_round_up(tmp_path: Path) -> None:
    """10% of 25 steps: round() gave 2 (half to even); TrainConfig.warmup_for gives 3."""
    assert make(tmp_path, n=200, steps=25, warmup_fraction=0.1).warmup_steps == 3


def test_a_constant_schedule_resumes_with_more_steps(tmp_path: Path) -> None:
    """The learning rate of a constant schedule does not depend on the step count: a run given more steps
    after it ended (or an interrupted one emulated by a shorter run) resumes as before."""
    make(tmp_path, steps=4, checkpoint_every=2, schedule="constant").fit()
    trainer = make(tmp_path, steps=8, checkpoint_every=2, schedule="constant")
    trainer.fit()
    assert trainer.step == 8


def test_a_finished_run_fitted_again_with_another_schedule_trains_nothing(tmp_path: Path) -> None:
    make(tmp_path, steps=4, checkpoint_every=2, warmup_steps=1).fit()
    trainer = make(tmp_path, steps=4, checkpoint_every=2, warmup_steps=2)
    trainer.fit()
    assert trainer.step == 4

"""A cvt.train trial's random uses draw from separate numpy streams.

numpy's SeedSequence ignores trailing zeros, so `default_rng([s, k])` is `default_rng([s, k, 0])`
and two sources given one seed share streams. The task draws (`MultiTaskSource`) and the unlabeled
stream were both seeded with the trial seed: step k's task choice came from the stream of the
unlabeled epoch k's chunk order, and at seed 0 task 0 (`seed*1000 + 0`) drew its epoch orders from
it as well. These tests run the real stage up to its Trainer, step every source, record each
`default_rng` call by source and call site, and compare the streams (SeedSequence states).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xfer.core.data import AlternatingSource, MultiTaskSource
from xfer.core.trainer import Trainer
from xfer.cvt import stage as cvt_stage
from xfer.cvt.data import PooledStream, UnlabeledStream
from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
from xfer.testing import make_host, run_recipe_file, write_recipe

CHUNK = "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}"
NER = "{name: conll/ner, train_file: ner-train.txt, dev_file: ner-dev.txt}"
SOURCES = (PooledStream, UnlabeledStream, MultiTaskSource)
STEPS = 24  # several epochs of each task (48 sentences, batches of 8) and of the unlabeled corpus

_default_rng = np.random.default_rng


def stream_id(entropy: Any) -> tuple[int, ...]:
    """What identifies a numpy stream: the state its SeedSequence generates (trailing zeros and all)."""
    return tuple(np.random.SeedSequence(entropy).generate_state(8).tolist())


class _Recorded(Exception):
    """Stops the stage once its sources have been stepped."""


def _use_of_call() -> str:
    """`<source> <its seed>: <call site>` for the default_rng call being made (two frames up)."""
    frame = sys._getframe(2)
    site = f"{frame.f_code.co_name}:{frame.f_lineno}"
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, SOURCES):
            return f"{type(owner).__name__} {owner.seed}: {site}"
        frame = frame.f_back
    return f"elsewhere: {site}"


def trial_streams(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> tuple[int, dict[str, set]]:
    """Run a two-task CVT trial of recipe seed `seed` up to its Trainer and step each of its sources
    on its own: the trial seed and every use's streams."""
    uses: dict[str, set[tuple[int, ...]]] = defaultdict(set)
    found: dict[str, int] = {}

    def recording(entropy: Any = None) -> np.random.Generator:
        uses[_use_of_call()].add(stream_id(entropy))
        return _default_rng(entropy)

    def step_sources(trainer: Trainer) -> Any:
        found["seed"] = trainer.objective.seed
        source = trainer.data
        assert isinstance(source, AlternatingSource)
        labeled, unlabeled = source.sources["labeled"], source.sources["unlabeled"]
        assert isinstance(labeled, MultiTaskSource) and isinstance(unlabeled, UnlabeledStream)
        monkeypatch.setattr(np.random, "default_rng", recording)
        try:
            for child in (*labeled.sources.values(), unlabeled, labeled):
                for _ in range(STEPS):
                    child.next_step()
        finally:
            monkeypatch.setattr(np.random, "default_rng", _default_rng)
        raise _Recorded

    write_tiny_data(tmp_path)
    recipe = f"seed: {seed}\n" + tiny_cvt_recipe(CHUNK, NER, extra="    cvt_tasks: one")
    monkeypatch.setattr(Trainer, "fit", step_sources)
    with pytest.raises(_Recorded):
        run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", make_host(autoload=True))
    return found["seed"], uses


@pytest.mark.parametrize("seed", [0, 1, 5])
def test_no_two_uses_of_a_trial_share_a_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    trial_seed, uses = trial_streams(tmp_path, monkeypatch, seed)
    assert trial_seed == seed
    # the objective's `cvt_tasks: one` draws, computed (the objective is not stepped here)
    uses["objective draws"] = {stream_id([trial_seed, step, 3]) for step in range(STEPS)}
    assert not [use for use in uses if use.startswith("elsewhere")], sorted(uses)
    # two tasks x (epoch orders, pool orders), the task draws, the unlabeled chunk orders, chunk
    # shuffles and pool orders, the objective's draws
    assert len(uses) == 9, sorted(uses)
    owners: dict[tuple[int, ...], str] = {}
    shared = set()
    for use, streams in uses.items():
        for stream in streams:
            if owners.setdefault(stream, use) != use:
                shared.add((owners[stream], use))
    assert not shared


def test_seed_0s_task_draws_are_not_task_0s_epoch_orders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The case of the brief: at seed 0 step k's draw and task 0's epoch-k order were `[0, k]` both."""
    _, uses = trial_streams(tmp_path, monkeypatch, 0)
    draws = next(streams for use, streams in uses.items() if use.startswith("MultiTaskSource"))
    task_0 = set().union(*(streams for use, streams in uses.items() if use.startswith("PooledStream 0:")))
    assert len(draws) == STEPS and task_0
    assert not draws & task_0


def test_source_seeds_are_distinct_and_keep_the_task_streams() -> None:
    for seed in (0, 1, 7, 2**31 + 4):
        seeds = cvt_stage.source_seeds(seed, 3)
        assert seeds.tasks == (seed * 1000, seed * 1000 + 1, seed * 1000 + 2)  # single-task batches unchanged
        every = [*seeds.tasks, seeds.draws, seeds.unlabeled]
        assert len(set(every)) == len(every)
        assert seed not in (seeds.draws, seeds.unlabeled)

"""Keeps tools/bench_trainer.py from rotting: runs its pieces for a few steps, times nothing.

Also pins the benchmark's fairness claim: the hand-written baseline and the Trainer see the same
batches, schedule, param groups, clipping and optimizer, so they end with identical weights.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

TOOL = Path(__file__).resolve().parents[2] / "tools" / "bench_trainer.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_trainer", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while the class is built
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_baseline_and_trainer_do_the_same_work(bench) -> None:
    size = bench.SIZES["tiny"]
    dataset = bench.make_dataset(size, 96)  # 3 batches per epoch: the 5 steps cross an epoch boundary
    baseline = bench.run_baseline(size, dataset, steps=3, warmup=1)
    trainer = bench.run_trainer(size, dataset, steps=3, warmup=1)
    for result in (baseline, trainer):
        assert result.steps == 3 and result.seconds > 0 and len(result.step_seconds) == 3
        assert result.steps_per_s > 0 and result.median_step_per_s > 0
    a, b = baseline.model.state_dict(), trainer.model.state_dict()
    assert a.keys() == b.keys()
    for name in a:
        # same work, so the same weights (to float noise: a bitwise check here would test MKL, not the benchmark)
        assert torch.allclose(a[name], b[name], rtol=1e-5, atol=1e-7), name


def test_main_runs_end_to_end(bench, capsys, monkeypatch) -> None:
    monkeypatch.setattr(bench, "gc", SimpleNamespace(collect=lambda: 0))  # full collections are slow under pytest
    # --threads 0 / --malloc default: leave this (shared) test process's settings alone
    bench.main(
        [
            "--size",
            "tiny",
            "--steps",
            "3",
            "--repeats",
            "2",
            "--warmup",
            "1",
            "--examples",
            "256",
            "--threads",
            "0",
            "--malloc",
            "default",
            "--control",
            "--profile",
        ]
    )
    out = capsys.readouterr().out
    assert "A/A control" in out and "[profile tiny]" in out and "xfer/core/trainer.py" in out
    assert out.strip().splitlines()[-1].startswith("trainer overhead: tiny ")

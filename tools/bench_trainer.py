"""Benchmark `xfer.core.trainer.Trainer` against a minimal hand-written PyTorch loop (steps/s).

Acceptance criterion: "the trainer's overhead vs a minimal hand-written PyTorch loop on the same
tiny model is <= 5% steps/s". Overhead = 1 - trainer_steps_per_s / baseline_steps_per_s.

Workload (identical on both sides, fp32, CPU):
- Objective `BenchObjective`: EmbeddingBag(vocab, dim, mode="mean") -> Linear -> ReLU -> Linear
  -> ReLU -> Linear(classes); `forward(batch)` returns `StepOutput(cross_entropy, {"accuracy"})`.
  Sizes: `tiny` (vocab 16384, dim 64, hidden 128; ~1.1M params, a step takes a few ms, so per-step
  Python overhead matters — the demanding case) and `small` (vocab 65536, dim 96, hidden 512;
  ~6.6M params, a few tens of ms per step, for context). The embedding gradient is dense, so
  AdamW touches every parameter each step, as in a real fine-tuning run.
- Data: a Python list of `(features: list[int], label: int)` examples (`--examples`, default 4096;
  64 feature ids each, seeded), batch 32. Each step BOTH sides build the batch from the Python
  list with the same `collate` (`torch.tensor` of the feature lists and labels), so the data path
  is not free for either side:
    * trainer: `BatchStream(dataset, 32, collate, seed)` — per epoch a numpy permutation
      `default_rng([seed, epoch]).permutation(n)`, then `next_step()` slices it, converts indices
      with `int()`, indexes the list, calls `collate`; the trainer then calls `to_device` (a no-op
      move on CPU).
    * baseline: the same permutation call per epoch, `order[pos:pos + 32].tolist()`, indexes the
      list, calls `collate` — i.e. exactly the same batches in the same order (the smoke test
      checks both sides end with bit-identical weights).
- Optimisation (values read from `TrainConfig` so the two sides cannot drift apart):
  `torch.optim.AdamW(foreach=True)`, betas (0.9, 0.999), eps 1e-6, lr 1e-4, two param groups
  (weight decay 0.01; none for names containing bias/layernorm/layer_norm), the `linear`
  schedule (10% warmup then linear decay to 0, the multiplier computed and written into every
  param group each step), `clip_grad_norm_(params, 1.0, foreach=True)`, `optimizer.step()`,
  `zero_grad(set_to_none=True)`, fp32 (no autocast).
- Logging: the baseline calls `loss.item()` every `log_every` (50) steps and does nothing else
  with metrics. The trainer does what it always does: sums loss / accuracy / grad_norm as tensors
  every step and, every 50 steps, checks them for NaN/inf and `.tolist()`s the means.
  That per-step bookkeeping is part of the overhead being measured.
- Trainer settings: `TrainConfig(steps=total, batch_size=32, precision="fp32", eval_every=None,
  checkpoint_every=total + 1, log_every=50, warmup_fraction=0.1)`, everything else default;
  `events=None`, `progress=False`, workdir in a temporary directory, `Trainer.fit()`.

Timing: a fresh model (same seed, so the same initial weights) and optimizer/Trainer for every
run; each run does `--warmup` + `--steps` + 1 steps. The same timestamping `collate` wrapper
(one `perf_counter()` append per step on both sides) marks the start of each step's batch; the
timed window runs from the batch of step `warmup` to the batch of step `warmup + steps`, so it
covers exactly `steps` complete iterations — forward, backward, clipping, optimizer, bookkeeping,
the log boundaries falling inside it — and excludes construction, warm-up, and the checkpoint
`fit()` always writes after its last step. Runs are interleaved per repeat in ABBA order
(baseline, trainer, then trainer, baseline, ...) so both see the same machine noise and drift;
one untimed run of each side precedes the repeats. Reported: median / min / max steps/s per
side, the overhead from the medians, and min / median / max of the per-repeat (paired) overheads.

Usage: python tools/bench_trainer.py [--steps 300] [--repeats 5] [--size tiny|small|both]
       [--warmup 30] [--threads N] [--profile]
`--profile` additionally runs the trainer under cProfile and prints the top per-step costs.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from xfer.core.data import BatchStream
from xfer.core.trainer import StepOutput, TrainConfig, Trainer

BATCH = 32
LOG_EVERY = 50
WARMUP_FRACTION = 0.1
SEED = 0


@dataclass(frozen=True)
class Size:
    vocab: int
    dim: int
    hidden: int
    features: int = 64
    classes: int = 8


SIZES = {
    "tiny": Size(vocab=16384, dim=64, hidden=128),
    "small": Size(vocab=65536, dim=96, hidden=512),
}


class BenchObjective(nn.Module):
    """EmbeddingBag + 2-hidden-layer MLP classifier; returns `StepOutput(loss, {"accuracy": ...})`."""

    def __init__(self, size: Size):
        super().__init__()
        self.embed = nn.EmbeddingBag(size.vocab, size.dim, mode="mean")
        self.hidden1 = nn.Linear(size.dim, size.hidden)
        self.hidden2 = nn.Linear(size.hidden, size.hidden)
        self.out = nn.Linear(size.hidden, size.classes)

    def forward(self, batch: dict[str, torch.Tensor]) -> StepOutput:
        hidden = torch.relu(self.hidden1(self.embed(batch["ids"])))
        scores = self.out(torch.relu(self.hidden2(hidden)))
        loss = nn.functional.cross_entropy(scores, batch["label"])
        accuracy = (scores.argmax(-1) == batch["label"]).float().mean()
        return StepOutput(loss, {"accuracy": accuracy.detach()})


def make_model(size: Size, seed: int = SEED) -> BenchObjective:
    torch.manual_seed(seed)
    return BenchObjective(size)


def make_dataset(size: Size, examples: int, seed: int = SEED) -> list[tuple[list[int], int]]:
    """Synthetic examples; the label depends on the features so the model has something to learn."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, size.vocab, (examples, size.features))
    labels = (ids[:, 0] + ids[:, 1]) % size.classes
    return [(row.tolist(), int(label)) for row, label in zip(ids, labels, strict=True)]


def collate(items: list[tuple[list[int], int]]) -> dict[str, torch.Tensor]:
    return {"ids": torch.tensor([f for f, _ in items], dtype=torch.long), "label": torch.tensor([y for _, y in items])}


class TimedCollate:
    """Wraps `collate`; records `perf_counter()` when each step's batch is requested."""

    def __init__(self, fn: Callable[[list[Any]], Any]):
        self.fn = fn
        self.times: list[float] = []

    def __call__(self, items: list[Any]) -> Any:
        self.times.append(time.perf_counter())
        return self.fn(items)


@dataclass
class RunResult:
    seconds: float
    steps: int
    model: nn.Module
    losses: list[float] = field(default_factory=list)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds


def train_config(total_steps: int) -> TrainConfig:
    return TrainConfig(
        steps=total_steps,
        batch_size=BATCH,
        precision="fp32",
        eval_every=None,
        checkpoint_every=total_steps + 1,
        log_every=LOG_EVERY,
        warmup_fraction=WARMUP_FRACTION,
    )


def _window(timed: TimedCollate, warmup: int, steps: int) -> float:
    assert len(timed.times) == warmup + steps + 1, len(timed.times)
    return timed.times[warmup + steps] - timed.times[warmup]


def run_baseline(size: Size, dataset: Sequence[tuple[list[int], int]], steps: int, warmup: int) -> RunResult:
    """The minimal hand-written loop doing the same work as the trainer (see the module docstring)."""
    total = warmup + steps + 1
    config = train_config(total)
    warmup_steps = round(config.warmup_fraction * total)
    model = make_model(size)
    model.train()
    patterns = [p.lower() for p in config.no_decay]
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if any(p in name.lower() for p in patterns) else decay).append(param)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr, betas=(config.adam_beta1, config.adam_beta2), eps=config.adam_eps, foreach=True,
    )
    params = decay + no_decay
    timed = TimedCollate(collate)
    n = len(dataset)
    epoch, pos, order = 0, 0, None
    losses: list[float] = []
    for step in range(total):
        if step < warmup_steps:
            scale = step / warmup_steps
        else:
            scale = max(0.0, (total - step) / max(1, total - warmup_steps))
        for group in optimizer.param_groups:
            group["lr"] = config.lr * scale
        if order is None:
            order = np.random.default_rng([SEED, epoch]).permutation(n)
        indices = order[pos : pos + BATCH].tolist()
        pos += BATCH
        if pos >= n:
            epoch, pos, order = epoch + 1, 0, None
        batch = timed([dataset[i] for i in indices])
        out = model(batch)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, config.clip_norm, foreach=True)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if (step + 1) % LOG_EVERY == 0:
            losses.append(out.loss.item())
    return RunResult(_window(timed, warmup, steps), steps, model, losses)


def make_trainer(size: Size, dataset: Sequence[tuple[list[int], int]], total: int, workdir: Path) -> tuple[Trainer, TimedCollate]:
    timed = TimedCollate(collate)
    stream = BatchStream(dataset, BATCH, timed, seed=SEED)
    trainer = Trainer(train_config(total), make_model(size), stream, workdir, device=torch.device("cpu"), events=None, progress=False)
    return trainer, timed


def run_trainer(size: Size, dataset: Sequence[tuple[list[int], int]], steps: int, warmup: int) -> RunResult:
    total = warmup + steps + 1
    with tempfile.TemporaryDirectory(prefix="bench_trainer_") as tmp:
        trainer, timed = make_trainer(size, dataset, total, Path(tmp))
        trainer.fit()
    return RunResult(_window(timed, warmup, steps), steps, trainer.objective)


RUNNERS: dict[str, Callable[..., RunResult]] = {"baseline": run_baseline, "trainer": run_trainer}


def measure(size_name: str, steps: int, repeats: int, warmup: int, examples: int) -> dict[str, list[float]]:
    """Steps/s of each side per repeat, interleaved ABBA; index r of both lists is one pair."""
    size = SIZES[size_name]
    if examples % BATCH:
        raise SystemExit(f"--examples must be a multiple of {BATCH}")
    dataset = make_dataset(size, examples)
    for name, runner in RUNNERS.items():  # untimed: first-touch allocations, lazy imports, caches
        runner(size, dataset, min(steps, 50), warmup)
    rates: dict[str, list[float]] = {name: [] for name in RUNNERS}
    order = list(RUNNERS)
    for r in range(repeats):
        for name in order if r % 2 == 0 else order[::-1]:
            gc.collect()
            rates[name].append(RUNNERS[name](size, dataset, steps, warmup).steps_per_s)
    return rates


def _fmt_row(label: str, values: list[float]) -> str:
    return f"{label:<10} {statistics.median(values):9.1f} {min(values):9.1f} {max(values):9.1f} {1e3 / statistics.median(values):9.3f}"


def report(size_name: str, rates: dict[str, list[float]]) -> tuple[float, list[float]]:
    base, tr = rates["baseline"], rates["trainer"]
    overhead = 1 - statistics.median(tr) / statistics.median(base)
    paired = [1 - t / b for t, b in zip(tr, base, strict=True)]
    size = SIZES[size_name]
    params = sum(p.numel() for p in BenchObjective(size).parameters())
    print(f"\n[{size_name}] vocab {size.vocab} dim {size.dim} hidden {size.hidden} features {size.features} "
          f"batch {BATCH}, {params / 1e6:.2f}M params")
    print(f"{'side':<10} {'median/s':>9} {'min/s':>9} {'max/s':>9} {'ms/step':>9}")
    print(_fmt_row("baseline", base))
    print(_fmt_row("trainer", tr))
    print("per-repeat steps/s  baseline: " + " ".join(f"{v:.1f}" for v in base))
    print("per-repeat steps/s  trainer:  " + " ".join(f"{v:.1f}" for v in tr))
    print(f"overhead from medians: {overhead:+.1%}  (per-step cost {1e3 / statistics.median(tr) - 1e3 / statistics.median(base):+.3f} ms)")
    print(f"paired overhead per repeat: min {min(paired):+.1%}  median {statistics.median(paired):+.1%}  max {max(paired):+.1%}  "
          f"[{' '.join(f'{p:+.1%}' for p in paired)}]")
    return overhead, paired


def profile_trainer(size_name: str, steps: int, warmup: int, examples: int, top: int = 25) -> None:
    """cProfile `Trainer.fit()` (construction and warm-up excluded from the statistics as far as possible)."""
    import cProfile
    import pstats

    size = SIZES[size_name]
    dataset = make_dataset(size, examples)
    total = warmup + steps + 1
    with tempfile.TemporaryDirectory(prefix="bench_trainer_prof_") as tmp:
        trainer, _ = make_trainer(size, dataset, total, Path(tmp))
        profiler = cProfile.Profile()
        profiler.enable()
        trainer.fit()
        profiler.disable()
    stats = pstats.Stats(profiler)
    print(f"\n[profile {size_name}] cProfile of Trainer.fit() over {total} steps (incl. the final checkpoint); "
          f"per-step = cumulative / {total}. Sorted by tottime:")
    stats.sort_stats("tottime")
    entries = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]  # type: ignore[attr-defined]
    print(f"{'tottime us/step':>16} {'cum us/step':>12} {'calls/step':>10}  function")
    for (filename, line, func), (_cc, calls, tottime, cumtime, _callers) in entries:
        where = f"{Path(filename).name}:{line}({func})" if line else func
        print(f"{tottime / total * 1e6:16.1f} {cumtime / total * 1e6:12.1f} {calls / total:10.2f}  {where}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="timed steps per run")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs per side (median reported)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed steps at the start of every run")
    parser.add_argument("--size", choices=["tiny", "small", "both"], default="both")
    parser.add_argument("--examples", type=int, default=4096, help="dataset size (multiple of 32)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's default)")
    parser.add_argument("--profile", action="store_true", help="also cProfile the trainer and print the top costs")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = ["tiny", "small"] if args.size == "both" else [args.size]
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, python {sys.version.split()[0]}, "
          f"batch {BATCH}, {args.repeats} repeats x {args.steps} steps (+{args.warmup} warm-up), ABBA interleaved")
    summary = []
    for name in sizes:
        rates = measure(name, args.steps, args.repeats, args.warmup, args.examples)
        overhead, paired = report(name, rates)
        summary.append(f"{name} {overhead:.1%} (paired median {statistics.median(paired):.1%})")
        if args.profile:
            profile_trainer(name, args.steps, args.warmup, args.examples)
    print(f"\ntrainer overhead: {'; '.join(summary)} "
          f"(1 - median trainer / median baseline steps/s, {args.repeats} interleaved repeats x {args.steps} steps, "
          f"sizes {'+'.join(sizes)})")


if __name__ == "__main__":
    main()

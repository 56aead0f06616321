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
side, the overhead from the medians (the headline), min / median / max of the per-repeat
(paired) overheads, and as a cross-check the same from 1 / median single-step time, which
shrugs off preemption spikes but leaves out the every-50-steps boundary (a few us per step).

Machine-noise controls (both sides get them; neither changes what the loops do):
- Threads: default `--threads 1`. With torch's default (2 here) a concurrent process on the
  other core stalls the OpenMP pool: steps went from ~3 ms to 15-300 ms (5-100x), differently
  for every run, so nothing could be compared. `--threads 0` keeps torch's default.
- malloc: `--malloc stable` (default) pins glibc's mmap/trim thresholds, see `stabilise_malloc`;
  the minor page faults per step of every run are printed so allocator effects stay visible.
- `--control` adds an A/A control (a second, identical baseline in the rotation): its
  "overhead" is the noise floor of the comparison on this machine at that moment.

Usage: python tools/bench_trainer.py [--steps 300] [--repeats 5] [--size tiny|small|both]
       [--warmup 30] [--threads 1] [--malloc stable|default] [--control] [--profile]
`--profile` additionally runs the trainer under cProfile over the same window and prints the
top per-step costs, and the xfer.core functions by cumulative time.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import itertools
import resource
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

    def __init__(
        self,
        fn: Callable[[list[Any]], Any],
        window: tuple[int, int] = (-1, -1),
        hooks: dict[int, Callable[[], None]] | None = None,
    ):
        self.fn = fn
        self.times: list[float] = []
        self.window = window  # step indices at which to read the minor-page-fault counter
        self.faults: list[int] = []
        self.hooks = hooks or {}  # step index -> callback run before that step's batch (profiling only)

    def __call__(self, items: list[Any]) -> Any:
        index = len(self.times)
        if index in self.hooks:
            self.hooks[index]()
        if index in self.window:
            self.faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
        self.times.append(time.perf_counter())
        return self.fn(items)


@dataclass
class RunResult:
    seconds: float
    steps: int
    model: nn.Module
    step_seconds: list[float] = field(default_factory=list)
    faults_per_step: float = 0.0
    losses: list[float] = field(default_factory=list)

    @property
    def steps_per_s(self) -> float:
        """Throughput over the timed window (the headline number)."""
        return self.steps / self.seconds

    @property
    def median_step_per_s(self) -> float:
        """1 / median single-step time: robust to preemption spikes, but leaves out the amortised
        cost of the every-50-steps log boundary (a few us per step, see `--profile`)."""
        return 1.0 / statistics.median(self.step_seconds)


def train_config(total_steps: int) -> TrainConfig:
    return TrainConfig(
        steps=total_steps,
        batch_size=BATCH,
        precision="fp32",
        eval_every=None,
        checkpoint_every=total_steps + 1,
        log_every=LOG_EVERY,
        warmup_fraction=WARMUP_FRACTION,
        # Steps are timed at collate calls, so batches must be collated in step order on the
        # training thread: background prefetch would move that work (and the clock) elsewhere.
        prefetch=0,
    )


def _result(
    timed: TimedCollate, warmup: int, steps: int, model: nn.Module, losses: list[float] | None = None
) -> RunResult:
    times = timed.times
    assert len(times) == warmup + steps + 1, len(times)
    window = times[warmup : warmup + steps + 1]
    step_seconds = [b - a for a, b in itertools.pairwise(window)]
    faults = (timed.faults[1] - timed.faults[0]) / steps if len(timed.faults) == 2 else float("nan")
    return RunResult(window[-1] - window[0], steps, model, step_seconds, faults, losses or [])


def run_baseline(size: Size, dataset: Sequence[tuple[list[int], int]], steps: int, warmup: int) -> RunResult:
    """The minimal hand-written loop doing the same work as the trainer (see the module docstring)."""
    total = warmup + steps + 1
    config = train_config(total)
    warmup_steps = config.warmup_for(total)  # as the Trainer rounds it (halves up)
    model = make_model(size)
    model.train()
    patterns = [p.lower() for p in config.no_decay]
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if any(p in name.lower() for p in patterns) else decay).append(param)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
        betas=(config.adam_beta1, config.adam_beta2),
        eps=config.adam_eps,
        foreach=True,
    )
    params = decay + no_decay
    timed = TimedCollate(collate, window=(warmup, warmup + steps))
    n = len(dataset)
    if n % BATCH:  # then BatchStream's batches would span epochs; this loop does not do that
        raise ValueError(f"dataset size {n} must be a multiple of {BATCH}")
    epoch, pos, order = 0, 0, None
    losses: list[float] = []
    for step in range(total):
        # the `linear` schedule: warmup to the peak, then linear decay to 0
        scale = step / warmup_steps if step < warmup_steps else max(0.0, (total - step) / max(1, total - warmup_steps))
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
    return _result(timed, warmup, steps, model, losses)


def make_trainer(
    size: Size, dataset: Sequence[tuple[list[int], int]], total: int, workdir: Path, timed: TimedCollate | None = None
) -> tuple[Trainer, TimedCollate]:
    timed = timed or TimedCollate(collate)
    stream = BatchStream(dataset, BATCH, timed, seed=SEED)
    trainer = Trainer(
        train_config(total), make_model(size), stream, workdir, device=torch.device("cpu"), events=None, progress=False
    )
    return trainer, timed


def run_trainer(size: Size, dataset: Sequence[tuple[list[int], int]], steps: int, warmup: int) -> RunResult:
    total = warmup + steps + 1
    with tempfile.TemporaryDirectory(prefix="bench_trainer_") as tmp:
        trainer, timed = make_trainer(
            size, dataset, total, Path(tmp), TimedCollate(collate, window=(warmup, warmup + steps))
        )
        trainer.fit()
    return _result(timed, warmup, steps, trainer.objective)


RUNNERS: dict[str, Callable[..., RunResult]] = {"baseline": run_baseline, "trainer": run_trainer}


def measure(
    size_name: str, steps: int, repeats: int, warmup: int, examples: int, control: bool = False
) -> dict[str, list[RunResult]]:
    """One RunResult per side per repeat, interleaved ABBA; index r of every list is one pair.

    With `control`, a second, identical baseline ("baseline2") joins the rotation: the A/A
    difference it shows is the noise floor of the comparison on this machine.
    """
    runners = dict(RUNNERS, baseline2=run_baseline) if control else RUNNERS
    size = SIZES[size_name]
    if examples % BATCH:
        raise SystemExit(f"--examples must be a multiple of {BATCH}")
    dataset = make_dataset(size, examples)
    for runner in RUNNERS.values():  # untimed: first-touch allocations, lazy imports, caches
        runner(size, dataset, min(steps, 50), warmup)
    results: dict[str, list[RunResult]] = {name: [] for name in runners}
    order = list(runners)
    for r in range(repeats):
        for name in order if r % 2 == 0 else order[::-1]:
            gc.collect()
            result = runners[name](size, dataset, steps, warmup)
            result.model = None  # type: ignore[assignment]  # free the weights before the next run
            results[name].append(result)
    return results


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters


def stabilise_malloc() -> str:
    """Pin glibc's mmap threshold (32 MiB, its maximum) and never trim the heap.

    By default glibc adapts the mmap threshold as blocks are freed, and returns heap memory to the
    OS above a trim threshold; whether the multi-MB gradient / optimizer temporaries of a step get
    re-faulted from the kernel then depends on the allocation history (measured here: 0 to ~6600
    minor page faults per step for `small`, i.e. re-zeroing ~25 MB, +-15% step time, changing from
    run to run regardless of side). Pinning both makes every run reuse its heap, so the comparison
    measures the training loops and not allocator luck. `--malloc default` skips this.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1
    except (OSError, AttributeError):
        ok = False
    return "pinned (mmap threshold 32 MiB, no trim)" if ok else "default (mallopt unavailable)"


def _overheads(base: list[float], tr: list[float]) -> tuple[float, list[float]]:
    """(1 - median(trainer) / median(baseline), per-repeat paired overheads)."""
    return 1 - statistics.median(tr) / statistics.median(base), [1 - t / b for t, b in zip(tr, base, strict=True)]


def _print_rates(title: str, note: str, baseline: list[float], trainer: list[float]) -> None:
    """One table block: median/min/max steps/s and ms/step of each side, then every repeat."""
    print(f"{title:<24} {'median':>8} {'min':>8} {'max':>8} {'ms/step':>8}   {note}")
    for label, values in (("baseline", baseline), ("trainer", trainer)):
        med = statistics.median(values)
        print(
            f"  {label:<22} {med:8.1f} {min(values):8.1f} {max(values):8.1f} {1e3 / med:8.3f}   "
            + " ".join(f"{v:.1f}" for v in values)
        )


def report(size_name: str, results: dict[str, list[RunResult]]) -> tuple[float, list[float], float]:
    base = [r.steps_per_s for r in results["baseline"]]
    tr = [r.steps_per_s for r in results["trainer"]]
    overhead, paired = _overheads(base, tr)
    base_med = [r.median_step_per_s for r in results["baseline"]]
    tr_med = [r.median_step_per_s for r in results["trainer"]]
    robust, robust_paired = _overheads(base_med, tr_med)
    size = SIZES[size_name]
    params = sum(p.numel() for p in BenchObjective(size).parameters())
    print(
        f"\n[{size_name}] vocab {size.vocab} dim {size.dim} hidden {size.hidden} features {size.features} "
        f"batch {BATCH}, {params / 1e6:.2f}M params"
    )
    _print_rates("steps/s over the window", "per repeat", base, tr)
    print(
        f"  overhead (medians)     {overhead:+8.1%}   per-step cost {1e3 / statistics.median(tr) - 1e3 / statistics.median(base):+.3f} ms"
    )
    print(
        f"  paired overhead        min {min(paired):+.1%}  median {statistics.median(paired):+.1%}  max {max(paired):+.1%}   "
        + " ".join(f"{p:+.1%}" for p in paired)
    )
    _print_rates("1 / median step time", "(noise-robust cross-check)", base_med, tr_med)
    print(
        f"  overhead (medians)     {robust:+8.1%}   paired min {min(robust_paired):+.1%}  "
        f"median {statistics.median(robust_paired):+.1%}  max {max(robust_paired):+.1%}"
    )
    if "baseline2" in results:
        control, control_paired = _overheads(base, [r.steps_per_s for r in results["baseline2"]])
        print(
            f"A/A control (baseline2 vs baseline, window steps/s): {control:+.1%} from medians, paired min "
            f"{min(control_paired):+.1%} median {statistics.median(control_paired):+.1%} max {max(control_paired):+.1%}"
            "  <- noise floor"
        )
    print(
        "minor page faults/step   baseline "
        + " ".join(f"{r.faults_per_step:.0f}" for r in results["baseline"])
        + "   trainer "
        + " ".join(f"{r.faults_per_step:.0f}" for r in results["trainer"])
    )
    return overhead, paired, robust


def profile_trainer(size_name: str, steps: int, warmup: int, examples: int, top: int = 20) -> None:
    """cProfile `Trainer.fit()` over exactly the timed window (same window as the benchmark).

    The profiler is switched on before the batch of step `warmup` and off before the batch of
    step `warmup + steps`, so construction, warm-up and the final checkpoint are excluded (and so
    is the own time of `fit()`'s loop, entered before the switch; `_train_step` and everything
    it calls are attributed).
    cProfile inflates pure-Python costs relative to torch kernels; read it for *where* the
    trainer spends time, and the benchmark for *how much*.
    """
    import cProfile
    import pstats

    size = SIZES[size_name]
    dataset = make_dataset(size, examples)
    total = warmup + steps + 1
    profiler = cProfile.Profile()
    timed = TimedCollate(collate, hooks={warmup: profiler.enable, warmup + steps: profiler.disable})
    with tempfile.TemporaryDirectory(prefix="bench_trainer_prof_") as tmp:
        trainer, _ = make_trainer(size, dataset, total, Path(tmp), timed)
        trainer.fit()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]

    def rows(entries: list[tuple[Any, Any]]) -> None:
        print(f"  {'own us/step':>11} {'cum us/step':>11} {'calls/step':>10}  function")
        for (filename, line, func), (_cc, calls, tottime, cumtime, _callers) in entries:
            where = f"{filename}:{line}({func})" if line else func
            for marker in ("site-packages/", "src/", "/work/main/"):
                if marker in where:
                    where = where.split(marker, 1)[1]
            print(f"  {tottime / steps * 1e6:11.1f} {cumtime / steps * 1e6:11.1f} {calls / steps:10.2f}  {where}")

    total_own = sum(v[2] for v in stats.values())
    print(
        f"\n[profile {size_name}] cProfile of Trainer.fit() over {steps} steps (window only): "
        f"{total_own / steps * 1e6:.0f} us/step profiled (fit()'s own loop is not attributed: it was entered "
        f"before the profiler started). Top {top} by own time:"
    )
    rows(sorted(stats.items(), key=lambda kv: -kv[1][2])[:top])
    print("  xfer.core functions (trainer/data/optim/distributed), by cumulative time:")
    ours = [kv for kv in stats.items() if "/xfer/core/" in kv[0][0]]
    rows(sorted(ours, key=lambda kv: -kv[1][3]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="timed steps per run")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved runs per side (median reported)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed steps at the start of every run")
    parser.add_argument("--size", choices=["tiny", "small", "both"], default="both")
    parser.add_argument("--examples", type=int, default=4096, help="dataset size (multiple of 32)")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch.set_num_threads; 0 = torch's default (see docstring)"
    )
    parser.add_argument(
        "--malloc",
        choices=["stable", "default"],
        default="stable",
        help="pin glibc malloc thresholds (see stabilise_malloc)",
    )
    parser.add_argument("--profile", action="store_true", help="also cProfile the trainer and print the top costs")
    parser.add_argument(
        "--control", action="store_true", help="add an A/A control (a second baseline) to show the noise floor"
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    malloc = stabilise_malloc() if args.malloc == "stable" else "default"
    sizes = ["tiny", "small"] if args.size == "both" else [args.size]
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, python {sys.version.split()[0]}, "
        f"batch {BATCH}, {args.repeats} repeats x {args.steps} steps (+{args.warmup} warm-up), ABBA interleaved, malloc {malloc}"
    )
    summary = []
    for name in sizes:
        overhead, paired, robust = report(
            name, measure(name, args.steps, args.repeats, args.warmup, args.examples, args.control)
        )
        summary.append(
            f"{name} {overhead * 100:.1f}% [paired median {statistics.median(paired) * 100:.1f}%, "
            f"min {min(paired) * 100:.1f}%, max {max(paired) * 100:.1f}%; median-step {robust * 100:.1f}%]"
        )
        if args.profile:
            profile_trainer(name, args.steps, args.warmup, args.examples)
    print(
        f"\ntrainer overhead: {'; '.join(summary)} (1 - median trainer / median baseline steps/s, median of "
        f"{args.repeats} interleaved repeats x {args.steps} steps, sizes {'+'.join(sizes)}, threads {torch.get_num_threads()})"
    )


if __name__ == "__main__":
    main()

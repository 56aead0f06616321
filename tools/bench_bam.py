"""Benchmark: a BAM student epoch with cached teacher predictions vs a plain multi-task epoch.

Acceptance criterion (xfer-bam issue): "a student epoch with cached teacher predictions costs
<= 1.1x a plain multi-task epoch". Both sides run the real code path of `bam.student`: the same
`MultiTaskModel` (shared encoder + one `transformer.sequence` head per task), `MixedCollate`,
`MixedTaskSource` (tasks sampled by |D|^0.75, mixed within batches) and the shared `Trainer`
(AdamW, layer-wise LR decay 0.9, warmup + linear decay, clipping, bf16 autocast where the CPU
has it, prefetch 2). The only difference:

- plain multi-task (Multi): `lambda_schedule: none`, features without teacher outputs;
- student (Single->Multi): `lambda_schedule: linear`, every training feature carries its teacher's
  cached logits (or regression output), read from a real prediction-cache entry (safetensors),
  collated into the batch and mixed into the loss — no teacher forward pass.

Data (synthetic, GLUE-shaped, so the benchmark needs no dataset): four tasks like CoLA (single
sentence, 2 classes), SST-2 (single, 2), MRPC (pair, 2) and STS-B (pair, regression), sizes
--examples x (2, 1.5, 1, 0.75), sentence lengths drawn like theirs, 2,000-word vocabulary.

Timing: each run builds a fresh model and Trainer (same seed: same weights, same batches) and
trains --warmup steps + one epoch + 1 step; `set_progress`, which the trainer calls at the start
of every step, is timestamped, and the timed window is exactly one epoch of complete steps after
the warm-up (construction, warm-up and the final checkpoint are excluded). Runs are interleaved
ABBA (plain, student, student, plain, ...) so both sides see the same machine; reported: median,
min, max seconds per epoch per side, the ratio of medians (the headline) and the per-repeat
paired ratios. The one-time cost of reading the cache entries and attaching them to the features
is reported separately. CPU flags (bf16 support decides the precision) are printed.

Run it alone on the machine: `cpu-slot --all .venv/bin/python tools/bench_bam.py`.
Usage: python tools/bench_bam.py [--model electra-small] [--examples 512] [--repeats 3]
       [--warmup 3] [--batch 128] [--threads 1] [--precision auto]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from xfer.bam import cache
from xfer.bam.data import MixedCollate, MixedTaskSource, attach_teacher_outputs
from xfer.bam.model import HiddenStates, MultiTaskModel
from xfer.bam.objective import TASK_KINDS, DistillationObjective
from xfer.bam.sampling import task_probabilities
from xfer.core.tasks import SentenceExample, TaskInfo
from xfer.core.train_config import TrainConfig
from xfer.core.trainer import Trainer, TrainingProgress, resolve_precision
from xfer.transformer.encoder import Encoder
from xfer.transformer.objectives import SequenceObjective
from xfer.transformer.presets import preset
from xfer.transformer.tokenization import WordPieceTokenizer

# name, pair?, type, size factor, mean words per sentence (like CoLA, SST-2, MRPC, STS-B)
TASKS = (
    ("cola", False, "classification", 2.0, 9),
    ("sst2", False, "classification", 1.5, 10),
    ("mrpc", True, "classification", 1.0, 22),
    ("stsb", True, "regression", 0.75, 10),
)


def cpu_flags() -> str:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return "unknown"
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
    return " ".join(f for f in wanted if f" {f}" in flags) or "none of avx2/avx512/amx"


def make_data(
    examples: int, seed: int = 0
) -> tuple[WordPieceTokenizer, dict[str, tuple[TaskInfo, list[SentenceExample]]]]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(2000)]
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    tokenizer = WordPieceTokenizer.from_vocab(vocab)

    def sentence(mean: int) -> str:
        return " ".join(rng.choices(words, k=max(2, int(rng.expovariate(1 / mean)) + 2)))

    tasks = {}
    for name, pair, kind, factor, mean in TASKS:
        info = (
            TaskInfo(name, kind, (), "spearman", extra={"score_range": (0.0, 5.0)})
            if kind == "regression"
            else TaskInfo(name, kind, ("0", "1"), "accuracy")
        )
        data = [
            SentenceExample(
                f"train-{i}",
                sentence(mean),
                sentence(mean) if pair else None,
                round(rng.uniform(0, 5), 2) if kind == "regression" else rng.choice("01"),
            )
            for i in range(int(examples * factor))
        ]
        tasks[name] = (info, data)
    return tokenizer, tasks


def build(
    model_name: str, tokenizer: WordPieceTokenizer, infos: dict[str, TaskInfo], max_length: int
) -> MultiTaskModel:
    torch.manual_seed(0)
    config = preset(model_name, vocab_size=tokenizer.vocab_size)
    encoder = Encoder(config)
    objectives = {
        t: SequenceObjective(HiddenStates(config), info, tokenizer, max_length, None) for t, info in infos.items()
    }
    return MultiTaskModel(encoder, objectives, infos)


class Clock:
    """Wraps the objective's `set_progress` (called by the trainer at the start of every step)."""

    def __init__(self, objective: DistillationObjective):
        self.times: list[float] = []
        inner = objective.set_progress

        def stamped(progress: TrainingProgress) -> None:
            self.times.append(time.perf_counter())
            inner(progress)

        objective.set_progress = stamped  # type: ignore[method-assign]


def one_run(args: argparse.Namespace, side: str, tokenizer: Any, features: dict[str, list], infos: dict) -> float:
    model = build(args.model, tokenizer, infos, args.max_length)
    objective = DistillationObjective(model, "linear" if side == "student" else "none")
    kinds = {t: TASK_KINDS[i.type] for t, i in infos.items()}
    collate = MixedCollate({t: model.objective(t) for t in infos}, kinds, tokenizer.pad_id)
    sizes = {t: len(f) for t, f in features.items()}
    source = MixedTaskSource(features, task_probabilities(sizes), args.batch, collate, seed=1)
    epoch = source.steps_per_epoch
    total = args.warmup + epoch + 1
    config = TrainConfig(
        steps=total,
        batch_size=args.batch,
        lr=1e-4,
        layer_decay=0.9,
        warmup_fraction=0.1,
        eval_every=None,
        checkpoint_every=total,
        log_every=10**6,
        precision=args.precision,
    )
    clock = Clock(objective)
    with tempfile.TemporaryDirectory() as workdir:
        Trainer(config, objective, source, Path(workdir), device=torch.device("cpu"), progress=False).fit()
    return clock.times[args.warmup + epoch] - clock.times[args.warmup]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="electra-small", help="encoder preset (default electra-small)")
    parser.add_argument("--examples", type=int, default=512, help="size unit of the synthetic tasks")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before the timed epoch")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    tokenizer, tasks = make_data(args.examples)
    infos = {t: info for t, (info, _) in tasks.items()}
    plain_features: dict[str, list] = {}
    student_features: dict[str, list] = {}
    featurizer = build("tiny", tokenizer, infos, args.max_length)
    attach_seconds = 0.0
    with tempfile.TemporaryDirectory() as folder:
        store = cache.PredictionStore(Path(folder))
        entries = {}
        for name, (info, examples) in tasks.items():
            plain_features[name] = featurizer.objective(name).featurize(examples)
            columns = 1 if info.type == "regression" else 2
            rows = [np.random.default_rng(i).normal(size=(1, columns)).astype(np.float32) for i in range(len(examples))]
            key = hashlib.sha256(name.encode()).hexdigest()
            store.save(cache.assemble(key, name, info.type, info.labels, examples, [e.id for e in examples], rows))
            entries[name] = {"file": f"{key}.safetensors", "key": key}
        cache.write_index(Path(folder), entries)
        start = time.perf_counter()
        for name, (info, examples) in tasks.items():
            predictions = cache.load_teacher_predictions(Path(folder), name)
            student_features[name] = [dict(f) for f in plain_features[name]]
            attach_teacher_outputs(name, examples, student_features[name], predictions, TASK_KINDS[info.type])
        attach_seconds = time.perf_counter() - start

    precision = resolve_precision(args.precision, torch.device("cpu"))
    total_examples = sum(len(e) for _, e in tasks.values())
    print(
        f"CPU flags: {cpu_flags()}; torch {torch.__version__}, {torch.get_num_threads()} thread(s); os.cpu_count {os.cpu_count()}"
    )
    print(
        f"model {args.model}, precision {args.precision} -> {precision or 'fp32'}; tasks "
        + ", ".join(f"{t} {len(e)}" for t, (_, e) in tasks.items())
        + f" ({total_examples} examples, epoch = {-(-total_examples // args.batch)} steps of {args.batch})"
    )
    print(
        f"one-time: reading 4 cache entries + attaching teacher outputs to {total_examples} features: {attach_seconds:.3f} s"
    )

    order = ["plain", "student"]
    times: dict[str, list[float]] = {"plain": [], "student": []}
    one_run(args, "plain", tokenizer, plain_features, infos)  # untimed: first-run allocations, kernels
    one_run(args, "student", tokenizer, student_features, infos)
    for repeat in range(args.repeats):
        for side in order if repeat % 2 == 0 else order[::-1]:
            seconds = one_run(args, side, tokenizer, plain_features if side == "plain" else student_features, infos)
            times[side].append(seconds)
            print(f"  repeat {repeat} {side:>7}: {seconds:.2f} s/epoch", flush=True)
    plain, student = statistics.median(times["plain"]), statistics.median(times["student"])
    paired = [s / p for s, p in zip(times["student"], times["plain"], strict=True)]
    print()
    print("| side | s/epoch median | min | max |")
    print("|---|---|---|---|")
    for side in order:
        t = times[side]
        print(f"| {side} | {statistics.median(t):.2f} | {min(t):.2f} | {max(t):.2f} |")
    print(
        f"\nstudent / plain (ratio of medians): {student / plain:.3f}x  "
        f"(paired per repeat: {', '.join(f'{r:.3f}' for r in paired)}); target <= 1.1x"
    )
    return 0 if student / plain <= 1.1 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Benchmark CVT steps (run through `cpu-slot --all`): what the auxiliary views cost, and the
supervised pipeline against a minimal hand-written BiLSTM tagger.

Acceptance criteria (xfer-cvt issue):
1. "an unlabeled CVT step with all auxiliaries costs <= 1.3x a primary-only step";
2. "supervised-mode tokens/s >= 0.95x a minimal hand-written PyTorch BiLSTM tagger of the same
   size, in one run".

Workload: CoNLL-2000 chunking training sentences (`$XFER_DATA/conll2000/train.txt`, real
lengths, batches of 64 sentences length-pooled as in training), the `cpu` preset (word 120 +
char-CNN 3x40, BiLSTM 200 / 100, module hidden 100), SGD momentum 0.9 + clipping 1.0, bf16
autocast where the CPU has native bf16 (`--precision`), one torch thread (`--threads`).

Part 1, step costs (forward + backward + optimizer step, same batches of sentences for every
kind, interleaved per repeat, median ms per step):
  supervised      labeled minibatch: encoder (dropout 0.5) + primary module, cross-entropy;
  self-training   unlabeled minibatch whose only student is the primary module (the teacher pass
                  plus one student pass: what any self-training/word-dropout step costs);
  cvt             unlabeled minibatch, teacher pass + one student pass feeding all five views
                  (fwd, bwd, future, past, full) — `teacher: separate`, the default;
  cvt-shared      the same with `teacher: shared` (one encoder pass).
The ratios to `supervised` and to `self-training` are printed, as ratios of medians and per repeat
(each CVT repeat over the step timed next to it). Criterion 1's "primary-only step" is the
self-training step: the same unlabeled step whose only student is the primary module, so the ratio
is what the auxiliary views cost (docs/results.md says why). The ratio to a supervised step, the
stricter reading, also charges CVT for its teacher pass, which the method needs with any views.

Part 2, supervised throughput (words per second over the same batches in the same order):
  xfer       the shipped pipeline: `cvt.train`'s objective in mode supervised, `PooledStream` +
             `MultiTaskSource` + `AlternatingSource` with the prefetch thread, the shared `Trainer`
             (SGD, schedule, clipping, EMA 0.998 with warm-up, metric bookkeeping);
  baseline   a minimal hand-written tagger of the same sizes: nn.Embedding + the same char-CNN,
             two `nn.LSTM(bidirectional=True)` layers on PackedSequences, Linear-ReLU-Linear,
             cross-entropy with label smoothing, SGD momentum + clip_grad_norm_, its batches
             collated in advance (it pays no data cost at all).
Each side runs `--warmup` + `--steps` steps per repeat, interleaved (ABBA); the timed window
excludes construction, warm-up and the final checkpoint.

`--features DIR` (an xfer or HF Transformer model folder with its tokenizer, e.g. an
`electra.pretrain` stage's `outputs/discriminator`): every kind of part 1 also reads frozen features
of that Transformer (`features: {init: DIR, combine: concat}`, joining layer 2, as
recipes/cvt-on-electra.yaml), and part 2 is skipped (the hand-written tagger has no such input).

Usage: cpu-slot --all python tools/bench_cvt.py [--steps 40] [--repeats 5] [--warmup 8]
       [--precision auto|bf16|fp32] [--threads 1] [--features DIR] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from xfer.core.config import TaskRef
from xfer.core.data import AlternatingSource, MultiTaskSource, TaggedBatch
from xfer.core.errors import UserError
from xfer.core.trainer import Trainer, resolve_precision
from xfer.cvt.config import CvtConfig
from xfer.cvt.data import Featurizer, PooledStream
from xfer.cvt.model import CharCNN
from xfer.cvt.stage import TaskData, build_objective, make_collate, prepare, read_transformer
from xfer.tasks.conll.config import ChunkingConfig
from xfer.tasks.conll.tasks import ChunkingTask

DATA = Path(os.environ.get("XFER_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def cpu_flags() -> str:
    try:
        flags = Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0]
    except (OSError, IndexError):
        return "unknown"
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
    return " ".join(f for f in wanted if f" {f}" in flags) or "none of avx2/avx512/amx"


def load(smoke: bool, features: Path | None = None) -> tuple[CvtConfig, TaskData, Any, Any]:
    """(config, task data, prepared vocabulary and items, (encoder config, weights, tokenizer) of
    the `features` Transformer or None)."""
    path = DATA / "conll2000" / "train.txt"
    if not path.exists():
        sys.exit(f"needs {path} (set XFER_DATA)")
    task = ChunkingTask("conll/chunking", ChunkingConfig(train_file=path, max_examples=800 if smoke else None))
    data = TaskData("conll/chunking", task, task.info(), task.examples("train"), task.examples("dev"))
    config = CvtConfig(tasks=[TaskRef("conll/chunking")], model="tiny" if smoke else "cpu")
    transformer = None
    if features is not None:
        from dataclasses import replace

        from xfer.core.config import Input

        config = replace(config, features=replace(config.features, init=Input(path=features), combine="concat"))
        transformer = read_transformer(features, None, config.features)  # the stage's reader and checks
    return config, data, prepare(config, [data], None, 1, None), transformer


def featurizer_for(config: CvtConfig, prepared: Any, transformer: Any) -> Featurizer:
    tokenizer = transformer[2] if transformer is not None else None
    return Featurizer(prepared.vocab, config.resolved_sizes()["max_word_chars"], tokenizer, config.features.max_length)


def precision_dtype(name: str) -> torch.dtype | None:
    return resolve_precision(name, torch.device("cpu"))


def autocast(dtype: torch.dtype | None) -> Any:
    return torch.autocast("cpu", dtype=dtype) if dtype is not None else torch.autocast("cpu", enabled=False)


# --- part 1: step costs ------------------------------------------------------------------------------


def step_costs(
    args: argparse.Namespace, config: CvtConfig, data: TaskData, prepared: Any, transformer: Any, dtype: Any
) -> dict:
    featurizer = featurizer_for(config, prepared, transformer)
    items = prepared.items[data.name]
    stream = PooledStream(items, [i.length for i in items], 64, make_collate(featurizer, "tagging"), seed=1)
    batches = [stream.next_step()[0] for _ in range(args.warmup + args.steps)]
    kinds = {
        "supervised": ("supervised", "separate"),
        "self-training": ("word_dropout", "separate"),
        "cvt": ("cvt", "separate"),
        "cvt-shared": ("cvt", "shared"),
    }
    objectives = {}
    for kind, (mode, teacher) in kinds.items():
        from dataclasses import replace

        objective = build_objective(
            replace(config, mode=mode, teacher=teacher), [data], prepared, transformer, None, 1, torch.device("cpu")
        )
        if kind == "self-training":
            objective.settings.word_dropout = (
                0.0  # the student reads the same words: the cost of a primary-only student
            )
        objectives[kind] = objective.train()

    def run(kind: str) -> float:
        objective = objectives[kind]
        optimizer = torch.optim.SGD(objective.parameters(), lr=0.01, momentum=0.9)
        times = []
        for i, batch in enumerate(batches):
            tagged = (
                TaggedBatch("labeled", TaggedBatch(data.name, batch))
                if kind == "supervised"
                else TaggedBatch("unlabeled", {k: v for k, v in batch.items() if k != "labels"})
            )
            start = time.perf_counter()
            with autocast(dtype):
                out = objective(tagged)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(objective.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if i >= args.warmup:
                times.append(time.perf_counter() - start)
        return 1000 * statistics.median(times)

    for kind in kinds:  # untimed: kernel caches, allocator
        run(kind)
    results: dict[str, list[float]] = {k: [] for k in kinds}
    order = list(kinds)
    for repeat in range(args.repeats):
        for kind in order if repeat % 2 == 0 else order[::-1]:
            results[kind].append(run(kind))
    paired = {  # per repeat, kinds timed next to each other: how far the ratio moves within this run
        base: [c / b for c, b in zip(results["cvt"], results[base], strict=True)]
        for base in ("supervised", "self-training")
    }
    return {k: statistics.median(v) for k, v in results.items()} | {
        "words_per_batch": sum(int(b["lengths"].sum()) - 2 * b["lengths"].numel() for b in batches) / len(batches),
        "paired": {base: (min(r), statistics.median(r), max(r)) for base, r in paired.items()},
    }


# --- part 2: supervised throughput vs a hand-written tagger ---------------------------------------


class HandTagger(nn.Module):
    """The minimal BiLSTM-CNN tagger one would write by hand, same sizes as the `cpu` preset."""

    def __init__(self, sizes: dict, words: int, chars: int, classes: int):
        super().__init__()
        self.embedding = nn.Embedding(words, sizes["word_dim"], padding_idx=0)
        self.chars = CharCNN(chars, sizes["char_dim"], sizes["char_filters"], sizes["char_widths"])
        self.sum = sizes["char_combine"] == "sum"
        width = sizes["word_dim"] if self.sum else sizes["word_dim"] + self.chars.output_size
        self.lstm1 = nn.LSTM(width, sizes["lstm1"], batch_first=True, bidirectional=True)
        self.lstm2 = nn.LSTM(2 * sizes["lstm1"], sizes["lstm2"], batch_first=True, bidirectional=True)
        self.hidden = nn.Linear(2 * sizes["lstm1"] + 2 * sizes["lstm2"], sizes["hidden"])
        self.out = nn.Linear(sizes["hidden"], classes)

    def forward(self, batch: dict) -> torch.Tensor:
        lengths = batch["lengths"]
        words = F.dropout(self.embedding(batch["words"]), 0.5, self.training)
        chars = F.dropout(self.chars(batch["chars"], batch["char_lengths"])[batch["slots"]], 0.5, self.training)
        x = words + chars if self.sum else torch.cat([words, chars], -1)
        width = x.shape[1]
        h1, _ = self.lstm1(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        h1 = F.dropout(pad_packed_sequence(h1, batch_first=True, total_length=width)[0], 0.5, self.training)
        h2, _ = self.lstm2(pack_padded_sequence(h1, lengths, batch_first=True, enforce_sorted=False))
        h2 = F.dropout(pad_packed_sequence(h2, batch_first=True, total_length=width)[0], 0.5, self.training)
        logits = self.out(F.relu(self.hidden(torch.cat([h1, h2], -1))))
        labels = batch["labels"]
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, label_smoothing=0.1)


class Clock:
    """Trainer events that timestamp every logged step."""

    def __init__(self) -> None:
        self.times: dict[int, float] = {}

    def log(self, step: int, split: str, metrics: dict) -> None:
        if split == "train":
            self.times[step] = time.perf_counter()

    def checkpoint_saved(self, step: int, path: Path) -> None: ...

    def resumed(self, step: int) -> None: ...


def throughput(args: argparse.Namespace, config: CvtConfig, data: TaskData, prepared: Any, precision: str) -> dict:
    from dataclasses import replace

    sizes = config.resolved_sizes()
    featurizer = featurizer_for(config, prepared, None)
    items = prepared.items[data.name]
    collate = make_collate(featurizer, "tagging")
    total = args.warmup + args.steps

    def stream() -> PooledStream:
        return PooledStream(items, [i.length for i in items], 64, collate, seed=11)

    reference = stream()
    batches = [reference.next_step()[0] for _ in range(total + 1)]
    words = [int(b["lengths"].sum()) - 2 * b["lengths"].numel() for b in batches]
    timed_words = sum(words[args.warmup : total])
    dtype = precision_dtype(precision)
    supervised = replace(config, mode="supervised")

    def xfer_side() -> float:
        objective = build_objective(supervised, [data], prepared, None, None, 1, torch.device("cpu"))
        source = AlternatingSource(
            {"labeled": MultiTaskSource({data.name: stream()}, {data.name: 1.0}, seed=1)}, ["labeled"]
        )
        train = replace(
            supervised.train, steps=total, log_every=1, eval_every=None, checkpoint_every=total, precision=precision
        )
        clock = Clock()
        with tempfile.TemporaryDirectory() as workdir:
            trainer = Trainer(
                train, objective, source, Path(workdir), device=torch.device("cpu"), events=clock, progress=False
            )
            objective.ema, objective.ema_decay = trainer.ema, trainer.ema.decay
            trainer.fit()
        return timed_words / (clock.times[total] - clock.times[args.warmup])

    def baseline_side() -> float:
        torch.manual_seed(1)
        model = HandTagger(sizes, len(prepared.vocab.words), len(prepared.vocab.chars), len(data.info.labels)).train()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        start = 0.0
        for i in range(total):
            if i == args.warmup:
                start = time.perf_counter()
            with autocast(dtype):
                loss = model(batches[i])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if i % 50 == 0:
                loss.item()
        return timed_words / (time.perf_counter() - start)

    xfer_side(), baseline_side()  # untimed
    rates: dict[str, list[float]] = {"xfer": [], "baseline": []}
    for repeat in range(args.repeats):
        sides = [("baseline", baseline_side), ("xfer", xfer_side)]
        for name, side in sides if repeat % 2 == 0 else sides[::-1]:
            rates[name].append(side())
    paired = [x / b for x, b in zip(rates["xfer"], rates["baseline"], strict=True)]
    return {
        "xfer": statistics.median(rates["xfer"]),
        "baseline": statistics.median(rates["baseline"]),
        "ratio": statistics.median(rates["xfer"]) / statistics.median(rates["baseline"]),
        "paired": (min(paired), statistics.median(paired), max(paired)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto")
    parser.add_argument("--features", type=Path, help="Transformer model folder: part 1 with its frozen features")
    parser.add_argument("--smoke", action="store_true", help="tiny preset, few steps: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.warmup, args.repeats = 4, 2, 1
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = precision_dtype(args.precision)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, flags: {cpu_flags()}")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), precision {args.precision} -> {dtype or 'fp32'}"
    )
    try:
        config, data, prepared, transformer = load(args.smoke, args.features)
    except UserError as exc:  # e.g. --features naming a folder without a model
        sys.exit(f"error: {exc}")
    print(
        f"data: {len(prepared.items[data.name])} chunking sentences, vocab {len(prepared.vocab.words)}, model {config.model}"
        + (f", frozen features of {args.features}" if args.features else "")
    )
    print(f"steps {args.steps} (+{args.warmup} warm-up) x {args.repeats} repeats, interleaved\n")

    costs = step_costs(args, config, data, prepared, transformer, dtype)
    print(f"## Step cost (batch 64 sentences, {costs['words_per_batch']:.0f} words on average; median ms/step)\n")
    print("| step | ms | x supervised | x self-training |")
    print("|---|---|---|---|")
    for kind in ("supervised", "self-training", "cvt", "cvt-shared"):
        print(
            f"| {kind} | {costs[kind]:.1f} | {costs[kind] / costs['supervised']:.2f} | {costs[kind] / costs['self-training']:.2f} |"
        )
    print("\n| cvt / ... per repeat | min | median | max |\n|---|---|---|---|")
    for base, (low, mid, high) in costs["paired"].items():
        print(f"| {base} | {low:.2f} | {mid:.2f} | {high:.2f} |")
    print()
    if transformer is not None:
        return  # part 2 compares with a tagger that has no Transformer input
    result = throughput(args, config, data, prepared, args.precision)
    print("## Supervised throughput (words/s)\n")
    print("| xfer cvt.train (supervised) | hand-written BiLSTM tagger | ratio (medians) | paired min / median / max |")
    print("|---|---|---|---|")
    low, mid, high = result["paired"]
    print(
        f"| {result['xfer']:.0f} | {result['baseline']:.0f} | {result['ratio']:.3f} | {low:.3f} / {mid:.3f} / {high:.3f} |"
    )


if __name__ == "__main__":
    main()

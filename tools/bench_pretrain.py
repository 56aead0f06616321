"""ELECTRA-Small pre-training step: xfer vs ELECTRA assembled from HF `transformers` classes.

The peer is ../shared/bench/hf_electra_peer.py (`make_peer_step`): ElectraForMaskedLM generator
(hidden/4, same depth) and ElectraForPreTraining discriminator sharing the embedding module, 15%
masking, multinomial sampling at the masked positions, loss MLM + 50 * BCE, torch AdamW.

xfer's step is the real thing: `Trainer._train_step` of the shared trainer on an `electra.rtd`
objective (ELECTRA-Small: 12 layers, hidden 256, 4 heads, FFN 1024, embedding 128, vocab 30522,
generator 1/4 width), i.e. masking, generator at the masked positions only, fp32 Gumbel
sampling, discriminator over every token, loss, backward, gradient clipping (the peer does none),
AdamW with weight-decay groups, LR schedule. Both sides get the same batch (the peer's token ids,
batch 32 x 128, no padding) and run in one process, timed alternately (xfer, HF, HF, xfer, ...)
after warm-up; medians of `--repeats` timings, and of "quiet" ones (PSI: <10% of the time with a
task waiting for a CPU) when there are enough.

bf16: both sides under bf16 autocast, only on a CPU with native bf16 (AMX or AVX512-BF16; the
bench prints which it has and skips bf16 otherwise, where it would be emulated and ~5x slower).

Peak memory: each side and precision in a fresh subprocess: growth of peak RSS over its steps.

Page faults: minor faults per timed step (`getrusage`), per side. A step that allocates large fresh
tensors pays for zero-filling their pages each time (glibc returns big blocks to the kernel on
free); the peer's [32 x 128 x 30522] logits make this a large share of its step, which is why its
time moves with the machine's page-fault cost from session to session.

MFU: model FLOPs per step (`xfer.electra.flops`: the matmul FLOPs the ELECTRA algorithm needs,
the same number for both sides; the peer's extra work, a 30522-way softmax at every position,
is waste, not model FLOPs) / step time / the best FLOP/s of a 2048^3 matmul measured in this run.

Usage: python tools/bench_pretrain.py [--repeats 7] [--warmup 2] [--precisions fp32,bf16]
Run it alone (`cpu-slot --all`): other jobs on the 2 cores decide the result otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import QUIET, cpu_pressure, describe_cpu, matmul_peak_flops, native_bf16, peak_rss_growth, timed

PEER = Path(__file__).resolve().parents[2] / "shared" / "bench" / "hf_electra_peer.py"
BATCH, SEQ, VOCAB = 32, 128, 30522


def _peer(bf16: bool):
    """(step function, its token ids) from the shared peer baseline."""
    sys.path.insert(0, str(PEER.parent))
    from hf_electra_peer import make_peer_step

    step = make_peer_step(batch=BATCH, seq=SEQ, bf16=bf16)
    return step, inspect.getclosurevars(step).nonlocals["ids"]


class _SameBatch:
    """A BatchSource yielding one fixed batch forever (the benchmark times the step, not the data)."""

    steps_per_epoch = None

    def __init__(self, batch):
        self.batch = batch

    def next_step(self):
        return [self.batch]

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def _xfer(ids, bf16: bool, workdir: Path):
    """(step function, objective, model FLOPs per step) of xfer's trainer on the same ids."""
    import numpy as np
    import torch

    from xfer.core.data import Prefetcher
    from xfer.core.trainer import Trainer
    from xfer.electra.config import RTDConfig
    from xfer.electra.flops import Arch, training_flops
    from xfer.electra.model import generator_encoder_config
    from xfer.electra.objective import RTDObjective, SpecialTokens
    from xfer.electra.stage_config import DEFAULT_TRAIN
    from xfer.transformer.presets import preset

    torch.manual_seed(0)
    config = preset("electra-small", vocab_size=VOCAB)
    settings = RTDConfig()
    objective = RTDObjective(config, SpecialTokens(pad=0, cls=101, sep=102, mask=103), SEQ, settings)
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    train = dataclasses.replace(
        DEFAULT_TRAIN, batch_size=BATCH, steps=10**6, precision="bf16" if bf16 else "fp32", prefetch=0
    )
    trainer = Trainer(train, objective, _SameBatch(batch), workdir, device=torch.device("cpu"), progress=False)
    trainer._batches = Prefetcher(trainer.data, 0)
    objective.train()
    gen = Arch.of(generator_encoder_config(config, settings.generator))
    per_sequence = training_flops(settings, Arch.of(config), gen, np.full(1, SEQ), SEQ)
    return trainer._train_step, objective, BATCH * sum(per_sequence.values())


def _memory_child(side: str, precision: str, steps: int) -> None:
    bf16 = precision == "bf16"
    step, ids = _peer(bf16)
    with tempfile.TemporaryDirectory() as tmp:
        if side == "xfer":
            step = _xfer(ids, bf16, Path(tmp))[0]
        peak, method = peak_rss_growth(lambda: [step() for _ in range(steps)])
    print(json.dumps({"peak_mib": peak, "method": method}))


def _memory(side: str, precision: str, steps: int) -> dict:
    command = [sys.executable, __file__, "--child", side, "--child-precision", precision, "--warmup", str(steps)]
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=os.environ.copy())
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timings per side and precision (median reported)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per side and precision")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-precision", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _memory_child(args.child, args.child_precision, args.warmup + 1)
        return

    import torch

    precisions = args.precisions.split(",")
    if "bf16" in precisions and not native_bf16():
        print("bf16 skipped: this CPU has no native bf16 (AMX or AVX512-BF16); autocast would be emulated")
        precisions.remove("bf16")
    print(f"cpu: {describe_cpu()}")
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, batch {BATCH} x seq {SEQ}, pressure {cpu_pressure()}"
    )
    peaks = {p: matmul_peak_flops("bfloat16" if p == "bf16" else "float32") for p in precisions}
    rows = []
    for precision in precisions:
        bf16 = precision == "bf16"
        peer_step, ids = _peer(bf16)
        with tempfile.TemporaryDirectory() as tmp:
            xfer_step, _, model_flops = _xfer(ids, bf16, Path(tmp))
            sides = {"xfer": xfer_step, "hf": peer_step}
            for step in sides.values():
                for _ in range(args.warmup):
                    step()
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
            faults: dict[str, list[int]] = {name: [] for name in sides}
            for r in range(args.repeats):
                for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                    times[name].append(timed(sides[name]))
                    faults[name].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        memory = {} if args.no_memory else {name: _memory(name, precision, args.warmup) for name in sides}
        for name in sides:
            seconds = statistics.median(t for t, _ in times[name])
            quiet = [t for t, share in times[name] if share < QUIET]
            rows.append(
                {
                    "side": name,
                    "precision": precision,
                    "step_s": seconds,
                    "tokens_per_s": BATCH * SEQ / seconds,
                    "quiet_step_s": statistics.median(quiet) if len(quiet) >= 3 else None,
                    "mfu": model_flops / seconds / peaks[precision],
                    "peak_mib": memory.get(name, {}).get("peak_mib"),
                    "faults": statistics.median(faults[name]),
                }
            )
    print(f"matmul peak: {', '.join(f'{p} {v / 1e9:.0f} GFLOP/s' for p, v in peaks.items())}")
    print(f"{'side':5} {'prec':5} {'step s':>7} {'tokens/s':>9} {'MFU':>6} {'peak MiB':>9} {'faults/step':>12}")
    for row in rows:
        memory_text = f"{row['peak_mib']:9.0f}" if row["peak_mib"] is not None else f"{'-':>9}"
        print(
            f"{row['side']:5} {row['precision']:5} {row['step_s']:7.3f} {row['tokens_per_s']:9.0f} "
            f"{row['mfu']:6.1%} {memory_text} {row['faults']:12.0f}"
        )
    for precision in precisions:
        xfer, hf = (next(r for r in rows if r["side"] == s and r["precision"] == precision) for s in ("xfer", "hf"))
        line = f"  -> {precision}: xfer {hf['step_s'] / xfer['step_s']:.2f}x the peer's tokens/s (medians)"
        if xfer["quiet_step_s"] and hf["quiet_step_s"]:
            line += f", {hf['quiet_step_s'] / xfer['quiet_step_s']:.2f}x over quiet timings"
        if xfer["peak_mib"] and hf["peak_mib"]:
            line += f"; peak memory xfer/peer {xfer['peak_mib'] / hf['peak_mib']:.2f}"
        print(line)


if __name__ == "__main__":
    main()

"""Benchmark the xfer encoder against HF `transformers.ElectraModel`: training-step speed and peak memory.

What is measured: one training step's forward + backward (`out.float().sum().backward()`, then
`zero_grad(set_to_none=True)`), in training mode (dropout active) unless `--eval`, for fp32 and
bf16 autocast. Both models have the same config (default ELECTRA-Small: 12 layers, hidden 256,
4 heads, FFN 1024, embedding 128, vocab 30522), identical weights (HF weights imported with
`xfer.transformer.hf`) and identical inputs. HF uses `attn_implementation="sdpa"`.

Inputs: batch `--batch` x `--seq` with realistic padding: per-sequence lengths drawn uniformly
from [seq // 4, seq] (i.e. 32..128 for seq 128; mean ~80, so ~37% of the positions are padding)
with a fixed seed (1234), token ids uniform over the vocabulary, right padding.

Speed: both models live in one process and are timed alternately (xfer, HF, HF, xfer, ...), each
timing covering `--steps` steps (default 1: short alternation intervals are fairest when other
jobs come and go), after `--warmup` untimed steps each; the median over `--repeats` timings is
reported, and the ratio of the minima as a check (the least-disturbed step of each model).
Each timing also records the Linux CPU pressure (PSI: the share of the time in which some task
waited for a CPU); the median over "quiet" timings (< 10% stalled) is printed too, since other
jobs on the shared machine otherwise decide the result.
tokens/s counts real (non-padding) tokens; "slots/s" counts B*T positions. On a machine shared
with other jobs every op waits for a free core, which compresses the speed-up towards the ratio
of op counts; check `/proc/pressure/cpu` if the numbers look off.

Peak memory: each (model, precision) runs in a fresh subprocess (so allocator caches and the
other model do not interfere). After building the model and the inputs the process resets the
kernel's peak-RSS counter (`echo 5 > /proc/self/clear_refs`) and reads the baseline RSS; after
the warm-up and timed steps it reads the peak RSS (`VmHWM` in /proc/self/status). Reported is
peak - baseline: the extra resident memory a training step needs (activations, gradients,
temporaries). RSS sees every allocation torch makes, which tracemalloc would not. If
clear_refs is not writable, ru_maxrss is used instead (then the baseline's own peak is included).

Usage: python tools/bench_encoder.py [--steps 1] [--repeats 11] [--batch 32] [--seq 128] [--eval]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from benchlib import QUIET, cpu_pressure, peak_rss_growth, timed


def _inputs(batch: int, seq: int, vocab: int, min_length: int | None = None):
    """Token ids and padding mask; lengths uniform in [min_length (default seq // 4), seq]."""
    import torch

    g = torch.Generator().manual_seed(1234)
    low = seq // 4 if min_length is None else min_length
    lengths = torch.randint(low, seq + 1, (batch,), generator=g)
    mask = (torch.arange(seq)[None] < lengths[:, None]).long()
    ids = torch.randint(1000, vocab, (batch, seq), generator=g) * mask
    return ids, mask


def _build(args: argparse.Namespace):
    """Return {'xfer': model, 'hf': model} with identical weights."""
    import torch
    from transformers import ElectraConfig, ElectraModel

    from xfer.transformer.hf import load_hf

    torch.manual_seed(0)
    hf_config = ElectraConfig(
        vocab_size=30522,
        embedding_size=128,
        hidden_size=256,
        num_hidden_layers=12,
        num_attention_heads=4,
        intermediate_size=1024,
        attn_implementation="sdpa",
    )
    hf = ElectraModel(hf_config)
    from xfer.transformer.encoder import Encoder

    with tempfile.TemporaryDirectory() as tmp:
        hf.save_pretrained(tmp)
        config, state, _ = load_hf(tmp)
    xfer = Encoder(config)
    xfer.load_state_dict(state)
    for m in (hf, xfer):
        m.train(not args.eval)
    return {"xfer": xfer, "hf": hf}


def _step(model, ids, mask, bf16: bool) -> None:
    import torch

    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = model(input_ids=ids, attention_mask=mask).last_hidden_state
    out.float().sum().backward()
    model.zero_grad(set_to_none=True)


def _memory_child(args: argparse.Namespace) -> None:
    """Subprocess: build one model, measure peak RSS growth over warm-up + timed steps."""
    import torch

    models = _build(args)
    model = models[args.child_model]
    del models
    ids, mask = _inputs(args.batch, args.seq, 30522, args.min_length)
    bf16 = args.child_precision == "bf16"

    def steps() -> None:
        for _ in range(args.warmup + args.steps):
            _step(model, ids, mask, bf16)

    peak, method = peak_rss_growth(steps)
    print(json.dumps({"peak_mib": peak, "method": method, "threads": torch.get_num_threads()}))


def _measure_memory(args: argparse.Namespace, model: str, precision: str) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child-model",
        model,
        "--child-precision",
        precision,
        "--batch",
        str(args.batch),
        "--seq",
        str(args.seq),
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
    ]
    if args.min_length is not None:
        cmd += ["--min-length", str(args.min_length)]
    if args.eval:
        cmd.append("--eval")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ.copy())
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1, help="training steps per timing")
    parser.add_argument("--repeats", type=int, default=11, help="timings per model and precision (median reported)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per model and precision")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument(
        "--min-length",
        type=int,
        default=None,
        help="shortest sequence (default seq // 4); --min-length SEQ gives a batch without padding",
    )
    parser.add_argument("--eval", action="store_true", help="eval mode (no dropout) instead of training mode")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--child-model", help=argparse.SUPPRESS)
    parser.add_argument("--child-precision", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_model:
        _memory_child(args)
        return

    import torch

    models = _build(args)
    ids, mask = _inputs(args.batch, args.seq, 30522, args.min_length)
    real = int(mask.sum())
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, batch {args.batch} x seq {args.seq}, "
        f"real tokens {real} ({real / ids.numel():.0%}), lengths uniform [{args.seq // 4 if args.min_length is None else args.min_length}, {args.seq}], "
        f"{'eval' if args.eval else 'train'} mode, cpu pressure {cpu_pressure()}"
    )
    precisions = args.precisions.split(",")
    results: dict[tuple[str, str], list[float]] = {}
    stalls: dict[tuple[str, str], list[float]] = {}  # share of each timing in which a task waited for a CPU
    for precision in precisions:
        bf16 = precision == "bf16"
        for model in models.values():
            for _ in range(args.warmup):
                _step(model, ids, mask, bf16)
        order = list(models)
        for r in range(args.repeats):
            for name in order if r % 2 == 0 else order[::-1]:
                elapsed, share = timed(
                    lambda m=models[name], b=bf16: [_step(m, ids, mask, b) for _ in range(args.steps)]
                )
                results.setdefault((name, precision), []).append(elapsed / args.steps)
                stalls.setdefault((name, precision), []).append(share)
    print(f"cpu pressure after timing: {cpu_pressure()}")
    memory = {}
    if not args.no_memory:
        for precision in precisions:
            for name in models:
                memory[(name, precision)] = _measure_memory(args, name, precision)
    print(f"{'model':6} {'prec':5} {'step s':>8} {'tokens/s':>9} {'slots/s':>9} {'peak MiB':>9}")
    for precision in precisions:
        for name in models:
            sec = statistics.median(results[(name, precision)])
            mem = memory.get((name, precision), {}).get("peak_mib", float("nan"))
            print(f"{name:6} {precision:5} {sec:8.3f} {real / sec:9.0f} {ids.numel() / sec:9.0f} {mem:9.1f}")
        speedup = statistics.median(results[("hf", precision)]) / statistics.median(results[("xfer", precision)])
        best = min(results[("hf", precision)]) / min(results[("xfer", precision)])
        line = f"  -> {precision}: xfer speed-up {speedup:.2f}x (median), {best:.2f}x (min)"
        quiet = {
            n: [t for t, st in zip(results[(n, precision)], stalls[(n, precision)], strict=True) if st < QUIET]
            for n in models
        }
        if all(len(q) >= 3 for q in quiet.values()):
            line += (
                f", {statistics.median(quiet['hf']) / statistics.median(quiet['xfer']):.2f}x (median of quiet "
                f"timings: {len(quiet['xfer'])} xfer, {len(quiet['hf'])} hf)"
            )
        else:
            line += ", too few quiet timings (machine busy)"
        if memory:
            line += f", peak memory xfer/hf {memory[('xfer', precision)]['peak_mib'] / memory[('hf', precision)]['peak_mib']:.2f}"
        print(line)
    if memory:
        print(
            f"memory method: {next(iter(memory.values()))['method']} (peak RSS growth during the steps, fresh process each)"
        )


if __name__ == "__main__":
    main()

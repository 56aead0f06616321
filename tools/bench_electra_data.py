"""Benchmark: the ELECTRA pre-training data pipeline on a real corpus.

Measures, in one run so the ratios compare like with like:

1. `build_examples` (read + WordPiece + pack + Arrow write) with `num_proc=1` and `num_proc=N`,
   each from a cold cache, interleaved ABBA over --repeats: examples/s, lines/s and the ratio;
   also checks that both give identical examples (they must).
2. Loading the same examples again from the cache (the second call of a run).
3. Streaming: examples/s of iterating the `IterableDataset` (packing on the fly).
4. `PretrainBatches.next_step()` (batch --batch, padded): steps/s for the map-style examples and
   for the stream, against the time of one training step (not measured here).

Prints the CPU flags. Run it alone on the machine:
    cpu-slot --all .venv/bin/python tools/bench_electra_data.py
Usage: python tools/bench_electra_data.py [--corpus 'GLOB' ...] [--tokenizer DIR | --vocab-size 30522]
       [--max-length 128] [--num-proc 2] [--repeats 2] [--max-lines N] [--batch 128]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchlib import describe_cpu

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = str(Path(os.environ.get("XFER_DATA", REPO.parent / "shared" / "data")) / "unlabeled" / "*" / "*.txt")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", nargs="+", default=[DEFAULT_CORPUS], help="files or globs")
    parser.add_argument("--tokenizer", type=Path, default=None, help="WordPiece folder (default: train one)")
    parser.add_argument("--vocab-size", type=int, default=30522)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--num-proc", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-lines", type=int, default=None)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=50, help="next_step calls timed per source")
    args = parser.parse_args()

    import datasets

    from xfer.core.config import Files
    from xfer.electra.corpus import CorpusConfig
    from xfer.electra.data import PretrainBatches, build_examples, example_statistics
    from xfer.transformer.tokenization import WordPieceTokenizer

    datasets.disable_progress_bars()
    files = sorted({Path(p) for pattern in args.corpus for p in glob.glob(pattern, recursive=True)})
    if not files:
        raise SystemExit(f"no files match {args.corpus}")
    size = sum(f.stat().st_size for f in files)
    lines = sum(f.read_bytes().count(b"\n") for f in files)
    if args.max_lines is not None:
        lines = min(lines, args.max_lines)
    print(f"cpu: {describe_cpu()}; {os.cpu_count()} logical CPUs")
    print(f"corpus: {len(files)} files, {size / 2**20:.1f} MiB, {lines:,} lines; max_length {args.max_length}")
    work = Path(tempfile.mkdtemp(prefix="bench-electra-data-"))
    try:
        tokenizer_dir = args.tokenizer
        if tokenizer_dir is None:
            started = time.perf_counter()
            tokenizer_dir = WordPieceTokenizer.train(files, args.vocab_size).save(work / "vocab")
            print(f"trained a {args.vocab_size}-token WordPiece vocabulary in {time.perf_counter() - started:.1f} s")

        def corpus(**options: object) -> CorpusConfig:
            return CorpusConfig(files=Files(tuple(map(str, files))), max_lines=args.max_lines, **options)  # type: ignore[arg-type]

        def timed_build(num_proc: int, cache: Path) -> tuple[float, object]:
            started = time.perf_counter()
            examples = build_examples(corpus(num_proc=num_proc), files, tokenizer_dir, args.max_length, cache, seed=1)
            return time.perf_counter() - started, examples

        order = [1, args.num_proc, args.num_proc, 1] * args.repeats
        seconds: dict[int, list[float]] = {1: [], args.num_proc: []}
        reference = None
        for index, procs in enumerate(order[: 2 * args.repeats]):
            cache = work / f"cache-{index}"
            took, examples = timed_build(procs, cache)
            seconds[procs].append(took)
            column = examples.with_format("arrow")[:].column("input_ids")
            if reference is None:
                reference = column
            elif not column.equals(reference):
                raise SystemExit(f"num_proc={procs} built different examples: determinism is broken")
            if index < 2 * args.repeats - 1:
                del examples
                shutil.rmtree(cache)
        stats = example_statistics(examples)
        n = stats["examples"]
        print(
            f"examples: {n:,} ({stats['tokens']:,} tokens, mean length {stats['mean_length']:.1f}, "
            f"two segments {stats['two_segment_percent']:.1f}%) — identical for num_proc 1 and {args.num_proc}"
        )
        for procs, times in seconds.items():
            median = statistics.median(times)
            print(
                f"build num_proc={procs}: median {median:.2f} s over {len(times)} "
                f"({n / median:,.0f} examples/s, {lines / median:,.0f} lines/s); runs {[round(t, 2) for t in times]}"
            )
        ratio = statistics.median(seconds[1]) / statistics.median(seconds[args.num_proc])
        print(f"speed-up num_proc={args.num_proc} vs 1: {ratio:.2f}x")

        started = time.perf_counter()
        again = build_examples(corpus(), files, tokenizer_dir, args.max_length, cache, seed=1)
        assert len(again) == n
        print(f"cache hit (second call, same inputs): {time.perf_counter() - started:.3f} s")

        stream = build_examples(corpus(streaming=True), files, tokenizer_dir, args.max_length, work / "s", seed=1)
        count, started = 0, time.perf_counter()
        for _ in stream:
            count += 1
            if count >= min(n, 20000):
                break
        took = time.perf_counter() - started
        print(f"streaming iteration: {count / took:,.0f} examples/s ({count:,} examples)")

        for name, source in (
            ("map-style", PretrainBatches(again, args.batch, seed=1, pad_id=0)),
            ("streaming", PretrainBatches(stream, args.batch, seed=1, pad_id=0)),
        ):
            source.next_step()  # streaming: fills the first shuffle window (reported separately)
            started = time.perf_counter()
            for _ in range(args.steps):
                source.next_step()
            took = (time.perf_counter() - started) / args.steps
            print(f"PretrainBatches.next_step {name}, batch {args.batch}: {took * 1000:.2f} ms/step")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Benchmark: pseudo-log-likelihood scoring, Electric (one pass) vs MLM (n passes), and how their PLLs agree.

1. Speed (default): sentences/s of `xfer.electra.scoring` at sentence lengths 32, 64 and 128 tokens
   ([CLS] + pieces + [SEP]) with two models of the same ELECTRA-Small size (12 layers, hidden 256,
   embeddings 128, vocabulary 30522) and *random* weights (speed does not depend on training):
   an Electric energy model (encoder + one-logit head, one pass scores every token) and a masked
   LM (encoder + tied-softmax head, one pass per token, rows of all sentences batched, softmax
   only at the masked row). Random piece ids, so tokenization is not timed. Both methods run
   interleaved (E, M, M, E, ...) over --repeats; the ratio is Electric/MLM sentences/s at each length.
2. Correlation (--electric DIR --mlm DIR --texts FILE): the PLL of the first --sentences lines of
   FILE under both checkpoints (e.g. tiny models pre-trained on the toy corpus, held-in lines),
   and Spearman's rho of the two PLLs, of the per-token PLLs (PLL / pieces: length controlled),
   and within groups of equal piece count.
3. Synthetic n-best lists (--make-nbest DIR --texts FILE): dev/test lists of corrupted sentences with
   noisy base scores, to re-rank with `xfer score --nbest-dev`.

Prints the CPU flags. Run the speed part alone on the machine:
    cpu-slot --all .venv/bin/python tools/bench_pll.py [--lengths 32 64 128] [--repeats 2]
    cpu-slot .venv/bin/python tools/bench_pll.py --electric RUN/electric/outputs/discriminator \\
        --mlm RUN/mlm/outputs/discriminator --texts RUN/corpus/outputs/text/toy.txt --sentences 1000
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

from benchlib import describe_cpu

# --- speed -----------------------------------------------------------------------------------------


def _scorers(preset: str, max_length: int) -> dict[str, object]:
    import torch

    from xfer.electra.heads import DiscriminatorHead
    from xfer.electra.model import MaskedGenerator
    from xfer.electra.scoring import ElectricScorer, LoadedScorer, MLMScorer
    from xfer.transformer.encoder import Encoder
    from xfer.transformer.presets import preset as preset_config

    torch.manual_seed(0)
    config = preset_config(preset, max_position_embeddings=max(512, max_length))
    tokens = SimpleNamespace(cls_id=101, sep_id=102, mask_id=103)  # BERT's ids; only these three are used
    electric = ElectricScorer(Encoder(config), DiscriminatorHead(config.hidden_size))
    mlm = MLMScorer(MaskedGenerator(config, None), tokens.mask_id)
    out = {}
    for name, scorer in (("electric", electric), ("mlm", mlm)):
        scorer.eval()
        out[name] = LoadedScorer(scorer, tokens, name, max_length, Path("<random>"), None)
    return out


def _pieces(count: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    import random

    rng = random.Random(seed)
    return [[rng.randrange(1000, vocab) for _ in range(length - 2)] for _ in range(count)]


def speed(args: argparse.Namespace) -> None:
    import torch

    from xfer.electra.scoring import score_pieces

    scorers = _scorers(args.preset, max(args.lengths))
    vocab = 30522
    print(
        f"models: {args.preset} encoders (random weights), {sum(p.numel() for p in scorers['electric'].scorer.parameters()) / 1e6:.1f}M "
        f"parameters (Electric) / {sum(p.numel() for p in scorers['mlm'].scorer.parameters()) / 1e6:.1f}M (MLM); "
        f"precision {args.precision}; batch {args.batch_size} sequences; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
    if args.flops_only:
        print("\n| length (tokens) | encoder passes Electric / MLM | forward FLOPs ratio MLM / Electric (analytic) |")
        print("|---|---|---|")
        for length in args.lengths:
            print(f"| {length} | 1 / {length - 2} | {flops_ratio(scorers, length):.1f}x |")
        return
    counts = {"electric": args.electric_sentences, "mlm": args.mlm_sentences}
    rows = []
    for length in args.lengths:
        need = {"electric": counts["electric"], "mlm": max(1, counts["mlm"] * 128 // length)}
        data = {m: _pieces(need[m], length, vocab, length) for m in need}
        rates: dict[str, list[float]] = {"electric": [], "mlm": []}
        for method in ("electric", "mlm"):  # warm-up (allocator, kernels)
            score_pieces(scorers[method], data[method][:2], args.batch_size, args.precision)
        for repeat in range(args.repeats):
            order = ("electric", "mlm") if repeat % 2 == 0 else ("mlm", "electric")
            for method in order:
                texts = data[method][: need[method]]
                started = time.perf_counter()
                score_pieces(scorers[method], texts, args.batch_size, args.precision)
                rates[method].append(len(texts) / (time.perf_counter() - started))
        e, m = statistics.median(rates["electric"]), statistics.median(rates["mlm"])
        rows.append((length, e, m, need))
        print(
            f"length {length:>4}: Electric {e:8.2f} sentences/s ({need['electric']} sentences), "
            f"MLM {m:8.3f} sentences/s ({need['mlm']} sentences, {length - 2} passes each): ratio {e / m:6.1f}x",
            flush=True,
        )
    print(
        "\n| length (tokens) | Electric sentences/s | MLM sentences/s | Electric / MLM | forward FLOPs ratio (analytic) |"
        "\n|---|---|---|---|---|"
    )
    for length, e, m, _ in rows:
        print(f"| {length} | {e:.2f} | {m:.3f} | {e / m:.1f}x | {flops_ratio(scorers, length):.1f}x |")


def flops_ratio(scorers: dict[str, object], length: int) -> float:
    """MLM / Electric matmul FLOPs per sentence of `length` tokens (`xfer.electra.flops`'s counting):
    Electric = one encoder pass + the energy head at every piece; MLM = one encoder pass + one
    softmax row per piece."""
    from xfer.electra import flops

    arch = flops.Arch.of(scorers["electric"].scorer.encoder.config)
    pieces = length - 2
    electric = flops.encoder_forward(arch, length) + flops.detection_head_forward(arch, pieces)
    mlm = pieces * (flops.encoder_forward(arch, length) + flops.softmax_head_forward(arch, 1))
    return float(mlm / electric)


# --- correlation ----------------------------------------------------------------------------------


def correlation(args: argparse.Namespace) -> None:
    from collections import defaultdict

    from scipy.stats import spearmanr

    from xfer.electra import scoring

    lines = [line for line in scoring.read_texts(args.texts) if line.text.strip()][: args.sentences]
    results = {}
    for name, folder in (("electric", args.electric), ("mlm", args.mlm)):
        loaded = scoring.load_scorer(folder, method=name)
        started = time.perf_counter()
        scores = scoring.score_lines(loaded, lines, args.batch_size)
        seconds = time.perf_counter() - started
        print(f"{loaded.describe()}: {len(lines)} lines in {seconds:.1f}s ({len(lines) / seconds:.1f} lines/s)")
        results[name] = scores
    electric, mlm = results["electric"], results["mlm"]
    if [s.pieces for s in electric] != [s.pieces for s in mlm]:
        raise SystemExit("the two checkpoints tokenize differently: train them on one vocabulary")
    total = spearmanr([s.pll for s in electric], [s.pll for s in mlm]).statistic
    per_token = spearmanr([s.pll / s.tokens for s in electric], [s.pll / s.tokens for s in mlm]).statistic
    groups: dict[int, list[int]] = defaultdict(list)
    for i, s in enumerate(electric):
        groups[s.tokens].append(i)
    within = []
    for members in groups.values():
        if len(members) >= 10:
            rho = spearmanr([electric[i].pll for i in members], [mlm[i].pll for i in members]).statistic
            within.append((len(members), rho))
    pooled = sum(n * r for n, r in within) / sum(n for n, _ in within) if within else float("nan")
    length_rho = spearmanr([s.tokens for s in electric], [s.pll for s in mlm]).statistic
    print(f"\nSpearman rho over {len(lines)} held-in sentences of {args.texts}:")
    print(f"  PLL (sentence totals)                      {total:.3f}")
    print(f"  PLL / pieces (length-controlled)           {per_token:.3f}")
    print(f"  within equal piece counts (weighted mean)  {pooled:.3f}  ({len(within)} groups of >= 10 sentences)")
    print(f"  (MLM PLL vs piece count alone              {length_rho:.3f})")


# --- synthetic n-best lists ----------------------------------------------------------------------


def make_nbest(args: argparse.Namespace) -> None:
    """dev.jsonl and test.jsonl n-best lists built from sentences of --texts (use held-out ones).

    Each list: the sentence itself and --hypotheses - 1 corruptions of it (two adjacent words
    swapped, a word deleted, a word replaced by a word of another sentence, a word repeated), in
    random order. The base score mimics an imperfect recogniser: -(word errors) + Gaussian noise
    of std --noise, so the base system often prefers a corrupted hypothesis; a PLL that knows the
    language should move the reference up. Deterministic given --seed.
    """
    import random

    from xfer.electra import rerank, scoring

    rng = random.Random(args.seed)
    sentences = [line.text.split() for line in scoring.read_texts(args.texts) if len(line.text.split()) >= 3]
    sentences = sentences[: 2 * args.sentences]
    vocabulary = sorted({w for words in sentences for w in words})

    def corrupt(words: list[str]) -> list[str]:
        out, i = list(words), rng.randrange(len(words) - 1)
        kind = rng.randrange(4)
        if kind == 0:
            out[i], out[i + 1] = out[i + 1], out[i]
        elif kind == 1:
            del out[i]
        elif kind == 2:
            out[i] = rng.choice([w for w in vocabulary if w != out[i]])
        else:
            out.insert(i, out[i])
        return out

    args.make_nbest.mkdir(parents=True, exist_ok=True)
    for split, part in (("dev", sentences[0::2]), ("test", sentences[1::2])):
        records = []
        for number, words in enumerate(part):
            reference = " ".join(words)
            texts = {reference}
            while len(texts) < args.hypotheses:
                texts.add(" ".join(corrupt(words)))
            ordered = sorted(texts)
            rng.shuffle(ordered)
            hypotheses = [
                {"text": t, "score": round(-rerank.word_errors(reference, t) + rng.gauss(0, args.noise), 4)}
                for t in ordered
            ]
            records.append({"id": f"{split}-{number}", "hypotheses": hypotheses, "reference": reference})
        rerank.write_jsonl(args.make_nbest / f"{split}.jsonl", records)
        print(f"{args.make_nbest / f'{split}.jsonl'}: {len(records)} lists of {args.hypotheses}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--preset", default="electra-small", help="encoder size of both models (default electra-small)")
    parser.add_argument("--batch-size", type=int, default=64, help="sequences per forward pass")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--electric-sentences", type=int, default=64, help="sentences per Electric timing")
    parser.add_argument("--mlm-sentences", type=int, default=4, help="MLM sentences per timing at length 128 (x 128/L)")
    parser.add_argument("--flops-only", action="store_true", help="print the analytic FLOPs ratios, time nothing")
    parser.add_argument("--electric", type=Path, help="correlation: an electric.nce checkpoint")
    parser.add_argument("--mlm", type=Path, help="correlation: an electra.mlm checkpoint")
    parser.add_argument("--texts", type=Path, help="correlation: held-in text, one sentence per line")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--make-nbest", type=Path, help="write synthetic dev/test n-best lists from --texts here")
    parser.add_argument("--hypotheses", type=int, default=5, help="--make-nbest: hypotheses per list")
    parser.add_argument("--noise", type=float, default=1.5, help="--make-nbest: std of the base score's noise")
    parser.add_argument("--seed", type=int, default=0, help="--make-nbest: seed")
    args = parser.parse_args()
    print(f"CPU: {describe_cpu()}; {os.cpu_count()} logical CPUs")
    if args.make_nbest:
        if not args.texts:
            parser.error("--make-nbest needs --texts")
        make_nbest(args)
    elif args.electric or args.mlm or args.texts:
        if not (args.electric and args.mlm and args.texts):
            parser.error("the correlation needs --electric, --mlm and --texts")
        correlation(args)
    else:
        speed(args)


if __name__ == "__main__":
    main()

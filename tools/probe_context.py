"""Can a fresh discriminator learn to use context on this corpus, at this size and learning rate?

    python tools/probe_context.py runs/quickstart-electra/pretrain [--steps 600] [--lr 1e-3]

A control for a stalled `electra.pretrain` run (`tools/probe_detection.py` shows the stall: a
discriminator that detects uniform noise but barely unigram noise). It takes the generator out of
the question: each detector is trained from scratch on the stage's own packed examples against
*unigram* noise (15% of positions, labelled like ELECTRA: a draw equal to the original is real).
Unigram draws have the same distribution as the tokens they replace, so token identity gives
nothing away and only context can; the replacements are still easy ("the . runs"), so any
detector that reads its neighbours should get far above AUC 50 in a few hundred steps.

Detectors (`--detectors`, all by default), each with AdamW at `--lr` (constant), dropout 0.1:

- `xfer`: the stage's discriminator (`Encoder` of the stage's model + `DiscriminatorHead`);
- `torch-post`: `torch.nn.TransformerEncoder`, same width/depth/heads/FFN, post-LayerNorm (BERT's
  and ELECTRA's placement) — an independent implementation of the same architecture;
- `torch-pre`: the same with pre-LayerNorm;
- `conv`: one width-5 convolution over the word embeddings — a detector that can only read
  two neighbours each side, as a yardstick of how easy the task is.

Printed: the AUC of each detector every `--every` steps on a fixed probe batch (fixed noise).
docs/results.md ("The quickstart with a toy ELECTRA stage") reads these numbers.

`--noise agreement` (toy-language stages only) swaps the noise for the one skill the quickstart's
toy/agreement task needs: each present-tense verb form is flipped to the other number ("runs" <->
"run") with probability 1/2, and loss and AUC count only those verb positions. It asks whether a
detector of this size can learn agreement at all when every verb carries the signal, which
`tools/probe_agreement.py` contrasts with the share of ELECTRA's replacements that do.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_detection import ProbeError, _stage_config, _tokenizer_dir, examples_table, random_batch

DETECTORS = ("xfer", "torch-post", "torch-pre", "conv")
NOISES = ("unigram", "agreement")

Detector = Callable[[Tensor, Tensor, Tensor], Tensor]  # (ids, attention, token types) -> logits [B, T]


class CurvePoint(NamedTuple):
    """The probe AUC after `step` training steps, and the detector as it is then (ids, attention -> logits)."""

    step: int
    auc: float
    score: Callable[[Tensor, Tensor], Tensor]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage_dir", type=Path, help="an electra.pretrain stage directory (RUN_DIR/STAGE)")
    parser.add_argument("--steps", type=int, default=600, help="training steps per detector (default 600)")
    parser.add_argument("--batch", type=int, default=64, help="packed examples per step (default 64)")
    parser.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate, constant (default 1e-3)")
    parser.add_argument("--every", type=int, default=100, help="report every N steps (default 100)")
    parser.add_argument("--detectors", default=",".join(DETECTORS), help=f"comma-separated, of {', '.join(DETECTORS)}")
    parser.add_argument(
        "--init-std", type=float, help="initializer_range of the xfer detector (default: the stage's encoder's)"
    )
    parser.add_argument("--noise", choices=NOISES, default="unigram", help="what replaces tokens (default unigram)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.detectors.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(DETECTORS))
    if unknown or not chosen:
        parser.error(f"--detectors: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(DETECTORS)}")
    if (
        min(args.steps, args.batch, args.every) < 1
        or not args.lr > 0
        or (args.init_std is not None and not args.init_std > 0)
    ):
        parser.error("--steps, --batch and --every must be at least 1, --lr and --init-std positive")
    try:
        for name in chosen:
            curve = train_detector(
                args.stage_dir, name, args.steps, args.batch, args.lr, args.every, args.seed, args.init_std, args.noise
            )
            for point in curve:  # printed as training goes
                print(f"{name:10s} step {point.step:6d}   {args.noise}-noise AUC {point.auc:5.1f}", flush=True)
            if args.noise == "agreement":  # the trained detector on the task's own sentences
                for split, (auc, n) in agreement_split(args.stage_dir, point.score).items():
                    print(f"{name:10s} toy/agreement dev verbs, {split:13s} AUC {auc:5.1f}  ({n} verbs)", flush=True)
    except ProbeError as exc:
        print(f"probe_context: {exc}", file=sys.stderr)
        return 2
    return 0


def train_detector(
    stage_dir: Path,
    name: str,
    steps: int,
    batch_size: int,
    lr: float,
    every: int,
    seed: int,
    init_std: float | None = None,
    noise: str = "unigram",
) -> Iterator[CurvePoint]:
    """A `CurvePoint` every `every` steps (and at the last) of training detector `name` from scratch
    against `noise` (see the module docstring)."""
    from sklearn.metrics import roc_auc_score

    from xfer.electra import masking
    from xfer.electra.objective import SpecialTokens
    from xfer.electra.stage import preset_encoder_config
    from xfer.transformer.tokenization import WordPieceTokenizer

    config = _stage_config(stage_dir)
    tokenizer = WordPieceTokenizer.from_dir(_tokenizer_dir(stage_dir, config))
    encoder = {**config["encoder"], **({"initializer_range": init_std} if init_std else {})}
    encoder_config = preset_encoder_config(
        config["model"], encoder, config["max_length"], tokenizer.vocab_size, tokenizer.pad_id
    )
    tokens = SpecialTokens.of(tokenizer)
    special = torch.tensor([tokens.cls, tokens.sep, tokens.mask])
    mask_prob = float(config["objective"].get("mask_prob", 0.15))
    cap = masking.max_predictions(mask_prob, config["max_length"])
    from xfer.electra.stage import table_token_counts

    torch.manual_seed(seed)
    table = examples_table(stage_dir)
    rng = np.random.default_rng(seed)
    probe_batch = random_batch(table, 256, rng, tokens.pad)
    counts = torch.from_numpy(table_token_counts(table, tokenizer.vocab_size).astype(np.float64))
    counts[[tokens.pad, tokens.cls, tokens.sep, tokens.mask]] = 0.0
    unigram = counts / counts.sum()

    def unigram_noise(batch: dict[str, Tensor], generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        ids = batch["input_ids"]
        selection = masking.select(ids, batch["attention_mask"], special, mask_prob, cap)
        originals = ids.reshape(-1).index_select(0, selection.flat)
        drawn = torch.multinomial(unigram, originals.numel(), replacement=True, generator=generator)
        labels = torch.zeros(ids.numel(), dtype=torch.bool)
        labels[selection.flat] = drawn != originals  # a draw equal to the original is real
        corrupted = ids.reshape(-1).index_copy(0, selection.flat, drawn).view_as(ids)
        return corrupted, labels.view_as(ids), batch["attention_mask"].bool()

    def agreement_noise(batch: dict[str, Tensor], generator: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
        ids = batch["input_ids"]
        verbs = (numbers[ids] > 0) & batch["attention_mask"].bool()
        flipped = verbs & (torch.rand(ids.shape, generator=generator) < 0.5)
        return torch.where(flipped, flips[ids], ids), flipped, verbs

    if noise == "agreement":
        from probe_agreement import present_forms

        numbers, flips = present_forms(tokenizer)
        corrupt = agreement_noise
    elif noise == "unigram":
        corrupt = unigram_noise
    else:
        raise ValueError(f"noise {noise!r}: choose from {', '.join(NOISES)}")
    generator = torch.Generator().manual_seed(seed)
    probe_ids, probe_labels, probe_scored = corrupt(probe_batch, generator)
    model, detector = _build(name, encoder_config, config["max_length"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    for step in range(1, steps + 1):
        model.train()
        batch = random_batch(table, batch_size, rng, tokens.pad)
        ids, labels, scored = corrupt(batch, generator)
        logits = detector(ids, batch["attention_mask"], batch["token_type_ids"])
        loss = F.binary_cross_entropy_with_logits(logits[scored].float(), labels[scored].float())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % every == 0 or step == steps:
            model.eval()
            with torch.no_grad():
                scores = detector(probe_ids, probe_batch["attention_mask"], probe_batch["token_type_ids"])
            y = probe_labels[probe_scored].numpy()
            auc = 100.0 * roc_auc_score(y, scores[probe_scored].float().numpy())
            yield CurvePoint(step, auc, lambda ids, attention: detector(ids, attention, torch.zeros_like(ids)))


def agreement_split(stage_dir: Path, score: Callable[[Tensor, Tensor], Tensor]) -> dict[str, tuple[float, int]]:
    """`probe_agreement.zero_shot` of a trained detector: flipped vs as-is AUC on toy/agreement dev
    verbs, with and without an attractor."""
    from probe_agreement import agreement_pairs, zero_shot

    from xfer.transformer.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer.from_dir(_tokenizer_dir(stage_dir, _stage_config(stage_dir)))
    return zero_shot(score, agreement_pairs(tokenizer, 800), tokenizer.pad_id)


def _build(name: str, config: object, max_length: int) -> tuple[nn.Module, Detector]:
    from xfer.electra.heads import DiscriminatorHead
    from xfer.transformer.encoder import Encoder

    width, vocab = config.hidden_size, config.vocab_size  # type: ignore[attr-defined]
    if name == "xfer":
        encoder = Encoder(config)  # type: ignore[arg-type]
        head = DiscriminatorHead(width, config.initializer_range)  # type: ignore[attr-defined]
        model = nn.ModuleDict({"encoder": encoder, "head": head})
        return model, lambda ids, attention, types: head(encoder(ids, attention, types).last_hidden_state)
    if name == "conv":
        model = nn.ModuleDict(
            {
                "embed": nn.Embedding(vocab, width),
                "conv": nn.Conv1d(width, width, 5, padding=2),
                "out": nn.Linear(width, 1),
            }
        )

        def conv(ids: Tensor, attention: Tensor, types: Tensor) -> Tensor:
            hidden = model["conv"](model["embed"](ids).transpose(1, 2)).transpose(1, 2)
            return model["out"](F.gelu(hidden)).squeeze(-1)

        return model, conv
    layer = nn.TransformerEncoderLayer(
        width,
        config.num_heads,  # type: ignore[attr-defined]
        config.intermediate_size,  # type: ignore[attr-defined]
        0.1,
        activation="gelu",
        batch_first=True,
        norm_first=name == "torch-pre",
    )
    model = nn.ModuleDict(
        {
            "word": nn.Embedding(vocab, width),
            "position": nn.Embedding(max_length, width),
            "norm": nn.LayerNorm(width),
            "layers": nn.TransformerEncoder(layer, config.num_layers, enable_nested_tensor=False),  # type: ignore[attr-defined]
            "head": nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, 1)),
        }
    )

    def transformer(ids: Tensor, attention: Tensor, types: Tensor) -> Tensor:
        x = model["norm"](model["word"](ids) + model["position"](torch.arange(ids.shape[1])))
        return model["head"](model["layers"](x, src_key_padding_mask=~attention.bool())).squeeze(-1)

    return model, transformer


if __name__ == "__main__":
    raise SystemExit(main())

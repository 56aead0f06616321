"""What can an ELECTRA discriminator detect? A diagnostic for a stalled `electra.pretrain` run.

    python tools/probe_detection.py runs/electra-vs-mlm-cpu/electra [--checkpoint step-0002400]

Loads a checkpoint of an `electra.rtd` stage (the latest by default; the run may still be going),
takes `--examples` packed examples from the stage's own data cache, replaces the usual 15% of
positions in four ways and prints the discriminator's AUC for each:

- its own generator's samples (what training sees),
- unigram samples (the corpus's token distribution: a context-free detector scores ~50),
- uniform samples over the vocabulary (rare tokens give these away without context),
- the masked tokens shuffled across the batch (also unigram-distributed, from real text).

A discriminator that uses context detects unigram and shuffled replacements well above 50; one
that only learned token identity detects uniform samples and nothing else. docs/results.md
("ELECTRA: pre-training") reads these numbers.

`--layers` also prints, per layer, the token spread of the discriminator's hidden states on the
uncorrupted examples (`xfer.transformer.collapse.token_spread`: ~0.5 healthy, below 0.01 a
representation collapse, every token the same vector) and the size of what the layer's attention
and feed-forward blocks add to the residual stream: where a collapse starts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage_dir", type=Path, help="an electra.pretrain stage directory (RUN_DIR/STAGE)")
    parser.add_argument("--checkpoint", help="checkpoint name under checkpoints/ (default: the latest)")
    parser.add_argument("--examples", type=int, default=256, help="packed examples to probe (default 256)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layers", action="store_true", help="also print each layer's token spread")
    args = parser.parse_args(argv)
    try:
        for name, replaced, auc in probe(args.stage_dir, args.checkpoint, args.examples, args.seed):
            print(f"{name:40s} replaced {replaced:5.1f}%   discriminator AUC {auc:5.1f}")
        if args.layers:
            print(f"\n{'hidden states after':24s} {'token spread':>12s} {'|attention out|':>15s} {'|FFN out|':>9s}")
            for name, spread, attention, ffn in layer_spreads(
                args.stage_dir, args.checkpoint, args.examples, args.seed
            ):
                sizes = f"{attention:15.2f} {ffn:9.2f}" if attention is not None else ""
                print(f"{name:24s} {spread:12.2e} {sizes}")
    except ProbeError as exc:
        print(f"probe_detection: {exc}", file=sys.stderr)
        return 2
    return 0


class ProbeError(Exception):
    """A stage directory this probe cannot read (the message says why)."""


def probe(stage_dir: Path, checkpoint: str | None, n_examples: int, seed: int) -> list[tuple[str, float, float]]:
    from sklearn.metrics import roc_auc_score

    from xfer.electra import masking

    objective, tokenizer = load_objective(stage_dir, checkpoint)

    torch.manual_seed(seed)
    batch, counts = _batch(stage_dir, n_examples, seed, tokenizer)
    ids, attention = batch["input_ids"], batch["attention_mask"]
    real = attention.reshape(-1).nonzero().squeeze(1)
    ordinary = torch.ones(tokenizer.vocab_size, dtype=torch.float64)
    for special in (tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id):
        counts[special] = ordinary[special] = 0.0

    def own_generator(selection: masking.Selection, originals: torch.Tensor) -> torch.Tensor:
        return objective._generate(batch, selection, originals).sampled

    def draw(weights: torch.Tensor) -> object:
        return lambda selection, originals: torch.multinomial(weights / weights.sum(), originals.numel(), True)

    kinds = {
        "own generator samples": own_generator,
        "unigram samples": draw(counts),
        "uniform samples": draw(ordinary),
        "masked tokens shuffled across the batch": lambda s, o: o[torch.randperm(o.numel())],
    }
    rows = []
    with torch.no_grad():
        for name, replace in kinds.items():
            selection = objective.select(batch)
            originals = ids.reshape(-1).index_select(0, selection.flat)
            new = replace(selection, originals)
            corrupted = ids.reshape(-1).index_copy(0, selection.flat, new).view_as(ids)
            labels = torch.zeros(ids.numel(), dtype=torch.bool)
            labels[selection.flat] = new != originals
            hidden = objective.discriminator(corrupted, attention, batch["token_type_ids"]).last_hidden_state
            logits = objective.head(hidden.reshape(-1, hidden.shape[-1]).index_select(0, real)).float()
            y = labels.index_select(0, real).numpy()
            rows.append((name, 100.0 * y.mean(), 100.0 * roc_auc_score(y, logits.numpy())))
    return rows


def layer_spreads(
    stage_dir: Path, checkpoint: str | None, n_examples: int, seed: int
) -> list[tuple[str, float, float | None, float | None]]:
    """(module, token spread of its output, mean norm of the attention block's output, of the FFN
    block's output) for the embeddings and each layer of the discriminator, on uncorrupted examples."""
    from xfer.transformer.collapse import token_spread

    objective, tokenizer = load_objective(stage_dir, checkpoint)
    batch, _ = _batch(stage_dir, n_examples, seed, tokenizer)
    encoder = objective.discriminator
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str) -> Any:
        def hook(module: Any, inputs: Any, output: torch.Tensor) -> None:
            seen[name] = output.detach().float().reshape(-1, output.shape[-1])

        return hook

    modules = {"embeddings": encoder.embeddings}
    for i, layer in enumerate(encoder.layers):
        modules |= {f"layer {i}": layer, f"layer {i} attn_out": layer.attn_out, f"layer {i} ffn_out": layer.ffn_out}
    handles = [module.register_forward_hook(keep(name)) for name, module in modules.items()]
    try:
        with torch.no_grad():
            encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    finally:
        for handle in handles:
            handle.remove()
    rows: list[tuple[str, float, float | None, float | None]] = [
        ("embeddings", float(token_spread(seen["embeddings"])), None, None)
    ]
    for i in range(len(encoder.layers)):
        attention, ffn = (float(seen[f"layer {i} {part}"].norm(dim=1).mean()) for part in ("attn_out", "ffn_out"))
        rows.append((f"layer {i}", float(token_spread(seen[f"layer {i}"])), attention, ffn))
    return rows


RTD_WITH_MLM_GENERATOR: dict[str, tuple[str, ...]] = {"electra.rtd": ("mlm",)}
"""What this tool's `probe` and `layer_spreads` read (objective -> generator kinds): the one kind
tests/electra/test_stage.py checks them on. Electric has no `_generate`, and its classifier's logit
is the energy plus a log q correction, not the head alone; tools/probe_agreement.py passes its own,
wider set to `load_objective`."""

DETECTION_VARIANTS = ("electra", "electra_15")
"""The `electra.rtd` variants whose head is a "replaced" logit (the MLM variants' head is a masked LM)."""


def load_objective(
    stage_dir: Path, checkpoint: str | None, supported: dict[str, tuple[str, ...]] = RTD_WITH_MLM_GENERATOR
) -> tuple[Any, Any]:
    """The stage's objective (generator and discriminator) with a checkpoint's weights, in eval mode,
    and the stage's tokenizer. `supported` maps the objectives the caller can probe to their generator
    kinds (`electra.rtd` only in its detection variants); any other stage is a `ProbeError` that names
    it and what is supported."""
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    from xfer.electra.config import GeneratorConfig, NCEConfig, RTDConfig
    from xfer.electra.objective import ElectricObjective, RTDObjective, SpecialTokens
    from xfer.transformer.tokenization import WordPieceTokenizer

    config = _stage_config(stage_dir)
    objective_config = dict(config["objective"])
    name = objective_config.pop("name")
    _check_supported(stage_dir, name, objective_config, supported)
    tokenizer = WordPieceTokenizer.from_dir(_tokenizer_dir(stage_dir, config))
    encoder = _encoder_config(stage_dir, config, tokenizer)
    settings = {**objective_config, "generator": GeneratorConfig(**objective_config["generator"])}
    tokens = SpecialTokens.of(tokenizer)
    if name == "electric.nce":
        objective: Any = ElectricObjective(encoder, tokens, config["max_length"], NCEConfig(**settings))
    else:
        objective = RTDObjective(encoder, tokens, config["max_length"], RTDConfig(**settings))
    weights = _checkpoint_dir(stage_dir, checkpoint) / "model.safetensors"
    try:  # tied tensors (the generator's embeddings, the towers' shared table) are stored once: load_model knows
        missing, unexpected = load_model(objective, str(weights), strict=False)
    except (SafetensorError, OSError, RuntimeError) as exc:  # RuntimeError: a size mismatch
        raise ProbeError(f"{weights}: does not match the stage's model ({exc})") from None
    if missing or unexpected:
        raise ProbeError(
            f"{weights}: does not match the stage's model (missing {sorted(missing)}, unexpected {sorted(unexpected)})"
        )
    return objective.eval(), tokenizer


def _check_supported(stage_dir: Path, name: str, settings: dict, supported: dict[str, tuple[str, ...]]) -> None:
    """Refuse an objective, generator kind or (MLM) variant the caller cannot probe, naming what it can."""
    kind = (settings.get("generator") or {}).get("kind")
    variant = settings.get("variant", "electra")
    if kind in supported.get(name, ()) and (name != "electra.rtd" or variant in DETECTION_VARIANTS):
        return
    found = name if kind is None else f"{name} with generator kind {kind}"
    found += f" (variant {variant})" if name == "electra.rtd" else ""
    readable = ", or ".join(
        f"{objective} with generator kind {' or '.join(kinds)} (variant {' or '.join(DETECTION_VARIANTS)})"
        if objective == "electra.rtd"
        else objective
        for objective, kinds in supported.items()
    )
    raise ProbeError(f"{stage_dir}: objective {found} cannot be probed here; supported: {readable}")


def _stage_config(stage_dir: Path) -> dict:
    status = stage_dir / "stage.json"
    try:
        config = json.loads(status.read_text(encoding="utf-8"))["signature"]["config"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ProbeError(f"{status}: not a readable stage status ({exc})") from None
    if config.get("kind") != "electra.pretrain":
        raise ProbeError(f"{status}: kind {config.get('kind')!r}, not electra.pretrain")
    return config


def _source_dir(stage_dir: Path, config: dict, key: str) -> Path | None:
    """The folder the stage's `key` (`tokenizer`, `init`) named, or None when unset: `STAGE.OUTPUT`
    of this run (a stage folder next to `stage_dir`), else a path."""
    source = config.get(key)
    if not source:
        return None
    stage, dot, output = str(source).partition(".")
    if dot and "/" not in str(source) and (stage_dir.parent / stage / "stage.json").is_file():
        return stage_dir.parent / stage / "outputs" / output
    return Path(str(source))


def _tokenizer_dir(stage_dir: Path, config: dict) -> Path:
    """The stage's WordPiece folder, as the stage found it: its own output, `tokenizer:`, else the
    `init:` checkpoint's own (an unset `tokenizer:` read the current directory)."""
    own = stage_dir / "outputs" / "tokenizer"
    if own.is_dir():
        return own
    key = "tokenizer" if config.get("tokenizer") else "init"
    candidate = _source_dir(stage_dir, config, key)
    if candidate is None or not candidate.is_dir():
        raise ProbeError(f"{stage_dir}: cannot find the tokenizer ({key}: {config.get(key)!r}; looked in {candidate})")
    return candidate


def _encoder_config(stage_dir: Path, config: dict, tokenizer: Any) -> Any:
    """The discriminator's EncoderConfig as `electra.pretrain` built it: the `init:` checkpoint's with
    the stage's `encoder:` overrides, else the preset with them (the probe built the preset even for
    an `init:` stage, and passed `max_position_embeddings` twice when `encoder:` named it)."""
    from xfer.electra.stage import preset_encoder_config
    from xfer.transformer.modelio import read_encoder, with_overrides

    init = _source_dir(stage_dir, config, "init")
    if init is not None:
        if not init.is_dir():
            raise ProbeError(f"{stage_dir}: cannot find the init checkpoint ({config['init']!r}; looked in {init})")
        return with_overrides(read_encoder(init)[0], config["encoder"], init)
    return preset_encoder_config(
        config["model"], config["encoder"], config["max_length"], tokenizer.vocab_size, tokenizer.pad_id
    )


def _checkpoint_dir(stage_dir: Path, name: str | None) -> Path:
    root = stage_dir / "checkpoints"
    if name is None:
        latest = root / "latest"
        if not latest.is_file():
            raise ProbeError(f"{root}: no checkpoint yet")
        name = latest.read_text(encoding="utf-8").strip()
    folder = root / name
    if not (folder / "model.safetensors").is_file():
        raise ProbeError(f"{folder}: no model.safetensors (checkpoints: {sorted(p.name for p in root.iterdir())})")
    return folder


def _batch(stage_dir: Path, n: int, seed: int, tokenizer: object) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """`n` random packed examples of the stage's data cache as one padded batch, and token counts."""
    from xfer.electra.stage import table_token_counts

    table = examples_table(stage_dir)
    counts = torch.from_numpy(table_token_counts(table, tokenizer.vocab_size).astype(np.float64))
    return random_batch(table, n, np.random.default_rng(seed), tokenizer.pad_id), counts


def examples_table(stage_dir: Path) -> object:
    """The stage's packed examples (its map-style data cache) as an Arrow table."""
    import pyarrow as pa

    files = sorted((stage_dir / "data").glob("electra-examples-*/examples.arrow"))
    if not files:
        raise ProbeError(f"{stage_dir / 'data'}: no packed examples (a streamed corpus is not cached)")
    return pa.ipc.open_stream(files[0]).read_all().combine_chunks()


def random_batch(table: object, n: int, rng: np.random.Generator, pad_id: int) -> dict[str, torch.Tensor]:
    """`n` examples of `table` drawn without replacement, collated into one padded batch."""
    from xfer.electra.data import collate_examples

    pick = rng.choice(len(table), size=min(n, len(table)), replace=False)  # type: ignore[arg-type]
    rows = table.take(pick)  # type: ignore[attr-defined]  # only the picked rows: this runs every training step
    sequences = [ids.values.to_numpy() for ids in rows.column("input_ids").combine_chunks()]
    return collate_examples(sequences, rows.column("segment_split").to_numpy(), pad_id)


if __name__ == "__main__":
    raise SystemExit(main())

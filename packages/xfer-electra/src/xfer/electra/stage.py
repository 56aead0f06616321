"""The `electra.pretrain` stage: text -> packed examples -> ELECTRA / Electric / MLM -> models.

Wiring only: the data pipeline is `xfer.electra.data`, the objectives `xfer.electra.objective`,
the loop the shared `Trainer`. Outputs:

  discriminator/   xfer model dir (module `encoder` is what `transformer.finetune` takes as `init:`,
                   `head` the detection/energy or MLM head) + tokenizer files; `hf/`: HF
                   ElectraForPreTraining for electra.rtd's `electra`/`electra_15` variants and
                   Electric (whose logits are the energy E(x)_t, without the noise correction),
                   ElectraForMaskedLM for the MLM baseline and the `replace_mlm`/`all_tokens_mlm`
                   variants (`all_tokens_mlm`'s copy layer is a training device: in neither layout)
  generator/       the generator (xfer dir; `hf/`: ElectraForMaskedLM), or the two-tower cloze model
                   (xfer only); empty for generator-less objectives (unigram/uniform noise)
  tokenizer/       vocab.txt + tokenizer.json

`init:` continues pre-training from released or earlier checkpoints: weights only, a fresh
optimizer and schedule (unlike a resume, which the runner does on its own after an interruption).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from xfer.core import distributed as dist
from xfer.core.atomic import read_json
from xfer.core.errors import DataError, UserError
from xfer.core.stage import StageContext
from xfer.core.trainer import Trainer, epoch_steps
from xfer.electra import flops
from xfer.electra.checks import generator_form_problem, init_generator_vocabulary
from xfer.electra.config import GeneratorConfig
from xfer.electra.model import generator_shape_mismatch
from xfer.electra.objective import (
    PretrainingObjective,
    SpecialTokens,
    pretraining_objective_class,
)
from xfer.electra.stage_config import PretrainConfig
from xfer.transformer.collapse import REPRESENTATION_COLLAPSE
from xfer.transformer.finetune_config import checkpoint_encoder_config


def run_pretrain(ctx: StageContext) -> None:
    """Pre-train, then write the discriminator, generator and tokenizer outputs."""
    config: PretrainConfig = ctx.config
    tokenizer = _tokenizer(config, ctx)
    encoder_config, init_state = _encoder_config(config, ctx, tokenizer.vocab_size, tokenizer.pad_id)
    examples = _examples(config, ctx, tokenizer)
    map_style = ctx.is_main and getattr(examples, "data", None) is not None  # a stream's counts are not known ahead
    counts = token_counts(examples, tokenizer.vocab_size) if map_style else None
    if ctx.is_main:
        ctx.report(_data_report(examples, config))
        unknown = unknown_tokens_warning(counts, tokenizer, _tokenizer_folder(config, ctx))
        if unknown:
            ctx.warn(unknown)
    lengths = example_lengths(examples)
    objective = _objective(config, ctx, encoder_config, tokenizer, examples)
    if init_state is not None:
        _load_init(objective, init_state, config, ctx)
    steps, plan = _plan(config, objective, encoder_config, lengths)
    train = dataclasses.replace(config.train, steps=steps)
    source = _source(ctx, train, examples, tokenizer, config.corpus)
    trainer = Trainer(
        train,
        objective,
        source,
        ctx.dir,
        device=ctx.device,
        events=CollapseWatch(
            ctx.events(),
            _spread_probe(objective.main_encoder, tokenizer),
            stop=config.on_collapse == "stop",
            metrics=ctx.dir / "metrics.jsonl",
        ),
        description="pretrain",
    )
    trainer.fit()
    trainer.load_weights("last")  # the EMA weights when EMA is on: what the run's diagnostics describe
    if ctx.is_main:
        _export(ctx, config, objective, tokenizer, {"training_steps": steps, **plan})
        ctx.report(_report(plan, steps))
        ctx.report(outputs_report(objective, ctx.dir / "outputs", config.export_hf))
        from xfer.core.runs.report import read_metrics

        entropy = _corpus_unigram_entropy(counts, tokenizer)
        if entropy is not None:
            ctx.report(
                f"Corpus unigram entropy: {entropy:.3f} nats (a generator or MLM loss at this value has not "
                "started to use context).\n"
            )
        rows = [r for r in read_metrics(ctx.dir / "metrics.jsonl") if r.get("split") == "train"]
        warning = detection_collapse(rows, unigram_entropy=entropy)
        if warning:
            ctx.warn(warning)
    for name in ("discriminator", "generator", "tokenizer"):
        ctx.output_dir(name)


# --- inputs ---------------------------------------------------------------------------------------


def _tokenizer_folder(config: PretrainConfig, ctx: StageContext) -> Path:
    """The stage's WordPiece folder: `tokenizer:`, else the `init:` checkpoint's own."""
    source = config.tokenizer if config.tokenizer is not None else config.init
    assert source is not None  # check_recipe
    return ctx.resolve(source)


def _tokenizer(config: PretrainConfig, ctx: StageContext) -> Any:
    from xfer.transformer.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer.from_dir(_tokenizer_folder(config, ctx))
    for name in ("cls_id", "sep_id", "mask_id", "pad_id"):
        getattr(tokenizer, name)  # raises a clear error when the vocabulary lacks a special token
    return tokenizer


def _encoder_config(config: PretrainConfig, ctx: StageContext, vocab_size: int, pad_id: int) -> tuple[Any, dict | None]:
    """(discriminator EncoderConfig, initial weights or None): from `init`, or a preset."""
    from xfer.transformer.finetune_config import checkpoint_problems

    # The pre-flight check, again now that earlier stages' outputs exist (a `vocab.tokenizer` or an
    # `init:` from this recipe were not there to compare before the run): a vocabulary other than the
    # init checkpoint's, fewer embeddings than tokens, fewer positions than max_length, or `encoder:`
    # sizes the tokenizer contradicts, fail here, before training.
    tokenizer_dir = _tokenizer_folder(config, ctx)
    init_dir = ctx.resolve(config.init) if config.init is not None else None
    problems = checkpoint_problems(
        tokenizer_dir, init_dir, config.encoder, config.max_length, random_init=init_dir is None
    )
    if problems:
        raise problems[0]
    if init_dir is None:
        return preset_encoder_config(config.model, config.encoder, config.max_length, vocab_size, pad_id), None
    from xfer.transformer.modelio import with_overrides

    # the MLM baseline's model is a masked LM, as a generator is; so is a plugin's objective built on it
    # (its family), which was refused an ELECTRA generator as "not a discriminator"
    if pretraining_objective_class(ctx.host, config.objective.name).family != "electra.mlm":
        check_role(init_dir, "discriminator", "init")
    else:
        check_not_two_tower(init_dir, "init")
    encoder_config, state = read_checkpoint(init_dir)
    return with_overrides(encoder_config, config.encoder, init_dir), state


def preset_encoder_config(model: str, encoder: dict[str, Any], max_length: int, vocab_size: int, pad_id: int) -> Any:
    """How a stage without `init:` builds its discriminator's EncoderConfig: the preset `model` with
    the `encoder:` overrides, sized to the tokenizer, and at least 512 positions (as ELECTRA's
    checkpoints have) unless `encoder:` names max_position_embeddings. The probe tools call it too:
    their copy passed max_position_embeddings twice when `encoder:` named it."""
    from xfer.transformer.presets import preset

    overrides = {"vocab_size": vocab_size, "pad_token_id": pad_id, **encoder}
    overrides.setdefault("max_position_embeddings", max(512, max_length))
    return preset(model, **overrides)


def check_role(folder: Path, wanted: str, key: str) -> None:
    """Refuse a checkpoint of the other role: a generator given as `init:` would be pre-trained on
    as the discriminator (a quarter-width network, or a two-tower model's first tower), silently.
    The role is what the folder records (`modelio.recorded_role`). The MLM baseline, whose two
    outputs are one model, and folders that say neither (ElectraModel, BERT) pass."""
    from xfer.transformer.modelio import recorded_role

    role, objective, evidence = recorded_role(folder)
    if role in (None, wanted) or objective == "electra.mlm":
        return
    sibling = folder.parent / wanted
    hint = f": give the `{wanted}` output next to it ({sibling})" if sibling.is_dir() else ""
    raise UserError(
        f"{key}: {folder} is the {role} of an {objective or 'ELECTRA'} pre-training ({evidence}), not a {wanted}{hint}"
    )


def check_not_two_tower(folder: Path, key: str) -> None:
    """Refuse a two-tower noise model (Electric's, ELECTRA-TT's `generator` output: modules ltr, rtl and
    head) where a masked LM is read. `check_role` lets the MLM baseline continue from any generator,
    and the checkpoint reader takes a folder's first encoder module, so `init:` such a folder continued
    from its causal left-to-right tower alone, trained bidirectionally under a fresh head, with only a
    note about the head."""
    modules = (read_json(folder / "xfer_model.json") or {}).get("modules")
    if isinstance(modules, dict) and {"ltr", "rtl"} <= modules.keys():
        raise UserError(
            f"{key}: {folder} is a two-tower noise model (modules {', '.join(sorted(modules))}), not a masked LM: "
            "the MLM baseline would continue from its left-to-right tower alone; give a masked LM (an "
            "electra.mlm model or an ELECTRA generator) or a discriminator"
        )


def read_checkpoint(folder: Path) -> tuple[Any, dict[str, dict[str, torch.Tensor]]]:
    """(encoder config, {"encoder": state, "head": state (if any)}) of an xfer model dir or an HF folder."""
    from xfer.transformer.modelio import read_encoder

    encoder_config, state, head = read_encoder(folder)
    return encoder_config, {"encoder": state} | ({"head": head} if head else {})


def _examples(config: PretrainConfig, ctx: StageContext, tokenizer: Any) -> Any:
    """The packed examples, built (or reused from the cache) on rank 0 first, then opened by every rank."""
    from xfer.electra.data import build_examples

    files = ctx.resolve_files(config.corpus.files) if config.corpus.files is not None else []
    tokenizer_dir = _tokenizer_folder(config, ctx)
    cache = config.data_cache or ctx.dir / "data"

    def build() -> Any:
        return build_examples(
            config.corpus,
            files,
            tokenizer_dir,
            config.max_length,
            cache,
            ctx.seed,
            short_seq_prob=config.short_seq_prob,
            single_segment_prob=config.single_segment_prob,
            warn=ctx.warn,
        )

    if dist.world_size() > 1 and not config.corpus.streaming:
        result = build() if ctx.is_main else None
        dist.barrier()
        examples = result if result is not None else build()  # a cache hit on the other ranks
    else:
        examples = build()
    check_fingerprinted_corpus(ctx, files, examples, config.corpus, cache)
    return examples


def check_fingerprinted_corpus(
    ctx: StageContext, files: list[Path], examples: Any, corpus: Any = None, cache_dir: Path | None = None
) -> None:
    """Refuse examples built from other corpus bytes than the ones the run's fingerprint signed.

    The runner hashes the corpus files into stage.json when it decides to run the stage;
    `build_examples` hashes them again for its cache key (and guarantees the examples are of
    those bytes). A file edited between the two would be trained on while stage.json records
    the old hash — and a later run on the old text would then skip this stage as done. The cache
    built from the new text is kept (it is filed under the new text's hash): the re-run that
    fingerprints the new text reuses it. Streams are not hashed, so not compared.

    A local `dataset:` file or folder (`corpus` and its `cache_dir` given) is compared too: its
    files are signed under `corpus.dataset`, and the build copies them under the sha256 it hashed
    when it started (`_local_dataset_cache`), or a stream reads them as they are when it opens, so
    an edit in between trained on the new text unnoticed.
    """
    from xfer.electra.data import cache_manifest

    manifest = cache_manifest(examples) if hasattr(examples, "cache_files") else None
    source = (manifest or {}).get("inputs", {}).get("source", {})
    if corpus is not None and cache_dir is not None and corpus.dataset is not None:
        _check_fingerprinted_dataset(ctx, corpus, cache_dir)
        return
    if source.get("kind") != "files":
        return
    signature = (read_json(ctx.dir / "stage.json") or {}).get("signature") or {}
    signed = (signature.get("inputs") or {}).get(f"stages.{ctx.name}.corpus.files")
    if not isinstance(signed, dict):
        return  # not run by the runner, or a corpus from an earlier stage (signed by its fingerprint)
    for path, digest in zip(files, source.get("sha256", []), strict=False):
        recorded = signed.get(str(path))
        if isinstance(recorded, str) and recorded != digest:
            raise DataError(
                path,
                0,
                "changed after this run fingerprinted it and before its pre-training examples were built "
                f"(stage.json records sha256 {recorded[:12]}..., the examples are of {digest[:12]}...). "
                "Re-run: the stage is then fingerprinted on the new text and reuses these examples",
            )


def _check_fingerprinted_dataset(ctx: StageContext, corpus: Any, cache_dir: Path) -> None:
    """`check_fingerprinted_corpus` for a local `dataset:` file or folder: every file the build read
    must hash as stage.json signed it, and no file signed must have gone since (a folder read without it).
    Hashed through the runner's table of the run directory, just written by the fingerprint: a stat per
    unchanged file (a streamed corpus of hundreds of GB is not read again)."""
    from xfer.core.runs.fingerprint import FileHasher, hash_cache_path
    from xfer.electra.data import local_dataset_files

    signature = (read_json(ctx.dir / "stage.json") or {}).get("signature") or {}
    signed = (signature.get("inputs") or {}).get(f"stages.{ctx.name}.corpus.dataset")
    if not isinstance(signed, dict):
        return  # not run by the runner, or a Hub name (not a local path: not signed)
    hasher = FileHasher(hash_cache_path(ctx.run_dir))  # read only: the runner keeps its own copy
    now: dict[str, str] = {}
    for file in local_dataset_files(corpus, cache_dir):
        try:
            now[str(file)] = hasher.file(file)
        except OSError:  # removed since the build listed it: the build failed, or will
            continue
    then = {path: digest for path, digest in signed.items() if isinstance(digest, str)}
    for path, digest in now.items():
        recorded = then.get(path)
        # a file the signature does not list is left alone: the fingerprint walks a folder its own way
        # (symlinked sub-folders, say), and refusing a file it skipped would stop a run nothing changed
        if recorded is not None and recorded != digest:
            was = f"stage.json records sha256 {recorded[:12]}..."
            raise DataError(
                path,
                0,
                "changed after this run fingerprinted it and before its pre-training examples were built "
                f"({was}, the examples are of {digest[:12]}...). "
                "Re-run: the stage is then fingerprinted on the new text and reuses these examples",
                key="corpus.dataset",
            )
    root = Path(str(corpus.dataset))
    for path, recorded in then.items():
        inside = Path(path).relative_to(root).parts if root in Path(path).parents else ()
        hidden = any(part.startswith(".") for part in inside)  # never read by the build
        if recorded != "missing" and not hidden and path not in now and not Path(path).exists():
            raise DataError(
                path,
                0,
                "was removed after this run fingerprinted it and before its pre-training examples were built: "
                "the examples are of the dataset without it. Re-run: the stage is then fingerprinted on what "
                "is there now",
                key="corpus.dataset",
            )


def _data_report(examples: Any, config: PretrainConfig) -> str:
    """The report's data section: what the model trains on, and what packing cut (from the cache manifest)."""
    from xfer.electra.data import cache_manifest, example_statistics
    from xfer.electra.packing import PackStats

    if not hasattr(examples, "cache_files"):
        return (
            "## Data\n\nStreamed corpus: examples are packed on the fly while training, so their number, their "
            "tokens and the tokens packing cuts are not known ahead (a line longer than one example is warned "
            "about on stderr when it is met).\n"
        )
    manifest = cache_manifest(examples) or {}
    stats = manifest.get("statistics") or example_statistics(examples)
    text = (
        f"## Data\n\n{stats['examples']} packed examples, {stats['tokens']} real tokens ([CLS]/[SEP] included; "
        f"mean length {stats['mean_length']:.1f} of max_length {config.max_length}, "
        f"{stats['two_segment_percent']:.0f}% with two segments)"
    )
    if manifest.get("packing"):
        packing = PackStats.from_dict(manifest["packing"])
        share = 100 * packing.tokens_dropped / max(packing.tokens, 1)
        text += (
            f", from {packing.lines} line{'s' if packing.lines != 1 else ''} of {packing.tokens} tokens: packing cut {packing.tokens_dropped} of them "
            f"({share:.1f}%), as the original ELECTRA does, where a sentence overflowed a full example; "
        )
        text += (
            f"{packing.long_lines} {'line is' if packing.long_lines == 1 else 'lines are'} longer than one "
            f"example and {packing.long_line_tokens_dropped} of the cut tokens were theirs (see the warning)"
            if packing.long_lines
            else "no line is longer than one example"
        )
    return text + ".\n"


def example_lengths(examples: Any) -> np.ndarray | None:
    """Real tokens of every packed example (None for a stream, whose lengths are not known ahead)."""
    table = getattr(examples, "data", None)
    if table is None:
        return None
    import pyarrow.compute as pc

    return pc.list_value_length(table.column("input_ids")).to_numpy(zero_copy_only=False)


def token_counts(examples: Any, vocab_size: int) -> np.ndarray:
    """How often each token id occurs in the packed examples (the unigram generator's distribution)."""
    table = getattr(examples, "data", None)
    if table is None:
        raise UserError("a unigram generator needs a map-style corpus (token counts of a stream are not known ahead)")
    return table_token_counts(table, vocab_size)


_COUNT_ROWS = 4096  # examples counted at once by table_token_counts


def table_token_counts(table: Any, vocab_size: int) -> np.ndarray:
    """Token-id counts of a packed-examples Arrow table (its `input_ids` column).

    Counted `_COUNT_ROWS` examples at a time: the table is memory-mapped from the cache, and copying
    the whole column into memory (`combine_chunks`, then bincount's int64 copy: ~12 bytes per token)
    ran a corpus of billions of tokens out of memory before the first step, in every map-style run."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    for chunk in table.column("input_ids").chunks:
        for start in range(0, len(chunk), _COUNT_ROWS):
            ids = chunk.slice(start, _COUNT_ROWS).flatten().to_numpy(zero_copy_only=False)
            counts += np.bincount(ids, minlength=vocab_size)[:vocab_size]
    return counts


def _corpus_unigram_entropy(counts: np.ndarray | None, tokenizer: Any) -> float | None:
    """Entropy (nats) of the corpus's non-special tokens (`counts`: `token_counts`), None for a
    stream (counts not known ahead).

    A masked-LM loss at this value means a model that predicts the unigram distribution, i.e.
    one that does not use context yet (see `detection_collapse`).
    """
    if counts is None:
        return None
    counts = counts.astype(np.float64)
    counts[[tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id, tokenizer.mask_id]] = 0.0
    return unigram_entropy(counts)


UNKNOWN_SHARE_WARNED = 0.05
"""Share of [UNK] among the corpus's tokens above which the stage warns: a vocabulary trained on
the corpus leaves well under 1% (only characters rarer than its `min_frequency`)."""


def unknown_tokens_warning(counts: np.ndarray | None, tokenizer: Any, folder: Path) -> str | None:
    """A warning when more than `UNKNOWN_SHARE_WARNED` of the packed tokens ([CLS]/[SEP] not
    counted) are [UNK], else None. A tokenizer that does not fit the text (another language or
    script, a vocabulary made for another corpus) turned it into [UNK]s without a word: the stage
    pre-trained on them and reported only its token count."""
    if counts is None:
        return None
    total = int(counts.sum() - counts[tokenizer.cls_id] - counts[tokenizer.sep_id])
    unknown = int(counts[tokenizer.unk_id])
    if total <= 0 or unknown <= UNKNOWN_SHARE_WARNED * total:
        return None
    return (
        f"{unknown / total:.1%} of the corpus's tokens ({unknown} of {total}) are [UNK]: the tokenizer ({folder}) "
        "does not cover this text, and the model is pre-trained on [UNK]s where the words were. Give the "
        "vocabulary made from this corpus (a transformer.vocab stage on the same files)."
    )


def unigram_entropy(counts: np.ndarray) -> float | None:
    """Entropy in nats of the distribution proportional to `counts` (None when all are zero)."""
    total = float(counts.sum())
    if total <= 0:
        return None
    p = counts[counts > 0] / total
    return float(-(p * np.log(p)).sum())


def _objective(
    config: PretrainConfig, ctx: StageContext, encoder_config: Any, tokenizer: Any, examples: Any
) -> PretrainingObjective:
    cls = pretraining_objective_class(ctx.host, config.objective.name)
    settings = config.objective.config or ctx.host.config_class("objective", config.objective.name)()
    unigram = None
    generator = getattr(settings, "generator", None)
    if generator is not None and generator.kind == "unigram":
        unigram = torch.as_tensor(token_counts(examples, encoder_config.vocab_size), dtype=torch.float64)
    tokens = SpecialTokens.of(tokenizer)
    if unigram is not None:
        return cls(encoder_config, tokens, config.max_length, settings, unigram_counts=unigram)
    return cls(encoder_config, tokens, config.max_length, settings)


def _load_init(objective: PretrainingObjective, states: dict, config: PretrainConfig, ctx: StageContext) -> None:
    """Initial weights (not a resume): the discriminator, its head when it matches, the generator."""
    encoder = objective.main_encoder
    _load_strict(encoder, states["encoder"], f"init encoder: {ctx.resolve(config.init)}")
    head = objective.exports()["discriminator"].get("head")
    if head is not None and "head" in states and _same_shapes(head, states["head"]):
        head.load_state_dict(states["head"])
    elif head is not None and ctx.is_main and config.init is not None:  # an ElectraModel, a BERT MLM: said
        note = (
            f"init: {ctx.resolve(config.init)} has no {getattr(head, 'kind', type(head).__name__)} weights that fit "
            "this objective's head: the head starts from random init, under the loaded encoder"
        )
        print(f"note: {note}", file=sys.stderr)
        ctx.report(f"Note: {note}.\n")
    if config.init_generator is not None:
        generator = objective.exports().get("generator", {})
        wanted = getattr(getattr(objective, "config", None), "generator", None)  # the settings it was built with
        if "ltr" in generator:
            _load_two_tower(generator, encoder, ctx.resolve(config.init_generator), config, ctx, wanted)
            return
        if "encoder" not in generator:
            raise UserError(
                f"init_generator: objective {config.objective.name!r} has no generator with weights to load into"
            )
        if generator["encoder"] is encoder:  # the MLM baseline: its "generator" output is its main model
            raise UserError(
                f"init_generator: objective {config.objective.name!r} has no generator of its own (its generator "
                "output is its main model, which `init:` loads): the generator's layers would replace the `init:` "
                "encoder's; remove init_generator"
            )
        folder = ctx.resolve(config.init_generator)
        check_role(folder, "generator", "init_generator")
        problems = init_generator_vocabulary(folder, _tokenizer_folder(config, ctx))  # pre-flight's, on stage outputs
        if problems:
            raise problems[0]
        if (wrong_form := generator_form_problem(folder, False, config.objective.name)) is not None:
            raise wrong_form
        gen_config, gen_states = read_checkpoint(folder)
        if gen_config.vocab_size != encoder.config.vocab_size:
            # tied, its embeddings are skipped below, so only its output bias showed the other size,
            # in an error that named neither the folder nor the tensor
            source = "config.json" if (folder / "config.json").is_file() else "xfer_model.json"
            raise UserError(
                f"init_generator: {folder / source}: vocab_size {gen_config.vocab_size} differs from the "
                f"discriminator's {encoder.config.vocab_size}: the generator must share the discriminator's "
                "vocabulary; give the generator pre-trained with it"
            )
        if isinstance(wanted, GeneratorConfig):
            mismatch = generator_shape_mismatch(encoder.config, wanted, gen_config)
            if mismatch:
                raise UserError(f"init_generator: {folder}: {mismatch}")
        tied = generator["encoder"].embeddings is encoder.embeddings
        _load_layers(generator["encoder"], gen_states["encoder"], tied, f"init_generator: {folder}", "the generator")
        if "head" not in gen_states:  # an ElectraModel: trained layers under a random output layer
            raise UserError(
                f"init_generator: {folder} has no masked-LM head (ElectraForMaskedLM's generator_predictions and "
                "generator_lm_head): the generator's output layer would start from random weights; give the "
                "generator's ElectraForMaskedLM folder, or leave init_generator out for a fresh generator"
            )
        _load_strict(generator["head"], gen_states["head"], f"init_generator head: {folder}")


def _load_two_tower(
    generator: dict[str, nn.Module],
    encoder: nn.Module,
    folder: Path,
    config: PretrainConfig,
    ctx: StageContext,
    wanted: GeneratorConfig | None = None,
) -> None:
    """A two-tower noise model (Electric's, ELECTRA-TT's) from the `generator` output of an earlier such
    pre-training: both towers and the cloze head. Continuing Electric restarted its noise model from
    random weights, which is most of what it had learned to make its noise. Tied, the embeddings are
    the discriminator's, which `init:` loaded, so the generator's own copy is skipped.

    `wanted`, the objective's generator settings, is checked against the towers' shape as a masked-LM
    generator's is: a noise model of another size or tying failed with torch's "size mismatch for
    layers.0.qkv.weight" (or "missing embeddings_project.weight"), naming no setting that fits it."""
    from xfer.transformer.modelio import load_model_dir

    check_role(folder, "generator", "init_generator")
    problems = init_generator_vocabulary(folder, _tokenizer_folder(config, ctx))
    if problems:
        raise problems[0]
    if (wrong_form := generator_form_problem(folder, True, config.objective.name)) is not None:
        raise wrong_form
    saved = load_model_dir(folder)
    vocab_size = saved.encoder_config("ltr").vocab_size
    if vocab_size != encoder.config.vocab_size:
        raise UserError(
            f"init_generator: {folder / 'xfer_model.json'}: vocab_size {vocab_size} differs from the "
            f"discriminator's {encoder.config.vocab_size}: the noise model must share the discriminator's vocabulary"
        )
    if isinstance(wanted, GeneratorConfig):
        mismatch = generator_shape_mismatch(encoder.config, wanted, saved.encoder_config("ltr"), "its towers each have")
        if mismatch:
            raise UserError(f"init_generator: {folder}: {mismatch}")
    tied = generator["ltr"].embeddings is encoder.embeddings
    for tower in ("ltr", "rtl"):
        what = f"the noise model's {tower} tower"
        _load_layers(generator[tower], saved.state_dicts[tower], tied, f"init_generator: {folder}", what)
    _load_strict(generator["head"], saved.state_dicts["head"], f"init_generator head: {folder}")


def _load_layers(module: nn.Module, state: dict[str, torch.Tensor], tied: bool, where: str, what: str) -> None:
    """A generator's encoder (or tower) weights. Tied, its embeddings are the discriminator's, which
    `init:` loaded: the checkpoint's copy is skipped and only they may be absent; untied, a
    checkpoint without its own would silently have kept random ones."""
    state = {k: v for k, v in state.items() if not (tied and k.startswith("embeddings."))}
    try:
        missing, unexpected = module.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # a tensor of another shape: a generator of another size
        lines = str(exc).splitlines()
        detail = next((line.strip() for line in lines if "size mismatch" in line), lines[0])
        raise UserError(f"{where} does not match {what} ({detail})") from None
    missing = [k for k in missing if not (tied and k.startswith("embeddings."))]
    if missing or unexpected:
        raise UserError(f"{where} does not match {what}: missing {missing[:3]}, unexpected {unexpected[:3]}")


def _same_shapes(module: nn.Module, state: dict[str, torch.Tensor]) -> bool:
    own = module.state_dict()
    return own.keys() == state.keys() and all(own[k].shape == state[k].shape for k in own)


def _load_strict(module: nn.Module, state: dict[str, torch.Tensor], what: str) -> None:
    try:
        module.load_state_dict(state)
    except RuntimeError as exc:
        # the first line only says "Error(s) in loading state_dict for X:"; the next ones name the tensor
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        detail = "; ".join(lines[1:3]) or lines[0]
        raise UserError(f"{what}: the checkpoint does not match the model ({detail})") from None


# --- planning -------------------------------------------------------------------------------------


def _plan(
    config: PretrainConfig, objective: PretrainingObjective, encoder_config: Any, lengths: Any
) -> tuple[int, dict]:
    """Steps to train and the FLOP accounting behind them (per sequence, per step, total)."""
    sequence_lengths = lengths if lengths is not None and len(lengths) else np.full(1, config.max_length)
    per_sequence = component_flops(config, objective, encoder_config, sequence_lengths)
    batch = config.train.batch_size
    per_step = None if per_sequence is None else batch * sum(per_sequence.values())
    tokens_per_step = batch * float(np.mean(sequence_lengths))
    try:
        if config.budget is not None:
            steps = flops.steps_for_budget(config.budget, per_step, tokens_per_step)
        elif config.train.steps is not None:
            steps = int(config.train.steps)
        else:
            steps = steps_for_epochs(config.train.epochs, None if lengths is None else len(lengths), batch)
    except ValueError as exc:
        raise UserError(f"electra.pretrain: {exc}") from None
    if steps <= 0:
        raise UserError("electra.pretrain: set train.steps, train.epochs or a budget")
    plan = {
        "flops_per_step": per_step,
        "flops_total": None if per_step is None else per_step * steps,
        "tokens_per_step": tokens_per_step,
        "flops_by_component_per_step": {k: batch * v for k, v in (per_sequence or {}).items()},
        "lengths_from": "corpus" if lengths is not None and len(lengths) else f"max_length {config.max_length}",
    }
    return steps, plan


def steps_for_epochs(epochs: float, examples: int | None, batch_size: int) -> int:
    """`train.epochs` as optimizer steps, as the shared trainer counts them (ceil(epochs x batches
    per epoch)); the packed corpus's size is known only once it is built, never for a stream."""
    if examples is None:
        raise ValueError("train.epochs needs the packed corpus's size, which a stream does not have: set train.steps")
    if examples == 0:
        raise ValueError("the packed corpus is empty")
    return epoch_steps(epochs, math.ceil(examples / batch_size))


def objective_settings(config: PretrainConfig) -> Any:
    """The objective's config as the recipe gives it, or its defaults (for the built-in objectives)."""
    from xfer.electra.config import MLMConfig, NCEConfig, RTDConfig

    if config.objective.config is not None:
        return config.objective.config
    defaults = {"electra.rtd": RTDConfig, "electra.mlm": MLMConfig, "electric.nce": NCEConfig}
    cls = defaults.get(config.objective.name)
    return cls() if cls is not None else None


def planned_encoder(config: PretrainConfig, vocab_size: int | None) -> Any:
    """The discriminator's EncoderConfig as the recipe implies it, before anything is built."""
    from xfer.transformer.presets import preset

    if config.init is not None and config.init.path is not None:
        # its description only: the weights (GBs for a large model) were read by `xfer validate` and `xfer
        # flops`, and a damaged weights file was reported twice, by `checkpoint_problems` and from here
        return checkpoint_encoder_config(config.init.path) or read_checkpoint(config.init.path)[0]
    size = {"vocab_size": vocab_size} if vocab_size else {}
    return preset(config.model, **{**size, **config.encoder})


def planned_step(config: PretrainConfig, vocab_size: int | None) -> tuple[float | None, float]:
    """(training FLOPs or None without a formula, real tokens) of one step of full-length sequences,
    before anything is built."""
    per_sequence = component_flops(config, None, planned_encoder(config, vocab_size), np.full(1, config.max_length))
    per_step = None if per_sequence is None else config.train.batch_size * sum(per_sequence.values())
    return per_step, float(config.train.batch_size * config.max_length)


def component_flops(
    config: PretrainConfig, objective: Any, encoder_config: Any, lengths: Any
) -> dict[str, float] | None:
    """Training FLOPs per sequence by component, for this stage's objective; None when it has no
    FLOP formula (a plugin objective of its own kind: it trains, to steps or tokens, uncounted)."""
    from xfer.electra.model import generator_encoder_config

    settings = getattr(objective, "config", None) if objective is not None else objective_settings(config)
    generator = getattr(settings, "generator", None)
    gen = None
    if generator is not None and generator.kind in ("mlm", "two_tower"):
        gen = flops.Arch.of(generator_encoder_config(encoder_config, generator))
    try:
        return flops.training_flops(settings, flops.Arch.of(encoder_config), gen, lengths, config.max_length)
    except flops.NoFlopFormula:
        return None


def _source(ctx: StageContext, train: Any, examples: Any, tokenizer: Any, corpus: Any) -> Any:
    """The batch source; `corpus.shuffle_buffer` is the streaming window and `corpus.stream_sharding` how
    ranks split a stream (both ignored for a packed dataset), and the corpus's files or dataset name what
    an empty stream's error names."""
    from xfer.electra.data import PretrainBatches

    source_name = str(corpus.dataset if corpus.dataset is not None else corpus.files)
    _check_stream_shards(examples, corpus.stream_sharding, dist.world_size(), source_name)
    return PretrainBatches(
        examples,
        train.batch_size,
        seed=ctx.seed,
        pad_id=tokenizer.pad_id,
        rank=dist.rank(),
        world_size=dist.world_size(),
        accumulation=train.grad_accum,
        shuffle_buffer=corpus.shuffle_buffer,
        stream_sharding=corpus.stream_sharding,
        source_name=source_name,
    )


def _check_stream_shards(examples: Any, sharding: str, world_size: int, source_name: str) -> None:
    """`stream_sharding: shards` gives every rank at least one shard of its own: how many a stream has is
    known only once it is opened (blocks of text, rows or data files), so it is checked here, at the
    start of the stage, naming the key, rather than as PretrainBatches' bare ValueError."""
    shards = getattr(examples, "num_shards", None)
    if sharding != "shards" or world_size < 2 or getattr(examples, "data", None) is not None or shards is None:
        return
    if shards < world_size:
        raise UserError(
            f"corpus.stream_sharding: shards needs at least one shard per rank ({world_size}), but {source_name} "
            f"streams as {shards} shard{'s' if shards != 1 else ''} (a shard is ~1 MiB of text files, ~10,000 rows of "
            "a save_to_disk folder, or one data file of a dataset; max_lines makes a dataset stream one): "
            "use stream_sharding: examples, fewer processes, or a corpus of more files"
        )


# --- outputs --------------------------------------------------------------------------------------


def _trained_length(config: PretrainConfig, ctx: StageContext) -> int:
    """The longest input the exported position embeddings were trained on: this stage's max_length,
    or the `init:` checkpoint's recorded one when that is longer (continued pre-training at 128 from a
    512-token model keeps positions 128-511 trained). Recording only this stage's made scoring window
    at 128 and the fine-tuning stages warn of untrained positions past it."""
    from xfer.transformer.initnotes import pretraining_length

    earlier = pretraining_length(ctx.resolve(config.init)) if config.init is not None else None
    return max(config.max_length, earlier or 0)


def _export(
    ctx: StageContext, config: PretrainConfig, objective: PretrainingObjective, tokenizer: Any, meta: dict
) -> None:
    from xfer.transformer.hf import OBJECTIVE_CONFIG_KEY, OBJECTIVE_KEY, export_hf
    from xfer.transformer.initnotes import MAX_LENGTH_KEY
    from xfer.transformer.modelio import save_model_dir

    # the objective's effective settings (defaults filled in): scoring reads mask_prob and the generator kind
    # and max_length, the longest input the position embeddings were trained on
    common = {
        "objective": config.objective.name,
        "objective_family": objective.family,  # a plugin's objective built on a built-in one: what it is
        "objective_config": _plain(objective.config),
        "max_length": _trained_length(config, ctx),
        **meta,
    }
    tokenizer.save(ctx.output_dir("tokenizer"))
    for output, modules in objective.exports().items():
        folder = ctx.output_dir(output)
        save_model_dir(folder, modules, {**common, "role": output})
        tokenizer.save(folder)
        if config.export_hf and "encoder" in modules:
            hf = folder / "hf"
            tokenizer.save_hf(hf, modules["encoder"].config.max_position_embeddings)
            export_hf(
                hf,
                modules["encoder"],
                head=modules.get("head"),
                vocab_file=hf / "vocab.txt",
                # which head this is (the built-in objective it is, for a plugin's): scoring checks it;
                # the trained length and the objective's settings, which the xfer layout's meta holds
                extra_config={
                    OBJECTIVE_KEY: objective.family or config.objective.name,
                    MAX_LENGTH_KEY: common["max_length"],
                    OBJECTIVE_CONFIG_KEY: common["objective_config"],
                },
            )


def outputs_report(objective: PretrainingObjective, outputs: Path, export_hf: bool) -> str:
    """The report's outputs section: what each output folder holds, the `transformers` class its `hf/`
    loads with (from the config.json written), and the trained weights no output holds.

    Which class depends on the objective and variant (the MLM variants' main model is a masked LM, a
    two-tower model has no HF class, unigram/uniform generators no weights), and the docs said only
    "ElectraForPreTraining, or ElectraForMaskedLM for a generator and for electra.mlm's model"."""
    exports = objective.exports()
    rows = []
    for output in ("discriminator", "generator"):
        modules = exports.get(output)
        if modules is None:
            rows.append(f"| {output} | empty: this objective's generator has no weights | - |")
            continue
        config = read_json(outputs / output / "hf" / "config.json") or {}
        if not export_hf:
            hf = "not written (export_hf: false)"
        elif "encoder" not in modules:
            hf = "none: `transformers` has no two-tower class (xfer layout only)"
        else:
            hf = ", ".join(config.get("architectures") or []) or "?"
            if objective.family == "electric.nce" and output == "discriminator":
                hf += " (its logits are the energy E(x)_t, without the noise correction)"
        held = ", ".join(modules)
        if output == "generator" and modules.get("encoder") is exports["discriminator"].get("encoder"):
            held += " (the discriminator's model: the MLM baseline has one)"
        rows.append(f"| {output} | {held} | {hf} |")
    text = "## Outputs\n\n| output | xfer modules | Hugging Face (`hf/`) |\n|---|---|---|\n" + "\n".join(rows) + "\n"
    exported = {id(p) for modules in exports.values() for module in modules.values() for p in module.parameters()}
    left = sorted({name.split(".")[0] for name, p in objective.named_parameters() if id(p) not in exported})
    if left:
        text += (
            f"\nTrained but in no output: {', '.join(left)} (a part of the pre-training objective only; continuing "
            "from these outputs starts it afresh).\n"
        )
    return text


def _plain(value: Any) -> Any:
    from xfer.core.recipes.schema import to_plain

    return to_plain(value) if value is not None else None


def _report(plan: dict, steps: int) -> str:
    if plan["flops_per_step"] is None:
        return (
            f"## Compute\n\n{steps} steps; {plan['tokens_per_step']:.0f} real tokens per step (lengths from the "
            f"{plan['lengths_from']}). FLOPs not counted: xfer.electra.flops has no formula for this objective.\n"
        )
    rows = "\n".join(f"| {name} | {value:.3g} |" for name, value in plan["flops_by_component_per_step"].items())
    return (
        "## Compute\n\n"
        f"{steps} steps; {plan['flops_per_step']:.3g} training FLOPs per step "
        f"({plan['tokens_per_step']:.0f} real tokens per step, lengths from the {plan['lengths_from']}); "
        f"{plan['flops_total']:.3g} FLOPs in total (matmul FLOPs, see `xfer flops`).\n\n"
        "| component | FLOPs per step |\n|---|---|\n" + rows + "\n"
    )


# --- diagnostics ----------------------------------------------------------------------------------


def representation_collapse(rows: list[dict[str, Any]], last: int = 3) -> str | None:
    """A message when the main encoder's `token_spread` stayed below `REPRESENTATION_COLLAPSE` over
    the last `last` logged steps, else None.

    Why apart from `detection_collapse`: both show a detection loss at the base rate, but this one
    does not recover. The collapsed run of docs/results.md ("A second pre-training seed") sat at AUC
    ~50 for its last 6,800 steps, and its encoder then fine-tuned to chance on every GLUE task, where
    the advice for a discriminator that has not learned context yet is to train longer."""
    spreads = [r for r in rows if "token_spread" in r]
    tail = spreads[-last:]
    if len(tail) < last or any(r["token_spread"] >= REPRESENTATION_COLLAPSE for r in tail):
        return None
    since = tail[0]["step"]
    for row in reversed(spreads):
        if row["token_spread"] >= REPRESENTATION_COLLAPSE:
            break
        since = row["step"]
    row = tail[-1]
    auc = f", detection AUC {row['disc_auc']:.1f}" if "disc_auc" in row else ""
    return (
        f"the encoder's representations collapsed: since step {since} (up to step {row['step']}) it maps every "
        f"token to nearly the same vector (token_spread {row['token_spread']:.1e}, below {REPRESENTATION_COLLAPSE}; "
        f"healthy pre-trained encoders in docs/results.md: ~0.55{auc}). It no longer reads its input. In the "
        "measured run, more steps did not undo this (AUC ~50 for its last 6,800 of 8,645 steps), and fine-tuned, "
        "its encoder stayed at chance on every GLUE task: do not fine-tune this checkpoint; pre-train again with "
        "another seed (the other seed of the same recipe fine-tuned normally). See docs/results.md "
        '("A second pre-training seed").'
    )


def _spread_probe(encoder: nn.Module, tokenizer: Any) -> Callable[[], float]:
    """`encoder_token_spread` of `encoder` on random ordinary tokens (eval mode, no RNG drawn)."""
    from xfer.transformer.collapse import encoder_token_spread, ordinary_ids

    ordinary = ordinary_ids(tokenizer)
    return lambda: encoder_token_spread(encoder, ordinary)


class CollapseWatch:
    """The stage's trainer events, passed through to `RunLog`, that add `token_spread` to every
    training log and warn on stderr as soon as `representation_collapse` holds (once per run);
    with `stop`, the trainer then stops (`stop_requested`) instead of training on.

    Measured by `spread` (a probe in eval mode), not from the training forward: there dropout on
    the large common vector a collapsed encoder writes makes the tokens look different (0.43 on
    the training forward where the probe gives 1.6e-5; docs/results.md). Warned while training, a
    collapse can be stopped early instead of found by the end-of-run warning."""

    def __init__(
        self,
        events: Any,
        spread: Callable[[], float],
        last: int = 3,
        stop: bool = False,
        metrics: Path | None = None,
    ):
        self._events = events
        self._spread = spread
        self._last = last
        self._stop = stop
        self._metrics = metrics  # the stage's metrics.jsonl: the logs before a resume
        self._rows: list[dict[str, Any]] = []
        self._message: str | None = None  # "step N: <representation_collapse's message>", once it holds

    @property
    def warned(self) -> bool:
        """Whether the collapse was found (warned about, or, with `stop`, handed to the trainer)."""
        return self._message is not None

    def log(self, step: int, split: str, metrics: dict[str, float]) -> None:
        if split == "train":
            metrics = {**metrics, "token_spread": self._spread()}
        self._events.log(step, split, metrics)
        if split != "train" or self.warned:
            return
        self._watch([*self._rows[-(self._last - 1) :], {"step": step, **metrics}])

    def _watch(self, rows: list[dict[str, Any]]) -> None:
        self._rows = rows
        message = representation_collapse(self._rows, self._last)
        if message:
            self._message = f"step {rows[-1]['step']}: {message}"
            if not self._stop:
                print(f"\nwarning: {self._message}", file=sys.stderr, flush=True)

    def stop_requested(self) -> str | None:
        """With `stop`: the collapse message, so the trainer ends the stage (see `TrainerEvents`)."""
        if not (self._stop and self.warned):
            return None
        return (
            f"pre-training stopped (on_collapse: stop) at {self._message} The checkpoints written so far are kept "
            "for diagnosis (tools/probe_detection.py RUN/STAGE --layers); re-running the same command resumes "
            "from the last of them into the same collapse, so change the seed (or the learning rate) and re-run "
            "with --force, or in another run directory."
        )

    def checkpoint_saved(self, step: int, path: Path) -> None:
        self._events.checkpoint_saved(step, path)

    def resumed(self, step: int) -> None:
        """Watch on from the logs up to `step`, as the run that wrote them did: a watch that started
        empty needed 3 new collapsed logs, so a collapse in the last checkpoint interval before a
        stop (or a kill) let the re-run finish as "completed" with the collapsed encoder."""
        self._events.resumed(step)  # drops the logs after `step` (they are redone)
        if self._metrics is None or not self._metrics.exists():
            return
        from xfer.core.runs.report import read_metrics

        logged = [
            r
            for r in read_metrics(self._metrics)
            if r.get("split") == "train" and "token_spread" in r and r.get("step", step + 1) <= step
        ]
        if logged:
            self._watch(logged[-self._last :])

    @property
    def host(self) -> Any:  # the trainer names the objective's provider in its errors through this
        return getattr(self._events, "host", None)


def detection_collapse(rows: list[dict[str, Any]], last: int = 3, unigram_entropy: float | None = None) -> str | None:
    """A message when replaced-token detection ended at the base rate, else None.

    The discriminator can sit at "never replaced" — its loss then equals the entropy of the
    replaced fraction and its AUC is ~50 — while the generator keeps improving, so the total loss
    still falls. The cause seen on CPU-sized runs (docs/results.md, "ELECTRA: pre-training") is a
    budget too small to leave the *unigram phase*: the generator's loss falls to the corpus's
    unigram entropy within a few hundred steps, so its samples become unigram draws — the same
    distribution as the tokens they replace — and a discriminator that does not use context yet
    cannot tell them apart. Given the corpus's `unigram_entropy`, the message says when that is
    the case (the generator's loss is still within 5% of it). A discriminator whose token spread
    also collapsed gets `representation_collapse`'s message instead: more steps do not help it.
    """
    collapsed = representation_collapse(rows, last)
    if collapsed:
        return collapsed
    tail = [r for r in rows if {"main_loss", "replaced", "disc_auc"} <= set(r)][-last:]
    if len(tail) < last or any(r["replaced"] <= 0 for r in tail):
        # a log window without a replaced token (the generator reproduced every masked token) has nothing
        # to detect: its AUC is the placeholder 50 and any loss above ~0 passed for "the entropy of the
        # replaced fraction", so a discriminator that was right about every token was called collapsed
        return None
    for row in tail:
        p = min(max(row["replaced"] / 100.0, 1e-6), 1 - 1e-6)
        base = -(p * math.log(p) + (1 - p) * math.log(1 - p))
        if row["main_loss"] < 0.97 * base or row["disc_auc"] > 60.0:
            return None
    row = tail[-1]
    message = (
        f"replaced-token detection collapsed: over the last {last} logged steps (up to step {row['step']}) the "
        f"discriminator's loss stayed at the entropy of the replaced fraction ({row['main_loss']:.3f}) with AUC "
        f"{row['disc_auc']:.1f}: it gives nearly the same answer for every token. (Such a discriminator has fine-tuned "
        "better than random init in one run of docs/results.md and not at all, every task at chance, in another.)"
    )
    gen_loss = row.get("gen_loss")
    see = "see docs/results.md (ELECTRA: pre-training)"
    if unigram_entropy is None or gen_loss is None:
        return f"{message} Train for more steps; {see}."
    if gen_loss >= 0.95 * unigram_entropy:
        return (
            f"{message} The generator's loss ({gen_loss:.2f} nats) is still at the corpus's unigram entropy "
            f"({unigram_entropy:.2f}): neither network uses context yet, so the generator samples unigram draws "
            "that a context-free discriminator cannot tell from the originals. Train for more steps (a larger "
            f"budget, or a smaller batch at the same budget); {see}."
        )
    return (
        f"{message} The generator uses context (loss {gen_loss:.2f} nats, below the corpus's unigram entropy "
        f"{unigram_entropy:.2f}) but the discriminator does not yet detect its samples: it learns context more "
        f"slowly than its generator at this budget. Train for more steps; {see}."
    )

"""`xfer flops RECIPE [key=value ...]`: the analytic training FLOPs of a recipe's pre-training stages.

For every `electra.pretrain` stage: FLOPs per step by component (generator, its softmax,
discriminator, heads), per step, and in total for `train.steps` or the stage's `budget`, so two
objectives can be matched on compute before anything runs. Sequences are costed at full
`max_length` (packed data is mostly full; the stage's report gives the figure for the actual
corpus lengths). The vocabulary size comes from the tokenizer folder, the `transformer.vocab`
stage that makes it, or the `init` checkpoint.
"""

from __future__ import annotations

import argparse
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    from xfer.core.cli import add_recipe_arguments

    add_recipe_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    import json

    from xfer.core.plugins import default_host
    from xfer.core.recipes.recipe import load_recipe

    recipe = load_recipe(args.recipe, args.overrides, default_host())
    rows = [stage_flops(recipe, name) for name, plan in recipe.stages.items() if plan.kind == "electra.pretrain"]
    if args.json:  # a list, empty when there is no pre-training stage: JSON either way
        print(json.dumps(rows, indent=1))
        return 0
    if not rows:
        print(f"{args.recipe}: no electra.pretrain stage")
        return 0
    for row in rows:
        print(f"stage {row['stage']}: {row['objective']}, batch {row['batch_size']} x {row['max_length']} tokens")
        print(f"  vocabulary {row['vocab_size']} ({row['vocab_from']})")
        if row["flops_per_step"] is None:
            print("  no FLOP formula for this objective (xfer.electra.flops.training_flops): not counted")
            continue
        for component, value in row["per_step"].items():
            print(f"  {component:<40} {value:>12.4g} FLOPs/step")
        print(f"  {'total per step':<40} {row['flops_per_step']:>12.4g}")
        if row["steps"] is None:
            print(
                f"  {row['epochs']:g} epochs (train.epochs): steps known once the corpus is packed, "
                f"{row['flops_per_step']:.4g} FLOPs each (the stage's report.md gives the total)"
            )
        else:
            print(f"  {row['steps']} steps ({row['steps_from']}): {row['flops_total']:.4g} FLOPs")
        if row["steps_from"] == "budget" and row["budget"]["steps"] is None:  # steps bought by FLOPs or tokens
            print(
                f"  (every sequence counted {row['max_length']} tokens long; the stage plans from its corpus's "
                "real lengths, so shorter sequences buy it more steps: its report.md gives the figure)"
            )
        if row["vocab_from"].startswith("the target size"):
            print(
                "  (the vocabulary the vocab stage trains can be smaller or larger than its target size, and this "
                "stage plans with the real one: the FLOPs per step, and the steps a FLOP budget buys, move with it)"
            )
    return 0


def stage_flops(recipe: Any, name: str) -> dict[str, Any]:
    """One pre-training stage's FLOPs: by component per step, per step, and in total."""
    import dataclasses

    import numpy as np

    from xfer.core.errors import UserError
    from xfer.electra import flops
    from xfer.electra.stage import component_flops

    config = recipe.stages[name].config
    encoder, vocab_from = _planned_encoder(recipe, name)
    batch = config.train.batch_size
    per_sequence = component_flops(config, None, encoder, np.full(1, config.max_length))
    by_component = {k: v * batch for k, v in (per_sequence or {}).items()}
    per_step = None if per_sequence is None else sum(by_component.values())
    if config.budget is not None:
        try:
            steps = flops.steps_for_budget(config.budget, per_step, float(batch * config.max_length))
        except ValueError as exc:
            raise UserError(f"stage {name!r}: {exc}") from None
        steps_from = "budget"
    elif config.train.steps is not None:
        steps, steps_from = int(config.train.steps), "train.steps"
    else:  # epochs: the number of packed examples is not known before the corpus is built
        steps, steps_from = None, "train.epochs"
    return {
        "stage": name,
        "objective": config.objective.name,
        "batch_size": batch,
        "max_length": config.max_length,
        "vocab_size": encoder.vocab_size,
        "vocab_from": vocab_from,
        "per_step": by_component,
        "flops_per_step": per_step,
        "steps": steps,
        "steps_from": steps_from,
        "budget": None if config.budget is None else dataclasses.asdict(config.budget),
        "epochs": config.train.epochs if steps is None else None,
        "flops_total": None if steps is None or per_step is None else per_step * steps,
    }


def _planned_encoder(recipe: Any, name: str) -> tuple[Any, str]:
    """The discriminator architecture stage `name` will train, before anything runs, and where its
    vocabulary size comes from (`VOCAB_TARGET` names a `transformer.vocab` stage's `size`).

    An `init:` or `tokenizer:` that is an earlier stage's output has that stage's architecture or
    vocabulary (an `electra.pretrain` stage's followed up the chain, a `transformer.vocab` stage's
    `size`). They were costed as the preset's: continuing a tiny model with `init: pretrain.discriminator`
    as electra-small (the default `model:`, which `init:` makes unused), and a `tokenizer:
    pretrain.tokenizer` as its 30,522 tokens, ~20-200x the FLOPs per step, and a budget's steps with
    them. One from a stage of another kind is known only once it has run: an error that says so.

    A vocab stage's `size` is only the target of its training: the vocabulary it makes can be
    smaller (a small corpus: 116 tokens for `size: 1000` on 10 toy sentences) or larger (a big
    alphabet), and the stage plans with the real one. That was reported as the vocabulary without
    a word, so the FLOPs per step and the steps a budget buys differed from the stage's; the
    source is now part of the row and the table says it is a target.
    """
    from xfer.electra.checks import _tokenizer_dir, _tokenizer_vocab_size
    from xfer.electra.stage import planned_encoder

    config = recipe.stages[name].config
    init = config.init
    if init is not None and init.is_reference:
        upstream = _upstream(recipe, name, "init", init, ("electra.pretrain",))
        encoder, source = _planned_encoder(recipe, upstream)
        if init.output == "generator":
            encoder = _upstream_generator(recipe, name, upstream, encoder)
        return encoder, source
    if init is not None and init.path is not None:  # the checkpoint's architecture, its vocabulary included
        return planned_encoder(config, None), "init"
    vocab = _tokenizer_vocab_size(config)
    source = "tokenizer" if vocab is not None else "preset"
    tokenizer = config.tokenizer
    if vocab == 0:
        # `planned_encoder` takes 0 for "unknown": an empty vocab.txt was costed as the preset's 30,522
        # tokens and printed as "vocabulary 30522 (tokenizer)", for a stage that cannot load its tokenizer
        from xfer.core.errors import UserError

        raise UserError(
            f"stage {name!r}: tokenizer: {_tokenizer_dir(config)} has an empty "
            "vocabulary (no token in its vocab.txt or tokenizer.json): no FLOP count; give a WordPiece tokenizer "
            "folder (a transformer.vocab stage's outputs/tokenizer)"
        )
    if vocab is None and tokenizer is not None and not tokenizer.is_reference and tokenizer.path is not None:
        # a folder without vocab.txt or tokenizer.json (the stage's `outputs/`, not `outputs/tokenizer`)
        # was costed as the preset's 30,522 tokens, a count for a stage that cannot load its tokenizer
        from xfer.core.errors import UserError

        raise UserError(
            f"stage {name!r}: tokenizer: {tokenizer.path} holds no vocab.txt or tokenizer.json to read the "
            "vocabulary from: give a WordPiece tokenizer folder (a transformer.vocab stage's outputs/tokenizer)"
        )
    if vocab is None and tokenizer is not None and tokenizer.is_reference:
        upstream = _upstream(recipe, name, "tokenizer", tokenizer, ("transformer.vocab", "electra.pretrain"))
        if recipe.stages[upstream].kind == "transformer.vocab":
            vocab, source = recipe.stages[upstream].config.size, VOCAB_TARGET.format(stage=upstream)
        else:
            upstream_encoder, source = _planned_encoder(recipe, upstream)
            vocab = upstream_encoder.vocab_size
    encoder = planned_encoder(config, vocab)
    if "vocab_size" in config.encoder:  # `encoder: {vocab_size: N}` wins over the tokenizer's
        source = "encoder.vocab_size"
    return encoder, source


def _upstream_generator(recipe: Any, name: str, upstream: str, disc: Any) -> Any:
    """The architecture of stage `upstream`'s `generator` output, which stage `name` continues from.

    `init: X.generator` was costed as X's discriminator: an MLM stage continuing from an ELECTRA
    generator (1/4 as wide) got ~10x its FLOPs per step, and a budget that buys the stage steps
    was refused as "less than one training step". The MLM baseline's generator output is its one
    model; a masked or two-tower generator is `generator_encoder_config` of the discriminator."""
    from xfer.core.errors import UserError
    from xfer.electra.config import MLMConfig
    from xfer.electra.model import generator_encoder_config
    from xfer.electra.stage import objective_settings

    settings = objective_settings(recipe.stages[upstream].config)
    if isinstance(settings, MLMConfig):
        return disc
    if recipe.stages[name].config.objective.name != "electra.mlm":  # as the stage's `check_role` refuses it
        raise UserError(
            f"stage {name!r}: init: {upstream}.generator is the generator of stage {upstream!r}, not a discriminator "
            f"(only electra.mlm continues from a generator): give {upstream}.discriminator"
        )
    generator = getattr(settings, "generator", None)
    kind = getattr(generator, "kind", None)
    if kind in ("mlm", "two_tower"):
        return generator_encoder_config(disc, generator)
    what = f"a {kind} generator, which is no model" if kind is not None else "a generator known only once it has run"
    raise UserError(f"stage {name!r}: init: {upstream}.generator: stage {upstream!r} trains {what}: no FLOP count")


VOCAB_TARGET = "the target size of stage {stage!r}"
"""`vocab_from` when the vocabulary size is a `transformer.vocab` stage's `size`."""


def _upstream(recipe: Any, name: str, key: str, reference: Any, kinds: tuple[str, ...]) -> str:
    """The stage that `reference` (stage `name`'s `key`) reads from, when it is of one of `kinds`."""
    from xfer.core.errors import UserError

    upstream = recipe.stages.get(reference.stage)
    if upstream is None or upstream.kind not in kinds:
        kind = f" ({upstream.kind})" if upstream is not None else ""
        raise UserError(
            f"stage {name!r}: {key}: {reference} comes from stage {reference.stage!r}{kind}, whose model is known "
            "only once it has run: no FLOP count before then"
        )
    return reference.stage

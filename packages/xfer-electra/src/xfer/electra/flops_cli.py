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
from pathlib import Path
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", type=Path, help="recipe YAML file")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="overrides, as for `xfer run`")
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
        if row["steps_from"] == "budget":
            print(
                f"  (every sequence counted {row['max_length']} tokens long; the stage plans from its corpus's "
                "real lengths, so shorter sequences buy it more steps: its report.md gives the figure)"
            )
    return 0


def stage_flops(recipe: Any, name: str) -> dict[str, Any]:
    """One pre-training stage's FLOPs: by component per step, per step, and in total."""
    import numpy as np

    from xfer.core.errors import UserError
    from xfer.electra import flops
    from xfer.electra.checks import _checkpoint_vocab_size, _tokenizer_vocab_size
    from xfer.electra.stage import component_flops, planned_encoder

    config = recipe.stages[name].config
    vocab = _tokenizer_vocab_size(config)
    if vocab is None and config.tokenizer is not None and config.tokenizer.is_reference:
        vocab = getattr(recipe.stages[config.tokenizer.stage].config, "size", None)
    if vocab is None and config.init is not None and config.init.path is not None:
        vocab = _checkpoint_vocab_size(config.init.path)
    encoder = planned_encoder(config, vocab)
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
        "per_step": by_component,
        "flops_per_step": per_step,
        "steps": steps,
        "steps_from": steps_from,
        "epochs": config.train.epochs if steps is None else None,
        "flops_total": None if steps is None or per_step is None else per_step * steps,
    }

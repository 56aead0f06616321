"""Continuing Electric (and ELECTRA-TT) pre-training from an earlier run: `init_generator` loads the
two-tower noise model. It was refused ("no masked-LM generator to load into"), so a continued run
restarted its noise model from random weights."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from xfer.core.errors import UserError
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.modelio import load_model_dir

from .electra_recipes import pretrain_recipe

ONE_STEP = "{steps: 1, batch_size: 8, warmup_steps: 0}"
TWO_TOWER = {
    "electric": "{name: electric.nce, generator: {size: 0.5}}",
    "electra-tt": "{name: electra.rtd, generator: {kind: two_tower, size: 0.5}}",
    "electra-tt-untied": "{name: electra.rtd, generator: {kind: two_tower, size: 0.5, tie_embeddings: false}}",
}


def _pretrained(root: Path, objective: str) -> Path:
    run_recipe_file(
        write_recipe(root, pretrain_recipe(120, objective, ONE_STEP)), root / "run", make_host(autoload=True)
    )
    return root / "run" / "fit" / "outputs"


def _continued(pretrained: Path, generator: Path, objective: str) -> str:
    corpus = pretrained.parent.parent / "corpus/outputs/text/toy.txt"
    return (
        f"stages:\n  more:\n    kind: electra.pretrain\n    corpus: {{files: {corpus}}}\n"
        f"    init: {pretrained / 'discriminator'}\n    init_generator: {generator}\n    objective: {objective}\n"
        "    max_length: 32\n    train: {steps: 1, batch_size: 8, warmup_steps: 0, lr: 0.0}\n"
    )


@pytest.mark.parametrize("name", list(TWO_TOWER))
def test_a_two_tower_noise_model_continues_from_its_generator_output(tmp_path: Path, name: str) -> None:
    pretrained = _pretrained(tmp_path / "first", TWO_TOWER[name])
    text = _continued(pretrained, pretrained / "generator", TWO_TOWER[name])
    run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", make_host(autoload=True))
    before = load_model_dir(pretrained / "generator").state_dicts
    after = load_model_dir(tmp_path / "run/more/outputs/generator").state_dicts
    for module in ("ltr", "rtl", "head"):
        assert before[module].keys() == after[module].keys(), module
        changed = [k for k in before[module] if not torch.equal(before[module][k], after[module][k])]
        assert not changed, f"{module}: lr 0 yet {changed[:3]} differ: the noise model was not loaded"


def test_the_other_form_of_generator_is_refused_before_training(tmp_path: Path) -> None:
    """A masked-LM generator for a two-tower noise model, and the reverse: named by the pre-flight
    (`xfer run`, `xfer validate --data`) and by the stage before its first step."""
    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.runs.preflight import preflight

    host = make_host(autoload=True)
    electric = _pretrained(tmp_path / "electric", TWO_TOWER["electric"])
    masked = _pretrained(tmp_path / "masked", "{name: electra.rtd, generator: {size: 0.5}}")
    cases = [
        (
            electric,
            masked / "generator",
            "electric.nce",
            "is a masked-LM generator, not a two-tower noise model",
        ),
        (
            masked,
            electric / "generator",
            "electra.rtd",
            "is a two-tower noise model (modules ltr, rtl, head), not",
        ),
    ]
    for index, (pretrained, generator, objective, said) in enumerate(cases):
        recipe = write_recipe(tmp_path / f"case{index}", _continued(pretrained, generator, objective))
        problems = [str(p) for p in preflight(load_recipe(recipe, [], host), host)]
        assert any(f"init_generator: {generator} {said}" in p for p in problems), problems
        with pytest.raises(UserError, match=re.escape(f"init_generator: {generator} {said}")):
            run_recipe_file(recipe, tmp_path / f"run{index}", host)
        assert not (tmp_path / f"run{index}" / "more" / "checkpoints").exists()

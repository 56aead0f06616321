"""Hostile review of ELECTRA pre-training: init, budgets, objectives (each test failed before its fix)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from xfer.core.errors import UserError
from xfer.testing import make_host, run_recipe_file, write_recipe

from .electra_recipes import pretrain_recipe

RECIPE = pretrain_recipe(
    200, "{name: electra.rtd, generator: {size: 1.0}}", "{steps: 1, batch_size: 8, warmup_steps: 0}"
)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pretrained")
    run_recipe_file(write_recipe(root, RECIPE), root / "run", make_host(autoload=True))
    return root / "run" / "fit" / "outputs"


@pytest.mark.parametrize("preflight", [True, False], ids=["preflight", "stage"])
def test_an_init_generator_with_another_vocab_size_names_the_file_and_key(
    pretrained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preflight: bool
) -> None:
    """A generator whose embeddings hold 300 ids next to a 200-id discriminator (its vocab.txt the
    same): tied, its embeddings were skipped and the stage failed on the output bias with only
    "init_generator head: ... (Error(s) in loading state_dict for GeneratorHead:)". The pre-flight
    checks folders; the stage checks too (for checkpoints earlier stages write)."""
    from xfer.electra import checks

    if not preflight:
        monkeypatch.setattr(checks, "_init_generator_size", lambda config, init: [])
    from transformers import ElectraConfig, ElectraForMaskedLM

    folder = tmp_path / "gen300"
    torch.manual_seed(0)
    hf = ElectraConfig(
        vocab_size=300,
        embedding_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=32,
    )
    ElectraForMaskedLM(hf).save_pretrained(folder)
    for f in (pretrained / "tokenizer").iterdir():
        if f.is_file():
            shutil.copy(f, folder / f.name)
    corpus = pretrained.parent.parent / "corpus/outputs/text/toy.txt"
    text = (
        f"stages:\n  more:\n    kind: electra.pretrain\n    corpus: {{files: {corpus}}}\n"
        f"    init: {pretrained / 'discriminator'}\n    init_generator: {folder}\n"
        "    max_length: 32\n    train: {steps: 1, batch_size: 8, warmup_steps: 0}\n"
    )
    with pytest.raises(UserError, match=r"gen300/config\.json: vocab_size 300 differs from the discriminator's 200"):
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", make_host(autoload=True))


def test_a_checkpoint_that_does_not_fit_names_the_tensor() -> None:
    """`_load_strict` kept only the RuntimeError's first line, which names no tensor."""
    from xfer.electra.stage import _load_strict

    with pytest.raises(UserError, match=r"init encoder: /x: .*size mismatch for weight.*\[3, 2\]"):
        _load_strict(nn.Linear(2, 2), {"weight": torch.zeros(3, 2), "bias": torch.zeros(2)}, "init encoder: /x")
    with pytest.raises(UserError, match=r"Missing key\(s\) in state_dict: \"bias\""):
        _load_strict(nn.Linear(2, 2), {"weight": torch.zeros(2, 2)}, "init encoder: /x")


def _continued(pretrained: Path, *lines: str, lr: str = "5e-4") -> str:
    corpus = pretrained.parent.parent / "corpus/outputs/text/toy.txt"
    added = "".join(f"    {line}\n" for line in lines)
    return (
        f"stages:\n  more:\n    kind: electra.pretrain\n    corpus: {{files: {corpus}}}\n{added}"
        f"    max_length: 32\n    train: {{steps: 1, batch_size: 8, warmup_steps: 0, lr: {lr}}}\n"
    )


@pytest.mark.parametrize("validation", [True, False], ids=["validation", "stage"])
def test_init_generator_is_refused_for_the_mlm_baseline(
    pretrained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validation: bool
) -> None:
    """electra.mlm's generator output is its main model: with a generator as wide as the
    discriminator, `init_generator` silently replaced the `init:` encoder's layers by the generator's.
    Refused when the recipe is validated (built-in objectives), and by the stage (a plugin's)."""
    from xfer.electra.stage_config import PretrainConfig

    if not validation:
        monkeypatch.setattr(PretrainConfig, "_check_init_generator_target", lambda self: None)
    text = _continued(
        pretrained,
        f"init: {pretrained / 'discriminator'}",
        f"init_generator: {pretrained / 'generator'}",
        "objective: electra.mlm",
        lr="0.0",
    )
    with pytest.raises(UserError, match=r"init_generator: objective 'electra.mlm' has no .*generator.*its main model"):
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", make_host(autoload=True))


@pytest.mark.parametrize(
    ("objective", "why"),
    [
        ("{name: electra.rtd, generator: {kind: unigram}}", "its generator is a unigram distribution"),
        ("{name: electra.rtd, generator: {kind: uniform}}", "its generator is a uniform distribution"),
    ],
)
def test_init_generator_without_generator_weights_is_refused_at_validation(
    pretrained: Path, tmp_path: Path, objective: str, why: str
) -> None:
    """Found by the stage only once the corpus had been packed."""
    from xfer.core.recipes.recipe import load_recipe

    text = _continued(
        pretrained,
        f"init: {pretrained / 'discriminator'}",
        f"init_generator: {pretrained / 'generator'}",
        f"objective: {objective}",
    )
    with pytest.raises(UserError, match=rf"init_generator: objective .* has no generator with weights .*{why}"):
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))

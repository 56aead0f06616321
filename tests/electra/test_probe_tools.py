"""tools/probe_agreement.py on the stages the quickstart may move to: ELECTRA-TT (`electra.rtd` with a
two-tower generator) and Electric (`electric.nce`), and the refusal of what neither tool can probe.

Each stage is a two-step `electra.pretrain` on a small toy corpus: the numbers mean nothing, the
loading (the two-tower checkpoint stores tied embeddings once), the sampling and the counts do."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from xfer.testing import make_host, run_recipe_file, write_recipe

from .electra_recipes import TINY

pytestmark = pytest.mark.usefixtures("one_thread")

TOOLS = Path(__file__).resolve().parents[2] / "tools"
SUPPORTED = (
    "supported: electra.rtd with generator kind mlm or two_tower (variant electra or electra_15), or electric.nce"
)


def _tool(name: str) -> Any:
    """Import tools/NAME.py (registered in sys.modules: dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(toy corpus file, tokenizer folder): 300 toy sentences, a 600-piece vocabulary (whole verb forms)."""
    root = tmp_path_factory.mktemp("toy")
    recipe = """
stages:
  corpus: {kind: toy.corpus, sentences: 300}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 600, min_frequency: 1}
"""
    run_recipe_file(write_recipe(root, recipe), root / "run", make_host(autoload=True))
    return root / "run/corpus/outputs/text/toy.txt", root / "run/vocab/outputs/tokenizer"


def _pretrain(root: Path, toy: tuple[Path, Path], objective: str, start: str | None = None) -> Path:
    """The stage directory of a two-step tiny `electra.pretrain` with `objective` on the toy corpus
    (`start`: the stage's `tokenizer:`/`model:`/`encoder:` lines instead of the TINY preset's)."""
    corpus, tokenizer = toy
    start = start or f"tokenizer: {tokenizer}\n    model: tiny\n    encoder: {TINY}"
    recipe = f"""
seed: 2
stages:
  fit:
    kind: electra.pretrain
    corpus: {{files: {corpus}}}
    {start}
    max_length: 32
    objective: {objective}
    train: {{steps: 2, batch_size: 8, warmup_steps: 0}}
"""
    run_recipe_file(write_recipe(root, recipe), root / "run", make_host(autoload=True))
    return root / "run" / "fit"


@pytest.fixture(scope="module")
def two_tower_stage(tmp_path_factory: pytest.TempPathFactory, toy: tuple[Path, Path]) -> Path:
    return _pretrain(tmp_path_factory.mktemp("tt"), toy, "{name: electra.rtd, generator: {kind: two_tower}}")


@pytest.fixture(scope="module")
def electric_stage(tmp_path_factory: pytest.TempPathFactory, toy: tuple[Path, Path]) -> Path:
    return _pretrain(tmp_path_factory.mktemp("electric"), toy, "{name: electric.nce}")


def _loaded_as_saved(objective: torch.nn.Module, stage: Path) -> None:
    """Every tensor of the latest checkpoint is in `objective`, with its value."""
    from safetensors.torch import load_file

    latest = (stage / "checkpoints/latest").read_text().strip()
    saved = load_file(stage / "checkpoints" / latest / "model.safetensors")
    own = objective.state_dict()
    assert any(name.startswith("generator.rtl.") for name in saved)
    for name, tensor in saved.items():
        assert torch.equal(own[name], tensor), name


def _consistent(counts: Any) -> None:
    assert counts.examples == 32 and counts.masked_verbs > 0, counts
    assert counts.agreement_errors + counts.same_number + counts.other == counts.replaced_verbs, counts
    assert counts.replaced_verbs <= min(counts.masked_verbs, counts.replaced) <= counts.sampled, counts


def _loaded_and_counted(stage: Path, objective_name: str) -> Any:
    """The stage's objective as the probe loads it, checked equal to the saved weights, after a
    replacement count over 32 examples whose tallies add up and name `objective_name`."""
    agreement, detection = _tool("probe_agreement"), _tool("probe_detection")
    objective, tokenizer = detection.load_objective(stage, None, agreement.AGREEMENT_OBJECTIVES)
    _loaded_as_saved(objective, stage)
    numbers, _ = agreement.present_forms(tokenizer)
    counts = agreement.generator_replacements(objective, detection.examples_table(stage), numbers, 32, 0)
    _consistent(counts)
    assert counts.objective == objective_name
    return objective


def test_probe_agreement_reads_an_electra_tt_stage(two_tower_stage: Path, capsys: pytest.CaptureFixture) -> None:
    """ELECTRA-TT was refused ("only ... an mlm generator"); its checkpoint stores the towers' tied
    embeddings once, under the discriminator, which the mlm-only key check also rejected."""
    agreement = _tool("probe_agreement")
    assert agreement.main([str(two_tower_stage), "--examples", "32", "--sentences", "40"]) == 0
    out = capsys.readouterr().out
    assert "generator, 32 packed examples" in out and "'replaced' logit" in out and "no attractor" in out, out

    objective = _loaded_and_counted(two_tower_stage, "electra.rtd")
    assert type(objective.generator).__name__ == "TwoTower"
    assert (
        objective.generator.ltr.embeddings is objective.generator.rtl.embeddings is objective.discriminator.embeddings
    )


def test_probe_agreement_reads_an_electric_stage(electric_stage: Path, capsys: pytest.CaptureFixture) -> None:
    """Electric: the noise model's samples, counted only where they differ (the report says so),
    and its energy as the zero-shot score."""
    agreement = _tool("probe_agreement")
    assert agreement.main([str(electric_stage), "--examples", "32", "--sentences", "40"]) == 0
    out = capsys.readouterr().out
    assert "noise model, 32 packed examples" in out and "AUC of the energy E(x)_t" in out, out
    assert "electric.nce labels all" in out and "only samples that differ count here" in out, out

    assert type(_loaded_and_counted(electric_stage, "electric.nce")).__name__ == "ElectricObjective"


def test_electric_noise_is_drawn_as_training_draws_it(electric_stage: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's samples are the very ones ElectricObjective.forward draws from the same random
    state: k = ceil(0.15 n) positions (not ELECTRA's round), q over the real positions, its temperature."""
    import numpy as np

    from xfer.electra import objective as objectives

    agreement, detection = _tool("probe_agreement"), _tool("probe_detection")
    objective, _ = detection.load_objective(electric_stage, None, agreement.AGREEMENT_OBJECTIVES)
    table = detection.examples_table(electric_stage)
    batch = detection.random_batch(table, 16, np.random.default_rng(0), objective.tokens.pad)
    torch.manual_seed(5)
    originals, sampled = agreement.training_samples(objective, batch)

    drawn: list[torch.Tensor] = []

    def recorded(log_probs: torch.Tensor, temperature: float) -> torch.Tensor:
        drawn.append(real_sample(log_probs, temperature))
        return drawn[-1]

    real_sample = objectives.sample_softmax
    monkeypatch.setattr(objectives, "sample_softmax", recorded)
    torch.manual_seed(5)
    with torch.no_grad():
        objective(batch)
    assert len(drawn) == 1 and torch.equal(sampled, drawn[0])
    torch.manual_seed(5)  # the selection is forward's first draw
    selection = objective.select(batch, rounding="ceil")
    assert torch.equal(originals, batch["input_ids"].reshape(-1).index_select(0, selection.flat))


def _fake_stage(tmp_path: Path, name: str, objective: dict) -> Path:
    """A stage directory whose stage.json records `objective` (a refusal reads nothing else)."""
    stage = tmp_path / name
    stage.mkdir()
    config = {"kind": "electra.pretrain", "objective": objective}
    (stage / "stage.json").write_text(json.dumps({"signature": {"config": config}}))
    return stage


@pytest.mark.parametrize(
    ("objective", "found"),
    [
        ({"name": "electra.mlm", "mask_prob": 0.15, "mask": 0.8, "random": 0.1}, "objective electra.mlm cannot"),
        (
            {"name": "electra.rtd", "generator": {"kind": "unigram"}, "variant": "electra"},
            "objective electra.rtd with generator kind unigram (variant electra) cannot",
        ),
        (
            {"name": "electra.rtd", "generator": {"kind": "uniform"}, "variant": "electra"},
            "objective electra.rtd with generator kind uniform (variant electra) cannot",
        ),
        (
            {"name": "electra.rtd", "generator": {"kind": "mlm"}, "variant": "replace_mlm"},
            "objective electra.rtd with generator kind mlm (variant replace_mlm) cannot",
        ),
        (
            {"name": "electra.rtd", "generator": {"kind": "mlm"}, "variant": "all_tokens_mlm"},
            "objective electra.rtd with generator kind mlm (variant all_tokens_mlm) cannot",
        ),
    ],
)
def test_probe_agreement_refuses_what_it_cannot_probe(
    tmp_path: Path, capsys: pytest.CaptureFixture, objective: dict, found: str
) -> None:
    """An MLM variant's head is a masked LM, not a "replaced" logit: it passed the old check (an
    mlm generator) and crashed later; electra.mlm and context-free generators are refused too."""
    stage = _fake_stage(tmp_path, "fit", objective)
    assert _tool("probe_agreement").main([str(stage)]) == 2
    err = capsys.readouterr().err
    assert f"probe_agreement: {stage}: {found}" in err and SUPPORTED in err, err


def test_probe_detection_still_reads_only_rtd_with_an_mlm_generator(
    electric_stage: Path, capsys: pytest.CaptureFixture
) -> None:
    """Its own probes were checked on an mlm generator only: others are refused, saying so."""
    assert _tool("probe_detection").main([str(electric_stage), "--examples", "8"]) == 2
    err = capsys.readouterr().err
    assert f"{electric_stage}: objective electric.nce with generator kind two_tower cannot" in err, err
    assert "supported: electra.rtd with generator kind mlm (variant electra or electra_15)" in err, err


def test_the_probe_builds_the_encoder_as_the_stage_did(
    tmp_path: Path, toy: tuple[Path, Path], two_tower_stage: Path
) -> None:
    """An `encoder:` naming max_position_embeddings was a TypeError (the probe passed it twice), and
    an `init:` stage without `tokenizer:` read the current directory as its tokenizer and built the
    preset instead of the init checkpoint's encoder."""
    detection, agreement = _tool("probe_detection"), _tool("probe_agreement")
    objective = "{name: electra.rtd, generator: {kind: two_tower}}"
    sized = TINY[:-1] + ", max_position_embeddings: 48}"
    _, tokenizer = toy
    stage = _pretrain(
        tmp_path / "sized", toy, objective, f"tokenizer: {tokenizer}\n    model: tiny\n    encoder: {sized}"
    )
    loaded, _ = detection.load_objective(stage, None, agreement.AGREEMENT_OBJECTIVES)
    assert loaded.discriminator.config.max_position_embeddings == 48
    _loaded_as_saved(loaded, stage)

    init = two_tower_stage / "outputs" / "discriminator"
    stage = _pretrain(tmp_path / "init", toy, objective, f"init: {init}")
    loaded, tokenizer_loaded = detection.load_objective(stage, None, agreement.AGREEMENT_OBJECTIVES)
    assert loaded.discriminator.config.hidden_size == 64  # the init checkpoint's (TINY), not the tiny preset's 128
    assert tokenizer_loaded.vocab_size == loaded.discriminator.config.vocab_size
    _loaded_as_saved(loaded, stage)

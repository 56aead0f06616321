"""What `electra.pretrain`'s Hugging Face export records for scoring and fine-tuning: the trained
length and the objective's settings, as the xfer layout's meta does.

The HF export kept the position embeddings (512) but not `max_length` nor the objective config, so
ELECTRA-TT scoring of an HF discriminator assumed mask_prob 0.15 and temperature 1 whatever the run
used (other PLLs than the same weights in the xfer layout, silently for the temperature), texts
were read in windows of 512 untrained positions, and fine-tuning from the export at a length past
the pre-training's gave no warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core.errors import CheckpointError
from xfer.electra import scoring
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.initnotes import MAX_LENGTH_KEY, pretraining_length, untrained_positions_message

from .electra_recipes import pretrain_recipe

OBJECTIVE = "{name: electra.rtd, mask_prob: 0.25, generator: {kind: two_tower, temperature: 2.0}}"
SENTENCES = ["the dog sees a cat .", "a cat runs", "the cats run to the dog ."]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny ELECTRA-TT pre-training (max_length 32, non-default mask_prob and temperature)."""
    root = tmp_path_factory.mktemp("tt")
    recipe = pretrain_recipe(300, OBJECTIVE, "{steps: 2, batch_size: 8, warmup_steps: 0}")
    run_recipe_file(write_recipe(root, recipe), root / "run", make_host(autoload=True))
    return root / "run" / "fit" / "outputs"


def _plls(checkpoint: Path, generator: Path) -> tuple[list[float], scoring.LoadedScorer]:
    loaded = scoring.load_scorer(checkpoint, generator, method="electra-tt")
    lines = [scoring.Line(text, "<test>", number) for number, text in enumerate(SENTENCES, start=1)]
    return [score.pll for score in scoring.score_lines(loaded, lines)], loaded


def test_hf_export_scores_as_the_xfer_layout(outputs: Path) -> None:
    """Same weights, same PLLs: the export carries mask_prob 0.25, temperature 2 and max_length 32."""
    config = json.loads((outputs / "discriminator" / "hf" / "config.json").read_text())
    assert config[MAX_LENGTH_KEY] == 32
    assert config["xfer_objective_config"]["mask_prob"] == 0.25
    assert config["xfer_objective_config"]["generator"]["temperature"] == 2.0
    xfer_plls, xfer_loaded = _plls(outputs / "discriminator", outputs / "generator")
    hf_plls, hf_loaded = _plls(outputs / "discriminator" / "hf", outputs / "generator")
    assert hf_plls == pytest.approx(xfer_plls, abs=1e-4)
    assert hf_loaded.max_length == xfer_loaded.max_length == 32
    assert not any(
        "mask_prob: 0.15" in n or "temperature: 1.0" in n or "position embeddings" in n for n in hf_loaded.notes
    ), hf_loaded.notes


def test_fine_tuning_from_the_export_knows_the_trained_length(outputs: Path) -> None:
    hf = outputs / "discriminator" / "hf"
    assert pretraining_length(hf) == 32
    message = untrained_positions_message(hf, 64)
    assert message is not None and "32 tokens per example" in message


def test_a_damaged_recorded_length_is_refused(outputs: Path, tmp_path: Path) -> None:
    """A hand-edited or damaged `xfer_max_length` names config.json instead of windowing nonsense."""
    import shutil

    hf = shutil.copytree(outputs / "discriminator" / "hf", tmp_path / "hf")
    config = json.loads((hf / "config.json").read_text())
    for bad in (0, "32", True):
        config[MAX_LENGTH_KEY] = bad
        (hf / "config.json").write_text(json.dumps(config))
        with pytest.raises(CheckpointError, match=rf"config\.json: {MAX_LENGTH_KEY} {bad!r}"):
            scoring.open_checkpoint(hf)


def test_an_export_without_the_keys_falls_back_with_its_notes(outputs: Path, tmp_path: Path) -> None:
    """Exports written before the keys existed score as before: mask_prob 0.15 and temperature 1,
    each said in a note (the temperature was assumed silently; the length comes from the
    xfer-layout generator's record)."""
    import shutil

    hf = shutil.copytree(outputs / "discriminator" / "hf", tmp_path / "old")
    config = json.loads((hf / "config.json").read_text())
    del config[MAX_LENGTH_KEY], config["xfer_objective_config"]
    (hf / "config.json").write_text(json.dumps(config))
    _, loaded = _plls(hf, outputs / "generator")
    assert any("mask_prob: 0.15" in n for n in loaded.notes)
    assert any("temperature: 1.0 (the checkpoint does not record" in n for n in loaded.notes)
    assert loaded.max_length == 32
    assert pretraining_length(hf) is None

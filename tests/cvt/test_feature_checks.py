"""Transformer features from a pre-trained checkpoint (an ELECTRA discriminator): what
`features.init`, `features.tokenizer`, `features.layer`, `features.max_length` and the mode must
agree on, checked at validation (against the pre-training stage's config), in the pre-flight
(folders that exist) and by the stage (folders earlier stages write)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from xfer.core.errors import CheckpointError, DataError, RecipeError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import preflight
from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.encoder import Encoder, EncoderConfig
from xfer.transformer.modelio import save_model_dir
from xfer.transformer.tokenization import WordPieceTokenizer

PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "big", "house", "a", "sees", "##s", "."]
CHUNK = "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}"


def save_checkpoint(folder: Path, pieces: list[str] = PIECES, **meta: object) -> Path:
    """A tiny 2-layer xfer model dir with its tokenizer; `meta` as an `electra.pretrain` output records it."""
    torch.manual_seed(0)
    config = EncoderConfig(
        vocab_size=len(pieces), embedding_size=16, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
        max_position_embeddings=64,
    )  # fmt: skip
    save_model_dir(folder, {"encoder": Encoder(config)}, dict(meta))
    WordPieceTokenizer.from_vocab({p: i for i, p in enumerate(pieces)}).save(folder)
    return folder


def features_recipe(directory: Path, features: str, mode: str = "supervised") -> Path:
    write_tiny_data(directory)
    return write_recipe(directory, tiny_cvt_recipe(CHUNK, steps=2, mode=mode, extra=f"    features: {features}"))


def test_a_features_tokenizer_of_another_vocabulary_is_refused(tmp_path: Path) -> None:
    """Same size, two ids swapped: was accepted, and every word piece read another piece's embedding."""
    save_checkpoint(tmp_path / "electra")
    swapped = [*PIECES[:5], PIECES[6], PIECES[5], *PIECES[7:]]
    WordPieceTokenizer.from_vocab({p: i for i, p in enumerate(swapped)}).save(tmp_path / "other")
    recipe = features_recipe(tmp_path, "{init: electra, tokenizer: other, max_length: 12}")
    with pytest.raises(DataError, match="trained with another vocabulary") as caught:
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True), preflight=False)
    assert caught.value.path.endswith("vocab.txt") and caught.value.line == 6
    host = make_host(autoload=True)
    assert any("another vocabulary" in p for p in preflight(load_recipe(recipe, host=host), host))


def test_preflight_checks_the_features_folder(tmp_path: Path) -> None:
    """A folder that is no checkpoint or a damaged one, a layer it lacks, more positions than it has: before any stage trains."""
    (tmp_path / "empty").mkdir()
    save_checkpoint(tmp_path / "electra")
    host = make_host(autoload=True)
    empty = features_recipe(tmp_path, "{init: empty, max_length: 12}")
    (problem,) = preflight(load_recipe(empty, host=host), host)
    assert "neither an xfer model directory" in problem
    meta = save_checkpoint(tmp_path / "damaged") / "xfer_model.json"
    meta.write_bytes(meta.read_bytes()[:100])  # cut short: was found only when the stage read it
    (problem,) = preflight(load_recipe(features_recipe(tmp_path, "{init: damaged, max_length: 12}"), host=host), host)
    assert f"{meta} does not describe an encoder" in problem
    wrong = features_recipe(tmp_path, "{init: electra, layer: 5, max_length: 100}")
    problems = preflight(load_recipe(wrong, host=host), host)
    assert any("features.layer 5: the checkpoint has layers 0 (embeddings) to 2" in p for p in problems)
    assert any("covers 64 positions but features.max_length is 100" in p for p in problems)


def test_word_dropout_with_features_is_a_recipe_error(tmp_path: Path) -> None:
    """Was a UserError from the stage, after the stages before it (an ELECTRA pre-training) had trained."""
    save_checkpoint(tmp_path / "electra")
    recipe = features_recipe(tmp_path, "{init: electra, max_length: 12}", mode="word_dropout")
    with pytest.raises(RecipeError, match="word_dropout hides words from the input"):
        load_recipe(recipe, host=make_host(autoload=True))


def test_features_are_checked_against_the_pre_training_stage(tmp_path: Path) -> None:
    """A layer the upstream Transformer does not have, or more positions than it has: recipe errors
    at the key, before it trains."""
    pytest.importorskip("xfer.electra")
    write_tiny_data(tmp_path)
    upstream = """
  corpus: {kind: toy.corpus, sentences: 50}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 200}
  pretrain:
    kind: electra.pretrain
    corpus: {files: corpus.text}
    tokenizer: vocab.tokenizer
    model: tiny
    encoder: {max_position_embeddings: 32}
    max_length: 32
    train: {steps: 2, batch_size: 2, warmup_steps: 1}"""
    for features, message in (
        ("{init: pretrain.discriminator, layer: 3, max_length: 32}", "trains a 2-layer Transformer"),
        ("{init: pretrain.discriminator, max_length: 64}", "64 is more than the 32 positions"),
    ):
        text = tiny_cvt_recipe(CHUNK, steps=2, extra=f"    features: {features}").replace(
            "stages:", "stages:" + upstream
        )
        with pytest.raises(RecipeError, match=message):
            load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))


def test_a_generator_and_untrained_positions_are_said(tmp_path: Path) -> None:
    """Features from the ELECTRA generator, or past the length the checkpoint was pre-trained on, go
    on as asked but not silently (stderr and report)."""
    folder = tmp_path / "pretrain" / "generator"
    save_checkpoint(folder, role="generator", objective="electra.rtd", max_length=8)
    recipe = features_recipe(tmp_path, "{init: pretrain/generator, max_length: 12}")
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    report = (tmp_path / "run" / "fit" / "report.md").read_text(encoding="utf-8")
    assert f"features.init: {folder} is the generator of an electra.rtd pre-training" in report
    assert f"features.max_length 12 is more than the 8 tokens per example {folder} was pre-trained on" in report


def test_a_features_checkpoint_missing_encoder_tensors_is_refused_before_training(tmp_path: Path) -> None:
    """An xfer model dir whose weights lack an encoder tensor (a hand-pruned or half-converted file) passed
    the pre-flight: it was found only when the CVT stage loaded it, after the stages before it had run."""
    from safetensors.torch import load_file, save_file

    folder = save_checkpoint(tmp_path / "electra")
    weights = folder / "model.safetensors"
    tensors = load_file(weights)
    dropped = next(name for name in sorted(tensors) if "layers.1." in name or "layer.1." in name)
    del tensors[dropped]
    save_file(tensors, weights)
    recipe = features_recipe(tmp_path, "{init: electra, max_length: 12}")
    host = make_host(autoload=True)
    (problem,) = preflight(load_recipe(recipe, host=host), host)
    assert "missing" in problem and str(weights.name) in problem
    with pytest.raises(CheckpointError, match="missing tensors of module 'encoder'"):
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True), preflight=False)

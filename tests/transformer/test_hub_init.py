"""`init: google/electra-small-discriminator`: a Hub id resolves to its snapshot in the local
Hugging Face cache (never the network); an id that is not cached is an error saying how to fetch
it. Before, a Hub id was "path not found", and users had to dig the snapshot folder out of the
cache by hand (models--owner--name/snapshots/<commit>/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from xfer.core import cli
from xfer.core.plugins import set_default_host
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.encoder import Encoder
from xfer.transformer.hf import export_hf
from xfer.transformer.presets import preset
from xfer.transformer.tokenization import WordPieceTokenizer

REPO = "someone/electra-toy-discriminator"


@pytest.fixture(autouse=True)
def host():
    set_default_host(make_host(autoload=True, allow=["transformer"]))
    yield
    set_default_host(None)


def _cache_with_checkpoint(root: Path) -> Path:
    """A Hugging Face cache holding REPO's `main` revision (the layout huggingface_hub writes)."""
    corpus = root / "c.txt"
    corpus.write_text("the cat sat on the mat . a dog runs .\n" * 20)
    tokenizer = WordPieceTokenizer.train([corpus], 80, min_frequency=1)
    repo = root / "hub" / f"models--{REPO.replace('/', '--')}"
    snapshot = repo / "snapshots" / "0123abcd"
    torch.manual_seed(0)
    encoder = Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, max_position_embeddings=64))
    tokenizer.save_hf(snapshot, 64)
    export_hf(snapshot, encoder, vocab_file=snapshot / "vocab.txt")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    return snapshot


def _recipe(tmp_path: Path, init: str) -> Path:
    return write_recipe(
        tmp_path,
        f"""
stages:
  tune:
    kind: transformer.finetune
    init: {init}
    max_length: 32
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {{steps: 1, batch_size: 8}}
""",
    )


def test_a_hub_id_in_init_is_read_from_the_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = _cache_with_checkpoint(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = tmp_path / "run"
    run_recipe_file(_recipe(tmp_path, REPO), run, make_host(autoload=True, allow=["transformer"]))
    resolved = (run / "recipe.resolved.yaml").read_text()
    assert str(snapshot) in resolved, "the run records the snapshot folder it read"
    assert json.loads((run / "tune/stage.json").read_text())["status"] == "completed"


def test_a_hub_id_not_in_the_cache_says_how_to_fetch_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    assert cli.main(["validate", str(_recipe(tmp_path, "google/electra-small-discriminator"))]) == 2
    err = capsys.readouterr().err
    assert "stages.tune.init: path not found" in err
    assert f"not in the local cache ({tmp_path / 'empty-cache'}): xfer never downloads models" in err
    assert "hf download google/electra-small-discriminator" in err
    # a relative path that does not exist is not taken for a Hub id
    assert cli.main(["validate", str(_recipe(tmp_path, "./models/disc"))]) == 2
    assert "hf download" not in capsys.readouterr().err

"""xfer model directories: round trip, tied tensors, atomic replacement, format detection, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from xfer.core.errors import CheckpointError
from xfer.transformer.encoder import Encoder
from xfer.transformer.heads import SequenceHead
from xfer.transformer.modelio import detect_format, load_model_dir, save_model_dir
from xfer.transformer.presets import generator_config, preset


def tiny_encoder(seed: int = 0) -> Encoder:
    torch.manual_seed(seed)
    return Encoder(preset("tiny", vocab_size=50, max_position_embeddings=16)).eval()


def test_round_trip(tmp_path: Path) -> None:
    encoder, head = tiny_encoder(), SequenceHead(128, 3, pooler="gelu").eval()
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n")
    out = save_model_dir(
        tmp_path / "model",
        {"encoder": encoder, "head": head},
        {"task": {"name": "glue/mnli", "labels": ["a", "b", "c"]}},
        files=[vocab],
    )
    assert detect_format(out) == "xfer"
    assert (out / "vocab.txt").read_text() == "[PAD]\n"
    loaded = load_model_dir(out)
    assert loaded.meta == {"task": {"name": "glue/mnli", "labels": ["a", "b", "c"]}}
    assert loaded.encoder_config() == encoder.config
    assert loaded.modules["head"] == {"type": "head", "kind": "sequence", "config": head.config()}
    enc2, head2 = loaded.build("encoder").eval(), loaded.build("head").eval()
    ids = torch.randint(1, 50, (2, 7))
    with torch.no_grad():
        assert torch.equal(head(encoder(ids).last_hidden_state), head2(enc2(ids).last_hidden_state))
    with pytest.raises(CheckpointError, match="no module 'generator'"):
        loaded.build("generator")


def test_tied_embeddings_stored_once(tmp_path: Path) -> None:
    disc = tiny_encoder()
    gen = Encoder(generator_config(disc.config, 0.5), embeddings=disc.embeddings)
    save_model_dir(tmp_path / "m", {"discriminator": disc, "generator": gen})
    stored = load_file(tmp_path / "m" / "model.safetensors")
    assert "discriminator.embeddings.word.weight" in stored and "generator.embeddings.word.weight" not in stored
    loaded = load_model_dir(tmp_path / "m")
    assert torch.equal(loaded.state_dicts["generator"]["embeddings.word.weight"], disc.embeddings.word.weight)
    assert torch.equal(loaded.state_dicts["generator"]["embeddings_project.weight"], gen.embeddings_project.weight)
    gen2 = loaded.build("generator")
    assert torch.equal(gen2.embeddings.norm.weight, disc.embeddings.norm.weight)


def test_overwrite_is_atomic(tmp_path: Path) -> None:
    target = tmp_path / "model"
    save_model_dir(target, {"encoder": tiny_encoder(0)}, {"version": 1})
    with pytest.raises(TypeError):  # meta that is not JSON: nothing is written, the old model survives
        save_model_dir(target, {"encoder": tiny_encoder(1)}, {"version": object()})
    assert load_model_dir(target).meta == {"version": 1}
    save_model_dir(target, {"encoder": tiny_encoder(1)}, {"version": 2})
    loaded = load_model_dir(target)
    assert loaded.meta == {"version": 2}
    assert torch.equal(loaded.state_dicts["encoder"]["layers.0.qkv.weight"], tiny_encoder(1).layers[0].qkv.weight)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temporary directories left
    with pytest.raises(ValueError, match="reserved"):
        save_model_dir(target, {"encoder": tiny_encoder()}, {"modules": 1})


def test_detect_format_and_errors(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        detect_format(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="neither"):
        detect_format(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    assert detect_format(tmp_path) == "hf"
    with pytest.raises(CheckpointError, match="not an xfer model directory"):
        load_model_dir(tmp_path)
    model = save_model_dir(tmp_path / "m", {"encoder": tiny_encoder()})
    meta = json.loads((model / "xfer_model.json").read_text())
    (model / "xfer_model.json").write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(CheckpointError, match="format_version 99"):
        load_model_dir(model)
    (model / "xfer_model.json").write_text(json.dumps(meta))
    (model / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"missing model\.safetensors"):
        load_model_dir(model)


def test_head_of_unknown_kind_or_bad_config_is_a_checkpoint_error(tmp_path: Path) -> None:
    model = save_model_dir(tmp_path / "m", {"head": SequenceHead(8, 2)})
    meta = json.loads((model / "xfer_model.json").read_text())
    meta["modules"]["head"]["kind"] = "nope.head"
    (model / "xfer_model.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"module 'head': unknown head kind 'nope.head'"):
        load_model_dir(model).build("head")
    meta["modules"]["head"] |= {"kind": "sequence", "config": {"hidden": 8, "num_outputs": 2, "pooler": "max"}}
    (model / "xfer_model.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=r"module 'head'.*pooler"):
        load_model_dir(model).build("head")


def test_an_electra_config_without_embedding_size_gets_transformers_default(tmp_path: Path) -> None:
    """transformers' ElectraConfig defaults `embedding_size` to 128; xfer took hidden_size, so a
    config.json without the key loaded in transformers but was refused here with a shape error
    naming a width config.json does not give."""
    from xfer.transformer.hf import export_hf, load_hf

    config = preset("tiny", vocab_size=60, hidden_size=64, embedding_size=128, num_heads=2, intermediate_size=96)
    torch.manual_seed(0)
    export_hf(tmp_path, Encoder(config))
    hf_config = json.loads((tmp_path / "config.json").read_text())
    del hf_config["embedding_size"]
    (tmp_path / "config.json").write_text(json.dumps(hf_config))
    loaded, _, _ = load_hf(tmp_path)
    assert (loaded.embedding_size, loaded.hidden_size) == (128, 64)


def test_a_random_init_encoder_takes_the_tokenizers_size_and_padding_id(tmp_path: Path) -> None:
    """Random init fits the tokenizer: vocabulary size and [PAD] id (the HF export's config named
    token 0 as padding for a vocabulary whose [PAD] is elsewhere); `encoder:` settings win."""
    from xfer.transformer.modelio import fitted_to_tokenizer
    from xfer.transformer.tokenization import WordPieceTokenizer

    tokens = ["[UNK]", "[CLS]", "[PAD]", "[SEP]", "[MASK]", "a", "b", "c"]
    (tmp_path / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    tokenizer = WordPieceTokenizer.from_dir(tmp_path)
    assert tokenizer.pad_id == 2
    config = preset("tiny")
    fitted = fitted_to_tokenizer(config, tokenizer, {})
    assert (fitted.vocab_size, fitted.pad_token_id) == (8, 2)
    given = fitted_to_tokenizer(config, tokenizer, {"vocab_size": 100, "pad_token_id": 0})
    assert given == config, "values the stage's `encoder:` set (applied before) are left alone"

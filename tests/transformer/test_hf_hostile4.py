"""Hostile cases for HF checkpoint import, part 4: a truncated `pytorch_model.bin`, errors that name
the damaged weights file (single file, shard index, shard), decoder checkpoints (causal attention,
cross-attention) and per-layer tensors the xfer encoder has no place for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from xfer.core.errors import CheckpointError
from xfer.transformer.encoder import Encoder
from xfer.transformer.hf import export_hf, load_hf
from xfer.transformer.modelio import read_encoder
from xfer.transformer.presets import preset


def tiny_encoder(seed: int = 0, **overrides: Any) -> Encoder:
    torch.manual_seed(seed)
    return Encoder(preset("tiny", vocab_size=50, max_position_embeddings=16, **overrides)).eval()


def _exported(folder: Path) -> dict[str, torch.Tensor]:
    export_hf(folder, tiny_encoder())
    return load_file(folder / "model.safetensors")


def test_a_truncated_pytorch_model_bin_is_a_checkpoint_error_naming_it(tmp_path: Path) -> None:
    """Cut within its first 64 KiB (a download that stopped early), torch's zip reader seeks before
    the start of the file looking for the zip directory: a bare `OSError: [Errno 22] Invalid
    argument` came out of `load_hf`, naming no file."""
    tensors = _exported(tmp_path / "src")
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_bytes((tmp_path / "src" / "config.json").read_bytes())
    weights = folder / "pytorch_model.bin"
    torch.save(tensors, weights)
    data = weights.read_bytes()
    for cut in (5_000, 30_000, 60_000, len(data) // 2):
        weights.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match=r"pytorch_model\.bin"):
            load_hf(folder)
        with pytest.raises(CheckpointError, match=r"pytorch_model\.bin"):
            read_encoder(folder)
    weights.write_bytes(data)  # the whole file still loads
    _, state, _ = load_hf(folder)
    assert torch.equal(state["embeddings.word.weight"], tiny_encoder().embeddings.word.weight)


def test_a_damaged_model_safetensors_is_named_not_only_its_folder(tmp_path: Path) -> None:
    _exported(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-64])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: cannot read safetensors weights \(truncated"):
        load_hf(tmp_path)


def _sharded(folder: Path) -> list[str]:
    tensors = _exported(folder)
    (folder / "model.safetensors").unlink()
    names = sorted(tensors)
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    halves = [names[: len(names) // 2], names[len(names) // 2 :]]
    weight_map = {}
    for shard, half in zip(shards, halves, strict=True):
        save_file({n: tensors[n] for n in half}, folder / shard)
        weight_map |= dict.fromkeys(half, shard)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return shards


def test_a_damaged_shard_is_named_in_the_error(tmp_path: Path) -> None:
    """The error said `<folder>: cannot read safetensors weights`: which of the shards (dozens, for a
    large model) to fetch again was left to find."""
    shards = _sharded(tmp_path)
    load_hf(tmp_path)  # the intact shards load
    damaged = tmp_path / shards[1]
    damaged.write_bytes(damaged.read_bytes()[:-64])
    with pytest.raises(CheckpointError) as error:
        load_hf(tmp_path)
    assert str(error.value).startswith(f"{damaged}: cannot read safetensors weights")


def test_a_shard_index_without_a_weight_map_is_named_and_said_so(tmp_path: Path) -> None:
    """It was `<folder>: cannot read safetensors weights: 'weight_map'` (a KeyError's text)."""
    _sharded(tmp_path)
    index = tmp_path / "model.safetensors.index.json"
    for text in ('{"metadata": {}}', "[1, 2]"):
        index.write_text(text)
        with pytest.raises(CheckpointError) as error:
            load_hf(tmp_path)
        assert str(error.value).startswith(f"{index}: not a shard index")
    index.write_text("{not json")
    with pytest.raises(CheckpointError, match=r"index\.json: cannot read the shard index"):
        load_hf(tmp_path)


@pytest.mark.parametrize("key", ["is_decoder", "add_cross_attention"])
def test_a_decoder_checkpoint_is_refused_naming_config_json_and_the_key(tmp_path: Path, key: str) -> None:
    """A BertLMHeadModel (`is_decoder: true`) attends causally in transformers; its weights loaded
    silently into xfer's bidirectional encoder and computed another function."""
    _exported(tmp_path)
    config_path = tmp_path / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, key: True}))
    with pytest.raises(CheckpointError) as error:
        load_hf(tmp_path)
    assert str(error.value).startswith(f"{config_path}: {key} is True: a decoder checkpoint")
    config_path.write_text(json.dumps({**config, key: False}))  # said explicitly by encoder checkpoints
    load_hf(tmp_path)


def test_an_extra_tensor_inside_a_layer_is_not_called_a_layer_beyond_the_count(tmp_path: Path) -> None:
    """A cross-attention block of layer 0 was reported as "tensors for layers beyond
    num_hidden_layers=2", which sent the user to the layer count."""
    tensors = _exported(tmp_path)
    extra = "encoder.layer.0.crossattention.self.query.weight"
    save_file({**tensors, extra: torch.zeros(4, 4)}, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError) as error:
        load_hf(tmp_path)
    message = str(error.value)
    assert extra in message and "beyond num_hidden_layers" not in message
    assert "is not part of a BERT/ELECTRA encoder layer" in message
    # a whole layer too many is still said as such
    layers = preset("tiny").num_layers
    beyond = f"encoder.layer.{layers}.output.dense.bias"
    save_file({**tensors, beyond: torch.zeros(4)}, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=rf"beyond num_hidden_layers={layers}: {beyond}"):
        load_hf(tmp_path)


def test_extra_tensors_of_a_bf16_checkpoint_are_exported_in_the_models_dtype(tmp_path: Path) -> None:
    """`HeadInfo.remaining` of a bf16 BERT (its pooler) went out as bf16 beside the fp32 encoder;
    transformers' default `dtype="auto"` takes the first floating tensor's dtype when config.json
    names none (`bert.pooler...` sorts first), so it loaded the whole model in bf16: other outputs."""
    encoder = tiny_encoder(embedding_size=preset("tiny").hidden_size)
    hidden = encoder.config.hidden_size
    torch.manual_seed(1)
    pooler = {"bert.pooler.dense.weight": torch.randn(hidden, hidden), "bert.pooler.dense.bias": torch.randn(hidden)}
    bf16 = {n: t.to(torch.bfloat16) for n, t in pooler.items()}
    export_hf(tmp_path, encoder, model_type="bert", extra_tensors={**bf16, "ids": torch.arange(3)})
    written = load_file(tmp_path / "model.safetensors")
    assert {t.dtype for n, t in written.items() if n != "ids"} == {torch.float32}
    assert written["ids"].dtype == torch.int64  # not floating: as given
    assert torch.equal(written["bert.pooler.dense.weight"], bf16["bert.pooler.dense.weight"].float())
    transformers = pytest.importorskip("transformers")
    del written["ids"]
    save_file(written, tmp_path / "model.safetensors")
    loaded = transformers.BertModel.from_pretrained(tmp_path).eval()
    assert loaded.dtype == torch.float32
    ids = torch.tensor([[2, 7, 9, 11, 3]])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        ours = encoder(ids, mask, torch.zeros_like(ids)).last_hidden_state
        theirs = loaded(input_ids=ids, attention_mask=mask).last_hidden_state
    assert (ours - theirs).abs().max() <= 1e-5


@pytest.mark.parametrize(
    "extra_config",
    [
        {"id2label": {"0": Path("positive")}},  # a value JSON cannot hold
        {"id2label": {0: "negative", "1": "positive"}},  # keys that cannot be sorted
    ],
)
def test_an_extra_config_that_is_not_json_is_refused_before_the_earlier_export_is_touched(
    tmp_path: Path, extra_config: dict[str, Any]
) -> None:
    """json.dumps failed only when config.json was written, after the earlier export's config.json
    was deleted and its weights replaced: the folder was left without config.json, no checkpoint."""
    export_hf(tmp_path, tiny_encoder(0))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ValueError, match=r"extra_config: config\.json would not be JSON"):
        export_hf(tmp_path, tiny_encoder(1), extra_config=extra_config)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    _, state, _ = load_hf(tmp_path)
    assert torch.equal(state["embeddings.word.weight"], tiny_encoder(0).embeddings.word.weight)


def test_a_sharded_pytorch_model_bin_is_named_not_called_no_weights(tmp_path: Path) -> None:
    """A folder of `pytorch_model-0000k-of-0000n.bin` shards was "no weights file": the user went
    looking for a download that was not missing."""
    tensors = _exported(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    shard = "pytorch_model-00001-of-00001.bin"
    torch.save(tensors, tmp_path / shard)
    index = tmp_path / "pytorch_model.bin.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": dict.fromkeys(tensors, shard)}))
    with pytest.raises(CheckpointError) as error:
        load_hf(tmp_path)
    message = str(error.value)
    assert message.startswith(f"{index}: sharded pytorch_model-*.bin weights are not read")
    assert "convert the checkpoint to safetensors" in message

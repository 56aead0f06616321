"""Hostile cases for HF checkpoint import and export, part 5: configs the xfer encoder may not
implement (activations, relative positions, LayerNorm epsilon, token types, the embedding
projection, other model types), weights in fp16/bf16, sharded or as a `.bin`, each loaded with
transformers' outputs or refused naming config.json's key; and the pre-flight, which refused none
of the refused ones before the stage loaded the checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from xfer.core.errors import CheckpointError
from xfer.testing import make_host
from xfer.transformer.encoder import Encoder, EncoderConfig
from xfer.transformer.finetune_config import checkpoint_problems
from xfer.transformer.hf import export_hf, load_hf
from xfer.transformer.modelio import encoder_weights_problem

transformers = pytest.importorskip("transformers", reason="HF fidelity tests need `transformers`")

ELECTRA = {
    "vocab_size": 60,
    "embedding_size": 16,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 48,
    "max_position_embeddings": 24,
}
BERT = {**{k: v for k, v in ELECTRA.items() if k != "embedding_size"}}
TOL = 1e-5


def hf_model(cls_name: str = "ElectraModel", **config: Any) -> Any:
    """A tiny transformers model with every weight randomised (HF zero-initialises biases and LayerNorms)."""
    torch.manual_seed(0)
    electra = cls_name.startswith("Electra")
    config_cls = transformers.ElectraConfig if electra else transformers.BertConfig
    model = getattr(transformers, cls_name)(config_cls(**{**(ELECTRA if electra else BERT), **config}))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def saved(folder: Path, cls_name: str = "ElectraModel", **config: Any) -> Path:
    hf_model(cls_name, **config).save_pretrained(folder)
    return folder


def inputs(type_vocab_size: int = 2) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lengths, length = torch.tensor([12, 5, 9]), 12
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    ids = torch.randint(1, 60, (3, length), generator=torch.Generator().manual_seed(1)) * mask
    types = (torch.arange(length)[None] >= lengths[:, None] // 2).long() * mask * (type_vocab_size > 1)
    return ids, mask, types


def max_diff_to_transformers(folder: Path, cls_name: str) -> float:
    """xfer's encoder output from `load_hf(folder)` against transformers' own load of the folder (fp32)."""
    config, state, _ = load_hf(folder, make_host(["xfer.transformer.plugin"], autoload=False))
    encoder = Encoder(config).eval()
    encoder.load_state_dict(state)
    reference = getattr(transformers, cls_name).from_pretrained(folder, dtype=torch.float32).eval()
    ids, mask, types = inputs(config.type_vocab_size)
    with torch.no_grad():
        ours = encoder(ids, mask, types).last_hidden_state
        theirs = reference(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
    return (ours - theirs)[mask.bool()].abs().max().item()


# ----------------------------------------------------------------------------------------------
# Import: what loads computes transformers' function.


@pytest.mark.parametrize(
    "cls_name, config",
    [
        ("ElectraModel", {"layer_norm_eps": 1e-5}),
        ("BertModel", {"layer_norm_eps": 1e-3}),
        ("ElectraModel", {"type_vocab_size": 1}),
        ("ElectraModel", {"embedding_size": 32}),  # = hidden_size: no embeddings_project
        ("BertModel", {}),
    ],
)
def test_supported_config_variants_load_with_transformers_outputs(
    tmp_path: Path, cls_name: str, config: dict[str, Any]
) -> None:
    saved(tmp_path, cls_name, **config)
    assert max_diff_to_transformers(tmp_path, cls_name) <= TOL


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["safetensors", "sharded", "bin"])
def test_half_precision_and_every_weight_layout_load_with_transformers_outputs(
    tmp_path: Path, dtype: torch.dtype, layout: str
) -> None:
    hf_model().to(dtype).save_pretrained(tmp_path, **({"max_shard_size": "20KB"} if layout == "sharded" else {}))
    if layout == "sharded":
        assert (tmp_path / "model.safetensors.index.json").is_file()
    if layout == "bin":  # weights-only .bin, as older checkpoints ship
        tensors = load_file(tmp_path / "model.safetensors")
        (tmp_path / "model.safetensors").unlink()
        torch.save(tensors, tmp_path / "pytorch_model.bin")
    assert max_diff_to_transformers(tmp_path, "ElectraModel") <= TOL


@pytest.mark.parametrize(
    "key, value",
    [
        ("hidden_act", "gelu_new"),
        ("hidden_act", "gelu_pytorch_tanh"),
        ("hidden_act", "relu"),
        ("hidden_act", "silu"),
        ("position_embedding_type", "relative_key"),
        ("position_embedding_type", "relative_key_query"),
        ("model_type", "roberta"),
    ],
)
def test_configs_the_encoder_does_not_compute_are_refused_naming_key_and_value(
    tmp_path: Path, key: str, value: str
) -> None:
    saved(tmp_path)
    document = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**document, key: value}))
    with pytest.raises(CheckpointError, match=rf"config\.json: unsupported {key} '{value}'"):
        load_hf(tmp_path)


# ----------------------------------------------------------------------------------------------
# Export: transformers loads what xfer exports and computes the same.


@pytest.mark.parametrize(
    "model_type, config",
    [
        ("electra", {"layer_norm_eps": 1e-5}),
        ("electra", {"type_vocab_size": 1}),
        ("electra", {"embedding_size": 32}),
        ("bert", {"embedding_size": 32, "layer_norm_eps": 1e-6, "type_vocab_size": 1}),
    ],
)
def test_exported_config_variants_compute_the_same_in_transformers(
    tmp_path: Path, model_type: str, config: dict[str, Any]
) -> None:
    torch.manual_seed(0)
    sizes = {"vocab_size": 60, "embedding_size": 16, "hidden_size": 32, "num_layers": 2, "num_heads": 4}
    encoder = Encoder(EncoderConfig(**{**sizes, "intermediate_size": 48, "max_position_embeddings": 24, **config}))
    encoder.eval()
    export_hf(tmp_path, encoder, model_type=model_type)
    cls_name = {"electra": "ElectraModel", "bert": "BertModel"}[model_type]
    reloaded = getattr(transformers, cls_name).from_pretrained(tmp_path).eval()
    ids, mask, types = inputs(encoder.config.type_vocab_size)
    with torch.no_grad():
        ours = encoder(ids, mask, types).last_hidden_state
        theirs = reloaded(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
    assert (ours - theirs)[mask.bool()].abs().max().item() <= TOL
    assert reloaded.config.layer_norm_eps == encoder.config.layer_norm_eps


# ----------------------------------------------------------------------------------------------
# The pre-flight: what the loader refuses is refused before any stage trains.


@pytest.mark.parametrize(
    "key, value",
    [
        ("hidden_act", "gelu_new"),
        ("position_embedding_type", "relative_key"),
        ("model_type", "roberta"),
        ("is_decoder", True),
    ],
)
def test_the_pre_flight_refuses_an_hf_init_whose_config_the_encoder_does_not_compute(
    tmp_path: Path, key: str, value: Any
) -> None:
    """`checkpoint_problems` (transformer.finetune's, electra.pretrain's and the BAM stages'
    pre-flight) checked the encoder of xfer model dirs only: an HF `init:` of a relative-position
    or `gelu_new` checkpoint passed `xfer validate --data` and was refused when its stage loaded it,
    after every earlier stage of the recipe had trained."""
    folder = saved(tmp_path / "hf")
    document = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**document, key: value}))
    with pytest.raises(CheckpointError) as refused:
        load_hf(folder)
    problems = [str(p) for p in checkpoint_problems(None, folder, {}, 12, random_init=False)]
    assert str(refused.value) in problems, problems
    assert f"{folder / 'config.json'}: " in str(refused.value) and key in str(refused.value)


@pytest.mark.parametrize("sharded", [False, True])
def test_the_pre_flight_refuses_an_hf_init_missing_encoder_tensors(tmp_path: Path, sharded: bool) -> None:
    folder = tmp_path / "hf"
    hf_model().save_pretrained(folder, **({"max_shard_size": "20KB"} if sharded else {}))
    name = "encoder.layer.1.output.dense.weight"
    index = folder / "model.safetensors.index.json"
    file = folder / (json.loads(index.read_text())["weight_map"][name] if sharded else "model.safetensors")
    tensors = load_file(file)
    del tensors[name]
    save_file(tensors, file, metadata={"format": "pt"})
    if sharded:  # the index no longer lists it either: a consistent, incomplete checkpoint
        document = json.loads(index.read_text())
        del document["weight_map"][name]
        index.write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match=r"missing encoder tensors.*layers\.1\.ffn_out\.weight") as refused:
        load_hf(folder)
    assert str(encoder_weights_problem(folder)) == str(refused.value)
    assert str(refused.value) in [str(p) for p in checkpoint_problems(None, folder, {}, 12, random_init=False)]


@pytest.mark.parametrize(
    "cls_name, save",
    [
        ("ElectraModel", {}),
        ("ElectraModel", {"max_shard_size": "20KB"}),
        ("ElectraForPreTraining", {}),
        ("BertForSequenceClassification", {}),
        ("BertForPreTraining", {}),
    ],
)
def test_the_pre_flight_passes_hf_folders_the_loader_loads(tmp_path: Path, cls_name: str, save: dict[str, Any]) -> None:
    hf_model(cls_name).save_pretrained(tmp_path, **save)
    load_hf(tmp_path)
    assert encoder_weights_problem(tmp_path) is None
    assert checkpoint_problems(None, tmp_path, {}, 12, random_init=False) == []


def test_the_pre_flight_leaves_a_bin_and_unreadable_files_to_the_checks_that_read_them(tmp_path: Path) -> None:
    """A `.bin` is not read by the pre-flight (reading it means loading it); a damaged config.json
    or weights file is named by `checkpoint_format_problem` / `weights_problem`, once."""
    folder = saved(tmp_path / "bin")
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save(tensors, folder / "pytorch_model.bin")
    assert encoder_weights_problem(folder) is None
    damaged = saved(tmp_path / "damaged")
    (damaged / "model.safetensors").write_bytes(b"\x00" * 5)
    assert encoder_weights_problem(damaged) is None
    problems = [str(p) for p in checkpoint_problems(None, damaged, {}, 12, random_init=False)]
    assert len(problems) == 1 and "cannot read safetensors weights" in problems[0], problems

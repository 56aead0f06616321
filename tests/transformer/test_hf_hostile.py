"""Hostile cases for HF export/import: exports over existing folders, interrupted exports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from xfer.core.errors import CheckpointError
from xfer.transformer import hf
from xfer.transformer.encoder import Encoder
from xfer.transformer.hf import export_hf, load_hf
from xfer.transformer.modelio import read_encoder, save_model_dir
from xfer.transformer.presets import preset


def tiny_encoder(seed: int = 0, **overrides: Any) -> Encoder:
    torch.manual_seed(seed)
    return Encoder(preset("tiny", vocab_size=50, max_position_embeddings=16, **overrides)).eval()


def test_interrupted_export_over_an_older_one_does_not_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed between weights and config.json: the folder must not load new weights under the old config."""
    folder = tmp_path / "hf"
    export_hf(folder, tiny_encoder(0))
    real = hf._atomic_write

    def crash_on_config(path: Path, write: Any) -> None:
        if path.name == "config.json":
            raise KeyboardInterrupt
        real(path, write)

    monkeypatch.setattr(hf, "_atomic_write", crash_on_config)
    with pytest.raises(KeyboardInterrupt):
        export_hf(folder, tiny_encoder(1, layer_norm_eps=1e-5))
    monkeypatch.undo()
    with pytest.raises(CheckpointError, match=r"config\.json"):
        load_hf(folder)


def test_export_into_an_xfer_model_dir_is_refused(tmp_path: Path) -> None:
    """xfer_model.json wins format detection: an HF export there would be silently ignored."""
    folder = tmp_path / "model"
    old = tiny_encoder(0)
    save_model_dir(folder, {"encoder": old})
    with pytest.raises(CheckpointError, match=r"xfer_model\.json"):
        export_hf(folder, tiny_encoder(1))
    _, state, _ = read_encoder(folder)
    assert torch.equal(state["embeddings.word.weight"], old.state_dict()["embeddings.word.weight"])


@pytest.mark.parametrize(
    "document",
    [
        [1],
        {"format_version": 1, "modules": [1]},
        {"format_version": 1, "modules": {"encoder": "e"}},
        {"format_version": 1, "modules": {}, "aliases": ["x"]},
    ],
)
def test_a_malformed_xfer_model_json_is_a_checkpoint_error(tmp_path: Path, document: Any) -> None:
    import json

    folder = tmp_path / "model"
    save_model_dir(folder, {"encoder": tiny_encoder(0)})
    (folder / "xfer_model.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match=r"xfer_model\.json"):
        read_encoder(folder)


def test_an_unexpected_embedding_projection_is_a_checkpoint_error(tmp_path: Path) -> None:
    """embedding_size == hidden_size but the file has embeddings_project: named error, not a KeyError."""
    from safetensors.torch import load_file, save_file

    encoder = tiny_encoder(0)
    config = encoder.config
    assert config.embedding_size == config.hidden_size
    export_hf(tmp_path, encoder)
    tensors = load_file(tmp_path / "model.safetensors")
    tensors["embeddings_project.weight"] = torch.zeros(config.hidden_size, config.embedding_size)
    tensors["embeddings_project.bias"] = torch.zeros(config.hidden_size)
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match="embeddings_project"):
        load_hf(tmp_path)


def test_a_tensor_both_with_and_without_prefix_is_a_checkpoint_error(tmp_path: Path) -> None:
    """`electra.X` and `X` in one file: refusing beats silently loading whichever came last."""
    from safetensors.torch import load_file, save_file

    export_hf(tmp_path, tiny_encoder(0))
    tensors = load_file(tmp_path / "model.safetensors")
    tensors |= {"electra." + k: torch.zeros_like(v) for k, v in tensors.items()}
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match="are both"):
        load_hf(tmp_path)


def test_an_empty_pytorch_model_bin_is_a_checkpoint_error(tmp_path: Path) -> None:
    export_hf(tmp_path, tiny_encoder(0))
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin"):
        load_hf(tmp_path)


def test_an_edited_vocab_size_in_xfer_model_json_is_a_checkpoint_error(tmp_path: Path) -> None:
    """read_encoder's callers load with a bare load_state_dict: the mismatch must be named here."""
    import json

    folder = tmp_path / "model"
    save_model_dir(folder, {"encoder": tiny_encoder(0)})
    document = json.loads((folder / "xfer_model.json").read_text())
    document["modules"]["encoder"]["config"]["vocab_size"] = 60
    (folder / "xfer_model.json").write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match=r"embeddings\.word\.weight"):
        read_encoder(folder)


def test_a_tensor_listed_in_the_shard_index_but_absent_is_a_checkpoint_error(tmp_path: Path) -> None:
    """A BertModel's pooler missing from its shard would otherwise vanish from `remaining` silently."""
    import json

    from safetensors.torch import load_file, save_file

    export_hf(tmp_path, tiny_encoder(0))

    tensors = load_file(tmp_path / "model.safetensors")
    (tmp_path / "model.safetensors").unlink()
    tensors["pooler.dense.bias"] = torch.zeros(tensors["embeddings.LayerNorm.bias"].shape)
    first, *rest = sorted(tensors)
    save_file({first: tensors[first]}, tmp_path / "s1.safetensors")
    save_file({n: tensors[n] for n in rest if n != "pooler.dense.bias"}, tmp_path / "s2.safetensors")
    weight_map = {first: "s1.safetensors"} | {n: "s2.safetensors" for n in rest}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(CheckpointError, match=r"pooler\.dense\.bias"):
        load_hf(tmp_path)
    save_file({n: tensors[n] for n in rest}, tmp_path / "s2.safetensors")
    assert "pooler.dense.bias" in load_hf(tmp_path)[2].remaining

"""Hostile cases for HF export/import and xfer model directories, part 2: exports over earlier
exports, extra_config against the weights, shard indexes that escape their folder or overlap,
weights of undescribed modules, and Hub snapshots whose blobs are missing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from xfer.core.errors import CheckpointError
from xfer.transformer.encoder import Encoder
from xfer.transformer.hf import export_hf, load_hf, read_hf_tensors
from xfer.transformer.modelio import detect_format, load_model_dir, read_encoder, save_model_dir
from xfer.transformer.presets import preset


def tiny_encoder(seed: int = 0, **overrides: Any) -> Encoder:
    torch.manual_seed(seed)
    return Encoder(preset("tiny", vocab_size=50, max_position_embeddings=16, **overrides)).eval()


WORD = "embeddings.word_embeddings.weight"


def test_export_over_an_earlier_export_removes_its_other_weight_files(tmp_path: Path) -> None:
    """A stale pytorch_model.bin / shard set next to the new model.safetensors still holds the old
    weights: transformers with use_safetensors=False (or xfer's reader once model.safetensors goes)
    would load them. Files that are no weights of the checkpoint stay."""
    old, new = tiny_encoder(0), tiny_encoder(1)
    export_hf(tmp_path, old)
    tensors = load_file(tmp_path / "model.safetensors")
    names = sorted(tensors)
    torch.save(tensors, tmp_path / "pytorch_model.bin")
    save_file({n: tensors[n] for n in names[:5]}, tmp_path / "model-00001-of-00002.safetensors")
    save_file({n: tensors[n] for n in names[5:]}, tmp_path / "model-00002-of-00002.safetensors")
    weight_map = {n: f"model-0000{1 + (i >= 5)}-of-00002.safetensors" for i, n in enumerate(names)}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    torch.save(tensors, tmp_path / "pytorch_model-00001-of-00001.bin")
    (tmp_path / "pytorch_model.bin.index.json").write_text("{}")
    user_files = {"notes.txt": b"mine", "training_args.bin": b"args", "data.index.json": b"{}"}
    for name, data in user_files.items():
        (tmp_path / name).write_bytes(data)

    export_hf(tmp_path, new)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["config.json", "model.safetensors", *user_files])
    for name, data in user_files.items():
        assert (tmp_path / name).read_bytes() == data
    # with model.safetensors gone, nothing is left that would load the old weights
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no weights file"):
        read_hf_tensors(tmp_path)


@pytest.mark.parametrize(
    "extra", [{"hidden_size": 64}, {"layer_norm_eps": 1e-5}, {"model_type": "bert"}, {"vocab_size": 60}]
)
def test_extra_config_cannot_contradict_the_weights(tmp_path: Path, extra: dict[str, Any]) -> None:
    """layer_norm_eps would load and silently compute another function; sizes would fail to load."""
    key = next(iter(extra))
    with pytest.raises(ValueError, match=rf"extra_config\[{key!r}\]"):
        export_hf(tmp_path / "hf", tiny_encoder(0), extra_config=extra)
    assert not (tmp_path / "hf").exists(), "refused before anything is written"


def test_extra_config_may_repeat_architecture_fields_and_set_others(tmp_path: Path) -> None:
    encoder = tiny_encoder(0)
    export_hf(tmp_path, encoder, extra_config={"hidden_size": encoder.config.hidden_size, "xfer_objective": "x"})
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["hidden_size"] == encoder.config.hidden_size and config["xfer_objective"] == "x"


def _sharded(folder: Path, weight_map: dict[str, str] | None = None) -> dict[str, torch.Tensor]:
    export_hf(folder, tiny_encoder(0))
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    if weight_map is not None:
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return tensors


@pytest.mark.parametrize("shard", ["../outside.safetensors", "ABSOLUTE", "sub/inner.safetensors", ".."])
def test_a_shard_outside_the_checkpoint_folder_is_refused(tmp_path: Path, shard: str) -> None:
    """The index is downloaded data: it must not make xfer open files outside the checkpoint."""
    folder = tmp_path / "ckpt"
    tensors = _sharded(folder)
    (folder / "sub").mkdir()
    for target in (tmp_path / "outside.safetensors", folder / "sub" / "inner.safetensors"):
        save_file(tensors, target)
    if shard == "ABSOLUTE":
        shard = str(tmp_path / "outside.safetensors")
    first = sorted(tensors)[0]
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": dict.fromkeys(tensors, shard)}))
    with pytest.raises(CheckpointError, match=rf"model\.safetensors\.index\.json: tensor {first!r}: shard") as e:
        load_hf(folder)
    assert "is not a file name in the checkpoint folder" in str(e.value)


def test_a_tensor_in_two_shards_is_refused(tmp_path: Path) -> None:
    """The later shard used to win silently (here: zeros over the real embeddings)."""
    tensors = _sharded(tmp_path)
    save_file(tensors, tmp_path / "a.safetensors")
    save_file({WORD: torch.zeros_like(tensors[WORD])}, tmp_path / "b.safetensors")
    weight_map = dict.fromkeys(tensors, "a.safetensors") | {WORD: "b.safetensors"}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(
        CheckpointError, match=rf"tensor {WORD!r} is in two shards, 'a.safetensors' and 'b.safetensors'"
    ):
        load_hf(tmp_path)


def test_a_weight_map_that_is_not_a_mapping_of_names_is_a_checkpoint_error(tmp_path: Path) -> None:
    _sharded(tmp_path, {"x": 3})  # type: ignore[dict-item]
    with pytest.raises(CheckpointError, match="'weight_map' must map tensor names to shard file names"):
        load_hf(tmp_path)


def test_tensors_of_a_module_xfer_model_json_does_not_list_are_refused(tmp_path: Path) -> None:
    """A model.safetensors from another save (here with a head) under an encoder-only description:
    read_encoder used to return that head's weights although no module describes them."""
    folder = tmp_path / "model"
    save_model_dir(folder, {"encoder": tiny_encoder(0)})
    tensors = load_file(folder / "model.safetensors")
    tensors["head.out.weight"] = torch.zeros(2, 128)
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"'head\.out\.weight' belongs to module 'head'.*does not list"):
        load_model_dir(folder)
    with pytest.raises(CheckpointError, match=r"xfer_model\.json"):
        read_encoder(folder)


def _snapshot_with_blobs(root: Path) -> tuple[Path, Path]:
    """An HF cache snapshot: every file a symlink into blobs/ (the huggingface_hub layout)."""
    snapshot, blobs = root / "snapshots" / "0123abcd", root / "blobs"
    export_hf(snapshot, tiny_encoder(0))
    blobs.mkdir()
    for i, f in enumerate(sorted(snapshot.iterdir())):
        f.rename(blobs / f"blob{i}")
        os.symlink(os.path.relpath(blobs / f"blob{i}", snapshot), f)
    return snapshot, blobs


def test_a_snapshot_with_a_missing_config_blob_says_incomplete_download(tmp_path: Path) -> None:
    snapshot, _ = _snapshot_with_blobs(tmp_path)
    load_hf(snapshot)  # complete: loads through the links
    os.unlink(os.path.realpath(snapshot / "config.json"))
    for read in (load_hf, detect_format, read_encoder):
        with pytest.raises(
            CheckpointError, match=r"incomplete download: dangling symlink config\.json -> \.\./\.\./blobs/"
        ):
            read(snapshot)


def test_a_snapshot_with_a_missing_weights_blob_says_incomplete_download(tmp_path: Path) -> None:
    snapshot, _ = _snapshot_with_blobs(tmp_path)
    os.unlink(os.path.realpath(snapshot / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"incomplete download: dangling symlink model\.safetensors"):
        load_hf(snapshot)


def test_a_snapshot_with_a_missing_shard_blob_says_incomplete_download(tmp_path: Path) -> None:
    tensors = _sharded(tmp_path / "c", {})
    save_file(tensors, tmp_path / "blob")
    os.symlink(tmp_path / "blob", tmp_path / "c" / "model-00001-of-00001.safetensors")
    weight_map = dict.fromkeys(tensors, "model-00001-of-00001.safetensors")
    (tmp_path / "c" / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    assert len(read_hf_tensors(tmp_path / "c")) == len(tensors)
    (tmp_path / "blob").unlink()
    with pytest.raises(CheckpointError, match=r"incomplete download: dangling symlink model-00001-of-00001"):
        load_hf(tmp_path / "c")


def test_the_pre_flight_names_an_incomplete_snapshot_and_a_shard_outside_the_folder(tmp_path: Path) -> None:
    """`xfer validate --data` and the pre-flight of `xfer run` (`checkpoint_format_problem`,
    `weights_problem`) passed a Hub snapshot whose blobs were gone (only the stage said so) and
    opened an index's `../x` shard to read its header."""
    from xfer.transformer.finetune_config import checkpoint_format_problem, weights_problem

    snapshot, _ = _snapshot_with_blobs(tmp_path / "hub")
    assert checkpoint_format_problem(snapshot, "init") is None and weights_problem(snapshot) is None
    os.unlink(os.path.realpath(snapshot / "model.safetensors"))
    assert "incomplete download: dangling symlink model.safetensors" in str(weights_problem(snapshot))
    os.unlink(os.path.realpath(snapshot / "config.json"))
    assert str(checkpoint_format_problem(snapshot, "init")).startswith(
        f"init: {snapshot}: incomplete download: dangling symlink config.json"
    )
    folder = tmp_path / "ckpt"
    tensors = _sharded(folder)
    save_file(tensors, tmp_path / "outside.safetensors")
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": dict.fromkeys(tensors, "../outside.safetensors")})
    )
    problem = weights_problem(folder)
    assert isinstance(problem, CheckpointError) and "shard '../outside.safetensors' is not a file name" in str(problem)

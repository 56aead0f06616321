"""Import and export HF `transformers` ELECTRA/BERT checkpoints without importing `transformers`.

A HF checkpoint directory holds `config.json` and `model.safetensors` (or a sharded
`model.safetensors.index.json`, or a legacy `pytorch_model.bin`). We read those files directly
so xfer runs without `transformers` installed, and we never unpickle: `.bin` files are read
with `torch.load(weights_only=True)`, which refuses anything but tensors and plain containers.

Name mapping (HF base-model names, optionally prefixed `electra.` / `bert.`):

    embeddings.word_embeddings           -> embeddings.word
    embeddings.position_embeddings       -> embeddings.position
    embeddings.token_type_embeddings     -> embeddings.token_type
    embeddings.LayerNorm                 -> embeddings.norm
    embeddings_project (ELECTRA)         -> embeddings_project
    encoder.layer.i.attention.self.{query,key,value} -> layers.i.qkv (concatenated in that order)
    encoder.layer.i.attention.output.dense/LayerNorm -> layers.i.attn_out / attn_norm
    encoder.layer.i.intermediate.dense   -> layers.i.ffn_in
    encoder.layer.i.output.dense/LayerNorm -> layers.i.ffn_out / ffn_norm

Heads come from the head registry (`xfer.transformer.registry`), each with its own HF map
(`hf` attribute, `xfer.transformer.hfmap`): on export the head's map gives the HF class and its
tensor names; on import the head whose map claims the checkpoint's `architectures[0]` is
rebuilt (built-in: sequence: `classifier.dense/out_proj` (ELECTRA) or `bert.pooler.dense` +
`classifier` (BERT); token: `classifier`; QA: `qa_outputs`; plugins add theirs, e.g.
ELECTRA's discriminator head for `ElectraForPreTraining`). Every other tensor (heads no plugin
claims, such as BERT MLM/NSP heads, a BertModel's pooler) is returned untouched, under its
original name, in `HeadInfo.remaining` for the caller to map.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from xfer.core.atomic import atomic_write_with
from xfer.core.errors import CheckpointError
from xfer.core.plugins import PluginHost
from xfer.transformer import registry
from xfer.transformer.encoder import Encoder, EncoderConfig

SUPPORTED_MODEL_TYPES = ("electra", "bert")
OBJECTIVE_KEY = "xfer_objective"
"""config.json key naming the xfer objective that trained the weights (e.g. "electra.rtd"): HF's
ElectraForPreTraining holds ELECTRA's replaced-token detector and Electric's energy head alike,
and only this says which one it is (PLL scoring needs to know). transformers ignores the key."""
OBJECTIVE_CONFIG_KEY = "xfer_objective_config"
"""config.json key: the pre-training objective's settings with defaults filled in (mask_prob, the
generator's kind and sampling temperature), which ELECTRA-TT scoring inverts. Without it, an HF
export was scored as if pre-trained with mask_prob 0.15 and temperature 1, whatever it used."""
SCORE_RANGE_KEY = "xfer_score_range"
"""config.json key: the `[low, high]` gold-score range (TaskInfo.extra's `score_range`) folded into a
regression head's output layer by `export_hf(score_range=...)`, so that HF outputs real scores (0-5
on STS-B) where xfer's head outputs them scaled to [0, 1]. `load_hf` takes the range back out."""

# HF writes these non-persistent buffers into some older checkpoints; they are `arange`/zeros
# constants, not weights, so they are dropped rather than returned in `remaining`.
_IGNORED = re.compile(r"^(electra\.|bert\.)?embeddings\.(position_ids|token_type_ids)$")

_LAYER = {
    "attention.output.dense": "attn_out",
    "attention.output.LayerNorm": "attn_norm",
    "intermediate.dense": "ffn_in",
    "output.dense": "ffn_out",
    "output.LayerNorm": "ffn_norm",
}
_EMBEDDINGS = {
    "embeddings.word_embeddings": "embeddings.word",
    "embeddings.position_embeddings": "embeddings.position",
    "embeddings.token_type_embeddings": "embeddings.token_type",
    "embeddings.LayerNorm": "embeddings.norm",
    "embeddings_project": "embeddings_project",
}


@dataclass
class HeadInfo:
    """What besides the encoder a HF checkpoint holds.

    kind: the registered head kind ("sequence" | "token" | "span_qa" | a plugin's head) or None
    (no registered head claims the architecture); config: keyword arguments for
    `heads.build_head(kind, config)`; state_dict: head weights in xfer names; remaining: every
    unmapped tensor under its original HF name; hf_config: the raw config.json (labels:
    `id2label`, `label2id`, `problem_type`).
    """

    architecture: str | None
    model_type: str
    kind: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    state_dict: dict[str, Tensor] = field(default_factory=dict)
    remaining: dict[str, Tensor] = field(default_factory=dict)
    hf_config: dict[str, Any] = field(default_factory=dict)

    def build(self, host: PluginHost | None = None) -> nn.Module | None:
        """The head module with its weights loaded, or None if there is no recognised head."""
        if self.kind is None:
            return None
        head = registry.build_head(self.kind, self.config, host)
        head.load_state_dict(self.state_dict)
        return head


# ----------------------------------------------------------------------------------------------
# Reading.


def dangling_symlinks(directory: Path) -> list[Path]:
    """Symlinks in `directory` whose target is gone. A Hugging Face cache snapshot links every file
    to a blob (`snapshots/<commit>/config.json -> ../../blobs/<sha256>`); a download cut short, a
    cache cleaned by hand or a snapshot folder copied without its blobs leaves links to nothing,
    which look like missing files to every `is_file()` check."""
    try:
        return sorted(p for p in directory.iterdir() if p.is_symlink() and not p.exists())
    except OSError:
        return []


def incomplete_download(directory: Path, wanted: tuple[str, ...] = ()) -> str | None:
    """The error text for a folder whose files (`wanted`, or any) are dangling symlinks, else None."""
    dangling = [p for p in dangling_symlinks(directory) if not wanted or p.name in wanted]
    if not dangling:
        return None
    shown = ", ".join(f"{p.name} -> {os.readlink(p)}" for p in dangling[:3])
    more = f" (+{len(dangling) - 3} more)" if len(dangling) > 3 else ""
    return (
        f"{directory}: incomplete download: dangling symlink {shown}{more} (the file it points to is missing: an "
        "interrupted or partly deleted Hugging Face download); fetch the checkpoint again"
    )


def not_a_folder(path: Path) -> str:
    """What to say about a checkpoint path that is no folder. A file inside one (`init:
    ckpt/model.safetensors`, `.../config.json`) was "does not exist", which sent the user
    looking for a file that is there: name the folder to give instead, as the tokenizer loader does."""
    if path.is_file():
        return f"{path}: is a file; give the folder that holds it ({path.parent})"
    return f"{path}: checkpoint directory does not exist"


def checkpoints_below(folder: Path) -> str:
    """A hint naming the checkpoints in `folder`'s sub-folders (two levels: a stage's folder holds
    `outputs/<name>`), for a folder that is no checkpoint itself; "" when there are none. A run's or
    a stage's folder given for the checkpoint in it was only "neither an xfer model directory nor a
    Hugging Face checkpoint", which did not say that the one meant was right there."""
    found: list[Path] = []
    try:
        for child in sorted(folder.iterdir()):
            if child.name.startswith(".") or not child.is_dir():
                continue
            for candidate in (child, *sorted(child.iterdir())):
                if candidate.name.startswith(".") or not candidate.is_dir():
                    continue
                if any((candidate / name).is_file() for name in ("xfer_model.json", "config.json")):
                    found.append(candidate)
    except OSError:
        return ""
    if not found:
        return ""
    shown = ", ".join(str(p) for p in found[:3]) + (f" (+{len(found) - 3} more)" if len(found) > 3 else "")
    return f"; it holds checkpoints in sub-folders: give one of them ({shown})"


def _read_config(directory: Path) -> dict[str, Any]:
    if not directory.is_dir():
        raise CheckpointError(not_a_folder(directory))
    path = directory / "config.json"
    if not path.is_file():
        raise CheckpointError(
            incomplete_download(directory, ("config.json",)) or f"{path}: missing (not a HF checkpoint directory)"
        )
    try:
        # JSON is UTF-8 whatever the locale; bytes that are not (a damaged file) are a ValueError too
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: cannot read JSON: {e}") from e
    if not isinstance(config, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return config


_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
NO_WEIGHTS = "no weights file (model.safetensors, model.safetensors.index.json or pytorch_model.bin)"


def read_hf_tensors(directory: str | Path) -> dict[str, Tensor]:
    """All tensors of a HF checkpoint: model.safetensors, sharded safetensors, or weights-only .bin."""
    from safetensors.torch import load_file

    directory = Path(directory)
    single, index, legacy = (directory / n for n in _WEIGHT_FILES)
    # each error names the file that does not read (not only the folder): in a folder of shards,
    # "cannot read safetensors weights" alone left the user to find which of them is damaged
    if single.is_file():
        try:
            return load_file(single)
        except Exception as e:  # corrupt header, truncated file, unreadable, ...
            raise CheckpointError(f"{single}: cannot read safetensors weights (truncated or damaged?): {e}") from e
    if index.is_file():
        try:
            document = json.loads(index.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{index}: cannot read the shard index: {e}") from e
        if not isinstance(document, dict) or "weight_map" not in document:
            raise CheckpointError(f"{index}: not a shard index (a JSON object with a 'weight_map' of tensor -> shard)")
        return _read_shards(directory, index, document["weight_map"])
    if legacy.is_file():
        return _load_bin(legacy)
    if (sharded_bin := sharded_bin_problem(directory)) is not None:
        raise CheckpointError(sharded_bin)
    # a shard a snapshot's index names can be a dangling link as well: any dangling link means the download is incomplete
    raise CheckpointError(incomplete_download(directory) or f"{directory}: {NO_WEIGHTS}")


def sharded_bin_problem(directory: Path) -> str | None:
    """The error text for a folder whose weights are sharded `pytorch_model-*.bin` files (with their
    `pytorch_model.bin.index.json`), which are not read, else None. Shared by the loader and the
    pre-flight (`finetune_config.weights_problem`): "no weights file" in a folder of weight files
    sent the user looking for a missing download."""
    index = directory / "pytorch_model.bin.index.json"
    if not index.is_file():
        return None
    return (
        f"{index}: sharded pytorch_model-*.bin weights are not read (only model.safetensors, its shards, "
        "or a single pytorch_model.bin): convert the checkpoint to safetensors in a trusted environment "
        "(transformers: `from_pretrained(...).save_pretrained(folder)`)"
    )


def check_weight_map(index: Path, weight_map: Any) -> None:
    """A shard index's `weight_map` maps tensor names to plain file names next to the index (a
    CheckpointError otherwise): the index is data from the download, and a shard named `../x` or
    `/x` would read a file outside the checkpoint."""
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
    ):
        raise CheckpointError(f"{index}: 'weight_map' must map tensor names to shard file names")
    for key, shard in weight_map.items():
        if shard in ("", ".", "..") or "/" in shard or "\\" in shard or Path(shard).is_absolute():
            raise CheckpointError(
                f"{index}: tensor {key!r}: shard {shard!r} is not a file name in the checkpoint folder "
                "(shards must sit next to their index; no paths)"
            )


def _read_shards(directory: Path, index: Path, weight_map: Any) -> dict[str, Tensor]:
    """The tensors of the shards `index` lists (names checked by `check_weight_map`). A tensor held
    by two shards is refused: the later shard would silently win."""
    from safetensors.torch import load_file

    check_weight_map(index, weight_map)
    tensors: dict[str, Tensor] = {}
    origin: dict[str, str] = {}
    for shard in sorted(set(weight_map.values())):
        try:
            loaded = load_file(directory / shard)
        except Exception as e:  # corrupt header, missing shard, ...
            hint = incomplete_download(directory, (shard,))
            raise CheckpointError(
                hint or f"{directory / shard}: cannot read safetensors weights (a shard {index.name} lists): {e}"
            ) from e
        for name, t in loaded.items():
            if name in origin:
                raise CheckpointError(
                    f"{index}: tensor {name!r} is in two shards, {origin[name]!r} and {shard!r}: "
                    "which copy to load is ambiguous"
                )
            origin[name] = shard
            tensors[name] = t
    # a tensor the index lists but no shard holds (a truncated or mixed-up download) would
    # otherwise vanish silently when it is not an encoder tensor (a pooler, a head's extra)
    absent = sorted(set(weight_map) - set(tensors))
    if absent:
        raise CheckpointError(
            f"{index}: tensor {absent[0]!r} is listed in weight_map but missing from its shard "
            f"{weight_map[absent[0]]!r}" + (f" (+{len(absent) - 1} more)" if len(absent) > 1 else "")
        )
    return tensors


def _load_bin(path: Path) -> dict[str, Tensor]:
    """Weights-only load: arbitrary pickled objects are refused, never executed."""
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except OSError as e:  # a zip cut short in its first 64 KiB (torch seeks before its start: EINVAL), unreadable
        raise CheckpointError(f"{path}: cannot read (truncated or damaged?): {e}") from e
    except (pickle.UnpicklingError, RuntimeError, EOFError, AttributeError, ValueError, TypeError) as e:
        raise CheckpointError(
            f"{path}: refused: not loadable as weights only (it contains pickled objects other than tensors, or is "
            f"corrupt); convert it to safetensors in a trusted environment. Details: "
            f"{(str(e).splitlines() or [type(e).__name__])[0]}"
        ) from e
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in data.items()):
        raise CheckpointError(f"{path}: expected a flat {{name: tensor}} state dict")
    return data


def _strip_prefix(
    tensors: dict[str, Tensor], model_type: str, source: str = "checkpoint"
) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Base-model tensors without the `electra.`/`bert.` prefix, and a map back to original names.

    A name present both with and without the prefix is an error: which copy to load is ambiguous."""
    prefix = model_type + "."
    out, original = {}, {}
    for name, t in tensors.items():
        if _IGNORED.match(name):
            continue
        bare = name[len(prefix) :] if name.startswith(prefix) else name
        # legacy TF-converted BERT names
        bare = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", bare))
        if bare in out:
            raise CheckpointError(f"{source}: tensors {original[bare]!r} and {name!r} are both {bare!r}")
        out[bare] = t
        original[bare] = name
    return out, original


def check_supported_variant(config: dict[str, Any], source: str = "config.json") -> None:
    """CheckpointError, naming config.json's key and value, for a HF config the xfer encoder does not
    compute (another model type, activation or position scheme, a decoder); the sizes are not read."""
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise CheckpointError(
            f"{source}: unsupported model_type {model_type!r} (supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    act = config.get("hidden_act", "gelu")
    if act != "gelu":
        raise CheckpointError(f"{source}: unsupported hidden_act {act!r} (the xfer encoder uses exact 'gelu')")
    pos = config.get("position_embedding_type", "absolute")
    if pos != "absolute":
        raise CheckpointError(f"{source}: unsupported position_embedding_type {pos!r} (only 'absolute')")
    for key in ("is_decoder", "add_cross_attention"):
        # a decoder (BertLMHeadModel, an encoder-decoder's half) attends causally, and with cross-attention
        # to an encoder too: its weights loaded into xfer's bidirectional encoder computed another
        # function than in transformers, without a word
        if config.get(key):  # as transformers tests it
            raise CheckpointError(
                f"{source}: {key} is {config[key]!r}: a decoder checkpoint (causal attention"
                f"{', cross-attention' if key == 'add_cross_attention' else ''}), which the xfer encoder "
                "(bidirectional self-attention only) cannot compute; use an encoder checkpoint"
            )
    archs = config.get("architectures")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        # a bare string's first letter was taken for the class: the head was dropped without a word
        raise CheckpointError(f"{source}: 'architectures' must be a list of class names, got {archs!r}")


def encoder_config_from_hf(config: dict[str, Any], source: str = "config.json") -> EncoderConfig:
    """EncoderConfig from a HF ELECTRA/BERT config dict (unsupported variants are a CheckpointError)."""
    check_supported_variant(config, source)
    model_type = config["model_type"]

    def integer(key: str, default: int | None = None) -> int:
        value = config[key] if default is None else config.get(key, default)
        # int() took "12", true and 4.9 (as 4: a head count transformers refuses, loaded here as another model)
        if not isinstance(value, int) or isinstance(value, bool):
            raise CheckpointError(f"{source}: {key} must be an integer, got {value!r}")
        return value

    def number(key: str, default: float) -> float:
        value = config.get(key, default)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise CheckpointError(f"{source}: {key} must be a number, got {value!r}")
        return float(value)

    try:
        hidden = integer("hidden_size")
        return EncoderConfig(
            vocab_size=integer("vocab_size"),
            # transformers' ElectraConfig default when config.json leaves it out (128, not hidden_size)
            embedding_size=integer("embedding_size", 128) if model_type == "electra" else hidden,
            hidden_size=hidden,
            num_layers=integer("num_hidden_layers"),
            num_heads=integer("num_attention_heads"),
            intermediate_size=integer("intermediate_size"),
            max_position_embeddings=integer("max_position_embeddings", 512),
            type_vocab_size=integer("type_vocab_size", 2),
            hidden_dropout=number("hidden_dropout_prob", 0.1),
            attention_dropout=number("attention_probs_dropout_prob", 0.1),
            layer_norm_eps=number("layer_norm_eps", 1e-12),
            initializer_range=number("initializer_range", 0.02),
            pad_token_id=0 if config.get("pad_token_id") is None else integer("pad_token_id"),
        )
    except KeyError as e:
        raise CheckpointError(f"{source}: missing field {e.args[0]!r}") from e
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{source}: invalid value: {e}") from e


def _expected_shapes(config: EncoderConfig) -> dict[str, tuple[int, ...]]:
    """xfer encoder tensor names -> shapes, without building the module."""
    e, h, f = config.embedding_size, config.hidden_size, config.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word.weight": (config.vocab_size, e),
        "embeddings.position.weight": (config.max_position_embeddings, e),
        "embeddings.token_type.weight": (config.type_vocab_size, e),
        "embeddings.norm.weight": (e,),
        "embeddings.norm.bias": (e,),
    }
    if e != h:
        shapes |= {"embeddings_project.weight": (h, e), "embeddings_project.bias": (h,)}
    for i in range(config.num_layers):
        p = f"layers.{i}."
        shapes |= {
            p + "qkv.weight": (3 * h, h),
            p + "qkv.bias": (3 * h,),
            p + "attn_out.weight": (h, h),
            p + "attn_out.bias": (h,),
            p + "attn_norm.weight": (h,),
            p + "attn_norm.bias": (h,),
            p + "ffn_in.weight": (f, h),
            p + "ffn_in.bias": (f,),
            p + "ffn_out.weight": (h, f),
            p + "ffn_out.bias": (h,),
            p + "ffn_norm.weight": (h,),
            p + "ffn_norm.bias": (h,),
        }
    return shapes


def _check_shape(name: str, tensor: Tensor, shape: tuple[int, ...], source: str) -> None:
    if tuple(tensor.shape) != shape:
        raise CheckpointError(
            f"{source}: tensor {name!r} has shape {tuple(tensor.shape)}, expected {shape} from config.json"
        )


def hf_to_xfer(bare: dict[str, Tensor], config: EncoderConfig, source: str) -> tuple[dict[str, Tensor], set[str]]:
    """Encoder state dict in xfer names from bare HF names; also the set of HF names consumed."""
    state: dict[str, Tensor] = {}
    used: set[str] = set()
    for hf_name, xfer_name in _EMBEDDINGS.items():
        for suffix in ("weight", "bias"):
            if f"{hf_name}.{suffix}" in bare:
                state[f"{xfer_name}.{suffix}"] = bare[f"{hf_name}.{suffix}"]
                used.add(f"{hf_name}.{suffix}")
    shapes = _expected_shapes(config)
    for i in range(config.num_layers):
        p = f"encoder.layer.{i}."
        for suffix in ("weight", "bias"):
            parts = [f"{p}attention.self.{w}.{suffix}" for w in ("query", "key", "value")]
            if all(n in bare for n in parts):
                part_shape = (config.hidden_size, *shapes[f"layers.{i}.qkv.{suffix}"][1:])
                for n in parts:
                    _check_shape(n, bare[n], part_shape, source)
                state[f"layers.{i}.qkv.{suffix}"] = torch.cat([bare[n] for n in parts])
                used.update(parts)
            for hf_sub, xfer_sub in _LAYER.items():
                n = f"{p}{hf_sub}.{suffix}"
                if n in bare:
                    state[f"layers.{i}.{xfer_sub}.{suffix}"] = bare[n]
                    used.add(n)
    missing = sorted(set(shapes) - set(state))
    if missing:
        shown = ", ".join(missing[:6]) + (f" (+{len(missing) - 6} more)" if len(missing) > 6 else "")
        raise CheckpointError(f"{source}: missing encoder tensors (xfer names): {shown}")
    # e.g. an embeddings_project although embedding_size == hidden_size: the weights computed
    # something this config does not describe
    unexpected = sorted(set(state) - set(shapes))
    if unexpected:
        raise CheckpointError(
            f"{source}: tensor {unexpected[0]!r} (xfer name) does not belong to the encoder config.json describes "
            f"(embedding_size={config.embedding_size}, hidden_size={config.hidden_size})"
        )
    for name, t in state.items():
        _check_shape(name, t, shapes[name], source)
    # encoder layers beyond num_hidden_layers, or parts of a layer the xfer encoder does not have,
    # would otherwise be silently ignored
    extra_layers = sorted(n for n in bare if n.startswith("encoder.layer.") and n not in used)
    beyond = [
        n for n in extra_layers if not (m := re.match(r"encoder\.layer\.(\d+)\.", n)) or int(m[1]) >= config.num_layers
    ]
    if beyond:
        raise CheckpointError(
            f"{source}: tensors for layers beyond num_hidden_layers={config.num_layers}: {beyond[0]}, ..."
        )
    if extra_layers:
        # within the layer count: no missing layer, but a part the layer has in another variant
        # (cross-attention, relative positions); "beyond num_hidden_layers" named the wrong cause
        more = f" (+{len(extra_layers) - 1} more)" if len(extra_layers) > 1 else ""
        raise CheckpointError(
            f"{source}: tensor {extra_layers[0]!r}{more} (without the model prefix) is not part of a BERT/ELECTRA encoder "
            "layer as the xfer encoder computes it (a variant with cross-attention or other extra layer weights?)"
        )
    return state, used


def _head(
    arch: str | None,
    model_type: str,
    bare: dict[str, Tensor],
    used: set[str],
    hf: dict[str, Any],
    config: EncoderConfig,
    source: str,
    host: PluginHost | None,
) -> tuple[str | None, dict[str, Any], dict[str, Tensor]]:
    """The registered head claiming `arch`: (kind, head config, head state dict in xfer names).

    The head is rebuilt and its weights loaded strictly here, so a checkpoint whose head tensors
    do not fit is reported now, naming the checkpoint."""
    cls = registry.head_for_architecture(arch, host) if arch else None
    if cls is None:
        return None, {}, {}
    unused = {n: t for n, t in bare.items() if n not in used}
    try:
        head_config, state, consumed = cls.hf.from_hf(arch, model_type, unused, hf, config, source)
    except (TypeError, ValueError) as e:  # a head map refusing config.json's values (`classifier_dropout`)
        raise CheckpointError(f"{Path(source) / 'config.json'}: {e} (read for the {arch} head)") from e
    try:
        cls(**head_config).load_state_dict(state)
    except (RuntimeError, TypeError, ValueError) as e:
        first = str(e).strip().splitlines()
        raise CheckpointError(
            f"{source}: head tensors of {arch} do not fit {cls.__name__}({head_config}): "
            f"{' '.join(line.strip() for line in first)[:500]}"
        ) from e
    if SCORE_RANGE_KEY in hf:
        state = _unfold_score_range(state, hf[SCORE_RANGE_KEY], source)
    used.update(consumed)
    return cls.kind, head_config, state


def _checked_score_range(value: Any, where: str) -> tuple[float, float]:
    """(low, high) of a score range, two finite numbers with low < high, else ValueError naming `where`."""
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must be [low, high], two numbers, got {value!r}") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"{where} must be [low, high] with finite low < high, got {value!r}")
    return low, high


def _out_layer(head_kind: str, model_type: str, host: PluginHost | None) -> str:
    """HF name prefix of the head's `out` layer (the one whose output is the score)."""
    hf_map = registry.head_class(head_kind, host).hf
    name = hf_map.tensor_map(model_type).get("out")
    if name is None:
        raise ValueError(f"head kind {head_kind!r} has no `out` layer, so no score range can be folded into it")
    return name


def _fold_score_range(
    tensors: dict[str, Tensor],
    head: nn.Module,
    head_kind: str,
    model_type: str,
    host: PluginHost | None,
    low: float,
    high: float,
) -> None:
    """Scale the HF head tensors' `out` layer in place so it outputs `low + (high - low) * y`,
    the score xfer's regression objective predicts from the head's output y."""
    if getattr(head, "num_outputs", None) != 1:
        raise ValueError(
            f"score_range is for a regression head (one output); this {head_kind!r} head has "
            f"{getattr(head, 'num_outputs', 'no single')} outputs"
        )
    out = _out_layer(head_kind, model_type, host)
    weight, bias = tensors[f"{out}.weight"], tensors[f"{out}.bias"]
    span = high - low
    tensors[f"{out}.weight"] = (weight.double() * span).to(weight.dtype)
    tensors[f"{out}.bias"] = (bias.double() * span + low).to(bias.dtype)


def _unfold_score_range(state: dict[str, Tensor], value: Any, source: str) -> dict[str, Tensor]:
    """The head state (xfer names) with `_fold_score_range` undone: xfer's regression objective scales
    the head's output by the task's range itself, and would apply the range twice otherwise."""
    where = f"{Path(source) / 'config.json'}: {SCORE_RANGE_KEY}"
    try:
        low, high = _checked_score_range(value, where)
    except ValueError as e:
        raise CheckpointError(str(e)) from None
    weight, bias = state.get("out.weight"), state.get("out.bias")
    if weight is None or bias is None or weight.dim() != 2 or weight.shape[0] != 1:
        raise CheckpointError(f"{where} is set, but the head has no one-output `out` layer (a regression head)")
    span = high - low
    return state | {
        "out.weight": (weight.double() / span).to(weight.dtype),
        "out.bias": ((bias.double() - low) / span).to(bias.dtype),
    }


def load_hf(directory: str | Path, host: PluginHost | None = None) -> tuple[EncoderConfig, dict[str, Tensor], HeadInfo]:
    """Read a HF ELECTRA/BERT checkpoint directory -> (config, encoder state dict in xfer names, head info).

    Supports ElectraModel/ForPreTraining/ForMaskedLM/ForSequenceClassification/
    ForTokenClassification/ForQuestionAnswering and the same Bert* classes (plus BertForMaskedLM /
    BertForPreTraining); tensors with or without the `electra.`/`bert.` prefix. The head is the
    registered head (of `host`, default the process-wide plugin host) claiming the architecture.

    config.json and the weights are read as one version: `export_hf` over the folder meanwhile
    (it writes config.json last, as a new file) made this pair the old config.json with the new
    weights, which load when the sizes agree (another `layer_norm_eps`, other labels). config.json's
    identity is compared before and after, and the folder is read again when it changed.
    """
    directory = Path(directory)
    for _ in range(_READ_ATTEMPTS):
        before = _file_identity(directory / "config.json")
        try:
            loaded = _load_hf_once(directory, host)
        except CheckpointError:
            if _file_identity(directory / "config.json") == before:
                raise
            continue  # rewritten while read: read the new version
        if _file_identity(directory / "config.json") == before:
            return loaded
    raise CheckpointError(
        f"{directory}: rewritten by another process {_READ_ATTEMPTS} times while being read; read it once that "
        "process has written it"
    )


_READ_ATTEMPTS = 5


def _file_identity(path: Path) -> tuple[int, int, int, int] | None:
    """(device, inode, change time, size) of the file at `path`, or None: a file replaced by an
    atomic write is another inode, or one reused with another change time."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_ctime_ns, st.st_size


def _load_hf_once(directory: Path, host: PluginHost | None) -> tuple[EncoderConfig, dict[str, Tensor], HeadInfo]:
    hf = _read_config(directory)
    source = str(directory)
    config = encoder_config_from_hf(hf, str(directory / "config.json"))
    model_type = hf["model_type"]
    archs = hf.get("architectures") or []
    arch = archs[0] if archs else None
    tensors = read_hf_tensors(directory)
    bare, original = _strip_prefix(tensors, model_type, source)
    state, used = hf_to_xfer(bare, config, source)
    kind, head_config, head_state = _head(arch, model_type, bare, used, hf, config, source, host)
    remaining = {original[n]: t for n, t in bare.items() if n not in used}
    info = HeadInfo(arch, model_type, kind, head_config, head_state, remaining, hf)
    return config, state, info


def encoder_problem(directory: Path) -> CheckpointError | None:
    """What `load_hf` would refuse about the encoder of the HF folder `directory`, from its
    config.json and the safetensors headers alone, for a pre-flight: a config the xfer encoder does
    not compute (`check_supported_variant`: `model_type`, `hidden_act`, `position_embedding_type`, a
    decoder) and encoder tensors that are missing, misshapen or extra. None when they fit.

    Why: the pre-flight (`modelio.encoder_weights_problem`) checked only xfer model dirs, so an
    `init:` of a relative-position or `gelu_new` checkpoint passed `xfer validate --data` and was
    refused when its stage loaded it, after every earlier stage had trained. An unreadable
    config.json or weights file, sizes config.json lacks or mistypes, and a `.bin` (reading it
    means loading it) give None here: the format and weights checks and the loader name those."""
    try:
        hf = _read_config(directory)
    except CheckpointError:
        return None  # an unreadable description: `finetune_config.checkpoint_format_problem` names it
    source = str(directory / "config.json")
    try:
        check_supported_variant(hf, source)
    except CheckpointError as error:
        return error
    try:
        config = encoder_config_from_hf(hf, source)
    except CheckpointError:
        return None  # sizes missing or mistyped: the loader names the field; the other checks use those there
    shapes = _header_shapes(directory)
    if shapes is None:
        return None
    # tensors on the meta device: `hf_to_xfer` concatenates and checks shapes without any data
    meta = {name: torch.empty(shape, device="meta") for name, shape in shapes.items()}
    try:
        bare, _ = _strip_prefix(meta, hf["model_type"], str(directory))
        hf_to_xfer(bare, config, str(directory))
    except CheckpointError as error:
        return error
    return None


def _header_shapes(directory: Path) -> dict[str, tuple[int, ...]] | None:
    """Tensor name -> shape of the safetensors weights in `directory` (single file or shards), read
    from the headers; None for a `.bin`, no weights, or a file that does not read."""
    from safetensors import safe_open

    single, index = directory / "model.safetensors", directory / "model.safetensors.index.json"
    try:
        if single.is_file():
            files = [single]
        elif index.is_file():
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            check_weight_map(index, weight_map)
            files = [directory / shard for shard in sorted(set(weight_map.values()))]
        else:
            return None
        shapes: dict[str, tuple[int, ...]] = {}
        for file in files:
            with safe_open(str(file), framework="pt") as weights:
                shapes |= {key: tuple(weights.get_slice(key).get_shape()) for key in weights.keys()}  # noqa: SIM118
    except Exception:  # unreadable index or weights: `finetune_config.weights_problem` says which
        return None
    return shapes


# ----------------------------------------------------------------------------------------------
# Writing.


def xfer_to_hf(state: dict[str, Tensor], config: EncoderConfig) -> dict[str, Tensor]:
    """Encoder state dict in xfer names -> bare HF names (fused QKV split in query/key/value)."""
    out: dict[str, Tensor] = {}
    inverse_emb = {v: k for k, v in _EMBEDDINGS.items()}
    inverse_layer = {v: k for k, v in _LAYER.items()}
    for name, t in state.items():
        module, _, suffix = name.rpartition(".")
        if module in inverse_emb:
            out[f"{inverse_emb[module]}.{suffix}"] = t
            continue
        m = re.fullmatch(r"layers\.(\d+)\.(\w+)", module)
        if not m:
            raise ValueError(f"unexpected encoder tensor {name!r}")
        i, sub = m.groups()
        p = f"encoder.layer.{i}."
        if sub == "qkv":
            for part, chunk in zip(("query", "key", "value"), t.chunk(3), strict=True):
                out[f"{p}attention.self.{part}.{suffix}"] = chunk
        else:
            out[f"{p}{inverse_layer[sub]}.{suffix}"] = t
    return out


def _hf_config(config: EncoderConfig, model_type: str, arch: str, extra: dict[str, Any]) -> dict[str, Any]:
    hf: dict[str, Any] = {
        "architectures": [arch],
        "model_type": model_type,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": "gelu",
        "hidden_dropout_prob": config.hidden_dropout,
        "attention_probs_dropout_prob": config.attention_dropout,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size,
        "initializer_range": config.initializer_range,
        "layer_norm_eps": config.layer_norm_eps,
        "pad_token_id": config.pad_token_id,
        "position_embedding_type": "absolute",
        "classifier_dropout": None,
    }
    if model_type == "electra":
        hf |= {
            "embedding_size": config.embedding_size,
            "summary_type": "first",
            "summary_use_proj": True,
            "summary_activation": "gelu",
            "summary_last_dropout": 0.1,
        }
    hf |= extra
    return hf


_BASE_ARCH = {"electra": "ElectraModel", "bert": "BertModel"}

_ARCHITECTURE_KEYS = (
    "architectures",
    "model_type",
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
    "hidden_act",
    "position_embedding_type",
    "layer_norm_eps",
    SCORE_RANGE_KEY,
)
"""config.json fields that export_hf derives from the encoder and head: they fix the tensors' shapes
or the function the weights compute (`layer_norm_eps`, `hidden_act`), so an `extra_config` value
that differs would describe another model than the weights (one that fails to load, or loads and
silently computes something else)."""

_SHARD = r"(-\d{5}-of-\d{5})?"
_OWNED_FILES = re.compile(
    rf"model{_SHARD}\.safetensors|pytorch_model{_SHARD}\.bin|tf_model{_SHARD}\.h5|flax_model{_SHARD}\.msgpack"
    r"|(model\.safetensors|pytorch_model\.bin|tf_model\.h5|flax_model\.msgpack)\.index\.json"
)
"""Weight files of a HF checkpoint, by transformers' names (single file, shards, shard index). An
export owns them all: one left from an earlier export next to the new model.safetensors holds the
OLD weights, and a reader that prefers it (transformers with `use_safetensors=False` or without
safetensors, TF/Flax, xfer's reader when model.safetensors goes) would load those."""

_TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
)
"""Tokenizer files `transformers.AutoTokenizer` reads from a checkpoint folder (tokenizer.json first,
when present). An export owns them too: left from an earlier export beside new weights, they load
the OLD tokenizer with the new model, without a word (see `export_hf`)."""


def _head_to_hf(
    head: nn.Module, kind: str, model_type: str, host: PluginHost | None
) -> tuple[str, dict[str, Tensor], dict[str, Any]]:
    """The HF class for `head`, its tensors in HF names (BERT's pooler keeps the `bert.` prefix)
    and config fields, from the registered head's HF map."""
    cls = registry.head_class(kind, host)
    hf_map = getattr(cls, "hf", None)
    if hf_map is None:
        raise ValueError(
            f"head kind {kind!r} ({cls.__name__}) declares no HF mapping (its `hf` attribute, see "
            "xfer.transformer.hfmap), so it has no HF equivalent; export the encoder alone (head=None)"
        )
    arch = hf_map.architecture(model_type)
    if arch is None:
        raise ValueError(
            f"head kind {kind!r} has no HF {model_type} class (its HF map covers: "
            f"{', '.join(f'{t} -> {a}' for t, a in hf_map.architectures.items()) or 'none'})"
        )
    tensors, extra = hf_map.to_hf(head, model_type)
    return arch, tensors, extra


def export_hf(
    directory: str | Path,
    encoder: Encoder,
    config: EncoderConfig | None = None,
    head: nn.Module | None = None,
    head_kind: str | None = None,
    vocab_file: str | Path | None = None,
    model_type: str = "electra",
    extra_tensors: dict[str, Tensor] | None = None,
    extra_config: dict[str, Any] | None = None,
    host: PluginHost | None = None,
    score_range: tuple[float, float] | None = None,
) -> Path:
    """Write a HF checkpoint (config.json + model.safetensors [+ vocab.txt]) that
    `transformers.AutoModel` / `<Arch>.from_pretrained` loads with no missing or unexpected keys.

    head_kind defaults to the head's own `kind`; its registered HF map (head registry of `host`,
    default the process-wide plugin host) gives the HF class and tensor names. extra_tensors (HF names, e.g. `HeadInfo.remaining`
    from `load_hf`) are written as given (floating ones in the encoder's dtype), unless one names a
    tensor of the model (a ValueError);
    extra_config entries override config.json fields (e.g.
    real `id2label`), except those that describe the weights (`_ARCHITECTURE_KEYS`: a value that
    differs is a ValueError). A BertModel needs its pooler (`pooler.dense.*`) in extra_tensors, else
    `transformers` reports it missing (xfer has no pooler without a head).

    Over an earlier export, every HF weight file (`_OWNED_FILES`: shards, index, `.bin`) is removed
    first. So are its tokenizer files (`_TOKENIZER_FILES`), which the new weights need not fit
    (a stale tokenizer.json would also win over a new vocab.txt): with vocab_file=None the folder
    is left without a tokenizer (AutoTokenizer then fails instead of loading an old one). A
    vocab_file whose folder holds its tokenizer.json (an xfer tokenizer folder) is written with that
    tokenizer's `save_hf` (vocab.txt, tokenizer.json, tokenizer_config.json: transformers reads a
    bare vocab.txt as lower-casing); any other is copied as vocab.txt, with a tokenizer_config.json
    when transformers' defaults would not read it as xfer does (a cased vocabulary, see
    `_copied_vocab_config`). A tokenizer written into `directory` for this export
    (`Tokenizer.save_hf(directory)`) is kept by passing its own `directory / "vocab.txt"` as vocab_file. A vocabulary with more tokens than the encoder has
    embeddings is a ValueError (its last ids would index past the embedding matrix). Other files
    in `directory` stay.

    Pre-training exports put `OBJECTIVE_KEY` in extra_config (which head the weights are).

    score_range: a regression task's `(low, high)` (TaskInfo.extra's `score_range`). xfer trains a
    regression head on targets scaled to [0, 1] and scales its output back only when predicting, so
    the exported head output STS-B's 0-5 scores as 0-1 in `transformers`, without a word. Given, the
    range is folded into the head's one-output layer (`out`) and recorded as `SCORE_RANGE_KEY`.
    """
    config = config or encoder.config
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(f"model_type must be one of {SUPPORTED_MODEL_TYPES}, got {model_type!r}")
    if model_type == "bert" and config.embedding_size != config.hidden_size:
        raise ValueError(
            "BERT has no embedding projection: embedding_size must equal hidden_size (use model_type='electra')"
        )
    if head is not None and head_kind is None:
        head_kind = getattr(head, "kind", None)
    if (head is None) != (head_kind is None):
        raise ValueError("give both head and head_kind, or neither")
    if score_range is not None and head is None:
        raise ValueError("score_range is the range of a regression head's output: give the head too")
    arch = _BASE_ARCH[model_type]
    tensors = xfer_to_hf(encoder.state_dict(), config)
    extra_cfg: dict[str, Any] = {}
    if head is not None:
        prefix = model_type + "."
        tensors = {prefix + k: v for k, v in tensors.items()}
        arch, head_tensors, extra_cfg = _head_to_hf(head, head_kind, model_type, host)
        if score_range is not None:
            low, high = _checked_score_range(score_range, "score_range")
            _fold_score_range(head_tensors, head, head_kind, model_type, host, low, high)
            extra_cfg[SCORE_RANGE_KEY] = [low, high]
        clash = sorted(set(head_tensors) & set(tensors))
        if clash:
            raise ValueError(f"head kind {head_kind!r}: HF names {clash[:3]} collide with encoder tensors")
        tensors |= head_tensors
    # an extra tensor under an encoder or head tensor's name silently replaced it, and one under the
    # other spelling (with / without the `electra.` / `bert.` prefix) made a file load_hf refuses
    prefix = model_type + "."
    written = {n.removeprefix(prefix): n for n in tensors}
    clash = sorted(n for n in extra_tensors or {} if n.removeprefix(prefix) in written)
    if clash:
        raise ValueError(
            f"extra_tensors {clash[:3]} would replace or duplicate the exported model's "
            f"{[written[n.removeprefix(prefix)] for n in clash[:3]]}: extra tensors are for what the model "
            "does not hold (HeadInfo.remaining)"
        )
    # in the model's dtype: `HeadInfo.remaining` of a bf16 checkpoint (a BERT's pooler) written as
    # bf16 beside fp32 weights made transformers' default `dtype="auto"` (it takes the first
    # floating tensor's dtype when config.json names none) load the whole exported model in bf16
    dtype = encoder.embeddings.word.weight.dtype
    tensors |= {n: t.to(dtype) if t.is_floating_point() else t for n, t in (extra_tensors or {}).items()}
    derived = _hf_config(config, model_type, arch, extra_cfg)
    for key, value in (extra_config or {}).items():
        if key in _ARCHITECTURE_KEYS and value != derived.get(key):
            raise ValueError(
                f"extra_config[{key!r}] = {value!r} differs from the exported model's {derived.get(key)!r}: "
                f"config.json's {key} must describe the weights written (the encoder config sets it)"
            )
    hf_config = _hf_config(config, model_type, arch, {**extra_cfg, **(extra_config or {})})
    # serialised before the folder is touched: a value JSON cannot hold (a numpy label) failed only
    # when config.json was written, after the earlier export's config.json and weights were gone
    try:
        config_text = json.dumps(hf_config, indent=2, sort_keys=True) + "\n"
    except (TypeError, ValueError) as e:
        raise ValueError(f"extra_config: config.json would not be JSON: {e}") from e

    directory = Path(directory)
    own_tokenizer = vocab_file is not None and Path(vocab_file).resolve() == (directory / "vocab.txt").resolve()
    if vocab_file is not None:
        _check_vocab_fits(Path(vocab_file), config.vocab_size)
    tokenizer = None if vocab_file is None or own_tokenizer else _tokenizer_beside(Path(vocab_file), config.vocab_size)
    copied_config = None if vocab_file is None or own_tokenizer or tokenizer else _copied_vocab_config(Path(vocab_file))
    if (directory / "xfer_model.json").is_file():
        # readers (modelio.detect_format) take a folder with xfer_model.json for an xfer model dir, so
        # the export would be ignored and the old xfer weights loaded in its place
        raise CheckpointError(
            f"{directory}: holds an xfer model directory (xfer_model.json); export the HF checkpoint to another folder"
        )
    directory.mkdir(parents=True, exist_ok=True)
    from safetensors.torch import save_file

    # config.json marks a complete checkpoint: drop the previous one first and write the new one
    # last, so an export interrupted over an older one never leaves new weights under an old config
    (directory / "config.json").unlink(missing_ok=True)
    # then every weight file of an earlier export (shards, index, .bin): left next to the new
    # model.safetensors, they would still hold the old weights for readers that prefer them
    for stale in sorted(directory.iterdir()):
        if _OWNED_FILES.fullmatch(stale.name) and (stale.is_symlink() or stale.is_file()):
            stale.unlink()
    # and its tokenizer, unless the caller wrote this export's tokenizer here (vocab_file is its vocab.txt)
    if not own_tokenizer:
        for name in _TOKENIZER_FILES:
            stale = directory / name
            if stale.is_symlink() or stale.is_file():
                stale.unlink()
    # clone: safetensors refuses tensors that share storage (the q/k/v chunks do)
    plain = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    if tokenizer is not None:
        tokenizer.save_hf(directory, config.max_position_embeddings)
    elif vocab_file is not None and not own_tokenizer:
        _atomic_write(directory / "vocab.txt", lambda p: shutil.copyfile(vocab_file, p))
        if copied_config is not None:
            _atomic_write(directory / "tokenizer_config.json", lambda p: Path(p).write_text(copied_config))
    _atomic_write(directory / "model.safetensors", lambda p: save_file(plain, p, metadata={"format": "pt"}))
    _atomic_write(directory / "config.json", lambda p: Path(p).write_text(config_text))
    return directory


def _tokenizer_beside(vocab_file: Path, vocab_size: int) -> Any:
    """The tokenizer of the folder `vocab_file` (a `vocab.txt`) sits in, when that folder holds its
    `tokenizer.json` (an xfer tokenizer folder, `Tokenizer.save`), else None. Copied alone, vocab.txt
    is read by transformers with its defaults, `do_lower_case=True`: a cased vocabulary's "Hello"
    became "hello" and [UNK] there, where xfer keeps "Hello". Its `save_hf` files say the casing."""
    from xfer.transformer.tokenization import WordPieceTokenizer

    if vocab_file.name != "vocab.txt" or not (vocab_file.parent / "tokenizer.json").is_file():
        return None
    tokenizer = WordPieceTokenizer.from_dir(vocab_file.parent)  # a DataError names a file that does not read
    if tokenizer.vocab_size > vocab_size:
        raise ValueError(
            f"the tokenizer in {vocab_file.parent} has {tokenizer.vocab_size} token ids but the encoder only "
            f"{vocab_size} embeddings: export with the tokenizer the model was trained with"
        )
    return tokenizer


def _copied_vocab_config(vocab_file: Path) -> str | None:
    """The tokenizer_config.json to write beside a vocab.txt copied alone, or None when transformers'
    defaults already read it as xfer does.

    Why: transformers takes a bare vocab.txt as `do_lower_case=True`, while xfer infers the casing
    from the vocabulary (`WordPieceTokenizer.from_file`) or reads it from the tokenizer_config.json
    beside it, which the copy left behind. A cased vocabulary (Google's cased BERT) exported so was
    lower-cased by transformers ("Paris" -> "paris", [UNK] or other pieces) and not by xfer: the
    same checkpoint computed on other ids in each."""
    from xfer.transformer.tokenization.vocab_files import _config_options, _looks_cased

    options: dict[str, Any] = {}
    if vocab_file.name == "vocab.txt":
        options = _config_options(vocab_file.parent / "tokenizer_config.json")
    if "lowercase" not in options:
        text = vocab_file.read_text(encoding="utf-8", errors="replace").removeprefix("\ufeff")
        options["lowercase"] = not _looks_cased({t: i for i, t in enumerate(re.split(r"\r\n|\r|\n", text))})
    if options == {"lowercase": True}:
        return None  # transformers' defaults: lower-case, strip accents, split CJK characters
    names = {
        "lowercase": "do_lower_case",
        "strip_accents": "strip_accents",
        "handle_chinese_chars": "tokenize_chinese_chars",
    }
    return json.dumps({names[k]: v for k, v in options.items()}, indent=2) + "\n"


def _check_vocab_fits(vocab_file: Path, vocab_size: int) -> None:
    """ValueError when `vocab_file` (a token a line) holds more tokens than the encoder has
    embeddings: transformers would load both and fail (or index garbage) on the last ids."""
    try:
        text = vocab_file.read_text(encoding="utf-8", errors="replace").removeprefix("\ufeff")
    except OSError as e:
        raise ValueError(f"vocab_file {vocab_file}: cannot read: {e}") from e
    lines = re.split(r"\r\n|\r|\n", text)  # as the tokenizer and the pre-flight count them
    tokens = len(lines) - (lines[-1] == "")
    if tokens > vocab_size:
        raise ValueError(
            f"vocab_file {vocab_file} has {tokens} tokens but the encoder only {vocab_size} embeddings: "
            f"ids from {vocab_size} on would have none; export with the tokenizer the model was trained with"
        )


def _atomic_write(path: Path, write: Any) -> None:
    """Readers never see half a file (see xfer.core.atomic); `write` gets the temporary file's name as str."""
    atomic_write_with(path, lambda tmp: write(str(tmp)))


# ----------------------------------------------------------------------------------------------
# BERT's pre-trained pooler, for fine-tuning a `pooler: tanh` head.

_POOLER_TENSORS = {"dense.weight": "pooler.dense.weight", "dense.bias": "pooler.dense.bias"}


def pooler_state(info: HeadInfo, hidden_size: int, source: str) -> dict[str, Tensor] | None:
    """The BERT pooler (`[CLS] -> dense -> tanh`) of a loaded HF checkpoint as a tanh `SequenceHead`'s
    `dense.weight` / `dense.bias`, or None when it has none (ELECTRA, BertForMaskedLM).

    Why: BERT's fine-tuning recipe starts the classifier's `dense` from the pre-trained pooler, which
    `load_hf` leaves in `remaining` (BertModel, BertForPreTraining) or in a BertForSequenceClassification
    head, so a `pooler: tanh` head fine-tuned from a BERT checkpoint started from a random pooler.
    One tensor without the other, or a shape other than the hidden size's, is a CheckpointError."""
    if info.model_type != "bert":
        return None
    if info.kind == "sequence" and info.config.get("pooler") == "tanh":
        found = {k: t for k, t in info.state_dict.items() if k in _POOLER_TENSORS}
    else:
        found = {}
        for name, t in info.remaining.items():
            bare = name.removeprefix("bert.")
            found |= {key: t for key, hf_name in _POOLER_TENSORS.items() if bare == hf_name}
    if not found:
        return None
    shapes = {"dense.weight": (hidden_size, hidden_size), "dense.bias": (hidden_size,)}
    for key, shape in shapes.items():
        if key not in found:
            raise CheckpointError(
                f"{source}: has bert.{_POOLER_TENSORS[next(iter(found))]} but not bert.{_POOLER_TENSORS[key]}: "
                "a pooler needs both"
            )
        if tuple(found[key].shape) != shape:
            raise CheckpointError(
                f"{source}: tensor bert.{_POOLER_TENSORS[key]} has shape {tuple(found[key].shape)}, expected {shape} "
                "from config.json's hidden_size"
            )
    return found


def checkpoint_pooler(directory: str | Path, host: PluginHost | None = None) -> dict[str, Tensor] | None:
    """`pooler_state` of the checkpoint folder `directory`; None for a folder that is no HF checkpoint
    (an xfer model directory: xfer keeps a pooler only inside a task head)."""
    directory = Path(directory)
    if (directory / "xfer_model.json").is_file() or not (directory / "config.json").is_file():
        return None
    config, _, info = load_hf(directory, host)
    return pooler_state(info, config.hidden_size, str(directory))

"""xfer's own model directory: `xfer_model.json` + `model.safetensors` (+ tokenizer files).

Layout:

    <dir>/xfer_model.json    {"format_version": 1, "modules": {name: description}, "aliases": {...}, **meta}
    <dir>/model.safetensors  every tensor as "<module name>.<parameter name>" (xfer names)
    <dir>/vocab.txt, ...     optional files copied alongside (tokenizer)

`modules` describes each saved module so it can be rebuilt without code knowing the task:
an `Encoder` as {"type": "encoder", "config": EncoderConfig.to_dict()}, a head as
{"type": "head", "kind": ..., "config": head.config()}, anything else as {"type": "<class name>"}
(the caller rebuilds those itself from `state_dicts`). A head is any module registered in the
head registry (`xfer.transformer.registry`: a model component with `kind` and `config()`), so a
plugin's head (ELECTRA's generator head, ...) saves and loads like the built-in ones; saving a
module that has a `kind` nobody registered is refused, since it could not be loaded back. `meta` is the caller's free-form JSON
(task, labels, training info). Tensors shared between modules (ELECTRA's tied embeddings) are
stored once; `aliases` maps the other names to the stored one and loading restores both names.

Saving writes a temporary sibling directory and renames it into place, so a crash never leaves
a half-written model directory under the final name. Loading never unpickles anything.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from xfer.core.errors import CheckpointError, PluginError
from xfer.core.plugins import PluginHost
from xfer.transformer import registry
from xfer.transformer.encoder import ARCHITECTURE_FIELDS, Encoder, EncoderConfig

FORMAT_VERSION = 1
META_FILE = "xfer_model.json"
WEIGHTS_FILE = "model.safetensors"


def describe_module(module: nn.Module, host: PluginHost | None = None) -> dict[str, Any]:
    """How a module is recorded in xfer_model.json (enough to rebuild encoders and heads).

    A head's kind must be registered (ValueError otherwise): the directory must load back."""
    if isinstance(module, Encoder):
        return {"type": "encoder", "config": module.config.to_dict()}
    head = registry.describe_head(module)
    if head is not None:
        try:
            registry.head_class(head["kind"], host)
        except PluginError as e:
            raise ValueError(
                f"cannot save {type(module).__name__} (kind {head['kind']!r}): it is not a registered head, so the "
                f"model directory could not be loaded back; register it through `xfer_models`. {e}"
            ) from e
        return {"type": "head", **head}
    return {"type": type(module).__name__}


def save_model_dir(
    path: str | Path,
    modules: dict[str, nn.Module],
    meta: dict[str, Any] | None = None,
    files: list[str | Path] | tuple[str | Path, ...] = (),
    host: PluginHost | None = None,
) -> Path:
    """Write modules (+ JSON `meta`, + `files` copied by name) to the model directory `path`, atomically.

    An existing directory at `path` is replaced as a whole. Heads are checked against the head
    registry of `host` (default: the process-wide plugin host).
    """
    from safetensors.torch import save_file

    path = Path(path)
    meta = dict(meta or {})
    reserved = {"format_version", "modules", "aliases"} & set(meta)
    if reserved:
        raise ValueError(f"meta keys {sorted(reserved)} are reserved by the model directory format")
    for name in modules:
        if not name or "." in name:
            raise ValueError(f"module name {name!r} must be non-empty and contain no '.'")
    tensors: dict[str, Tensor] = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple[int, int, tuple[int, ...], tuple[int, ...], str], str] = {}
    for module_name, module in modules.items():
        for key, t in module.state_dict(keep_vars=False).items():
            full = f"{module_name}.{key}"
            identity = (
                t.untyped_storage().data_ptr(),
                t.storage_offset(),
                tuple(t.shape),
                tuple(t.stride()),
                str(t.dtype),
            )
            if identity in seen:
                aliases[full] = seen[identity]
                continue
            seen[identity] = full
            tensors[full] = t.detach().to("cpu").contiguous().clone()
    document = {
        "format_version": FORMAT_VERSION,
        "modules": {n: describe_module(m, host) for n, m in modules.items()},
        "aliases": aliases,
        **meta,
    }
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"  # fail on non-JSON meta before touching disk

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        save_file(tensors, tmp / WEIGHTS_FILE, metadata={"format": "pt"})
        for f in files:
            shutil.copyfile(f, tmp / Path(f).name)
        (tmp / META_FILE).write_text(text)  # written last: its presence marks a complete directory
        _swap_into_place(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _swap_into_place(tmp: Path, path: Path) -> None:
    """rename(tmp, path); an existing directory is moved aside first and deleted after."""
    if not path.exists():
        os.replace(tmp, path)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
    os.replace(path, old / "d")
    try:
        os.replace(tmp, path)
    except BaseException:
        os.replace(old / "d", path)  # put the previous version back
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


@dataclass
class ModelDir:
    """A loaded model directory: `meta` (caller's keys), `modules` (descriptions) and per-module state dicts."""

    path: Path
    meta: dict[str, Any]
    modules: dict[str, dict[str, Any]]
    state_dicts: dict[str, dict[str, Tensor]]

    def encoder_config(self, name: str = "encoder") -> EncoderConfig:
        desc = self._describe(name)
        if desc.get("type") != "encoder":
            raise CheckpointError(f"{self.path}: module {name!r} is not an encoder")
        try:
            return EncoderConfig.from_dict(desc["config"])
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(f"{self.path / META_FILE}: invalid encoder config for {name!r}: {e}") from e

    def build(self, name: str, host: PluginHost | None = None) -> nn.Module:
        """Rebuild an encoder or head module with its weights (other module types: use `state_dicts`).

        Heads are looked up by kind in the head registry of `host` (default: the process-wide
        plugin host); a kind no loaded plugin provides is a CheckpointError naming it."""
        desc = self._describe(name)
        if desc.get("type") == "encoder":
            module: nn.Module = Encoder(self.encoder_config(name))
        elif desc.get("type") == "head":
            kind, config = desc.get("kind"), desc.get("config")
            if not isinstance(kind, str) or not isinstance(config, dict):
                raise CheckpointError(f"{self.path / META_FILE}: module {name!r}: a head needs a 'kind' and a 'config'")
            try:
                module = registry.build_head(kind, config, host)
            except (PluginError, TypeError, ValueError) as e:  # unknown kind, or a config the head refuses
                raise CheckpointError(f"{self.path / META_FILE}: module {name!r}: {e}") from e
        else:
            raise CheckpointError(f"{self.path}: module {name!r} of type {desc.get('type')!r} cannot be rebuilt here")
        try:
            module.load_state_dict(self.state_dicts.get(name, {}))
        except RuntimeError as e:
            raise CheckpointError(f"{self.path}: weights of module {name!r} do not match its description: {e}") from e
        return module

    def _describe(self, name: str) -> dict[str, Any]:
        if name not in self.modules:
            raise CheckpointError(f"{self.path}: no module {name!r} (has: {', '.join(sorted(self.modules)) or 'none'})")
        return self.modules[name]


def load_model_dir(path: str | Path) -> ModelDir:
    """Read a directory written by `save_model_dir`."""
    from safetensors.torch import load_file

    path = Path(path)
    meta_path = path / META_FILE
    if not meta_path.is_file():
        raise CheckpointError(f"{path}: not an xfer model directory (no {META_FILE})")
    try:
        document = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{meta_path}: cannot read JSON: {e}") from e
    if not isinstance(document, dict):
        raise CheckpointError(f"{meta_path}: expected a JSON object")
    version = document.pop("format_version", None)
    if version != FORMAT_VERSION:
        raise CheckpointError(f"{meta_path}: unsupported format_version {version!r} (this xfer reads {FORMAT_VERSION})")
    modules = document.pop("modules", {})
    aliases = document.pop("aliases", {})
    # a hand-edited file must fail here, naming it, not later as a bare AttributeError
    if not isinstance(modules, dict) or not all(isinstance(d, dict) for d in modules.values()):
        raise CheckpointError(f"{meta_path}: 'modules' must map module names to JSON objects")
    if not isinstance(aliases, dict) or not all(isinstance(t, str) for t in aliases.values()):
        raise CheckpointError(f"{meta_path}: 'aliases' must map tensor names to tensor names")
    weights = path / WEIGHTS_FILE
    if not weights.is_file():
        raise CheckpointError(f"{path}: missing {WEIGHTS_FILE}")
    try:
        tensors = load_file(weights)
    except Exception as e:
        raise CheckpointError(f"{weights}: cannot read safetensors: {e}") from e
    for alias, target in aliases.items():
        if target not in tensors:
            raise CheckpointError(f"{meta_path}: alias {alias!r} points to missing tensor {target!r}")
        tensors[alias] = tensors[target]
    state_dicts: dict[str, dict[str, Tensor]] = {name: {} for name in modules}
    for full, t in tensors.items():
        module_name, _, key = full.partition(".")
        if module_name not in state_dicts:
            # save_model_dir never writes such a tensor: the weights file and xfer_model.json come
            # from different saves (a file copied over, a hand edit), and callers that take a module
            # by name (`state_dicts.get("head")`) would load weights nothing describes
            raise CheckpointError(
                f"{weights}: tensor {full!r} belongs to module {module_name!r}, which {meta_path}'s 'modules' "
                f"does not list (it lists: {', '.join(sorted(modules)) or 'none'}); the two files do not match"
            )
        state_dicts[module_name][key] = t
    return ModelDir(path, document, modules, state_dicts)


def detect_format(path: str | Path) -> str:
    """ "xfer" (xfer_model.json) or "hf" (config.json); CheckpointError otherwise."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: model directory does not exist")
    if (path / META_FILE).is_file():
        return "xfer"
    if (path / "config.json").is_file():
        return "hf"
    from xfer.transformer.hf import incomplete_download

    raise CheckpointError(
        incomplete_download(path, (META_FILE, "config.json"))
        or f"{path}: neither an xfer model directory ({META_FILE}) nor a HF checkpoint (config.json)"
    )


def recorded_role(folder: Path) -> tuple[str | None, str | None, str]:
    """(role, objective, where it says so) that a checkpoint folder records about its pre-training.

    The role is "discriminator" or "generator" (an `electra.pretrain` output's `role`, or for a HF
    folder its class: ElectraForPreTraining is a discriminator, ElectraForMaskedLM a generator),
    None when the folder says neither (ElectraModel, BERT, a fine-tuned model). The objective is the
    built-in family a plugin objective was built on, else its registered name (HF: the
    `xfer_objective` key). Stages that take an `init:` read this to catch the other role given by
    mistake: the MLM baseline's two outputs are one model, so callers let `electra.mlm` pass."""
    from xfer.core.atomic import read_json
    from xfer.transformer.hf import OBJECTIVE_KEY

    meta = read_json(folder / META_FILE)
    if meta is not None:
        return meta.get("role"), meta.get("objective_family") or meta.get("objective"), f"its {META_FILE}"
    hf = read_json(folder / "config.json") or {}
    architectures = [a for a in hf.get("architectures") or [] if isinstance(a, str)]
    roles = {"ElectraForPreTraining": "discriminator", "ElectraForMaskedLM": "generator"}
    role = next((roles[a] for a in architectures if a in roles), None)
    return role, hf.get(OBJECTIVE_KEY), f"its config.json: {', '.join(architectures) or 'no architectures'}"


def with_overrides(config: EncoderConfig, overrides: dict[str, Any], folder: Path) -> EncoderConfig:
    """A checkpoint's encoder config with a stage's `encoder:` overrides (dropout rates, `unpad`,
    ...). An override of an architecture field that differs from the checkpoint is an error naming
    both values: it would fail as a wall of size mismatches, or, for num_heads, load and silently
    compute another function."""
    for name in ARCHITECTURE_FIELDS:
        if name in overrides and overrides[name] != getattr(config, name):
            raise CheckpointError(
                f"encoder.{name}: {overrides[name]!r} differs from the init checkpoint's {getattr(config, name)!r} "
                f"({folder}); pre-trained weights fix the architecture: remove encoder.{name}, or set init: null "
                "to train that architecture from random weights"
            )
    return replace(config, **overrides) if overrides else config


def fitted_to_tokenizer(config: EncoderConfig, tokenizer: Any, given: Mapping[str, Any]) -> EncoderConfig:
    """A random-init encoder's config with the tokenizer's vocabulary size and [PAD] id, unless the
    stage's `encoder:` (`given`) sets them. The [PAD] id only enters the HF export's config, which
    named token 0 as padding for a vocabulary whose [PAD] is elsewhere."""
    fitted = {"vocab_size": tokenizer.vocab_size, "pad_token_id": tokenizer.pad_id}
    changes = {k: v for k, v in fitted.items() if k not in given and getattr(config, k) != v}
    return replace(config, **changes) if changes else config


def read_encoder(path: str | Path) -> tuple[EncoderConfig, dict[str, Tensor], dict[str, Tensor] | None]:
    """(encoder config, encoder weights, head weights or None) of an xfer model dir or an HF folder.

    The one way stages start from a checkpoint (fine-tuning, continued pre-training, Transformer
    features): an xfer dir's module named "encoder" (else its first module of type encoder) and
    its "head"; an HF folder through `load_hf`, with the head its architecture maps to."""
    path = Path(path)
    if detect_format(path) == "xfer":
        model_dir = load_model_dir(path)
        name = (
            "encoder"
            if "encoder" in model_dir.modules
            else next((n for n, d in model_dir.modules.items() if d.get("type") == "encoder"), "encoder")
        )
        encoder_config = model_dir.encoder_config(name)
        state = model_dir.state_dicts[name]
        _check_encoder_state(encoder_config, state, model_dir.path / META_FILE, name)
        return encoder_config, state, model_dir.state_dicts.get("head")
    from xfer.transformer.hf import load_hf

    encoder_config, state, head = load_hf(path)
    return encoder_config, state, (head.state_dict or None)


def _check_encoder_state(config: EncoderConfig, state: Mapping[str, Tensor], source: Path, name: str) -> None:
    """The weights fit the config `source` records (its vocab_size edited, say): callers load them
    with a bare `load_state_dict`, whose RuntimeError would name neither file nor field. Shapes
    come from the HF importer's table, so no module is built (a large encoder's init is slow)."""
    from xfer.transformer.hf import _expected_shapes

    for key, shape in _expected_shapes(config).items():
        if key in state and tuple(state[key].shape) != shape:
            raise CheckpointError(
                f"{source}: weights of module {name!r} do not match its recorded config: {key!r} has shape "
                f"{tuple(state[key].shape)}, the config gives {shape}"
            )

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

Saving writes a temporary sibling directory, fsyncs it and renames it into place (over an existing
one: exchanges the two atomically where the OS can), so a crash never leaves a half-written model
directory, or none, under the final name. Loading never unpickles anything.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from xfer.core.atomic import as_created, fsync_dir, fsync_file
from xfer.core.errors import CheckpointError, PluginError
from xfer.core.plugins import PluginHost
from xfer.core.results import strict_json
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
    _check_file_names(files)
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
    # strict JSON (a NaN dev score as "NaN", as results.json writes it: a bare NaN token is refused by jq,
    # JavaScript and Go); fails on non-JSON meta before touching disk
    text = json.dumps(strict_json(document), indent=2, sort_keys=True, allow_nan=False) + "\n"

    path.parent.mkdir(parents=True, exist_ok=True)
    # a save killed before its rename left its temporary folder (a whole model) beside `path`; only
    # one process saves into a model directory (its stage holds the run lock), as for checkpoints
    for stale in path.parent.glob(f".{glob.escape(path.name)}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        save_file(tensors, tmp / WEIGHTS_FILE, metadata={"format": "pt"})
        for f in files:
            shutil.copyfile(f, tmp / Path(f).name)
        (tmp / META_FILE).write_text(text)  # written last: its presence marks a complete directory
        # durable before it is renamed into place, as checkpoints are (xfer.core.atomic): after a power
        # cut, a model dir whose stage.json says complete held empty or partial files
        for written in tmp.iterdir():
            as_created(written)  # safetensors writes the weights 0600
            fsync_file(written)
        as_created(tmp)  # mkdtemp made it 0700: the model folder was its owner's alone
        fsync_dir(tmp)
        _swap_into_place(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _check_file_names(files: list[str | Path] | tuple[str | Path, ...]) -> None:
    """Refuse `files` that would land on one name: they are copied by base name, so a second
    `vocab.json` (two tasks' files of one slug) replaced the first and a file named like the weights
    or the meta file replaced them, all without a word, leaving a directory that loads wrongly."""
    by_name: dict[str, str] = {}
    for f in files:
        name = Path(f).name
        if name in (WEIGHTS_FILE, META_FILE):
            raise ValueError(f"cannot copy {f} into a model directory: {name} is the directory's own file")
        if name in by_name:
            raise ValueError(f"cannot copy both {by_name[name]} and {f} into a model directory: both are named {name}")
        by_name[name] = str(f)


def _swap_into_place(tmp: Path, path: Path) -> None:
    """rename(tmp, path); an existing directory is exchanged with `tmp` in one atomic step and then
    deleted (Linux `renameat2(RENAME_EXCHANGE)`).

    Without that system call (another OS, a filesystem that refuses it) the existing directory is
    moved aside first: a writer killed between that rename and the next left nothing at `path`
    (readers then name the copy left aside, see `_interrupted_swap`)."""
    if not path.exists():
        os.replace(tmp, path)
        return
    if _exchange(tmp, path):
        # `tmp` now names the previous entry: a directory, or a file or symlink a caller saved over
        if tmp.is_symlink() or not tmp.is_dir():
            tmp.unlink(missing_ok=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
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


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_NO_EXCHANGE = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP}
"""renameat2's answers for "this kernel, C library or filesystem cannot exchange": fall back."""


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap the entries `a` and `b` (both must exist); False where that is unsupported."""
    if sys.platform != "linux":
        return False
    try:
        import ctypes

        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2  # glibc >= 2.28
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    number = ctypes.get_errno()
    if number in _NO_EXCHANGE:
        return False
    raise OSError(number, os.strerror(number), str(a), None, str(b))


_JSON_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "int": ((int,), "an integer"),
    "float": ((int, float), "a number"),
    "bool": ((bool,), "true or false"),
}


def _check_config_types(config: Any) -> None:
    """TypeError naming the first field of a recorded encoder config whose JSON value has the wrong
    type. EncoderConfig takes what it is given, so a hand-edited `"num_layers": "2"` or `2.0` was a
    bare TypeError in the weights check or the model, `"layer_norm_eps": "1e-12"` one at the first
    forward pass, and `"unpad": "no"` was silently true."""
    if not isinstance(config, dict):
        raise TypeError(f"'config' must be a JSON object, got {type(config).__name__}")
    for f in fields(EncoderConfig):
        if f.name not in config or str(f.type) not in _JSON_TYPES:
            continue
        wanted, what = _JSON_TYPES[str(f.type)]
        value = config[f.name]
        if not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted):
            raise TypeError(f"{f.name} must be {what}, got {value!r}")


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
            _check_config_types(desc["config"])
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


_READ_ATTEMPTS = 5
_SWAP_WAIT_S = 2.0


def _identity(path: Path) -> tuple[int, int, int] | None:
    """The directory at `path` (device, inode, change time: a new directory may reuse a deleted
    one's inode), or None when nothing is there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_ctime_ns


def _swapping(path: Path) -> bool:
    """`save_model_dir` is between its two renames: the old version moved into a `.<name>.old-*`
    sibling, the new one not yet at `path`, so nothing is there."""
    return not path.exists() and any(path.parent.glob(f".{glob.escape(path.name)}.old-*"))


def _wait_for_swap(path: Path) -> bool:
    """Wait (at most `_SWAP_WAIT_S`) for a swap into `path` to finish rather than call the model
    directory missing; False when it did not finish: a writer that died between its renames left
    the previous version in the sibling (`_interrupted_swap`)."""
    deadline = time.monotonic() + _SWAP_WAIT_S
    while _swapping(path):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def _interrupted_swap(path: Path) -> str:
    """What to say about a missing `path` beside a swap that never finished, else ""."""
    if not _swapping(path):
        return ""
    left = sorted(path.parent.glob(f".{glob.escape(path.name)}.old-*/d"))
    return (
        f" (a save into it was interrupted between its two renames: its previous version is {left[0]})" if left else ""
    )


def load_model_dir(path: str | Path) -> ModelDir:
    """Read a directory written by `save_model_dir`.

    xfer_model.json and model.safetensors are read from the same version: another process
    replacing the directory meanwhile (`save_model_dir` swaps a whole new one in) made this pair
    the old description with the new weights, or report a file of it missing. The directory's
    identity is compared before and after, and a replaced one is read again."""
    path = Path(path)
    for _ in range(_READ_ATTEMPTS):
        settled = _wait_for_swap(path)
        before = _identity(path)
        try:
            loaded = _read_model_dir(path)
        except CheckpointError as error:
            if not settled:
                raise CheckpointError(f"{error}{_interrupted_swap(path)}") from error
            if _identity(path) == before and not _swapping(path):
                raise
            continue  # replaced (or being replaced) while read: read the new version
        if _identity(path) == before:
            return loaded
    raise CheckpointError(
        f"{path}: replaced by another process {_READ_ATTEMPTS} times while being read; read it once that "
        "process has written it"
    )


def _read_model_dir(path: Path) -> ModelDir:
    from safetensors.torch import load_file

    meta_path = path / META_FILE
    if path.is_file():  # a file inside a model directory (its model.safetensors): name the folder
        from xfer.transformer.hf import not_a_folder

        raise CheckpointError(not_a_folder(path))
    if not meta_path.is_file():
        raise CheckpointError(f"{path}: not an xfer model directory (no {META_FILE})")
    try:
        # JSON is UTF-8 whatever the locale; bytes that are not (a damaged file) are a ValueError too
        document = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
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
    _wait_for_swap(path)
    if path.is_file():  # `init: ckpt/model.safetensors`: "does not exist" named a file that is there
        from xfer.transformer.hf import not_a_folder

        raise CheckpointError(not_a_folder(path))
    if not path.is_dir():
        raise CheckpointError(f"{path}: model directory does not exist{_interrupted_swap(path)}")
    if (path / META_FILE).is_file():
        return "xfer"
    if (path / "config.json").is_file():
        return "hf"
    from xfer.transformer.hf import checkpoints_below, incomplete_download

    raise CheckpointError(
        incomplete_download(path, (META_FILE, "config.json"))
        or f"{path}: neither an xfer model directory ({META_FILE}) nor a HF checkpoint (config.json)"
        + checkpoints_below(path)
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
        shapes = {key: tuple(t.shape) for key, t in state.items()}
        # tensors the module lacks are left to the caller (ELECTRA's init_generator names them itself,
        # and skips the tied embeddings); `encoder_weights_problem` refuses them
        _check_encoder_state(encoder_config, shapes, model_dir.path / META_FILE, name, model_dir.path / WEIGHTS_FILE)
        return encoder_config, state, model_dir.state_dicts.get("head")
    from xfer.transformer.hf import load_hf

    encoder_config, state, head = load_hf(path)
    return encoder_config, state, (head.state_dict or None)


def encoder_weights_problem(folder: Path) -> CheckpointError | None:
    """What `read_encoder` would find wrong with an xfer model dir's encoder tensors (missing,
    unexpected, misshapen for the config xfer_model.json records), from the safetensors header
    alone: for a pre-flight, before earlier stages train. An HF folder (config.json) is checked as
    `load_hf` reads it, its config.json included (`hf.encoder_problem`: an encoder variant xfer does
    not compute was refused only when the stage loaded it). None when they fit, for a folder that is
    neither, and when a file does not read (the checks that read the files say so)."""
    from safetensors import safe_open

    if not (folder / META_FILE).is_file():
        if (folder / "config.json").is_file():
            from xfer.transformer.hf import encoder_problem

            return encoder_problem(folder)
        return None
    try:
        document = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        modules, aliases = document["modules"], document.get("aliases") or {}
        name = (
            "encoder"
            if "encoder" in modules
            else next((n for n, d in modules.items() if d.get("type") == "encoder"), "encoder")
        )
        config = ModelDir(folder, {}, modules, {}).encoder_config(name)
        with safe_open(str(folder / WEIGHTS_FILE), framework="pt") as weights:
            names = weights.keys()  # a safe_open handle: header only, no tensor is read
            stored = {key: tuple(weights.get_slice(key).get_shape()) for key in names}
    except CheckpointError as error:
        return error
    except Exception:  # unreadable JSON or weights (SafetensorError, OSError, ...): reported where they are read
        return None
    stored |= {alias: stored[target] for alias, target in aliases.items() if target in stored}
    prefix = name + "."
    shapes = {key[len(prefix) :]: shape for key, shape in stored.items() if key.startswith(prefix)}
    try:
        _check_encoder_state(config, shapes, folder / META_FILE, name, folder / WEIGHTS_FILE, complete=True)
    except CheckpointError as error:
        return error
    return None


def _check_encoder_state(
    config: EncoderConfig,
    shapes: Mapping[str, tuple[int, ...]],
    source: Path,
    name: str,
    weights: Path,
    complete: bool = False,
) -> None:
    """The weights (`weights`, their `shapes` by tensor name) fit the config `source` records (its
    vocab_size edited; with `complete`, also a truncated or hand-edited model.safetensors that lacks
    tensors or has others): callers load them with a bare `load_state_dict`, whose RuntimeError
    would name neither file nor tensor, and only once training is set up. Shapes come from the HF
    importer's table, so no module is built (a large encoder's init is slow)."""
    from xfer.transformer.hf import _expected_shapes

    expected = _expected_shapes(config)
    for problem, keys in (
        ("missing", [k for k in expected if k not in shapes]),
        ("unexpected", sorted(set(shapes) - set(expected))),
    ):
        if keys and complete:
            shown = ", ".join(f"{name}.{k}" for k in keys[:3]) + (f" (+{len(keys) - 3} more)" if len(keys) > 3 else "")
            raise CheckpointError(
                f"{weights}: {problem} tensors of module {name!r} for the encoder {source} records: {shown} "
                "(a truncated, partly copied or hand-edited weights file?)"
            )
    for key, shape in expected.items():
        if key in shapes and tuple(shapes[key]) != shape:
            raise CheckpointError(
                f"{source}: weights of module {name!r} do not match its recorded config: {key!r} has shape "
                f"{tuple(shapes[key])}, the config gives {shape}"
            )

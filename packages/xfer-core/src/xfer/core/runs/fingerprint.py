"""Stage fingerprints that cannot go stale, and the reasons a stage runs again.

A stage is skipped only when everything it depends on is unchanged. Its fingerprint signs:

- `config`: its resolved config (defaults filled in, paths absolute; a knob declared with
  `unsigned_at=V` is left out while it holds V) and the recipe seed;
- `components`: the stage component and every task/objective its config names (and every metric
  it names by string), each with its component version and the name and version of the
  distribution that provides it;
- `inputs`: the *contents* of every file it reads from outside the run — every path-typed value
  of its config at any depth (task data files, `init:` folders, every file a glob matches: the
  matched list itself is signed, so a new file that matches is a change);
- `upstream`: the fingerprints of the stages whose outputs it reads.

Hashing a corpus on every `xfer run` would be slow, so `FileHasher` reuses a file's sha256 while
its (path, size, mtime_ns, inode, ctime_ns) is unchanged, persisted in the run directory. As in
git's index, the ctime is part of it because no tool can set it: a file rewritten in place with
its old size and mtime put back (`cp -p`, `rsync --inplace -t`, `touch -r`) still counts as
changed. A file modified within `RACY_SECONDS` of being hashed is not trusted from the cache (its
next change could keep the same size and timestamp), so it is simply hashed again next time.

The parts are stored in `stage.json` next to the fingerprint, so the runner and `xfer status`
can say *why* a stage reruns: `explain_change(old, new)` lists "input stages.vocab.files: a.txt
changed", "config stages.ft.train.lr: 0.001 -> 0.002", "upstream stage 'vocab' changed", ...
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xfer.core.atomic import read_json, write_json
from xfer.core.config import NOT_AN_INPUT, ComponentRef, Files, Input
from xfer.core.plugins import PluginHost
from xfer.core.recipes.recipe import StagePlan

RACY_SECONDS = 2.0
HASH_CACHE_FILE = ".file-hashes.json"


@dataclass(frozen=True)
class Signature:
    """A stage's fingerprint and the parts it hashes (JSON-able, stored in stage.json)."""

    fingerprint: str
    parts: dict[str, Any]


def file_sha256(path: Path) -> str:
    """The sha256 of a file's contents, read now (`FileHasher` reuses it while the file is unchanged)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


class FileHasher:
    """sha256 of file contents, reused while (path, size, mtime_ns, inode, ctime_ns) is unchanged.

    `cache_file` (optional) persists the table between runs; `hashed` counts the files actually
    read in this process, which is what tests (and curious users) look at.
    """

    def __init__(self, cache_file: Path | None = None):
        self.cache_file = cache_file
        self.table: dict[str, list[Any]] = {}
        if cache_file is not None:
            stored = read_json(cache_file) or {}
            # entries of another layout (before ctime was part of the key) are hashed again once
            self.table = {k: v for k, v in stored.items() if isinstance(v, list) and len(v) == 5}
        self.hashed = 0
        self._dirty = False

    def file(self, path: Path) -> str:
        stat = path.stat()
        key = str(path)
        identity = [stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns]
        cached = self.table.get(key)
        if cached is not None and cached[:4] == identity:
            return str(cached[4])
        started = time.time()
        digest = file_sha256(path)
        self.hashed += 1
        if started - stat.st_mtime_ns / 1e9 > RACY_SECONDS:
            self.table[key] = [*identity, digest]
            self._dirty = True
        else:
            self.table.pop(key, None)
        return digest

    def save(self) -> None:
        if self.cache_file is not None and self._dirty and self.cache_file.parent.is_dir():
            write_json(self.cache_file, self.table, indent=None)
            self._dirty = False


def _sign_path(path: Path, hasher: FileHasher) -> dict[str, str]:
    """{file: sha256} for a file, or for every file under a directory (relative names); a missing
    path is signed as such, so that its later appearance is a change."""
    if path.is_file():
        return {str(path): hasher.file(path)}
    if path.is_dir():
        return {str(path / name): digest for name, digest in output_digests(path, hasher).items()}
    return {str(path): "missing"}


def output_digests(folder: Path, hasher: FileHasher) -> dict[str, str]:
    """{path relative to `folder`: sha256} of every file under `folder` ({} if it is absent), but
    the temporary siblings an interrupted xfer write left (`is_partial_write`).

    Stored in stage.json when a stage completes, so that a later run notices outputs edited,
    truncated or deleted behind its back (`changed_outputs`) instead of building on them.
    """
    if not folder.is_dir():
        return {}
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not is_partial_write(p.relative_to(folder)))
    return {p.relative_to(folder).as_posix(): hasher.file(p) for p in files}


_PARTIAL_WRITE = re.compile(r"\..+\.(?:tmp|old)-[A-Za-z0-9_]+")
"""`.<name>.tmp-<pid>` (`xfer.core.atomic`), `.<name>.tmp-<random>` and `.<name>.old-<random>`
(`save_model_dir`): the temporary siblings xfer writes through, which a kill leaves behind."""


def is_partial_write(relative: Path) -> bool:
    """Whether `relative` is, or lies inside, a temporary sibling an interrupted xfer write left.

    No output of a stage: recorded in its `output_files`, a killed save's copy of a model was
    hashed (gigabytes) at every completion and reported "deleted" once cleaned up."""
    return any(_PARTIAL_WRITE.fullmatch(part) for part in relative.parts)


def changed_outputs(recorded: dict[str, str] | None, folder: Path, hasher: FileHasher) -> tuple[list[str], list[str]]:
    """(modified, deleted): the files of `recorded` (an `output_digests` of `folder`) whose
    contents differ now, and those that are gone, as paths relative to the stage folder.

    Only modified files make a stage stale. A deleted file is taken as pruned on purpose (BAM's
    teacher models once their predictions are cached): what still reads it fails naming it.
    Files added since are not reported: libraries may leave cache files next to what they read.
    `recorded` None (a stage completed by an xfer that did not record digests) reports nothing.
    """
    if not isinstance(recorded, dict):
        return [], []
    modified, deleted = [], []
    for name, digest in sorted(recorded.items()):
        path = folder / name
        if not path.is_file():
            deleted.append(f"outputs/{name}")
        elif hasher.file(path) != digest:
            modified.append(f"outputs/{name}")
    return modified, deleted


def signed_inputs(config: Any, hasher: FileHasher, label: str) -> dict[str, dict[str, str]]:
    """{config path: {file: sha256}} for every file the config reads from outside the run.

    A config dataclass may read files no field names (a folder found beside a path it is given):
    its `implicit_inputs()` returns them as {name: path}, signed under `<its config path>.<name>`,
    so that replacing them makes the stage stale like any input."""
    found: dict[str, dict[str, str]] = {}
    for path, value in config_nodes(config, label, inputs_only=True):
        if isinstance(value, Input):
            if value.path is not None:  # a stage reference is signed by that stage's fingerprint
                found[path] = _sign_path(value.path, hasher)
        elif isinstance(value, Files):
            signed: dict[str, str] = {}
            for pattern in value.patterns:
                matches = sorted(glob.glob(pattern, recursive=True))
                if glob.has_magic(pattern):
                    # the stage reads the files a glob matches, never a folder it matches (`data/*` next to
                    # `data/sub/`, see `StageContext.resolve_files`): signing the folder's files made an
                    # unrelated file under it re-run the stage. A folder written as such is still signed.
                    matches = [m for m in matches if not Path(m).is_dir()]
                for match in matches or [pattern]:
                    signed.update(_sign_path(Path(match), hasher))
            if value.patterns:
                found[path] = signed
        elif isinstance(value, Path):
            found[path] = _sign_path(value, hasher)
        extra = getattr(value, "implicit_inputs", None)
        if callable(extra) and dataclasses.is_dataclass(value) and not isinstance(value, type):
            for name, implied in extra().items():
                found[f"{path}.{name}"] = _sign_path(implied, hasher)
    return found


def config_nodes(value: Any, label: str, *, inputs_only: bool = False) -> Iterator[tuple[str, Any]]:
    """(config path, value) of `value` and of everything inside it, depth first: dataclass fields,
    list items, dict values, and a component reference's config (under the reference's own path).
    `Input`, `Files` and paths are leaves. `inputs_only` skips the fields marked `not_an_input`
    (cache folders the stage writes), which fingerprints must not sign."""
    yield label, value
    if isinstance(value, (Input, Files, Path)):
        return
    if isinstance(value, ComponentRef):
        yield from config_nodes(value.config, label, inputs_only=inputs_only)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if not (inputs_only and f.metadata.get(NOT_AN_INPUT)):
                yield from config_nodes(getattr(value, f.name), f"{label}.{f.name}", inputs_only=inputs_only)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from config_nodes(item, f"{label}.{index}", inputs_only=inputs_only)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from config_nodes(item, f"{label}.{key}", inputs_only=inputs_only)


def file_lists(value: Any, label: str) -> list[tuple[str, Files]]:
    """(config path, value) of every `Files` in a config, at any depth."""
    return [(path, node) for path, node in config_nodes(value, label) if isinstance(node, Files)]


def component_refs(value: Any) -> list[ComponentRef]:
    """Every task/objective reference in a config, at any depth."""
    return [node for _, node in config_nodes(value, "") if isinstance(node, ComponentRef)]


def metric_names(value: Any, host: PluginHost) -> list[str]:
    """Every string in a config, at any depth, that names a registered metric component. Task configs
    name metrics by plain string (`metrics: [kappa]`), not as component references, so a metric
    plugin's new version did not re-run the stages that score with it."""
    return sorted(
        {node for _, node in config_nodes(value, "") if isinstance(node, str) and host.find("metric", node) is not None}
    )


def sign(parts: dict[str, Any]) -> Signature:
    """Hash the parts as canonical JSON: equal values give equal fingerprints however they were
    written (`epochs=2` in a Python default and `epochs: 2.0` read back from YAML are one value)."""
    return Signature(hashlib.sha256(canonical_json(parts).encode()).hexdigest(), parts)


def canonical_json(value: Any) -> str:
    """`value` as the canonical JSON text that fingerprints hash."""
    return json.dumps(_canonical(value), sort_keys=True, default=str)


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def stage_signature(
    plan: StagePlan, seed: int, upstream: dict[str, str], host: PluginHost, hasher: FileHasher
) -> Signature:
    """The fingerprint of one stage of a recipe (see the module docstring for what it signs)."""
    components = {f"stage {plan.kind}": _component(plan.spec.version, plan.spec.provider)}
    for ref in component_refs(plan.config):
        spec = host.find(ref.kind, ref.name)
        components[f"{ref.kind} {ref.name}"] = _component(spec.version, spec.provider) if spec else None
    for name in metric_names(plan.config, host):  # named as plain strings (glue/tsv's `metrics: [...]`)
        spec = host.find("metric", name)
        assert spec is not None
        components[f"metric {name}"] = _component(spec.version, spec.provider)
    return sign(
        {
            "config": plan.resolved(signing=True),
            "seed": seed,
            "components": components,
            "inputs": signed_inputs(plan.config, hasher, f"stages.{plan.name}"),
            "upstream": {d: upstream[d] for d in plan.deps},
        }
    )


def _component(version: str, provider: str) -> dict[str, str]:
    """A component's version and its provider (plugin, distribution and distribution version)."""
    return {"version": version, "provider": provider}


# --- explanations ------------------------------------------------------------------------------


def grown_keys(old: dict[str, Any] | None, new: dict[str, Any], growable: tuple[str, ...]) -> list[str]:
    """The `growable` config keys that grew from the `old` signature parts to the `new` ones, when
    nothing else changed (inputs, components, upstream stages, seed, every other key); else []."""
    if not old or not growable or not isinstance(old.get("config"), dict) or not isinstance(new.get("config"), dict):
        return []
    before, after = dict(old["config"]), dict(new["config"])
    grown = []
    for key in growable:
        a, b = before.pop(key, None), after.pop(key, None)
        if a == b:
            continue
        if not (type(a) is int and type(b) is int and b > a):
            return []
        grown.append(key)
    same_otherwise = canonical_json({**old, "config": before}) == canonical_json({**new, "config": after})
    return grown if same_otherwise else []


def explain_change(old: dict[str, Any] | None, new: dict[str, Any], stage: str = "") -> list[str]:
    """Why `new` differs from `old` (the parts stored with a stage's previous fingerprint).

    One reason per changed input file set, config key, component and upstream stage; a stage
    recorded by an older xfer (no parts) gets one generic reason.
    """
    if not old:
        return ["its previous fingerprint was recorded without details (older run directory)"]
    reasons: list[str] = []
    for label in sorted(set(old.get("inputs", {})) | set(new.get("inputs", {}))):
        reasons += _explain_files(label, old.get("inputs", {}).get(label, {}), new.get("inputs", {}).get(label, {}))
    reasons += _explain_config(old.get("config"), new.get("config"), f"stages.{stage}" if stage else "config")
    old_components, new_components = old.get("components", {}), new.get("components", {})
    for name in sorted(set(old_components) | set(new_components)):
        before, after = old_components.get(name), new_components.get(name)
        if before != after:
            reasons.append(f"component {name}: {_component_text(before)} -> {_component_text(after)}")
    for stage in sorted(set(old.get("upstream", {})) | set(new.get("upstream", {}))):
        if old.get("upstream", {}).get(stage) != new.get("upstream", {}).get(stage):
            reasons.append(f"upstream stage {stage!r} changed")
    if old.get("seed") != new.get("seed"):
        reasons.append(f"seed {old.get('seed')} -> {new.get('seed')}")
    return reasons or ["fingerprint changed"]


def _display_names(paths: list[str]) -> dict[str, str]:
    """Short names for messages: the file name when that is unambiguous, else the full path."""
    names = [Path(p).name for p in paths]
    return {p: (n if names.count(n) == 1 else p) for p, n in zip(paths, names, strict=True)}


def _explain_files(label: str, before: dict[str, str], after: dict[str, str]) -> list[str]:
    shown = _display_names(sorted(set(before) | set(after)))
    changes = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        if old is None or old == "missing":
            changes.append(f"{shown[path]} added")
        elif new is None or new == "missing":
            changes.append(f"{shown[path]} removed")
        else:
            changes.append(f"{shown[path]} changed")
    if not changes:
        return []
    more = f" (and {len(changes) - 3} more)" if len(changes) > 3 else ""
    return [f"input {label}: {', '.join(changes[:3])}{more}"]


def _explain_config(old: Any, new: Any, path: str) -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        reasons = []
        for key in sorted(set(old) | set(new), key=str):
            if key not in old:
                reasons.append(f"{path}.{key} added: {json.dumps(new[key], default=str)}")
            elif key not in new:
                reasons.append(f"{path}.{key} removed")
            else:
                reasons += _explain_config(old[key], new[key], f"{path}.{key}")
        return reasons
    if old != new:
        return [f"{path}: {json.dumps(old, default=str)} -> {json.dumps(new, default=str)}"]
    return []


def _component_text(entry: Any) -> str:
    if not entry:
        return "absent"
    return f"version {entry.get('version')} from {entry.get('provider')}"


def hash_cache_path(run_dir: Path) -> Path:
    """Where a run directory keeps its table of file hashes."""
    return Path(run_dir) / HASH_CACHE_FILE

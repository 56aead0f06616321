"""Recipes: one YAML file (plus optional includes and overrides) -> a validated DAG of stages.

Everything is checked before anything runs, and all problems are reported together:
unknown or misspelled keys at any depth, wrong types, unknown stage kinds and tasks, references
to stages or outputs that do not exist, cycles, missing files and overrides that match nothing.

    name: demo              # optional, defaults to the file name
    seed: 1                 # base seed; stages derive theirs from it
    include: [common.yaml]  # optional; merged below this file's own keys
    stages:
      vocab: {kind: transformer.vocab, files: [data/*.txt], size: 8000}
      finetune: {kind: transformer.finetune, tokenizer: vocab.tokenizer, tasks: [glue/rte]}
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xfer.core.config import FieldError
from xfer.core.errors import Diagnostic, Location, PluginError, RecipeError, UserError
from xfer.core.plugins import PluginHost, default_host
from xfer.core.recipes.schema import (
    INVALID,
    NAME_MAX,  # the run and stage names name folders
    Validator,
    describe,
    did_you_mean,
    resolve_path,
    to_plain,
    unexpanded_hint,
    yaml_word,
)
from xfer.core.recipes.yamlsrc import Node, apply_override, deep_merge, parse_file, parse_override
from xfer.core.specs import ComponentSpec

TOP_LEVEL_KEYS = ("name", "seed", "description", "include", "stages")
MAX_SEED = 2**31
"""Recipe seeds are below this: stages derive seeds by adding trial and rank numbers, and every
generator they reach (Python, numpy, torch, datasets) must take the sum."""
_STAGE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_NAME_VARIABLE = re.compile(r"\$(?:\{|[A-Za-z_])")
"""`${VAR}` or the shell's `$VAR` in a run name, which is taken as written: `name: run-$USER` named the
folder `runs/run-$USER` silently, where `${USER}` was refused."""


@dataclass
class StagePlan:
    """A validated stage: its component, typed config and the stages it reads from."""

    name: str
    kind: str
    spec: ComponentSpec
    config: Any
    deps: tuple[str, ...]
    loc: Location

    def resolved(self, *, signing: bool = False) -> dict[str, Any]:
        """The stage's config with defaults filled in; `signing`: as its fingerprint signs it
        (without knobs at their `unsigned_at` value)."""
        config = to_plain(self.config, signing=signing) if self.config is not None else {}
        return {"kind": self.kind, **config}


@dataclass
class Recipe:
    name: str
    seed: int
    description: str
    path: Path
    stages: dict[str, StagePlan]  # in execution (topological) order
    provenance: dict[str, str]
    overrides: tuple[str, ...] = ()

    def needed_for(self, names: Iterable[str]) -> set[str]:
        """The named stages and every stage they read from, transitively (what `--only` runs).

        An unknown name is a `UserError` with a did-you-mean, so a typo never runs nothing; so is
        no name at all (`--only ""` or `--only ,`, e.g. from an empty shell variable).
        """
        wanted = list(names)
        if not wanted:
            raise UserError(f"--only names no stage: give STAGE[,STAGE] (stages: {', '.join(self.stages)})")
        for name in wanted:
            if name not in self.stages:
                raise UserError(
                    f"--only: recipe {self.name!r} has no stage {name!r}{did_you_mean(name, self.stages)} "
                    f"(stages: {', '.join(self.stages)})"
                )
        needed: set[str] = set()
        while wanted:
            name = wanted.pop()
            if name not in needed:
                needed.add(name)
                wanted.extend(self.stages[name].deps)
        return needed

    def resolved(self, *, signing: bool = False) -> dict[str, Any]:
        """The recipe with every default filled in and paths absolute: what actually runs
        (`signing`: without knobs at their `unsigned_at` value, as fingerprints sign stages)."""
        return {
            "name": self.name,
            "seed": self.seed,
            "description": self.description,
            "stages": {name: plan.resolved(signing=signing) for name, plan in self.stages.items()},
        }

    def dependents(self, stage: str) -> list[str]:
        """Stages that (transitively) read from `stage`."""
        found: list[str] = []
        for name, plan in self.stages.items():
            if any(dep == stage or dep in found for dep in plan.deps):
                found.append(name)
        return found


_Loaded = dict[Path, tuple[Node | RecipeError, list[str]]]
"""Each included file read in one recipe load: its tree with its own includes merged (or the error),
and the layers it added."""


def _load_with_includes(
    path: Path,
    deferred: list[Diagnostic],
    seen: tuple[Path, ...] = (),
    layers: list[str] | None = None,
    loaded: _Loaded | None = None,
) -> Node:
    """The recipe with its includes merged below it; problems that leave the tree well defined
    (a duplicate key, a bad `<<` merge) are added to `deferred`, the others raised.

    `layers` receives the files read, from the lowest (whose keys lose) to the highest (this file).
    `loaded`: the files already read in this load, each read once: twenty files that each include the
    next one twice (`include: [next.yaml, next.yaml]`, or two files that both include it) read the last
    one 2**20 times, and `xfer validate` hung as on a YAML alias bomb."""
    loaded = {} if loaded is None else loaded
    path = path.resolve() if os.path.exists(path) else path  # os.path: Path.exists() raised on a name too long
    root = parse_file(path, deferred)
    if root.value is None:
        # `---` alone (or with comments): an empty document, as an empty file is. It was refused as "got
        # NoneType" (an included file too), where the empty file says the recipe has no 'stages'.
        root = Node({}, Location(str(path), 1, 1), origin=f"{path}:1:1")
    if not root.is_map:
        raise RecipeError(
            [Diagnostic(root.loc, f"a recipe must be a mapping with 'stages', got {describe(root.value)}")]
        )
    include = root.value.pop("include", None)
    if include is None:
        if layers is not None:
            layers.append(str(path))
        return root
    items = include.value if include.is_seq else [include]
    base: Node | None = None
    problems: list[Diagnostic] = []
    for item in items:
        if not isinstance(item.value, str):
            problems.append(Diagnostic(item.loc, "include: expected a file path"))
            continue
        try:
            target = resolve_path(item, item.value)
        except ValueError as exc:  # an unset `${VAR}`
            problems.append(Diagnostic(item.loc, f"include: {exc}"))
            continue
        if os.path.exists(target):
            target = target.resolve()  # a symlink to a file on the include chain is that file: a cycle
        if target in seen or target == path:
            problems.append(Diagnostic(item.loc, f"include cycle: {target} includes itself"))
            continue
        if not os.path.exists(target):
            problems.append(Diagnostic(item.loc, f"include: file not found: {target}{unexpanded_hint(item.value)}"))
            continue
        if os.path.isdir(target):
            problems.append(Diagnostic(item.loc, f"include: {target} is a folder; give a YAML file"))
            continue
        if target in loaded:  # its tree is shared: merging never changes a tree it reads
            part, added = loaded[target]
            if layers is not None:
                layers += added
        else:
            start = len(layers) if layers is not None else 0
            try:
                part = _load_with_includes(target, deferred, (*seen, path), layers, loaded)
            except RecipeError as exc:  # read again, the file would fail again: a cycle below it is one anywhere
                part = exc
            loaded[target] = (part, layers[start:] if layers is not None else [])
        if isinstance(part, RecipeError):
            problems += part.diagnostics
            continue
        base = part if base is None else deep_merge(base, part)
    if problems:
        raise RecipeError(problems)
    if layers is not None:
        layers.append(str(path))
    return deep_merge(base, root) if base is not None else root


def _toposort(plans: dict[str, tuple[Location, tuple[str, ...]]]) -> tuple[list[str], list[Diagnostic]]:
    """Kahn's algorithm; ties keep the recipe's order. Returns (order, cycle diagnostics)."""
    order: list[str] = []
    remaining = dict(plans)
    while remaining:
        ready = [n for n, (_, deps) in remaining.items() if all(d in order or d not in plans for d in deps)]
        if not ready:
            break
        order.append(ready[0])
        del remaining[ready[0]]
    if not remaining:
        return order, []
    # Report each cycle once, at the first of its stages in the recipe, starting there. The stages
    # left that are on no cycle only read from one: they are fine once the cycle is broken.
    diagnostics = []
    reported: set[frozenset[str]] = set()
    for name in remaining:
        path, current = [name], name
        while True:
            nxt = next(d for d in remaining[current][1] if d in remaining)
            if nxt in path:
                cycle = path[path.index(nxt) :]
                break
            path.append(nxt)
            current = nxt
        if frozenset(cycle) in reported:
            continue
        reported.add(frozenset(cycle))
        first = min(cycle, key=list(plans).index)
        start = cycle.index(first)
        ordered = [*cycle[start:], *cycle[:start], first]
        diagnostics.append(Diagnostic(plans[first][0], f"stages form a cycle: {' -> '.join(ordered)}"))
    return order, diagnostics


def load_recipe(
    path: str | Path, overrides: tuple[str, ...] | list[str] = (), host: PluginHost | None = None
) -> Recipe:
    """Parse, merge includes, apply overrides and validate. Raises RecipeError listing every problem."""
    from xfer.core.plugins import recipe_host

    with recipe_host(host or default_host()) as scoped:
        return _load_recipe(Path(path), overrides, scoped)


def _load_recipe(path: Path, overrides: tuple[str, ...] | list[str], host: PluginHost) -> Recipe:
    diagnostics: list[Diagnostic] = []  # the file's own problems, found while parsing
    layers: list[str] = []
    try:
        root = _load_with_includes(path, diagnostics, layers=layers)
    except RecipeError as exc:
        raise RecipeError(exc.diagnostics + diagnostics) from None
    written_stages = root.get("stages")  # the stages the files wrote, before overrides replace any
    file_stages = list(written_stages.value) if written_stages is not None and written_stages.is_map else []
    given: dict[tuple[str, ...], tuple[int, str]] = {}  # key path -> (index, text) of its override
    for index, text in enumerate(overrides, start=1):
        try:
            key_path, value = parse_override(text, index)
        except RecipeError as exc:
            diagnostics += exc.diagnostics
            continue
        if key_path and key_path[0] == "include":  # includes are merged before overrides: it would do nothing
            where = Location(f"<override {index}: {text}>", 1, 1)
            message = "include cannot be overridden (files are included before overrides apply); edit the recipe"
            diagnostics.append(Diagnostic(where, message))
            continue
        earlier = given.setdefault(tuple(key_path), (index, text))
        if earlier[0] != index:  # the last would win silently: two values for one key is a mistake
            where = Location(f"<override {index}: {text}>", 1, 1)
            message = f"{'.'.join(key_path)} is already set by override {earlier[0]} ({earlier[1]!r}); give it once"
            diagnostics.append(Diagnostic(where, message))
            continue
        inner = next(
            (given[p] for p in given if len(p) > len(key_path) and p[: len(key_path)] == tuple(key_path)), None
        )
        if inner is not None:  # this value would replace the section, and the earlier key in it with it, silently
            where = Location(f"<override {index}: {text}>", 1, 1)
            message = (
                f"{'.'.join(key_path)} replaces what override {inner[0]} ({inner[1]!r}) set inside it; "
                "give the section first and the keys inside it after it"
            )
            diagnostics.append(Diagnostic(where, message))
            continue
        diagnostics += apply_override(root, key_path, value, text, index)

    validator = Validator(component_config=lambda kind, name, node, v: _component_config(host, kind, name, node, v))
    validator.layers = {file: rank for rank, file in enumerate(layers)}  # a file included twice: its higher place
    for key, node in root.value.items():
        if key not in TOP_LEVEL_KEYS:
            validator.error(node.where(), f"unknown top-level key {key!r}{did_you_mean(key, TOP_LEVEL_KEYS)}")
    name = _top(root, "name", str, path.stem, validator)
    where = root.get("name").loc if root.get("name") is not None else root.loc
    if not _is_folder_name(name):
        validator.error(
            where,
            f"name {name!r} names the run directory runs/<name>: it must be one folder name "
            f"(not empty, '.' or '..', no '/' or '\\', no spaces at either end, at most {NAME_MAX} bytes)",
        )
    elif _NAME_VARIABLE.search(name):  # `${VAR}` is expanded in paths only: this would name a folder `runs/${USER}`
        validator.error(
            where,
            f"name {name!r}: the run name is taken as written (${{VAR}} is expanded in paths only); write the "
            "name, or set it on the command line, where your shell expands variables (name=$USER)",
        )
    seed = _top(root, "seed", int, 1, validator)
    if not 0 <= seed < MAX_SEED:  # stages add trial and rank offsets; torch takes < 2**63, numpy < 2**32
        validator.error(root.get("seed").loc, f"seed: must be in 0..{MAX_SEED - 1}, got {seed}")
    description = _top(root, "description", str, "", validator)

    stages_node = root.get("stages")
    kinds: dict[str, tuple[Node, ComponentSpec | None]] = {}
    if stages_node is None:
        validator.error(root.loc, "recipe has no 'stages'")
    elif not stages_node.is_map or not stages_node.value:
        validator.error(stages_node.loc, "'stages' must be a non-empty mapping of stage name -> stage config")
    else:
        for stage_name, node in stages_node.value.items():
            if stage_name not in file_stages and node.origin.startswith("override "):
                # `stages={other: {...}}` added a stage no file wrote, which `stages.other={...}` may not:
                # an override sets what the recipe has, and a misspelt name would run as a stage of its own
                node.created_by_override = True
        written = file_stages
        folded: dict[str, str] = {}  # stage name in lower case -> the first stage so named
        for stage_name, node in stages_node.value.items():
            spec = _stage_spec(host, stage_name, node, validator, written)
            first = folded.setdefault(stage_name.lower(), stage_name) if spec is not None else stage_name
            if first != stage_name:
                # Each stage is a folder of the run directory: on a case-insensitive file system (macOS,
                # Windows) `Fit` wrote its stage.json and checkpoints into `fit`'s folder, and a re-run
                # skipped or resumed one stage from the other's. Refused everywhere, as task names are.
                validator.error(
                    node.where(),
                    f"stages.{stage_name}: stage names {first!r} and {stage_name!r} differ only in case: their "
                    "folders would be one folder on a case-insensitive file system (macOS, Windows); rename one",
                )
                spec = None
            kinds[stage_name] = (node, spec)
    validator.stage_outputs = {n: (spec.outputs if spec else None) for n, (_, spec) in kinds.items()}
    validator.stage_kinds = {
        n: {o: k for o in spec.outputs if (k := spec.output_kind(o)) is not None}
        for n, (_, spec) in kinds.items()
        if spec is not None
    }

    configs: dict[str, tuple[Any, tuple[str, ...]]] = {}
    for stage_name, (node, spec) in kinds.items():
        if spec is None:
            continue
        validator.refs = set()
        config_cls = _config_class(host, spec, node, validator)
        if config_cls is INVALID:
            continue
        if config_cls is None:
            extra = [k for k in node.value if k != "kind"]
            for key in extra:
                validator.error(
                    node.value[key].where(),
                    f"stages.{stage_name}: stage kind {spec.name!r} takes no config (got {key!r})",
                )
            config = None
        else:
            config = validator.dataclass(node, config_cls, f"stages.{stage_name}", skip=("kind",))
        if config is not INVALID:
            configs[stage_name] = (config, tuple(sorted(validator.refs)))

    for stage_name, (config, deps) in configs.items():
        _check_upstream(stage_name, config, {d: configs[d][0] for d in deps if d in configs}, kinds, validator)
    order, cycle_problems = _toposort({n: (kinds[n][0].where(), deps) for n, (_, deps) in configs.items()})
    diagnostics += validator.diagnostics + cycle_problems
    if diagnostics:
        raise RecipeError(diagnostics)
    plans = {
        n: StagePlan(n, kinds[n][1].name, kinds[n][1], configs[n][0], configs[n][1], kinds[n][0].where()) for n in order
    }
    return Recipe(name, seed, description, path.resolve(), plans, validator.provenance, tuple(overrides))


def _check_upstream(
    stage_name: str, config: Any, upstream: dict[str, Any], kinds: dict[str, Any], validator: Validator
) -> None:
    """A config's `check_upstream(configs)`: checks against the configs of the stages it reads (a
    student's tasks against those its teachers stage predicts), so that a mismatch is a recipe error
    at its key rather than a failure once the earlier stages have trained."""
    check = getattr(config, "check_upstream", None)
    if not callable(check):
        return
    try:
        check(upstream)
    except FieldError as exc:  # an override of an upstream stage may be what broke it: name those too
        involved = [kinds[name][0] for name in upstream]
        validator.field_error(kinds[stage_name][0], f"stages.{stage_name}", exc, involved)


def _is_folder_name(name: str) -> bool:
    """True for a name that `runs/<name>` keeps inside `runs/` ("../x", "/abs" and "" do not)."""
    return (
        name not in ("", ".", "..")
        and not any(c in name for c in "/\\\0")
        and name == name.strip()
        and _fits_a_folder_name(name)
    )


def _fits_a_folder_name(name: str) -> bool:
    """A longer name, or one with a lone surrogate (`"\\ud800"`), passed validation and crashed the run
    where it made the folder (ENAMETOOLONG, UnicodeEncodeError)."""
    try:
        return len(name.encode("utf-8")) <= NAME_MAX
    except UnicodeEncodeError:
        return False


def _top(root: Node, key: str, tp: type, default: Any, validator: Validator) -> Any:
    node = root.get(key)
    if node is None:
        validator.provenance[key] = "default"
        return default
    value = validator.value(node, tp, key)
    return default if value is INVALID else value


def _stage_spec(
    host: PluginHost, stage_name: str, node: Node, validator: Validator, stages: list[str]
) -> ComponentSpec | None:
    where = node.key_loc or node.loc
    if node.created_by_override:
        hint = did_you_mean(stage_name, stages) or (
            f" (stages: {', '.join(stages)})" if stages else " (the recipe writes no stage, and an override adds none)"
        )
        validator.error(where, f"override matches no stage {stage_name!r}{hint}")
        return None
    if not _STAGE_NAME.match(stage_name):
        validator.error(
            where,
            f"stage name {stage_name!r} must start with a letter or '_', then letters, digits, '_' or '-' (no dots)",
        )
        return None
    if not _fits_a_folder_name(stage_name):  # it names the stage's folder
        validator.error(where, f"stage name {stage_name[:20]}...: at most {NAME_MAX} characters, got {len(stage_name)}")
        return None
    if not node.is_map:
        validator.error(
            node.loc,
            f"stages.{stage_name}: expected a mapping with 'kind', got {describe(node.value)}",
        )
        return None
    kind_node = node.get("kind")
    if kind_node is None:
        # `knd: testing.fit` was only "missing 'kind'": name the key that is likely meant to be it; with no
        # such key, the stage's name may be the typo (an included file's settings for `fiennetune`)
        close = difflib.get_close_matches("kind", list(node.value), n=1, cutoff=0.6)
        near = difflib.get_close_matches(stage_name, [other for other in stages if other != stage_name], n=1)
        hint = (
            f"; is {close[0]!r} meant to be 'kind'?"
            if close
            else f"; or are these settings for the stage {near[0]!r}, under a misspelt name?"
            if near
            else ""
        )
        validator.error(
            node.value[close[0]].where() if close else where,
            f"stages.{stage_name}: missing 'kind' (a stage kind name){hint}",
        )
        return None
    if not isinstance(kind_node.value, str):  # `kind: no`, `kind: [x]` were reported as "missing 'kind'"
        validator.error(
            kind_node.loc,
            f"stages.{stage_name}.kind: expected a stage kind name, got {describe(kind_node.value)}"
            f"{yaml_word(kind_node)}",
        )
        return None
    validator.provenance[f"stages.{stage_name}.kind"] = kind_node.origin
    try:
        return host.get("stage", kind_node.value)
    except PluginError as exc:
        message = str(exc)
        if message.startswith("unknown stage"):
            message = "unknown stage kind" + message[len("unknown stage") :]
        validator.error(kind_node.loc, f"stages.{stage_name}.kind: {message}")
        return None


def _config_class(host: PluginHost, spec: ComponentSpec, node: Node, validator: Validator) -> Any:
    try:
        cls = host.config_class(spec.kind, spec.name)
    except PluginError as exc:
        return validator.error(node.loc, str(exc))
    if cls is not None and not dataclasses.is_dataclass(cls):
        return validator.error(
            node.loc, f"{spec.kind} {spec.name!r}: its config {cls!r} is not a dataclass (plugin bug)"
        )
    return cls


def _component_config(host: PluginHost, kind: str, name: str, node: Node, validator: Validator) -> Any:
    where = node.get("name").loc if node.is_map else node.loc
    if host.find(kind, name) is None:
        return validator.error(where, host.missing_message(kind, name))
    try:
        return host.config_class(kind, name)
    except PluginError as exc:
        return validator.error(where, str(exc))

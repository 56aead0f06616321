"""Strict, typed validation of YAML nodes against config dataclasses.

`Validator.value(node, type, path)` converts a located YAML node into the Python value the type
asks for, or records a `Diagnostic` at the node's position and returns `INVALID`. It never stops
at the first problem, so `xfer validate` can report everything at once. Supported types: bool,
int, float, str, Path (relative to the YAML file's folder), `ExistingPath`, Literal, unions and
Optional, list/tuple/dict, nested dataclasses, and the recipe types `Input`, `Files`, `TaskRef`.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import glob
import inspect
import math
import os
import re
import sys
import types
import typing
import weakref
from collections.abc import Callable, MutableSequence, Sequence
from pathlib import Path
from typing import Any, Literal, Union

from xfer.core.config import (
    NOT_AN_INPUT,
    REQUIRED_IN_RECIPES,
    SIGNED_AS,
    TAKES,
    UNSIGNED_AT,
    ComponentRef,
    FieldError,
    Files,
    Input,
    KeysOf,
    LocalOrName,
    MustExist,
    TaskRef,
    bound_problem,
    task_alias_problem,
)
from xfer.core.errors import Diagnostic, Location
from xfer.core.recipes.yamlsrc import Node


class _Invalid:
    def __repr__(self) -> str:
        return "INVALID"


INVALID: Any = _Invalid()
_REFERENCE = re.compile(r"^([A-Za-z_][\w-]*)\.([A-Za-z_]\w*)$")


def did_you_mean(word: str, candidates: typing.Iterable[str]) -> str:
    """'; did you mean 'x'?' for the closest candidate; else the candidates that have `word` as one
    of their `_`-separated parts (`views` -> tagging_views, parsing_views, ...); else ''."""
    candidates = list(candidates)
    match = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    if match:
        return f"; did you mean {match[0]!r}?"
    parts = sorted(c for c in candidates if word and word.lower() in c.lower().split("_"))
    if len(parts) == 1:
        return f"; did you mean {parts[0]!r}?"
    return f"; did you mean one of {', '.join(map(repr, parts))}?" if parts else ""


def _nested_home(key: str, hints: dict[str, Any], fields: dict[str, Any]) -> str:
    """'; it belongs under 'train' (train.steps)' when `key` is a field of a nested section: the
    usual slip (`steps: 10` at stage level) that a spelling suggestion would get wrong."""
    homes = []
    for name in fields:
        inner = typing.get_args(hints[name])[0] if typing.get_origin(hints[name]) is typing.Annotated else hints[name]
        if dataclasses.is_dataclass(inner) and key in {f.name for f in dataclasses.fields(inner) if f.init}:
            homes.append(name)
    if len(homes) != 1:
        return ""
    return f"; it belongs under {homes[0]!r} ({homes[0]}.{key})"


def type_name(tp: Any) -> str:
    """Human description of a type for error messages ("an integer", "a list of strings")."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        names = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin in (list, tuple, Sequence, MutableSequence):
        return f"a list of {plural(type_name(args[0]))}" if args else "a list"
    if origin is dict:
        return f"a mapping to {plural(type_name(args[1]))}" if args else "a mapping"
    if tp in (list, tuple, Sequence, MutableSequence):
        return "a list"
    if tp is dict:
        return "a mapping"
    if isinstance(tp, type) and issubclass(tp, ComponentRef):
        return f"{_article(tp.kind)} {tp.kind} name or a mapping with 'name'"
    if dataclasses.is_dataclass(tp) and tp not in _SIMPLE_NAMES:
        return "a mapping"
    return _SIMPLE_NAMES.get(tp) or {
        bool: "true or false",
        int: "an integer",
        float: "a number",
        str: "a string",
        Path: "a path",
        Input: "a stage output like 'stage.output' or a path",
        Files: "a file pattern or a list of them",
        type(None): "null",
        Any: "any value",
    }.get(tp, getattr(tp, "__name__", str(tp)))


_SIMPLE_NAMES: dict[Any, str] = {
    Input: "a stage output like 'stage.output' or a path",
    Files: "a file pattern or a list of them",
}
_PLURALS = {"null": "nulls", "any value": "values"}


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def plural(description: str) -> str:
    """'an integer or a string' -> 'integers or strings': type names read as English in lists."""
    parts: list[str] = []
    for part in description.replace("true or false", "boolean").split(" or "):
        part = _PLURALS.get(part.strip(), part.strip())
        words = part.split(" ")
        if words[0] in ("a", "an"):
            words = words[1:]
        # The head noun: "task name" -> "task names", "stage output like ..." -> "stage outputs like ...".
        head = 1 if len(words) > 1 and words[1] in ("name", "output", "pattern") else 0
        if not words[head].endswith("s"):
            words[head] += "s"
        parts.append(" ".join(words))
    return " or ".join(parts)


def describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def yaml_word(node: Node) -> str:
    """A hint, "(YAML reads no as false: write 'no' in quotes ...)", for a word YAML 1.1 reads as a boolean
    or null: the message would otherwise say "got bool False" to someone who wrote `target_lang: no`."""
    if not node.text or node.text.lower() in ("true", "false", "null", ""):
        return ""
    meaning = "null" if node.value is None else str(node.value).lower()
    return f" (YAML reads {node.text} as {meaning}: write '{node.text}' in quotes if you mean the word)"


def base_dir(node: Node) -> Path:
    """Relative paths resolve against the folder of the YAML file that wrote them (overrides: cwd)."""
    file = node.loc.file
    return Path.cwd() if file.startswith("<") else Path(file).resolve().parent


NAME_MAX = 255
"""The longest file or folder name (in bytes) of common file systems."""

_ENV_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_ESCAPED = "$${"
"""Written for a literal `${` in a path (a folder named `a${b}`, a glob): without it no path could hold
one (`${b}` is a variable, and what is left unexpanded is refused), and `$${B}` silently became `$` + B."""
_ENV_VAR_OR_ESCAPED = re.compile(re.escape(_ESCAPED) + "|" + _ENV_VAR.pattern)


def expand_env(text: str, *, escaped: str = "${") -> str:
    """`${VAR}` / `${VAR:-default}` in paths, so one recipe serves machines with data elsewhere.

    An unset variable without a default is an error (a silently empty path would point elsewhere;
    `resolve_path` refuses one set to nothing too). `:-` means what it means in a shell: the default
    replaces an unset *or empty* variable; `XFER_DATA= xfer run` turned `${XFER_DATA:-../data}/glue`
    into `/glue`. `$${` is a literal `${` (`escaped`: what it becomes, for a check of what is left
    unexpanded); a `$` elsewhere is text."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == _ESCAPED:
            return escaped
        name, default = match.group(1), match.group(2)
        value = os.environ.get(name)
        if value is None and default is None:
            raise ValueError(f"environment variable {name} is not set (write ${{{name}:-default}} to give a default)")
        return value if value or default is None else default

    return _ENV_VAR_OR_ESCAPED.sub(substitute, text)


_UNEXPANDED = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def unexpanded_hint(text: Any) -> str:
    """' (only ${VAR} is expanded: write ${HOME} for $HOME)' for a path not found that holds a `$VAR`:
    the shell habit, which the error would otherwise show as a folder literally named `$HOME`."""
    match = _UNEXPANDED.search(text) if isinstance(text, str) else None
    return f" (only ${{VAR}} is expanded: write ${{{match[1]}}} for ${match[1]})" if match else ""


def resolve_path(node: Node, text: str) -> Path:
    """`text` as an absolute path; a ValueError says why it is none (an unset `${VAR}`, a NUL or lone
    surrogate character: the operating system refuses those, and `glob` or `mkdir` raised far from the recipe)."""
    expanded = os.path.expanduser(expand_env(text))
    if not expanded.strip():  # `${DATA:-}` alone named the folder of the YAML file: `init:` took it silently
        raise ValueError(f"{text!r} expands to an empty path (a variable set to nothing, or an empty default)")
    empty, end = [], 0  # the variables set to nothing that the text starts with (`${ROOT}${SUB}/glue`: both)
    while (var := _ENV_VAR.match(text, end)) and var[2] is None and os.environ.get(var[1]) == "":
        empty.append(var[1])
        end = var.end()
    if empty and text[end:].startswith("/"):
        # `${XFER_DATA}/glue` with XFER_DATA set to "" was `/glue`, at the root: another folder, as an unset
        # variable would be (`${PREFIX}data`, with an empty prefix, stays the relative `data`)
        names = " and ".join(empty)
        raise ValueError(
            f"environment variable{'s' if len(empty) > 1 else ''} {names} {'are' if len(empty) > 1 else 'is'} "
            f"set to nothing, which makes {text!r} the absolute path {expanded!r} "
            f"(write ${{{empty[0]}:-default}} to give a default)"
        )
    # `${A:-${B}}`, `${MY-VAR}`: a folder named `${B}` (a `$${` written for a literal `${` is no such leftover)
    if left := re.search(r"\$\{[^}]*\}?", expand_env(text, escaped="$")):
        raise ValueError(
            f"{text!r}: {left[0]!r} is not expanded (a variable name is letters, digits and '_', and a default "
            "cannot hold another ${VAR}; write $${ for a literal ${)"
        )
    if "\0" in expanded:
        raise ValueError(f"{text!r}: a path cannot contain a NUL character")
    try:
        os.fsencode(expanded)
    except UnicodeEncodeError:  # `"\ud800"` in YAML: a lone surrogate no file system can name
        raise ValueError(f"{text!r}: a path cannot contain a lone surrogate character") from None
    # A longer name is no file on any common file system, and Path.exists() raised OSError
    # (ENAMETOOLONG) on it: a bare traceback from `xfer validate` for `init:` or `include:`.
    longest = max(expanded.split(os.sep), key=lambda part: len(os.fsencode(part)))
    if len(os.fsencode(longest)) > NAME_MAX:
        raise ValueError(
            f"{longest[:20]}...: a file or folder name of {len(os.fsencode(longest))} bytes (at most {NAME_MAX})"
        )
    path = Path(expanded)
    return Path(os.path.normpath(path if path.is_absolute() else base_dir(node) / path))


def _overrides_in(node: Node, found: dict[str, None]) -> None:
    """The command-line overrides (their text) that set `node` or values inside it, in tree order.

    It descends below a value an override set too: a mapping an override created (or gave whole, as
    `train={epochs: 2}`) holds the keys later overrides put in it."""
    if node.origin.startswith("override "):
        quoted = node.origin.removeprefix("override ")
        try:
            found[str(ast.literal_eval(quoted))] = None  # the origin holds the text's repr
        except (ValueError, SyntaxError):
            found[quoted] = None
    for child in node.value.values() if node.is_map else node.value if node.is_seq else ():
        _overrides_in(child, found)


def overrides_in(nodes: Sequence[Node]) -> list[str]:
    """The texts of the command-line overrides that set values among `nodes`, in tree order."""
    found: dict[str, None] = {}
    for node in nodes:
        _overrides_in(node, found)
    return list(found)


def override_note(where: Location, nodes: Sequence[Node]) -> str:
    """' (with command-line override stages.x.y=3)' when a check between keys is reported at `where`
    while overrides set values among `nodes`: the override may be what broke the rule, and the file
    line alone would not say so. The override `where` points into is not named again (its text is in
    the position); empty when none other applies."""
    own = where.file[where.file.index(": ") + 2 : -1] if where.file.startswith("<override ") else None
    texts = [text for text in overrides_in(nodes) if text != own]
    if not texts:
        return ""
    return f" (with command-line override{'s' if len(texts) > 1 else ''} {', '.join(texts)})"


def shown_origin(node: Node) -> str:
    """Where `node`'s value came from, as `xfer show` and the provenance say it.

    A mapping that overrides created (no file wrote it, none gave it whole) is "created by" every
    override inside it: its own origin is only the first of them, so `train.lr=1e-3 train.steps=5`
    labelled the whole section, defaults and `steps` included, `override 'stages.x.train.lr=1e-3'`."""
    if node.is_map and node.written_parent is not None:
        texts = overrides_in([node])
        if texts:
            return f"created by override{'s' if len(texts) > 1 else ''} {', '.join(repr(t) for t in texts)}"
    return node.origin


def files_note(where: Location, node: Node) -> str:
    """' (with batch_size, grad_accum from common.yaml)' when a check between the keys of the mapping
    `node` is reported at `where` while an included file (or the including one) set some of them: the
    line reported may show none of the keys that broke the rule."""
    others: dict[str, list[str]] = {}
    for key, child in node.value.items() if node.is_map else ():
        source = _source_of(child.origin)
        if source != where.file and source != _COMMAND_LINE and child.origin.count(":") >= 2:
            others.setdefault(source, []).append(key)
    return "".join(f" (with {', '.join(keys)} from {source})" for source, keys in others.items())


def section_location(node: Node) -> Location:
    """Where to report a problem of the mapping `node` as a whole (a check between its keys).

    A mapping created by several overrides is reported at the nearest value the file wrote (the
    stage, say), and `override_note` names the overrides: its own position is the first override
    that created it, which blamed `train.log_every=1` for `train.grad_accum=3`."""
    if node.written_parent is not None and len(overrides_in([node])) > 1:
        return node.written_parent
    return node.loc


class Validator:
    """Collects diagnostics while converting nodes; one instance per recipe validation.

    `stage_outputs` maps each stage name to its declared outputs (for `Input` references);
    `component_config(kind, name, node, validator)` returns a component's config class, None
    if it takes none, or INVALID after recording why it is unavailable. `refs` collects every
    stage referenced, for the DAG. `stage_kinds` maps each stage name to the kinds its spec
    declares for its outputs (`ComponentSpec.output_kinds`), checked against a field's `takes`.
    """

    def __init__(
        self,
        stage_outputs: dict[str, tuple[str, ...] | None] | None = None,
        component_config: Callable[[str, str, Node, Validator], type | _Invalid | None] | None = None,
    ):
        self.diagnostics: list[Diagnostic] = []
        self.provenance: dict[str, str] = {}
        self.stage_outputs = stage_outputs or {}
        self.component_config = component_config
        self.refs: set[str] = set()
        self.stage_kinds: dict[str, dict[str, str]] = {}
        # (component description, path of its config) for the config classes being validated
        self.owners: list[tuple[str, str]] = []
        # file -> precedence of its keys (an including file above the files it includes; overrides above
        # all); empty: unknown, and any two different sources count as a split (`_no_split_overrides`)
        self.layers: dict[str, int] = {}

    def error(self, where: Location, message: str) -> Any:
        self.diagnostics.append(Diagnostic(where, message))
        return INVALID

    def wrong_type(self, node: Node, tp: Any, path: str) -> Any:
        return self.error(node.loc, f"{path}: expected {type_name(tp)}, got {describe(node.value)}{yaml_word(node)}")

    # --- entry point --------------------------------------------------------------------------

    def value(self, node: Node, tp: Any, path: str) -> Any:
        self.provenance[path] = shown_origin(node)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if tp is Any:
            return node.to_python()
        if origin is typing.Annotated:
            keys_of = next((a for a in args[1:] if isinstance(a, KeysOf)), None)
            if keys_of is not None:
                return self.keys_of(node, keys_of, path)
            if any(isinstance(a, LocalOrName) for a in args[1:]):
                return self._local_or_name(node, path)
            result = self.value(node, args[0], path)
            if result is not INVALID and any(isinstance(a, MustExist) for a in args[1:]) and not os.path.exists(result):
                return self.error(node.loc, f"{path}: path not found: {result}{unexpanded_hint(node.value)}")
            return result
        if origin is Literal:
            # True == 1: a plugin's `Literal[1, 2]` field took `yes` silently, as True; a choice is returned
            # as declared (`1.0` is the choice 1, as an int field reads it, not the float 1.0)
            scalar = not node.is_map and not node.is_seq
            for choice in args:
                if scalar and isinstance(node.value, bool) == isinstance(choice, bool) and node.value == choice:
                    return choice
            choices = ", ".join(repr(a) for a in args)
            hint = did_you_mean(str(node.value), [str(a) for a in args]) if isinstance(node.value, str) else ""
            return self.error(
                node.loc, f"{path}: {describe(node.value)} is not one of {choices}{hint}{yaml_word(node)}"
            )
        if origin in (Union, types.UnionType):
            return self._union(node, args, path)
        if origin in (list, tuple):
            return self._sequence(node, tp, origin, args, path)
        if origin in (Sequence, MutableSequence):  # `Sequence[str]`: a recipe gives a list
            return self._sequence(node, tp, list, args, path)
        if tp in (list, tuple, Sequence, MutableSequence):  # bare `list`: a list of anything
            return self._sequence(node, tp, tuple if tp is tuple else list, (), path)
        if origin is dict:
            return self._mapping(node, args, path)
        if tp is dict:  # bare `dict`: a mapping of anything
            return self._mapping(node, (), path)
        if tp is Input:
            return self.input(node, path)
        if tp is Files:
            return self.files(node, path)
        if isinstance(tp, type) and issubclass(tp, ComponentRef):
            return self.component(node, tp, path)
        if dataclasses.is_dataclass(tp):
            return self.dataclass(node, tp, path)
        if tp in _SCALARS:
            return _SCALARS[tp](self, node, path)
        return self.unsupported(node, tp, path)

    def unsupported(self, node: Node, tp: Any, path: str) -> Any:
        """A recipe sets a field whose type the schema cannot read (`Callable`, an `Enum`, `set[str]`):
        an error at the value naming the component, its provider and the field. A recipe that leaves
        the field out is fine (the plugin's default is used)."""
        owner, base = self.owners[-1] if self.owners else ("", "")
        field_name = path[len(base) + 1 :] if base and path.startswith(base + ".") else path
        who = f"{owner}: " if owner else ""
        return self.error(
            node.loc,
            f"{path}: {who}config field {field_name!r}: type {_type_text(tp)} cannot be set from a recipe "
            f"(supported: {_SUPPORTED}); leave it out to use the plugin's default",
        )

    # --- composite types -----------------------------------------------------------------------

    def _union(self, node: Node, args: tuple, path: str) -> Any:
        if node.value is None and type(None) in args:
            return None
        candidates = [a for a in args if a is not type(None)]
        if len(candidates) == 1:
            return self.value(node, candidates[0], path)
        for candidate in candidates:
            trial = type(self)(self.stage_outputs, self.component_config)
            trial.stage_kinds = self.stage_kinds
            trial.owners = list(self.owners)
            trial.layers = self.layers
            result = trial.value(node, candidate, path)
            if result is not INVALID:
                self.refs |= trial.refs
                self.provenance.update(trial.provenance)
                return result
        # `eval_every: epcoh` against `int | Literal["epoch"] | None`: suggest the word, as a Literal alone does
        words = [str(w) for c in candidates if typing.get_origin(c) is Literal for w in typing.get_args(c)]
        hint = did_you_mean(node.value, words) if isinstance(node.value, str) and words else yaml_word(node)
        expected = type_name(Union[tuple(args)])  # noqa: UP007
        return self.error(node.loc, f"{path}: expected {expected}, got {describe(node.value)}{hint}")

    def _sequence(self, node: Node, tp: Any, origin: type, args: tuple, path: str) -> Any:
        if node.is_map and node.written_parent is not None and node.value and all(k.isdecimal() for k in node.value):
            # `train.no_decay.0=x` where no file writes the list: the override made a mapping {'0': 'x'},
            # and "expected a list, got a mapping" did not say that the default list cannot be indexed
            return self.error(
                node.loc,
                f"{path}: the recipe writes no list here, so an override cannot set an item of it (the "
                f"default list cannot be indexed); give the whole list: {path}=[...]",
            )
        if not node.is_seq:
            return self.wrong_type(node, tp, path)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(node.value) != len(args):
                return self.error(node.loc, f"{path}: expected exactly {len(args)} items, got {len(node.value)}")
            items = [self.value(n, a, f"{path}.{i}") for i, (n, a) in enumerate(zip(node.value, args, strict=True))]
        else:
            item_type = args[0] if args else Any
            items = [self.value(n, item_type, f"{path}.{i}") for i, n in enumerate(node.value)]
        if any(item is INVALID for item in items):
            return INVALID
        return tuple(items) if origin is tuple else items

    def _mapping(self, node: Node, args: tuple, path: str) -> Any:
        if args and args[0] not in (str, Any):
            # YAML keys are read as written, so strings: a `dict[int, float]` field got {"3": 1.5}, and the
            # plugin's `weights[3]` failed at run time (or `.get(3, default)` silently took the default)
            return self.unsupported(node, dict[args], path)
        if not node.is_map:
            return self.wrong_type(node, dict[args] if args else dict, path)
        value_type = args[1] if args else Any
        result = {key: self.value(child, value_type, f"{path}.{key}") for key, child in node.value.items()}
        return INVALID if any(v is INVALID for v in result.values()) else result

    def dataclass(self, node: Node, cls: type, path: str, skip: tuple[str, ...] = (), base: Any = None) -> Any:
        """Validate a mapping against a dataclass: unknown keys, missing keys, field types.

        `base`: an instance whose values fill keys the mapping leaves out. A field whose default
        is itself a dataclass instance (e.g. a stage's `train: TrainConfig(epochs=3)`) is
        validated with that default as its base, so `train: {lr: 1e-3}` keeps `epochs: 3`.
        """
        owner = _OWNERS.get(cls) if isinstance(cls, type) else None
        if owner is None:
            return self._dataclass(node, cls, path, skip, base)
        self.owners.append((owner, path))
        try:
            return self._dataclass(node, cls, path, skip, base)
        finally:
            self.owners.pop()

    def _dataclass(self, node: Node, cls: type, path: str, skip: tuple[str, ...], base: Any) -> Any:
        if not node.is_map:
            return self.wrong_type(node, cls, path)
        hints = typing.get_type_hints(cls, include_extras=True)
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        values: dict[str, Any] = {}
        ok = True
        for key, child in node.value.items():
            if key in skip:
                continue
            child_path = f"{path}.{key}" if path else key
            if key not in fields:
                # The mapping's own keys (a task's `as:`) are candidates too: `ass: reviews` had no suggestion
                own = [k for k in skip if k not in node.value]
                hint = _nested_home(key, hints, fields) or did_you_mean(key, [*fields, *own])
                self.error(child.where(), f"{child_path}: unknown key {key!r}{hint}")
                ok = False
                continue
            default = _dataclass_default(fields[key])
            if default is not None and type(default) is hints[key] and not isinstance(default, _REFERENCES):
                values[key] = self.dataclass(child, hints[key], child_path, base=default)
                self.provenance[child_path] = shown_origin(child)
            else:
                values[key] = self.value(child, hints[key], child_path)
                if values[key] is not INVALID:
                    values[key] = self._check_field(child, fields[key], values[key], child_path)
            ok &= values[key] is not INVALID
        unset_by = {
            name: key for key in node.value if key in values for name in getattr(cls, "RECIPE_UNSETS", {}).get(key, ())
        }
        ok &= self._no_split_overrides(node, cls, values, path)
        for name, f in fields.items():
            if name in values or name in skip:
                continue
            if name in unset_by and base is not None:  # e.g. `epochs` given alone: not the default's `steps`
                values[name] = None
                self.provenance[f"{path}.{name}" if path else name] = f"unset by {unset_by[name]}"
                continue
            if f.metadata.get(REQUIRED_IN_RECIPES) and (base is None or getattr(base, name) is None):
                self.error(node.loc, f"{path or 'recipe'}: missing required key {name!r}: {_doc_of(f)}")
                ok = False
                continue
            if base is None and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                self.error(node.loc, f"{path or 'recipe'}: missing required key {name!r}")
                ok = False
                continue
            field_path = f"{path}.{name}" if path else name
            self.provenance[field_path] = "default"
            default = getattr(base, name) if base is not None else _field_default(f)
            if isinstance(default, ComponentRef) and default.config is None:
                # A component left out means the same as the component named with no options: its
                # config gets its defaults, so fingerprints and the resolved recipe agree either way.
                default = self.component(Node(default.name, node.loc, origin="default"), type(default), field_path)
                ok &= default is not INVALID
            values[name] = default
        if not ok:
            return INVALID
        try:
            instance = cls(**values)
            # Checks that only recipes must pass (Python callers may build partial configs).
            if callable(getattr(instance, "check_recipe", None)):
                instance.check_recipe()
            return instance
        except FieldError as exc:  # __post_init__ blames one key: report it there
            return self.field_error(node, path, exc)
        except (ValueError, TypeError) as exc:  # __post_init__ cross-field checks
            where = section_location(node)
            return self.error(where, f"{path}: {exc}{override_note(where, [node])}{files_note(where, node)}")

    def _no_split_overrides(self, node: Node, cls: type, values: dict[str, Any], path: str) -> bool:
        """A key and the sibling that overrides it (RECIPE_UNSETS: `steps` overrides `epochs`) set in
        different places — `epochs` by an override, an including file or next to a `<<:` merge,
        `steps` by the file below or the merged mapping — is refused: the lower layer's `steps`
        would silently win over what the upper layer meant. `steps` set above `epochs` (`train.steps=10`
        on the command line, over a file's `epochs: 3`) wins as its layer meant, and passes."""
        ok = True
        for key, siblings in getattr(cls, "RECIPE_UNSETS", {}).items():
            for sibling in siblings:
                if values.get(key) is None or values.get(sibling) is None or sibling not in node.value:
                    continue
                here, there = node.value[key].origin, node.value[sibling].origin
                merged = sibling in node.merged_keys and key not in node.merged_keys  # `{<<: *train, epochs: 3}`
                if merged or self._below(there, here):
                    where = f"{path}." if path else ""
                    self.error(
                        node.value[key].where(),
                        f"{where}{key} ({here}) and {where}{sibling} ({there}) are set in different places, and "
                        f"{sibling} overrides {key}: set {sibling} to null where you set {key} (e.g. "
                        f"`{where}{sibling}=null`), or remove one",
                    )
                    ok = False
        return ok

    def _below(self, origin: str, other: str) -> bool:
        """Whether the value from `origin` lies in a layer below the one from `other` (a file the other's
        file includes; a file, under an override). Without `layers`, any other source counts."""
        source, other_source = _source_of(origin), _source_of(other)
        if source == other_source:
            return False
        top = len(self.layers)  # every override: the command line, above all files
        rank = top if source == _COMMAND_LINE else self.layers.get(source)
        other_rank = top if other_source == _COMMAND_LINE else self.layers.get(other_source)
        if rank is None or other_rank is None:
            return True
        return rank < other_rank

    def field_error(self, node: Node, path: str, exc: FieldError, involved: Sequence[Node] = ()) -> Any:
        """Report `exc` at the line of the key it blames inside the mapping `node` (at `path`).

        A check between keys may fail because of a command-line override of another key than the
        one it blames: the overrides inside `node` (and the `involved` nodes the check also read)
        are named in the message."""
        target = node
        where, section = node.loc, node
        for part in exc.key:
            if target.is_seq:
                target = target.value[int(part)] if part.isdigit() and int(part) < len(target.value) else None
            else:
                target = target.get(part)
            if target is None:
                break
            where, section = target.where(), target
        else:
            section = None  # the blamed key is there: its own position
        note = ""
        if section is not None:  # a key the mapping lacks (a default): the mapping's position
            where = section_location(section) if section.written_parent is not None else where
            note = files_note(where, section)
        note = override_note(where, [node, *involved]) + note
        return self.error(where, f"{'.'.join([path, *exc.key]) if path else '.'.join(exc.key)}: {exc.message}{note}")

    def _check_field(self, node: Node, f: dataclasses.Field, value: Any, path: str) -> Any:
        """The field's recipe-level constraints (knob `required`, bounds) on a converted value."""
        if value is None and f.metadata.get(REQUIRED_IN_RECIPES):
            return self.error(node.loc, f"{path}: required, got null: {_doc_of(f)}")
        if (
            f.metadata.get(NOT_AN_INPUT)
            and isinstance(value, Path)
            and os.path.exists(value)
            and not os.path.isdir(value)
        ):
            # the stage creates its cache folder there: a file in the way failed only when it first wrote
            return self.error(node.loc, f"{path}: {value} is a file; give a folder (created if missing)")
        if f.metadata.get(TAKES) and isinstance(value, Input) and value.is_reference:
            problem = self._wrong_kind(value, f.metadata[TAKES], path)
            if problem:
                return self.error(node.loc, problem)
        if f.metadata.get(TAKES) and isinstance(value, Files):  # `files: fit.discriminator` read its vocab.txt
            problems = [self._wrong_kind(ref, f.metadata[TAKES], path) for ref in value.inputs if ref.is_reference]
            if any(problems):
                return self.error(node.loc, next(p for p in problems if p))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            bounded = any(f.metadata.get(name) is not None for name in ("ge", "gt", "le", "lt"))
            if bounded and not math.isfinite(value):  # `.inf` passes `gt: 0`: a budget of .inf FLOPs, lr .inf
                return self.error(node.loc, f"{path}: must be a finite number, got {value!r}")
            if (broken := bound_problem(value, f.metadata)) is not None:
                return self.error(node.loc, f"{path}: {broken}, got {value!r}")
        return value

    def _wrong_kind(self, ref: Input, takes: tuple[str, ...], path: str) -> str:
        """Why the stage output `ref` does not fit a field that takes `takes`, or '' if it may.

        Only kinds the referenced stage declares are checked (third-party stages may declare none)."""
        outputs = self.stage_kinds.get(ref.stage or "", {})
        kind = outputs.get(ref.output or "")
        if kind is None or kind in takes:
            return ""
        parts = path.split(".")
        current = parts[1] if len(parts) > 2 and parts[0] == "stages" else None
        key = ".".join(parts[2:]) if current is not None else parts[-1]
        fits = [f"{ref.stage}.{o}" for o, k in outputs.items() if k in takes]
        if not fits:  # e.g. `init: vocab.tokenizer`: the recipe's stages whose outputs would do
            fits = [
                f"{stage}.{o}"
                for stage, kinds in self.stage_kinds.items()
                if stage not in (ref.stage, current)
                for o, k in kinds.items()
                if k in takes
            ]
        hint = f" (e.g. {', '.join(fits[:3])})" if fits else ""
        wanted = " or ".join(_kind_phrase(k) for k in takes)
        return f"{path}: {ref} is {_kind_phrase(kind)}; {key} takes {wanted}{hint}"

    def keys_of(self, node: Node, marker: KeysOf, path: str) -> Any:
        """A mapping checked key by key against `marker.fields` (see `config.KeysOf`)."""
        if not node.is_map:
            return self.wrong_type(node, dict, path)
        known = dict(marker.fields)
        result: dict[str, Any] = {}
        ok = True
        for key, child in node.value.items():
            child_path = f"{path}.{key}"
            if key not in known:
                listing = ", ".join(sorted(known))
                self.error(
                    child.where(),
                    f"{child_path}: unknown {marker.what} {key!r}{did_you_mean(key, known)} (valid: {listing})",
                )
                ok = False
                continue
            result[key] = self.value(child, known[key], child_path)
            ok &= result[key] is not INVALID
        return result if ok else INVALID

    # --- recipe types --------------------------------------------------------------------------

    def _local_or_name(self, node: Node, path: str) -> Any:
        """`PathOrName`: the resolved `Path` when the text names an existing file or folder, else the text."""
        text = self.value(node, str, path)
        if text is INVALID:
            return INVALID
        try:
            local = resolve_path(node, text)
        except ValueError as exc:  # a NUL: not a path, so a name (the consumer says if it is none)
            if "${" in text:  # an unset ${VAR}: no name holds one, and the loader failed on '${DS}' at run time
                return self.error(node.loc, f"{path}: {exc}")
            return text
        # a name is expanded as a path is: `dataset: ${DS}` went to the loader as the name '${DS}'
        return local if os.path.exists(local) else expand_env(text)

    def _is_reference(self, node: Node, text: str) -> bool:
        """Whether `text` names a stage output (`corpus.text`) rather than a path. `corpus.txt`, next to
        a stage `corpus` that has no output `txt`, is the file when it exists: it was refused as a
        misspelt output, and only `./corpus.txt` reached the file."""
        match = _REFERENCE.match(text)
        if not match or match.group(1) not in self.stage_outputs:
            return False
        declared = self.stage_outputs[match.group(1)]
        if declared is None or match.group(2) in declared:
            return True
        try:
            return not os.path.exists(resolve_path(node, text))
        except ValueError:
            return True

    def input(self, node: Node, path: str) -> Any:
        if not isinstance(node.value, str) or not node.value:
            return self.wrong_type(node, Input, path)
        text = node.value
        try:
            # What `${VAR}` names is read like written text: `init: ${MODEL}` with MODEL a Hub id, or
            # `${INIT:-pretrain.discriminator}`, was looked for as a folder beside the recipe ("path not found")
            name = expand_env(text)
        except ValueError:  # an unset variable: resolve_path below says so
            name = text
        match = _REFERENCE.match(name)
        if self._is_reference(node, name):
            stage, output = match.groups()
            declared = self.stage_outputs[stage]
            if declared is not None and output not in declared:  # None: the stage's kind is unknown
                listing = ", ".join(declared) or "none"
                return self.error(
                    node.loc,
                    f"{path}: stage {stage!r} has no output {output!r} (outputs: {listing}){did_you_mean(output, declared)}",
                )
            self.refs.add(stage)
            return Input(stage=stage, output=output)
        try:
            resolved = resolve_path(node, text)
        except ValueError as exc:
            return self.error(node.loc, f"{path}: {exc}")
        if os.path.exists(resolved):  # never raises (Path.exists() did, on a directory it may not read)
            return Input(path=resolved)
        from xfer.core import hub

        snapshot = hub.cached_snapshot(name)
        if snapshot is not None:  # `google/electra-small-discriminator`, from the local HF cache
            return Input(path=snapshot)
        if hub.looks_like_hub_id(name):
            return self.error(node.loc, f"{path}: path not found: {resolved}{hub.not_cached_hint(name)}")
        if match:
            stage = match.group(1)
            hint = did_you_mean(stage, self.stage_outputs)
            return self.error(
                node.loc, f"{path}: {text!r} is neither a stage output (no stage {stage!r}{hint}) nor an existing path"
            )
        return self.error(node.loc, f"{path}: path not found: {resolved}{unexpanded_hint(text)}")

    def files(self, node: Node, path: str) -> Any:
        items = node.value if node.is_seq else [node]
        if not items:  # an empty list would train on nothing, or fail at run time far from here
            return self.error(node.loc, f"{path}: give at least one file, glob or stage output (or leave the key out)")
        patterns: list[str] = []
        inputs: list[Input] = []
        ok = True
        for i, item in enumerate(items):
            item_path = f"{path}.{i}" if node.is_seq else path
            if not isinstance(item.value, str) or not item.value:
                self.wrong_type(item, str, item_path)
                ok = False
                continue
            try:  # a variable may name a stage output, as in a stage input (`${CORPUS:-corpus.text}`)
                name = expand_env(item.value)
            except ValueError:  # an unset variable: resolve_path below says so
                name = item.value
            match = _REFERENCE.match(name)
            if self._is_reference(item, name):
                ref = self.input(item, item_path)
                ok &= ref is not INVALID
                if ref is not INVALID:
                    inputs.append(ref)
                continue
            try:
                pattern = str(resolve_path(item, item.value))
            except ValueError as exc:
                self.error(item.loc, f"{item_path}: {exc}")
                ok = False
                continue
            matches = glob.glob(pattern, recursive=True)
            literal = _as_named(pattern)
            if literal is not None:  # `part[1].txt`, `wiki[en]/*.txt`: existing names that read as a glob
                named = glob.glob(literal, recursive=True)
                if not matches:
                    pattern, matches = literal, named
                elif named and not {os.path.normpath(m) for m in named} <= {os.path.normpath(m) for m in matches}:
                    # `part[1].txt` beside `part1.txt`: the glob read `part1.txt`, not the file named as written
                    self.error(item.loc, f"{item_path}: {_named_or_glob(item.value, pattern, literal, named, matches)}")
                    ok = False
                    continue
            if not matches:
                # `corpuss.text`, close to a stage's name, is likelier a misspelt stage output than a file
                near = did_you_mean(match.group(1), self.stage_outputs) if match else ""
                hint = f"; nor is it a stage output (no stage {match.group(1)!r}{near})" if near and match else ""
                hint += unexpanded_hint(item.value)
                self.error(item.loc, f"{item_path}: no file matches {item.value!r} (looked for {pattern}){hint}")
                ok = False
            elif not any(os.path.isfile(m) for m in matches):
                # Readers take files only: a folder here was read as nothing ("the patterns matched
                # nothing"), far from this key. Stage outputs, which are folders, are references above.
                self.error(item.loc, f"{item_path}: {_only_directories(item.value, pattern, matches)}")
                ok = False
            patterns.append(pattern)
        return Files(tuple(patterns), tuple(inputs)) if ok else INVALID

    def component(self, node: Node, ref_type: type[ComponentRef], path: str) -> Any:
        """`name` or `{name: ..., <config>}` for a registered component of `ref_type.kind`."""
        if isinstance(node.value, str):
            name, config_node = node.value, None
        elif node.is_map and node.get("name") is not None and isinstance(node.value["name"].value, str):
            name, config_node = node.value["name"].value, node
            self.provenance[f"{path}.name"] = node.value["name"].origin
        elif node.is_map and node.get("name") is not None:  # "expected ... a mapping with 'name', got a mapping"
            return self.wrong_type(node.value["name"], str, f"{path}.name")
        elif node.is_map:
            keys = ", ".join(map(repr, node.value)) or "none"
            close = difflib.get_close_matches("name", list(node.value), n=1, cutoff=0.6)
            hint = f"; is {close[0]!r} meant to be 'name'?" if close else ""
            return self.error(
                node.loc, f"{path}: missing 'name' (the {ref_type.kind} to use; keys given: {keys}){hint}"
            )
        else:
            return self.wrong_type(node, ref_type, path)
        if self.component_config is None:
            return self.error(node.loc, f"{path}: components cannot be checked here")
        own_keys: tuple[str, ...] = ("name", "as") if ref_type is TaskRef else ("name",)
        extra_ref = {}
        if ref_type is TaskRef and config_node is not None and config_node.get("as") is not None:
            alias = self.task_alias(config_node.value["as"], f"{path}.as")
            if alias is INVALID:
                return INVALID
            extra_ref["alias"] = alias
        config_cls = self.component_config(ref_type.kind, name, node, self)
        if config_cls is INVALID:
            return INVALID
        if config_cls is None:
            extra = next((k for k in (config_node.value if config_node is not None else ()) if k not in own_keys), None)
            if extra is not None:
                return self.error(
                    config_node.value[extra].where(),
                    f"{path}: {ref_type.kind} {name!r} takes no config (got {extra!r})",
                )
            return ref_type(name, None, **extra_ref)
        empty = Node({}, node.loc, origin=node.origin)
        config = self.dataclass(config_node or empty, config_cls, path, skip=own_keys)
        return INVALID if config is INVALID else ref_type(name, config, **extra_ref)

    def task_alias(self, node: Node, path: str) -> Any:
        """A task's `as:` name: a plain folder-safe word, so it can never be another task's name."""
        # `as: no` / `as: on` are read as booleans by YAML 1.1: say so, as for any other string key
        shown = repr(node.value) if isinstance(node.value, str) else f"{describe(node.value)}{yaml_word(node)}"
        problem = task_alias_problem(node.value, shown)  # TaskRef's own check, said here at the key's line
        if problem is not None:
            return self.error(node.where(), f"{path}: {problem}")
        self.provenance[path] = node.origin
        return node.value


# --- checking a config class itself (plugin authors' mistakes) -----------------------------------


def unsupported_type(tp: Any) -> Any:
    """The part of the type `tp` that `Validator.value` cannot read from a recipe (e.g. `set[str]`,
    `Callable`, an `Enum`), or None if all of it can be read. Such a field is fine as long as no
    recipe sets it (`Validator.unsupported`); `config_class_notes` lists it."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any or origin is Literal:
        return None
    if origin is typing.Annotated:
        keys_of = next((a for a in args[1:] if isinstance(a, KeysOf)), None)
        inner = [t for _, t in keys_of.fields] if keys_of is not None else [args[0]]
        return next((bad for t in inner if (bad := unsupported_type(t)) is not None), None)
    if origin in (Union, types.UnionType, list, tuple, Sequence, MutableSequence):
        return next((bad for a in args if a is not Ellipsis and (bad := unsupported_type(a)) is not None), None)
    if origin is dict:
        if args and args[0] not in (str, Any):  # recipe keys are strings: `dict[int, float]` got {"3": ...}
            return tp
        return unsupported_type(args[1]) if args else None
    if tp in (list, tuple, dict, Sequence, MutableSequence):
        return None
    if tp in (Input, Files) or (isinstance(tp, type) and issubclass(tp, ComponentRef)):
        return None
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return None  # its own fields are checked by `config_class_problems`
    if tp in _SCALARS:
        return None
    return tp


_SUPPORTED = "bool, int, float, str, Path, ExistingPath, Literal, X | None, list, tuple, dict[str, X], a dataclass"

_OWNERS: weakref.WeakKeyDictionary[type, str] = weakref.WeakKeyDictionary()


def note_owner(cls: type, owner: str) -> None:
    """Record which component a config class belongs to (`stage 'x.y' from provider`), so that a
    recipe setting one of its unsupported fields is told which component and provider it is."""
    _OWNERS[cls] = owner


def _default_problem(value: Any, tp: Any) -> str | None:
    """Why a Python default clearly does not fit its field's type, or None.

    Clear scalar mismatches count: a non-bool for `bool`, a str/bool/path or a non-integral float
    (1.5) for `int`, a str/bool/path for `float`, a non-str (a Path too) for `str`, a `Literal`
    default outside its choices (recipe.resolved.yaml would then fail validation). None (the
    `x: int = None` idiom), NaN, paths with `${VAR}`, containers (their items too: plugins that
    loaded before these checks keep loading) and types a recipe cannot set are left alone."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if value is None:
        return None
    if origin is typing.Annotated:
        return None if any(isinstance(a, KeysOf) for a in args[1:]) else _default_problem(value, args[0])
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if not members or not all(m in (bool, int, float, str) for m in members):
            return None
        if any(_default_problem(value, m) is None for m in members):
            return None
        return f"expected {type_name(tp)}, got {type(value).__name__}"
    if origin is Literal:
        return None if value in args else f"{value!r} is not one of {', '.join(repr(a) for a in args)}"
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:  # a recipe's int takes 1e4 or 2.0, not 1.5
        ok = not isinstance(value, (str, bytes, bool, os.PathLike)) and (
            not isinstance(value, float) or value.is_integer()
        )
    elif tp is float:
        ok = not isinstance(value, (str, bytes, bool, os.PathLike))
    elif tp is str:
        ok = isinstance(value, str)
    elif isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(value, tp) and tp not in _REFERENCES:
        hints = _hints_or_none(tp)
        for f in dataclasses.fields(tp) if hints is not None else ():
            # a value the class gives by default is checked with the class itself (once)
            if f.init and not _is_own_default(f, getattr(value, f.name)):
                problem = _default_problem(getattr(value, f.name), hints[f.name])  # type: ignore[index]
                if problem is not None:
                    return f"{f.name}: {problem}"
        return None
    else:
        return None
    return None if ok else f"expected {type_name(tp)}, got {type(value).__name__}"


def _hints_or_none(cls: type) -> dict[str, Any] | None:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception:
        return None


def _is_own_default(f: dataclasses.Field, value: Any) -> bool:
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
        return False
    try:
        return bool(_field_default(f) == value)
    except Exception:
        return False


def config_class_problems(cls: Any) -> list[tuple[str | None, str]]:
    """What is wrong with a component's config class as a plugin wrote it, as (field, problem) pairs:
    not a dataclass, annotations that do not resolve, scalar defaults of the wrong type (see
    `_default_problem`). Nested config dataclasses are checked too (field `train.lr`). Field
    types a recipe cannot set are not problems (see `config_class_notes`)."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        what = f"{cls.__module__}.{cls.__qualname__}" if isinstance(cls, type) else repr(cls)
        return [(None, f"{what} is not a dataclass (decorate the class with @dataclass)")]
    problems: list[tuple[str | None, str]] = []
    _check_class(cls, "", problems, [], set())
    return problems


def config_class_notes(cls: Any) -> list[tuple[str, str]]:
    """What a recipe cannot set in a (valid) config class, as (field, note) pairs: fields whose type
    the schema cannot read, defaults whose factory fails. Not errors: recipes that leave those
    fields out work, and a recipe that sets one gets an error at its line."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return []
    notes: list[tuple[str, str]] = []
    _check_class(cls, "", [], notes, set())
    return notes


def _check_class(
    cls: type,
    prefix: str,
    problems: list[tuple[str | None, str]],
    notes: list[tuple[str, str]],
    seen: set[type],
) -> None:
    if cls in seen:
        return
    seen.add(cls)
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:  # a string annotation naming something not importable at run time
        name = _unresolvable_field(cls)
        problems.append(
            (
                prefix + name if name else None,
                f"its type annotation cannot be resolved ({type(exc).__name__}: {exc}); import the names "
                "annotations use at module level (not under `if TYPE_CHECKING:`)",
            )
        )
        return
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp, path = hints[f.name], prefix + f.name
        bad = unsupported_type(tp)
        if bad is not None:
            notes.append((path, f"type {_type_text(bad)} cannot be set from a recipe"))
            continue
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            try:
                default = _field_default(f)
            except Exception as exc:
                notes.append((path, f"its default factory failed: {type(exc).__name__}: {exc}"))
                continue
            problem = _default_problem(default, tp)
            if problem is not None:
                problems.append((path, f"default {default!r} does not fit its type: {problem}"))
        for nested in dataclasses_in(tp):
            _check_class(nested, path + ".", problems, notes, seen)


def dataclasses_in(tp: Any) -> list[type]:
    """Config dataclasses a type holds (itself, or inside Optional/list/dict), references excluded."""
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return [] if issubclass(tp, _REFERENCES) else [tp]
    return [d for a in typing.get_args(tp) for d in dataclasses_in(a)]


def _type_text(tp: Any) -> str:
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return str(tp).replace("typing.", "").replace("collections.abc.", "")


def _unresolvable_field(cls: type) -> str | None:
    """The first field whose string annotation does not evaluate (as `typing.get_type_hints` would)."""
    for f in dataclasses.fields(cls):
        if not isinstance(f.type, str):
            continue
        owner = next((k for k in cls.__mro__ if f.name in inspect.get_annotations(k)), cls)
        module = sys.modules.get(owner.__module__)
        value: Any = f.type
        try:
            for _ in range(3):  # `x: "date | None"` under `from __future__ import annotations` is a string twice
                if isinstance(value, str):
                    value = eval(value, dict(vars(module)) if module else {}, dict(vars(owner)))
        except Exception:
            return f.name
    return None


_COMMAND_LINE = "<command line>"


def _source_of(origin: str) -> str:
    """The file of a `file:line:col` origin; every override is the one command line. (Two overrides,
    `train.epochs=3 train.steps=5`, were refused as set "in different places", with the advice to set
    steps to null, though one `train={epochs: 3, steps: 5}`, or one file, may give both.)"""
    if origin.startswith("override "):
        return _COMMAND_LINE
    return origin.rsplit(":", 2)[0] if origin.count(":") >= 2 else origin


def _kind_phrase(kind: str) -> str:
    """'a model', 'a tokenizer'; plural and mass kinds ('predictions', 'text') take no article."""
    return kind if kind.endswith("s") or kind == "text" else f"{_article(kind)} {kind}"


def _as_named(pattern: str) -> str | None:
    """`pattern` with its leading names that exist as written escaped (`part[1].txt` when that file
    exists, `wiki[en]/*.txt` when that folder does), so that they read as the names; None when no
    name that reads as a glob exists as written (then the pattern is only a glob)."""
    parts = Path(pattern).parts
    folder, escaped = parts[0], [parts[0]]
    for index, part in enumerate(parts[1:], 1):
        candidate = os.path.join(folder, part)
        if not (os.path.isdir(candidate) or (index == len(parts) - 1 and os.path.lexists(candidate))):
            escaped += parts[index:]  # a glob (or a missing name) from here on: read as written
            break
        escaped.append(glob.escape(part))
        folder = candidate
    literal = os.path.join(*escaped)
    return literal if literal != os.path.join(*parts) else None


def _named_or_glob(written: str, pattern: str, literal: str, named: list[str], matches: list[str]) -> str:
    """The error for a pattern whose names exist as written while, as a glob, it matches other files
    (`part[1].txt` beside `part1.txt`, a folder `wiki[en]` beside `wikie`). Either reading was a
    guess: the glob silently read files other than those named, and the names alone would drop
    what the glob matches."""

    def shown(paths: list[str]) -> str:
        return ", ".join(sorted(paths)[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")

    tail = len(Path(written).parts)
    as_written = Path(pattern).parts[-tail:] == Path(written).parts  # no ${VAR} or ~ expanded in it
    escaped = os.path.join(*Path(literal).parts[-tail:]) if as_written else literal
    return (
        f"{written!r} names {shown(named)} as written, but as a glob it matches other files ({shown(matches)}); "
        f"write {escaped!r} to read what it names, or name the files the glob matches instead"
    )


def _only_directories(written: str, pattern: str, matches: list[str]) -> str:
    """The error for a file pattern that matches no regular file: folders (with a glob to write
    instead), or what else it is (a broken symlink, /dev/null or a FIFO were called "directories")."""
    instead = f"give files or a glob such as {written.rstrip('/')}/*.txt"
    if os.path.isdir(pattern):
        return f"{written!r} is a directory; {instead}"
    folders = [m for m in matches if os.path.isdir(m)]
    if folders:
        return f"{written!r} matches only directories (such as {min(folders)}); {instead}"
    example = min(matches)
    what = "a broken symbolic link" if os.path.islink(example) and not os.path.exists(example) else "not a regular file"
    return f"{written!r} matches no regular file ({example} is {what}); give text files"


def _field_default(f: dataclasses.Field) -> Any:
    """A field's default value (a fresh one from its factory: `knob` copies mutable defaults)."""
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]


_REFERENCES = (ComponentRef, Input, Files)
"""Dataclass-valued types that are written as references, never merged key by key into a default."""


def _doc_of(f: dataclasses.Field) -> str:
    """The knob's documentation, first sentence, as a hint in 'missing' messages."""
    doc = str(f.metadata.get("doc", "")).strip()
    return doc.split(". ")[0].rstrip(".") if doc else "no default"


def _dataclass_default(f: dataclasses.Field) -> Any:
    """The field's default if it is a dataclass instance (given via knob's default_factory)."""
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        return value if dataclasses.is_dataclass(value) and not isinstance(value, type) else None
    return None


def _bool(v: Validator, node: Node, path: str) -> Any:
    return node.value if isinstance(node.value, bool) else v.wrong_type(node, bool, path)


def _quoted_number(v: Validator, node: Node, tp: type, path: str) -> Any:
    """`"600"` in quotes is a string; say so rather than silently reading a number."""
    return v.error(
        node.loc, f"{path}: expected {type_name(tp)}, got the quoted string {node.value!r} (remove the quotes)"
    )


# A decimal number in ASCII as YAML writes it (or `inf`/`nan`, which the float checks then judge).
# Python's float() also takes `1e-3_0` (1e-30) and `١٠` (10): a typo would silently become another number.
_DECIMAL = re.compile(
    r"[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)?|[-+]?(?:inf|infinity|nan)",
    re.IGNORECASE,
)


def _decimal(text: str) -> float | None:
    """`text` as a float when it is an ASCII decimal number (underscores between digits allowed), else None."""
    if not _DECIMAL.fullmatch(text):
        return None
    try:
        return float(text)
    except ValueError:  # an underscore float() refuses: `1__0`, `1_.5`
        return None


def _looks_numeric(text: str) -> bool:
    return _decimal(text) is not None


_INT64 = 2**63  # torch, numpy and the checkpoints hold counts and seeds as 64-bit integers


def _int(v: Validator, node: Node, path: str) -> Any:
    number = _int_value(v, node, path)
    if isinstance(number, int) and not -_INT64 <= number < _INT64:  # `steps: 1e100` ran "forever", then overflowed
        return v.error(node.loc, f"{path}: must fit in 64 bits (below 2**63 in size), got {node.value!r}")
    return number


def _int_value(v: Validator, node: Node, path: str) -> Any:
    value = node.value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():  # `1.0e+4`
        return int(value)
    if isinstance(value, str) and node.quoted:
        return _quoted_number(v, node, int, path) if _looks_numeric(value) else v.wrong_type(node, int, path)
    if isinstance(value, str):  # YAML 1.1 reads a plain `1e4` as a string; accept integral numbers
        number = _decimal(value)
        if number is None:
            return v.wrong_type(node, int, path)
        if number.is_integer():
            return int(number)
    return v.wrong_type(node, int, path)


def _float(v: Validator, node: Node, path: str) -> Any:
    number = _float_value(v, node, path)
    if isinstance(number, float) and math.isnan(number):  # no setting means "not a number"; `epochs: .nan` crashed late
        return v.error(node.loc, f"{path}: must be a finite number, got {node.value!r}")
    return number


def _float_value(v: Validator, node: Node, path: str) -> Any:
    value = node.value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer of 309+ digits: float() raised instead of giving inf
            return v.error(node.loc, f"{path}: {len(str(abs(value)))}-digit number is too large for a float")
    if isinstance(value, str) and node.quoted:
        return _quoted_number(v, node, float, path) if _looks_numeric(value) else v.wrong_type(node, float, path)
    if isinstance(value, str):  # YAML 1.1 reads a plain `3e-4` as a string; every user writes it
        number = _decimal(value)
        if number is not None:
            return number
    return v.wrong_type(node, float, path)


def _str(v: Validator, node: Node, path: str) -> Any:
    return node.value if isinstance(node.value, str) else v.wrong_type(node, str, path)


def _path(v: Validator, node: Node, path: str) -> Any:
    if isinstance(node.value, str) and node.value:
        try:
            return resolve_path(node, node.value)
        except ValueError as exc:
            return v.error(node.loc, f"{path}: {exc}")
    return v.wrong_type(node, Path, path)


def _none(v: Validator, node: Node, path: str) -> Any:
    return None if node.value is None else v.wrong_type(node, type(None), path)


_SCALARS: dict[Any, Callable[[Validator, Node, str], Any]] = {
    bool: _bool,
    int: _int,
    float: _float,
    str: _str,
    Path: _path,
    type(None): _none,
}


def to_plain(value: Any, *, signing: bool = False) -> Any:
    """A config value as JSON-able data (for the resolved recipe, fingerprints and `xfer show`).

    `signing=True` gives what fingerprints sign: every field except those holding their
    `knob(unsigned_at=...)` value, and a `knob(signed_as=V)` field as `V`.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if isinstance(value, ComponentRef):
            config = to_plain(value.config, signing=signing) if value.config is not None else {}
            alias = {"as": value.alias} if isinstance(value, TaskRef) and value.alias else {}
            return {"name": value.name, **alias, **config}
        if isinstance(value, Input):
            return str(value)
        if isinstance(value, Files):
            return [*value.patterns, *(str(i) for i in value.inputs)]
        return {
            f.name: to_plain(
                f.metadata[SIGNED_AS] if signing and SIGNED_AS in f.metadata else getattr(value, f.name),
                signing=signing,
            )
            for f in dataclasses.fields(value)
            if not (signing and UNSIGNED_AT in f.metadata and getattr(value, f.name) == f.metadata[UNSIGNED_AT])
        }
    if isinstance(value, dict):
        return {str(k): to_plain(v, signing=signing) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v, signing=signing) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value

"""Component specs: what a plugin registers, cheap to build, heavy parts imported lazily.

A plugin's registration hook returns a list of `ComponentSpec`. The spec names the component
(namespaced: the part before the first `.` or `/` is the plugin's namespace, e.g.
`transformer.finetune`, `glue/rte`), where to import it from (`"package.module:attr"`), its
config dataclass (a class or a lazy path to one), a version that enters run fingerprints (bump
it when the component's behaviour changes) and a one-line summary.
"""

from __future__ import annotations

import difflib
import importlib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, is_dataclass
from typing import Any

KINDS = ("task", "model", "objective", "stage", "metric")

_NAME = re.compile(r"^[a-z][a-z0-9_]*[./][a-z0-9][a-z0-9_.\-/]*$")
# `package.module:attr.sub` (what `import_object` imports).
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
# An `xfer` sub-command (what a shell user types).
_COMMAND = re.compile(r"^[a-z][a-z0-9-]*$")
# An output (referenced in recipes as `<stage>.<output>`, the recipe's reference syntax) or a config key.
_OUTPUT = re.compile(r"^[A-Za-z_]\w*$")


def import_object(path: str) -> Any:
    """Import `"pkg.module:attr.sub"`; errors propagate so the caller can attribute them."""
    module_name, _, attr = path.partition(":")
    if not attr:
        raise ValueError(f"import path {path!r} must look like 'package.module:attribute'")
    obj: Any = importlib.import_module(module_name)
    where = module_name
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            close = difflib.get_close_matches(part, [n for n in dir(obj) if not n.startswith("_")], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise AttributeError(f"{where!r} has no attribute {part!r}{hint}") from None
        where = f"{where}:{part}" if where == module_name else f"{where}.{part}"
    return obj


def namespace_of(name: str) -> str:
    """`glue/rte` -> `glue`; `transformer.finetune` -> `transformer`."""
    return re.split(r"[./]", name, maxsplit=1)[0]


def _caller() -> str:
    """`file:line` of the innermost frame outside this module and the dataclass machinery."""
    frame = sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename in (__file__, "<string>") or frame.f_globals.get("__name__") == "dataclasses"
    ):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else ""


@dataclass(frozen=True)
class ComponentSpec:
    """A registered component. `target` and a string `config` are imported only when used."""

    kind: str
    name: str
    target: str
    version: str
    config: type | str | None = None
    summary: str = ""
    # Stages only: the names of the directories the stage produces, which later stages can
    # reference as `<stage>.<output>` (declared here so recipes validate without importing).
    outputs: tuple[str, ...] = ()
    # Stages only: integer config keys that may grow without invalidating finished work, e.g.
    # `trials` for a stage whose trial N depends on the config and seed + N only: raising one
    # resumes the stage in place (finished trials are read back) instead of starting afresh.
    growable: tuple[str, ...] = ()
    # Stages only: what some outputs hold, as (output, kind) pairs (a mapping is accepted too), e.g.
    # (("discriminator", "model"), ("tokenizer", "tokenizer")). A config field of type `Input` that
    # declares `knob(..., takes=("model",))` then refuses, at validation, a reference to an output of
    # another kind. Outputs left out are unchecked.
    output_kinds: tuple[tuple[str, str], ...] = ()
    # Filled in by the host: which distribution / plugin registered the spec.
    provider: str = field(default="", compare=False)
    # `file:line` of the code that built the spec (set automatically), for errors about its paths.
    defined_at: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.defined_at:
            object.__setattr__(self, "defined_at", _caller())
        if self.kind not in KINDS:
            raise ValueError(f"component {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if not _NAME.match(self.name):
            raise ValueError(
                f"component name {self.name!r} must be namespaced and lower-case, "
                "like 'myplugin.stage' or 'myplugin/task'"
            )
        if not (isinstance(self.target, str) and _IMPORT_PATH.match(self.target)):
            raise ValueError(
                f"component {self.name!r}: target {self.target!r} must be an import path 'package.module:attribute'"
            )
        self._check_config()
        object.__setattr__(self, "outputs", self._names("outputs", self.outputs, _OUTPUT))
        object.__setattr__(self, "growable", self._names("growable", self.growable, _OUTPUT))
        if (self.outputs or self.growable or self.output_kinds) and self.kind != "stage":
            raise ValueError(f"component {self.name!r}: only stages declare outputs, output kinds and growable keys")
        self._check_output_kinds()
        if not isinstance(self.version, str) or not self.version.strip():
            # an int `1` and the string "1" sign different fingerprints: one spelling, always a string
            raise ValueError(
                f'component {self.name!r}: version must be a non-empty string (e.g. version="1"), got {self.version!r}'
            )
        if not isinstance(self.summary, str):
            raise ValueError(f"component {self.name!r}: summary must be a string, got {type(self.summary).__name__}")

    def _check_config(self) -> None:
        """`config` is None, a class, or a lazy 'module:Class' path; anything else (an instance of
        the config class, a dict) only failed much later, inside the import machinery."""
        config = self.config
        if config is None or isinstance(config, type):
            return
        if isinstance(config, str) and _IMPORT_PATH.match(config):
            return
        if isinstance(config, str):
            raise ValueError(
                f"component {self.name!r}: config {config!r} must be an import path 'package.module:Class'"
            )
        hint = " (pass the class, not an instance of it)" if is_dataclass(config) else ""
        raise ValueError(
            f"component {self.name!r}: config must be a dataclass, an import path 'package.module:Class' or None, "
            f"got {type(config).__name__}{hint}"
        )

    def _names(self, key: str, value: object, pattern: re.Pattern[str]) -> tuple[str, ...]:
        """`outputs` / `growable` as a tuple of distinct names. A bare string is refused: `("model")`
        (a forgotten trailing comma) would otherwise be split into the outputs m, o, d, e, l, and
        the stage fail after running for not writing them. A list is accepted (as a tuple)."""
        if isinstance(value, str):
            raise ValueError(
                f"component {self.name!r}: {key} must be a tuple of names, got the string {value!r} "
                f"(write ({value!r},) with a trailing comma)"
            )
        if not isinstance(value, (tuple, list)):
            raise ValueError(f"component {self.name!r}: {key} must be a tuple of names, got {type(value).__name__}")
        names = tuple(value)
        for name in names:
            if not (isinstance(name, str) and pattern.match(name)):
                raise ValueError(
                    f"component {self.name!r}: {key} holds {name!r}, which is not a name a recipe can write "
                    "(letters, digits and _, not starting with a digit)"
                )
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"component {self.name!r}: {key} gives {', '.join(map(repr, twice))} twice")
        return names

    def _check_output_kinds(self) -> None:
        if isinstance(self.output_kinds, Mapping):  # frozen: store the hashable form
            object.__setattr__(self, "output_kinds", tuple(self.output_kinds.items()))
        seen: set[str] = set()
        for pair in self.output_kinds:
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(p, str) and p for p in pair)):
                raise ValueError(f"component {self.name!r}: output_kinds must be (output, kind) pairs, got {pair!r}")
            output = pair[0]
            if output not in self.outputs:
                listing = ", ".join(self.outputs) or "none"
                raise ValueError(
                    f"component {self.name!r}: output_kinds names {output!r}, which is not a declared output "
                    f"(outputs: {listing})"
                )
            if output in seen:
                raise ValueError(f"component {self.name!r}: output_kinds gives {output!r} twice")
            seen.add(output)

    def output_kind(self, output: str) -> str | None:
        """What `output` holds (`model`, `tokenizer`, ...), or None if the stage does not say."""
        return dict(self.output_kinds).get(output)

    @property
    def namespace(self) -> str:
        return namespace_of(self.name)

    def load(self) -> Any:
        """Import and return the component object (class or function)."""
        return import_object(self.target)

    def config_class(self) -> type | None:
        """The config dataclass (imported if given as a path), or None if the component takes none."""
        if self.config is None or isinstance(self.config, type):
            return self.config
        return import_object(self.config)


@dataclass(frozen=True)
class CommandSpec:
    """A CLI sub-command contributed by a plugin.

    `configure(parser)` adds arguments to an argparse sub-parser; `run(args) -> int` executes it.
    Both are lazy import paths so `xfer --help` stays fast.
    """

    name: str
    help: str
    configure: str
    run: str
    provider: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        """Refuse what only failed when the command was invoked (a `configure` path without its
        `:attribute`) or could never be typed (`xfer "my command"`)."""
        if not (isinstance(self.name, str) and _COMMAND.match(self.name)):
            raise ValueError(f"command name {self.name!r} must be lower-case letters, digits and -, like 'my-command'")
        for key in ("configure", "run"):
            value = getattr(self, key)
            if not (isinstance(value, str) and _IMPORT_PATH.match(value)):
                raise ValueError(
                    f"command {self.name!r}: {key} {value!r} must be an import path 'package.module:function'"
                )

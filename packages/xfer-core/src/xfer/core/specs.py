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
from dataclasses import dataclass, field
from typing import Any

KINDS = ("task", "model", "objective", "stage", "metric")

_NAME = re.compile(r"^[a-z][a-z0-9_]*[./][a-z0-9][a-z0-9_.\-/]*$")


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
        if ":" not in self.target:
            raise ValueError(f"component {self.name!r}: target {self.target!r} must be 'module:attribute'")
        if (self.outputs or self.growable or self.output_kinds) and self.kind != "stage":
            raise ValueError(f"component {self.name!r}: only stages declare outputs, output kinds and growable keys")
        self._check_output_kinds()
        if not self.version:
            raise ValueError(f"component {self.name!r}: version must be a non-empty string")

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

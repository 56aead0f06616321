"""Building blocks for component config dataclasses.

A component's config is a plain dataclass: one `knob(default, "doc")` per setting, so that
`xfer explain` can print every field with its default and documentation, and the recipe
validator can type-check every key. Special value types below carry meaning the validator
understands (paths resolved relative to the YAML file that wrote them, references to earlier
stages' outputs, task references with their own config).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar


def knob(default: Any = dataclasses.MISSING, doc: str = "", **metadata: Any) -> Any:
    """A documented config field. Mutable defaults are copied per instance automatically."""
    meta = {"doc": doc, **metadata}
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    if isinstance(default, (list, dict, set)) or dataclasses.is_dataclass(default):
        return field(default_factory=lambda d=default: copy.deepcopy(d), metadata=meta)
    return field(default=default, metadata=meta)


class MustExist:
    """Marker: a path that must exist when the recipe is validated."""

    def __repr__(self) -> str:
        return "MustExist()"


ExistingPath = Annotated[Path, MustExist()]
"""A file or directory that must exist; relative paths resolve against the YAML file's folder."""


@dataclass(frozen=True)
class Input:
    """Where a stage reads a directory from: an earlier stage's output or an existing path.

    Written in YAML as `pretrain.discriminator` (stage `pretrain`, declared output
    `discriminator`) or as a path. The runner resolves it with `ctx.resolve(input)`.
    """

    stage: str | None = None
    output: str | None = None
    path: Path | None = None

    @property
    def is_reference(self) -> bool:
        return self.stage is not None

    def __str__(self) -> str:
        return f"{self.stage}.{self.output}" if self.stage else str(self.path)


@dataclass(frozen=True)
class Files:
    """A list of files given as paths, glob patterns and/or stage outputs (every `*.txt` inside).

    Each pattern must match at least one file at validation time; matches are sorted so the
    order does not depend on the file system.
    """

    patterns: tuple[str, ...] = ()
    inputs: tuple[Input, ...] = ()


@dataclass(frozen=True)
class ComponentRef:
    """A registered component named in a recipe with its own config: either `name` or
    `{name: name, <config keys>}`; the keys are validated against the component's config class."""

    kind: ClassVar[str] = ""
    name: str
    config: Any = None

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class TaskRef(ComponentRef):
    """A task, e.g. `glue/rte` or `{name: glue/rte, data_dir: ../data/RTE}`."""

    kind: ClassVar[str] = "task"


@dataclass(frozen=True)
class ObjectiveRef(ComponentRef):
    """An objective, e.g. `transformer.sequence` or `{name: example.focal, gamma: 2.0}`."""

    kind: ClassVar[str] = "objective"

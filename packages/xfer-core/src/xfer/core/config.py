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
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar

REQUIRED_IN_RECIPES = "required"
"""Metadata key: the recipe must set the field (to a non-null value), although Python code may
construct the config without it (e.g. a task used only to score predictions)."""

UNSIGNED_AT = "unsigned_at"
"""Metadata key: the value at which stage fingerprints leave the field out (see `knob`)."""

SIGNED_AS = "signed_as"
"""Metadata key: the one value stage fingerprints sign for the field, whatever it holds (see `knob`)."""

NOT_AN_INPUT = "not_an_input"
"""Metadata key: a path-typed field that names an output or cache location, not something the
stage reads: fingerprints do not hash the files there (see `knob`)."""

TAKES = "takes"
"""Metadata key: the output kinds an `Input` field accepts from a stage reference (see `knob`)."""


def bound_problem(value: float, metadata: Any) -> str | None:
    """How `value` breaks the `ge`/`gt`/`le`/`lt` bounds a `knob` records in `metadata`
    ("must be at least 0"), or None. One wording for a recipe's value and a plugin's default."""
    for name, holds, words in (
        ("ge", lambda v, b: v >= b, "at least"),
        ("gt", lambda v, b: v > b, "greater than"),
        ("le", lambda v, b: v <= b, "at most"),
        ("lt", lambda v, b: v < b, "less than"),
    ):
        bound = metadata.get(name)
        if bound is not None and not holds(value, bound):
            shown = f"{bound:,}" if isinstance(bound, int) else f"{bound:g}"  # not 4e+06 for 4_000_000
            return f"must be {words} {shown}"
    return None


def knob(
    default: Any = dataclasses.MISSING,
    doc: str = "",
    *,
    required: bool = False,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    unsigned_at: Any = dataclasses.MISSING,
    signed_as: Any = dataclasses.MISSING,
    not_an_input: bool = False,
    takes: tuple[str, ...] | None = None,
    **metadata: Any,
) -> Any:
    """A documented config field. Mutable defaults are copied per instance automatically.

    `required=True`: recipes must give the field a non-null value (checked at validation with
    the position of the mapping that lacks it), while Python code may still rely on `default`.
    `ge`/`gt`/`le`/`lt`: bounds on a numeric value (`knob(50, "...", ge=1)`), checked by the
    recipe validator at the value's `file:line:col`; non-numeric alternatives of a union
    (`"epoch"`, null) are not bounded.
    `unsigned_at=V`: for a knob added to a component that runs already used. Stage fingerprints
    leave the field out while it holds `V`, the value that reproduces what the component did
    before the knob existed, so adding it does not make every existing run stale. Any other
    value is signed as usual, and so is `V` again if a later default moves away from it.
    `signed_as=V`: for a knob that sets how fast a stage computes, never what (a worker count whose
    outputs are identical for every value): fingerprints sign `V` whatever it holds, so changing
    it re-runs nothing, and it is no recipe change on an existing run directory. `V` is the value
    earlier fingerprints signed (the knob's first default), so they stay valid.
    `not_an_input=True`: a path-typed field where the stage writes (a cache folder); fingerprints
    sign the path but not the contents of the files found there, and a recipe naming an existing
    file there is an error.
    `takes=("model",)`: on an `Input` or `Files` field, the output kinds it reads (see
    `ComponentSpec.output_kinds`): a reference to a stage output of another declared kind is a recipe
    error. Outputs whose stage declares no kind, and paths, are not checked.
    """
    meta = {"doc": doc, **metadata}
    if unsigned_at is not dataclasses.MISSING:
        meta[UNSIGNED_AT] = unsigned_at
    if signed_as is not dataclasses.MISSING:
        meta[SIGNED_AS] = signed_as
    if required:
        meta[REQUIRED_IN_RECIPES] = True
    if not_an_input:
        meta[NOT_AN_INPUT] = True
    if takes is not None:
        if isinstance(takes, str) or not takes or not all(isinstance(k, str) and k for k in takes):
            raise ValueError(f"knob takes= must be a non-empty tuple of output kinds, got {takes!r}")
        meta[TAKES] = tuple(takes)
    for name, bound in (("ge", ge), ("gt", gt), ("le", le), ("lt", lt)):
        if bound is not None:
            meta[name] = bound
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


class LocalOrName:
    """Marker: a string that is a local path when one exists there, else a name (a Hub dataset)."""

    def __repr__(self) -> str:
        return "LocalOrName()"


PathOrName = Annotated[str | Path, LocalOrName()]
"""A local file or folder, or a name another library resolves (`datasets.load_dataset("wikitext")`).

A recipe's text that names an existing path (relative to the YAML file's folder, `${VAR}` expanded)
becomes that `Path`, which the run's fingerprint then signs like any input file: as a plain string
a local dataset was read from the working directory and edited behind a completed stage's back
unnoticed. Anything else stays the string, as written."""


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

    def __str__(self) -> str:
        """As a recipe writes them, for messages (the dataclass repr is an internal detail)."""
        return ", ".join([*self.patterns, *(str(i) for i in self.inputs)])


@dataclass(frozen=True)
class ComponentRef:
    """A registered component named in a recipe with its own config: either `name` or
    `{name: name, <config keys>}`; the keys are validated against the component's config class."""

    kind: ClassVar[str] = ""
    name: str
    config: Any = None

    def __str__(self) -> str:
        return self.name


TASK_ALIAS = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
"""What `as:` may be: a word that is its own folder and module name (stages turn a task name's
`/` into `-`), so it can never be, or be folded into, a registered task's name (those have a `/`)."""


def task_alias_problem(alias: Any, shown: str | None = None) -> str | None:
    """Why `alias` cannot be a task's `as:` name (None: it can). `shown` is how the message quotes
    the value (the recipe validator says how YAML read a non-string)."""
    if isinstance(alias, str) and TASK_ALIAS.fullmatch(alias):
        return None
    return (
        f"{shown if shown is not None else repr(alias)} is not a task alias: use a letter, then letters, digits "
        "or '_' (no '/' or '-': registered task names have them), e.g. `as: reviews`"
    )


@dataclass(frozen=True)
class TaskRef(ComponentRef):
    """A task, e.g. `glue/rte` or `{name: glue/rte, data_dir: ../data/RTE}`.

    `alias` (written `as:` in a recipe) names this entry when one loader serves two datasets in
    a stage, e.g. `{name: glue/tsv, as: reviews, ...}` and `{name: glue/tsv, as: tickets, ...}`:
    stages key results, trial folders, models, teachers' predictions and `task_epochs` by `key`,
    and load the task by `name`.
    """

    kind: ClassVar[str] = "task"
    alias: str | None = None

    def __post_init__(self) -> None:
        """The recipe validator checks `as:` at its file:line (`Validator.task_alias`); a TaskRef built
        in Python (a plugin, a test) is checked here with the same rule: a bad alias (`a/b`, `../x`,
        `glue-rte`, "") went straight into trial, model and prediction folder names."""
        problem = task_alias_problem(self.alias) if self.alias is not None else None
        if problem is not None:
            raise FieldError("as", problem)

    @property
    def key(self) -> str:
        """The name this entry goes by in a stage's outputs: its alias, else its task name."""
        return self.alias or self.name

    def __str__(self) -> str:
        return self.key


def check_distinct_tasks(tasks: Sequence[TaskRef], why: str = "") -> None:
    """A stage names each task once: results, trial folders and models are keyed by task name, so
    a second entry would overwrite or silently reuse the first's. Two entries of one generic
    loader with different data (two `glue/tsv` files) are the case users hit: say what to do."""
    names = [ref.key for ref in tasks]
    repeated = next((name for name in names if names.count(name) > 1), None)
    if repeated is None:
        _check_case_distinct(names, why)
        return
    first, second = [ref for ref in tasks if ref.key == repeated][:2]
    if first.config != second.config:
        message = (
            f"task {repeated!r} is listed twice, with different settings: a stage keys its results and models "
            f"by task name, so give each dataset its own name with `as:`, e.g. {{name: {first.name}, as: "
            f"{_alias_example(first.name)}, ...}}"
        )
    else:
        message = f"task {repeated!r} is listed twice; give each task once"
    raise FieldError("tasks", message + (f" ({why})" if why else ""))


def _check_case_distinct(names: Sequence[str], why: str) -> None:
    """Task keys name folders (trials, models, predictions, results): on a case-insensitive file
    system (macOS, Windows) `as: Reviews` and `as: reviews` shared their folders, so the second
    task reused or overwrote the first's trial results and model. Refused everywhere, so a recipe
    behaves the same on every machine."""
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(name.casefold(), name)
        if other != name:
            message = (
                f"tasks {other!r} and {name!r} differ only in case: their trial, model and prediction folders "
                "would be one folder on a case-insensitive file system (macOS, Windows); give one of them "
                "another name with `as:`"
            )
            raise FieldError("tasks", message + (f" ({why})" if why else ""))


def _alias_example(name: str) -> str:
    """A valid `as:` for the message, from the task's own name (`glue/tsv` -> `tsv_2`)."""
    word = re.sub(r"[^A-Za-z0-9_]", "_", name.rsplit("/", 1)[-1])
    return (word if TASK_ALIAS.fullmatch(word) else f"task_{word}") + "_2"


@dataclass(frozen=True)
class ObjectiveRef(ComponentRef):
    """An objective, e.g. `transformer.sequence` or `{name: example.focal, gamma: 2.0}`."""

    kind: ClassVar[str] = "objective"


# A config class may also define `check_recipe(self) -> None`, raising FieldError / ValueError:
# the recipe validator calls it after construction, for requirements that Python callers need
# not meet (e.g. "data_dir is required when source is 'local'").


class FieldError(ValueError):
    """Raised by a config's `__post_init__` to blame one key: `FieldError(("task_epochs", "glue/rtee"), "...")`.

    The recipe validator reports it at that key's `file:line:col` (the mapping's position when the
    key was not written); elsewhere it is an ordinary ValueError naming the key.
    """

    def __init__(self, key: str | tuple[str, ...], message: str):
        # parts as strings: `FieldError(("layers", 0), ...)` crashed here joining an int
        self.key = (key,) if isinstance(key, str) else tuple(str(part) for part in key)
        self.message = message
        super().__init__(f"{'.'.join(self.key)}: {message}")


@dataclass(frozen=True)
class KeysOf:
    """Marker for `Annotated[dict[str, Any], KeysOf({...})]`: a mapping whose keys must be among
    the given names and whose values are checked against each name's type (did-you-mean for
    unknown keys). The value stays a plain dict of the keys given, e.g. overrides of a preset.
    """

    fields: tuple[tuple[str, Any], ...]
    what: str = "field"

    @classmethod
    def of(cls, fields: dict[str, Any], what: str = "field") -> KeysOf:
        return cls(tuple(fields.items()), what)

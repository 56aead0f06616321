"""`xfer new-plugin NAME`: a ready-to-edit plugin distribution, shaped like plugins/xfer-example.

The scaffold has a task (`NAME/tsv`: text<TAB>label files), an objective (`NAME.weighted`:
class-weighted cross-entropy on top of `transformer.sequence`), conformance tests from
`xfer.testing` and a README. `pip install -e xfer-NAME` and `pytest xfer-NAME` work at once.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import keyword
import os
import re
import shutil
import tempfile
from collections.abc import Collection
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from xfer.core.atomic import as_created
from xfer.core.errors import UserError

_FILES: dict[str, str] = {
    "pyproject.toml": """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "xfer-{name}"
version = "0.1.0"
description = "xfer plugin {name}: a task and an objective"
requires-python = ">=3.11"
dependencies = ["xfer-core>=0.1.0", "xfer-transformer>=0.1.0"]

[project.entry-points.xfer]
{name} = "xfer.{name}.plugin"

[tool.setuptools.packages.find]
where = ["src"]
namespaces = true
""",
    "README.md": """\
# xfer-{name}

An xfer plugin providing

- task `{name}/tsv` — sentence classification from `text<TAB>label` files;
- objective `{name}.weighted` — class-weighted cross-entropy for `transformer.finetune`.

```
pip install -e .        # registers the `xfer` entry point `{name}`
xfer explain task {name}/tsv
pytest tests            # conformance tests from xfer.testing
```
""",
    "src/xfer/{name}/__init__.py": '''\
"""xfer plugin `{name}`."""
''',
    "src/xfer/{name}/plugin.py": '''\
"""Registration hooks: specs only, nothing heavy is imported here."""

from __future__ import annotations

from xfer.core import ComponentSpec, hookimpl


@hookimpl
def xfer_tasks() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            kind="task",
            name="{name}/tsv",  # namespaced: <namespace>/<name> or <namespace>.<name>
            target="xfer.{name}.task:TsvTask",  # imported only when a recipe uses it
            config="xfer.{name}.task:TsvConfig",  # a dataclass; every field a knob(default, "doc")
            version="1",  # part of run fingerprints: bump it when the behaviour changes
            summary="Sentence classification from text<TAB>label files.",
        )
    ]


@hookimpl
def xfer_objectives() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            kind="objective",
            name="{name}.weighted",
            target="xfer.{name}.objective:WeightedObjective",
            config="xfer.{name}.objective:WeightedConfig",
            version="1",
            summary="Class-weighted cross-entropy sentence classification.",
        )
    ]
''',
    "src/xfer/{name}/task.py": '''\
"""`{name}/tsv`: one `text<TAB>label` example per line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xfer.core import DataError, ExistingPath, knob
from xfer.core.metrics import accuracy
from xfer.core.tasks import Example, SentenceExample, Split, Task, missing_predictions
from xfer.core.textfile import read_text, split_lines


@dataclass
class TsvConfig:
    labels: list[str] = knob(doc="All labels in a fixed order.")
    train_file: ExistingPath | None = knob(None, "Training file.")
    dev_file: ExistingPath | None = knob(None, "Development file.")
    test_file: ExistingPath | None = knob(None, "Test file (labels optional).")


class TsvTask(Task):
    type = "classification"
    main_metric = "accuracy"

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.config.labels)

    def examples(self, split: Split) -> list[Example]:
        path = getattr(self.config, f"{{split}}_file")
        if path is None:
            raise DataError(self.name, 0, f"no {{split}}_file configured")
        examples: list[Example] = []
        # read_text: a byte that is not UTF-8 is an error naming the file and line (not a plugin bug)
        for number, line in enumerate(split_lines(path, read_text(path)), start=1):
            columns = line.split("\\t")
            if split == "test" and len(columns) == 1:  # test labels are optional: `text` alone
                columns.append("")
            if len(columns) != 2:
                raise DataError(path, number, f"expected 2 tab-separated columns, got {{len(columns)}}")
            text, label = columns
            if split == "test" and not label:
                examples.append(SentenceExample(f"{{split}}-{{number}}", text, None, None))
                continue
            if label not in self.config.labels:
                raise DataError(path, number, f"unknown label {{label!r}}", key="label")
            examples.append(SentenceExample(f"{{split}}-{{number}}", text, None, label))
        if not examples:
            raise DataError(path, 0, "file has no examples")
        return examples

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        missing = missing_predictions(examples, predictions)
        if missing:
            raise ValueError(f"no prediction for {{missing[:3]}}")
        return {{"accuracy": accuracy([e.label for e in examples], [predictions[e.id] for e in examples])}}
''',
    "src/xfer/{name}/objective.py": '''\
"""`{name}.weighted`: `transformer.sequence` with per-class loss weights."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from xfer.core import FieldError, UserError, knob
from xfer.core.tasks import TaskInfo
from xfer.transformer.encoder import Encoder
from xfer.transformer.objectives import SequenceConfig, SequenceObjective
from xfer.transformer.tokenization import WordPieceTokenizer


@dataclass
class WeightedConfig(SequenceConfig):
    class_weights: list[float] = knob([], "One weight per label, in the task's label order (empty: all 1).")

    def __post_init__(self) -> None:
        # reported at the recipe's `class_weights:` line: a negative weight trained silently (it
        # rewards getting that label wrong), and all zeros made the loss NaN at the first step,
        # which read as a bug in the objective
        if any(not math.isfinite(w) or w < 0 for w in self.class_weights):
            raise FieldError("class_weights", f"weights must be finite and >= 0, got {{self.class_weights}}")
        if self.class_weights and not any(self.class_weights):
            raise FieldError("class_weights", "at least one weight must be > 0 (all zero: no loss to learn from)")


class WeightedObjective(SequenceObjective):
    task_types = ("classification",)

    def __init__(
        self, encoder: Encoder, info: TaskInfo, tokenizer: WordPieceTokenizer, max_length: int, config: WeightedConfig
    ) -> None:
        super().__init__(encoder, info, tokenizer, max_length, config)
        # checked here, where the task's labels are known: a wrong count failed inside the first
        # training step with torch's RuntimeError and a traceback
        weights = self.config.class_weights
        if weights and len(weights) != len(info.labels):
            raise UserError(
                f"objective {name}.weighted: class_weights gives {{len(weights)}} weights, but {{info.name}} has "
                f"{{len(info.labels)}} labels ({{', '.join(info.labels)}})"
            )

    def loss(self, scores: Tensor, labels: Tensor) -> Tensor:
        weights = self.config.class_weights or [1.0] * scores.shape[-1]
        return F.cross_entropy(scores, labels, weight=torch.tensor(weights, device=scores.device))
''',
    "tests/test_{name}.py": '''\
"""Conformance tests from the xfer.testing kit, plus your own."""

from __future__ import annotations

from pathlib import Path

from xfer.testing import ComponentConformance
from xfer.transformer.testing import tiny_finetune_recipe

RECIPE = tiny_finetune_recipe(
    "{{name: {name}/tsv, labels: [neg, pos], train_file: train.tsv, dev_file: dev.tsv}}",
    objective="{{name: {name}.weighted, class_weights: [1.0, 2.0]}}",
    max_length=32,
    steps=6,
    batch_size=4,
    checkpoint_every=2,
)


class Data:
    plugin_modules = ("xfer.{name}.plugin",)

    def prepare(self, directory: Path) -> None:
        rows = [("a good film", "pos"), ("a bad film", "neg")] * 8
        (directory / "train.tsv").write_text("".join(f"{{t}}\\t{{label}}\\n" for t, label in rows))
        (directory / "dev.tsv").write_text("".join(f"{{t}}\\t{{label}}\\n" for t, label in rows[:4]))


class TestTask(Data, ComponentConformance):
    component = ("task", "{name}/tsv")
    config_path = "stages.fit.tasks.0"
    recipe = RECIPE
    kill_at_step = 3


class TestObjective(Data, ComponentConformance):
    component = ("objective", "{name}.weighted")
    config_path = "stages.fit.objective"
    recipe = RECIPE
    kill_at_step = 3
''',
}


def _distribution(point: EntryPoint) -> str:
    """The name of the distribution that declares an entry point (its target when unknown)."""
    return point.dist.name if point.dist is not None else point.value


def scaffold_plugin(name: str, directory: Path | None = None, taken: Collection[str] = ()) -> Path:
    """Write `xfer-<name>/` (or `directory`) and return its path; refuses to overwrite.

    `taken`: plugin namespaces already installed. A name that is one of them, or whose package
    `xfer.<name>` already exists (`xfer.core`, `xfer.testing`, a method package), is refused: the
    new distribution would merge into that package's folder, or register its components twice.
    """
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise UserError(f"plugin name {name!r} must be a lower-case Python identifier (it becomes xfer.{name})")
    # `taken` holds the plugins the command's host loaded: with XFER_PLUGINS or
    # XFER_DISABLE_PLUGIN_AUTOLOAD set, an installed distribution's namespace was missing from it, and
    # the scaffold, once installed, made both distributions' components unusable (a shared namespace).
    owners = sorted({_distribution(point) for point in entry_points(group="xfer") if point.name == name})
    if name in taken or owners:
        by = f" ({', '.join(owners)})" if owners else ""
        raise UserError(f"plugin name {name!r} is taken: an installed plugin{by} already provides namespace {name!r}")
    if importlib.util.find_spec(f"xfer.{name}") is not None:
        raise UserError(f"plugin name {name!r} is taken: package xfer.{name} is already installed")
    # pip compares distribution names with `-`, `_` and `.` as one: installing the scaffold's
    # `xfer-tasks_glue` would have uninstalled xfer-tasks-glue (whose namespace is `glue`), silently.
    try:
        installed = importlib.metadata.distribution(f"xfer-{name}").metadata["Name"]
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed:
        raise UserError(
            f"plugin name {name!r} is taken: its distribution xfer-{name} is the installed {installed} to pip, "
            "which `pip install` would replace"
        )
    target = directory or Path(f"xfer-{name}")
    # a file (or a dangling symlink) in the way was a bare NotADirectoryError/FileExistsError traceback
    if (target.exists() or target.is_symlink()) and not target.is_dir():
        raise UserError(f"{target} already exists and is not a directory; give a new or empty directory")
    if target.exists() and any(target.iterdir()):
        raise UserError(f"{target} already exists and is not empty")
    # Written into a temporary sibling folder and renamed into place: a write failing half-way (a
    # full disk) left a partial plugin under `target`, and the same command run again was refused
    # ("not empty") until the user found and removed it.
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        for relative, template in _FILES.items():
            path = staging / relative.format(name=name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(template.format(name=name), encoding="utf-8")
        if target.is_dir():  # an empty folder given: keep it (its owner, mode, a mount point), fill it
            for child in staging.iterdir():
                os.replace(child, target / child.name)
            staging.rmdir()
        else:
            as_created(staging)  # not mkdtemp's 0o700: as a folder made by mkdir would be
            os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target

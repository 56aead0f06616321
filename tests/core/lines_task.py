"""A minimal file-reading task (`lines/cls`) for core tests: pre-flight, fingerprints."""

# no `from __future__ import annotations`: the validator reads real type objects via get_type_hints
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from xfer.core.config import ExistingPath, Input, knob
from xfer.core.errors import DataError
from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec
from xfer.core.tasks import Example, SentenceExample, Split, Task


@dataclass
class LinesConfig:
    train_file: ExistingPath | None = knob(None, "`text<TAB>label` lines.")
    dev_file: ExistingPath | None = knob(None, "`text<TAB>label` lines.")
    source: Input | None = knob(None, "Unused; lets a test refer to an earlier stage's output.")


class LinesTask(Task):
    """A minimal file-reading task: one `text<TAB>label` example per line, labels a/b."""

    type = "classification"
    main_metric = "accuracy"
    reads: ClassVar[list[tuple[str, str]]] = []  # (task name, split), to see what the pre-flight read

    @property
    def labels(self) -> tuple[str, ...]:
        return ("a", "b")

    def examples(self, split: Split) -> list[Example]:
        LinesTask.reads.append((self.name, split))
        path = getattr(self.config, f"{split}_file")
        if path is None:
            raise DataError(self.name, 0, f"no {split}_file configured")
        examples: list[Example] = []
        for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
            text, sep, label = line.partition("\t")
            if not sep:
                raise DataError(path, number, "expected text<TAB>label")
            if label not in self.labels:
                raise DataError(path, number, f"unknown label {label!r}", key="label")
            examples.append(SentenceExample(f"{split}-{number}", text, label=label))
        return examples

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        return {"accuracy": 100.0 * sum(predictions[e.id] == e.label for e in examples) / len(examples)}


class LinesPlugin:
    version = "1"  # tests bump it to see a component version change re-run a stage

    @staticmethod
    @hookimpl
    def xfer_tasks() -> list[ComponentSpec]:
        return [
            ComponentSpec("task", "lines/cls", f"{__name__}:LinesTask", LinesPlugin.version, LinesConfig, "test task")
        ]


GOOD_LINES = "".join(f"{w} word\t{'a' if i % 2 else 'b'}\n" for i, w in enumerate(["x", "y", "z", "w"] * 8))

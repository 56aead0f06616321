"""`example/jsonl`: sentence classification from JSON-lines files.

Each line is one JSON object: `{"text": "...", "label": "pos"}` (field names configurable; an
optional second text field makes it a sentence-pair task). Every malformed line is an error
naming the file, the line and the field — nothing is skipped silently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xfer.core import DataError, ExistingPath, FieldError, knob
from xfer.core.metrics import accuracy, f1
from xfer.core.tasks import Example, SentenceExample, Split, Task, missing_predictions
from xfer.core.textfile import lone_surrogate, read_text


@dataclass
class JsonlConfig:
    labels: list[str] = knob(doc="All labels, in a fixed order; a label outside this list is an error.")
    train_file: ExistingPath | None = knob(None, "Training data (.jsonl).")
    dev_file: ExistingPath | None = knob(None, "Development data (.jsonl).")
    test_file: ExistingPath | None = knob(None, "Test data (.jsonl); labels optional.")
    text_field: str = knob("text", "Field holding the text.")
    pair_field: str | None = knob(None, "Field holding a second text (sentence-pair task).")
    label_field: str = knob("label", "Field holding the label.")
    id_field: str | None = knob(None, "Field holding a unique id (default: <split>-<line>).")

    def __post_init__(self) -> None:
        if len(self.labels) < 2 or len(set(self.labels)) != len(self.labels):
            raise FieldError("labels", "list at least two distinct labels")  # reported at the key's line


class _DuplicateKeyError(Exception):
    """Raised by `_unique_keys` inside `json.loads` (not a ValueError: that is the invalid-JSON branch)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads` hook refusing a key given twice in one object. JSON readers keep the last value
    silently, so `{"text": "great", "label": "pos", "label": "neg"}` (a hand-merged or re-labelled
    line) trained on "neg" without a word, and the other label was lost."""
    record: dict[str, Any] = {}
    for key, value in pairs:
        if key in record:
            raise _DuplicateKeyError(key)
        record[key] = value
    return record


class JsonlTask(Task):
    """Classification from JSON lines; metrics: accuracy (main) and, for two labels, F1 of the second."""

    type = "classification"
    main_metric = "accuracy"

    def __init__(self, name: str, config: JsonlConfig):
        super().__init__(name, config)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.config.labels)

    def examples(self, split: Split) -> list[Example]:
        path: Path | None = getattr(self.config, f"{split}_file")
        if path is None:
            raise DataError(self.name, 0, f"no {split}_file configured")
        return self._read(Path(path), split)

    def _read(self, path: Path, split: Split) -> list[Example]:
        config = self.config
        examples: list[Example] = []
        seen: set[str] = set()
        lines = read_text(path, allow_empty=True).split("\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line, object_pairs_hook=_unique_keys)
            except _DuplicateKeyError as exc:
                raise DataError(
                    path, number, "given twice in one JSON object (JSON keeps only the last value)", key=exc.key
                ) from None
            except json.JSONDecodeError as exc:
                raise DataError(path, number, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
            except (ValueError, RecursionError) as exc:  # a 4300+-digit integer; nesting too deep
                raise DataError(path, number, f"invalid JSON: {type(exc).__name__}: {exc}") from None
            if not isinstance(record, dict):
                raise DataError(path, number, "each line must be a JSON object")
            text = self._field(record, config.text_field, path, number, text=True)
            pair = self._field(record, config.pair_field, path, number, text=True) if config.pair_field else None
            label = record.get(config.label_field)
            if label is None and split != "test":
                raise DataError(path, number, "missing label", key=config.label_field)
            if label is not None and str(label) not in config.labels:
                raise DataError(path, number, f"label {label!r} is not one of {config.labels}", key=config.label_field)
            example_id = (
                str(self._field(record, config.id_field, path, number)) if config.id_field else f"{split}-{number}"
            )
            if example_id in seen:
                raise DataError(path, number, f"duplicate id {example_id!r}", key=config.id_field)
            seen.add(example_id)
            examples.append(SentenceExample(example_id, text, pair, None if label is None else str(label)))
        if not examples:
            raise DataError(path, 0, "file has no examples")
        return examples

    @staticmethod
    def _field(record: dict, field: str, path: Path, line: int, text: bool = False) -> Any:
        """The field's value: a non-empty string (an id may be an integer too). A number or `true`
        as a text passed here and failed later as the task's bug (`text_a int ..., not strings`),
        not as this line of the user's file."""
        value = record.get(field)
        if value is None or value == "":
            raise DataError(path, line, "missing or empty", key=field)
        if isinstance(value, bool) or not isinstance(value, str if text else str | int):
            got = "a JSON boolean" if isinstance(value, bool) else type(value).__name__
            raise DataError(path, line, f"expected a string, got {got}", key=field)
        if isinstance(value, str) and (bad := lone_surrogate(value)):
            raise DataError(path, line, bad, key=field)
        return value

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        missing = missing_predictions(examples, predictions)
        if missing:
            raise ValueError(f"{self.name}: no prediction for {len(missing)} examples, e.g. {missing[:3]}")
        golds = [e.label for e in examples]  # type: ignore[union-attr]
        preds = [predictions[e.id] for e in examples]
        metrics = {"accuracy": accuracy(golds, preds)}
        if len(self.config.labels) == 2:
            metrics["f1"] = f1(golds, preds, positive=self.config.labels[1])
        return metrics

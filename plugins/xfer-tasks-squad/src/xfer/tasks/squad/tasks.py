"""squad/v1 and squad/v2 task components.

Predictions are answer strings keyed by question id ("" = no answer, meaningful for v2); the
metrics are the official scripts' (see `official.py`), x100 like every task metric in xfer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from xfer.core.atomic import atomic_write_text
from xfer.core.errors import DataError, UserError
from xfer.core.tasks import Example, SpanQAExample, Split, Task, TaskInfo, check_prediction_ids
from xfer.tasks.squad import official
from xfer.tasks.squad.config import SquadConfig
from xfer.tasks.squad.readers import read_squad

SPLITS = ("train", "dev", "test")


class SquadTask(Task):
    """Shared logic of both versions; subclasses fix `version`."""

    type = "span_qa"
    main_metric = "f1"
    version: ClassVar[int]

    def __init__(self, name: str, config: SquadConfig | None = None):
        super().__init__(name, config if config is not None else SquadConfig())
        self._cache: dict[str, list[SpanQAExample]] = {}

    def info(self) -> TaskInfo:
        info = super().info()
        info.extra.update(squad_version="1.1" if self.version == 1 else "2.0", unanswerable=self.version == 2)
        return info

    def examples(self, split: Split) -> list[Example]:
        if split not in SPLITS:
            raise UserError(f"{self.name}: unknown split {split!r} (expected one of {', '.join(SPLITS)})")
        if split not in self._cache:
            path = getattr(self.config, f"{split}_file")
            if path is None:
                # A DataError (a UserError) as the Task contract asks for missing splits; "file" = the task.
                raise DataError(self.name, 0, f"no {split} file configured (set `{split}_file:` in the task config)")
            self._cache[split] = read_squad(Path(path), version=self.version)
        examples = self._cache[split]
        limit = self.config.max_examples
        return list(examples if limit is None else examples[:limit])

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        golds: list[list[str]] = []
        preds: list[str] = []
        for example in examples:
            assert isinstance(example, SpanQAExample)
            if example.id not in predictions:
                raise ValueError(f"{self.name}: no prediction for question {example.id!r}")
            prediction = predictions[example.id]
            if not isinstance(prediction, str):
                raise ValueError(f"{self.name}: prediction for {example.id!r} must be a string, not {prediction!r}")
            if self.version == 1 and not example.answers:
                raise ValueError(f"{self.name}: question {example.id!r} has no gold answer")
            golds.append([answer.text for answer in example.answers])
            preds.append(prediction)
        return official.evaluate(golds, preds, version=self.version)

    def write_predictions(
        self, directory: Path, split: Split, examples: Sequence[Example], predictions: Mapping[str, Any]
    ) -> Path:
        """The official prediction file `<split>-predictions.json`: one JSON object
        `{question id: answer text}` in example order ("" = no answer), answers verbatim.

        The official scripts `json.load` it from `open(path)` in the locale's encoding, so the
        file is pure ASCII (non-ASCII characters as `\\uXXXX` escapes, which decode to the same
        strings): it reads back identically under any locale, not only a UTF-8 one.
        Every question needs exactly one string prediction (a missing one would count as 0 in
        the official scores, `None` would become the answer "None"), and a prediction for an
        unknown question id means predictions of another split: each is a ValueError and
        nothing is written. The file is replaced atomically (never half written).
        """
        check_prediction_ids(self.name, examples, predictions, "question")
        answers: dict[str, str] = {}
        for example in examples:
            answer = predictions[example.id]
            if not isinstance(answer, str):
                raise ValueError(
                    f'{self.name}: prediction for {example.id!r} must be a string ("" = no answer), not {answer!r}'
                )
            answers[example.id] = answer
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{split}-predictions.json"
        atomic_write_text(path, json.dumps(answers, ensure_ascii=True) + "\n")
        return path


class SquadV1Task(SquadTask):
    """squad/v1: SQuAD 1.1, every question answerable; metrics exact_match and f1."""

    version = 1


class SquadV2Task(SquadTask):
    """squad/v2: SQuAD 2.0 with unanswerable questions; exact, f1 and HasAns_/NoAns_ breakdowns."""

    version = 2

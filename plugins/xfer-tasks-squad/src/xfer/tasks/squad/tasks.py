"""squad/v1 and squad/v2 task components.

Predictions are answer strings keyed by question id ("" = no answer, meaningful for v2); the
metrics are the official scripts' (see `official.py`), x100 like every task metric in xfer.
SQuAD 2.0 prediction files come with the best non-null answers and null odds that the official
script's no-answer threshold search needs (see `SquadTask.write_predictions`).
"""

from __future__ import annotations

import json
import math
import numbers
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
_EXTRAS = ("non-null-predictions", "null-odds")
"""`<split>-<name>.json` files written beside SQuAD 2.0 predictions for the official threshold search."""
_INFINITE_ODDS = 1e30
"""Null odds written for +-inf (a question without any candidate span): JSON has no Infinity."""


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
            # the test split may be blind (unlabelled questions, as the official hidden test sets)
            self._cache[split] = read_squad(Path(path), version=self.version, blind=split == "test")
        examples = self._cache[split]
        limit = self.config.max_examples
        return list(examples if limit is None else examples[:limit])

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        """The official scores of `predictions`, which must hold exactly the questions of `examples`.

        The official scripts print a line for a missing prediction (v1.1 scores it 0, v2.0 leaves
        it out of the total) and ignore predictions for question ids not in the dataset. Here
        both are a ValueError naming the first id and the count: a prediction for an unknown id
        means predictions of another split or file, whose scores would otherwise look valid while
        measuring other questions than the caller meant (`write_predictions` refused them already)."""
        check_prediction_ids(self.name, examples, predictions, "question")
        golds: list[list[str]] = []
        preds: list[str] = []
        for example in examples:
            assert isinstance(example, SpanQAExample)
            prediction = predictions[example.id]
            if not isinstance(prediction, str):
                raise ValueError(f"{self.name}: prediction for {example.id!r} must be a string, not {prediction!r}")
            if not example.answers and not example.is_impossible:
                # The Task contract's unlabelled question (a hidden test set's): the official v2.0
                # scorer takes no answers for "unanswerable", so "" scored it 100, a score of nothing.
                # First, so that squad/v1 names a blind test set too (not only "no gold answer").
                raise ValueError(
                    f"{self.name}: question {example.id!r} has no answers and is not is_impossible: an unlabelled "
                    "question (a blind test set: predict and write it, do not score it) cannot be scored"
                )
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

        SQuAD 2.0, when `predictions` carries them (the `best_non_null` and `null_odds`
        attributes of `transformer.span_qa`'s `SpanQAPredictions`), also writes beside it what
        the official script's `--na-prob-file` threshold search needs, as ELECTRA does:
        `<split>-non-null-predictions.json` (every question's best non-empty answer) and
        `<split>-null-odds.json` (`{question id: odds}`, "no answer" when above the threshold;
        no candidate span at all: 1e30, strict JSON having no Infinity). Evaluate the two
        together (`evaluate-v2.0.py dev-v2.0.json dev-non-null-predictions.json --na-prob-file
        dev-null-odds.json --na-prob-thresh T`): the search on `<split>-predictions.json`, whose
        "" answers our own `null_threshold` chose, scores those as unanswerable at every threshold.
        """
        check_prediction_ids(self.name, examples, predictions, "question")
        answers = self._answer_strings(examples, predictions, "prediction")
        extras: dict[str, str] = {}
        non_null = getattr(predictions, "best_non_null", None)
        odds = getattr(predictions, "null_odds", None)
        if self.version == 2 and non_null is not None and odds is not None:
            check_prediction_ids(self.name, examples, non_null, "question")
            check_prediction_ids(self.name, examples, odds, "question")
            extras["non-null-predictions"] = json.dumps(
                self._answer_strings(examples, non_null, "best non-null answer"), ensure_ascii=True
            )
            extras["null-odds"] = json.dumps(
                {example.id: self._odds(example.id, odds[example.id]) for example in examples}, allow_nan=False
            )
        directory.mkdir(parents=True, exist_ok=True)
        # An earlier call's extras go first, the new ones come last: each file is atomic but the
        # three are not, and writing the extras one by one over the old ones left, when the run
        # stopped in between (killed, disk full), new best non-null answers beside the OLD null
        # odds, a pair that the official threshold search scores without a word. Now an
        # interruption leaves at worst a pair with a file missing.
        for name in _EXTRAS:
            (directory / f"{split}-{name}.json").unlink(missing_ok=True)
        path = directory / f"{split}-predictions.json"
        atomic_write_text(path, json.dumps(answers, ensure_ascii=True) + "\n")
        for name, text in extras.items():
            atomic_write_text(directory / f"{split}-{name}.json", text + "\n")
        return path

    def _answer_strings(self, examples: Sequence[Example], answers: Mapping[str, Any], what: str) -> dict[str, str]:
        """`{question id: answer}` in example order, each answer checked to be a string."""
        checked: dict[str, str] = {}
        for example in examples:
            answer = answers[example.id]
            if not isinstance(answer, str):
                raise ValueError(
                    f'{self.name}: {what} for {example.id!r} must be a string ("" = no answer), not {answer!r}'
                )
            checked[example.id] = answer
        return checked

    def _odds(self, qid: str, value: Any) -> float:
        """A finite JSON number: +-inf (no span at all) as +-1e30; NaN (a diverged model) is an error.

        Any real number is taken (`numbers.Real`, not a bool): a third-party objective's numpy
        float32 odds (a softmax computed in numpy) were refused as "must be a number", which they
        are. NaN is refused saying so: "must be a number, not nan" alone sent the user looking for
        a type error where the model had diverged."""
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"{self.name}: null odds for {qid!r} must be a number, not {value!r}")
        odds = float(value)
        if math.isnan(odds):
            raise ValueError(
                f"{self.name}: null odds for {qid!r} must be a number, not {value!r}: NaN, from a diverged model or "
                "a 0/0 in the objective; the official threshold search cannot order it"
            )
        return math.copysign(_INFINITE_ODDS, odds) if math.isinf(odds) else odds


class SquadV1Task(SquadTask):
    """squad/v1: SQuAD 1.1, every question answerable; metrics exact_match and f1."""

    version = 1


class SquadV2Task(SquadTask):
    """squad/v2: SQuAD 2.0 with unanswerable questions; exact, f1 and HasAns_/NoAns_ breakdowns."""

    version = 2

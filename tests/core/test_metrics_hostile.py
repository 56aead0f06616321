"""Evaluation, metrics and results export (hostile review h187): scores a plugin returns as numpy
scalars or one-number tensors, a predict function's result that is no list of outputs (a squeezed
last batch of one), a line break in a name of the results table, misaligned attachment-score
inputs, and a final evaluation without its main metric. Each test failed before its fix."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from xfer.core import metrics
from xfer.core.atomic import write_json
from xfer.core.errors import PluginError
from xfer.core.evaluation import TaskEvaluator
from xfer.core.results import (
    RESULTS_FILE,
    markdown_rows,
    plain_number,
    results_table,
    strict_json,
    summarize,
    task_result,
)
from xfer.core.tasks import Example, SentenceExample, Task

# --- scores that are numpy scalars or tensors ----------------------------------------------------


class _NumpyScored(Task):
    """A plugin task whose evaluate computes with numpy/torch and returns their scalars as they are."""

    type = "classification"
    main_metric = "accuracy"

    def examples(self, split: str) -> list[Example]:
        return []

    @property
    def labels(self) -> tuple[str, ...]:
        return ("0", "1")

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        gold = np.array([e.label for e in examples])
        pred = np.array([predictions[e.id] for e in examples])
        right = (gold == pred).astype(np.float32)
        return {
            "accuracy": 100 * right.mean(),  # np.float32
            "correct": right.sum().astype(np.int64),  # np.int64
            "error": 100 - torch.tensor(right).mean() * 100,  # a 0-dim tensor
        }


def _numpy_evaluator() -> TaskEvaluator:
    examples = [SentenceExample(id=i, text_a="x", label="1") for i in "abc"]
    return TaskEvaluator(
        _NumpyScored("t"),
        examples,
        ["1", "0", "1"],
        list,
        lambda model, batch: list(batch),
        torch.device("cpu"),
        batch_size=2,
        feature_ids=["a", "b", "c"],
    )


def test_the_evaluator_returns_scores_as_python_numbers() -> None:
    """The trainer converted the scores of its own evaluations, but a stage's final evaluation (the run
    record of `transformer.finetune`) calls the evaluator directly: np.float32 and tensors went into
    the record, which `write_json` wrote as the strings "66.66667" and "tensor(33.3333)"."""
    scores = _numpy_evaluator()(torch.nn.Identity())
    assert {name: type(value) for name, value in scores.items()} == {"accuracy": float, "correct": int, "error": float}
    assert scores["accuracy"] == pytest.approx(200 / 3, rel=1e-6)
    assert scores["correct"] == 2
    assert scores["error"] == pytest.approx(100 / 3, rel=1e-6)


def test_numpy_and_tensor_scores_are_summarised_and_written_as_numbers(tmp_path: Path) -> None:
    """summarize left out every value that was not a Python int or float: the main metric vanished from
    the summary (the table read "(no value)"), and results.json held the scores as strings."""
    runs = [
        {"trial": 0, "seed": 1, "accuracy": np.float32(60.0), "count": np.int64(3), "loss": torch.tensor(2.0)},
        {"trial": 1, "seed": 2, "accuracy": np.float32(80.0), "count": np.int64(5), "loss": torch.tensor(1.0)},
        {"trial": 2, "seed": 3, "accuracy": np.float32("nan"), "count": np.int64(4), "loss": torch.tensor(3.0)},
    ]
    summary = summarize(runs)
    assert summary["accuracy"]["median"] == 60.0, "the NaN run (np.float32) counts, as the worst"
    assert math.isnan(summary["accuracy"]["min"]) and summary["accuracy"]["max"] == 80.0
    assert summary["count"]["median"] == 4 and summary["loss"]["median"] == 2.0

    entry = task_result("accuracy", runs)
    (tmp_path / "stage" / RESULTS_FILE).parent.mkdir(parents=True)
    write_json(tmp_path / "stage" / RESULTS_FILE, {"t": entry})  # as the stages write it (default=str)
    written = json.loads((tmp_path / "stage" / RESULTS_FILE).read_text(encoding="utf-8"))["t"]
    assert written["runs"][0] == {"trial": 0, "seed": 1, "accuracy": 60.0, "count": 3, "loss": 2.0}
    assert written["runs"][2]["accuracy"] == "NaN", "a diverged np.float32 score stays diverged"
    assert written["summary"]["accuracy"]["median"] == 60.0
    table = results_table([tmp_path / "stage"])
    assert table is not None and "| accuracy | **60.0** |" in table and "(no value)" not in table


def test_plain_number_converts_only_one_number() -> None:
    assert type(plain_number(np.float64(1.5))) is float and type(plain_number(np.bool_(True))) is bool
    assert plain_number(np.array([2.5])) == 2.5 and plain_number(torch.tensor([[7]])) == 7
    vector = torch.tensor([1.0, 2.0])
    assert plain_number(vector) is vector and plain_number("seed-1") == "seed-1" and plain_number(None) is None
    assert strict_json({"a": [np.float32("inf")], "b": np.int64(2)}) == {"a": ["Infinity"], "b": 2}


# --- a predict function's result that is not one output per feature ------------------------------


def _float_evaluator(predict: Any, features: int, batch_size: int) -> TaskEvaluator:
    ids = [f"e{i}" for i in range(features)]
    examples = [SentenceExample(id=i, text_a="x", label="1") for i in ids]
    return TaskEvaluator(
        _NumpyScored("t"),
        examples,
        [float(i) for i in range(features)],
        torch.tensor,
        predict,
        torch.device("cpu"),
        batch_size=batch_size,
        feature_ids=ids,
    )


def test_a_squeezed_last_batch_of_one_is_named_not_a_bare_type_error() -> None:
    """`scores.squeeze().tolist()` is a list for a batch of two but a float for the last batch of a
    split of 3 features in batches of 2: the evaluation after training ended in `TypeError: 'float'
    object is not iterable`."""
    squeezed = _float_evaluator(lambda model, batch: (batch * 2).squeeze().tolist(), features=3, batch_size=2)
    with pytest.raises(
        PluginError, match=r"task 't': its predict function returned a float \(4\.0\) for a batch of 1 "
    ):
        squeezed.outputs(torch.nn.Identity())
    as_tensor = _float_evaluator(lambda model, batch: (batch * 2).squeeze(), features=3, batch_size=2)
    with pytest.raises(PluginError, match=r"returned a Tensor \(tensor\(4\.\)\) for a batch of 1 .*squeeze\(-1\)"):
        as_tensor.outputs(torch.nn.Identity())
    # squeezing the feature dimension alone works for every batch, the last one included
    fine = _float_evaluator(lambda model, batch: (batch * 2).tolist(), features=3, batch_size=2)
    assert fine.outputs(torch.nn.Identity()) == [0.0, 2.0, 4.0]


def test_outputs_by_name_are_not_paired_with_the_features() -> None:
    """A dict of two outputs for a batch of two features was taken as the outputs "start" and "end"."""
    named = _float_evaluator(lambda model, batch: {"start": batch, "end": batch}, features=2, batch_size=2)
    with pytest.raises(PluginError, match=r"returned a dict \(\{'start': .*\) for a batch of 2 feature"):
        named.outputs(torch.nn.Identity())
    text = _float_evaluator(lambda model, batch: "10", features=2, batch_size=2)
    with pytest.raises(PluginError, match=r"returned a str \('10'\) for a batch of 2 feature"):
        text.outputs(torch.nn.Identity())


# --- names in the Markdown table -----------------------------------------------------------------


def test_a_line_break_in_a_name_does_not_end_the_table_row() -> None:
    """A metric or task name holding a line break split its row in two: the first line a row one cell
    short, the rest a line of text under the table (the "|" escaping covered bars alone)."""
    runs = [{"trial": 0, "seed": 1, "f1": 80.0, "exact\nmatch": 70.0}, {"trial": 1, "seed": 2, "f1": 90.0}]
    rows = markdown_rows("finetune", {"qa\r\n|squad": task_result("f1", runs)})
    assert rows == ["| finetune | qa \\|squad | f1 | **85.0** | 85.0 ± 7.1 | 80.0–90.0 | 2 | exact match 70.0 |"]


# --- attachment scores on misaligned inputs ------------------------------------------------------


def test_attachment_scores_name_misaligned_inputs() -> None:
    """Only the gold and predicted head lists were compared: `scored` a sentence short ended in a bare
    IndexError, one longer was ignored, and a short flag or relation list gave "zip() argument 5 is
    shorter than arguments 1-4", naming no sentence."""
    heads, rels = [[2, 0], [0]], [["nsubj", "root"], ["root"]]
    assert metrics.attachment_scores(heads, rels, heads, rels, [[True, False], [True]]).scored == 2
    for args, message in [
        ((heads, rels, heads, rels, [[True, True]]), "2 sentences of gold heads but 1 of scored flags"),
        ((heads, rels, heads, rels, [[True, True], [True], [True]]), "2 sentences of gold heads but 3 of scored"),
        ((heads, rels, heads, rels, [[True], [True]]), r"sentence 0: 2 words but 1 scored flags"),
        ((heads, rels[:1], heads, rels, None), "2 sentences of gold heads but 1 of gold relations"),
        ((heads, rels, heads, [*rels, ["x"]], None), "2 sentences of gold heads but 3 of predicted relations"),
    ]:
        with pytest.raises(ValueError, match=message):
            metrics.attachment_scores(*args)


# --- the final evaluation's main metric ----------------------------------------------------------


class _Misnamed(_NumpyScored):
    """Reports its accuracy as "acc", not as its main metric "accuracy"."""

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        return {"acc": 100.0, "accuracy_note": "see acc"}


def test_a_final_evaluation_without_the_main_metric_is_named() -> None:
    """The trainer checks the main metric at its own evaluations only; with none during training
    (`eval_every: null`, `select: last`) the stage's final evaluation returned the record as it was:
    results.json had no main-metric summary ("(no value)") and the model export a bare KeyError."""
    examples = [SentenceExample(id=i, text_a="x", label="1") for i in "ab"]
    evaluator = TaskEvaluator(
        _Misnamed("plug/t"),
        examples,
        ["1", "1"],
        list,
        lambda m, b: list(b),
        torch.device("cpu"),
        feature_ids=["a", "b"],
    )
    with pytest.raises(PluginError) as info:
        evaluator(torch.nn.Identity())
    assert str(info.value) == (
        "task 'plug/t': its evaluate returned metrics ['acc', 'accuracy_note']: its metrics must hold a number "
        "for its main metric 'accuracy'"
    )

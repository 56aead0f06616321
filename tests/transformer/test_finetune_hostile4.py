"""Hostile review of fine-tuning and BAM result bookkeeping (fourth round): defects found and
pinned (each test failed before its fix)."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from xfer.bam.stage import Group, teaching_run, write_results
from xfer.core.evaluation import TaskEvaluator
from xfer.core.tasks import Example, SentenceExample, Task

# --- a plugin task whose evaluate reorders or trims its argument ----------------------------------


class _Trimming(Task):
    """Sorts its examples in place and drops the last one (say, a "gold-less" tail) while scoring."""

    type = "classification"
    main_metric = "accuracy"

    def examples(self, split: str) -> list[Example]:
        return [SentenceExample(f"e{i}", "t", None, "a") for i in range(4)]

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        assert isinstance(examples, list)
        examples.reverse()
        examples.pop()
        right = sum(predictions[e.id] == e.label for e in examples)
        return {"accuracy": 100.0 * right / len(examples), "scored": float(len(examples))}


def _evaluator(task: Task, examples: list[Example]) -> TaskEvaluator:
    return TaskEvaluator(
        task,
        examples,
        list(range(len(examples))),
        lambda features: torch.tensor(features),
        lambda model, batch: ["a"] * len(batch),
        torch.device("cpu"),
        batch_size=2,
        feature_ids=[e.id for e in examples],
    )


def test_an_evaluate_that_mutates_its_examples_changes_neither_later_evaluations_nor_predictions(
    tmp_path: Path,
) -> None:
    """transformer.finetune handed the evaluator's own list to `task.evaluate`, then the same list to
    the next evaluation and to `write_predictions`: a plugin's evaluate that reversed and trimmed it
    scored one example fewer at each evaluation, and `Task.write_predictions` then refused the dev
    predictions as "predictions for ids that are not examples of this split" (another split's?)."""
    task = _Trimming("plug/trim")
    examples = task.examples("dev")
    evaluator = _evaluator(task, examples)
    model = torch.nn.Identity()
    first, second = evaluator(model), evaluator(model)
    assert first == second == {"accuracy": 100.0, "scored": 3.0}
    assert [e.id for e in examples] == ["e0", "e1", "e2", "e3"], "the stage's list is untouched"
    path = task.write_predictions(tmp_path, "dev", examples, evaluator.predictions(model))
    assert path.read_text().splitlines() == ["id\tprediction", "e0\ta", "e1\ta", "e2\ta", "e3\ta"]


# --- BAM results and teaching trial of a lower-is-better main metric --------------------------------


def _context(tmp_path: Path) -> SimpleNamespace:
    def output_dir(kind: str) -> Path:
        (tmp_path / kind).mkdir(parents=True, exist_ok=True)
        return tmp_path / kind

    return SimpleNamespace(is_main=True, output_dir=output_dir)


def _data(name: str, metric: str, greater: bool) -> SimpleNamespace:
    return SimpleNamespace(name=name, info=SimpleNamespace(main_metric=metric, greater_is_better=greater))


def test_bam_results_of_a_lower_is_better_metric_count_a_diverged_run_as_the_worst(tmp_path: Path) -> None:
    """bam's results.json summarised every task as greater-is-better and did not record the
    direction: a diverged (NaN) run of an MSE sorted as the lowest, i.e. next to the best runs (min
    NaN, max the worst real score, median pulled toward the best), and `xfer results` pools treated
    the task as greater-is-better. Now as `task_result`: NaN is the max, `greater_is_better: false`."""
    ctx = _context(tmp_path)
    data = _data("toy/mse", "mse", greater=False)
    group = SimpleNamespace(name="g", slug="g", tasks=[data])
    runs = {
        "g": [
            {
                "trial": t,
                "seed": t,
                "steps": 5,
                "checkpoint": "last",
                "seconds": 1.0,
                "metrics": {"toy/mse": {"mse": v}},
            }
            for t, v in enumerate([1.0, 2.0, math.nan])
        ]
    }
    results = write_results(ctx, [group], runs)
    summary = results["toy/mse"]["summary"]["mse"]
    assert summary["min"] == 1.0 and math.isnan(summary["max"]) and summary["median"] == 2.0
    assert results["toy/mse"]["greater_is_better"] is False
    written = json.loads((tmp_path / "results" / "results.json").read_text())
    assert written["toy/mse"]["greater_is_better"] is False and written["toy/mse"]["summary"]["mse"]["max"] == "NaN"


def test_bam_results_of_a_greater_is_better_metric_are_unchanged(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    group = SimpleNamespace(name="g", slug="g", tasks=[_data("toy/acc", "accuracy", greater=True)])
    record = {"seed": 0, "steps": 5, "checkpoint": "last", "seconds": 1.0}
    runs = {"g": [{"trial": t, **record, "metrics": {"toy/acc": {"accuracy": v}}} for t, v in enumerate([50.0, 60.0])]}
    result = write_results(ctx, [group], runs)["toy/acc"]
    assert "greater_is_better" not in result and result["summary"]["accuracy"]["median"] == 55.0


def test_the_median_teacher_of_a_lower_is_better_task_is_not_its_best_trial() -> None:
    """`teaching_run` ordered a lower-is-better task's raw scores with NaN lowest: [1, 2, NaN] put
    the diverged trial at the best end and picked trial 0 (the best, 1.0) as the median teacher;
    the median with NaN as the worst is 2.0."""
    group = Group("t", [_data("t", "mse", greater=False)])
    for scores in itertools.permutations([1.0, 2.0, math.nan]):
        runs = [{"trial": i, "metrics": {"t": {"mse": s}}} for i, s in enumerate(scores)]
        assert teaching_run(runs, group, "median")["metrics"]["t"]["mse"] == 2.0, scores
    for scores in itertools.permutations([1.0, 2.0, 3.0, 4.0, 5.0]):
        runs = [{"trial": i, "metrics": {"t": {"mse": s}}} for i, s in enumerate(scores)]
        assert teaching_run(runs, group, "median")["metrics"]["t"]["mse"] == 3.0, scores


def test_bams_group_evaluator_hands_evaluate_a_copy_of_the_dev_examples() -> None:
    """BAM's GroupEvaluator handed `data.dev_examples` itself to `task.evaluate`: a plugin's evaluate
    that trimmed it changed what the next evaluation scored and the dev prediction files read."""
    from xfer.bam.evaluation import GroupEvaluator

    task = _Trimming("plug/trim")
    data = SimpleNamespace(name="plug/trim", task=task, dev_examples=task.examples("dev"))
    evaluator = object.__new__(GroupEvaluator)  # only what `evaluate` reads
    evaluator.tasks = [data]
    evaluator.evaluators = {
        "plug/trim": SimpleNamespace(
            predictions=lambda objective: {f"e{i}": "a" for i in range(4)}, checked=lambda metrics: metrics
        )
    }
    first, _ = evaluator.evaluate(None)
    second, _ = evaluator.evaluate(None)
    assert first == second == {"plug/trim": {"accuracy": 100.0, "scored": 3.0}}
    assert [e.id for e in data.dev_examples] == ["e0", "e1", "e2", "e3"]

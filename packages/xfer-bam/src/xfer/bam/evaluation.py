"""Evaluating a (multi-task) model, recording per-example dev predictions, and computing teacher outputs.

All of it runs on gathered predictions (core `TaskEvaluator`): under `torchrun` every rank
predicts a shard and the official metric sees the whole dev set.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from xfer.bam.model import MultiTaskModel
from xfer.bam.objective import DistillationObjective, TaskKind
from xfer.core.evaluation import TaskEvaluator
from xfer.core.tasks import Example, SentenceExample, Task, TaskInfo


@dataclass
class TaskData:
    """One task as a stage uses it: the task, its objective class/config and featurised splits."""

    name: str
    task: Task
    info: TaskInfo
    kind: TaskKind
    objective_name: str
    objective_class: Any
    objective_config: Any
    config: Any  # the task's own config (enters the teacher-prediction key)
    train_examples: list[Example]
    dev_examples: list[Example]
    train_features: list[dict[str, Any]]
    dev_features: list[dict[str, Any]]


def _task_evaluator(
    model: MultiTaskModel,
    data: TaskData,
    examples: Sequence[Example],
    features: Sequence[Any],
    predict: Any,
    device: torch.device,
    batch_size: int,
) -> TaskEvaluator:
    objective = model.objective(data.name)
    return TaskEvaluator(
        data.task,
        examples,
        features,
        objective.collate,
        predict,
        device,
        batch_size=batch_size,
        postprocess=lambda outputs: objective.postprocess(examples, features, outputs),
    )


class GroupEvaluator:
    """The trainer's evaluator for a model of one or more tasks.

    Returns `<task>/<main metric>` for every task plus `average`, the mean of the tasks' main
    metrics (the GLUE-score convention), which is the trainer's main metric.
    """

    main_metric = "average"
    greater_is_better = True

    def __init__(self, model: MultiTaskModel, tasks: Sequence[TaskData], device: torch.device, batch_size: int):
        self.tasks = list(tasks)
        self.evaluators = {
            data.name: _task_evaluator(
                model,
                data,
                data.dev_examples,
                data.dev_features,
                lambda m, batch, name=data.name: _model_of(m).predict(name, batch),
                device,
                batch_size,
            )
            for data in self.tasks
        }

    def evaluate(self, objective: Any) -> tuple[dict[str, dict[str, float]], dict[str, Mapping[str, Any]]]:
        """(metrics per task, dev predictions per task keyed by example id)."""
        metrics, predictions = {}, {}
        for data in self.tasks:
            evaluator = self.evaluators[data.name]
            predictions[data.name] = evaluator.predictions(objective)
            # a copy: a plugin's evaluate that sorts or trims its argument changed the list later
            # evaluations and the dev prediction files read (as `xfer.core.evaluation.TaskEvaluator`)
            scores = data.task.evaluate(list(data.dev_examples), predictions[data.name])
            # As TaskEvaluator returns them (`checked`): called past it, np.float32 scores went into a trial's
            # done.json as strings ("66.66667"), which a resumed stage read back and `group_score` failed on
            # (a bare TypeError), and a missing main metric was a bare KeyError.
            metrics[data.name] = evaluator.checked(scores)
        return metrics, predictions

    def __call__(self, objective: Any) -> dict[str, float]:
        """During training: each task's main metric (`<task>/<metric>`) and their `average`; the final
        evaluation (`evaluate`) keeps every metric for results.json."""
        metrics, _ = self.evaluate(objective)
        return main_metrics(metrics, {d.name: d.info.main_metric for d in self.tasks})


def main_metrics(metrics: Mapping[str, Mapping[str, float]], main: Mapping[str, str]) -> dict[str, float]:
    flat = {f"{task}/{main[task]}": metrics[task][main[task]] for task in metrics}
    flat["average"] = statistics.fmean(metrics[task][main[task]] for task in metrics)
    return flat


def _model_of(objective: Any) -> MultiTaskModel:
    return objective.model if isinstance(objective, DistillationObjective) else objective


def teacher_rows(model: MultiTaskModel, data: TaskData, device: torch.device, batch_size: int) -> list[np.ndarray]:
    """The model's outputs on `data`'s training features, one float32 [rows, C] array per feature:
    logits (classification), the output in target space (regression, C = 1), per-word logits (tagging)."""

    def predict(m: Any, batch: Mapping[str, torch.Tensor]) -> list[np.ndarray]:
        scores = _model_of(m).scores(data.name, batch).float().cpu().numpy()
        if data.kind.per_word:
            counts = batch["word_mask"].sum(-1).tolist()
            return [scores[i, :n] for i, n in enumerate(counts)]
        return [scores[i : i + 1] for i in range(len(scores))]

    evaluator = _task_evaluator(model, data, data.train_examples, data.train_features, predict, device, batch_size)
    return evaluator.outputs(model)


def gold_value(example: Example) -> Any:
    """The gold answer as tasks compare it: a label string or float, or a tag list."""
    return example.label if isinstance(example, SentenceExample) else list(getattr(example, "tags", None) or [])

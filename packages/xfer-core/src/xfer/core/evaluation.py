"""Evaluation on gathered predictions: each rank predicts a shard, corpus metrics see everything.

Corpus-level metrics (F1, MCC, BLEU, correlations) are not averages of per-shard values, so
under data parallelism every rank predicts its shard of the features, the (index, output)
pairs are gathered, and the task's official metric runs once on the complete set.
"""

from __future__ import annotations

import numbers
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from xfer.core import distributed as dist
from xfer.core.data import Collate, batches, shard_indices, to_device
from xfer.core.errors import PluginError
from xfer.core.results import plain_number
from xfer.core.tasks import Example, Task

PredictFn = Callable[[nn.Module, Any], Sequence[Any]]
Postprocess = Callable[[Sequence[Any]], Mapping[str, Any]]


class TaskEvaluator:
    """Callable evaluator for the trainer: `evaluator(model) -> task.evaluate(...)` metrics.

    - `features`: model inputs (one or more per example), `collate` batches them;
    - `predict(model, batch)` returns one output per feature in the batch;
    - `postprocess(outputs)` maps the list of outputs, in feature order, to
      {example id: prediction}; the default pairs feature i with `feature_ids[i]`.
    """

    def __init__(
        self,
        task: Task,
        examples: Sequence[Example],
        features: Sequence[Any],
        collate: Collate,
        predict: PredictFn,
        device: torch.device,
        batch_size: int = 64,
        feature_ids: Sequence[str] | None = None,
        postprocess: Postprocess | None = None,
    ):
        if postprocess is None:
            _check_feature_ids(feature_ids, len(features))
        self.task, self.examples, self.features = task, examples, features
        self.collate, self.predict, self.device, self.batch_size = collate, predict, device, batch_size
        self.feature_ids = feature_ids
        self.postprocess = postprocess
        info = task.info()
        self.main_metric, self.greater_is_better = info.main_metric, info.greater_is_better

    @torch.no_grad()
    def outputs(self, model: nn.Module) -> list[Any]:
        """Per-feature outputs in feature order, gathered from every rank."""
        mine = list(shard_indices(len(self.features), dist.rank(), dist.world_size()))
        local: list[tuple[int, Any]] = []
        shard = [self.features[i] for i in mine]
        for number, batch in enumerate(batches(shard, self.batch_size, self.collate)):
            indices = mine[number * self.batch_size : (number + 1) * self.batch_size]
            outs = self._listed(self.predict(model, to_device(batch, self.device)), len(indices))
            if len(outs) != len(indices):  # they would pair with the wrong features (or run past the shard)
                raise PluginError(
                    f"task {self.task.name!r}: its predict function returned {len(outs)} outputs for a batch of "
                    f"{len(indices)} features (one output per feature, in batch order)"
                )
            local += zip(indices, outs, strict=True)
        merged = sorted((pair for part in dist.gather_objects(local) for pair in part), key=lambda p: p[0])
        if len(merged) != len(self.features):
            raise RuntimeError(f"gathered {len(merged)} predictions for {len(self.features)} features")
        return [out for _, out in merged]

    def _listed(self, result: Any, features: int) -> list[Any]:
        """`predict`'s result for a batch of `features` features as a list of outputs, or a PluginError.

        Why: `scores.squeeze().tolist()` is a float, not a list, for a batch of one feature, which
        only the last batch of a split may be: `list()` of it ended the evaluation after training in
        a bare TypeError. A dict (outputs by name) or a string is no list of outputs either: its
        keys or characters were paired with the features whenever their count matched the batch."""
        if not isinstance(result, (str, bytes, Mapping)):
            try:
                return list(result)
            except TypeError:
                pass
        shown = repr(result) if len(repr(result)) <= 60 else f"{repr(result)[:57]}..."
        raise PluginError(
            f"task {self.task.name!r}: its predict function returned a {type(result).__name__} ({shown}) for a batch "
            f"of {features} feature(s), not a sequence of outputs (one per feature, in batch order); for a "
            "batch of one, `.squeeze()` also drops the batch dimension: squeeze a given one (`.squeeze(-1)`)"
        )

    def predictions(self, model: nn.Module) -> Mapping[str, Any]:
        outputs = self.outputs(model)
        if self.postprocess is not None:
            return self.postprocess(outputs)
        assert self.feature_ids is not None
        return dict(zip(self.feature_ids, outputs, strict=True))

    def __call__(self, model: nn.Module) -> dict[str, float]:
        """The task's metrics on a copy of the examples. Why: the evaluator keeps its list for every
        later evaluation (and the stage's postprocess and `write_predictions` get the same one), so a
        plugin's `evaluate` that sorted or trimmed its argument changed what the next evaluation
        scored and made `write_predictions` refuse the predictions as another split's.

        A numpy scalar or one-number tensor among the metrics becomes its Python number (`plain_number`):
        the trainer converts the metrics of its own evaluations, but a stage's final evaluation calls the
        evaluator directly, and its run record was written with the score as a string ("66.66667")
        that no summary counted and a resumed stage could not sort against the other trials' floats."""
        return self.checked(self.task.evaluate(list(self.examples), self.predictions(model)))

    def checked(self, metrics: Any) -> Any:
        """What the task's `evaluate` returned, as this evaluator returns it: numpy scalars and one-number
        tensors as Python numbers (`plain_number`), and a PluginError naming the task when its main metric
        is not a number. For stages that call `task.evaluate` themselves (a final evaluation that writes
        the predictions it scores), so their records hold the same numbers."""
        if isinstance(metrics, Mapping):
            metrics = {name: plain_number(value) for name, value in metrics.items()}
        self._check_main_metric(metrics)
        return metrics

    def _check_main_metric(self, metrics: Any) -> None:
        """A PluginError naming the task when its metrics hold no number for its main metric.

        Why: the trainer checks this at its own evaluations, but with none during training
        (`eval_every: null`, `select: last`) the stage's final evaluation was the first: the run record
        lacked the main metric, results.json summarised no main metric ("(no value)" in the table) and
        exporting the median trial's model ended in a bare KeyError after every trial had trained."""
        main = self.main_metric
        got = main_metric_problem(metrics, main)
        if got is None:
            return
        raise PluginError(
            f"task {self.task.name!r}: its evaluate returned {got}: its metrics must hold a number for its main "
            f"metric {main!r}"
        )


def oriented_mean(mains: Iterable[tuple[float, bool]]) -> float:
    """The mean of several tasks' main metrics, given as (value, greater_is_better), greater better: a
    lower-is-better one (an error rate, an MSE) counts negated, so improving it raises the mean and a
    NaN is the worst of either direction. Multi-task model selection (CVT's `mean`, BAM's groups)
    averaged raw picked the checkpoint where a lower-is-better task was worst."""
    return statistics.fmean(value if greater else -value for value, greater in mains)


def main_metric_problem(metrics: Any, main: str) -> str | None:
    """What `metrics` (an evaluation's results) gave instead of a number as `main`, or None when it holds
    one: the trainer and the evaluator refuse such results with the same words."""
    value = metrics.get(main) if isinstance(metrics, Mapping) else None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return None
    if not isinstance(metrics, Mapping):
        return f"a {type(metrics).__name__}"
    if main not in metrics:
        return f"metrics {sorted(map(str, metrics))}"
    return f"{type(value).__name__} {value!r} as {main!r}"


def _check_feature_ids(feature_ids: Sequence[str] | None, features: int) -> None:
    """The default pairing (feature i -> example `feature_ids[i]`) needs one distinct id per feature.

    Why: with several features per example (windows of a long text) the pairing built a dict in
    which each example kept only its last feature's output, silently; a length mismatch failed
    only at the first evaluation, after training.
    """
    if feature_ids is None:
        raise ValueError("give feature_ids (one example id per feature) or a postprocess function")
    if len(feature_ids) != features:
        raise ValueError(f"{len(feature_ids)} feature_ids for {features} features (one example id per feature)")
    repeated = next((i for i, count in Counter(feature_ids).items() if count > 1), None)
    if repeated is not None:
        raise ValueError(
            f"example {repeated!r} has several features: pairing each feature with its id would keep only "
            "the last one's output; give a postprocess function that merges an example's outputs"
        )

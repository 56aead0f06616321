"""The BAM loss: ℓ(λ·gold + (1−λ)·teacher, student), with λ annealed from the trainer's progress.

Teacher outputs arrive in the batch (read from the prediction cache by the data pipeline): the
student never runs a teacher. Per task type (`TASK_KINDS`):

- classification: cross-entropy to the mixed distribution λ·onehot(y) + (1−λ)·softmax(teacher logits);
  cross-entropy is linear in the target, so this is λ·CE(y) + (1−λ)·CE(teacher) computed in one pass;
- tagging: the same per word (padding words ignored);
- regression: squared error to the mixed target λ·y + (1−λ)·teacher, in the objective's [0, 1]
  target space (the thesis's L2 to the teacher for regression). The thesis (3.2.1) normalises the
  labels to [0, 1] as here, but its head is sigmoid(wᵀc); `transformer.sequence`'s regression
  head is linear (its fine-tuning head, shared with every stage), so teacher and student outputs
  are not bounded to [0, 1]: the targets are the same, the output non-linearity is not.

λ schedules: `linear` (teacher annealing: λ = step / total steps, 0 at the first step, → 1 at the
end, as the original `percent_done`), `constant` (λ fixed: 0 = pure distillation), `none` (no
teacher: λ = 1, plain supervised multi-task training).

Gold-only training (`none`: the teachers, plain Multi) uses a task objective's own `loss(scores,
gold)` where its class overrides it (a focal loss), and its own `forward(batch)` where it overrides
that (an auxiliary penalty: BAM never called it, so the change was dropped without a word); a
student distilling from teachers refuses such an objective, as that loss has no form for a mixed target.

A batch mixes tasks; its loss is the mean over its examples of each example's task loss (a task's
part contributes its mean loss weighted by its number of examples; for tagging the per-example
loss is the mean over the part's words). Heads of tasks absent from a batch get a zero gradient
(as in the original, which ran every head on every example and masked the losses), which also
keeps every parameter in the DDP reduction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xfer.bam.model import MultiTaskModel
from xfer.core.data import TaggedBatch
from xfer.core.errors import UserError
from xfer.core.trainer import StepOutput, TrainingProgress

IGNORE = -100


def gold_weight(schedule: str, fraction: float, value: float = 0.0) -> float:
    """λ, the weight of the gold label, at `fraction` ∈ [0, 1) of training."""
    if schedule == "linear":
        return min(1.0, max(0.0, fraction))
    if schedule == "constant":
        return value
    if schedule == "none":
        return 1.0
    raise ValueError(f"unknown lambda schedule {schedule!r} (linear, constant, none)")


def soft_cross_entropy(scores: Tensor, gold: Tensor, teacher: Tensor | None, lam: float) -> Tensor:
    """Mean over positions whose gold is not IGNORE of CE(λ·onehot(gold) + (1−λ)·softmax(teacher), scores).

    `scores`/`teacher` are [..., C] logits, `gold` [...] class ids.
    """
    log_probs = F.log_softmax(scores.float(), dim=-1)
    valid = gold != IGNORE
    per_position = -log_probs.gather(-1, gold.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    if teacher is not None and lam < 1.0:
        distilled = -(F.softmax(teacher.float(), dim=-1) * log_probs).sum(-1)
        per_position = lam * per_position + (1.0 - lam) * distilled
    return (per_position * valid).sum() / valid.sum().clamp_min(1)


def mixed_squared_error(scores: Tensor, gold: Tensor, teacher: Tensor | None, lam: float) -> Tensor:
    """Mean of (prediction − (λ·gold + (1−λ)·teacher))² over examples; `scores` and `teacher` are [B, 1]."""
    target = gold.float()
    if teacher is not None and lam < 1.0:
        target = lam * target + (1.0 - lam) * teacher.float().squeeze(-1)
    return F.mse_loss(scores.float().squeeze(-1), target)


@dataclass(frozen=True)
class TaskKind:
    """What BAM needs to know about a task type.

    `gold_key`: the gold targets in the objective's collated batch; `per_word`: teacher outputs
    are one row per word (tagging) rather than one per example; `loss(scores, gold, teacher, λ)`.
    """

    gold_key: str
    per_word: bool
    loss: Callable[[Tensor, Tensor, Tensor | None, float], Tensor]


TASK_KINDS: Mapping[str, TaskKind] = {
    "classification": TaskKind("labels", False, soft_cross_entropy),
    "regression": TaskKind("labels", False, mixed_squared_error),
    "tagging": TaskKind("tags", True, soft_cross_entropy),
}


def has_own_loss(objective: nn.Module | type) -> bool:
    """Whether the task objective (or its class) overrides `SequenceObjective.loss(scores, gold)` (the
    documented way to change a fine-tuning loss: `xfer-example`'s focal loss, `xfer new`'s scaffold)."""
    from xfer.transformer.objectives import SequenceObjective

    loss = getattr(objective if isinstance(objective, type) else type(objective), "loss", None)
    return loss is not None and loss is not SequenceObjective.loss


def has_own_forward(objective: nn.Module | type) -> bool:
    """Whether the task objective (or its class) overrides the built-in objectives' `forward(batch)` (an
    auxiliary penalty, label smoothing...): BAM computes the loss from `scores(batch)` and never calls
    the objective's `forward`, so such a change was dropped without a word, by teachers and students."""
    from xfer.transformer.objectives import SequenceObjective, TaggingObjective

    forward = getattr(objective if isinstance(objective, type) else type(objective), "forward", None)
    return forward is not None and forward not in (SequenceObjective.forward, TaggingObjective.forward)


def own_loss_method(objective: nn.Module | type) -> str | None:
    """`forward()` or `loss()` when the objective changes its training loss there (forward first), else None."""
    if has_own_forward(objective):
        return "forward()"
    return "loss()" if has_own_loss(objective) else None


def task_kind(task: str, task_type: str) -> TaskKind:
    if task_type not in TASK_KINDS:
        raise UserError(f"{task}: BAM handles {', '.join(TASK_KINDS)} tasks, not {task_type} tasks")
    return TASK_KINDS[task_type]


class DistillationObjective(nn.Module):
    """What the trainer optimises: the multi-task model plus the BAM loss (see the module docstring)."""

    def __init__(self, model: MultiTaskModel, schedule: str = "none", value: float = 0.0):
        super().__init__()
        self.model = model
        self.schedule, self.value = schedule, value
        self.kinds = {t: task_kind(t, model.infos[t].type) for t in model.task_names}
        # gold-only training (teachers, Multi) uses an objective's own loss (or own forward): BAM's
        # cross-entropy replaced it silently, so a focal-loss teacher trained with plain cross-entropy
        self.own_losses = [t for t in model.task_names if has_own_loss(model.objective(t))]
        self.own_forwards = [t for t in model.task_names if has_own_forward(model.objective(t))]
        own = {t: own_loss_method(model.objective(t)) for t in model.task_names}
        if schedule != "none" and (task := next((t for t in model.task_names if own[t]), None)) is not None:
            raise UserError(
                f"{task}: objective {type(model.objective(task)).__name__} overrides {own[task]}, which has no form "
                "for the mixed target λ·gold + (1−λ)·teacher that a student distils (BAM would train it with "
                "cross-entropy / squared error instead): give this student the built-in objective "
                "(transformer.sequence / transformer.tagging), or train without teachers (lambda_schedule: none), "
                "where its own loss is used"
            )
        self.lam = gold_weight(schedule, 0.0, value)

    def set_progress(self, progress: TrainingProgress) -> None:
        """Called by the trainer before every optimizer step: λ follows the fraction of training done."""
        self.lam = gold_weight(self.schedule, progress.fraction, self.value)

    def _own_forward_loss(self, task: str, hidden: Tensor, batch: Mapping[str, Tensor]) -> Tensor:
        """The loss of the task objective's own `forward(batch)` on the shared encoder's `hidden` rows."""
        objective = self.model.objective(task)
        objective.encoder.provide(hidden[:, : batch["input_ids"].shape[1]])
        try:
            return objective(batch).loss
        except RuntimeError as exc:
            if "HiddenStates" not in str(exc):
                raise
            raise UserError(
                f"{task}: objective {type(objective).__name__}'s forward() runs the encoder more than once per "
                "batch, which BAM's shared encoder (one pass per mixed batch) cannot serve: compute the scores "
                "once (self.scores(batch)) in forward()"
            ) from exc

    def forward(self, batch: Mapping[str, Any] | TaggedBatch) -> StepOutput:
        if isinstance(batch, TaggedBatch):  # mixing: batch (core MultiTaskSource) wraps the mixed batch
            batch = batch.batch
        hidden = self.model.encode(batch)
        total = hidden.new_zeros((), dtype=torch.float32)
        seen = set()
        for part in batch["parts"]:
            task = part["task"]
            seen.add(task)
            sub = part["batch"]
            kind = self.kinds[task]
            if task in self.own_forwards:  # only with schedule none (gold only): the objective's own step
                loss = self._own_forward_loss(task, hidden[part["start"] : part["end"]], sub)
            else:
                scores = self.model.part_scores(task, hidden[part["start"] : part["end"]], sub)
                if task in self.own_losses:  # only with schedule none (gold only), see __init__
                    loss = self.model.objective(task).loss(scores, sub[kind.gold_key])
                else:
                    loss = kind.loss(scores, sub[kind.gold_key], part.get("teacher"), self.lam)
            total = total + loss * (part["end"] - part["start"])
        loss = total / hidden.shape[0]
        for task in self.model.task_names:
            if task not in seen:  # zero gradient, not none: every head takes part in every step
                loss = loss + sum(p.sum() for p in self.model.objective(task).parameters()) * 0.0
        if self.schedule == "none":
            return StepOutput(loss, {})
        return StepOutput(loss, {"gold_weight": loss.new_tensor(self.lam)})  # on the training device

"""The BAM network: one shared encoder, one fine-tuning objective (head) per task.

Each task keeps the fine-tuning objective it would have on its own (`transformer.sequence`,
`transformer.tagging` or a subclass): its featurisation, collation, head, prediction and
post-processing are reused unchanged. Only the encoder is shared. Inside each task objective
the encoder is replaced by `HiddenStates`, a parameter-free stand-in that hands over hidden
states the shared encoder already computed, so a mixed batch (examples of several tasks) goes
through the encoder ONCE and each task's head reads its own rows — the thesis's "examples of
different tasks are shuffled together, even within minibatches" at the cost of one encoder pass.

A single-task model (a teacher, or a Single→Single student) is the same network with one task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torch import Tensor, nn

from xfer.bam.naming import module_name
from xfer.core.errors import UserError
from xfer.core.tasks import TaskInfo
from xfer.transformer.encoder import Encoder, EncoderConfig, EncoderOutput


class UnarmedHiddenStates(RuntimeError):
    """`HiddenStates` called without hidden states provided for the call (see `one_encoder_pass`)."""


class HiddenStates(nn.Module):
    """Stands in for the encoder inside a task objective: returns the hidden states it was given.

    `provide(hidden)` arms it for exactly one call; calling it unarmed, or with inputs whose shape
    does not match the provided states, is a bug and raises (never silently reuses stale states).
    It has no parameters, so the task objective adds only its head to the model.
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = config  # objectives size their heads from encoder.config
        self._pending: Tensor | None = None

    def provide(self, hidden: Tensor) -> None:
        self._pending = hidden

    def forward(self, input_ids: Tensor, *args: Any, **kwargs: Any) -> EncoderOutput:
        hidden, self._pending = self._pending, None
        if hidden is None:
            raise UnarmedHiddenStates(
                "HiddenStates called without provided hidden states (call the model, not the objective)"
            )
        if tuple(hidden.shape[:2]) != tuple(input_ids.shape):
            raise RuntimeError(f"hidden states {tuple(hidden.shape)} do not match inputs {tuple(input_ids.shape)}")
        return EncoderOutput(hidden)


def one_encoder_pass(task: str, objective: Any, method: str, call: Callable[[], Any]) -> Any:
    """`call()` (the objective's `method` on a batch whose hidden states were provided), with a second
    encoder call in it said as a UserError naming the objective: the shared encoder runs once per batch,
    and HiddenStates' internal RuntimeError ("call the model, not the objective") stopped a stage in a
    bare traceback at the first dev evaluation, after training (an objective whose predict() calls
    scores() twice works in `transformer.finetune`, where the encoder is real)."""
    try:
        return call()
    except UnarmedHiddenStates as exc:
        raise UserError(
            f"{task}: objective {type(objective).__name__}'s {method} runs the encoder more than once per "
            "batch, which BAM's shared encoder (one pass per batch) cannot serve: compute the scores once "
            f"(self.scores(batch)) in {method}"
        ) from exc


def check_head_only(task: str, objective: nn.Module) -> None:
    """A task objective keeps all its weights in `objective.head`: BAM model dirs store the encoder
    and one head per task (`weights.save_bam_model`) and `init` restores heads only. An objective
    with weights elsewhere (a learnt scale, a CRF) trained every trial and was refused only at the
    export after them (hours on real data): refuse it when the model is built, before training."""
    head = getattr(objective, "head", None)
    extra = [name for name in objective.state_dict() if not name.startswith("head.")]
    if not isinstance(head, nn.Module) or extra:
        where = f"parameters outside its head ({extra[0]}, ...)" if extra else "no `head` module"
        raise UserError(
            f"{task}: objective {type(objective).__name__} has {where}; BAM model directories store the "
            "encoder and one head per task, so keep every task-specific weight in `self.head`"
        )


class MultiTaskModel(nn.Module):
    """`encoder` (shared) + `tasks[module_name(task)]` (each task's fine-tuning objective, head inside).

    `objectives` are built by the caller around a `HiddenStates(encoder.config)` (see `stage.build_model`).
    Parameters: the encoder's, then each head's — `param_groups` finds the encoder's layer depths
    for layer-wise LR decay, heads get depth 0 (the full learning rate).
    """

    def __init__(self, encoder: Encoder, objectives: Mapping[str, nn.Module], infos: Mapping[str, TaskInfo]):
        super().__init__()
        self.encoder = encoder
        self.task_names = list(objectives)
        self.tasks = nn.ModuleDict({module_name(t): objectives[t] for t in self.task_names})
        self.infos = dict(infos)
        for task, objective in objectives.items():
            if not isinstance(getattr(objective, "encoder", None), HiddenStates):
                raise ValueError(f"{task}: the objective must be built around HiddenStates(encoder.config)")
            if not callable(getattr(objective, "scores", None)):
                raise UserError(
                    f"{task}: objective {type(objective).__name__} has no scores(batch) method; BAM distils the "
                    "scores of transformer.sequence / transformer.tagging objectives (or subclasses)"
                )
            check_head_only(task, objective)

    def objective(self, task: str) -> Any:
        return self.tasks[module_name(task)]

    def encode(self, batch: Mapping[str, Tensor]) -> Tensor:
        return self.encoder(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids")).last_hidden_state

    def part_scores(self, task: str, hidden: Tensor, batch: Mapping[str, Tensor]) -> Tensor:
        """The task's scores for `batch`, whose encoder outputs are `hidden` (rows of a mixed pass)."""
        objective = self.objective(task)
        objective.encoder.provide(hidden[:, : batch["input_ids"].shape[1]])
        return one_encoder_pass(task, objective, "scores()", lambda: objective.scores(batch))

    def scores(self, task: str, batch: Mapping[str, Tensor]) -> Tensor:
        """Scores of a single-task batch (collated by the task's objective): logits, or the regression output."""
        return self.part_scores(task, self.encode(batch), batch)

    def predict(self, task: str, batch: Mapping[str, Tensor]) -> list[Any]:
        """The task objective's predictions (labels, scores, tag lists) for a single-task batch."""
        objective = self.objective(task)
        objective.encoder.provide(self.encode(batch))
        return one_encoder_pass(task, objective, "predict()", lambda: objective.predict(batch))

    def forward(self, batch: Mapping[str, Any]) -> Tensor:  # pragma: no cover - the objective drives the model
        raise TypeError("MultiTaskModel is driven by DistillationObjective; call scores/predict")

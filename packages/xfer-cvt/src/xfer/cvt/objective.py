"""The CVT objective: one shared encoder, one prediction module per task, three training modes.

A step's batch is `TaggedBatch("labeled", TaggedBatch(task, batch))` or
`TaggedBatch("unlabeled", batch)` (see `xfer.core.data.AlternatingSource`).

Labeled minibatch (thesis L_sup): the encoder with dropout `dropout` (0.5), the task's primary
module, cross-entropy with label smoothing.

Unlabeled minibatch (thesis L_CVT, mode `cvt`):
1. teacher: every task's primary module labels the batch from an encoder pass *without dropout*,
   under `torch.no_grad()` — soft distributions for tagging and parsing, beam search outputs for
   seq2seq. Nothing is back-propagated through the teacher.
2. students: one encoder pass with dropout `unlabeled_dropout` (0.2) feeds every auxiliary module
   of every task at once (`cvt_tasks: all`; `one` = one task per batch, the ablation); the loss
   is the sum over tasks and views of CE(teacher, student) (= KL up to a constant).
`teacher: separate` (default, as the original code) runs two encoder passes (they share what
precedes any dropout, the char-CNN and frozen Transformer features: computed once, identical
numbers); `shared` runs one pass without dropout whose states serve the teacher (detached) and,
with dropout applied to the module inputs, the students.

Mode `word_dropout` (the thesis baseline): the student is the primary module itself, reading the
batch with 10% of its words replaced by <removed> (their characters too). Mode `supervised`
never sees unlabeled batches.

Every loss term is a sum over its units (words, arcs, target tokens) divided by the number of
units in the *global* batch (all DDP ranks; one all-reduce of the counts per step), so that the
gradients of 2 processes equal those of 1 on the same global batch. With `grad_accum > 1` the
trainer averages the micro-batches' losses, i.e. means of per-micro-batch means: close to, not
bitwise equal to, one large batch (a translation teacher's target count is only known after its
beam search, so a step-wide count would need every micro-batch first).

Logged metrics: `sup_loss`/`sup_accuracy` of labeled steps and `cvt_loss` of unlabeled steps, each
the mean over the steps of its kind in the log window. Every step returns all three with their weights
(`NAME@weight`, xfer.core.trainer.WEIGHT_SUFFIX): 1 for the metrics of its own kind, 0 for the others
(`step_metrics`), so the trainer pools each over the steps that measured it, whatever its windows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from xfer.core import distributed as dist
from xfer.core.data import TaggedBatch
from xfer.core.trainer import WEIGHT_SUFFIX, StepOutput, TrainingProgress
from xfer.cvt.config import module_key
from xfer.cvt.model import EncoderStates, WordEncoder
from xfer.cvt.vocab import REMOVED


@dataclass
class Settings:
    """What prediction modules need to know besides their inputs."""

    dropout: float = 0.5
    unlabeled_dropout: float = 0.2
    student_dropout: float = 0.2  # set per step: the rate the students' module-internal dropout uses
    word_dropout: float = 0.1
    label_smoothing: float = 0.1
    parse_label_smoothing: float = 0.0
    teacher_label_smoothing: float = 0.1
    attention_dropout: float = 0.5
    parse_decoding: str = "argmax"
    beam_size: int = 4
    teacher_beam_size: int = 4
    length_penalty: float = 1.0
    max_target_length: int = 100


STEP_METRICS = ("sup_loss", "sup_accuracy", "cvt_loss")
"""The metrics of a step: the first two measured on labeled steps, `cvt_loss` on unlabeled ones."""


def step_metrics(measured: dict[str, Tensor]) -> dict[str, Tensor]:
    """Every one of STEP_METRICS with its weight: 1 for those `measured` this step, 0 (and a placeholder 0)
    for the others, so that the trainer logs each as its mean over the steps of its kind in the window.

    Why weights: the trainer averages a plain metric over every step of its window, of both kinds. The
    metrics were rescaled by the window's length over its number of steps of their kind, worked out from
    `log_every` and the step count, which only the stage passed: an objective built without them (or in
    mode supervised without `period=1`) logged twice the mean in any window with other than half of each
    kind. A weight must come in every step (the trainer refuses one given in some steps only), hence the 0s;
    a window without a step of a kind logs no value for its metrics."""
    anchor = next(iter(measured.values()))
    one, zero = anchor.new_ones((), dtype=torch.float32), anchor.new_zeros((), dtype=torch.float32)
    metrics: dict[str, Tensor] = {}
    for name in STEP_METRICS:
        metrics[name] = measured.get(name, zero)
        metrics[name + WEIGHT_SUFFIX] = one if name in measured else zero
    return metrics


class CvtObjective(nn.Module):
    def __init__(
        self,
        encoder: WordEncoder,
        modules: dict[str, nn.Module],
        settings: Settings,
        *,
        mode: str = "cvt",
        teacher: str = "separate",
        cvt_tasks: str = "all",
        task_weights: dict[str, float] | None = None,
        seed: int = 0,
    ):
        super().__init__()
        self.encoder = encoder
        self.tasks = list(modules)
        keys = [module_key(t) for t in self.tasks]
        if len(set(keys)) != len(keys):  # the ModuleDict would keep one module for both tasks
            raise ValueError(f"tasks {self.tasks} share a module name ({keys}); CvtConfig refuses such names")
        self.heads = nn.ModuleDict(dict(zip(keys, modules.values(), strict=True)))
        self.settings, self.mode, self.teacher_pass, self.cvt_tasks = settings, mode, teacher, cvt_tasks
        self.task_weights = task_weights or {t: 1.0 for t in self.tasks}
        self.seed = seed
        self.step = 0
        self.ema: Any = None  # the trainer's EMA, when the stage asks for EMA warm-up (see set_progress)
        self.ema_decay = 0.0

    def head(self, task: str) -> nn.Module:
        return self.heads[module_key(task)]

    def set_progress(self, progress: TrainingProgress) -> None:
        """Called by the trainer before each step: the step count (seeds the `cvt_tasks: one` draw) and,
        with EMA warm-up, this step's decay min(decay, (1+t)/(10+t)) (a function of t: exact resume)."""
        self.step = progress.step
        if self.ema is not None:
            self.ema.decay = min(self.ema_decay, (1.0 + progress.step) / (10.0 + progress.step))

    # --- steps -----------------------------------------------------------------------------------

    def forward(self, tagged: TaggedBatch) -> StepOutput:
        if tagged.source == "labeled":
            inner: TaggedBatch = tagged.batch
            return self.labeled(inner.source, inner.batch)
        return self.unlabeled(tagged.batch)

    def labeled(self, task: str, batch: dict[str, Tensor]) -> StepOutput:
        s = self.settings
        states = self.encoder(batch, s.dropout)
        module = self.head(task)
        smoothing = s.parse_label_smoothing if module.kind == "parsing" else s.label_smoothing
        terms, stats = module.supervised(states, batch, smoothing, s.dropout)
        loss = self.normalize(terms)
        accuracy = 100.0 * stats["correct"].float() / max(1, stats["total"])
        return StepOutput(loss, step_metrics({"sup_loss": loss.detach(), "sup_accuracy": accuracy.detach()}))

    def unlabeled_tasks(self) -> list[str]:
        if self.cvt_tasks == "all" or len(self.tasks) == 1:
            return self.tasks
        weights = np.array([self.task_weights[t] for t in self.tasks], dtype=float)
        index = np.random.default_rng([self.seed, self.step, 3]).choice(len(self.tasks), p=weights / weights.sum())
        return [self.tasks[int(index)]]

    def teach(self, states: EncoderStates, batch: dict[str, Tensor], tasks: list[str]) -> dict[str, Any]:
        with torch.no_grad():
            return {t: self.head(t).teacher(states, batch, self.settings) for t in tasks}

    def unlabeled(self, batch: dict[str, Tensor]) -> StepOutput:
        s = self.settings
        tasks = self.unlabeled_tasks()
        primary_only = self.mode == "word_dropout"
        if self.teacher_pass == "shared" and not primary_only:
            clean = self.encoder(batch, 0.0, clean=True)
            targets = self.teach(clean.detached(), batch, tasks)
            states = clean.dropped(s.unlabeled_dropout)
        else:
            inputs = self.encoder.inputs(batch)  # computed once: the same numbers in both passes
            with torch.no_grad():
                targets = self.teach(self.encoder(batch, 0.0, inputs, clean=True), batch, tasks)
            student_batch = self.drop_words(batch) if primary_only else batch
            states = self.encoder(student_batch, s.unlabeled_dropout, inputs)
        s.student_dropout = s.unlabeled_dropout
        terms = []
        for task in tasks:
            for name, total, count in self.head(task).student_losses(states, batch, targets[task], s, primary_only):
                terms.append((f"{task}/{name}", total, count))
        loss = self.normalize(terms)
        return StepOutput(loss, step_metrics({"cvt_loss": loss.detach()}))

    def drop_words(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """The word-dropout student's input: each word replaced by <removed> with probability
        `word_dropout` (its characters by <missing>, so the char-CNN cannot recover it)."""
        lengths = batch["lengths"]
        positions = torch.arange(batch["words"].shape[1], device=lengths.device)[None, :]
        words_mask = (positions > 0) & (positions < (lengths - 1)[:, None])
        drop = words_mask & (torch.rand(batch["words"].shape, device=lengths.device) < self.settings.word_dropout)
        return {
            **batch,
            "words": batch["words"].masked_fill(drop, REMOVED),
            "slots": batch["slots"].masked_fill(drop, 1),
        }

    def normalize(self, terms: list[tuple[str, Tensor, Tensor]]) -> Tensor:
        """Sum of each term's total divided by its count over the global batch (all ranks)."""
        counts = torch.stack([count.float().reshape(()) for _, _, count in terms])
        world = dist.world_size()
        if world > 1:
            counts = dist.all_reduce_mean(counts) * world  # sum over ranks
        totals = torch.stack([total.float().reshape(()) for _, total, _ in terms])
        return (totals * world / counts.clamp_min(1.0)).sum()

    # --- evaluation ------------------------------------------------------------------------------

    @torch.no_grad()
    def predict(self, task: str, batch: dict[str, Tensor]) -> list[Any]:
        states = self.encoder(batch, 0.0)
        return self.head(task).predict(states, batch, self.settings)

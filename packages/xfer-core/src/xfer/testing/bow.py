"""`testing.fit`: a hashed bag-of-words model trained with the shared trainer.

Small enough to run hundreds of steps per second on a CPU, yet it uses every part of the
training machinery (BatchStream cursor, dropout RNG, optimizer state, EMA, evaluation on
gathered predictions, checkpoints), which makes it the reference workload for core tests:
exact resume, crash-safe checkpoints, data parallelism and trainer overhead.
"""

from __future__ import annotations

import itertools
import json
import zlib
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from xfer.core.config import Input, TaskRef, knob
from xfer.core.data import BatchStream, pad
from xfer.core.errors import UserError
from xfer.core.evaluation import TaskEvaluator
from xfer.core.stage import StageContext
from xfer.core.tasks import SentenceExample, Task, nonempty_examples
from xfer.core.trainer import StepOutput, TrainConfig, Trainer


@dataclass
class FitConfig:
    task: TaskRef = knob(doc="A sentence classification or regression task, e.g. toy/agreement.")
    train: TrainConfig = knob(
        TrainConfig(
            epochs=2, batch_size=16, lr=1e-2, log_every=10, checkpoint_every=20, precision="fp32", warmup_fraction=0.1
        ),
        "Optimisation settings.",
    )
    buckets: int = knob(4096, "Hash buckets for words and word bigrams (bucket 0 is padding).")
    dim: int = knob(32, "Embedding size.")
    dropout: float = knob(0.1, "Dropout on the pooled embedding.", ge=0, lt=1)
    init: Input | None = knob(
        None, "Start from the weights of another fit stage's `model` output (or a folder).", takes=("bow-model",)
    )


def featurize(example: SentenceExample, buckets: int) -> list[int]:
    """Stable hashes (crc32) of words and bigrams of both segments; never 0 (padding)."""
    ids: list[int] = []
    for segment, text in (("a", example.text_a), ("b", example.text_b or "")):
        words = text.lower().split()
        for token in words + [f"{x}_{y}" for x, y in itertools.pairwise(words)]:
            ids.append(1 + zlib.crc32(f"{segment}:{token}".encode()) % (buckets - 1))
    return ids or [1]


class BowObjective(nn.Module):
    def __init__(self, buckets: int, dim: int, outputs: int, dropout: float):
        super().__init__()
        self.embed = nn.EmbeddingBag(buckets, dim, mode="mean", padding_idx=0)
        self.dropout = nn.Dropout(dropout)
        self.hidden = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, outputs)
        self.regression = outputs == 1

    def scores(self, ids: torch.Tensor) -> torch.Tensor:
        pooled = self.dropout(self.embed(ids))
        return self.out(torch.relu(self.hidden(pooled))).float()

    def forward(self, batch: dict[str, torch.Tensor]) -> StepOutput:
        scores = self.scores(batch["ids"])
        if self.regression:
            loss = nn.functional.mse_loss(scores.squeeze(-1), batch["label"].float())
            return StepOutput(loss, {})
        loss = nn.functional.cross_entropy(scores, batch["label"])
        accuracy = (scores.argmax(-1) == batch["label"]).float().mean()
        return StepOutput(loss, {"accuracy": accuracy})


def run_fit(ctx: StageContext) -> None:
    config: FitConfig = ctx.config
    task: Task = ctx.host.load("task", config.task.name)(config.task.key, config.task.config)
    info = task.info()
    if info.type not in ("classification", "regression"):
        raise UserError(f"testing.fit trains sentence tasks; {task.name} is a {info.type} task")
    labels = list(info.labels)
    # the Task contract at stage time too (pre-flight checks it, but a stage can be run without it)
    train_examples = nonempty_examples(task, "train")
    dev_examples = nonempty_examples(task, "dev")

    def label_of(example: Any) -> float | int:
        return float(example.label) if info.type == "regression" else labels.index(example.label)

    train = [(featurize(e, config.buckets), label_of(e)) for e in train_examples]
    dev = [(featurize(e, config.buckets), 0) for e in dev_examples]

    def collate(items: list[tuple[list[int], Any]]) -> dict[str, torch.Tensor]:
        dtype = torch.float32 if info.type == "regression" else torch.long
        return {"ids": pad([i for i, _ in items]), "label": torch.tensor([y for _, y in items], dtype=dtype)}

    model = BowObjective(config.buckets, config.dim, 1 if info.type == "regression" else len(labels), config.dropout)

    if config.init is not None:
        from safetensors.torch import load_model

        load_model(model, str(ctx.resolve(config.init) / "model.safetensors"))

    def predict(module: nn.Module, batch: dict[str, torch.Tensor]) -> list[Any]:
        scores = module.scores(batch["ids"])
        if info.type == "regression":
            return scores.squeeze(-1).tolist()
        return [labels[i] for i in scores.argmax(-1).tolist()]

    from xfer.core import distributed as dist

    stream = BatchStream(
        train,
        config.train.batch_size,
        collate,
        seed=ctx.seed,
        rank=dist.rank(),
        world_size=dist.world_size(),
        accumulation=config.train.grad_accum,
    )
    evaluator = TaskEvaluator(
        task, dev_examples, dev, collate, predict, ctx.device, feature_ids=[e.id for e in dev_examples]
    )
    trainer = Trainer(
        config.train,
        model,
        stream,
        ctx.dir,
        device=ctx.device,
        evaluator=evaluator,
        events=ctx.events(),
        description=ctx.name,
    )
    result = trainer.fit()
    trainer.load_weights("last")
    out = ctx.output_dir("model")
    if ctx.is_main:
        from safetensors.torch import save_model

        save_model(model, str(out / "model.safetensors"))
        (out / "meta.json").write_text(json.dumps({"task": task.name, "labels": labels, "step": result.step}) + "\n")
        ctx.report(
            f"Final dev metrics ({task.name}): " + ", ".join(f"{k} {v:.4g}" for k, v in result.last_eval.items())
        )

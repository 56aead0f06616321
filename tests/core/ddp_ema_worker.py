"""Run under `torchrun` (or alone) by test_distributed.py: trains a tiny regression with EMA,
evaluating every 2 steps, and writes what each rank ended with to `<out>/<tag>-rank<r>.json`.

Each rank initialises its model from a *different* seed on purpose: DDP broadcasts rank 0's
weights when it wraps the model, so everything after the wrap (EMA shadow included) must agree.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch import nn

from xfer.core import distributed as dist
from xfer.core.data import BatchStream
from xfer.core.errors import TrainingStopped
from xfer.core.trainer import StepOutput, TrainConfig, Trainer, load_evaluated_weights


class Regression(nn.Module):
    def __init__(self, dropout: float):
        super().__init__()
        self.linear = nn.Linear(4, 1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        x, y = batch
        loss = nn.functional.mse_loss(self.linear(self.dropout(x)).squeeze(-1), y)
        return StepOutput(loss, {})


def data(n: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=gen)
    return list(zip(x, x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.1, strict=True))


def collate(items: list) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.stack([x for x, _ in items]), torch.stack([y for _, y in items])


class DevLoss:
    """Every rank scores the full (tiny) dev set, so no gathering is needed."""

    main_metric, greater_is_better = "loss", False

    def __init__(self) -> None:
        self.x, self.y = collate(data(16, 7))
        self.history: list[float] = []

    def __call__(self, model: nn.Module) -> dict[str, float]:
        loss = nn.functional.mse_loss(model.linear(self.x).squeeze(-1), self.y).item()
        self.history.append(loss)
        return {"loss": loss}


def run(out: Path, tag: str, dropout: float) -> None:
    torch.manual_seed(100 + dist.rank())
    model = Regression(dropout)
    config = TrainConfig(
        steps=10, batch_size=8, lr=0.05, precision="fp32", ema_decay=0.8, eval_every=2, checkpoint_every=5
    )
    stream = BatchStream(data(40, 3), 8, collate, seed=5, rank=dist.rank(), world_size=dist.world_size())
    evaluator = DevLoss()
    trainer = Trainer(
        config, model, stream, out / tag / "work", device=torch.device("cpu"), evaluator=evaluator, progress=False
    )
    result = trainer.fit()
    ema = {k: v.tolist() for k, v in trainer.ema.shadow.items()}
    live = {k: v.tolist() for k, v in model.state_dict().items()}
    best = trainer.load_weights("best")
    exported = Regression(0.0)
    load_evaluated_weights(best, exported)
    record = {
        "live": live,
        "ema": ema,
        "best_metric": result.best_metric,
        "exported_metric": evaluator(exported)["loss"],
        "loaded_metric": evaluator(model)["loss"],
        "history": evaluator.history[:-2],
    }
    (out / f"{tag}-rank{dist.rank()}.json").write_text(json.dumps(record))


class StopAtStep:
    """Trainer events (rank 0 only) that ask to stop once step `at` is logged: every rank must stop
    there together, or rank 1 would wait for rank 0 in the next gradient all-reduce."""

    def __init__(self, at: int) -> None:
        self.at, self.step = at, 0

    def log(self, step: int, split: str, metrics: dict[str, float]) -> None:
        self.step = step

    def checkpoint_saved(self, step: int, path: Path) -> None:
        pass

    def resumed(self, step: int) -> None:
        pass

    def stop_requested(self) -> str | None:
        return f"asked to stop at step {self.step}" if self.step >= self.at else None


def run_stop(out: Path) -> None:
    """Train with events asking to stop at step 4 (of 10); record where each rank stopped and why."""
    config = TrainConfig(steps=10, batch_size=8, lr=0.05, precision="fp32", log_every=2, checkpoint_every=2)
    stream = BatchStream(data(40, 3), 8, collate, seed=5, rank=dist.rank(), world_size=dist.world_size())
    trainer = Trainer(
        config, Regression(0.0), stream, out / "stop" / "work", device=torch.device("cpu"), events=StopAtStep(4)
    )
    try:
        trainer.fit()
        record = {"stopped_at": None}
    except TrainingStopped as exc:
        record = {"stopped_at": trainer.step, "message": str(exc)}
    (out / f"stop-rank{dist.rank()}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    dist.init_from_env()
    target = Path(sys.argv[1])
    for tag, dropout in (("nodrop", 0.0), ("dropout", 0.3)):
        run(target, tag, dropout)
    run_stop(target)

"""Run under `torchrun --nproc_per_node=2` by test_distributed_hostile.py: tiny trainings in which
the two ranks disagree on purpose, each rank writing what happened to `<out>/<scenario>-rank<r>.json`.

    torchrun --standalone --nproc_per_node=2 ddp_hostile_worker.py OUT SCENARIO [SCENARIO ...]

Scenarios: `lr` (rank 1 trains with another learning rate), `data` (rank 1 has another dataset),
`shape` (rank 1's model has a parameter more),
`metrics` (each rank logs a metric the other does not), `evaluator` (an evaluator that scores each
rank's own numbers, so the ranks disagree on the best checkpoint), `unused` (a parameter that no
step uses, without `train.find_unused_parameters`), `shards` (ranks with their own data cursors,
interrupted and resumed), `kill` (dropout on; with XFER_TEST_KILL_RANK1_AT=N rank 1 SIGKILLs itself
at its N-th forward), `straight` (`kill`'s training in a run directory of its own: the uninterrupted
reference, made in the launch that resumes `kill`, so that it needs no launch of its own). The process
group is made here with a 20 s timeout, so a collective that the ranks do not both make fails instead
of hanging.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import sys
from pathlib import Path

import torch
import torch.distributed
from torch import nn

from xfer.core import distributed as dist
from xfer.core.data import BatchStream
from xfer.core.trainer import StepOutput, TrainConfig, Trainer


class Regression(nn.Module):
    def __init__(self, metrics: dict[str, float] | None = None, unused: bool = False, dropout: float = 0.0):
        super().__init__()
        self.linear = nn.Linear(4, 1)
        self.metrics = metrics or {}
        self.idle = nn.Linear(4, 1) if unused else None  # a head no step uses: no gradient, ever
        self.dropout = nn.Dropout(dropout)
        self.kill_at = int(os.environ.get("XFER_TEST_KILL_RANK1_AT", "0")) if dist.rank() == 1 else 0
        self.calls = 0

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        self.calls += 1
        if self.calls == self.kill_at:  # no handler, no cleanup: an OOM kill of one rank mid-training
            os.kill(os.getpid(), signal.SIGKILL)
        x, y = batch
        loss = nn.functional.mse_loss(self.linear(self.dropout(x)).squeeze(-1), y)
        return StepOutput(loss, {k: torch.tensor(v) for k, v in self.metrics.items()})


def data(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(3))
    return list(zip(x, x @ torch.tensor([1.0, -2.0, 0.5, 3.0]), strict=True))


def collate(items: list) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.stack([x for x, _ in items]), torch.stack([y for _, y in items])


class ShardSource:
    """Each rank reads its own half of the data with its own cursor, as ELECTRA's streams do with
    `PretrainBatches(stream_sharding="shards")`: the cursors differ, each refuses another rank's."""

    steps_per_epoch = None

    def __init__(self, items: list, rank: int, world_size: int) -> None:
        self.items, self.rank, self.offset = items[rank::world_size], rank, 0

    def next_step(self) -> list:
        batch = [self.items[(self.offset + i) % len(self.items)] for i in range(4)]
        self.offset += 4
        return [collate(batch)]

    def state_dict(self) -> dict:
        return {"rank": self.rank, "offset": self.offset}

    def load_state_dict(self, state: dict) -> None:
        if state["rank"] != self.rank:
            raise ValueError(f"rank {self.rank} was given rank {state['rank']}'s data cursor")
        self.offset = state["offset"]


def shards(out: Path, name: str = "shards") -> None:
    """Train 3 of 6 steps (as a run killed after its step-3 checkpoint), resume to 6, and train 6 at once."""
    rank, record = dist.rank(), {"error": None, "logged": []}
    weights = []
    try:
        for steps, work in ((3, "interrupted"), (6, "interrupted"), (6, "straight")):
            torch.manual_seed(1)
            config = TrainConfig(
                steps=steps,
                batch_size=8,
                lr=0.05,
                schedule="constant",
                precision="fp32",
                eval_every=None,
                checkpoint_every=3,
            )
            source = ShardSource(data(40), rank, dist.world_size())
            trainer = Trainer(config, Regression(), source, out / "shards" / work, device=torch.device("cpu"))
            result = trainer.fit()
            weights.append((result.resumed_from, trainer.objective.linear.weight.tolist()))
        record["resumed"], record["straight"] = weights[1], weights[2]
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
    (out / f"shards-rank{rank}.json").write_text(json.dumps(record))


class RankEvaluator:
    """Scores a number of its own rank: rank 0 improves at every evaluation, rank 1 never does."""

    main_metric, greater_is_better = "loss", False

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, model: nn.Module) -> dict[str, float]:
        self.calls += 1
        return {"loss": float(self.calls if dist.rank() == 1 else -self.calls)}


class Log:
    def __init__(self) -> None:
        self.records: list[dict] = []

    def log(self, step: int, split: str, metrics: dict[str, float]) -> None:
        self.records.append({"step": step, "split": split, **metrics})

    def checkpoint_saved(self, step: int, path: Path) -> None:
        pass

    def resumed(self, step: int) -> None:
        pass


def scenario(out: Path, name: str) -> None:
    rank = dist.rank()
    config = dict(steps=6, batch_size=8, lr=0.05, precision="fp32", log_every=3, checkpoint_every=6, prefetch=0)
    size, metrics, evaluator = 40, None, None
    if name == "lr" and rank == 1:
        config["lr"] = 0.1
    if name == "data" and rank == 1:
        size = 48
    if name == "metrics":
        metrics = {"alpha": 1.0} if rank == 0 else {"beta": 10.0}
    if name == "evaluator":
        config["eval_every"] = 2
        evaluator = RankEvaluator()
    killable = name in ("kill", "straight")
    if killable:  # dropout draws differ between ranks and must resume exactly on each
        config.update(checkpoint_every=3, log_every=1)
    torch.manual_seed(1 + rank)
    events = Log()
    record: dict = {"error": None}
    try:
        stream = BatchStream(data(size), 8, collate, seed=5, rank=rank, world_size=dist.world_size())
        trainer = Trainer(
            TrainConfig(**config),
            Regression(metrics, unused=name == "unused" or (name == "shape" and rank == 1), dropout=0.3 * killable),
            stream,
            out / name,
            device=torch.device("cpu"),
            evaluator=evaluator,
            events=events,
            progress=False,
        )
        record["resumed_from"] = trainer.fit().resumed_from
        record["weights"] = trainer.objective.linear.weight.tolist()
    except Exception as exc:  # recorded for the test to read; both ranks must fail alike
        record["error"] = f"{type(exc).__name__}: {exc}"
    record["logged"] = events.records
    (out / f"{name}-rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    torch.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    target = Path(sys.argv[1])
    for scenario_name in sys.argv[2:]:
        (shards if scenario_name == "shards" else scenario)(target, scenario_name)
    torch.distributed.barrier()  # both ranks done before either tears its side of the group down
    torch.distributed.destroy_process_group()

"""Metric sums on a device without float64 (Apple's MPS): a float64 metric must reach the device as float32."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from xfer.core.trainer import StepOutput, Trainer


class _Created(TorchDispatchMode):
    """Records (dtype, device type) of every tensor an op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[torch.dtype, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.seen.append((t.dtype, t.device.type))
        return out


def test_a_float64_metric_reaches_the_training_device_as_float32() -> None:
    """A CPU float64 metric (an objective's `torch.tensor(x, dtype=torch.float64)`) was moved to the device
    as float64 before any cast: on MPS that move fails at the first step. The `meta` device stands in for
    the training device; what is recorded is every tensor made there."""
    trainer = object.__new__(Trainer)  # only the accumulation state `_accumulate` and `_add` use
    trainer.device, trainer._sums = torch.device("meta"), {}
    loss = torch.tensor(0.5, device="meta")
    metric = torch.tensor(0.25, dtype=torch.float64)
    with _Created() as created:
        Trainer._accumulate(trainer, StepOutput(loss, {"auc": metric}), 2)
        Trainer._accumulate(trainer, StepOutput(loss, {"auc": metric}), 2)
    assert not [seen for seen in created.seen if seen == (torch.float64, "meta")]
    assert trainer._sums["auc"].dtype == torch.float32 and trainer._sums["auc"].device.type == "meta"
    cpu = object.__new__(Trainer)
    cpu.device, cpu._sums = torch.device("cpu"), {}
    for _ in range(2):
        Trainer._accumulate(cpu, StepOutput(torch.tensor(0.5), {"auc": metric}), 2)
    assert cpu._sums["auc"].item() == 0.25

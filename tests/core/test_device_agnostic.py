"""Device-agnostic code paths that a CPU-only machine never runs for real (CUDA).

The `meta` device stands in for a GPU where tensors are concerned: mixing a meta tensor with a
non-scalar CPU tensor raises as mixing a CUDA and a CPU tensor does. Decisions that ask torch.cuda
(RNG states, bf16 support) are checked against a fake CUDA made of monkeypatched functions.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from xfer.core import distributed
from xfer.core import rng as rng_module
from xfer.core.data import BatchStream
from xfer.core.trainer import StepOutput, TrainConfig, Trainer, resolve_precision

META = torch.device("meta")


class _Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 1)

    def forward(self, batch: torch.Tensor) -> StepOutput:
        return StepOutput(self.linear(batch).mean(), {})


def _meta_trainer(tmp_path: Path) -> Trainer:
    config = TrainConfig(batch_size=2, lr=0.1, precision="fp32", log_every=1000, checkpoint_every=1000, eval_every=None)
    stream = BatchStream([torch.zeros(2) for _ in range(4)], 2, torch.stack, seed=0)
    return Trainer(config, _Linear(), stream, tmp_path, device=META, progress=False)


# --- trainer metrics ---------------------------------------------------------------------------------


def test_metrics_given_as_numbers_or_cpu_tensors_are_summed_on_the_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A metric returned as a Python number or a CPU tensor (BAM's `gold_weight` is `torch.tensor(lam)`)
    was summed on the CPU: on CUDA the first log stacked it with the device's sums and crashed."""
    trainer = _meta_trainer(tmp_path)
    loss = torch.zeros((), device=META, requires_grad=True)
    out = StepOutput(loss, {"gold_weight": torch.tensor(0.5), "count": 3, "on_device": torch.ones((), device=META)})
    trainer._accumulate(out, accumulation=2)
    trainer._accumulate(out, accumulation=2)
    assert {name: value.device for name, value in trainer._sums.items()} == {
        "loss": META,
        "gold_weight": META,
        "count": META,
        "on_device": META,
    }
    # meta tensors hold no numbers: only the read-out after the (device) stacking is replaced
    monkeypatch.setattr(distributed, "all_reduce_mean", lambda values: torch.zeros(values.shape))
    logged = trainer._flush_metrics({})
    assert {"loss", "gold_weight", "count", "on_device"} <= set(logged)


# --- CUDA generator states in checkpoints ------------------------------------------------------------


def _fake_cuda(monkeypatch: pytest.MonkeyPatch, devices: int) -> dict[int, torch.Tensor]:
    """A CUDA with `devices` GPUs whose generator states are recorded by device index."""
    restored: dict[int, torch.Tensor] = {}

    def set_rng_state(state: torch.Tensor, device: int | str | torch.device = "cuda") -> None:
        index = torch.device("cuda", device).index if isinstance(device, int) else torch.device(device).index
        assert index is not None and 0 <= index < devices, f"no CUDA device {device!r} on this machine"
        restored[index] = state

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: devices)
    monkeypatch.setattr(torch.cuda, "set_rng_state", set_rng_state)
    monkeypatch.setattr(torch.cuda.random, "set_rng_state", set_rng_state)  # what set_rng_state_all calls
    return restored


def _cuda_states(devices: int) -> list[torch.Tensor]:
    return [torch.full((16,), i, dtype=torch.uint8) for i in range(devices)]


def test_cuda_rng_states_go_back_to_their_own_device_past_ten_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Restored in the sorted order of their keys, `torch_cuda_10` went to device 2 (and 11 to 3, 2 to 4, ...)."""
    restored = _fake_cuda(monkeypatch, 12)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: _cuda_states(12))
    json_state, tensors = rng_module.capture()
    assert sorted(k for k in tensors if k.startswith("torch_cuda_")) != [f"torch_cuda_{i}" for i in range(12)]
    rng_module.restore(json_state, tensors)
    assert sorted(restored) == list(range(12))
    assert all(bool((state == index).all()) for index, state in restored.items()), {
        i: int(s[0]) for i, s in restored.items()
    }


def test_cuda_rng_states_of_devices_this_machine_lacks_are_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint from a node with 4 GPUs resumed on one with 2: `set_rng_state_all` failed on device 2
    (a bare IndexError from torch.cuda); the CUDA states of a GPU run resumed on a CPU-only machine are
    left out too."""
    restored = _fake_cuda(monkeypatch, 2)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: _cuda_states(4))
    json_state, tensors = rng_module.capture()
    rng_module.restore(json_state, tensors)
    assert sorted(restored) == [0, 1]
    assert [int(restored[i][0]) for i in (0, 1)] == [0, 1]


# --- precision: auto on CUDA -------------------------------------------------------------------------


def _fake_gpus(monkeypatch: pytest.MonkeyPatch, majors: list[int]) -> None:
    """GPUs of these compute capabilities (8 = Ampere, native bf16; 7 = Volta/Turing, emulated only).
    The current device starts at cuda:0, as in a single-process run (only torchrun's ranks set theirs),
    and `torch.cuda.device(i)` makes cuda:i current, as on a real machine."""
    current = [0]

    def exchange(index: int) -> int:
        if index < 0:
            return -1
        previous, current[0] = current[0], index
        return previous

    def properties(device: int | str | torch.device | None = None) -> SimpleNamespace:
        index = device if isinstance(device, int) else (torch.device(device).index if device is not None else None)
        return SimpleNamespace(major=majors[current[0] if index is None else index])

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(majors))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    monkeypatch.setattr(torch.cuda, "_exchange_device", exchange)
    monkeypatch.setattr(torch.cuda, "_maybe_exchange_device", exchange)
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
    monkeypatch.setattr(torch.version, "hip", None)


def test_auto_precision_asks_the_training_gpu_not_the_current_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--device cuda:1` on a machine with a V100 as cuda:0 and an A100 as cuda:1 (and the reverse):
    `torch.cuda.is_bf16_supported` answered for cuda:0, the current device."""
    _fake_gpus(monkeypatch, [7, 8])
    assert resolve_precision("auto", torch.device("cuda", 1)) is torch.bfloat16
    assert resolve_precision("auto", torch.device("cuda", 0)) is None
    assert resolve_precision("auto", torch.device("cuda")) is None  # no index: the current device's
    _fake_gpus(monkeypatch, [8, 7])
    assert resolve_precision("auto", torch.device("cuda", 1)) is None
    assert resolve_precision("auto", torch.device("cuda", 0)) is torch.bfloat16
    assert resolve_precision("fp32", torch.device("cuda", 0)) is None
    assert resolve_precision("bf16", torch.device("cuda", 1)) is torch.bfloat16
    assert torch.cuda.current_device() == 0, "the current device is put back"


def test_the_chosen_gpu_becomes_the_current_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """A single-process `--device cuda:1` run left cuda:0 current (only torchrun's ranks set theirs), so
    a plugin's `device="cuda"` tensor or an index-free torch.cuda question went to the other GPU."""
    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: chosen.append(torch.device(device).index))
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert distributed.select_device("cuda:1") == torch.device("cuda", 1)
    assert distributed.select_device("cuda") == torch.device("cuda", 0)
    assert distributed.select_device("auto") == torch.device("cuda", 0)
    assert chosen == [1, 0, 0]
    assert distributed.select_device("cpu") == torch.device("cpu") and chosen == [1, 0, 0]


def test_a_run_that_never_used_cuda_does_not_start_it_to_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--device cpu` on a GPU machine: capturing the CUDA generators at each checkpoint started CUDA
    (a context on GPU 0, memory another job may need), for states nothing had drawn from."""

    def no_cuda_yet() -> list[torch.Tensor]:
        raise AssertionError("get_rng_state_all initialises CUDA")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", no_cuda_yet)
    assert list(rng_module.capture()[1]) == ["torch_cpu"]
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: _cuda_states(2))
    assert sorted(rng_module.capture()[1]) == ["torch_cpu", "torch_cuda_0", "torch_cuda_1"]

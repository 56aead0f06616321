"""Optimizers, parameter groups and learning-rate schedules the papers need.

- `AdamW` with an option to turn bias correction off (the original BERT/ELECTRA
  `AdamWeightDecayOptimizer` has none) and decoupled weight decay applied as `lr * wd * w`;
  with bias correction on it defers to `torch.optim.AdamW` (its fused kernel where the device has one).
- Parameter groups: weight decay excluded by name pattern, and layer-wise LR decay
  (`lr * decay ** depth_from_top`) when the model reports parameter depths.
- Schedules as pure functions of the step (so resuming needs only the step):
  `linear` (linear warmup to the peak, then linear decay to 0 — the usual HF schedule),
  `warmup_on_decay` (the original ELECTRA/BERT TF code: polynomial decay from step 0 multiplied
  by min(1, step / warmup), so the peak is slightly below `lr`), `constant`,
  `constant_warmup`, and `inverse_sqrt_t` (CVT's lr / (1 + 0.005 * sqrt(t)))
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

import torch
from torch import nn
from torch.optim.adam import adam as functional_adam

from xfer.core.errors import PluginError
from xfer.core.train_config import Schedule


def lr_multiplier(schedule: Schedule, step: int, total_steps: int, warmup_steps: int, cvt_rate: float = 0.005) -> float:
    """Multiplier of the peak learning rate for optimizer step `step` (0-based)."""
    warm = min(1.0, step / warmup_steps) if warmup_steps > 0 else 1.0
    if schedule == "constant":
        return 1.0
    if schedule == "constant_warmup":
        return warm
    if schedule == "inverse_sqrt_t":  # cvt_text: lr * min(1, t / warm-up) / (1 + 0.005 sqrt(t)), warm-up 5000
        return warm / (1.0 + cvt_rate * math.sqrt(step))
    if schedule == "warmup_on_decay":
        return max(0.0, 1.0 - step / max(1, total_steps)) * warm
    if schedule == "linear":
        if step < warmup_steps:
            return warm
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))
    raise ValueError(f"unknown schedule {schedule!r}")


class LayeredModel(Protocol):
    """What a model exposes to get layer-wise learning-rate decay."""

    num_layers: int

    def parameter_depth(self, name: str) -> int | None:
        """0 for embeddings, i+1 for layer i, None for parameters above the encoder (heads)."""


def find_all_layered(module: nn.Module) -> list[tuple[str, LayeredModel]]:
    """Every submodule (prefix, module) that reports parameter depths, outermost ones only.

    Not just the first: a model with two encoders (a dual encoder, ELECTRA's generator beside its
    discriminator) trained the second one's every layer and embeddings at the head's full `lr`,
    silently. A layered module inside another one defers to it (the outer one names the depths)."""
    found: list[tuple[str, LayeredModel]] = []
    for prefix, sub in module.named_modules():
        if any(_within(prefix, outer) for outer, _ in found):
            continue
        if callable(getattr(sub, "parameter_depth", None)) and hasattr(sub, "num_layers"):
            found.append((prefix, sub))  # type: ignore[arg-type]
    return found


def _within(name: str, prefix: str) -> bool:
    """Whether the dotted `name` lies under the module at `prefix` ("" is the root: everything does)."""
    return not prefix or name.startswith(prefix + ".")


@dataclass
class GroupSpec:
    lr_scale: float
    weight_decay: float


def param_groups(
    model: nn.Module,
    lr: float,
    weight_decay: float,
    exclude_from_decay: Iterable[str],
    layer_decay: float = 1.0,
    top_layer: Literal["decay", "decay_squared"] = "decay",
) -> list[dict]:
    """Parameter groups with per-group `lr` (layer-wise decay) and `weight_decay` (exclusions).

    Depth from the top: heads 0; the top encoder layer 1 (`decay`) or 2 (`decay_squared`, what
    the original ELECTRA code does because it counts the task layer as depth n+2); each lower
    layer one more; embeddings deepest. Each group records `lr_scale` so schedules multiply it.
    """
    patterns = [p.lower() for p in exclude_from_decay]
    normalization = _normalization_parameters(model)
    layered = find_all_layered(model) if layer_decay != 1.0 else []
    offset = 2 if top_layer == "decay_squared" else 1
    # Every name of each parameter, not only the first: a tied parameter (a decoder sharing the word
    # embeddings, registered before the encoder) was judged by its first name alone, so the embeddings
    # trained at the head's full lr and a no_decay name under the other path was not seen.
    names: dict[int, list[str]] = {}
    trainable: dict[int, nn.Parameter] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        if param.requires_grad:
            names.setdefault(id(param), []).append(name)
            trainable.setdefault(id(param), param)
    groups: dict[tuple[float, float], list[nn.Parameter]] = {}
    for key, param in trainable.items():
        scale = 1.0
        depth_and_layers = _depth(layered, names[key])
        if depth_and_layers is not None:
            depth, num_layers = depth_and_layers
            scale = layer_decay ** (offset + num_layers - depth)
        excluded = key in normalization or any(p in name.lower() for name in names[key] for p in patterns)
        decay = 0.0 if excluded else weight_decay
        groups.setdefault((scale, decay), []).append(param)
    return [
        {"params": params, "lr": lr * scale, "lr_scale": scale, "weight_decay": decay}
        for (scale, decay), params in sorted(groups.items(), key=lambda kv: (-kv[0][0], -kv[0][1]))
    ]


def _depth(layered: list[tuple[str, LayeredModel]], names: list[str]) -> tuple[int, int] | None:
    """(depth, num_layers) of a parameter known by `names`: the first that a layered module places."""
    for name in names:
        for prefix, sub in layered:
            if not _within(name, prefix):
                continue
            depth = sub.parameter_depth(name[len(prefix) + 1 :] if prefix else name)
            if depth is not None and (
                isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= sub.num_layers
            ):
                # a depth past the top gave a learning-rate multiplier above 1 (layer_decay ** -k), silently
                raise PluginError(
                    f"{type(sub).__module__}.{type(sub).__qualname__}.parameter_depth({name!r}) returned "
                    f"{depth!r}: a depth is 0 (embeddings) to num_layers {sub.num_layers}, or None above "
                    "the encoder"
                )
            if depth is not None:
                return depth, sub.num_layers
    return None


_NORMALIZATION = (nn.LayerNorm, nn.GroupNorm, nn.RMSNorm, nn.modules.batchnorm._NormBase)


def _normalization_parameters(model: nn.Module) -> set[int]:
    """Ids of the parameters of normalization layers, whatever they are called.

    BERT/ELECTRA exclude LayerNorm weights from weight decay by the TF variable name "LayerNorm";
    matching names alone misses modules named otherwise (this encoder's `norm`, `attn_norm`), so
    the module type decides as well. A plugin's own normalization class (an `RMSNorm` or `ScaleNorm`
    written by hand, as before torch had one) is no torch type: its gain was decayed towards 0, so
    its per-feature (at most 1-D) parameters count too when its class is named `...Norm`."""
    return {
        id(p)
        for m in model.modules()
        if isinstance(m, _NORMALIZATION) or _named_as_normalization(m)
        for p in m.parameters(recurse=False)
        if isinstance(m, _NORMALIZATION) or p.dim() <= 1
    }


def _named_as_normalization(module: nn.Module) -> bool:
    """Whether a module's class is named as a normalization layer (`T5LayerNorm`, `RMSNorm`,
    `LayerNormalization`, `ScaleNorm`)."""
    name = type(module).__name__.lower()
    return name.endswith(("norm", "normalization"))


class AdamW(torch.optim.Optimizer):
    """AdamW without bias correction (the original TF BERT/ELECTRA optimizer): torch's fused kernel
    where the device has one, else foreach-vectorised.

    update = m / (sqrt(v) + eps) + wd * w;  w -= lr * update.
    Use `make_optimizer(..., bias_correction=True)` to get torch's own AdamW instead.
    """

    def __init__(
        self,
        params: Iterable,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
    ):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    def _uncorrected_step(self, device: torch.device) -> torch.Tensor:
        """A step count (float32, as the fused kernel wants) so large that `beta ** step` is 0 and
        adding 1 leaves it unchanged; shared by every parameter, never saved."""
        cache: dict[torch.device, torch.Tensor] = self.__dict__.setdefault("_uncorrected_steps", {})
        if device not in cache:
            cache[device] = torch.tensor(2.0**40, dtype=torch.float32, device=device)
        return cache[device]

    @torch.no_grad()
    def step(self, closure: Callable | None = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            states = [self.state[p] for p in params]
            for state, p in zip(states, params, strict=True):
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            m = [s["exp_avg"] for s in states]
            v = [s["exp_avg_sq"] for s in states]
            beta1, beta2 = group["betas"]
            if _fused_supported(params):
                # torch's fused AdamW at a step count where beta ** step underflows to 0, so its bias
                # corrections are exactly 1: the same update in one vectorised pass per tensor
                # (decay p *= 1 - lr * wd of the old weights, then p -= lr * m / (sqrt(v) + eps))
                steps = [self._uncorrected_step(params[0].device)] * len(params)
                functional_adam(
                    params, grads, m, v, [], steps, fused=True, decoupled_weight_decay=True,
                    amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"],
                    weight_decay=group["weight_decay"], eps=group["eps"], maximize=False,
                )  # fmt: skip
                continue
            torch._foreach_lerp_(m, grads, 1 - beta1)
            torch._foreach_mul_(v, beta2)
            torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
            denom = torch._foreach_sqrt(v)
            torch._foreach_add_(denom, group["eps"])
            updates = torch._foreach_div(m, denom)
            if group["weight_decay"]:
                torch._foreach_add_(updates, params, alpha=group["weight_decay"])
            torch._foreach_add_(params, updates, alpha=-group["lr"])


def make_optimizer(
    groups: list[dict],
    kind: Literal["adamw", "sgd"],
    lr: float,
    betas: tuple[float, float],
    eps: float,
    bias_correction: bool,
    momentum: float,
) -> torch.optim.Optimizer:
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum)
    if bias_correction:
        fused = _fused_supported(p for group in groups for p in group["params"])
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=fused or None, foreach=not fused)
    return AdamW(groups, lr=lr, betas=betas, eps=eps)


def _fused_supported(params: Iterable[torch.Tensor]) -> bool:
    """Whether torch's fused AdamW kernel takes these parameters (floating point, one supported device).

    On CPU the fused kernel updates each tensor in one vectorised pass; the foreach path there is a
    per-tensor loop of ~8 ops that allocates two temporaries the size of the model every step (the
    ELECTRA-Small optimizer step: measured several times slower; tools/bench_pretrain.py).
    """
    try:
        from torch.optim.optimizer import _get_fused_kernels_supported_devices
    except ImportError:  # a torch without it: the foreach path is always correct
        return False
    params = list(params)
    devices = {p.device.type for p in params}
    return (
        all(p.is_floating_point() for p in params)
        and len(devices) == 1
        and devices <= set(_get_fused_kernels_supported_devices())
    )

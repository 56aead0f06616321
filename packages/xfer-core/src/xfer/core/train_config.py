"""`TrainConfig`: the optimisation settings every training stage shares (`train:` in recipes).

Kept free of torch imports so `xfer validate` and `xfer explain` stay fast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

from xfer.core.config import FieldError, knob

Schedule = Literal["linear", "warmup_on_decay", "constant", "constant_warmup", "inverse_sqrt_t"]


@dataclass
class TrainConfig:
    """Optimisation settings shared by every stage (nested as `train:` in stage configs)."""

    # A stage's default may set `steps` (ELECTRA: 1M) or `warmup_steps`, each of which overrides its
    # sibling. A recipe that sets the sibling alone means it: `train: {epochs: 3}` must not keep the
    # default's 1M steps. The recipe schema unsets these defaults when the key is given alone.
    RECIPE_UNSETS: ClassVar[dict[str, tuple[str, ...]]] = {
        "epochs": ("steps",),
        "warmup_fraction": ("warmup_steps",),
    }

    epochs: float = knob(1.0, "Passes over the training data (converted to steps; an epoch may end mid-batch).", gt=0)
    steps: int | None = knob(None, "Total optimizer steps; when set it overrides `epochs`.", ge=1)
    batch_size: int = knob(32, "Global batch: examples per optimizer step, summed over ranks and accumulation.", ge=1)
    grad_accum: int = knob(1, "Micro-batches accumulated per optimizer step (divides batch_size).", ge=1)
    optimizer: Literal["adamw", "sgd"] = knob("adamw", "AdamW (Transformers) or SGD with momentum (CVT).")
    lr: float = knob(1e-4, "Peak learning rate.", ge=0)
    adam_beta1: float = knob(0.9, "AdamW beta1.", ge=0, lt=1)
    adam_beta2: float = knob(0.999, "AdamW beta2.", ge=0, lt=1)
    adam_eps: float = knob(1e-6, "AdamW epsilon (BERT/ELECTRA use 1e-6).", gt=0)
    bias_correction: bool = knob(True, "AdamW bias correction; the original BERT/ELECTRA optimizer has none (false).")
    momentum: float = knob(0.9, "SGD momentum.", ge=0, lt=1)
    weight_decay: float = knob(0.01, "Decoupled weight decay (AdamW) / L2 (SGD).", ge=0)
    no_decay: list[str] = knob(
        ["bias", "layernorm", "layer_norm"],
        "Parameter-name substrings (case-insensitive) excluded from weight decay; normalization layers' "
        "parameters are always excluded, whatever their names.",
    )
    schedule: Schedule = knob(
        "linear", "linear | warmup_on_decay (original ELECTRA) | constant | constant_warmup | inverse_sqrt_t (CVT)."
    )
    warmup_steps: int | None = knob(None, "Warmup steps; overrides warmup_fraction.", ge=0)
    warmup_fraction: float = knob(0.0, "Warmup as a fraction of total steps.", ge=0, le=1)
    layer_decay: float = knob(1.0, "Layer-wise LR decay: lr * decay**depth_from_top (1.0 = off).", gt=0, le=1)
    top_layer_lr: Literal["decay", "decay_squared"] = knob(
        "decay",
        "Top encoder layer gets lr*decay (thesis formula) or lr*decay**2 (original ELECTRA code, which counts the head as depth n+2).",
    )
    clip_norm: float | None = knob(1.0, "Clip the global gradient norm to this (null = no clipping).", gt=0)
    ema_decay: float | None = knob(
        None,
        "Keep an exponential moving average of weights with this decay and evaluate/export it.",
        ge=0,
        lt=1,
    )
    precision: Literal["auto", "fp32", "bf16"] = knob(
        "auto", "bf16 autocast (auto: when the device supports it fast) or fp32."
    )
    log_every: int = knob(50, "Log training metrics every N steps.", ge=1)
    eval_every: int | Literal["epoch"] | None = knob(
        "epoch", "Evaluate every N steps, every epoch, or never (null).", ge=1
    )
    checkpoint_every: int | Literal["epoch"] = knob(
        500, "Write a checkpoint every N steps (and always at the end).", ge=1
    )
    keep_checkpoints: int = knob(
        1, "Recent checkpoints to keep (the best one is kept in addition); resuming needs one.", ge=1
    )
    prefetch: int = knob(
        2, "Optimizer steps of batches collated ahead in a background thread (0 = off); resume stays exact.", ge=0
    )
    find_unused_parameters: bool = knob(False, "DDP: allow parameters that get no gradient in a step.")

    def __post_init__(self) -> None:
        if self.steps is None and self.epochs <= 0:
            raise FieldError("epochs", f"must be positive (or set steps), got {self.epochs!r}")
        for index, pattern in enumerate(self.no_decay):
            if isinstance(pattern, str) and not pattern:
                # "" is a substring of every name: weight decay was silently off for every parameter
                raise FieldError(
                    ("no_decay", str(index)),
                    "an empty pattern matches every parameter name, so nothing would be weight-decayed: "
                    "remove it (set weight_decay: 0 to train without weight decay)",
                )
        if self.batch_size <= 0 or self.grad_accum <= 0:
            raise ValueError("batch_size and grad_accum must be positive")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"batch_size {self.batch_size} is not a multiple of grad_accum {self.grad_accum}")

    def warmup_for(self, total_steps: int) -> int:
        """Warmup steps for a stage of `total_steps` optimizer steps: `warmup_steps` when set, else
        `warmup_fraction` of `total_steps`, to the nearest step with halves rounded up.

        Why not `round()`: Python rounds halves to even, and the product carries float noise, so 10%
        of 25 steps (2.5) gave 2 while 10% of 35 steps (3.5000000000000004) gave 4, and 10% of 5
        steps (0.5) gave no warmup at all. The product is cleaned of that noise as `epoch_steps`
        cleans its own (rounded to 9 decimals), then halves go up: 3, 4 and 1."""
        if self.warmup_steps is not None:
            return self.warmup_steps
        return math.floor(round(self.warmup_fraction * total_steps, 9) + 0.5)

    def trains_at_lr_0_only(self, total_steps: int, warmup: int) -> bool:
        """Whether every step of a stage of `total_steps` steps with `warmup` warmup steps trains at
        learning rate 0 while train.lr is not 0 (the trainer refuses it, and so does `check_recipe` when
        train.steps gives the count).

        Why: a warmup starts at 0 (step 1 of a warmup of W trains at 0/W of train.lr, as in the original
        BERT/ELECTRA code, see `optim.lr_multiplier`), so a stage of one step under any warmup updated no
        weight and exported its initial weights as trained. One step is the only length where this
        happens: the second step of every schedule has a positive learning rate, and `constant` has no
        warmup. `lr: 0` says so on purpose. Kept here, free of torch, so recipe validation asks the same."""
        return self.lr != 0 and total_steps == 1 and warmup > 0 and self.schedule != "constant"

    def check_recipe(self) -> None:
        """Recipe-only checks: a Python caller may set `steps` after the fact (a stage converting
        epochs or a budget to steps), so these are not `__post_init__` rules."""
        if (
            self.schedule != "constant"  # the one schedule without warmup: the lr is train.lr from the first step
            and self.steps is not None
            and self.warmup_steps is not None
            and self.warmup_steps > self.steps
        ):
            # The lr would still be climbing when training stops: e.g. a stage default's 10k warmup
            # kept under `train: {steps: 100}`, silently training at a hundredth of `lr`.
            raise FieldError(
                "warmup_steps",
                f"{self.warmup_steps} is more than train.steps ({self.steps}): the learning rate would never "
                f"reach train.lr; give at most {self.steps} (or a warmup_fraction)",
            )
        self._check_some_step_learns()

    def _check_some_step_learns(self) -> None:
        """`train.steps: 1` under a warmup (the trainer's refusal, `trains_at_lr_0_only`, said before any stage
        runs). Steps from epochs or a budget are known only when training starts: the trainer checks those."""
        if self.steps is None:
            return
        warmup = self.warmup_for(self.steps)  # the trainer's rounding of a warmup_fraction
        if not self.trains_at_lr_0_only(self.steps, warmup):
            return
        key, given = (
            ("warmup_steps", f"{warmup}")
            if self.warmup_steps is not None
            else ("warmup_fraction", f"{self.warmup_fraction} (rounded to {warmup} warmup step)")
        )
        raise FieldError(
            key,
            f"{given} with train.steps 1: a warmup starts at learning rate 0, so under the {self.schedule!r} "
            "schedule the only step would train at learning rate 0 and change no weight; set "
            "train.warmup_steps: 0 (or train more steps)",
        )

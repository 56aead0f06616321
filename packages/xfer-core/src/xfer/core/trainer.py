"""The one training loop every stage uses.

Stages build an *objective* (an `nn.Module` whose `forward(batch)` returns `StepOutput(loss,
metrics)`), a `BatchStream`, optionally an evaluator, and hand them to `Trainer`. The trainer
owns everything else: AdamW (optionally without bias correction) or SGD, the learning-rate
schedule, layer-wise LR decay, weight-decay exclusions, gradient clipping and accumulation,
EMA weights, bf16 autocast (CPU AMX and CUDA), periodic evaluation, best/last checkpoints,
exact resume, early stop on NaN/inf, a progress bar, and `metrics.jsonl` logging — and data
parallelism under `torchrun`.

The loop itself adds no host-device synchronisation except at logging/eval/checkpoint
boundaries: losses and metrics are summed as tensors on the device; a NaN anywhere poisons the
sum, so checking the sums at each boundary catches it before a checkpoint could store bad weights.
(An objective may sync on its own: the encoder's unpadding reads each batch's lengths on the host.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import numbers
import re
import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

import torch
from torch import nn

from xfer.core import checkpoint as ckpt
from xfer.core import distributed as dist
from xfer.core import rng
from xfer.core.data import BatchSource, Prefetcher, check_batch_source, to_device
from xfer.core.errors import PluginError, TrainingDiverged, TrainingStopped, UserError
from xfer.core.evaluation import main_metric_problem
from xfer.core.optim import lr_multiplier, make_optimizer, param_groups
from xfer.core.results import plain_number
from xfer.core.train_config import TrainConfig

COUNT_METRIC = "tokens"
"""A metric with this name is a count (e.g. real tokens in the micro-batch): summed over
accumulation micro-batches and ranks instead of averaged, and the trainer logs `tokens_per_s`."""

WEIGHT_SUFFIX = "@weight"
"""A metric `NAME@weight` beside a metric `NAME` is NAME's weight in this micro-batch: NAME is then logged
pooled over the log window's micro-batches, steps and ranks, sum(value * weight) / sum(weight), instead of
averaged. For a ratio whose denominator varies by batch (a recall weighted by the batch's positives, a
precision by its predicted positives): the plain mean counted a batch with 2 positives as much as one with
200, and pulled in the placeholder of a batch with none. A weight of 0 leaves the micro-batch out (its value
may then be anything, NaN too); a window whose weights sum to 0 logs no NAME, as a metric nothing measured
(a NaN would read as a diverged metric). The weight itself is not logged. Give it in every step, with
`NAME`: a weight given in some steps only is refused, as the plain steps' values could not be pooled."""

TRAINER_METRICS = frozenset({"loss", "grad_norm", "lr", "epoch", "steps_per_s", f"{COUNT_METRIC}_per_s"})
"""Names the trainer logs itself, which an objective's metrics must not take: a metric `loss` replaced
the loss minimised in the log (and in the NaN check), one called `grad_norm` was added to the clipped
gradient's norm, and `lr`, `epoch`, `steps_per_s` and `tokens_per_s` were overwritten, silently."""


class StepOutput(NamedTuple):
    """What an objective returns: the loss to minimise and detached scalar metrics to log.

    Metrics are averaged over steps, micro-batches and ranks, except `tokens` (see COUNT_METRIC) and a metric
    given with its weight as `NAME@weight`, which is pooled: sum(value * weight) / sum(weight) (see
    WEIGHT_SUFFIX). The weights are metrics, not a third field: `loss, metrics = objective(batch)` is the
    documented way to call an objective (xfer.transformer.objectives), which a third field would break. A plain
    metric missing from a micro-batch counts 0 there (a warning says so): one measured in some micro-batches
    only wants its weight.

    Under accumulation the step minimises the mean of its micro-batches' losses, each micro-batch counting
    alike: that is the whole batch's mean loss when the micro-batches are of one size (`BatchStream` cuts them
    so) and the loss is a mean over examples; a loss averaged over tokens, or a source whose micro-batches
    differ in size, weighs the examples of a small micro-batch more (as one batch per rank does under DDP)."""

    loss: torch.Tensor
    metrics: dict[str, torch.Tensor]


class Evaluator(Protocol):
    """Scores the model (every rank calls it; it gathers predictions itself, so that every rank returns
    the same results: the trainer refuses ranks that disagree)."""

    main_metric: str
    greater_is_better: bool

    def __call__(self, model: nn.Module) -> dict[str, float]: ...


def resolve_precision(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype, or None for fp32. `auto` picks bf16 where it is fast (AMX/AVX512-BF16 CPUs, Ampere+)."""
    if precision == "fp32":
        return None
    if precision == "bf16":
        if device.type == "cpu" and not _cpu_has_fast_bf16():
            # as asked, but said: on an AVX2-only CPU bf16 autocast is emulated, several times slower than fp32
            warnings.warn(
                "precision bf16 on a CPU without native bf16 (no AMX or AVX512-BF16): emulated, several times "
                "slower than fp32; `precision: auto` picks fp32 here",
                UserWarning,
                stacklevel=2,
            )
        return torch.bfloat16
    if device.type == "cuda":
        # Plain `is_bf16_supported()` also says yes for pre-Ampere GPUs (T4, V100) that only emulate
        # bf16: slower than fp32 there, the opposite of what `auto` promises. It answers for the *current*
        # device, which a single-process `--device cuda:1` run never sets (it stays cuda:0): asked with
        # `device` made current, or a machine with an old and a new GPU got the other one's answer.
        with torch.cuda.device(device) if device.index is not None else contextlib.nullcontext():
            try:
                native = torch.cuda.is_bf16_supported(including_emulation=False)
            except TypeError:  # torch < 2.4 has no `including_emulation` (and counted native support only)
                native = torch.cuda.is_bf16_supported()
        return torch.bfloat16 if native else None
    if device.type == "cpu":
        return torch.bfloat16 if _cpu_has_fast_bf16() else None
    return None


def _cpu_has_fast_bf16() -> bool:
    """Emulated bf16 is slower than fp32, so `auto` wants native instructions (Linux cpuinfo flags)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def epoch_steps(epochs: float, steps_per_epoch: int) -> int:
    """Optimizer steps for `epochs` passes: a partial last step counts (ceil), at least one.

    The product is rounded to 9 decimals first: binary floats make e.g. `1.1 * 50` come out as
    55.00000000000001, and a bare ceil would train a 56th step that the user did not ask for (the
    original ELECTRA code, `int(steps_per_epoch * epochs)`, trains 55)."""
    return max(1, math.ceil(round(epochs * steps_per_epoch, 9)))


class EMA:
    """Exponential moving average of floating-point parameters and buffers."""

    def __init__(self, module: nn.Module, decay: float):
        self.decay = decay
        self.names = [n for n, t in module.state_dict().items() if t.is_floating_point()]
        state = module.state_dict()
        self.shadow = {n: state[n].detach().clone() for n in self.names}
        self._live = [state[n] for n in self.names]
        self._shadow_list = [self.shadow[n] for n in self.names]

    @torch.no_grad()
    def update(self) -> None:
        torch._foreach_lerp_(self._shadow_list, self._live, 1.0 - self.decay)

    @contextlib.contextmanager
    def swapped_in(self, module: nn.Module) -> Iterator[None]:
        """Temporarily load the EMA weights into `module` (for evaluation/export)."""
        backup = [t.detach().clone() for t in self._live]
        with torch.no_grad():
            torch._foreach_copy_(self._live, self._shadow_list)
        try:
            yield
        finally:
            with torch.no_grad():
                torch._foreach_copy_(self._live, backup)

    def load(self, tensors: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for name in self.names:
                self.shadow[name].copy_(tensors[name])


def load_evaluated_weights(path: Path, module: nn.Module) -> None:
    """Load the weights a checkpoint was *evaluated* with into `module`: its EMA weights when the run
    kept an EMA (the trainer evaluates, and picks the best checkpoint, with those), else the live ones.
    Exports must use this, or the exported model differs from the one whose dev score was reported."""
    ckpt.load_module(path, "model", module)
    if (path / "ema.safetensors").exists():
        shadow = ckpt.load_tensors(path, "ema")
        state = module.state_dict()
        with torch.no_grad():
            for name, tensor in shadow.items():
                state[name].copy_(tensor)


@dataclass
class TrainResult:
    step: int
    best_metric: float | None
    best_checkpoint: Path | None
    last_checkpoint: Path | None
    last_eval: dict[str, float] = field(default_factory=dict)
    resumed_from: int | None = None
    seconds: float = 0.0
    """Wall time of the training that made the result, across resumes: the time up to the
    checkpoint resumed from (its `seconds`) plus this fit's. Work lost to a kill after the last
    checkpoint is not counted (it was redone). 0 before the checkpoint that first recorded it."""


@dataclass(frozen=True)
class TrainingProgress:
    """Where training is, for objectives that anneal something (e.g. BAM's teacher-annealing λ).

    `step` counts optimizer steps completed before the current one, so `fraction` is 0.0 at the
    first step and approaches 1.0 at the last. Derived from the step count, so exact resume
    restores it; plain ints, so reading it never syncs a device.
    """

    step: int
    total_steps: int

    @property
    def fraction(self) -> float:
        return self.step / max(1, self.total_steps)


class TrainerEvents(Protocol):
    """Where the trainer reports (rank 0 only). `xfer.core.stage.RunLog` is the standard one.

    An events object may also have a `host` attribute (the `PluginHost`, as `RunLog` has): the
    trainer then names the objective's component and provider in its error messages. And it may
    have a `stop_requested() -> str | None` method, asked after every training log: a message
    stops training there with `TrainingStopped` (on every rank together), keeping the checkpoints
    written so far. The ELECTRA stage's collapse watch uses it (`on_collapse: stop`): a health
    check that fails for good should not spend the rest of the budget."""

    def log(self, step: int, split: str, metrics: dict[str, float]) -> None: ...

    def checkpoint_saved(self, step: int, path: Path) -> None: ...

    def resumed(self, step: int) -> None: ...


class Trainer:
    """Runs `objective` on `data` for `config.steps` (or epochs) optimizer steps.

    `workdir/checkpoints` holds checkpoints; if it has one, `fit()` resumes from it exactly.
    `events` receives training/evaluation metrics, checkpoint and resume notices (rank 0 only).

    Seams for method packages:
    - `data` is any `xfer.core.data.BatchSource` (`BatchStream`, `MultiTaskSource`,
      `AlternatingSource`, or your own following the protocol).
    - If the objective has a `set_progress(progress: TrainingProgress)` method, it is called
      before every optimizer step (annealing schedules read `progress.fraction`).
    - `config.prefetch` steps are collated ahead in a background thread; checkpoints store the
      cursor of the next batch the loop has not consumed, so resume stays exact.
    - With EMA on, evaluation, the best checkpoint and `load_weights` all use the EMA weights.
    """

    def __init__(
        self,
        config: TrainConfig,
        objective: nn.Module,
        data: BatchSource,
        workdir: Path,
        *,
        device: torch.device,
        evaluator: Evaluator | None = None,
        events: TrainerEvents | None = None,
        progress: bool | None = None,
        description: str = "train",
    ):
        check_batch_source(data)
        self.config, self.data, self.device = config, data, device
        self.objective = objective.to(device)
        self.checkpoints = workdir / "checkpoints"
        self.evaluator = evaluator
        self._host = getattr(events, "host", None)  # read on every rank: error messages name the objective
        self.events = events if dist.is_main() else None
        self.amp_dtype = resolve_precision(config.precision, device)
        self.steps_per_epoch: int | None = data.steps_per_epoch
        spe = self.steps_per_epoch
        if spe is not None and not (isinstance(spe, numbers.Integral) and not isinstance(spe, bool) and spe > 0):
            # 0 (a source over no examples) trained one step and never evaluated "every epoch", or divided by zero
            raise PluginError(
                f"batch source {type(data).__module__}.{type(data).__qualname__} has {self.steps_per_epoch!r} steps "
                "per epoch: expected a positive int, or None for a source without epochs (see xfer.core.data.BatchSource)"
            )
        epoch_knobs = [k for k in ("eval_every", "checkpoint_every") if getattr(config, k) == "epoch"]
        if self.steps_per_epoch is None and (config.steps is None or epoch_knobs):
            what = "train.steps must be set" if config.steps is None else f"train.{epoch_knobs[0]} cannot be 'epoch'"
            raise UserError(f"{type(data).__name__} has no epochs (steps_per_epoch is None): {what}")
        self.total_steps = (
            config.steps if config.steps is not None else epoch_steps(config.epochs, self.steps_per_epoch)
        )
        if self.total_steps < 1:
            # A stage that sets `steps` from its own budget after the recipe checks: with 0, fit() returned at
            # once and loading the weights failed with "no checkpoint to load"; a negative count was taken for
            # a warmup problem.
            raise UserError(
                f"train.steps is {self.total_steps} for this stage (as its steps, epochs or budget come out): "
                "it must train at least 1 step"
            )
        warmup = config.warmup_for(self.total_steps)
        self.warmup_steps = warmup
        # steps from epochs or a budget, known only now: as recipes refuse it (`constant` has no warmup: a
        # stage default's warmup_steps above train.steps is no problem there, and was refused as one)
        if warmup > self.total_steps and config.schedule != "constant":
            raise UserError(
                f"train.warmup_steps {warmup} is more than the {self.total_steps} steps this stage trains (as its "
                f"epochs or budget come out): the learning rate would never reach train.lr; give at most "
                f"{self.total_steps} warmup steps, or a warmup_fraction"
            )
        self._check_some_step_learns(warmup)
        self.eval_every = self.steps_per_epoch if config.eval_every == "epoch" else config.eval_every
        self.checkpoint_every = self.steps_per_epoch if config.checkpoint_every == "epoch" else config.checkpoint_every
        groups = param_groups(
            objective, config.lr, config.weight_decay, config.no_decay, config.layer_decay, config.top_layer_lr
        )
        if config.layer_decay != 1.0 and groups and all(g["lr_scale"] == 1.0 for g in groups) and dist.is_main():
            # A model without parameter depths (or whose names its parameter_depth does not know) trained every
            # parameter at train.lr, silently: the recipe's layer_decay (fine-tuning's default 0.8) did nothing.
            warnings.warn(
                f"train.layer_decay {config.layer_decay} has no effect: no parameter of the "
                f"{self._objective_label()} got a layer depth (that needs a submodule with `num_layers` whose "
                "`parameter_depth(name)` gives 0 for embeddings and i+1 for layer i, see "
                "xfer.core.optim.LayeredModel), so every parameter trains at train.lr",
                UserWarning,
                stacklevel=2,
            )
        if not groups:  # torch's "optimizer got an empty parameter list" traceback named neither whose nor why
            raise PluginError(
                f"{self._objective_label()} has no trainable parameters (none with requires_grad=True): "
                "there is nothing for the optimizer to train"
            )
        self.optimizer = make_optimizer(
            groups,
            config.optimizer,
            config.lr,
            (config.adam_beta1, config.adam_beta2),
            config.adam_eps,
            config.bias_correction,
            config.momentum,
        )
        self.params = [p for g in self.optimizer.param_groups for p in g["params"]]
        if dist.is_distributed():
            dist.check_same("the training settings", self._settings())
        self.model: nn.Module = self.objective
        if dist.world_size() > 1:
            from torch.nn.parallel import DistributedDataParallel

            self.model = DistributedDataParallel(self.objective, find_unused_parameters=config.find_unused_parameters)
        # after the DDP wrap: DDP broadcasts rank 0's weights, and the shadow must start from those
        self.ema = EMA(self.objective, config.ema_decay) if config.ema_decay else None
        self._data_state: dict[str, Any] = data.state_dict()
        self._batches: Prefetcher | None = None
        self.step = 0
        self.best_metric: float | None = None
        self.last_eval: dict[str, float] = {}
        self.description = description
        self.progress = progress if progress is not None else sys.stderr.isatty()
        self._sums: dict[str, torch.Tensor] = {}
        self._sum_steps = 0
        # micro-batches trained since the last log, and how many of them gave each plain metric (host ints:
        # no sync), to say when a metric given in some of them only is logged diluted (see `_warn_diluted`)
        self._window_micro_batches = 0
        self._given: dict[str, int] = {}
        self._diluted_said: set[str] = set()
        # sums resumed from a checkpoint written before weighted metrics (see `_add_weighted`)
        self._unweighted_resumed: set[str] = set()
        self._last_good_step = 0
        # (step, the window's loss sum, its grad_norm sum) after each step since the last finite check: the sums
        # are new tensors at every step (`_add` adds out of place), so keeping them costs no op and no sync, and
        # a divergence can name the step the loss or gradient first went non-finite (see `_first_non_finite`)
        self._window_trace: list[tuple[int, torch.Tensor | None, torch.Tensor | None]] = []
        self._first_loss: torch.Tensor | None = None  # step 1's loss (fresh fit) until the first finite check
        self._seconds_before = 0.0  # training time up to the checkpoint resumed from
        self._best_lost: str | None = None  # the best checkpoint a resume found gone (see `_reconcile_best`)
        self._started = time.perf_counter()

    def _check_some_step_learns(self, warmup: int) -> None:
        """Refuse a schedule under which every step trains at learning rate 0 while train.lr is not 0.

        Why: a warmup starts at 0 (step 1 of a warmup of W trains at 0/W of train.lr, as in the original
        BERT/ELECTRA code), so a stage of one step with any warmup (`steps: 1` with `warmup_steps: 1`, or a
        warmup_fraction of 0.5 or more rounded up to that step) updated no weight: it completed and exported
        its initial weights as trained, without a word. One step is the only length where this happens: the
        second step of every schedule has a positive learning rate. `lr: 0` says so on purpose."""
        schedule = self.config.schedule
        if not self.config.trains_at_lr_0_only(self.total_steps, warmup):
            return
        given = (
            f"train.warmup_steps {warmup}"
            if self.config.warmup_steps is not None
            else f"train.warmup_fraction {self.config.warmup_fraction} (rounded to {warmup} warmup step)"
        )
        raise UserError(
            f"{given} with 1 training step: a warmup starts at learning rate 0, so under the {schedule!r} schedule "
            "the only step would train at learning rate 0 and change no weight; set train.warmup_steps: 0 "
            "(or train more steps)"
        )

    def _settings(self) -> dict[str, Any]:
        """What every rank must agree on (`dist.check_same`): a rank with other steps, data or model
        waits in collectives the others never make, one with another learning rate trains apart."""
        settings: dict[str, Any] = {f"train.{k}": v for k, v in dataclasses.asdict(self.config).items()}
        settings.update(
            {
                "the total step count": self.total_steps,
                "the warmup step count": self.warmup_steps,
                "the precision": str(self.amp_dtype),
                # not the cursors: a source whose ranks read disjoint shards has one per rank (see `_save`)
                "the data's steps per epoch": self.steps_per_epoch,
            }
        )
        settings.update({f"the shape of parameter {n}": tuple(p.shape) for n, p in self.objective.named_parameters()})
        return settings

    # --- public --------------------------------------------------------------------------------

    def fit(self) -> TrainResult:
        self._started = time.perf_counter()
        resumed = self._resume()
        start = self.step
        bar = self._progress_bar(start)
        self.objective.train()
        self._data_state = self.data.state_dict()
        self._batches = Prefetcher(self.data, self.config.prefetch, pin_memory=self.device.type == "cuda")
        try:
            self._loop(bar)
        finally:
            self._batches.close()
            self._batches = None
        if bar is not None:
            bar.close()
        return TrainResult(
            step=self.step,
            best_metric=self.best_metric,
            best_checkpoint=ckpt.read_pointer(self.checkpoints / "best"),
            last_checkpoint=ckpt.latest_checkpoint(self.checkpoints),
            last_eval=self.last_eval,
            resumed_from=start if resumed else None,
            seconds=self._seconds(),
        )

    def _seconds(self) -> float:
        return self._seconds_before + time.perf_counter() - self._started

    def _loop(self, bar: Any) -> None:
        timer = time.perf_counter()
        timer_step = self.step
        while self.step < self.total_steps:
            self._train_step()
            if bar is not None:
                bar.update(1)
            boundary_log = self.step % self.config.log_every == 0 or self.step == self.total_steps
            boundary_eval = bool(self.eval_every) and (
                self.step % self.eval_every == 0 or self.step == self.total_steps
            )
            boundary_ckpt = self.step % self.checkpoint_every == 0 or self.step == self.total_steps
            if boundary_log or boundary_eval or boundary_ckpt:
                self._check_finite()
            if boundary_log:
                elapsed = time.perf_counter() - timer
                extra = {"steps_per_s": (self.step - timer_step) / elapsed} if elapsed > 0 else {}
                logged = self._flush_metrics(extra)
                timer, timer_step = time.perf_counter(), self.step
                if bar is not None:
                    bar.set_postfix({k: f"{v:.4g}" for k, v in logged.items() if k in ("loss", "lr")})
                self._stop_if_requested()
            is_best = False
            if boundary_eval and self.evaluator is not None:
                is_best = self._evaluate()
            if boundary_ckpt or is_best:
                self._save(best=is_best)

    def load_weights(self, which: Literal["best", "last"] = "best") -> Path:
        """Load the best (falls back to last) or last checkpoint's weights — EMA weights if EMA is on.

        A fallback from `best` after evaluations ran is said (a UserWarning, which a stage's report shows):
        it happens when no dev score was a number (every one NaN) or the best checkpoint was moved aside as
        damaged after training ended, and the stage went on with the last weights without a word."""
        path = ckpt.read_pointer(self.checkpoints / "best") if which == "best" else None
        fallback = path is None and which == "best"
        path = path or ckpt.latest_checkpoint(self.checkpoints)
        if path is None:
            raise ckpt.CheckpointError(f"{self.checkpoints}: no checkpoint to load")
        if fallback and self.evaluator is not None and self.eval_every and dist.is_main():
            if self.best_metric is not None:
                why = f"{self.checkpoints / 'best'} names no complete checkpoint"
            elif self._best_lost is not None:
                why = (
                    f"its best checkpoint {self._best_lost} is gone (moved aside as damaged) and no evaluation "
                    "after it chose another"
                )
            else:
                why = f"no dev evaluation gave a number as {self.evaluator.main_metric} (every one was NaN)"
            warnings.warn(
                f"{self.checkpoints}: no best checkpoint to load ({why}): using the last one, {path.name}",
                UserWarning,
                stacklevel=2,
            )
        ckpt.load_module(path, "model", self.objective)
        if self.ema is not None:
            self.ema.load(ckpt.load_tensors(path, "ema"))
            with torch.no_grad():
                torch._foreach_copy_(self.ema._live, self.ema._shadow_list)
        return path

    def autocast(self) -> contextlib.AbstractContextManager:
        """The mixed-precision context the trainer trains and evaluates in (a no-op for fp32)."""
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    # --- one step ------------------------------------------------------------------------------

    def _train_step(self) -> None:
        scale = lr_multiplier(self.config.schedule, self.step, self.total_steps, self.warmup_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = self.config.lr * group["lr_scale"] * scale
        set_progress = getattr(self.objective, "set_progress", None)
        if callable(set_progress):
            set_progress(TrainingProgress(self.step, self.total_steps))
        assert self._batches is not None, "_train_step runs inside fit()"
        try:
            micro_batches, self._data_state = self._batches.next()
        except StopIteration:  # a bare `StopIteration` traceback did not say whose next_step() ended
            raise PluginError(self._source_ended("ended (its next_step() raised StopIteration)")) from None
        accumulation = len(micro_batches)
        if not accumulation:  # else the step "trained" on nothing: no gradient, yet counted, logged, checkpointed
            raise PluginError(self._source_ended("returned no micro-batches"))
        for index, batch in enumerate(micro_batches):
            batch = to_device(batch, self.device)
            sync = contextlib.nullcontext()
            if accumulation > 1 and index < accumulation - 1 and self.model is not self.objective:
                sync = self.model.no_sync()  # type: ignore[operator]
            with sync:
                with self.autocast():
                    try:
                        out: StepOutput = self.model(batch)
                    except RuntimeError as exc:
                        refusal = self._unused_parameters_error(exc)
                        if refusal is None:
                            raise
                        raise refusal from None
                self._check_output(out)
                loss = out.loss / accumulation if accumulation > 1 else out.loss
                loss.backward()
            self._accumulate(out, accumulation)
            self._count_given(out.metrics)
            if self.step == 0:  # before any update: a non-finite loss here is the objective's, not the LR's
                first = out.loss.detach()
                self._first_loss = first if self._first_loss is None else self._first_loss + first
        if self.config.clip_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(self.params, self.config.clip_norm, foreach=True)
            self._add("grad_norm", norm.detach())
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema is not None:
            self.ema.update()
        self.step += 1
        self._sum_steps += 1
        self._window_trace.append((self.step, self._sums.get("loss"), self._sums.get("grad_norm")))

    def _source_ended(self, what: str) -> str:
        source = type(self.data)
        return (
            f"batch source {source.__module__}.{source.__qualname__} {what} at step {self.step + 1} of "
            f"{self.total_steps}: a BatchSource is endless and gives at least one micro-batch per step "
            "(see xfer.core.data.BatchSource)"
        )

    def _unused_parameters_error(self, exc: RuntimeError) -> UserError | None:
        """DDP's "Expected to have finished reduction in the prior iteration" (raised when some
        parameters got no gradient in the previous step) as a UserError naming them and the recipe key
        that allows it: torch's advice, passing `find_unused_parameters=True` to DDP, is not something
        a recipe can do, and the run that works in one process ended under torchrun in a traceback.
        None for any other error (re-raised as it is)."""
        if self.model is self.objective or "find_unused_parameters=True" not in str(exc):
            return None
        found = re.search(r"did not receive grad for rank \d+: ([\d ]+)", str(exc))
        trainable = [n for n, p in self.objective.named_parameters() if p.requires_grad]
        indices = [int(i) for i in found.group(1).split()] if found else []
        names = [trainable[i] for i in indices if i < len(trainable)]
        which = f" ({', '.join(names[:5])}{' ...' if len(names) > 5 else ''})" if names else ""
        return UserError(
            f"{self._objective_label()}: some parameters{which} got no gradient in step {self.step}, which "
            "data-parallel training refuses unless told to look for them: set `train.find_unused_parameters: "
            "true` in the recipe (or make forward(batch) use every trainable parameter in every step)"
        )

    def _check_output(self, out: Any) -> None:
        """Refuse, naming the objective, what `forward(batch)` must not return; PyTorch's own errors
        ("element 0 of tensors does not require grad", "'tuple' object has no attribute 'loss'")
        do not say whose bug it is. Type, shape and flag checks only: no device sync."""
        if type(out) is StepOutput:
            loss, metrics = out
            if (
                isinstance(loss, torch.Tensor)
                and loss.requires_grad
                and loss.numel() == 1
                and loss.is_floating_point()
                and type(metrics) is dict
                and all(type(v) is torch.Tensor and v.dim() == 0 for v in metrics.values())
                and TRAINER_METRICS.isdisjoint(metrics)
            ):
                return  # the usual case, decided without a function call per value
        problem = _output_problem(out)
        if problem is not None:
            raise PluginError(f"{self._objective_label()}: forward(batch) {problem}")

    def _objective_label(self) -> str:
        """`objective 'ns.name' from ns (dist 1.0) (class pkg.mod.Class)`, or the class alone when no
        registered objective spec targets it (a stage's own, unregistered objective)."""
        cls = type(self.objective)
        qualified = f"{cls.__module__}.{cls.__qualname__}"
        host = self._host
        if host is None:
            from xfer.core import plugins

            host = plugins._default_host  # only if one was made: never load plugins to word an error
        components = getattr(host, "components", None) or {}
        for base in cls.__mro__:
            target = f"{base.__module__}:{base.__qualname__}"
            for (kind, name), spec in components.items():
                if kind == "objective" and spec.target == target:
                    return f"objective {name!r} from {spec.provider or 'an unknown plugin'} (class {qualified})"
        return f"objective class {qualified}"

    def _add(self, name: str, value: torch.Tensor) -> None:
        current = self._sums.get(name)
        # A copy to start the sum: `.float()` of a float32 tensor is the tensor itself, so a metric that is
        # the objective's own buffer or parameter (`self.temperature`, a running count `self.seen += 1`)
        # became the sum, and the in-place updates of the following steps rewrote what was summed.
        # Added in the sum's dtype: a float64 metric tensor promoted the float32 sum to float64, which went into
        # the checkpoint and failed the resume's `.to(device)` on a device without float64 (MPS).
        self._sums[name] = value.to(torch.float32, copy=True) if current is None else current + value.to(current.dtype)

    def _accumulate(self, out: StepOutput, accumulation: int) -> None:
        values: dict[str, Any] = {"loss": out.loss}
        weights: dict[str, Any] = {}
        for name, value in out.metrics.items():
            if name.endswith(WEIGHT_SUFFIX):
                weights[name[: -len(WEIGHT_SUFFIX)]] = value
            else:
                values[name] = value
        for name in weights:
            if name not in out.metrics or name == COUNT_METRIC:
                why = "a count, summed, not averaged" if name == COUNT_METRIC else "not one of the metrics it returned"
                raise PluginError(
                    f"{self._objective_label()}: forward(batch) returned {name + WEIGHT_SUFFIX!r}, a weight for "
                    f"metric {name!r}, which is {why}: a weight goes with a metric of the objective's own"
                )
        for name, value in values.items():
            value = self._on_device(value)
            weight = weights.get(name)
            if weight is not None:
                self._add_weighted(name, value, self._on_device(weight))
                continue
            if name + WEIGHT_SUFFIX in self._sums:
                raise self._mixed_weights(name)
            self._add(name, value / accumulation if accumulation > 1 and name != COUNT_METRIC else value)

    def _count_given(self, metrics: Mapping[str, Any]) -> None:
        """Count a micro-batch, and each plain metric it gave, for `_warn_diluted` (host ints: no sync)."""
        self._window_micro_batches += 1
        for name in metrics:
            if not name.endswith(WEIGHT_SUFFIX) and name + WEIGHT_SUFFIX not in metrics:
                self._given[name] = self._given.get(name, 0) + 1

    def _on_device(self, value: Any) -> torch.Tensor:
        # On the training device: a metric given as a number, or as a CPU tensor (`torch.tensor(x)`,
        # as BAM's `gold_weight`), was summed on the CPU, and on CUDA `_flush_metrics` then stacked it
        # with the device's sums and failed at the first log (nccl cannot reduce a CPU tensor either).
        # No sync in the hot loop: `.to` is a no-op for a tensor already there (a CPU scalar is staged at
        # once, so non_blocking is safe), and a number is a fill on the device, not a blocking copy.
        if isinstance(value, torch.Tensor):
            value = value.detach()
            if value.dtype == torch.float64:  # summed in float32 anyway; MPS has no float64 to move it to
                value = value.float()
            return value.to(self.device, non_blocking=True)
        # plain_number: a numpy bool (`np.all(...)`) or a one-number array is one number too, as in dev results
        return torch.full((), float(plain_number(value)), device=self.device)

    def _add_weighted(self, name: str, value: torch.Tensor, weight: torch.Tensor) -> None:
        """Add value * weight to `name`'s sum and weight to `NAME@weight`'s (see WEIGHT_SUFFIX), on the device.

        Not divided by the accumulation count as plain metrics are: the pooled ratio needs no mean. A
        micro-batch of weight 0 adds 0, whatever its value (NaN * 0 would have made the window's NaN)."""
        key = name + WEIGHT_SUFFIX
        if name in self._unweighted_resumed:
            # A plain sum from a checkpoint written before weighted metrics: it cannot be pooled, so the first
            # log after the resume pools the steps trained since (as checkpoints without sums averaged them).
            self._unweighted_resumed.discard(name)
            self._sums.pop(name, None)
            self._sums.pop(key, None)
        elif name in self._sums and key not in self._sums:
            raise self._mixed_weights(name)
        weight = weight.float()
        self._add(name, torch.where(weight != 0, value.float() * weight, 0.0))
        self._add(key, weight)

    def _mixed_weights(self, name: str) -> PluginError:
        return PluginError(
            f"{self._objective_label()}: forward(batch) returned metric {name!r} with a weight "
            f"({name + WEIGHT_SUFFIX!r}) in some steps and without one in others: a weighted metric is pooled "
            "over the log window, which needs its weight in every step (0 where there is nothing to measure)"
        )

    # --- boundaries ----------------------------------------------------------------------------

    def _check_finite(self) -> None:
        # Which of them went bad is named in the error: "the loss or gradient" left the user to guess whether
        # the objective's loss or the optimisation (the gradient, the weights) broke first.
        bad = [k for k in ("loss", "grad_norm") if k in self._sums and not bool(torch.isfinite(self._sums[k]).all())]
        if (
            not bad
            and self.config.clip_norm is None  # no gradient norm was tracked: look at the weights
            and not bool(torch.isfinite(torch.stack(torch._foreach_norm(self.params))).all())
        ):
            bad = ["weights"]
        if dist.any_rank(bool(bad), self.device):
            last = ckpt.latest_checkpoint(self.checkpoints)
            kept = (
                f"last good checkpoint: {last} (step {ckpt.load_state(last)['step']})"
                if last
                else "no checkpoint had been written yet"
            )
            where = f"between step {self._last_good_step + 1} and step {self.step}; {kept}"
            words = {
                "loss": "the loss",
                "grad_norm": f"the gradient norm (grad_norm, before clipping to train.clip_norm {self.config.clip_norm})",
                "weights": "the weights (through their gradient; train.clip_norm is null, so no gradient norm is tracked)",
            }
            # another rank's: this one's sums are finite
            what = " and ".join(words[k] for k in bad) if bad else "the loss or gradient on another rank"
            first = self._first_loss  # set on every rank alike, so every rank takes part in any_rank
            if first is not None and dist.any_rank(not bool(torch.isfinite(first).all()), self.device):
                raise TrainingDiverged(
                    f"training stopped: the loss was already NaN/inf at the first step, before any update, "
                    f"so the {self._objective_label()} computes a non-finite loss from the initial weights: "
                    f"a bug in the objective (its loss or its inputs), not an optimisation problem — a lower "
                    f"learning rate or clipping will not help ({what} became NaN/inf {where})"
                )
            raise TrainingDiverged(
                f"training stopped: {what} became NaN/inf {where}. {self._first_non_finite()}"
                "Lower the learning rate, enable clipping, or use fp32."
            )
        self._last_good_step = self.step
        self._first_loss = None
        self._window_trace = []

    def _first_non_finite(self) -> str:
        """The sentence naming the first step of the window whose loss or gradient norm was NaN/inf, or "".

        Why: the check runs at log/eval/checkpoint boundaries only (no sync in between), so the error named a
        window of up to `log_every` steps; a loss NaN on one batch only left the user to find which. The
        window's sums stay non-finite from the first bad step on, so the first non-finite sum is that step.
        Syncs once per step of the window, on this failure path only. "" when this rank's steps were finite
        (another rank's went bad) or only the weights were checked (clip_norm null)."""
        for step, *sums in self._window_trace:
            for what, value in zip(("loss", "gradient norm"), sums, strict=True):
                if value is not None and not bool(torch.isfinite(value).all()):
                    return f"The {what} was first NaN/inf at step {step}. "
        return ""

    def _stop_if_requested(self) -> None:
        """Raise `TrainingStopped` on every rank when rank 0's events ask to stop (see `TrainerEvents`)."""
        ask = getattr(self.events, "stop_requested", None)  # events exist on rank 0 only
        reason = ask() if callable(ask) else None
        if dist.any_rank(reason is not None, self.device):
            raise TrainingStopped(dist.broadcast_object(reason))  # every rank says rank 0's reason

    def _flush_metrics(self, extra: dict[str, float]) -> dict[str, float]:
        names = sorted(self._sums)
        if dist.world_size() > 1:
            # A metric that only some ranks logged (say, one their micro-batches had something to measure
            # for): every rank must reduce the same names in the same order, else values were summed under
            # other names, silently, or the all-reduce failed on vectors of different lengths.
            everyone = dist.gather_objects(names)
            names = sorted(set().union(*everyone))
            for theirs in everyone:  # the same lists on every rank: every rank refuses alike, none waits
                mixed = [n for n in theirs if n + WEIGHT_SUFFIX not in theirs and n + WEIGHT_SUFFIX in names]
                if mixed:
                    raise self._mixed_weights(mixed[0])
        # A weighted metric is pooled: its sums of value * weight and of weight are reduced as they are, and
        # divided after (both sums averaged over ranks alike, so their ratio is the global one).
        pooled = [n for n in names if n + WEIGHT_SUFFIX in self._sums or n + WEIGHT_SUFFIX in names]
        plain = [n for n in names if n not in pooled and not n.endswith(WEIGHT_SUFFIX)]
        if names:
            zero = torch.zeros((), device=self.device)  # a rank that did not log it adds nothing, as a step would

            def stack(keys: list[str]) -> torch.Tensor:
                if not keys:
                    return zero.new_zeros(0)
                return torch.stack([self._sums[k].float().reshape(()) if k in self._sums else zero for k in keys])

            stacked = torch.cat(
                [
                    stack(plain) / max(1, self._sum_steps),
                    stack(pooled),
                    stack([n + WEIGHT_SUFFIX for n in pooled]),
                ]
            )
            reduced = dist.all_reduce_mean(stacked).tolist()
            values = dict(zip(plain, reduced[: len(plain)], strict=True))
            totals, weights = reduced[len(plain) : len(plain) + len(pooled)], reduced[len(plain) + len(pooled) :]
            for name, total, weight in zip(pooled, totals, weights, strict=True):
                if weight != 0:  # nothing measured in the whole window: no value, as for a metric never given
                    values[name] = total / weight
        else:
            values = {}
        if COUNT_METRIC in values:  # a per-rank count: the global count is the sum over ranks
            values[COUNT_METRIC] *= dist.world_size()
            if "steps_per_s" in extra:
                values[f"{COUNT_METRIC}_per_s"] = values[COUNT_METRIC] * extra["steps_per_s"]
        values["lr"] = self.optimizer.param_groups[0]["lr"] / max(self.optimizer.param_groups[0]["lr_scale"], 1e-30)
        if self.steps_per_epoch:
            values["epoch"] = self.step / self.steps_per_epoch
        values.update(extra)
        self._warn_diluted()
        self._sums, self._sum_steps = {}, 0
        self._unweighted_resumed = set()
        if self.events is not None:
            self.events.log(self.step, "train", values)
        return values

    def _warn_diluted(self) -> None:
        """Say (once per metric) that a plain metric given in some micro-batches of the log window only was
        logged diluted, and reset the window's counts.

        Why: a plain metric is averaged over every micro-batch of the window, a missing one counting 0, so a
        metric an objective returns only when its batch has something to measure (one task's accuracy in
        multi-task training) was logged at a fraction of its value, silently. Pooling with a weight
        (WEIGHT_SUFFIX) is the way to log it over the micro-batches that measured it. Counted since the last
        log or resume on this process, so a resume mid-window does not make a complete metric look partial."""
        total, given = self._window_micro_batches, self._given
        self._window_micro_batches, self._given = 0, {}
        if not dist.is_main():
            return
        for name, count in sorted(given.items()):
            if name in (COUNT_METRIC, "loss") or count >= total or name in self._diluted_said:
                continue
            self._diluted_said.add(name)
            warnings.warn(
                f"{self._objective_label()}: forward(batch) returned metric {name!r} in {count} of the {total} "
                f"micro-batches trained before the log at step {self.step}: a plain metric is averaged over every "
                f"micro-batch, a missing one counting 0, so it was logged at about {count}/{total} of its mean; "
                f"return it in every micro-batch with its weight {name + WEIGHT_SUFFIX!r} (1 where measured, 0 "
                "where not) to log its mean over those that measured it (see xfer.core.trainer.WEIGHT_SUFFIX)",
                UserWarning,
                stacklevel=2,
            )

    def _evaluate(self) -> bool:
        """Evaluate (EMA weights if on); returns True when this is the best result so far."""
        assert self.evaluator is not None
        self.objective.eval()
        devices = [self.device] if self.device.type == "cuda" else []
        ema = self.ema.swapped_in(self.objective) if self.ema else contextlib.nullcontext()
        with torch.random.fork_rng(devices=devices), torch.no_grad(), ema, self.autocast():
            results = self.evaluator(self.objective)
        self.objective.train()
        # numpy scalars and one-number tensors as Python numbers: json (state.json, metrics.jsonl) refuses a
        # numpy float32, and a tensor (`(predicted == gold).float().mean()`) beside the main metric ended the
        # run in a bare TypeError when the checkpoint after the evaluation was written
        if isinstance(results, Mapping):
            results = {k: plain_number(v) for k, v in results.items()}
        results = self._agreed(results)
        self._check_main_metric(results)
        self._check_writable(results)
        self.last_eval = results
        if self.events is not None:
            self.events.log(self.step, "dev", results)
        value = float(results[self.evaluator.main_metric])
        # A NaN score is never the best: every comparison with NaN is False, so a NaN taken as the
        # first "best" would stay best for the whole run and `select: best` would keep that checkpoint.
        better = not math.isnan(value) and (
            self.best_metric is None
            or (value > self.best_metric if self.evaluator.greater_is_better else value < self.best_metric)
        )
        if better:
            self.best_metric = value
        return better

    def _check_main_metric(self, results: Any) -> None:
        """A PluginError naming the evaluator (and its task) when its results lack a number for its
        `main_metric`: a bare KeyError or TypeError traceback came after a whole epoch of training, and
        said neither which component broke its contract nor what it returned instead."""
        evaluator = self.evaluator
        main = evaluator.main_metric
        got = main_metric_problem(results, main)
        if got is None:
            return
        cls = type(evaluator)
        task = getattr(getattr(evaluator, "task", None), "name", None)
        whose = f" (task {task!r})" if isinstance(task, str) else ""
        raise PluginError(
            f"evaluator {cls.__module__}.{cls.__qualname__}{whose} returned {got} at step {self.step}: its results "
            f"must hold a number for its main metric {main!r}"
        )

    def _check_writable(self, results: Mapping[str, Any]) -> None:
        """A PluginError naming the evaluator and the metric when one of its results cannot be written to
        state.json and metrics.jsonl (a tensor or array of several numbers, an object): it was a bare
        TypeError from json, raised while the checkpoint after the evaluation was written."""
        for name, value in results.items():
            try:
                json.dumps({name: value})
            except (TypeError, ValueError):
                cls = type(self.evaluator)
                shape = getattr(value, "shape", None)
                what = f"{type(value).__name__} of shape {tuple(shape)}" if shape is not None else type(value).__name__
                raise PluginError(
                    f"evaluator {cls.__module__}.{cls.__qualname__} returned a {what} as {name!r} at step "
                    f"{self.step}: dev results are written to state.json and metrics.jsonl, so each must be a "
                    "number (a one-number tensor is taken as one), a string, or a list of them"
                ) from None

    def _agreed(self, results: dict[str, float]) -> dict[str, float]:
        """Rank 0's dev results, once every rank is known to have the same ones (up to rounding).

        Why: an evaluator that scores each rank's own share of the dev set (not the gathered
        predictions) reported a subset's score, and ranks that disagreed on "best" wrote a checkpoint
        on one rank only: the others went on training and every rank waited for the rest forever."""
        everyone = dist.gather_objects(results)
        for other_rank, other in enumerate(everyone[1:], start=1):
            if not _same_results(everyone[0], other):
                evaluator = type(self.evaluator)
                raise PluginError(
                    f"evaluator {evaluator.__module__}.{evaluator.__qualname__} returned different dev results on "
                    f"rank 0 ({everyone[0]}) and rank {other_rank} ({other}): an evaluator must score the "
                    "predictions gathered from every rank (xfer.core.evaluation.TaskEvaluator does), not each "
                    "rank's own share of the dev set"
                )
        return everyone[0]

    # --- checkpoints ---------------------------------------------------------------------------

    def _save(self, best: bool) -> None:
        json_rng, tensor_rng = rng.capture()
        sums = {name: value.detach().cpu() for name, value in self._sums.items()}
        gathered = dist.gather_objects((json_rng, tensor_rng, self._data_state, sums))
        if not dist.is_main():
            dist.barrier()
            return
        all_rng = [(j, t) for j, t, _, _ in gathered]
        # The consumer's cursor, not the prefetcher's. Ranks that read disjoint shards (ELECTRA's
        # `PretrainBatches(stream_sharding="shards")`) each have their own: one per rank then, each
        # restored to its rank (rank 0's alone, restored everywhere, was refused by the other ranks'
        # sources, or misread).
        cursors = [d for _, _, d, _ in gathered]
        data_state = cursors[0] if all(c == cursors[0] for c in cursors) else cursors
        tensors = {"rng": {f"rank{r}.{k}": v for r, (_, t) in enumerate(all_rng) for k, v in t.items()}}
        # The metric sums since the last log: without them the first log after a resume averaged only the
        # steps trained since the checkpoint, and its loss differed from the uninterrupted run's.
        tensors["metric_sums"] = {f"rank{r}.{k}": v for r, (*_, m) in enumerate(gathered) for k, v in m.items()}
        if self.ema is not None:
            tensors["ema"] = self.ema.shadow
        state = {
            "step": self.step,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "data": data_state,
            "best_metric": self.best_metric,
            # which checkpoint holds `best_metric`'s weights: resume repairs the `best` pointer from it
            "best_checkpoint": ckpt.step_dir_name(self.step) if best else self._best_name(),
            "last_eval": self.last_eval,
            "rng": [j for j, _ in all_rng],
            "metric_steps": self._sum_steps,
            # the sums of weighted metrics are of value * weight, next to their weights' (see WEIGHT_SUFFIX)
            "world_size": dist.world_size(),
            "seconds": round(self._seconds(), 3),
        }
        payload = ckpt.CheckpointPayload(
            step=self.step,
            modules={"model": self.objective},
            tensors=tensors,
            torch_state={"optimizer": self.optimizer.state_dict()},
            state=state,
        )
        path = ckpt.save_checkpoint(self.checkpoints, payload, keep=self.config.keep_checkpoints, best=best)
        if self.events is not None:
            self.events.checkpoint_saved(self.step, path)
        dist.barrier()

    def _schedule_inputs(self, total_steps: int, warmup_steps: int) -> tuple[int | None, int | None]:
        """What of (total steps, warmup steps) the learning rate depends on under this run's schedule
        (`optim.lr_multiplier`): a constant schedule resumed with more steps is the same schedule."""
        schedule = self.config.schedule
        return (
            total_steps if schedule in ("linear", "warmup_on_decay") else None,
            warmup_steps if schedule != "constant" else None,
        )

    def _resume(self) -> bool:
        path = ckpt.load_latest_intact(self.checkpoints)  # damaged ones are moved aside, with a warning
        if path is None:
            return False
        state = ckpt.load_state(path)
        written = state.get("world_size", 1)  # checkpoints older than the field were single-process ones
        if written != dist.world_size():
            # It said "written with None processes" for a checkpoint without the field (compared as 1), and
            # gave no way out: relaunch with the checkpoint's process count, or train this run over.
            relaunch = (
                f"`torchrun --nproc_per_node={written} -m xfer.core.cli ...`"
                if written != 1
                else "a single process (without torchrun)"
            )
            raise ckpt.CheckpointError(
                f"{path}: written by {written} process(es), resuming with {dist.world_size()}; exact resume needs "
                f"the same world size: relaunch with {relaunch}, or delete {self.checkpoints} to train this run "
                "again from step 0"
            )
        written_schedule = (state.get("total_steps", self.total_steps), state.get("warmup_steps", self.warmup_steps))
        if state["step"] < self.total_steps and (  # a finished run fitted again trains nothing: no schedule
            self._schedule_inputs(*written_schedule) != self._schedule_inputs(self.total_steps, self.warmup_steps)
        ):
            # A run of another length (its epochs, steps, budget or batch size edited, or its warmup) resumed at
            # the checkpoint's step on its own schedule: the lr jumped from the written run's decayed value to
            # another one, silently. Fields absent from older checkpoints are not compared.
            raise ckpt.CheckpointError(
                f"{path}: written by a run of {written_schedule[0]} steps with {written_schedule[1]} warmup "
                f"steps, resumed by one of {self.total_steps} steps with {self.warmup_steps}: its learning-rate "
                f"schedule would change mid-run; delete {self.checkpoints} to train this run again from step 0, "
                "or finish it with the settings that started it"
            )
        ckpt.load_module(path, "model", self.objective)
        self.optimizer.load_state_dict(ckpt.load_torch_state(path, "optimizer", self.device))
        if self.ema is not None:
            self.ema.load(ckpt.load_tensors(path, "ema"))
        data_state = state["data"]
        if isinstance(data_state, list):  # one cursor per rank (see `_save`)
            data_state = data_state[dist.rank()]
        try:
            self.data.load_state_dict(data_state)
        except ValueError as exc:
            # A source's "data changed since the checkpoint ...; cannot resume exactly" (BatchStream and the
            # others say it this way) ended the stage in a bare traceback that named neither the checkpoint
            # nor a way on; as docs/recipes.md says, the way on is to start the training over.
            raise ckpt.CheckpointError(
                f"{path}: its data cursor does not fit this run's training data ({exc}): delete {self.checkpoints} "
                "to train this run again from step 0, or finish it with the xfer and data that started it"
            ) from None
        self.step = state["step"]
        self._last_good_step = self.step
        best = state.get("best_metric")
        best = None if best is None or math.isnan(best) else best  # NaN: written before NaN was refused
        self.best_metric = self._reconcile_best(path, state, best)
        self.last_eval = state.get("last_eval") or {}
        self._seconds_before = float(state.get("seconds", 0.0))  # 0 from checkpoints older than the field
        tensors = ckpt.load_tensors(path, "rng")
        prefix = f"rank{dist.rank()}."
        rng.restore(
            state["rng"][dist.rank()], {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        )
        if "metric_steps" in state:  # not in checkpoints older than the field: the first log then averages less
            sums = ckpt.load_tensors(path, "metric_sums")
            # float32 (an older xfer stored a float64 metric's sum as float64, which MPS cannot hold)
            self._sums = {
                k[len(prefix) :]: (v.float() if v.dtype == torch.float64 else v).to(self.device)
                for k, v in sums.items()
                if k.startswith(prefix)
            }
            self._sum_steps = int(state["metric_steps"])
            # Plain sums (every sum of a checkpoint written before weighted metrics): a metric the objective
            # now gives with a weight (an upgraded objective resumed mid-window) restarts its sum there.
            self._unweighted_resumed = {
                name
                for name in self._sums
                if not name.endswith(WEIGHT_SUFFIX) and name + WEIGHT_SUFFIX not in self._sums
            }
        if self.events is not None:
            self.events.resumed(self.step)
        return True

    def _best_name(self) -> str | None:
        pointed = ckpt.read_pointer(self.checkpoints / "best")
        return pointed.name if pointed is not None else None

    def _reconcile_best(self, path: Path, state: dict[str, Any], best: float | None) -> float | None:
        """The best metric to go on from, with the `best` pointer made to name the checkpoint that holds it.

        Why: `save_checkpoint` moves `latest` before `best`, so a kill between the two left `best` on an
        older checkpoint while the one resumed from recorded the newer, higher score as the best: no later
        evaluation beat it, and `select: best` exported the older weights with the newer score. The
        checkpoint resumed from names its best one (`best_checkpoint`); when that one is gone (moved
        aside as damaged), no checkpoint holds the score any more, and the search starts over."""
        if "best_checkpoint" not in state:  # written before the field existed: nothing to check against
            return best
        if dist.is_main():
            name = state["best_checkpoint"]
            pointer = self.checkpoints / "best"
            known = isinstance(name, str) and re.fullmatch(r"step-\d+", name) is not None
            if name is not None and not (known and (self.checkpoints / name / "state.json").exists()):
                # "chosen again from here on" was wrong for a finished training: no evaluation is left
                then = (
                    "the best checkpoint is chosen again among the evaluations from here on"
                    if state.get("step", 0) < self.total_steps
                    else "training is complete, so no evaluation is left to choose another: a best checkpoint "
                    "asked for is the last one"
                )
                print(
                    f"warning: {path}: its best checkpoint {name} (score {best}) is gone; {then}",
                    file=sys.stderr,
                    flush=True,
                )
                self._best_lost = name
                name, best = None, None
            if name is None:  # no checkpoint holds a best score: neither may the pointer nor the metric
                pointer.unlink(missing_ok=True)
                best = None
            elif self._best_name() != name:
                ckpt.write_pointer(pointer, name)
        return dist.broadcast_object(best)

    def _progress_bar(self, start: int) -> Any:
        if not self.progress or not dist.is_main():
            return None
        from tqdm.auto import tqdm

        return tqdm(total=self.total_steps, initial=start, desc=self.description, dynamic_ncols=True)


def _same_results(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two ranks' dev results agree: the same names, numbers equal up to float rounding
    (ranks that each score the whole dev set may sum in another order on a GPU), NaN with NaN."""
    if set(a) != set(b):
        return False
    for name, x in a.items():
        y = b[name]
        if isinstance(x, numbers.Real) and isinstance(y, numbers.Real):
            if not (math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-12) or (math.isnan(x) and math.isnan(y))):
                return False
        elif x != y:
            return False
    return True


def _output_problem(out: Any) -> str | None:
    """What is wrong with an objective's `forward(batch)` result, or None when nothing is."""
    if not isinstance(out, StepOutput):
        hint = (
            "; wrap them: `return StepOutput(loss, metrics)` (from xfer.core.trainer)"
            if isinstance(out, tuple) and len(out) == 2
            else ""
        )
        return f"returned {type(out).__name__}, expected xfer.core.trainer.StepOutput(loss, metrics){hint}"
    loss, metrics = out
    expected = "expected a floating-point tensor of one number (0-dim or shape (1,)) that requires grad"
    if not isinstance(loss, torch.Tensor):
        return f"returned a loss of type {type(loss).__name__}, {expected}"
    if loss.numel() != 1:  # shape (1,) is one number: backward() accepts it, and so does the trainer
        return (
            f"returned a loss of shape {tuple(loss.shape)}, {expected}: reduce it to one number "
            "(e.g. `.mean()`; a per-example loss such as reduction='none' is not a loss to minimise)"
        )
    if not loss.is_floating_point():
        return f"returned a loss of dtype {loss.dtype}, {expected}"
    if not loss.requires_grad:
        return (
            f"returned a loss that does not require grad, {expected}: it was detached (`.detach()`, "
            "`.item()`, `torch.no_grad()`, a new tensor) or computed from no trainable parameter"
        )
    if not isinstance(metrics, Mapping):
        return f"returned metrics of type {type(metrics).__name__}, expected a dict of scalar tensors or numbers"
    for name, value in metrics.items():
        if name in TRAINER_METRICS:
            return (
                f"returned metric {name!r}, a name the trainer logs itself ({', '.join(sorted(TRAINER_METRICS))}): "
                "give it another name (the loss it returns is logged as 'loss' already)"
            )
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                return f"returned metric {name!r} of shape {tuple(value.shape)}, expected a scalar"
        elif not isinstance(plain_number(value), numbers.Real):  # numpy scalars and one-number arrays too
            kind = type(value)  # qualified: numpy 2's bool is called `bool` too, and Python's bool is a number
            called = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
            return f"returned metric {name!r} of type {called}, expected a scalar tensor or number"
    return None

"""The hooks a plugin can implement. Few and stable; each says when it is called and what it returns.

A plugin is a module listed under the `xfer` entry-point group of its distribution, e.g.

    [project.entry-points.xfer]
    glue = "xfer.tasks.glue.plugin"

The entry-point name is the plugin's namespace: every component it registers is named
`<namespace>.<name>` or `<namespace>/<name>`. Registration hooks return lists of
`ComponentSpec` (cheap: heavy modules are imported only when a recipe uses them).
Lifecycle hooks observe runs; none of them is called inside the per-step training loop except
`xfer_metrics_logged`, which fires once per logging interval.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pluggy

from xfer.core.specs import CommandSpec, ComponentSpec

hookspec = pluggy.HookspecMarker("xfer")
hookimpl = pluggy.HookimplMarker("xfer")


# --- registration -----------------------------------------------------------------------------


@hookspec
def xfer_tasks() -> list[ComponentSpec]:
    """Called once when the host loads plugins. Return the task specs (kind "task") this plugin
    provides; each target is a `xfer.core.tasks.Task` subclass."""


@hookspec
def xfer_models() -> list[ComponentSpec]:
    """Called once when the host loads plugins. Return model specs (kind "model"): encoder
    architectures or presets that stages can instantiate by name."""


@hookspec
def xfer_objectives() -> list[ComponentSpec]:
    """Called once when the host loads plugins. Return objective specs (kind "objective"):
    `torch.nn.Module`s whose `forward(batch)` returns `xfer.core.trainer.StepOutput`."""


@hookspec
def xfer_stages() -> list[ComponentSpec]:
    """Called once when the host loads plugins. Return stage specs (kind "stage"); each target
    is a function `run(ctx: xfer.core.stage.StageContext) -> None` (its return value is ignored)
    and its name is the recipe's `kind:` value. The spec's `config` class is what the recipe's
    keys fill in (`ctx.config`); `run` must write every output the spec declares in `outputs` into
    `ctx.output_dir(name)`, or the stage fails as a plugin bug. Every rank calls `run`; only rank 0
    writes files (`ctx.is_main`)."""


@hookspec
def xfer_metrics() -> list[ComponentSpec]:
    """Called once when the host loads plugins. Return metric specs (kind "metric"): functions
    `(golds, predictions) -> float | dataclass` computed on gathered predictions."""


@hookspec
def xfer_commands() -> list[CommandSpec]:
    """Called when the CLI builds its parser. Return extra `xfer` sub-commands."""


# --- lifecycle --------------------------------------------------------------------------------


@hookspec
def xfer_stage_start(run_dir: Path, stage: str, kind: str, config: Any, resumed: bool) -> None:
    """Called on rank 0 before a stage runs (not when it is skipped as already complete).
    `resumed` is true when it continues from a checkpoint."""


@hookspec
def xfer_stage_finish(run_dir: Path, stage: str, kind: str, status: str, outputs: dict[str, Path]) -> None:
    """Called on rank 0 after a stage ends; `status` is "completed", "failed" or "interrupted"
    (Ctrl-C / SIGTERM); `outputs` maps declared output names to directories (empty unless completed)."""


@hookspec
def xfer_metrics_logged(
    run_dir: Path, stage: str, step: int, split: str, metrics: dict[str, float], tags: dict[str, Any]
) -> None:
    """Called on rank 0 each time the trainer logs (every `log_every` steps, and after each
    evaluation with split "dev"). Loggers such as TensorBoard implement this.

    `tags` tells apart the training runs of one stage, as the same keys do in its metrics.jsonl
    records: e.g. {"task": "glue/rte", "trial": 1} for a fine-tuning stage that trains each task
    several times; {} for a stage that trains once. A copy: changing it changes nothing. An
    implementation may leave out any argument it does not use (pluggy passes only the ones it
    names), so one written before `tags` existed keeps working; a caller written before it (a
    stage with its own loop calling `host.notify` without `tags`) passes {} (HOOK_ARG_DEFAULTS)."""


@hookspec
def xfer_checkpoint_saved(run_dir: Path, stage: str, step: int, path: Path, tags: dict[str, Any]) -> None:
    """Called on rank 0 after a checkpoint is completely written and the `latest` pointer
    updated; `path` is the checkpoint directory. `tags` are the training run's, as in
    `xfer_metrics_logged` (e.g. {"task": "glue/rte", "trial": 1}, or {}; {} when the caller
    passes none)."""


# Arguments a lifecycle hook gained after it was published, with the value `PluginHost.notify`
# fills in (a fresh one per call) when a caller written against the older signature leaves them
# out: pluggy would otherwise refuse the whole call, and no observer would see it.
HOOK_ARG_DEFAULTS: dict[str, dict[str, Callable[[], Any]]] = {
    "xfer_metrics_logged": {"tags": dict},
    "xfer_checkpoint_saved": {"tags": dict},
}


HOOK_NAMES = tuple(name for name, value in dict(globals()).items() if name.startswith("xfer_") and callable(value))
REGISTRATION_HOOKS = {
    "xfer_tasks": "task",
    "xfer_models": "model",
    "xfer_objectives": "objective",
    "xfer_stages": "stage",
    "xfer_metrics": "metric",
}

"""Pre-flight: read every task's data of every stage before the first stage trains.

Recipe validation checks that data files exist; only reading them finds a malformed line. A run
that fails in its third stage on a bad CoNLL line after two stages trained wastes hours, so
`xfer run` (and `xfer validate --data`) first asks every task to read and parse the splits its
stage will use (`Task.check_data`: raw files only, no tokenizer or model) and reports every
problem of every stage at once, as `file:line: message (stage ..., task ..., split ...)`.

Which splits a stage reads: its config's `data_splits()` if it defines one (a list of
`(TaskRef, splits)`), otherwise every task found in its config with the train and dev splits.
Tasks whose config reads from an earlier stage's output are skipped: that data does not exist
before the run.

A stage config may also define `preflight(self) -> list[UserError]` for checks of its own that
need to read files (a pre-training corpus, a checkpoint's vocabulary against the tokenizer's, a
compute budget against the cost of one step). It must skip what comes from earlier stages. One that
takes a `stage_dir` keyword gets the stage's folder in the run directory (None when not known, as for
`xfer validate --data`; it may not exist yet), where it may find what the stage recorded, such as the
data files it already parsed: a multi-GB corpus was parsed whole at every `xfer run`, even of a
completed stage. It must not create that folder (a run directory is checked before it is made).
And it may define `check_task_infos(self, infos: dict[str, TaskInfo]) -> list[UserError]` for
checks that need to know what its tasks are (a stage that trains tagging tasks only, or needs
settings for each task type it gets): `infos` holds the `Task.info()` of every task checked here.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from xfer.core.config import Files, Input, TaskRef
from xfer.core.errors import DataError, Diagnostic, Location, RecipeError, UserError
from xfer.core.plugins import PluginHost, default_host
from xfer.core.recipes.recipe import Recipe
from xfer.core.tasks import TaskContractError, describe_failure

DEFAULT_SPLITS = ("train", "dev")


class PreflightError(RecipeError):
    """Every data problem of every stage, found before anything trained (exit code 2)."""


def preflight(recipe: Recipe, host: PluginHost | None = None) -> list[str]:
    """Every data problem of the recipe's tasks, one line each (empty when all data reads)."""
    return [str(d) for d in preflight_diagnostics(recipe, host)]


def check_data(
    recipe: Recipe, host: PluginHost | None = None, only: set[str] | None = None, run_dir: Path | None = None
) -> None:
    """Raise `PreflightError` listing every data problem (of the `only` stages when given). `run_dir`:
    the run directory the recipe will run in, whose stage folders a stage's own check may read."""
    diagnostics = preflight_diagnostics(recipe, host, only, run_dir)
    if diagnostics:
        raise PreflightError(diagnostics)


def preflight_diagnostics(
    recipe: Recipe, host: PluginHost | None = None, only: set[str] | None = None, run_dir: Path | None = None
) -> list[Diagnostic]:
    from xfer.core.plugins import recipe_host

    with recipe_host(host or default_host()) as scoped:
        return _preflight_diagnostics(recipe, scoped, only, run_dir)


def _preflight_diagnostics(
    recipe: Recipe, host: PluginHost, only: set[str] | None, run_dir: Path | None
) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for stage, plan in recipe.stages.items():
        if only is not None and stage not in only:
            continue
        own_checks = getattr(plan.config, "preflight", None)
        if callable(own_checks):
            where = (
                {"stage_dir": run_dir / stage if run_dir is not None else None} if _takes_stage_dir(own_checks) else {}
            )
            for problem in _problems_of(own_checks, "its pre-flight check", **where):
                found.append(_diagnostic(problem, f"stage {stage!r}", recipe, stage, ""))
        try:
            pairs = stage_tasks(plan.config)
        except Exception as exc:  # the config's own data_splits()
            pairs = []
            found.append(_diagnostic(_plugin_bug("its data_splits()", exc), f"stage {stage!r}", recipe, stage, ""))
        infos: dict[str, Any] = {}
        for ref, splits in pairs:
            if _reads_stage_outputs(ref.config):
                continue
            context = f"stage {stage!r}, task {ref.key!r}"
            try:
                task = host.load("task", ref.name)(ref.key, ref.config)
                infos[ref.key] = task.info()  # a missing or unknown `type` is a TaskContractError
                problems = task.check_data(tuple(splits))
            except UserError as exc:  # the task cannot even be built from its config
                problems = [exc]
            except Exception as exc:  # a plugin bug: report it with the others instead of crashing
                problems = [UserError(f"the task failed ({describe_failure(exc)}); plugin bug")]
            for problem in problems:
                found.append(_diagnostic(problem, context, recipe, stage, ref.key))
        check_infos = getattr(plan.config, "check_task_infos", None)
        if callable(check_infos) and infos:
            for problem in _problems_of(check_infos, "its check_task_infos()", infos):
                found.append(_diagnostic(problem, f"stage {stage!r}", recipe, stage, ""))
    return found


def _takes_stage_dir(check: Callable[..., Any]) -> bool:
    """Whether a stage config's `preflight` takes the `stage_dir` keyword (older ones take nothing)."""
    try:
        return "stage_dir" in inspect.signature(check).parameters
    except (TypeError, ValueError):
        return False


def _problems_of(check: Callable[..., Iterable[UserError]], what: str, *args: Any, **kwargs: Any) -> list[UserError]:
    """The problems a stage config's own check returns or raises. Any other exception is a plugin bug:
    reported with the others, not as the user's data problem, and not as a traceback that hides them."""
    try:
        return list(check(*args, **kwargs))
    except Exception as exc:
        return [_plugin_bug(what, exc)]


def _plugin_bug(what: str, exc: Exception) -> UserError:
    """`exc` itself when it is a UserError (a check may raise its one problem), else a plugin-bug error."""
    return exc if isinstance(exc, UserError) else UserError(f"{what} failed ({type(exc).__name__}: {exc}); plugin bug")


def stage_tasks(config: Any) -> list[tuple[TaskRef, Sequence[str]]]:
    """(task, splits) pairs a stage reads: `config.data_splits()` or every TaskRef in the config."""
    if config is None:
        return []
    declared = getattr(config, "data_splits", None)
    if callable(declared):
        return list(declared())
    return [(ref, DEFAULT_SPLITS) for ref in _task_refs(config)]


def _task_refs(value: Any) -> Iterator[TaskRef]:
    if isinstance(value, TaskRef):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _task_refs(getattr(value, f.name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _task_refs(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _task_refs(item)


def _reads_stage_outputs(value: Any) -> bool:
    """Whether a config refers to an earlier stage's output (not there before the run)."""
    if isinstance(value, Input):
        return value.is_reference
    if isinstance(value, Files):
        return bool(value.inputs)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(_reads_stage_outputs(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, (list, tuple)):
        return any(_reads_stage_outputs(v) for v in value)
    if isinstance(value, dict):
        return any(_reads_stage_outputs(v) for v in value.values())
    return False


def _diagnostic(problem: UserError, context: str, recipe: Recipe, stage: str, task: str) -> Diagnostic:
    """A DataError about a file points into that file; anything else at the stage in the recipe."""
    # A DataError whose "path" is the task's own name (`DataError(self.name, 0, ...)`, the Task
    # contract's way to blame a missing split) is no file, even when a folder of that name exists:
    # an alias `reviews` beside the folder `reviews/` of its data lost the recipe's file:line.
    if isinstance(problem, DataError) and problem.path != task and (problem.line or Path(problem.path).exists()):
        return Diagnostic(Location(problem.path, problem.line), f"{_message(problem)} ({context})")
    if isinstance(problem, TaskContractError) and problem.task == task:
        split = f" ({problem.split})" if problem.split else ""
        return Diagnostic(_stage_location(recipe, stage), f"{context}{split}: {problem.detail}")
    # A DataError about a file that does not exist keeps its path (which file is missing is the
    # whole message); one whose "path" is the task's own name drops it (the context names the task).
    text = str(problem)
    return Diagnostic(_stage_location(recipe, stage), f"{context}: {text.removeprefix(task + ': ') if task else text}")


def _stage_location(recipe: Recipe, stage: str) -> Location:
    origin = recipe.provenance.get(f"stages.{stage}.kind", "")
    file, _, rest = origin.rpartition(":")
    file, _, line = file.rpartition(":")
    if file and line.isdigit() and rest.isdigit():
        return Location(file, int(line), int(rest))
    plan = recipe.stages.get(stage)  # a stage set by a command-line override: point at the override
    return plan.loc if plan is not None and plan.loc.line else Location(str(recipe.path))


def _message(problem: DataError) -> str:
    """The DataError's text without its leading `file:line: `."""
    prefix = f"{problem.path}:{problem.line}: " if problem.line else f"{problem.path}: "
    return str(problem).removeprefix(prefix)

"""Runs a validated recipe in a run directory: skip what is done, resume what was cut, redo what changed.

    runs/<recipe name>/
      recipe.resolved.yaml  the resolved recipe (defaults filled in, paths absolute)
      environment.json   Python, torch, package versions, host, device
      .lock              flock-ed by the `xfer run` using the directory (see xfer.core.runs.runlock)
      <stage>/
        stage.json       status (running | completed | failed | interrupted | invalidated), fingerprint, times, outputs, error
        rank<N>.error.json  under torchrun: why rank N stopped in the stage (see RANK_ERROR)
        metrics.jsonl    one JSON object per log line
        checkpoints/     see xfer.core.checkpoint
        outputs/<name>/  the stage's declared outputs
        report.md        summary and plots

A stage's fingerprint (xfer.core.runs.fingerprint) signs its resolved config and seed, the versions
of every component it uses and of their distributions, the contents of every file it reads
from outside the run, and the fingerprints of the stages it reads from. On a re-run: a completed
stage with the same fingerprint is skipped; a running or failed one with the same fingerprint
resumes from its last checkpoint (unless its input files differed from what it signed when it
stopped: then it starts afresh); a different fingerprint (or an unreadable or malformed
stage.json) starts the stage afresh — the runner says why ("input stages.vocab.files: a.txt
changed") — and the change propagates to every stage downstream, except that a stage whose
only change is a larger value of a key its spec declares `growable` (`trials`) resumes in
place, its finished trials kept (unless outputs of theirs were modified since). A completed stage whose output files were modified since it completed (stage.json
records their sha256) runs again too (deleted ones are taken as pruned on purpose), and every
stage that read them is marked `invalidated` first, so they run afresh after it, even if the
run is killed in between; so are the readers of a stage whose folder or stage.json was deleted.
Rank 0 alone reads and decides; the other ranks receive its decision.
A run directory made by a different recipe is refused with a key-level diff unless `force`
(reuse it, redoing what changed) or `fork` (copy it to a new directory first).
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import platform
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from xfer.core import distributed as dist
from xfer.core.atomic import atomic_write_text, fsync_dir, read_json, write_json
from xfer.core.checkpoint import latest_checkpoint
from xfer.core.config import SIGNED_AS, ComponentRef
from xfer.core.errors import PluginError, RecipeError, RunDirError, StoppedOnEveryRank, UserError
from xfer.core.plugins import PluginHost, default_host
from xfer.core.recipes.recipe import Recipe, StagePlan
from xfer.core.runs import runlock
from xfer.core.runs.fingerprint import (
    FileHasher,
    Signature,
    changed_outputs,
    explain_change,
    file_lists,
    grown_keys,
    hash_cache_path,
    is_partial_write,
    output_digests,
    signed_inputs,
    stage_signature,
)
from xfer.core.runs.report import write_report
from xfer.core.runs.stage_record import state_problem
from xfer.core.stage import StageContext


@dataclass
class StageResult:
    name: str
    action: str  # skipped | ran | resumed
    status: str
    report: Path | None


@dataclass
class RunResult:
    run_dir: Path
    stages: list[StageResult] = field(default_factory=list)


def default_run_dir(recipe: Recipe) -> Path:
    return Path("runs") / recipe.name


def diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Key-level differences between two resolved recipes, one line per changed key."""
    if isinstance(old, dict) and isinstance(new, dict):
        lines: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                lines.append(f"+ {path}: {json.dumps(new[key])}")
            elif key not in new:
                lines.append(f"- {path}: {json.dumps(old[key])}")
            else:
                lines += diff(old[key], new[key], path)
        return lines
    return [] if old == new else [f"~ {prefix}: {json.dumps(old)} -> {json.dumps(new)}"]


def _flat(value: Any, prefix: str = "") -> dict[str, str]:
    """A resolved recipe as {"stages.fit.dropout": "0.1", ...} (JSON values), to name what differs."""
    if isinstance(value, dict) and value:
        return {
            k: v
            for key, item in value.items()
            for k, v in _flat(item, f"{prefix}.{key}" if prefix else str(key)).items()
        }
    return {prefix: json.dumps(value, sort_keys=True, default=str)}


def speed_only_paths(recipe: Recipe) -> set[str]:
    """Paths in the resolved recipe (`stages.pre.corpus.num_proc`) of knobs that set how fast a stage
    computes, never what (`knob(signed_as=...)`): changing one on an existing run directory is no
    recipe change (its fingerprints sign one value), so it needs neither --force nor --fork."""
    paths: set[str] = set()

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, ComponentRef):  # resolved as {name, **config}
            walk(value.config, prefix)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                path = f"{prefix}.{f.name}"
                if SIGNED_AS in f.metadata:
                    paths.add(path)
                walk(getattr(value, f.name), path)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                walk(item, f"{prefix}.{index}")

    for name, plan in recipe.stages.items():
        walk(plan.config, f"stages.{name}")
    return paths


def without_new_unsigned(full: Any, signed: Any, old: Any) -> Any:
    """The `full` resolved recipe without the keys that its `signed` form leaves out (knobs at
    their `unsigned_at` value) and the `old` one lacks: knobs added to a component since `old` was
    written, at the value that changes nothing. Walks mappings and equal-length lists alike (task
    configs sit in lists)."""
    if isinstance(full, dict) and isinstance(signed, dict) and isinstance(old, dict):
        return {
            key: without_new_unsigned(value, signed.get(key), old.get(key))
            for key, value in full.items()
            if key in signed or key in old
        }
    lists = isinstance(full, list) and isinstance(signed, list) and isinstance(old, list)
    if lists and len(full) == len(signed) == len(old):
        return [without_new_unsigned(f, s, o) for f, s, o in zip(full, signed, old, strict=True)]
    return full


def _environment(device: str) -> dict[str, Any]:
    import importlib.metadata

    import torch

    versions = {}
    for dist_ in importlib.metadata.distributions():
        name = dist_.metadata["Name"] or ""
        if name.startswith("xfer") or name in (
            "torch",
            "tokenizers",
            "datasets",
            "transformers",
            "safetensors",
            "pluggy",
        ):
            versions[name] = dist_.version
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "cuda": torch.version.cuda if torch.cuda.is_available() else None,
        "world_size": dist.world_size(),
        "packages": dict(sorted(versions.items())),
        "argv": sys.argv,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


_write_json = write_json  # durable and atomic: see xfer.core.atomic

MALFORMED = "malformed"
"""Key of the state `read_state` returns for a stage.json with a field of the wrong type: the
only key, holding what is wrong, so that the stage counts as having no record of what ran."""


def read_state(stage_json: Path) -> dict[str, Any]:
    """A stage's record as the runner and `xfer status` use it: {} when stage.json is missing or
    not a JSON object, `{MALFORMED: why}` when a field they compute with has the wrong type (a
    hand edit, another tool). Either way the stage has no trustworthy record: it runs afresh and
    its readers with it, instead of the run stopping on a traceback at every re-run."""
    state = read_json(stage_json)
    if state is None:
        return (
            {MALFORMED: "its stage.json is unreadable (truncated or not a JSON object)"} if stage_json.exists() else {}
        )
    problem = state_problem(state)
    return state if problem is None else {MALFORMED: f"its stage.json is malformed ({problem})"}


def prepare_run_dir(recipe: Recipe, run_dir: Path, force: bool, fork: Path | None) -> Path:
    """Check the run dir belongs to this recipe (or fork/force), then write the resolved recipe.

    Rank 0 alone checks and writes; the other ranks get its verdict, so none of them reads a
    directory that rank 0 is still preparing.
    """
    _on_main_refusing_alike(lambda: _prepare_on_main(recipe, run_dir, force, fork))
    dist.barrier()
    return fork if fork is not None else run_dir


def _on_main_refusing_alike(action: Any) -> Any:
    """`action()` on rank 0 (its result there, None elsewhere); a RunDirError is raised on every rank.

    Any other error of rank 0's (an OSError, another UserError, a bug) is raised there as it is, and
    as `distributed.RankFailed` naming it on the other ranks: only RunDirError was shared, so rank 0
    exited with a clear message while the others, waiting for its verdict, died in gloo's "Connection
    closed by peer" traceback."""
    result, error, failure = None, None, None
    if dist.is_main():
        try:
            result = action()
        except RunDirError as exc:
            error = ("refused", str(exc), exc.exit_code)
        except Exception as exc:  # raised below, after the other ranks have heard of it
            failure = exc
            error = ("failed", _error_message(exc), getattr(exc, "exit_code", 1))
    error = dist.broadcast_object(error)
    if failure is not None:
        raise failure
    if error is not None:
        kind, message, exit_code = error
        if kind == "refused":
            raise RunDirError(message)
        raise dist.RankFailed(0, message, exit_code)
    return result


def read_resolved_recipe(path: Path, error: type[Exception], remedy: str) -> dict[str, Any]:
    """A run's recipe.resolved.yaml, or `error` saying it is damaged (unreadable, truncated, edited
    into another shape): a damaged one read as-is showed an empty status table, or a "different
    recipe" diff of the whole file."""
    try:
        resolved = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        problem = " ".join(str(exc).split())  # one line: a YAML error spans several, with a caret
        raise error(f"{path} is unreadable ({problem}); {remedy}") from None
    stages = resolved.get("stages") if isinstance(resolved, dict) else None
    if not isinstance(stages, dict) or not all(isinstance(c, dict) and "kind" in c for c in stages.values()):
        raise error(f"{path} is damaged (not a resolved recipe: no mapping of stages with a kind); {remedy}")
    return resolved


def _prepare_on_main(recipe: Recipe, run_dir: Path, force: bool, fork: Path | None) -> None:
    resolved = recipe.resolved()
    recipe_file = run_dir / "recipe.resolved.yaml"
    if recipe_file.exists():
        try:
            previous = read_resolved_recipe(recipe_file, RunDirError, "use --force to rewrite it (or --fork NEW_DIR)")
        except RunDirError:
            if not (force or fork is not None):
                raise
            previous = {}  # rewritten below; each stage is still judged by its own stage.json
        changes = _recipe_changes(recipe, previous)
        if changes and fork is None and not force:
            raise RunDirError(_different_recipe(run_dir, changes))
    if fork is not None:
        # the fork target may already hold our lock file (taken before preparing), nothing else
        if _holds_more_than_a_lock(fork):
            raise RunDirError(_fork_target_taken(recipe, fork))
        if run_dir.exists():
            with runlock.no_writer(run_dir, f"fork it to {fork}"):
                # recipe.resolved.yaml is left out and written below, last: a copy cut short (Ctrl-C, a
                # kill, a full disk) is then no run directory, refused as such, instead of one whose
                # completed stages lack the output files not copied yet (read as pruned on purpose)
                source = str(run_dir)
                shutil.copytree(
                    run_dir, fork, symlinks=True, dirs_exist_ok=True, ignore=lambda d, n: _not_copied(source, d, n)
                )
                _own_stage_folders(fork)
        run_dir = fork
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "recipe.resolved.yaml", yaml.safe_dump(resolved, sort_keys=False))


def _different_recipe(run_dir: Path, changes: list[str]) -> str:
    listing = "\n".join(f"  {c}" for c in changes)
    return (
        f"{run_dir} was made by a different recipe:\n{listing}\n"
        f"Use --fork NEW_DIR to run the changed recipe in a copy (unchanged stages are reused), "
        f"or --force to re-run the changed stages here (a stage whose trials grew keeps its finished ones)."
    )


def check_run_dir(recipe: Recipe, run_dir: Path | None, *, force: bool = False, fork: Path | None = None) -> None:
    """The refusals of `run_recipe` that need only a look at the run directory, raised before
    `xfer run`'s data check: a run directory in use by another `xfer run`, made by a different recipe,
    a fork target taken, a folder xfer did not make. The data check reads every data file (minutes on
    a large data set), and only then did `run_recipe` refuse for one of these. Read-only, so every rank
    may call it before the processes meet; `run_recipe` checks again, under the lock."""
    source = run_dir or default_run_dir(recipe)
    if source.exists() and not source.is_dir():  # as `runlock.RunLock.acquire` refuses it
        raise RunDirError(f"run directory {source} is a file; pass a directory (--run-dir)")
    if fork is not None:
        _check_fork_target(source, fork)
        if _holds_more_than_a_lock(fork):
            raise RunDirError(_fork_target_taken(recipe, fork))
        # the copy is refused while a run writes the source (`runlock.no_writer`)
        runlock.check_free(source, f"fork it to {fork} once that run has finished or been stopped")
    _check_not_foreign(source)
    runlock.check_free(fork if fork is not None else source)
    recipe_file = source / "recipe.resolved.yaml"
    if fork is None and not force and recipe_file.is_file():
        previous = read_resolved_recipe(recipe_file, RunDirError, "use --force to rewrite it (or --fork NEW_DIR)")
        changes = _recipe_changes(recipe, previous)
        if changes:
            raise RunDirError(_different_recipe(source, changes))


def _recipe_changes(recipe: Recipe, previous: dict[str, Any]) -> list[str]:
    """The key-level diff from a run directory's recipe.resolved.yaml (`previous`) to `recipe`, less
    what only changes speed (`speed_only_paths`): empty when the directory is this recipe's."""
    changes = diff(previous, without_new_unsigned(recipe.resolved(), recipe.resolved(signing=True), previous))
    speed_only = speed_only_paths(recipe)
    return [c for c in changes if c[2:].partition(": ")[0] not in speed_only]


def _fork_target_taken(recipe: Recipe, fork: Path) -> str:
    """Why an existing `--fork` target is refused, and what to do instead. The same `--fork B` command
    run again, after a kill, a reboot or its own completion, said only "already exists": B is then
    this recipe's run directory, which runs (resumes, or skips what is done) as `--run-dir B`."""
    taken = f"--fork target {fork} already exists"
    recipe_file = fork / "recipe.resolved.yaml"
    if not recipe_file.is_file():
        return (
            f"{taken} and is not an xfer run directory (no recipe.resolved.yaml: a folder of yours, or a "
            "--fork copy cut short, which can be deleted); give a new directory"
        )
    try:
        previous = read_resolved_recipe(recipe_file, RunDirError, "")
    except RunDirError:
        return f"{taken} and its {recipe_file.name} is damaged; give a new directory"
    if not _recipe_changes(recipe, previous):
        return (
            f"{taken} as a run directory of this recipe (a fork made before, finished or interrupted): "
            f"to resume it or see it is done, run with --run-dir {fork} in place of --fork {fork}"
        )
    return f"{taken} as the run directory of a different recipe; give a new directory to fork to"


def _check_not_foreign(run_dir: Path) -> None:
    """Refuse a folder xfer did not make (files in it, no recipe.resolved.yaml): a stage that runs
    afresh replaces the sub-folder of its name, which there would be the user's. Checked before the
    lock file is created, so nothing is written into such a folder. A folder whose lock is held is
    another `xfer run` starting in it (before it wrote its recipe): the lock then refuses this run
    with the owner's pid, which is the true reason."""
    if (
        not (run_dir / "recipe.resolved.yaml").exists()
        and _holds_more_than_a_lock(run_dir)
        and runlock.holder(run_dir) is None
    ):
        raise RunDirError(
            f"{run_dir} is not empty and is not an xfer run directory (no recipe.resolved.yaml; or a --fork "
            "copy cut short); give a new or empty folder as the run directory"
        )


def _check_globs_stay_out(recipe: Recipe, run_dir: Path) -> None:
    """Refuse a `files:` glob that reaches into the run directory (`**/*.txt` next to `runs/`):
    the stage would read what the run wrote — a vocabulary trained on the last run's vocab.txt —
    and, its inputs changing with every run, never be up to date. Checked before anything is
    written: a `**` pattern whose fixed folder holds the run directory is refused on the first
    run too, not only once the outputs it would match exist."""
    inside = run_dir.resolve()
    prefixes = tuple({str(inside) + os.sep, str(run_dir.absolute()) + os.sep})  # no realpath per match
    resolved: dict[str, str] = {}

    def real_folder(folder: str) -> str:
        """`folder` with its symbolic links resolved, ending in a separator (a prefix of its files)."""
        if folder not in resolved:
            resolved[folder] = os.path.join(os.path.realpath(folder or "."), "")
        return resolved[folder]

    for name, plan in recipe.stages.items():
        for label, files in file_lists(plan.config, f"stages.{name}"):
            for pattern in files.patterns:
                root = _fixed_folder(pattern)
                reaches = "**" in pattern and (root == inside or root in inside.parents)
                # A match through a symlinked folder is compared as resolved, like the stage's
                # own `resolve_files` does; the cheap prefix test first, then its folder resolved
                # (once per folder: a corpus glob matches many files in few folders).
                matched = [
                    m
                    for m in glob.glob(pattern, recursive=True)
                    if m.startswith(prefixes) or real_folder(os.path.dirname(m)).startswith(prefixes)
                ]
                if reaches or matched:
                    example = f" (e.g. {matched[0]})" if matched else ""
                    raise RunDirError(
                        f"{label}: {pattern!r} reaches into the run directory {run_dir}{example}: the stage "
                        "would read files the run writes and never be up to date; narrow the pattern, or "
                        "give a --run-dir outside the folders it searches"
                    )


def _fixed_folder(pattern: str) -> Path:
    """The folder a glob searches under: its components before the first one with a wildcard."""
    parts = Path(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if any(c in part for c in "*?[")), len(parts))
    return Path(*parts[:fixed]).resolve()


def _holds_more_than_a_lock(folder: Path) -> bool:
    """True for an existing folder with anything in it besides our lock file."""
    return folder.is_dir() and any(p.name != runlock.LOCK_FILE for p in folder.iterdir())


def _check_fork_target(run_dir: Path, fork: Path) -> None:
    """Refuse a fork inside the run directory it copies (the copy would copy itself) or around it,
    and onto a file (the lock would then blame `--run-dir`, which the user got right)."""
    if fork.exists() and not fork.is_dir():
        raise RunDirError(f"--fork target {fork} is a file; give a new directory")
    source, target = run_dir.resolve(), fork.resolve()
    if target == source or source in target.parents or target in source.parents:
        raise RunDirError(
            f"--fork target {fork} must be a new directory outside {run_dir} (and not contain it), "
            f"e.g. --fork {run_dir.parent / (run_dir.name + '-fork')}"
        )


def _own_stage_folders(fork: Path) -> None:
    """Replace each top-level link to a folder in a fresh fork by a copy of what it names.

    A stage folder moved to another disk and linked back was copied as the link: a stage that then
    resumed in the fork wrote its checkpoints and outputs into the source run's folder. Links below
    the top level (a data cache a stage links to) stay links, as the stages made them."""
    for entry in sorted(fork.iterdir()):
        if entry.is_symlink() and entry.is_dir():
            target = entry.resolve()
            entry.unlink()
            shutil.copytree(target, entry, symlinks=True, ignore=lambda d, n: [x for x in n if x == runlock.LOCK_FILE])


def _not_copied(source: str, directory: str, names: list[str]) -> list[str]:
    """copytree filter of a fork: the source's lock file belongs to the source, its
    recipe.resolved.yaml is replaced by the fork's own once everything else is copied, and what a
    killed write left (`.model.tmp-*`: up to a whole model) is nobody's file."""
    left_out = {runlock.LOCK_FILE} | ({"recipe.resolved.yaml"} if directory == source else set())
    return [name for name in names if name in left_out or is_partial_write(Path(name))]


def _lock_run_dir(run_dir: Path) -> runlock.RunLock | None:
    """Rank 0 takes the run directory's lock; a refusal is raised on every rank alike."""
    return _on_main_refusing_alike(runlock.RunLock(run_dir).acquire)


def run_recipe(
    recipe: Recipe,
    run_dir: Path | None = None,
    *,
    force: bool = False,
    fork: Path | None = None,
    device: str = "auto",
    host: PluginHost | None = None,
    log: Any = print,
    only: set[str] | None = None,
) -> RunResult:
    """Run every stage of `recipe` in order; see the module docstring for skip/resume rules.

    `only`: run just these stages and what they read from (`Recipe.needed_for`); the others are
    left as they are (a run directory can hold stages of one recipe run at different times).

    The run directory (the fork target with `fork`) is locked for the duration: a second
    `xfer run` on it is refused, and `xfer status` can tell a dead owner from a live one.
    """
    dist.init_from_env(device)  # its backend follows the device: gloo for `--device cpu` on a GPU machine
    dist.select_device(device)  # a bad --device is refused before anything is created
    # each process reads its own recipe (its files, environment, node): rank 0's fingerprints and
    # decisions reach every rank, so ranks whose recipes differ trained apart, silently
    if dist.is_distributed():
        dist.check_same("the recipes of the processes", _flat(recipe.resolved(signing=True)))
    if fork is not None:
        _check_fork_target(run_dir or default_run_dir(recipe), fork)
    _on_main_refusing_alike(lambda: _check_not_foreign(run_dir or default_run_dir(recipe)))
    _on_main_refusing_alike(lambda: _check_globs_stay_out(recipe, fork or run_dir or default_run_dir(recipe)))
    lock = _lock_run_dir(fork if fork is not None else (run_dir or default_run_dir(recipe)))
    try:
        return _run_recipe(recipe, run_dir, force=force, fork=fork, device=device, host=host, log=log, only=only)
    finally:
        if lock is not None:
            lock.release()


def _run_recipe(
    recipe: Recipe,
    run_dir: Path | None,
    *,
    force: bool,
    fork: Path | None,
    device: str,
    host: PluginHost | None,
    log: Any,
    only: set[str] | None = None,
) -> RunResult:
    """The body of `run_recipe`, run while rank 0 holds the run directory's lock."""
    from xfer.core.plugins import recipe_host

    with recipe_host(host or default_host()) as scoped:
        return _run_stages(recipe, run_dir, force=force, fork=fork, device=device, host=scoped, log=log, only=only)


def _run_stages(
    recipe: Recipe,
    run_dir: Path | None,
    *,
    force: bool,
    fork: Path | None,
    device: str,
    host: PluginHost,
    log: Any,
    only: set[str] | None,
) -> RunResult:
    torch_device = dist.select_device(device)
    run_dir = prepare_run_dir(recipe, (run_dir or default_run_dir(recipe)), force, fork)
    _on_main_refusing_alike(lambda: _write_json(run_dir / "environment.json", _environment(str(torch_device))))
    say = log if dist.is_main() else (lambda *a, **k: None)
    stage_dirs = {name: run_dir / name for name in recipe.stages}
    fingerprints: dict[str, str] = {}
    hasher = FileHasher(hash_cache_path(run_dir)) if dist.is_main() else None
    result = RunResult(run_dir)
    selected = recipe.needed_for(only) if only is not None else set(recipe.stages)
    for name, plan in recipe.stages.items():
        if name not in selected:
            say(f"[{name}] not selected (--only), left as it is")
            continue

        def decide(name: str = name, plan: StagePlan = plan) -> tuple[Signature, Verdict]:
            assert hasher is not None  # rank 0's
            signature = stage_signature(plan, recipe.seed, fingerprints, host, hasher)
            verdict = judge(read_state(stage_dirs[name] / "stage.json"), signature, plan, stage_dirs[name], hasher)
            hasher.save()  # the inputs' and outputs' hashes just read, for the next run
            return signature, verdict

        # rank 0 reads the inputs and outputs once; the others get its verdict (or its error: an
        # unreadable input file, say, which left them in a gloo traceback)
        signature, verdict = dist.broadcast_object(_on_main_refusing_alike(decide))
        fingerprints[name] = signature.fingerprint
        stage_dir = stage_dirs[name]
        if verdict.action == SKIP:
            say(f"[{name}] up to date, skipped" + (f"; {_pruned_note(verdict.pruned)}" if verdict.pruned else ""))
            result.stages.append(StageResult(name, "skipped", "completed", stage_dir / "report.md"))
            continue
        resumed = verdict.action in (RESUME, GROW)
        if verdict.invalidates and dist.is_main():
            # before anything is removed, so that a kill in between cannot lose the mark
            _invalidate_dependents(recipe, name, stage_dirs, verdict.invalidates)
        if verdict.action == GROW:
            say(f"[{name}] {verdict.reasons[0]}")
        elif verdict.reasons:
            say(f"[{name}] runs again: {'; '.join(verdict.reasons)}")
        if not resumed:
            # changed config or inputs, or no readable stage.json: start afresh, so the trainer
            # cannot resume from checkpoints the runner did not vouch for
            _on_main_refusing_alike(lambda folder=stage_dir: _clear_stage_dir(folder))
        if dist.is_main():
            stage_dir.mkdir(parents=True, exist_ok=True)
            _clear_rank_errors(stage_dir)  # an earlier attempt's, before any rank of this one can fail
        dist.barrier()
        if resumed and not _left_progress(stage_dir):
            say(f"[{name}] running {plan.kind} again (its last attempt left no checkpoint to resume from)")
        else:
            say(f"[{name}] {'resuming' if resumed else 'running'} {plan.kind}")
        report = _run_stage(
            recipe, plan, run_dir, stage_dir, stage_dirs, signature, resumed, torch_device, host, hasher
        )
        result.stages.append(StageResult(name, "resumed" if resumed else "ran", "completed", report))
        say(f"[{name}] completed; report: {report}")
    return result


def _clear_stage_dir(stage_dir: Path) -> None:
    """Make way for a fresh start of a stage. A stage folder that is a symbolic link (a big stage
    moved to another disk, or a fork's copy of such a link, which still names the source run's
    folder) is unlinked, never emptied through: what it points at may be another run's; the stage
    is then made in a folder of its own (`rmtree` refused the link, ending the run in a traceback).
    A file where the folder should be is refused by name: it may be the user's.

    stage.json goes first, on its own: `rmtree` removes files in directory order, and a kill part-way
    left a "completed" record with the same fingerprint whose outputs were gone, which the next run
    took as pruned on purpose and skipped, the stage it had decided to redo. Without a record the
    stage runs afresh (and its readers with it), wherever the kill falls."""
    if stage_dir.is_symlink():
        print(
            f"warning: {stage_dir} was a symbolic link to {os.readlink(stage_dir)}; the stage runs afresh "
            "in a folder of its own there (nothing the link pointed at is deleted)",
            file=sys.stderr,
        )
        stage_dir.unlink()
    elif stage_dir.is_dir():
        with contextlib.suppress(IsADirectoryError):  # a folder of that name: no record, rmtree takes it
            (stage_dir / "stage.json").unlink(missing_ok=True)
        fsync_dir(stage_dir)
        shutil.rmtree(stage_dir)
    elif stage_dir.exists():
        raise RunDirError(f"{stage_dir} is a file, not the stage's folder; move it away (or delete it) and re-run")


def _run_stage(
    recipe: Recipe,
    plan: StagePlan,
    run_dir: Path,
    stage_dir: Path,
    stage_dirs: dict[str, Path],
    signature: Signature,
    resumed: bool,
    device: Any,
    host: PluginHost,
    hasher: FileHasher | None,
) -> Path:
    """Run one stage and record its status; `hasher` (rank 0's) records the outputs' digests."""
    from xfer.core import rng

    started = time.time()
    status = {
        "status": "running",
        "kind": plan.kind,
        "version": plan.spec.version,
        "fingerprint": signature.fingerprint,
        "signature": signature.parts,
        "started": started,
        "earlier_attempts": _earlier_attempts(stage_dir) if resumed and dist.is_main() else [],
    }
    ctx = StageContext(
        run_dir, plan.name, plan.kind, plan.config, recipe.seed, stage_dir, device, host, stage_dirs, resumed
    )
    if dist.is_main():
        _write_json(stage_dir / "stage.json", status)
        host.notify(
            "xfer_stage_start", run_dir=run_dir, stage=plan.name, kind=plan.kind, config=plan.config, resumed=resumed
        )
    try:
        run = host.load("stage", plan.kind)  # an import failure is this stage's failure, reported as such
        rng.seed_everything(recipe.seed + dist.rank())
        with ctx.warnings_reported():  # on stderr and in report.md
            run(ctx)
        dist.barrier()  # rank 0 writes the outputs; every rank checks them only after it is done
        missing = [o for o in plan.spec.outputs if not (stage_dir / "outputs" / o).is_dir()]
        if missing:
            raise PluginError(
                f"stage {plan.name!r}: stage kind {plan.kind!r} from {plan.spec.provider or 'an unknown plugin'} "
                f"did not write its declared outputs {missing} (plugin bug: its run(ctx) must fill "
                f"ctx.output_dir(name) for every output its spec declares); report it to the plugin's authors"
            )
    except BaseException as exc:
        message = _error_message(exc)
        if not (dist.is_main() or isinstance(exc, (KeyboardInterrupt, StoppedOnEveryRank)) or dist.lost_a_peer(exc)):
            _record_rank_error(stage_dir, exc, message)  # before this rank exits: rank 0 reads it
        if dist.is_main():
            # Ctrl-C (or SIGTERM, which `xfer run` turns into the same exception) stops a healthy stage:
            # "interrupted", as after a kill, not "failed" with a KeyboardInterrupt for its error.
            ended = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            with _sigterm_held() as keep_holding:  # torchrun's SIGTERM, sent once a rank exits, must not cut this short
                peers = _rank_errors(stage_dir) if dist.is_distributed() else {}
                cause = None
                if peers and not isinstance(exc, UserError):
                    # rank 0's own error is then the consequence ("Connection closed by peer", or the
                    # SIGTERM torchrun sends once a rank exits): the stage failed because of another rank
                    first = _first_failure(peers)
                    cause = dist.RankFailed(first, peers[first]["error"], peers[first].get("exit_code", 1))
                elif dist.lost_a_peer(exc):  # a rank killed outright (out of memory): no record, no error
                    cause = dist.PeerLost(message)
                if cause is not None:
                    ended, message = "failed", str(cause)
                    keep_holding()  # this process ends with `cause`, not "terminated; re-run to resume"
                status.update(status=ended, finished=time.time(), error=message)
                changed = _changed_before_stopping(plan, signature, hasher)
                if changed:
                    status[CHANGED_WHILE_RUNNING] = changed
                if peers:
                    status["rank_errors"] = {"0": _error_message(exc), **{str(r): p["error"] for r, p in peers.items()}}
                _write_json(stage_dir / "stage.json", status)
                host.notify(
                    "xfer_stage_finish", run_dir=run_dir, stage=plan.name, kind=plan.kind, status=ended, outputs={}
                )
                _safe_report(plan, stage_dir, status, ctx)
            if cause is not None:
                raise cause from exc
        if isinstance(exc, StoppedOnEveryRank):
            dist.barrier()  # no rank exits (and has torchrun kill the rest) before rank 0 has recorded why
        raise
    outputs = {o: stage_dir / "outputs" / o for o in plan.spec.outputs}
    report = stage_dir / "report.md"
    if dist.is_main():
        status.update(status="completed", finished=time.time(), outputs={k: str(v) for k, v in outputs.items()})
        if hasher is not None:
            status["output_files"] = output_digests(stage_dir / "outputs", hasher)
            changed = _inputs_changed_while_running(plan, signature, hasher)
            if changed:
                status[CHANGED_WHILE_RUNNING] = changed
                print(
                    f"warning: [{plan.name}] its input files changed while it ran ({'; '.join(changed)}): its "
                    "outputs may hold some of each version; it runs again on the next `xfer run`",
                    file=sys.stderr,
                )
            hasher.save()
        report = _safe_report(plan, stage_dir, status, ctx)
        _write_json(stage_dir / "stage.json", status)
        host.notify(
            "xfer_stage_finish", run_dir=run_dir, stage=plan.name, kind=plan.kind, status="completed", outputs=outputs
        )
    dist.barrier()
    return report


CHANGED_WHILE_RUNNING = "inputs_changed_while_running"
"""stage.json key of a stage whose input files differed at its end (completed, failed or stopped) from its start."""


def _inputs_changed_while_running(plan: StagePlan, signature: Signature, hasher: FileHasher) -> list[str]:
    """What changed in the stage's input files between its start (`signature`) and now, read again
    as the fingerprint reads them. A file edited (or replaced) during a stage was recorded with the
    fingerprint of its old version: put back as it was before the next run (an editor's undo, a
    checkout of another branch and back), the outputs built partly from the edit were kept."""
    try:
        after = signed_inputs(plan.config, hasher, f"stages.{plan.name}")
    except (UserError, OSError) as exc:  # a file now unreadable or gone
        return [str(exc)]
    before = signature.parts.get("inputs", {})
    if after == before:
        return []
    return explain_change(signature.parts, {**signature.parts, "inputs": after}, plan.name) or ["input files"]


def _changed_before_stopping(plan: StagePlan, signature: Signature, hasher: FileHasher | None) -> list[str]:
    """`_inputs_changed_while_running` for an attempt that failed or was stopped: its checkpoints may
    hold what it read of an edited input (a stage streaming its data), and a resume from them with the
    file put back had the same fingerprint. Best effort: nothing here may replace the stage's error."""
    if hasher is None:
        return []
    try:
        changed = _inputs_changed_while_running(plan, signature, hasher)
    except Exception:
        return []
    with contextlib.suppress(OSError):  # a full disk, say: the hashes are only a cache
        hasher.save()
    return changed


def _error_message(exc: BaseException) -> str:
    """What a stage's record says of the exception that ended it: a UserError's or an interruption's
    message, else the exception's type and message (a bug keeps its traceback on the console)."""
    message = str(exc) if isinstance(exc, (UserError, KeyboardInterrupt)) else None
    return message or "".join(traceback.format_exception_only(exc)).strip() or type(exc).__name__


RANK_ERROR = "rank{rank}.error.json"
"""In a stage folder under torchrun: why rank N (N > 0) stopped in this stage, written by that rank.

Why: one rank's error (its own data file, a bug on one rank) ended that process alone; rank 0 then
failed in its next collective with gloo's "Connection closed by peer" (or was stopped by torchrun's
SIGTERM) and recorded that, or "interrupted", as the stage's error, and the cause was only in the
other rank's console output. Rank 0 names the first failed rank's error in stage.json and on its
console. A rank whose only error is a lost peer writes none (the peer's is the cause, and a peer
killed outright writes none either: rank 0 then says so, `distributed.PeerLost`). A run directory
that is not shared between nodes keeps each node's file in its own copy."""


def _record_rank_error(stage_dir: Path, exc: BaseException, message: str) -> None:
    """Write this rank's error into its stage folder (atomically, so rank 0 never reads half of it);
    best effort: a rank that cannot write it still stops with its own error."""
    record = {"rank": dist.rank(), "error": message, "exit_code": getattr(exc, "exit_code", 1), "time": time.time()}
    try:
        stage_dir.mkdir(parents=True, exist_ok=True)
        _write_json(stage_dir / RANK_ERROR.format(rank=dist.rank()), record)
    except OSError as problem:
        print(f"warning: rank {dist.rank()} could not record its error in {stage_dir}: {problem}", file=sys.stderr)


def _rank_errors(stage_dir: Path) -> dict[int, dict[str, Any]]:
    """The errors other ranks recorded in this attempt of the stage, by rank."""
    found: dict[int, dict[str, Any]] = {}
    for rank in range(1, dist.world_size()):
        record = read_json(stage_dir / RANK_ERROR.format(rank=rank))
        if record is not None and isinstance(record.get("error"), str):
            found[rank] = record
    return found


def _first_failure(errors: dict[int, dict[str, Any]]) -> int:
    """The rank whose error came first: with three ranks or more, a rank's error may end another's
    collectives in an error that is not a lost peer's (a timeout), recorded after it (ties, and
    records without a time: lowest rank)."""

    def when(rank: int) -> tuple[float, int]:
        moment = errors[rank].get("time")
        return (moment if isinstance(moment, (int, float)) else float("inf"), rank)

    return min(errors, key=when)


def _clear_rank_errors(stage_dir: Path) -> None:
    for path in stage_dir.glob(RANK_ERROR.format(rank="*")):
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def _sigterm_held() -> Iterator[Callable[[], None]]:
    """Ignore SIGTERM (and SIGINT) while rank 0 records how a stage ended (`xfer run` turns it into an exception
    that would stop the recording half-way). Under torchrun a rank that fails exits at once, and
    torchrun then sends SIGTERM to the others within 0.1 s: rank 0 was stopped while it wrote the
    failure down. The run is ending either way; torchrun waits 30 s before it sends SIGKILL.

    Calling the yielded function keeps SIGTERM ignored afterwards, for a process that is ending
    because another rank failed: torchrun's SIGTERM must not replace that error on its way out."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    keep = False

    def keep_holding() -> None:
        nonlocal keep
        keep = True

    # a handler that does nothing, not SIG_IGN: processes started meanwhile (a hook's) would inherit SIG_IGN
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    # Ctrl-C reaches every rank of the process group at once, the one recording too: held alike, so
    # KeyboardInterrupt cannot cut the record short (restored after it, even for a process ending)
    previous_int = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        yield keep_holding
    finally:
        signal.signal(signal.SIGINT, previous_int)
        if not keep:
            signal.signal(signal.SIGTERM, previous)


_PROGRESS = ("**/checkpoints/step-*/state.json", "**/checkpoints/.old-step-*-*/state.json", "**/done.json")
"""What an interrupted attempt leaves to resume from: a complete checkpoint, one that a re-save killed in
the middle left renamed aside (`.old-step-NNNNNNN-<pid>`, put back by the trainer on resume: see
`xfer.core.checkpoint._replace`), or a finished trial's record."""


def _left_progress(stage_dir: Path) -> bool:
    """Whether an interrupted attempt left something to resume from (`_PROGRESS`), of the stage or of
    one of its trials. A checkpoint renamed aside by a killed re-save was not counted: the runner said
    "its last attempt left no checkpoint to resume from", and the trainer then resumed from it."""
    return any(any(True for _ in stage_dir.glob(pattern)) for pattern in _PROGRESS)


def _pruned_note(pruned: list[str]) -> str:
    shown = ", ".join(pruned[:3]) + (f" and {len(pruned) - 3} more" if len(pruned) > 3 else "")
    return (
        f"{len(pruned)} of its output files {'was' if len(pruned) == 1 else 'were'} deleted since it completed "
        f"({shown}): a stage that "
        "reads them will fail; delete the stage's folder to make them again"
    )


INVALIDATED = "invalidated"
"""stage.json status of a stage whose upstream stage runs again from scratch with the same
fingerprint (its outputs were changed behind the run's back, or its stage.json was lost): the
stage read what is being replaced, so it must run afresh too."""


def _invalidate_dependents(recipe: Recipe, stage: str, stage_dirs: dict[str, Path], why: str) -> None:
    """Mark every stage that read `stage`'s outputs (transitively) and has run to run afresh:
    `stage` runs again from scratch with an unchanged fingerprint, so theirs would not change."""
    reason = f"upstream stage {stage!r} ran again from scratch: {why}"
    for name in recipe.dependents(stage):
        if (stage_dirs[name] / "stage.json").exists():
            _write_json(stage_dirs[name] / "stage.json", {"status": INVALIDATED, "reason": reason})


def _earlier_attempts(stage_dir: Path) -> list[dict[str, Any]]:
    """The attempts before this one (a resumed stage), so durations count every attempt.

    A killed attempt never wrote `finished`; its end is estimated as the last write to the
    stage's `metrics.jsonl` (the trainer appends to it every `log_every` steps), else its start.
    """
    previous = read_state(stage_dir / "stage.json")
    if "started" not in previous:
        return []
    attempts = list(previous.get("earlier_attempts", []))
    finished = previous.get("finished")
    if finished is None:
        metrics = stage_dir / "metrics.jsonl"
        finished = max(previous["started"], metrics.stat().st_mtime if metrics.exists() else 0.0)
    status = previous.get("status", "running")
    attempts.append(
        {
            "started": previous["started"],
            "finished": finished,
            "status": "interrupted" if status == "running" else status,
        }
    )
    return attempts


def stage_duration(status: dict[str, Any]) -> tuple[float | None, int]:
    """(seconds over all attempts, number of attempts); seconds is None while the stage runs."""
    attempts = status.get("earlier_attempts", [])
    if "finished" not in status:
        return None, len(attempts) + 1
    total = sum(a["finished"] - a["started"] for a in attempts) + status["finished"] - status["started"]
    return total, len(attempts) + 1


def _describe_duration(status: dict[str, Any]) -> str:
    seconds, attempts = stage_duration({"finished": time.time(), **status})
    text = f"{seconds:.1f} s"
    if attempts > 1:
        earlier = ", ".join(a["status"] for a in status["earlier_attempts"])
        text += f" over {attempts} attempts (earlier: {earlier}); this attempt {status.get('finished', time.time()) - status['started']:.1f} s"
    return text


def _safe_report(plan: StagePlan, stage_dir: Path, status: dict[str, Any], ctx: StageContext) -> Path:
    header = {
        "kind": f"{plan.kind} (version {plan.spec.version}, from {plan.spec.provider})",
        "status": status["status"],
        "fingerprint": status["fingerprint"][:16],
        "duration": _describe_duration(status),
    }
    if status.get("error"):
        header["error"] = status["error"]
    title = f"Stage `{plan.name}`"
    try:
        return write_report(stage_dir, title, header, ctx.report_sections)
    except OSError:
        raise  # a full or read-only disk: the run cannot record anything either, and says so
    except Exception as exc:
        # report.md is a summary of a stage whose outputs are already written: a bug or bad data in
        # drawing it must not leave the stage unfinished (every re-run failing the same way), nor
        # replace the error of a stage that failed. The stage's record says what happened.
        problem = "".join(traceback.format_exception_only(exc)).strip()
        print(f"warning: {stage_dir / 'report.md'}: written without curves ({problem})", file=sys.stderr)
        lines = [f"# {title}", "", *(f"- **{k}**: {v}" for k, v in header.items()), ""]
        lines += [s.rstrip() + "\n" for s in ctx.report_sections]
        lines.append(f"_The report could not be built in full: {problem}_")
        path = stage_dir / "report.md"
        atomic_write_text(path, "\n".join(lines) + "\n")
        return path


SKIP, RESUME, GROW, FRESH = "skip", "resume", "grow", "fresh"


@dataclass(frozen=True)
class Verdict:
    """What `xfer run` does with one stage and why: decided once, by `judge`, for the runner and
    for `xfer status` alike, so the two cannot disagree.

    `action`: SKIP (completed and unchanged), RESUME (interrupted or failed with the same
    fingerprint: from its checkpoints), GROW (completed, then a growable key such as `trials`
    was raised: what it finished is kept) or FRESH (from scratch). `reasons` say why it runs
    (empty for SKIP and a plain RESUME). `redone`: FRESH with its fingerprint unchanged (outputs
    modified, record lost, marked invalidated), so its readers' fingerprints do not change and
    they must be told to run afresh; `invalidates` is then the reason to write into their
    records (None when they were marked already). `pruned`: output files deleted since it
    completed (SKIP only; noted, not remade).
    """

    action: str
    reasons: tuple[str, ...] = ()
    redone: bool = False
    invalidates: str | None = None
    pruned: tuple[str, ...] = ()


def judge(state: dict[str, Any], signature: Signature, plan: StagePlan, stage_dir: Path, hasher: FileHasher) -> Verdict:
    """The verdict for a stage whose stage.json holds `state` ({} when missing or unreadable)."""
    same = state.get("fingerprint") == signature.fingerprint
    if same and state.get(CHANGED_WHILE_RUNNING):  # completed, failed or stopped: its work is not resumed from
        changed = "; ".join(map(str, state[CHANGED_WHILE_RUNNING]))
        reason = f"its input files changed while it ran ({changed})"
        return Verdict(FRESH, (reason,), redone=True, invalidates=reason)
    if same and state.get("status") == "completed":
        modified, deleted = changed_outputs(state.get("output_files"), stage_dir / "outputs", hasher)
        if not modified:
            return Verdict(SKIP, pruned=tuple(deleted))
        reasons = tuple(f"{path} was modified after the stage completed" for path in modified)
        return Verdict(FRESH, reasons, redone=True, invalidates="its outputs were changed after it completed")
    if same:
        return Verdict(RESUME)
    if state.get("status") == INVALIDATED:
        return Verdict(FRESH, (str(state.get("reason", INVALIDATED)),), redone=True)
    if not state.get("fingerprint"):  # never run, or its stage.json was deleted or damaged
        damaged = (state.get(MALFORMED, "its stage.json records no fingerprint"),) if state else ()
        return Verdict(FRESH, damaged, redone=True, invalidates="its stage.json was missing or unreadable")
    grown = grown_keys(state.get("signature"), signature.parts, plan.spec.growable)
    if grown:
        # what it finished is kept as it is now: outputs modified since it completed, or built partly from
        # an input edited while it ran (and put back since), would be kept too and recorded as its own
        if state.get(CHANGED_WHILE_RUNNING):
            changed = "; ".join(map(str, state[CHANGED_WHILE_RUNNING]))
            return Verdict(FRESH, (f"its input files changed while it ran ({changed})",))
        modified, _ = changed_outputs(state.get("output_files"), stage_dir / "outputs", hasher)
        if modified:
            return Verdict(FRESH, tuple(f"{path} was modified after the stage completed" for path in modified))
        return Verdict(GROW, (f"resumes with more {', '.join(grown)}: what it finished is kept",))
    return Verdict(FRESH, tuple(explain_change(state.get("signature"), signature.parts, plan.name)))


def stale_reasons(run_dir: Path, host: PluginHost, notes: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    """Why `xfer run` would run each stage of the run directory again ([] = up to date); `notes`
    (when given) gets what a re-run would only note, such as output files deleted since completion.

    Re-validates the run's resolved recipe and re-signs every stage against the current files
    and plugins (file hashes come from the run's cache; nothing is written). A stage never run
    is not listed. Raises UserError when the recipe no longer validates (e.g. data removed).
    """
    from xfer.core.recipes.recipe import load_recipe

    try:
        recipe = load_recipe(run_dir / "recipe.resolved.yaml", (), host)
    except RecipeError as exc:
        raise UserError(f"cannot check whether stages are up to date:\n{exc}") from None
    hasher = FileHasher(hash_cache_path(run_dir))
    fingerprints: dict[str, str] = {}
    reasons: dict[str, list[str]] = {}
    redone: set[str] = set()  # stages that run from scratch with their fingerprint unchanged
    for name, plan in recipe.stages.items():
        signature = stage_signature(plan, recipe.seed, fingerprints, host, hasher)
        fingerprints[name] = signature.fingerprint
        state = read_state(run_dir / name / "stage.json")
        verdict = judge(state, signature, plan, run_dir / name, hasher)
        upstream = [dep for dep in plan.deps if dep in redone]
        if verdict.redone or upstream:
            redone.add(name)
        if not state:  # never run: nothing to be stale
            continue
        if verdict.pruned and notes is not None:
            notes[name] = [_pruned_note(list(verdict.pruned))]
        # the runner will have marked it invalidated: it runs afresh, a grown one too (its finished trials dropped)
        if verdict.action in (SKIP, RESUME, GROW) and upstream:
            reasons[name] = [f"upstream stage {dep!r}, which it read, runs again first" for dep in upstream]
        else:
            reasons[name] = list(verdict.reasons)
    return reasons


def read_status(run_dir: Path, host: PluginHost | None = None) -> list[dict[str, Any]]:
    """Status of each stage folder of a run (for `xfer status`), in the recipe's order.

    A stage whose stage.json says `running` while nobody holds the run directory's lock was
    cut short (killed, crashed machine): it is shown as `interrupted`. With a `host`, each row
    also says why the stage would run again (`reruns_because`; see `stale_reasons`), and a
    completed stage whose inputs changed is shown as `stale`.
    """
    recipe_file = run_dir / "recipe.resolved.yaml"
    if not recipe_file.exists():
        raise UserError(f"{run_dir}: not a run directory (no recipe.resolved.yaml)")
    resolved = read_resolved_recipe(recipe_file, UserError, "`xfer run RECIPE --run-dir DIR --force` rewrites it")
    stages = resolved["stages"]
    owner_alive = runlock.holder(run_dir) is not None
    stale: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    stale_error = None
    if host is not None:
        try:
            stale = stale_reasons(run_dir, host, notes)
        except UserError as exc:
            stale_error = str(exc)
    rows = []
    for name, config in (stages if isinstance(stages, dict) else {}).items():
        stage_dir = run_dir / name
        state = read_state(stage_dir / "stage.json")
        duration, attempts = stage_duration(state) if state.get("started") else (None, 0)
        # a damaged record is no stage that never ran ("pending" it was shown as, its checkpoints listed)
        status = "damaged" if MALFORMED in state else state.get("status", "pending")
        if status == "running" and not owner_alive:
            status = "interrupted"
        if status == "completed" and stale.get(name):
            status = "stale"
        rows.append(
            {
                "stage": name,
                "kind": config.get("kind") if isinstance(config, dict) else None,
                "status": status,
                "fingerprint": (state.get("fingerprint") or "")[:12],
                "duration_s": None if duration is None else round(duration, 1),
                "attempts": attempts,
                "checkpoint": _checkpoint_name(stage_dir / "checkpoints"),
                "trial_checkpoints": _nested_checkpoints(stage_dir),
                "error": state.get("error"),
                "reruns_because": stale.get(name, []),
                "notes": notes.get(name, []),
                "staleness_unknown": stale_error,
            }
        )
    return rows


def _checkpoint_name(directory: Path) -> str | None:
    """The checkpoint a resume would start from, as the trainer finds it (a damaged `latest` pointer
    is not shown as if it named one)."""
    found = latest_checkpoint(directory)
    return found.name if found is not None else None


def _nested_checkpoints(stage_dir: Path) -> list[dict[str, str | None]]:
    """Checkpoints of runs inside a stage (fine-tuning trials: `trials/<task>/trial-N/checkpoints`)."""
    found = []
    if stage_dir.is_dir():
        for pointer in sorted(stage_dir.glob("*/**/checkpoints/latest")):
            owner = pointer.parent.parent.relative_to(stage_dir)
            if owner.parts[0] != "outputs":
                found.append({"run": str(owner), "checkpoint": _checkpoint_name(pointer.parent)})
    return found

"""Error types that the CLI turns into clear messages and exit codes instead of tracebacks.

Every error a user can cause by bad input (a recipe, a data file, a checkpoint) derives from
`UserError`; the CLI prints `str(error)` and exits with `error.exit_code`. Anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class UserError(Exception):
    """Bad input from the user: printed without a traceback, non-zero exit."""

    exit_code = 2


@dataclass(frozen=True, order=True)
class Location:
    """A position in a source file; line and column are 1-based (0 means unknown)."""

    file: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        if self.line and self.col:
            return f"{self.file}:{self.line}:{self.col}"
        if self.line:
            return f"{self.file}:{self.line}"
        return self.file


@dataclass(frozen=True)
class Diagnostic:
    """One problem found while validating; many are collected and reported together."""

    location: Location
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


class RecipeError(UserError):
    """One or more problems in a recipe or its overrides, all reported at once (exit code 2)."""

    exit_code = 2

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = sorted(set(diagnostics), key=lambda d: (d.location, d.message))
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class DataError(UserError):
    """A malformed data file: names the file, the line (1-based) and, where known, the field."""

    exit_code = 2

    def __init__(self, path: str | Path, line: int, message: str, key: str | None = None):
        self.path, self.line, self.key, self.message = str(path), line, key, message
        where = f"{path}:{line}" if line else str(path)
        what = f"{key}: {message}" if key else message
        super().__init__(f"{where}: {what}")


class CheckpointError(UserError):
    """A checkpoint that cannot be loaded safely (missing, incomplete, or not weights-only)."""

    exit_code = 2


class PluginError(UserError):
    """A component that cannot be provided: unknown name, or its plugin failed to load."""

    exit_code = 2


class RunDirError(UserError):
    """A run directory that does not match the recipe (use --fork or --force)."""

    exit_code = 2


class StoppedOnEveryRank(UserError):
    """An error every rank raises at the same step, decided together (through a collective), with
    the same message. Under torchrun the runner lets rank 0 record it in stage.json before any rank
    exits: a rank that exited first had torchrun kill rank 0 in the middle of that, and the stage
    was left "running" or "interrupted" with the advice to re-run, instead of "failed" with why."""


class TrainingDiverged(StoppedOnEveryRank):
    """Loss became NaN/inf; training stopped and the last good checkpoint was kept."""

    exit_code = 1


class TrainingStopped(StoppedOnEveryRank):
    """The trainer's events asked training to stop (e.g. a collapse the stage was told to stop on);
    the checkpoints written so far are kept."""

    exit_code = 1

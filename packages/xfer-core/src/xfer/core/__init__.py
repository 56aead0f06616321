"""xfer core: plugin host, strict recipes, stage runner, shared trainer, checkpoints, metrics.

Importing this package is cheap (no torch); heavy modules are imported where they are used.
"""

import os

# Intel MKL (torch's CPU BLAS) may pick kernels by memory alignment, so the same matmul can
# differ in the last bits between two processes; exact resume (killed-and-resumed == never
# interrupted) needs bitwise-reproducible math. AUTO,STRICT keeps the fastest code path for
# this CPU but makes it alignment-independent (no measurable cost here). Must be set before
# MKL's first call; respect a user's own setting.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

from xfer.core.config import ExistingPath, FieldError, Files, Input, ObjectiveRef, PathOrName, TaskRef, knob
from xfer.core.errors import DataError, PluginError, RecipeError, UserError
from xfer.core.hookspecs import hookimpl
from xfer.core.specs import CommandSpec, ComponentSpec

__version__ = "0.1.0"

__all__ = [
    "CommandSpec",
    "ComponentSpec",
    "DataError",
    "ExistingPath",
    "FieldError",
    "Files",
    "Input",
    "ObjectiveRef",
    "PathOrName",
    "PluginError",
    "RecipeError",
    "TaskRef",
    "UserError",
    "__version__",
    "hookimpl",
    "knob",
]

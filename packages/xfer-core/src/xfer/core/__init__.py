"""xfer core: plugin host, strict recipes, stage runner, shared trainer, checkpoints, metrics.

Importing this package is cheap (no torch); heavy modules are imported where they are used.
"""

from xfer.core.config import ExistingPath, Files, Input, ObjectiveRef, TaskRef, knob
from xfer.core.errors import DataError, PluginError, RecipeError, UserError
from xfer.core.hookspecs import hookimpl
from xfer.core.specs import CommandSpec, ComponentSpec

__version__ = "0.1.0"

__all__ = [
    "CommandSpec",
    "ComponentSpec",
    "DataError",
    "ExistingPath",
    "Files",
    "Input",
    "ObjectiveRef",
    "PluginError",
    "RecipeError",
    "TaskRef",
    "UserError",
    "__version__",
    "hookimpl",
    "knob",
]

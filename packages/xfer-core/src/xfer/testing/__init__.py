"""xfer.testing: the plugin-author kit.

Helpers to build a plugin host with only chosen plugins, run recipes in a temporary folder
(in-process or as a real `xfer` subprocess, optionally with an injected SIGKILL), compare
the weights two runs produced, and `ComponentConformance`, a test base class that checks a
component the way the core expects every component to behave. Installed as a pytest plugin
(fixtures `xfer_host`, `xfer_run`), so plugin test suites need no conftest boilerplate.

Only `ComponentConformance` needs pytest; it is imported on first use so that the `testing`
plugin (stage `testing.fit`) also works where pytest is not installed.
"""

from typing import Any

from xfer.testing.helpers import (
    assert_same_weights,
    make_host,
    output_tensors,
    run_cli,
    run_recipe_file,
    write_recipe,
)

__all__ = [
    "ComponentConformance",
    "assert_same_weights",
    "make_host",
    "output_tensors",
    "run_cli",
    "run_recipe_file",
    "write_recipe",
]


def __getattr__(name: str) -> Any:
    if name == "ComponentConformance":
        from xfer.testing.conformance import ComponentConformance

        return ComponentConformance
    raise AttributeError(f"module 'xfer.testing' has no attribute {name!r}")

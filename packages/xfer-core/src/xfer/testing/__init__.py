"""xfer.testing: the plugin-author kit.

Helpers to build a plugin host with only chosen plugins, run recipes in a temporary folder
(in-process or as a real `xfer` subprocess, optionally with an injected SIGKILL), compare
the weights two runs produced, and `ComponentConformance`, a test base class that checks a
component the way the core expects every component to behave. Installed as a pytest plugin
(fixtures `xfer_host`, `xfer_run`), so plugin test suites need no conftest boilerplate.
"""

from xfer.testing.conformance import ComponentConformance
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

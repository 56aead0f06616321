"""While a recipe is validated, checked or run, its plugin host is the process's default host.

Code that runs inside a recipe but is not handed the host — a task's config naming a metric
component, a stage config's pre-flight looking up an objective — asks `default_host()`. Without
this, a recipe loaded with its own host (tests, the conformance kit, `make_host(modules=...)`)
had those lookups answered by another host, which may not know the recipe's plugins.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from xfer.core import plugins


@contextmanager
def recipe_host(host: plugins.PluginHost) -> Iterator[plugins.PluginHost]:
    """Make `host` the default host until the block ends (then restore the one before)."""
    previous = plugins._default_host
    plugins._default_host = host
    try:
        yield host
    finally:
        plugins._default_host = previous

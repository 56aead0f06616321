"""The `testing` plugin: a tiny, fast stage for exercising the core without any method package.

Not loaded automatically: tests and plugin authors opt in with
`PluginHost(modules=["xfer.testing.plugin"])` or `XFER_PLUGIN_MODULES=xfer.testing.plugin`.
"""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec

XFER_NAMESPACE = "testing"


@hookimpl
def xfer_stages() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "stage",
            "testing.fit",
            "xfer.testing.bow:run_fit",
            "1",
            "xfer.testing.bow:FitConfig",
            "Train a hashed bag-of-words classifier/regressor on any sentence task with the shared trainer.",
            outputs=("model",),
            # model.safetensors of the bag-of-words model: another fit stage's `init` reads it, nothing else
            output_kinds=(("model", "bow-model"),),
        )
    ]

"""Registration: specs import, names live under `squad`, the plugin module is cheap to import."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from xfer.core.tasks import Task
from xfer.tasks.squad import plugin


def test_specs_import_and_construct():
    specs = plugin.xfer_tasks()
    assert [s.name for s in specs] == ["squad/v1", "squad/v2"]
    for spec in specs:
        assert spec.kind == "task" and spec.namespace == "squad"
        cls, config_cls = spec.load(), spec.config_class()
        assert issubclass(cls, Task) and dataclasses.is_dataclass(config_cls)
        assert all(f.metadata.get("doc") for f in dataclasses.fields(config_cls))
        task = cls(spec.name, config_cls())
        assert task.type == "span_qa" and task.main_metric == "f1" and task.labels == ()


def test_plugin_import_is_cheap():
    code = "import sys, xfer.tasks.squad.plugin as p; p.xfer_tasks(); print([m for m in ('torch', 'numpy') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

"""Registration: specs import, names live under `conll`, the plugin module is cheap to import."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from xfer.core.tasks import Task
from xfer.tasks.conll import plugin


def test_specs_import_and_construct():
    specs = plugin.xfer_tasks()
    assert {s.name for s in specs} == {"conll/chunking", "conll/ner", "conll/ud-pos", "conll/columns", "conll/ud-parse"}
    for spec in specs:
        assert spec.kind == "task" and spec.namespace == "conll"
        cls = spec.load()
        config_cls = spec.config_class()
        assert issubclass(cls, Task) and dataclasses.is_dataclass(config_cls)
        assert all(f.metadata.get("doc") for f in dataclasses.fields(config_cls))
        task = cls(spec.name, config_cls())
        if spec.name == "conll/ud-parse":
            assert task.type == "parsing" and task.main_metric == "las"
        else:
            assert task.type == "tagging" and task.main_metric in ("f1", "accuracy")


def test_plugin_import_is_cheap():
    code = (
        "import sys, xfer.tasks.conll.plugin as p; p.xfer_tasks(); "
        "print(sorted(m for m in ('torch', 'numpy', 'seqeval', 'sklearn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

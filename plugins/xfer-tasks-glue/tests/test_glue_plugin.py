"""Registration: specs import, names live under the `glue` namespace, the plugin module is cheap."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import types

import pytest

from xfer.core.errors import UserError
from xfer.core.tasks import Task
from xfer.tasks.glue import plugin
from xfer.tasks.glue.config import GlueTaskConfig

EXPECTED = {
    "glue/cola", "glue/sst2", "glue/mrpc", "glue/stsb", "glue/qqp", "glue/mnli",
    "glue/mnli-mm", "glue/qnli", "glue/rte", "glue/wnli", "glue/tsv",
}  # fmt: skip


def test_specs_import_and_match():
    specs = plugin.xfer_tasks()
    assert {s.name for s in specs} == EXPECTED
    for spec in specs:
        assert spec.kind == "task" and spec.namespace == "glue"
        cls = spec.load()
        assert issubclass(cls, Task)
        config_cls = spec.config_class()
        assert dataclasses.is_dataclass(config_cls)
        assert all(f.metadata.get("doc") for f in dataclasses.fields(config_cls))
        config = config_cls(labels=["0", "1"]) if spec.name == "glue/tsv" else config_cls()  # tsv needs labels
        task = cls(spec.name, config)
        assert task.main_metric and task.type in ("classification", "regression")


def test_entry_point_is_registered():
    from importlib.metadata import entry_points

    (ep,) = [ep for ep in entry_points(group="xfer") if ep.name == "glue"]
    assert ep.value == "xfer.tasks.glue.plugin"


def test_plugin_import_is_cheap():
    code = (
        "import sys, xfer.tasks.glue.plugin as p; p.xfer_tasks(); "
        "print(sorted(m for m in ('torch', 'datasets', 'numpy', 'sklearn', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def fake_datasets(monkeypatch, load):
    module = types.ModuleType("datasets")
    module.load_dataset = load
    monkeypatch.setitem(sys.modules, "datasets", module)


def test_hub_offline_is_a_clear_user_error(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'nyu-mll/glue' on the Hub (LocalEntryNotFoundError)")

    fake_datasets(monkeypatch, offline)
    from xfer.tasks.glue.tasks import RTETask

    with pytest.raises(UserError, match=r"could not load nyu-mll/glue subset 'rte'.*offline"):
        RTETask("glue/rte", GlueTaskConfig(source="hub")).examples("dev")


def test_hub_rows_map_to_glue_label_strings(monkeypatch):
    calls = []

    def load(name, subset, split):
        calls.append((name, subset, split))
        return [
            {"premise": "P", "hypothesis": "H", "label": 2, "idx": 0},
            {"premise": "P2", "hypothesis": "H2", "label": -1, "idx": 1},
        ]

    fake_datasets(monkeypatch, load)
    from xfer.tasks.glue.tasks import MNLIMismatchedTask

    examples = MNLIMismatchedTask("glue/mnli-mm", GlueTaskConfig(source="hub")).examples("dev")
    assert calls == [("nyu-mll/glue", "mnli", "validation_mismatched")]
    assert [(e.id, e.text_a, e.text_b, e.label) for e in examples] == [
        ("dev-0", "P", "H", "contradiction"),
        ("dev-1", "P2", "H2", None),
    ]


def test_hub_mnli_test_split_carries_the_diagnostic_set_when_asked(monkeypatch):
    calls = []

    def load(name, subset, split):
        calls.append((subset, split))
        return [{"premise": f"P-{subset}", "hypothesis": "H", "label": -1, "idx": 0}]

    fake_datasets(monkeypatch, load)
    from xfer.tasks.glue.config import MnliTaskConfig
    from xfer.tasks.glue.tasks import MNLITask

    examples = MNLITask("glue/mnli", MnliTaskConfig(source="hub", diagnostic=True)).examples("test")
    assert calls == [("mnli", "test_matched"), ("ax", "test")]
    assert [(e.id, e.text_a, e.label) for e in examples] == [("test-0", "P-mnli", None), ("ax-0", "P-ax", None)]
    with pytest.raises(ValueError, match="diagnostic_file: is a local file"):
        MnliTaskConfig(source="hub", diagnostic=True, diagnostic_file=__file__)


def test_only_glue_mnli_takes_the_diagnostic_set(tmp_path, capsys):
    from xfer.core import cli
    from xfer.core.plugins import set_default_host
    from xfer.testing import make_host, write_recipe

    (tmp_path / "MNLI").mkdir()
    recipe = "name: t\nstages:\n  ft:\n    kind: transformer.finetune\n    model: tiny\n    tokenizer: {tok}\n"
    recipe += "    predict: [test]\n    tasks: [{{name: {task}, data_dir: MNLI, diagnostic: true}}]\n"
    set_default_host(make_host(autoload=True))
    try:
        (tmp_path / "tok").mkdir()
        path = write_recipe(tmp_path, recipe.format(tok="tok", task="glue/mnli-mm"))
        assert cli.main(["validate", str(path)]) == 2
        assert "stages.ft.tasks.0.diagnostic: unknown" in capsys.readouterr().err
        path = write_recipe(tmp_path, recipe.format(tok="tok", task="glue/mnli"))
        head = "index\tsentence1\tsentence2\tgold_label\n0\tA.\tB.\tentailment\n"
        for name in ("train.tsv", "dev_matched.tsv", "test_matched.tsv"):
            (tmp_path / "MNLI" / name).write_text(head)
        assert cli.main(["validate", str(path), "--data"]) == 2
        err = capsys.readouterr().err
        # the pre-flight kept the path of a missing file (it dropped every DataError's path)
        assert f"task 'glue/mnli': {tmp_path / 'diagnostic' / 'diagnostic.tsv'}: glue/mnli: the diagnostic set" in err
    finally:
        set_default_host(None)

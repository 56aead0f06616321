"""The conformance kit against plugins broken the way authors break them: each check must fail them."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from xfer.testing.helpers import run_recipe_file

_STAGE_PLUGIN = """
from dataclasses import dataclass

from xfer.core import ComponentSpec, hookimpl, knob

XFER_NAMESPACE = "{ns}"

WORDS = [f"word{{i}}" for i in range(40)]


@dataclass
class Config:
    ordered: bool = knob(True, "Write the words sorted (False: in set order, which PYTHONHASHSEED decides).")


def run(ctx):
    words = sorted(set(WORDS)) if ctx.config.ordered else list(set(WORDS))
    (ctx.output_dir("text") / "words.txt").write_text("\\n".join(words) + "\\n")


@hookimpl
def xfer_stages():
    return [ComponentSpec("stage", "{ns}.words", "{module}:run", "1", "{module}:Config", "Words.", outputs=("text",))]
"""


@pytest.fixture
def words_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(module, stage kind) of a fresh `trains = False` stage plugin, importable here and in subprocesses."""
    ns = f"hw{uuid.uuid4().hex[:8]}"
    module = f"{ns}_plugin"
    directory = tmp_path / "site"
    directory.mkdir()
    (directory / f"{module}.py").write_text(_STAGE_PLUGIN.format(ns=ns, module=module))
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(directory), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("XFER_PLUGIN_MODULES", raising=False)
    return module, f"{ns}.words"


def _file_kit(module: str, kind: str, ordered: bool) -> object:
    from xfer.testing import ComponentConformance

    recipe = f"stages:\n  fit: {{kind: {kind}, ordered: {str(ordered).lower()}}}\n"
    attrs = {
        "component": ("stage", kind),
        "config_path": "stages.fit",
        "recipe": recipe,
        "trains": False,
        "autoload": False,
        "plugin_modules": (module,),
    }
    return type("Checks", (ComponentConformance,), attrs)()


def _reference(checks: object, directory: Path) -> tuple[Path, dict]:
    """What the kit's class-scoped `reference` fixture computes: one in-process run."""
    path = checks.recipe_file(directory)  # type: ignore[attr-defined]
    run_recipe_file(path, directory / "run", checks.host())  # type: ignore[attr-defined]
    return path, checks.outputs(directory / "run")  # type: ignore[attr-defined]


def test_determinism_of_a_file_stage_is_checked_across_interpreters(
    words_stage: tuple[str, str], tmp_path: Path
) -> None:
    """A stage writing a set in iteration order writes different bytes in every `xfer run` (string
    hashes are salted per interpreter), but the check compared two runs of one process, which share
    the salt, and passed; a `trains = False` stage has no kill-and-resume check to catch it either."""
    module, kind = words_stage
    checks = _file_kit(module, kind, ordered=False)
    with pytest.raises(
        (AssertionError, pytest.fail.Exception), match=r"PYTHONHASHSEED=.*: text/words\.txt; write sets"
    ):
        checks.test_deterministic(_reference(checks, tmp_path / "ref"), tmp_path / "again")  # type: ignore[attr-defined]


def test_a_deterministic_file_stage_passes_across_interpreters(words_stage: tuple[str, str], tmp_path: Path) -> None:
    module, kind = words_stage
    checks = _file_kit(module, kind, ordered=True)
    checks.test_deterministic(_reference(checks, tmp_path / "ref"), tmp_path / "again")  # type: ignore[attr-defined]


# --- a task's evaluate and write_predictions, on its gold labels --------------------------------------------

_TASK_PLUGIN = """
from xfer.core import ComponentSpec, hookimpl
from xfer.core.metrics import accuracy
from xfer.core.tasks import SentenceExample, Task

XFER_NAMESPACE = "{ns}"


class Good(Task):
    type = "classification"
    main_metric = "accuracy"
    labels = ("a", "b")

    def examples(self, split):
        return [SentenceExample(f"{{split}}-{{i}}", f"text {{i}}", None, "ab"[i % 2]) for i in range(8)]

    def evaluate(self, examples, predictions):
        return {{"accuracy": accuracy([e.label for e in examples], [predictions[e.id] for e in examples])}}


class Fraction(Good):
    def evaluate(self, examples, predictions):
        return {{"accuracy": super().evaluate(examples, predictions)["accuracy"] / 100}}


class Mutating(Good):
    def evaluate(self, examples, predictions):
        examples.sort(key=lambda e: e.label)  # sorts the caller's list in place
        return super().evaluate(examples, predictions)


class Stray(Good):
    def write_predictions(self, directory, split, examples, predictions):
        path = directory.parent / f"{{split}}.tsv"  # beside the folder it was given
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{{e.id}}\\t{{predictions[e.id]}}\\n" for e in examples))
        return path


@hookimpl
def xfer_tasks():
    return [
        ComponentSpec("task", f"{ns}/{{name.lower()}}", f"{module}:{{name}}", "1", None, "A task.")
        for name in ("Good", "Fraction", "Mutating", "Stray")
    ]
"""


@pytest.fixture
def tasks_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(module, namespace) of a fresh plugin with a correct task and three broken ones."""
    ns = f"ht{uuid.uuid4().hex[:8]}"
    module = f"{ns}_plugin"
    directory = tmp_path / "site"
    directory.mkdir()
    (directory / f"{module}.py").write_text(_TASK_PLUGIN.format(ns=ns, module=module))
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.delenv("XFER_PLUGIN_MODULES", raising=False)
    return module, ns


def _task_kit(module: str, task: str) -> object:
    from xfer.testing import ComponentConformance

    attrs = {
        "component": ("task", task),
        "config_path": "stages.fit.task",
        "recipe": f"stages:\n  fit: {{kind: testing.fit, task: {task}, train: {{steps: 2, batch_size: 4}}}}\n",
        "autoload": False,
        "plugin_modules": (module,),
    }
    return type("Checks", (ComponentConformance,), attrs)()


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ("fraction", r"get accuracy = 1\.0: a fraction\? every metric a task returns is in percent"),
        ("mutating", r"evaluate\(\) changed the examples or predictions it was handed"),
        ("stray", r"write_predictions\(\) wrote outside the folder it was given: \['dev\.tsv'\]"),
    ],
)
def test_the_kit_fails_a_task_that_breaks_the_evaluate_or_write_predictions_contract(
    tasks_plugin: tuple[str, str], tmp_path: Path, task: str, message: str
) -> None:
    """Each of these tasks passed every check of the kit: a run only needs `evaluate` to return a number
    for `main_metric`, and the kit's determinism checks compare weights, not prediction files."""
    module, ns = tasks_plugin
    checks = _task_kit(module, f"{ns}/{task}")
    with pytest.raises(AssertionError, match=message):
        checks.test_task_scores_and_writes_gold_predictions(tmp_path)  # type: ignore[attr-defined]


def test_a_correct_task_passes_the_gold_predictions_check(tasks_plugin: tuple[str, str], tmp_path: Path) -> None:
    module, ns = tasks_plugin
    _task_kit(module, f"{ns}/good").test_task_scores_and_writes_gold_predictions(tmp_path)  # type: ignore[attr-defined]


# --- documented config: nested sections too ---------------------------------------------------------------

_SECTION_PLUGIN = """
from dataclasses import dataclass, field

from xfer.core import ComponentSpec, hookimpl, knob

XFER_NAMESPACE = "{ns}"


@dataclass
class Schedule:
    warmup: int = 10  # no knob(..., doc): `xfer explain` shows it without a word
    decay: float = knob(0.5, "Decay per epoch.")


@dataclass
class Documented:
    warmup: int = knob(10, "Warm-up steps.")


@dataclass
class Config:
    size: int = knob(4, "Size.")
    schedule: Schedule = knob(Schedule(), "The schedule.")


@dataclass
class GoodConfig:
    size: int = knob(4, "Size.")
    schedule: Documented | None = knob(None, "The schedule.")


def run(ctx):
    pass


@hookimpl
def xfer_stages():
    return [
        ComponentSpec("stage", "{ns}.nested", "{module}:run", "1", "{module}:Config", "Nested."),
        ComponentSpec("stage", "{ns}.good", "{module}:run", "1", "{module}:GoodConfig", "Good."),
    ]
"""


def test_an_undocumented_field_of_a_nested_config_section_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the top-level fields were checked for a doc: a section's undocumented fields passed."""
    from xfer.testing import ComponentConformance

    ns = f"hn{uuid.uuid4().hex[:8]}"
    module = f"{ns}_plugin"
    (tmp_path / f"{module}.py").write_text(_SECTION_PLUGIN.format(ns=ns, module=module))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("XFER_PLUGIN_MODULES", raising=False)

    def kit(stage: str) -> object:
        attrs = {"component": ("stage", f"{ns}.{stage}"), "autoload": False, "plugin_modules": (module,)}
        return type("Checks", (ComponentConformance,), attrs)()

    with pytest.raises(AssertionError, match=r"config fields without knob\(\.\.\., doc\): \['schedule\.warmup'\]"):
        kit("nested").test_registered_with_documented_config()  # type: ignore[attr-defined]
    kit("good").test_registered_with_documented_config()  # type: ignore[attr-defined]


_REFUSED_PLUGIN = """
from dataclasses import dataclass

from xfer.core import ComponentSpec, hookimpl, knob
from xfer.core.errors import UserError

XFER_NAMESPACE = "{ns}"


@dataclass
class Config:
    size: int = knob(3, "Words to write.")

    def preflight(self):
        return [UserError("the data this stage reads is not there")]


def run(ctx):
    (ctx.output_dir("text") / "words.txt").write_text("w\\n" * ctx.config.size)


@hookimpl
def xfer_stages():
    return [ComponentSpec("stage", "{ns}.words", "{module}:run", "1", "{module}:Config", "Words.", outputs=("text",))]
"""


def test_the_one_step_check_runs_the_data_preflight_xfer_run_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`xfer run` refuses a recipe its data pre-flight finds a problem in, but the kit ran the stage in
    process past it: a stage refused by every `xfer run` (one reading only a train split, its config
    without `data_splits`) passed every check."""
    from xfer.core.runs.preflight import PreflightError

    ns = f"hp{uuid.uuid4().hex[:8]}"
    module = f"{ns}_plugin"
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / f"{module}.py").write_text(_REFUSED_PLUGIN.format(ns=ns, module=module))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    checks = _file_kit(module, f"{ns}.words", ordered=True)
    checks.recipe = f"stages:\n  fit: {{kind: {ns}.words}}\n"  # type: ignore[attr-defined]
    with pytest.raises(PreflightError, match="the data this stage reads is not there"):
        checks.test_one_step_runs(tmp_path / "one")  # type: ignore[attr-defined]

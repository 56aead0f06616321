"""A third-party plugin author's mistakes, each caught where it is made, with a message that names it.

Found by writing a plugin from the README alone: a spec's `outputs=("model")` (no trailing comma),
a hook returning one component twice, a stage target that is not `run(ctx)`, a task target that is
not a `Task`. Each used to pass registration and `xfer plugins --check`, then fail far from the
cause (a stage that ran and was refused for not writing outputs `m, o, d, e, l`; a bare
TypeError when the stage started; "registered twice ... uninstall one of them" for one plugin).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from xfer.core import DataError, knob
from xfer.core.errors import PluginError, RecipeError
from xfer.core.hookspecs import hookimpl
from xfer.core.recipes.recipe import load_recipe
from xfer.core.specs import ComponentSpec
from xfer.testing import make_host, write_recipe

FIT = ("stage", "author.fit", "xfer.testing.bow:run_fit", "1", "xfer.testing.bow:FitConfig")


# --- ComponentSpec: what the spec itself declares ---------------------------------------------------


def test_outputs_given_as_a_bare_string_is_refused_with_the_missing_comma_named() -> None:
    with pytest.raises(
        ValueError, match=r"outputs must be a tuple of names, got the string 'model' \(write \('model',\)"
    ):
        ComponentSpec(*FIT, outputs=("model"))  # the missing comma under test
    with pytest.raises(ValueError, match=r"growable must be a tuple of names, got the string 'trials'"):
        ComponentSpec(*FIT, outputs=("model",), growable="trials")


def test_outputs_as_a_list_is_kept_as_a_hashable_tuple() -> None:
    spec = ComponentSpec(*FIT, outputs=["model", "report"])
    assert spec.outputs == ("model", "report")
    hash(spec)  # specs are frozen and hashed (a list inside made that a TypeError)


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (("model", "model"), r"outputs gives 'model' twice"),
        (("my-model",), r"outputs holds 'my-model', which is not a name a recipe can write"),
        (("",), r"outputs holds '', which is not a name a recipe can write"),
    ],
)
def test_outputs_a_recipe_cannot_reference_are_refused(outputs: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ComponentSpec(*FIT, outputs=outputs)


@dataclasses.dataclass
class _Config:
    size: int = knob(1, "A size.")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"version": 1}, r"version must be a non-empty string \(e\.g\. version=\"1\"\), got 1"),
        ({"version": "  "}, r"version must be a non-empty string"),
        (
            {"config": _Config()},
            r"config must be a dataclass, .* got _Config \(pass the class, not an instance of it\)",
        ),
        ({"config": "pkg.mod.Config"}, r"config 'pkg.mod.Config' must be an import path 'package.module:Class'"),
        ({"target": "pkg.mod:"}, r"target 'pkg.mod:' must be an import path"),
        ({"target": ":run"}, r"target ':run' must be an import path"),
        ({"summary": None}, r"summary must be a string, got NoneType"),
    ],
)
def test_malformed_spec_fields_are_refused_when_the_spec_is_built(changes: dict, message: str) -> None:
    fields = {"kind": "stage", "name": "author.fit", "target": "xfer.testing.bow:run_fit", "version": "1"} | changes
    with pytest.raises(ValueError, match=message):
        ComponentSpec(**fields)


def test_a_bad_spec_fails_its_plugin_at_the_plugin_line() -> None:
    class Plugin:
        @hookimpl
        def xfer_stages(self) -> list:
            return [ComponentSpec(*FIT, outputs=("model"))]

    record = make_host().add_object(Plugin(), "author")
    assert record.error is not None
    assert "outputs must be a tuple of names, got the string 'model'" in record.error
    assert "test_plugin_author.py" in record.error


# --- the host: one plugin, one name ----------------------------------------------------------------


def test_a_plugin_returning_one_component_twice_is_its_own_error_not_a_conflict() -> None:
    class Plugin:
        @hookimpl
        def xfer_stages(self) -> list:
            return [ComponentSpec(*FIT, outputs=("model",)), ComponentSpec(*FIT, outputs=("model",))]

    host = make_host()
    record = host.add_object(Plugin(), "author")
    assert record.error is not None and "xfer_stages returned stage 'author.fit' twice" in record.error
    assert "test_plugin_author.py" in record.error, "where the specs were declared"
    assert not host.conflicts
    with pytest.raises(PluginError, match="failed to load") as caught:
        host.get("stage", "author.fit")
    assert "uninstall" not in str(caught.value)


def test_namespace_hint_keeps_the_components_separator() -> None:
    class Plugin:
        @hookimpl
        def xfer_tasks(self) -> list:
            return [ComponentSpec("task", "other/reviews", "xfer.core.toy.tasks:ToyPosTask", "1")]

    record = make_host().add_object(Plugin(), "author")
    assert record.error is not None and "(e.g. 'author/reviews')" in record.error


# --- the host: targets of the wrong shape ----------------------------------------------------------


NOT_CALLABLE = "a string"


def run_two(ctx: object, extra: object) -> None:
    """A stage function with an argument the runner never passes."""


def metric_one(golds: object) -> float:
    return 0.0


class NotATask:
    def __init__(self, name: str, config: object) -> None:
        self.name = name


class NotAModule:
    def __init__(self, *args: object) -> None:
        pass


HERE = __name__


@pytest.mark.parametrize(
    ("kind", "name", "target", "message"),
    [
        (
            "stage",
            "author.str",
            f"{HERE}:NOT_CALLABLE",
            r"target '.*:NOT_CALLABLE' is a str \('a string'\), which cannot be called",
        ),
        (
            "stage",
            "author.two",
            f"{HERE}:run_two",
            r"is function .*run_two\(ctx: 'object', extra: 'object'\) -> 'None', which cannot be called as run\(ctx\)",
        ),
        ("task", "author/plain", f"{HERE}:NotATask", r"is class .*NotATask, not a subclass of xfer.core.tasks.Task"),
        ("task", "author/abstract", "xfer.core.tasks:Task", r"does not implement evaluate, examples"),
        ("objective", "author.obj", f"{HERE}:NotAModule", r"is class .*NotAModule, not a torch.nn.Module subclass"),
        ("metric", "author.one", f"{HERE}:metric_one", r"cannot be called as metric\(golds, predictions\)"),
    ],
)
def test_a_target_of_the_wrong_shape_is_a_check_and_recipe_error(
    kind: str, name: str, target: str, message: str
) -> None:
    import torch  # noqa: F401  (the objective check uses torch when it is loaded, as a recipe run has it)

    class Plugin:
        @hookimpl(
            specname={
                "stage": "xfer_stages",
                "task": "xfer_tasks",
                "objective": "xfer_objectives",
                "metric": "xfer_metrics",
            }[kind]
        )
        def register(self) -> list:
            return [ComponentSpec(kind, name, target, "1")]

    host = make_host()
    record = host.add_object(Plugin(), "author")
    assert record.error is None, record.error
    with pytest.raises(PluginError, match=message):
        host.config_class(kind, name)
    host.check_components()
    assert name in record.problems and "declared at" in record.problems[name]


def test_a_stage_target_that_is_not_run_ctx_is_refused_at_the_recipe_line(tmp_path: Path) -> None:
    class Plugin:
        @hookimpl
        def xfer_stages(self) -> list:
            return [ComponentSpec("stage", "author.two", f"{HERE}:run_two", "1")]

    host = make_host()
    host.add_object(Plugin(), "author")
    recipe = write_recipe(
        tmp_path, "stages:\n  first: {kind: toy.corpus, sentences: 10}\n  second: {kind: author.two}\n"
    )
    with pytest.raises(RecipeError) as caught:
        load_recipe(recipe, [], host)
    assert f"{recipe.resolve()}:3:11: stage 'author.two' from author ((object) -): target" in str(caught.value)
    assert "which cannot be called as run(ctx)" in str(caught.value)


def test_well_formed_targets_of_every_kind_pass() -> None:
    host = make_host(["xfer.testing.plugin"])
    for kind, name in [
        ("stage", "testing.fit"),
        ("stage", "toy.corpus"),
        ("task", "toy/pos"),
        ("metric", "core.accuracy"),
    ]:
        host.config_class(kind, name)


# --- the conformance kit: checks that check the component ------------------------------------------


def _kit(component: tuple[str, str], config_path: str, recipe: str) -> object:
    from xfer.testing import ComponentConformance

    return type(
        "Checks", (ComponentConformance,), {"component": component, "config_path": config_path, "recipe": recipe}
    )()


AGREEMENT = """
stages:
  fit:
    kind: testing.fit
    task: {name: toy/agreement}
    train: {steps: 2, batch_size: 4}
"""


def test_kit_fails_a_recipe_that_never_uses_the_component() -> None:
    checks = _kit(("task", "toy/pos"), "stages.fit.task", AGREEMENT)
    with pytest.raises(
        pytest.fail.Exception, match=r"the recipe does not use task 'toy/pos' at config_path 'stages.fit.task'"
    ):
        checks.test_recipe_uses_the_component()  # type: ignore[attr-defined]


def test_kit_names_a_config_path_that_leads_nowhere(tmp_path: Path) -> None:
    checks = _kit(("task", "toy/agreement"), "stages.fit.tasks.0", AGREEMENT)
    with pytest.raises(
        pytest.fail.Exception,
        match=r"config_path 'stages.fit.tasks.0': stages.fit has no 'tasks' \(keys: kind, task, train\)",
    ):
        checks.test_unknown_key_reported_with_line(tmp_path)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("component", "config_path", "recipe"),
    [
        (("task", "toy/agreement"), "stages.fit.task", AGREEMENT),
        (("task", "toy/agreement"), "stages.fit.task", "stages:\n  fit: {kind: testing.fit, task: toy/agreement}\n"),
        (("stage", "testing.fit"), "stages.fit", AGREEMENT),
        (
            ("metric", "core.mcc"),
            "stages.fit.task",
            "stages:\n  fit: {kind: testing.fit, task: {name: glue/tsv, metrics: [core.mcc]}}\n",
        ),
    ],
)
def test_kit_accepts_the_component_where_config_path_says(
    component: tuple[str, str], config_path: str, recipe: str
) -> None:
    _kit(component, config_path, recipe).test_recipe_uses_the_component()  # type: ignore[attr-defined]


# --- the scaffold's task: what its config documents, and errors that name the line ------------------


@pytest.fixture
def scaffolded_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> type:
    import importlib
    import uuid

    from xfer.core.scaffold import scaffold_plugin

    name = f"scaf{uuid.uuid4().hex[:8]}"
    target = scaffold_plugin(name, tmp_path / f"xfer-{name}")
    monkeypatch.syspath_prepend(str(target / "src"))
    return importlib.import_module(f"xfer.{name}.task")


def test_scaffolded_task_reads_a_test_file_without_labels(scaffolded_task: type, tmp_path: Path) -> None:
    test = tmp_path / "test.tsv"
    test.write_text("a good film\na bad film\tneg\n")
    task = scaffolded_task.TsvTask("x/tsv", scaffolded_task.TsvConfig(labels=["neg", "pos"], test_file=test))
    assert [(e.text_a, e.label) for e in task.examples("test")] == [("a good film", None), ("a bad film", "neg")]
    train = tmp_path / "train.tsv"
    train.write_text("a good film\n")
    task = scaffolded_task.TsvTask("x/tsv", scaffolded_task.TsvConfig(labels=["neg", "pos"], train_file=train))
    with pytest.raises(DataError, match=r"train.tsv:1: expected 2 tab-separated columns, got 1"):
        task.examples("train")  # training data must be labelled


def test_scaffolded_task_names_the_line_of_a_byte_that_is_not_utf8(scaffolded_task: type, tmp_path: Path) -> None:
    train = tmp_path / "train.tsv"
    train.write_bytes(b"a good film\tpos\n\xff bad film\tneg\n")
    task = scaffolded_task.TsvTask("x/tsv", scaffolded_task.TsvConfig(labels=["neg", "pos"], train_file=train))
    with pytest.raises(DataError, match=r"train.tsv:2: encoding: not valid UTF-8"):
        task.examples("train")


# --- config fields named like the key that names the component --------------------------------------


@dataclasses.dataclass
class _StageWithKind:
    kind: str = knob("plain", "What kind of report.")


@dataclasses.dataclass
class _TaskWithName:
    name: str = knob("reviews", "The data set's name.")


@pytest.mark.parametrize(
    ("kind", "name", "target", "config", "reserved"),
    [
        ("stage", "author.report", "xfer.testing.bow:run_fit", _StageWithKind, "kind"),
        ("task", "author/reviews", "xfer.core.toy.tasks:ToyPosTask", _TaskWithName, "name"),
    ],
)
def test_a_config_field_named_like_the_components_own_key_is_refused(
    tmp_path: Path, kind: str, name: str, target: str, config: type, reserved: str
) -> None:
    class Plugin:
        @hookimpl(specname={"stage": "xfer_stages", "task": "xfer_tasks"}[kind])
        def register(self) -> list:
            return [ComponentSpec(kind, name, target, "1", config)]

    host = make_host(["xfer.testing.plugin"])
    host.add_object(Plugin(), "author")
    with pytest.raises(
        PluginError,
        match=rf"config field '{reserved}': a recipe's {kind} .* uses `{reserved}:` for the component itself",
    ):
        host.config_class(kind, name)
    stage = f"{{kind: {name}}}" if kind == "stage" else f"{{kind: testing.fit, task: {{name: {name}}}}}"
    recipe = write_recipe(tmp_path, f"stages:\n  first: {stage}\n")
    with pytest.raises(RecipeError, match=rf"config field '{reserved}'"):
        load_recipe(recipe, [], host)  # was accepted, and `xfer show` wrote the field's default as the name


# --- a hook implementation naming an argument the hook does not pass --------------------------------


def test_a_misnamed_hook_argument_is_named_with_the_hooks_arguments_at_the_plugins_def() -> None:
    class Plugin:
        @hookimpl
        def xfer_stage_start(self, run_dir: Path, stage_name: str) -> None:
            """`stage_name` for `stage`: pluggy refuses the implementation."""

    record = make_host().add_object(Plugin(), "author")
    assert record.error is not None
    assert record.error.startswith(
        "registration failed: xfer_stage_start(run_dir, stage_name) takes 'stage_name', which xfer_stage_start "
        "does not pass (its arguments: run_dir, stage, kind, config, resumed; take only the ones you use); "
        "did you mean 'stage'? (at "
    ), record.error
    assert "test_plugin_author.py:" in record.error and "\n" not in record.error


def test_an_entry_point_naming_a_plugin_class_instead_of_an_instance_says_so() -> None:
    class Plugin:
        @hookimpl
        def xfer_tasks(self) -> list:
            return [ComponentSpec("task", "author/t", "xfer.core.toy.tasks:ToyPosTask", "1")]

    record = make_host().add_object(Plugin, "author")  # what `author = "pkg.mod:Plugin"` loads
    assert record.error is not None
    assert "whose hooks xfer_tasks are instance methods: point the entry point at an instance" in record.error

    class Static:  # a class whose hooks need no instance is a valid plugin, as pluggy allows
        @staticmethod
        @hookimpl
        def xfer_tasks() -> list:
            return [ComponentSpec("task", "static/t", "xfer.core.toy.tasks:ToyPosTask", "1")]

    assert make_host().add_object(Static, "static").error is None


@dataclasses.dataclass
class _Trials:
    trials: int = knob(1, "Seeds.")
    label: str = knob("x", "A label.")


@pytest.mark.parametrize(
    ("growable", "message"),
    [
        (
            ("trails",),
            r"config: growable key 'trails' of the spec is not a field of the config; did you mean 'trials'\?",
        ),
        (("label",), r"config field 'label': is declared growable by the spec, but only an `int` field can grow"),
    ],
)
def test_a_growable_key_that_cannot_grow_is_refused(growable: tuple[str, ...], message: str) -> None:
    class Plugin:
        @hookimpl
        def xfer_stages(self) -> list:
            return [ComponentSpec("stage", "author.fit", "xfer.testing.bow:run_fit", "1", _Trials, growable=growable)]

    host = make_host()
    host.add_object(Plugin(), "author")
    with pytest.raises(PluginError, match=message):
        host.config_class("stage", "author.fit")


def test_a_growable_int_field_is_fine() -> None:
    class Plugin:
        @hookimpl
        def xfer_stages(self) -> list:
            return [
                ComponentSpec("stage", "author.fit", "xfer.testing.bow:run_fit", "1", _Trials, growable=("trials",))
            ]

    host = make_host()
    host.add_object(Plugin(), "author")
    assert host.config_class("stage", "author.fit") is _Trials


def test_kit_says_when_the_kill_never_came(tmp_path: Path) -> None:
    short = AGREEMENT.replace("steps: 2", "steps: 2, log_every: 1")
    checks = _kit(("task", "toy/agreement"), "stages.fit.task", short)
    path = checks.recipe_file(tmp_path / "recipe")  # type: ignore[attr-defined]
    with pytest.raises(pytest.fail.Exception, match=r"the run finished without reaching a logged training step 5"):
        checks.test_kill_and_resume((path, {}), tmp_path)  # type: ignore[attr-defined]


def test_an_entry_point_name_that_cannot_be_a_namespace_says_so_instead_of_suggesting_an_invalid_name() -> None:
    class Plugin:
        @hookimpl
        def xfer_tasks(self) -> list:
            return [ComponentSpec("task", "hyph/t", "xfer.core.toy.tasks:ToyPosTask", "1")]

    record = make_host().add_object(Plugin(), "xfer-my-tasks")  # `xfer-my-tasks = "..."` in pyproject
    assert record.error is not None
    assert "namespace 'xfer-my-tasks' (its `xfer` entry point's name) cannot start a component name" in record.error
    assert "e.g. 'my_tasks' in `[project.entry-points.xfer]`" in record.error
    assert "'xfer-my-tasks/t'" not in record.error, "a name ComponentSpec would refuse"

    class Observer:  # no components: any entry point name will do (a logger named `tb-logger`)
        @hookimpl
        def xfer_stage_start(self, stage: str) -> None:
            pass

    assert make_host().add_object(Observer(), "tb-logger").error is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("my command", "h", "pkg.cli:configure", "pkg.cli:run"), r"command name 'my command' must be lower-case"),
        (("mine", "h", "pkg.cli", "pkg.cli:run"), r"command 'mine': configure 'pkg.cli' must be an import path"),
        (("mine", "h", "pkg.cli:configure", "pkg.cli."), r"command 'mine': run 'pkg.cli.' must be an import path"),
    ],
)
def test_a_malformed_command_spec_is_refused_when_built(args: tuple[str, ...], message: str) -> None:
    from xfer.core.specs import CommandSpec

    with pytest.raises(ValueError, match=message):
        CommandSpec(*args)


def test_kit_names_plugin_modules_given_as_a_bare_string() -> None:
    checks = _kit(("task", "lines/cls"), "stages.fit.task", "stages:\n  fit: {kind: testing.fit, task: lines/cls}\n")
    type(checks).plugin_modules = "tests.core.lines_task"  # ("tests.core.lines_task") without its comma
    with pytest.raises(pytest.fail.Exception, match=r"plugin_modules must be a tuple of import paths, got the string"):
        checks.test_registered_with_documented_config()  # type: ignore[attr-defined]


def test_scaffolded_objective_refuses_class_weights_that_do_not_match_the_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("xfer.transformer")
    import importlib

    from xfer.core import UserError
    from xfer.core.scaffold import scaffold_plugin
    from xfer.core.tasks import TaskInfo
    from xfer.transformer.encoder import Encoder, EncoderConfig

    target = scaffold_plugin("scafweights", tmp_path / "xfer-scafweights")
    monkeypatch.syspath_prepend(str(target / "src"))
    module = importlib.import_module("xfer.scafweights.objective")
    encoder = Encoder(
        EncoderConfig(vocab_size=16, embedding_size=8, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=8)
    )
    info = TaskInfo("x/tsv", "classification", ("neg", "pos"), "accuracy")
    with pytest.raises(UserError, match=r"class_weights gives 1 weights, but x/tsv has 2 labels \(neg, pos\)"):
        module.WeightedObjective(
            encoder, info, None, 16, module.WeightedConfig(class_weights=[1.0])
        )  # was a RuntimeError mid-step
    module.WeightedObjective(encoder, info, None, 16, module.WeightedConfig(class_weights=[1.0, 2.0]))

"""A third pass over a plugin author's mistakes: defaults no recipe could give (nested, paths,
references) and namespaces a plugin may not claim, each a PluginError naming the component."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

import pytest

from xfer.core import knob
from xfer.core.config import Input, ObjectiveRef, TaskRef
from xfer.core.errors import PluginError, RecipeError
from xfer.core.hookspecs import hookimpl
from xfer.core.recipes.recipe import load_recipe
from xfer.core.trainer import TrainConfig
from xfer.testing import make_host, write_recipe

from .test_plugin_author2 import _host_with


def _line_of(text: str) -> int:
    """The line of this file that starts (after indentation) with `text`."""
    lines = Path(__file__).read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if line.strip().startswith(text))


# --- defaults in nested config dataclasses ---------------------------------------------------------


@dataclasses.dataclass
class _Schedule:
    warmup: int = knob(-1, "Warm-up steps.", ge=0)
    rate: float = knob(0.5, "A rate.", ge=0, le=1)


@dataclasses.dataclass
class NestedClassConfig:
    schedule: _Schedule = knob(_Schedule(), "A nested section whose own default is out of bounds.")


@dataclasses.dataclass
class NestedInstanceConfig:
    train: TrainConfig = knob(TrainConfig(lr=-0.001), "The instance given as the default sets lr out of bounds.")


@dataclasses.dataclass
class _GoodSchedule:
    warmup: int = knob(0, "Warm-up steps.", ge=0)
    rate: float | None = knob(None, "None is a sentinel, not out of bounds.", ge=0)


@dataclasses.dataclass
class NestedFineConfig:
    train: TrainConfig = knob(TrainConfig(lr=0.01, steps=5), "Within bounds.")
    schedule: _GoodSchedule | None = knob(None, "None: a recipe may give the section.")


def test_a_nested_config_class_default_out_of_its_bounds_is_a_plugin_error() -> None:
    # Only top-level defaults were checked: a recipe leaving `schedule` out (or giving part of it,
    # the default being the base of a partial mapping) ran with warmup -1.
    host, record = _host_with(NestedClassConfig)
    with pytest.raises(PluginError) as caught:
        host.config_class("stage", "author.fit")
    message = str(caught.value)
    assert "stage 'author.fit' from author" in message
    assert "config field 'schedule.warmup': default -1 is out of its knob's bounds: must be at least 0" in message
    assert f"test_plugin_author3.py:{_line_of('warmup: int = knob(-1')}" in message  # `warmup` in the nested class
    assert "rate" not in message
    assert "schedule.warmup" in record.problems["author.fit"]


def test_a_nested_instance_default_out_of_bounds_is_blamed_on_the_field_that_gives_it() -> None:
    host, _ = _host_with(NestedInstanceConfig)
    with pytest.raises(PluginError) as caught:
        host.config_class("stage", "author.fit")
    message = str(caught.value)
    assert "config field 'train': lr: default -0.001 is out of its knob's bounds: must be at least 0" in message
    assert f"test_plugin_author3.py:{_line_of('train: TrainConfig = knob(TrainConfig(lr=-0.001)')}" in message
    assert "train_config.py" not in message


@dataclasses.dataclass
class OptionalNestedConfig:
    schedule: _Schedule | None = knob(None, "A recipe's `schedule: {rate: 0.2}` gets warmup -1.")


def test_an_optional_nested_class_with_a_default_out_of_bounds_is_a_plugin_error() -> None:
    host, _ = _host_with(OptionalNestedConfig)
    with pytest.raises(PluginError, match=r"config field 'schedule.warmup': default -1 is out of its knob's bounds"):
        host.config_class("stage", "author.fit")


def test_nested_defaults_within_bounds_pass() -> None:
    host, record = _host_with(NestedFineConfig)
    assert host.config_class("stage", "author.fit") is NestedFineConfig
    assert record.problems == {}


# --- defaults of the wrong kind for paths and references ----------------------------------------------


@dataclasses.dataclass
class PathDefaultConfig:
    out: Path = knob(5, "Where to write.")  # type: ignore[assignment]


@dataclasses.dataclass
class RefDefaultConfig:
    task: TaskRef = knob("toy/agreement", "The task.")  # type: ignore[assignment]
    objective: ObjectiveRef | None = knob("author.obj", "The objective.")  # type: ignore[assignment]


@dataclasses.dataclass
class InfiniteDefaultConfig:
    limit: float = knob(float("inf"), "No limit by default.", ge=0)


@dataclasses.dataclass
class OptionalLiteralConfig:
    mode: Literal["fast", "slow"] | None = knob("medium", "A choice, or None.")  # type: ignore[assignment]


@dataclasses.dataclass
class IntOrLiteralConfig:
    every: int | Literal["epoch"] | None = knob("epochs", "Steps, or once an epoch.")  # type: ignore[assignment]


@dataclasses.dataclass
class ClassAsDefaultConfig:
    train: TrainConfig = knob(TrainConfig, "The parentheses forgotten.")


@dataclasses.dataclass
class GoodDefaultsConfig:
    out: Path = knob(Path("out"), "A Path default.")
    name: Path | None = knob("data.txt", "A str default for a path is read as a path.")
    task: TaskRef = knob(TaskRef("toy/agreement"), "A reference default.")
    objective: ObjectiveRef | None = knob(None, "None as a sentinel.")
    init: Input | None = knob(None, "None as a sentinel.")
    mode: Literal["fast", "slow"] | None = knob("slow", "A choice, or None.")
    every: int | Literal["epoch"] | None = knob(2.0, "An integral float is an int, as in a recipe.")
    unbounded: float = knob(float("inf"), "Without bounds, inf is a value a recipe may give (`.inf`).")


@pytest.mark.parametrize(
    ("config", "field", "expected"),
    [
        (PathDefaultConfig, "out", "default 5 is not a path (int); give a str or Path"),
        # a recipe's `.inf` for a bounded knob is refused, so recipe.resolved.yaml with it did not validate
        # only a bare Literal was checked: in a union its default ran unnoticed, and the resolved recipe failed
        (
            OptionalLiteralConfig,
            "mode",
            "default 'medium' does not fit its type: 'medium' is not one of 'fast', 'slow'",
        ),
        (
            IntOrLiteralConfig,
            "every",
            "default 'epochs' does not fit its type: 'epochs' is not one of 'epoch' nor an int",
        ),
        # the class was handed to the stage; writing the resolved recipe failed with yaml's RepresenterError
        (
            ClassAsDefaultConfig,
            "train",
            "default is the class TrainConfig itself, not a value: write knob(TrainConfig(), ...)",
        ),
        (InfiniteDefaultConfig, "limit", "default inf is not a finite number, which a bounded knob refuses"),
        (RefDefaultConfig, "task", "default 'toy/agreement' is not a TaskRef (str); give TaskRef('toy/agreement')"),
        (RefDefaultConfig, "objective", "default 'author.obj' is not an ObjectiveRef (str); give ObjectiveRef("),
    ],
)
def test_a_path_or_reference_default_of_the_wrong_kind_is_a_plugin_error(
    config: type, field: str, expected: str
) -> None:
    # Passed every check: a recipe leaving the field out handed the stage 5 or a bare str, and it
    # failed deep inside (`'str' object has no attribute 'name'`), while recipe.resolved.yaml no
    # longer validated.
    host, _ = _host_with(config)
    with pytest.raises(PluginError) as caught:
        host.config_class("stage", "author.fit")
    assert f"config field {field!r}: {expected}" in str(caught.value)


def test_path_and_reference_defaults_of_the_right_kind_pass() -> None:
    host, record = _host_with(GoodDefaultsConfig)
    assert host.config_class("stage", "author.fit") is GoodDefaultsConfig
    assert record.problems == {}


def test_a_reference_default_given_as_a_string_is_a_recipe_error_not_a_crash_in_the_stage(tmp_path: Path) -> None:
    from xfer.testing.bow import FitConfig

    @dataclasses.dataclass
    class Fit(FitConfig):
        task: TaskRef = knob("toy/agreement", "The task.")  # type: ignore[assignment]

    host, _ = _host_with(Fit)
    recipe = write_recipe(tmp_path, "stages:\n  fit:\n    kind: author.fit\n")
    with pytest.raises(RecipeError) as invalid:
        load_recipe(recipe, [], host)
    assert f"{recipe.resolve()}:3:" in str(invalid.value)
    assert "config field 'task': default 'toy/agreement' is not a TaskRef" in str(invalid.value)


# --- namespaces a plugin may not claim ----------------------------------------------------------------


def _module(directory: Path, name: str, body: str) -> None:
    (directory / f"{name}.py").write_text("from xfer.core import ComponentSpec, hookimpl\n\n" + body)


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import uuid

    directory = tmp_path / f"mods_{uuid.uuid4().hex[:8]}"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.delenv("XFER_PLUGIN_MODULES", raising=False)
    return directory


_CORE_METRIC = """
XFER_NAMESPACE = "core"


@hookimpl
def xfer_metrics():
    return [ComponentSpec("metric", "core.accuracy", "{module}:always", "1"), ComponentSpec("metric", "core.extra", "{module}:always", "1")]


def always(golds, predictions):
    return 100.0
"""


def test_a_module_plugin_claiming_a_builtin_namespace_is_refused_and_the_builtin_keeps_working(modules: Path) -> None:
    # It made every core.* component unusable ("claimed by two distributions, (module) - and xfer-core
    # ...; uninstall one of them"): a recipe using core.accuracy, or a typo in the module's namespace, broke.
    name = f"intruder_{modules.name}"
    _module(modules, name, _CORE_METRIC.format(module=name))
    host = make_host([name])
    record = next(r for r in host.plugins.values() if r.module == name)
    assert record.error is not None
    assert "namespace 'core' belongs to xfer-core's built-in plugin (xfer.core.builtin)" in record.error
    assert f"module {name} cannot register in it" in record.error
    assert "XFER_NAMESPACE" in record.error
    assert host.get("metric", "core.accuracy").target == "xfer.core.metrics:accuracy", "the built-in, not the claim"
    assert host.get("metric", "core.mcc").provider.startswith("core (xfer-core")
    assert host.plugins["core"].module == "xfer.core.builtin" and host.plugins["core"].error is None
    assert host.namespace_conflicts == {} and host.conflicts == {}
    with pytest.raises(PluginError) as caught:
        host.get("metric", "core.extra")
    assert "unknown metric 'core.extra'" in str(caught.value), "not 'should come from the refused plugin'"


def test_a_distribution_claiming_a_builtin_namespace_is_refused_with_the_entry_point_to_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xfer.core.plugins import PluginHost

    site = tmp_path / "site"
    info = site / "xfer_toyish-0.2.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xfer-toyish\nVersion: 0.2\n")
    (info / "entry_points.txt").write_text("[xfer]\ntoy = toyish_plugin_h112\n")
    _module(site, "toyish_plugin_h112", "")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("XFER_PLUGIN_MODULES", raising=False)
    host = PluginHost(autoload=True, allow=["toy"])
    refused = [r for r in host.plugins.values() if r.distribution == "xfer-toyish"]
    assert len(refused) == 1 and refused[0].error is not None
    assert "namespace 'toy' belongs to xfer-core's built-in plugin" in refused[0].error
    assert "xfer-toyish 0.2 cannot register in it: rename the `xfer` entry point of xfer-toyish" in refused[0].error
    assert host.get("task", "toy/agreement").provider.startswith("toy (xfer-core"), "toy tasks still usable"


_MINE = """
XFER_NAMESPACE = "mine"


@hookimpl
def xfer_metrics():
    return [ComponentSpec("metric", "mine.{metric}", "xfer.core.metrics:accuracy", "1")]
"""


@pytest.mark.parametrize("second", ["acc", "other"])
def test_two_plugin_modules_claiming_one_namespace_are_named_not_merged(modules: Path, second: str) -> None:
    # The second module's components joined the first's namespace unnoticed (`mine.other`), or the
    # clash read "registered twice, by mine ((module) -) and mine ((module) -)", naming neither module.
    first, other = f"first_{modules.name}", f"second_{modules.name}"
    _module(modules, first, _MINE.format(metric="acc"))
    _module(modules, other, _MINE.format(metric=second))
    host = make_host([first, other])
    assert sorted(r.module for r in host.plugins.values() if r.name == "mine") == [first, other], "both listed"
    assert host.namespace_conflicts == {"mine": [f"module {first}", f"module {other}"]}
    for metric in {"acc", second}:
        with pytest.raises(PluginError) as caught:
            host.get("metric", f"mine.{metric}")
        message = str(caught.value)
        assert f"module {first} and module {other}" in message
        assert f"drop {first} or {other} from XFER_PLUGIN_MODULES" in message
        assert "(module) -" not in message and "uninstall" not in message


def test_a_failed_plugin_module_named_like_an_installed_plugin_does_not_replace_its_record(modules: Path) -> None:
    package = modules / f"pkg_{modules.name}" / "toy"  # `pkg_....toy.plugin`: namespace `toy`
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text("raise RuntimeError('broken at import')\n")
    module = f"pkg_{modules.name}.toy.plugin"
    host = make_host([module])
    assert host.plugins["toy"].module == "xfer.core.toy.plugin" and host.plugins["toy"].error is None
    failed = [r for r in host.plugins.values() if r.module == module]
    assert len(failed) == 1 and "broken at import" in (failed[0].error or "")
    with pytest.raises(PluginError, match=r"unknown task 'toy/agreemnt'; did you mean 'toy/agreement'"):
        host.get("task", "toy/agreemnt")


# --- lifecycle observers get their own copies ---------------------------------------------------------


class _Dashboard:
    """A logger that namespaces keys in place, as dashboards want them (`dev/accuracy`)."""

    def __init__(self) -> None:
        self.seen: list[dict] = []

    @hookimpl
    def xfer_metrics_logged(self, split: str, metrics: dict, tags: dict) -> None:
        for key in list(metrics):
            metrics[f"{split}/{key}"] = metrics.pop(key)
        tags.clear()
        self.seen.append(dict(metrics))

    @hookimpl
    def xfer_stage_start(self, config: object) -> None:
        config.dim = 1  # type: ignore[attr-defined]


class _Second:
    def __init__(self) -> None:
        self.seen: list[tuple[dict, dict]] = []

    @hookimpl
    def xfer_metrics_logged(self, metrics: dict, tags: dict) -> None:
        self.seen.append((dict(metrics), dict(tags)))


def test_an_observer_editing_its_arguments_in_place_changes_nothing_for_the_caller_or_other_observers() -> None:
    from xfer.testing.bow import FitConfig

    host = make_host()
    dashboard, second = _Dashboard(), _Second()
    host.add_object(dashboard, "dash")
    host.add_object(second, "second")
    metrics, tags = {"accuracy": 75.0}, {"task": "toy/agreement"}
    host.notify("xfer_metrics_logged", run_dir=Path("."), stage="s", step=1, split="dev", metrics=metrics, tags=tags)
    assert metrics == {"accuracy": 75.0} and tags == {"task": "toy/agreement"}, "the caller's dicts"
    assert dashboard.seen == [{"dev/accuracy": 75.0}]
    assert second.seen == [({"accuracy": 75.0}, {"task": "toy/agreement"})], "whatever the order of observers"
    config = FitConfig(task=TaskRef("toy/agreement"))
    host.notify("xfer_stage_start", run_dir=Path("."), stage="s", kind="testing.fit", config=config, resumed=False)
    assert config.dim == 32, "the stage's own config"


def test_a_logger_renaming_metric_keys_in_place_does_not_fail_the_stage(tmp_path: Path) -> None:
    # The trainer handed observers the dict it then read the main metric from: KeyError: 'accuracy',
    # a bare traceback after training.
    from xfer.testing.helpers import run_recipe_file

    host = make_host(["xfer.testing.plugin"])
    dashboard = _Dashboard()
    host.add_object(dashboard, "dash")
    recipe = write_recipe(
        tmp_path,
        "stages:\n  fit:\n    kind: testing.fit\n    task: toy/agreement\n"
        "    train: {steps: 2, batch_size: 4, eval_every: 2, log_every: 2, checkpoint_every: 2}\n",
    )
    result = run_recipe_file(recipe, tmp_path / "run", host)
    assert [s.status for s in result.stages] == ["completed"]
    assert any("dev/accuracy" in seen for seen in dashboard.seen)
    assert '"split": "dev", "accuracy"' in (tmp_path / "run" / "fit" / "metrics.jsonl").read_text()


# --- the scaffold's objective -------------------------------------------------------------------------


@pytest.fixture
def scaffolded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    import uuid

    from xfer.core.scaffold import scaffold_plugin

    pytest.importorskip("xfer.transformer")
    name = f"scaf{uuid.uuid4().hex[:8]}"
    target = scaffold_plugin(name, tmp_path / f"xfer-{name}")
    monkeypatch.syspath_prepend(str(target / "src"))
    return name


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([-1.0, 2.0], r"class_weights: weights must be finite and >= 0, got \[-1.0, 2.0\]"),
        ([1.0, float("nan")], r"class_weights: weights must be finite and >= 0"),
        ([0.0, 0.0], r"class_weights: at least one weight must be > 0"),
    ],
)
def test_scaffolded_objective_refuses_class_weights_no_loss_can_use(
    scaffolded: str, weights: list[float], message: str
) -> None:
    # A negative weight trained silently (rewarding mistakes on that label); all zeros made the
    # first loss NaN, reported as "a bug in the objective".
    import importlib

    from xfer.core import FieldError

    module = importlib.import_module(f"xfer.{scaffolded}.objective")
    with pytest.raises(FieldError, match=message):
        module.WeightedConfig(class_weights=weights)
    assert module.WeightedConfig(class_weights=[0.0, 2.0]).class_weights == [0.0, 2.0]
    assert module.WeightedConfig().class_weights == []


def test_scaffolded_objective_negative_class_weight_is_a_recipe_error_at_its_line(
    scaffolded: str, tmp_path: Path
) -> None:
    from xfer.transformer.testing import tiny_finetune_recipe

    text = tiny_finetune_recipe(
        f"{{name: {scaffolded}/tsv, labels: [neg, pos], train_file: train.tsv}}",
        objective=f"{{name: {scaffolded}.weighted, class_weights: [1.0, -2.0]}}",
        steps=2,
    )
    (tmp_path / "train.tsv").write_text("a good film\tpos\n")
    recipe = write_recipe(tmp_path, text)
    with pytest.raises(RecipeError) as invalid:
        load_recipe(recipe, [], make_host([f"xfer.{scaffolded}.plugin", "xfer.transformer.plugin"]))
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "class_weights" in row)
    assert f"{recipe.resolve()}:{line}:" in str(invalid.value)
    assert "weights must be finite and >= 0" in str(invalid.value)


# --- the worked example's task --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"text": 42, "label": "pos"}', r"train.jsonl:2: text: expected a string, got int"),
        ('{"text": true, "label": "pos"}', r"train.jsonl:2: text: expected a string, got a JSON boolean"),
        ('{"text": "ok", "pair": 7, "label": "pos"}', r"train.jsonl:2: pair: expected a string, got int"),
        (
            '{"text": "ok", "pair": "x", "id": true, "label": "pos"}',
            r"train.jsonl:2: id: expected a string, got a JSON boolean",
        ),
    ],
)
def test_example_jsonl_task_names_the_line_of_a_text_that_is_not_a_string(
    tmp_path: Path, line: str, message: str
) -> None:
    # A number as the text passed the reader and failed in the pre-flight as the task's own bug
    # ("example 'train-2' has text_a int / text_b NoneType, not strings; plugin bug").
    pytest.importorskip("xfer.example")
    from xfer.core import DataError
    from xfer.example.jsonl_task import JsonlConfig, JsonlTask

    train = tmp_path / "train.jsonl"
    train.write_text('{"text": "a good film", "pair": "yes", "id": 1, "label": "pos"}\n' + line + "\n")
    config = JsonlConfig(labels=["neg", "pos"], train_file=train, pair_field="pair", id_field="id")
    task = JsonlTask("example/jsonl", config)
    with pytest.raises(DataError, match=message):
        task.examples("train")
    train.write_text('{"text": "a good film", "pair": "yes", "id": 1, "label": "pos"}\n')
    assert [(e.id, e.text_a) for e in task.examples("train")] == [("1", "a good film")], "an integer id is fine"


class _Quitter:
    @hookimpl
    def xfer_stage_start(self, stage: str) -> None:
        raise SystemExit(f"dashboard unreachable for {stage}")  # what `sys.exit(...)` in a logger does


def test_an_observer_calling_sys_exit_is_a_warning_not_the_end_of_the_run() -> None:
    # Exceptions in observers were warnings, but SystemExit is not an Exception: it ended `xfer run`.
    class Recorder:
        def __init__(self) -> None:
            self.stages: list[str] = []

        @hookimpl
        def xfer_stage_start(self, stage: str) -> None:
            self.stages.append(stage)

    host = make_host()
    recorder = Recorder()
    host.add_object(_Quitter(), "quitter")
    host.add_object(recorder, "recorder")
    with pytest.warns(
        UserWarning, match=r"plugin 'quitter': xfer_stage_start failed: SystemExit\('dashboard unreachable"
    ):
        host.notify("xfer_stage_start", run_dir=Path("."), stage="fit", kind="testing.fit", config=None, resumed=False)
    assert recorder.stages == ["fit"], "the other observers still see the event"


# --- XFER_PLUGIN_MODULES given an entry point's `module:object` --------------------------------------

_OBJECT_PLUGIN = """
class Plugin:
    @hookimpl
    def xfer_metrics(self):
        return [ComponentSpec("metric", "{ns}.acc", "xfer.core.metrics:accuracy", "1")]


plugin = Plugin()
"""


def test_a_plugin_module_path_naming_an_object_registers_that_object(modules: Path) -> None:
    # The entry point's value copied into XFER_PLUGIN_MODULES read "No module named 'pkg.mod:plugin'
    # (at <frozen importlib._bootstrap>:1140)", under the namespace 'mod:plugin'.
    name = f"objplug_{modules.name}"
    _module(modules, name, _OBJECT_PLUGIN.format(ns=name))
    host = make_host([f"{name}:plugin", f"{name}:plugn"])
    good = next(r for r in host.plugins.values() if r.module == f"{name}:plugin")
    assert good.error is None and good.name == name
    assert host.get("metric", f"{name}.acc").target == "xfer.core.metrics:accuracy"
    typo = next(r for r in host.plugins.values() if r.module == f"{name}:plugn")
    assert typo.error is not None and "frozen importlib" not in typo.error
    assert f"has no attribute 'plugn'; did you mean 'plugin'? (plugin path '{name}:plugn'" in typo.error
    assert "XFER_PLUGIN_MODULES" in typo.error


def test_xfer_plugins_names_two_modules_on_one_namespace_and_what_to_drop(
    modules: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The listing still said "registered by mine ((module) -) and mine ((module) -)" and "uninstall
    one" (xfer-core?) for two XFER_PLUGIN_MODULES modules, where `get` names them."""
    from xfer.core import cli
    from xfer.core.plugins import set_default_host

    first, other = f"first_{modules.name}", f"second_{modules.name}"
    _module(modules, first, _MINE.format(metric="acc"))
    _module(modules, other, _MINE.format(metric="acc"))
    monkeypatch.setenv("XFER_PLUGIN_MODULES", f"{first},{other}")
    set_default_host(None)
    try:
        cli.main(["plugins"])
    finally:
        set_default_host(None)
    out = capsys.readouterr().out
    assert f"CONFLICT: metric 'mine.acc' is registered twice, by module {first} and module {other}" in out
    assert f"CONFLICT: namespace 'mine' claimed by module {first} and module {other}" in out
    assert f"drop {first} or {other} from XFER_PLUGIN_MODULES" in out
    assert "(module) -) and" not in out and "uninstall one" not in out

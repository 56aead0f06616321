"""The plugin authors' kit (xfer.testing) refuses what `xfer run` refuses, and says what to fix."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from xfer.core.errors import RunDirError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import PreflightError
from xfer.testing import make_host, run_cli, run_recipe_file, write_recipe

from .lines_task import GOOD_LINES

TWO_STAGES = """\
name: kit
stages:
  first:
    kind: testing.fit
    task: {name: lines/cls, train_file: first-train.tsv, dev_file: first-dev.tsv}
    train: {steps: 2, batch_size: 8}
  second:
    kind: testing.fit
    init: first.model
    task: {name: lines/cls, train_file: second-train.tsv, dev_file: second-dev.tsv}
    train: {steps: 2, batch_size: 8}
"""


def _two_stages(directory: Path, second_dev: str = "broken line without a tab\n") -> Path:
    for name in ("first-train", "first-dev", "second-train"):
        (directory / f"{name}.tsv").write_text(GOOD_LINES)
    (directory / "second-dev.tsv").write_text(second_dev)
    return write_recipe(directory, TWO_STAGES)


def test_run_recipe_file_reads_every_stage_before_the_first_trains(tmp_path: Path, lines_host) -> None:
    """`xfer run` refuses this recipe before anything trains; the kit trained the first stage and then
    failed in the second (or, with the bad split unread by the stage, passed)."""
    path = _two_stages(tmp_path)
    with pytest.raises(PreflightError, match=r"second-dev\.tsv:1: expected text<TAB>label \(stage 'second'"):
        run_recipe_file(path, tmp_path / "run", lines_host)
    assert not (tmp_path / "run" / "first" / "stage.json").exists(), "the first stage must not have trained"


def test_run_recipe_file_without_preflight_runs_the_stage_checks(tmp_path: Path, lines_host) -> None:
    """`preflight=False` is the way to test what a stage itself does past the pre-flight."""
    path = _two_stages(tmp_path)
    with pytest.raises(Exception, match=r"second-dev\.tsv:1") as caught:
        run_recipe_file(path, tmp_path / "run", lines_host, preflight=False)
    assert not isinstance(caught.value, PreflightError)
    assert (tmp_path / "run" / "first" / "stage.json").exists()


def test_run_recipe_file_checks_only_the_selected_stages(tmp_path: Path, lines_host) -> None:
    """As `xfer run --only first`: the broken data of a stage not run is not read."""
    path = _two_stages(tmp_path)
    result = run_recipe_file(path, tmp_path / "run", lines_host, only={"first"})
    assert [s.name for s in result.stages if s.status == "completed"] == ["first"]


def test_xfer_run_fixture_makes_the_preflight(xfer_run, tmp_path: Path, lines_host) -> None:
    _two_stages(tmp_path)
    with pytest.raises(PreflightError, match=r"second-dev\.tsv:1"):
        xfer_run(TWO_STAGES, lines_host)
    assert not (tmp_path / "run" / "first" / "stage.json").exists()


def test_run_recipe_file_refuses_a_foreign_folder_before_reading_data(tmp_path: Path, lines_host) -> None:
    """`xfer run` checks the run directory before the (slow) data check: the same refusal comes first here."""
    path = _two_stages(tmp_path)
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not a run\n")
    with pytest.raises(RunDirError):
        run_recipe_file(path, foreign, lines_host)


_TASK_PLUGIN = """
from dataclasses import dataclass

import torch

from xfer.core.config import knob
from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec
from xfer.core.tasks import SentenceExample, Task

XFER_NAMESPACE = "{ns}"
MODE = "{mode}"


@dataclass
class Config:
    size: int = knob(24, "How many examples per split.")
    metrics: list[str] = knob(["accuracy"], "Metrics to report (names; a namespaced one is a metric component).")
    model: str = knob("", "A model component's name, read by nothing (a string-valued place to name one).")


class Words(Task):
    type = "classification"
    main_metric = "accuracy"

    @property
    def labels(self):
        return ("a", "b")

    def examples(self, split):
        return [SentenceExample(f"{{split}}-{{i}}", f"w{{i % 2}} x", label="ab"[i % 2]) for i in range(self.config.size)]

    def evaluate(self, examples, predictions):
        right = sum(predictions[e.id] == e.label for e in examples)
        if MODE == "tensor":  # a one-number tensor, as a torch-computed metric comes
            return {{"accuracy": torch.tensor(100.0 * right / len(examples))}}
        return {{"accuracy": 100.0 * right / len(examples)}}

    def write_predictions(self, directory, split, examples, predictions):
        written = super().write_predictions(directory, split, examples, predictions)
        return None if MODE == "no_return" else written


def kappa(golds, predictions):
    return 100.0 * sum(g == p for g, p in zip(golds, predictions)) / max(len(golds), 1)


@hookimpl
def xfer_tasks():
    return [ComponentSpec("task", "{ns}/words", f"{{__name__}}:Words", "1", f"{{__name__}}:Config", "Words.")]


@hookimpl
def xfer_metrics():
    return [ComponentSpec("metric", "{ns}.kappa", f"{{__name__}}:kappa", "1", None, "Agreement.")]
"""


def _task_kit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, **attrs: object) -> object:
    """A conformance class (instance) for a task plugin written to `tmp_path`, in one of its `mode`s."""
    from xfer.testing import ComponentConformance

    ns = f"kit{uuid.uuid4().hex[:8]}"
    module = f"{ns}_plugin"
    (tmp_path / "site").mkdir(exist_ok=True)
    (tmp_path / "site" / f"{module}.py").write_text(_TASK_PLUGIN.format(ns=ns, mode=mode))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    recipe = (
        "stages:\n  fit:\n    kind: testing.fit\n"
        f"    task: {{name: {ns}/words, size: 24}}\n    train: {{steps: 2, batch_size: 8}}\n"
    )
    base = {
        "component": ("task", f"{ns}/words"),
        "config_path": "stages.fit.task",
        "recipe": recipe,
        "autoload": False,
        "plugin_modules": (module,),
    }
    kit = type("Checks", (ComponentConformance,), {**base, **attrs})()
    kit.ns = ns  # type: ignore[attr-defined]
    return kit


def test_task_check_takes_a_one_number_tensor_metric_as_a_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run turns a one-number tensor (or numpy scalar) among the metrics into its number
    (`TaskEvaluator.checked`) and trains; the kit failed the task: "it must hold a number"."""
    kit = _task_kit(tmp_path, monkeypatch, "tensor")
    kit.test_task_scores_and_writes_gold_predictions(tmp_path / "check")  # type: ignore[attr-defined]
    kit.test_one_step_runs(tmp_path / "run")  # type: ignore[attr-defined]  # what `xfer run` accepts


def test_task_check_names_a_write_predictions_that_returns_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`write_predictions` returning None failed the kit with a bare TypeError from `Path(None)`."""
    kit = _task_kit(tmp_path, monkeypatch, "no_return")
    with pytest.raises(
        AssertionError, match=r"write_predictions\(\) must return the file it wrote in .* returned None"
    ):
        kit.test_task_scores_and_writes_gold_predictions(tmp_path / "check")  # type: ignore[attr-defined]


@pytest.mark.parametrize("where", ["stages.fit.task.metrics", "stages.fit.task.metrics.1"])
def test_unknown_key_check_skips_a_metric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A metric has no config: with `config_path` at the `metrics` list the key was set on the list (a bare
    TypeError); at the metric's name, on a mapping made around it, and the recipe's "expected a string"
    failed the metric as "unknown key not reported"."""
    kit = _task_kit(tmp_path, monkeypatch, "plain")
    ns = kit.ns  # type: ignore[attr-defined]
    kit.component = ("metric", f"{ns}.kappa")  # type: ignore[attr-defined]
    kit.config_path = where  # type: ignore[attr-defined]
    kit.recipe = kit.recipe.replace("size: 24}", f"size: 24, metrics: [accuracy, {ns}.kappa]}}")  # type: ignore[attr-defined]
    kit.test_recipe_uses_the_component()  # type: ignore[attr-defined]
    load_recipe(kit.recipe_file(tmp_path / "valid"), host=kit.host())  # type: ignore[attr-defined]  # a valid recipe
    with pytest.raises(pytest.skip.Exception, match="a metric has no config"):
        kit.test_unknown_key_reported_with_line(tmp_path / "check")  # type: ignore[attr-defined]


def test_unknown_key_check_names_a_config_path_that_is_no_mapping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model named by a string (`config_path` at `model: tiny`) is no mapping to add a key to: say so."""
    kit = _task_kit(tmp_path, monkeypatch, "plain")
    kit.component = ("model", "fake.model")  # type: ignore[attr-defined]
    kit.config_path = "stages.fit.task.model"  # type: ignore[attr-defined]
    kit.recipe = kit.recipe.replace("size: 24}", "size: 24, model: fake.model}")  # type: ignore[attr-defined]
    load_recipe(kit.recipe_file(tmp_path / "valid"), host=kit.host())  # type: ignore[attr-defined]  # a valid recipe
    with pytest.raises(
        pytest.fail.Exception, match=r"config_path 'stages.fit.task.model' leads to 'fake.model': .*mapping"
    ):
        kit.test_unknown_key_reported_with_line(tmp_path / "check")  # type: ignore[attr-defined]


def test_run_cli_passes_help_to_xfer(capsys: pytest.CaptureFixture[str]) -> None:
    """`run_cli(["run", "--help"])` (the fault wrapper, in-process here) printed the wrapper's own usage:
    its parser took `-h` anywhere on the command line, so a plugin author's check of `xfer`'s help failed."""
    from xfer.testing import faults

    with pytest.raises(SystemExit) as stopped:
        faults.main(["run", "--help"])
    assert stopped.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: xfer run") and "--run-dir" in out, out[:300]


def test_fault_options_are_only_the_leading_ones() -> None:
    """An abbreviation of a fault option later on the command line (`--term` of a plugin command) was
    taken by the wrapper as `--term-at-step` and never reached `xfer`."""
    from xfer.testing.faults import split_fault_options

    argv = ["--kill-at-step", "3", "--crash-in-checkpoint=2", "mine", "--term", "x", "--kill-at-step", "1"]
    assert split_fault_options(argv) == (argv[:3], argv[3:])


def test_run_checks_name_the_stage_attribute_when_the_recipe_has_no_such_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recipe whose stage is not named `fit` failed with "override matches no stage 'fit'" (and the
    determinism check with "no safetensors weights under .../fit/outputs"): say to set `stage`."""
    kit = _task_kit(tmp_path, monkeypatch, "plain")
    kit.recipe = kit.recipe.replace("  fit:", "  train:")  # type: ignore[attr-defined]
    kit.config_path = "stages.train.task"  # type: ignore[attr-defined]
    with pytest.raises(pytest.fail.Exception, match=r"does not have \(its stages: train\): .*set stage ="):
        kit.test_one_step_runs(tmp_path / "one")  # type: ignore[attr-defined]
    kit.stage = "train"  # type: ignore[attr-defined]
    kit.test_one_step_runs(tmp_path / "two")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda: make_host("xfer.testing.plugin"), "make_host(modules=...)"),
        (lambda: make_host(["xfer.testing.plugin"], allow="toy"), "make_host(allow=...)"),
        (lambda: run_cli(["plugins"], plugin_modules="xfer.testing.plugin"), "run_cli(plugin_modules=...)"),
    ],
)
def test_helpers_refuse_a_bare_string_for_a_list_of_names(call, what: str) -> None:
    """`make_host("my.plugin")` loaded "m", "y", "." ... as plugins, and the recipe then said the plugin's
    namespace was not installed ("pip install ..."), hiding the forgotten brackets."""
    with pytest.raises(ValueError, match=rf"{re.escape(what)} must be a list of names, got the string '[a-z.]+'"):
        call()
    assert make_host(["xfer.testing.plugin"]).get("stage", "testing.fit")


@pytest.mark.parametrize("component", ["{ns}/words", ("tasks", "{ns}/words")])
def test_a_malformed_component_attribute_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, component: object
) -> None:
    """A bare name failed every check with "too many values to unpack"; a kind typo (`"tasks"`) passed the
    recipe check and failed the others with "plugin ... provides: no taskss"."""
    kit = _task_kit(tmp_path, monkeypatch, "plain")
    ns = kit.ns  # type: ignore[attr-defined]
    kit.component = (  # type: ignore[attr-defined]
        component.format(ns=ns) if isinstance(component, str) else (component[0], component[1].format(ns=ns))
    )
    said = r"Checks\.component must be a \(kind, name\) pair, the kind one of task, model, objective, stage, metric"
    for check in (kit.test_recipe_uses_the_component, kit.test_registered_with_documented_config):  # type: ignore[attr-defined]
        with pytest.raises(pytest.fail.Exception, match=said):
            check()

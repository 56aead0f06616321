"""`ComponentConformance`: what every component must do, as a reusable pytest class.

Subclass it in your plugin's tests and describe a tiny recipe that uses your component:

    class TestSentimentTask(ComponentConformance):
        component = ("task", "example/sentiment")
        plugin_modules = ()          # import paths of plugins that are not installed
        config_path = "stages.fit.task"   # where the component's config mapping sits
        recipe = '''
        stages:
          fit:
            kind: testing.fit
            task: {name: example/sentiment, size: 200}
            train: {steps: 8, batch_size: 8, log_every: 1, checkpoint_every: 3}
        '''

The checks: the recipe uses the component at `config_path` (a recipe that names another
component there would let every other check pass without it); the component is registered
with a documented config (nested sections' fields too); the resolved recipe round-trips through YAML;
an unknown key in the component's config is reported at its line; a task scores its own gold labels,
given as predictions, in percent without changing what it was handed, and writes them inside the
folder it is given; one training step runs; two runs give bitwise-identical weights; and a run killed
with SIGKILL at `kill_at_step`, then resumed, ends with the same weights as an
uninterrupted one. Keep `log_every: 1` so the kill lands exactly.

A stage that does not train (it writes files: a corpus, a report, predictions of a given
model) sets `trains = False`: "one step runs" becomes "the recipe runs and the stage writes
files under its outputs", determinism compares those files byte for byte with a second run as
`xfer run` in a fresh interpreter (another string-hash salt: a set written in iteration order is
caught), and the kill-and-resume check is skipped (there are no checkpoints to resume from).

The kill-and-resume check costs two fresh interpreters (~5-10 s). A family of components that
share one code path (e.g. GLUE tasks with the same file layout) may set
`resume_covered_by = "<the class that checks it>"` on all but one member: the check is then
skipped with that reason, visibly, instead of repeated.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from xfer.core.errors import RecipeError, UserError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.results import plain_number
from xfer.core.specs import KINDS
from xfer.testing.helpers import (
    assert_same_weights,
    make_host,
    output_files,
    output_tensors,
    run_cli,
    run_recipe_file,
    write_recipe,
)

TESTING_PLUGIN = "xfer.testing.plugin"


class ComponentConformance:
    component: ClassVar[tuple[str, str]]
    recipe: ClassVar[str]
    config_path: ClassVar[str]
    stage: ClassVar[str] = "fit"
    plugin_modules: ClassVar[tuple[str, ...]] = ()
    autoload: ClassVar[bool] = True
    kill_at_step: ClassVar[int] = 5
    resume_covered_by: ClassVar[str | None] = None
    trains: ClassVar[bool] = True  # False: a stage that writes files without a training loop

    # --- helpers ---------------------------------------------------------------------------

    def modules(self) -> list[str]:
        """The testing plugin and `plugin_modules`. A bare string (`("my.plugin")`, no trailing
        comma) was split into one-letter modules, and the component then reported as coming from no
        installed plugin ("pip install xfer-..."), which hid the typo."""
        if isinstance(self.plugin_modules, str):
            pytest.fail(
                f"{type(self).__name__}.plugin_modules must be a tuple of import paths, got the string "
                f"{self.plugin_modules!r} (write ({self.plugin_modules!r},) with a trailing comma)"
            )
        return [TESTING_PLUGIN, *self.plugin_modules]

    def kind_and_name(self) -> tuple[str, str]:
        """`component`, checked to be a (kind, name) pair of a known kind. A bare name
        (`component = "mytasks/reviews"`) failed every check with "too many values to unpack", and a
        kind typo (`"tasks"`) passed the recipe check and failed the rest with "plugin 'mytasks' provides:
        no taskss"."""
        component = getattr(self, "component", None)
        if (
            isinstance(component, (tuple, list))
            and len(component) == 2
            and all(isinstance(part, str) for part in component)
            and component[0] in KINDS
        ):
            return component[0], component[1]
        pytest.fail(
            f"{type(self).__name__}.component must be a (kind, name) pair, the kind one of {', '.join(KINDS)}: "
            f'got {component!r} (e.g. component = ("task", "mytasks/reviews"))'
        )

    def host(self):
        return make_host(self.modules(), autoload=self.autoload)

    def prepare(self, directory: Path) -> None:
        """Create the data files the recipe refers to (relative paths resolve against `directory`)."""

    def recipe_file(self, directory: Path, text: str | None = None) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        self.prepare(directory)
        return write_recipe(directory, textwrap.dedent(text if text is not None else self.recipe).strip() + "\n")

    # --- checks ----------------------------------------------------------------------------

    def test_registered_with_documented_config(self) -> None:
        host = self.host()
        kind, name = self.kind_and_name()
        spec = host.get(kind, name)
        assert spec.version and spec.summary, f"{name}: give the spec a version and a summary"
        cls = host.config_class(kind, name)
        if cls is not None:
            assert dataclasses.is_dataclass(cls)
            undocumented = _undocumented(cls)
            assert not undocumented, f"{name}: config fields without knob(..., doc): {undocumented}"

    def test_config_round_trip(self, tmp_path: Path) -> None:
        host = self.host()
        first = load_recipe(self.recipe_file(tmp_path / "a"), host=host)
        resolved = first.resolved()
        again = write_recipe(tmp_path / "b", yaml.safe_dump(resolved, sort_keys=False))
        assert load_recipe(again, host=host).resolved() == resolved

    def component_node(self, data: Any) -> tuple[Any, str | int, Any]:
        """(parent, key, value) of `config_path` in the parsed recipe, checked to be the component.

        A `config_path` that leads nowhere failed with a bare KeyError; one that leads to another
        component (a recipe copied from another test, with the task's name not changed) let every
        check pass without the component ever being used. A task or objective must be named right
        at `config_path` (`name` or `{name: ..., ...}`), a stage be its `kind`; a model or metric
        must be named somewhere below it."""
        kind, name = self.kind_and_name()
        where = type(self).__name__
        node: Any = data
        parent: Any = None
        key: str | int = ""
        walked: list[str] = []
        for part in self.config_path.split("."):
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                parent, key = node, int(part)
            elif isinstance(node, dict) and part in node:
                parent, key = node, part
            else:
                here = ".".join(walked) or "the recipe"
                has = (
                    f"keys: {', '.join(map(str, node))}"
                    if isinstance(node, dict)
                    else f"a list of {len(node)}"
                    if isinstance(node, list)
                    else f"the value {node!r}"
                )
                pytest.fail(f"{where}.config_path {self.config_path!r}: {here} has no {part!r} ({has})")
            node = parent[key]
            walked.append(part)
        if kind in ("task", "objective"):
            named = node if isinstance(node, str) else node.get("name") if isinstance(node, dict) else None
            ok = named == name
            expected = f"the {kind} {name!r} (`{name}` or `{{name: {name}, ...}}`)"
        elif kind == "stage":
            named = node.get("kind") if isinstance(node, dict) else None
            ok = named == name
            expected = f"a stage of kind {name!r}"
        else:
            named = sorted(_strings(node))
            ok = name in named
            expected = f"a config naming the {kind} {name!r}"
        if not ok:
            pytest.fail(
                f"{where}: the recipe does not use {kind} {name!r} at config_path {self.config_path!r}: "
                f"expected {expected} there, found {node!r}; every check would test something else"
            )
        return parent, key, node

    def test_recipe_uses_the_component(self) -> None:
        self.component_node(yaml.safe_load(textwrap.dedent(self.recipe)))

    def test_unknown_key_reported_with_line(self, tmp_path: Path) -> None:
        kind, name = self.kind_and_name()
        if kind == "metric":  # recipes only name a metric (`metrics: [accuracy, mytasks.kappa]`)
            pytest.skip(f"a metric has no config of its own for a recipe to misspell a key of ({name!r})")
        data = yaml.safe_load(textwrap.dedent(self.recipe))
        node, last, target = self.component_node(data)
        if isinstance(target, str) and kind in ("task", "objective"):  # `task: name` shorthand -> mapping form
            target = {"name": target}
            node[last] = target
        if not isinstance(target, dict):
            # a model named somewhere below a list or a string: the key was set on a list (a bare TypeError)
            # or on a mapping made up around the name (an "expected a string" error blamed on the component)
            pytest.fail(
                f"{type(self).__name__}.config_path {self.config_path!r} leads to {target!r}: for the "
                f"unknown-key check it must lead to the mapping that holds the {kind}'s config"
            )
        target["conformance_bogus_key"] = 1
        text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
        line = next(i for i, t in enumerate(text.splitlines(), start=1) if "conformance_bogus_key" in t)
        self.prepare(tmp_path)
        path = write_recipe(tmp_path, text)
        with pytest.raises(RecipeError) as caught:
            load_recipe(path, host=self.host())
        hits = [d for d in caught.value.diagnostics if "conformance_bogus_key" in d.message]
        assert hits, f"unknown key not reported; got: {caught.value}"
        assert hits[0].location.line == line and hits[0].location.file == str(path.resolve()), str(hits[0])

    def test_task_scores_and_writes_gold_predictions(self, tmp_path: Path) -> None:
        """A task's `evaluate` and `write_predictions` on its own dev (else train) gold labels as predictions.

        A run checks only that `evaluate` returns a number for `main_metric`: a task scoring fractions
        (0.93 for 93%) ran, its results tables mixed scales with every other task's; an `evaluate` that
        reordered or trimmed the examples or predictions it was handed made the prediction files written
        after it wrong or refused; and a `write_predictions` writing beside its folder (`directory.parent`)
        left files in the stage folder no output names. The model is not needed for any of these."""
        kind, name = self.kind_and_name()
        if kind != "task":
            pytest.skip(f"checks a task; {name!r} is a {kind}")
        host = self.host()
        plan = load_recipe(self.recipe_file(tmp_path / "recipe"), host=host)
        ref = self._typed_node(plan)
        task = host.load("task", ref.name)(ref.key, ref.config)
        where = f"{type(self).__name__} ({name})"
        for split in ("dev", "train"):
            try:
                examples = list(task.examples(split))
            except UserError:
                continue
            if examples and all(_gold(e) is not None for e in examples):
                break
        else:
            pytest.skip(f"{where}: neither its dev nor its train split gives labelled examples to score")
        golds = {e.id: _gold(e) for e in examples}
        handed, predictions = list(examples), copy.deepcopy(golds)
        results = task.evaluate(handed, predictions)
        assert handed == examples and predictions == golds, (
            f"{where}: evaluate() changed the examples or predictions it was handed; the stage writes its "
            "prediction files from the same objects after evaluating: copy them instead"
        )
        from xfer.core.evaluation import main_metric_problem  # imports torch: not at the kit's import

        main = task.info().main_metric
        # as a run reads them (`TaskEvaluator.checked`): a numpy scalar or a one-number tensor is its number;
        # `{"accuracy": torch.tensor(100.0)}` trains and is scored by `xfer run`, and was refused here
        if isinstance(results, Mapping):
            results = {metric: plain_number(value) for metric, value in results.items()}
        problem = main_metric_problem(results, main)
        assert problem is None, (
            f"{where}: evaluate() of the gold labels returned {problem}: it must hold a number for its "
            f"main_metric {main!r}"
        )
        value = results[main]
        if task.greater_is_better and math.isfinite(value):
            scored = f"{where}: the gold labels, scored as predictions, get {main} = {value!r}"
            assert -1e-6 <= value <= 100.0 + 1e-6, f"{scored}: every metric a task returns is in percent, 0 to 100"
            assert not 0.0 < value <= 1.0, (
                f"{scored}: a fraction? every metric a task returns is in percent (xfer.core.metrics' convention, "
                "100 for perfect predictions)"
            )
        box = tmp_path / "stage"
        directory = box / "predictions"
        returned = task.write_predictions(directory, split, list(examples), copy.deepcopy(golds))
        outside = sorted(str(f.relative_to(box)) for f in box.rglob("*") if not f.is_relative_to(directory))
        assert not outside, f"{where}: write_predictions() wrote outside the folder it was given: {outside}"
        # a return of None (no `return`) failed as a bare TypeError from Path(None), not as this check
        written = Path(returned) if isinstance(returned, (str, os.PathLike)) else None
        assert written is not None and written.is_file() and written.resolve().is_relative_to(directory.resolve()), (
            f"{where}: write_predictions() must return the file it wrote in {directory}, returned {returned!r}"
        )

    def _typed_node(self, plan: Any) -> Any:
        """The validated config object at `config_path` (a `TaskRef` for a task) in a loaded recipe."""
        self.component_node(yaml.safe_load(textwrap.dedent(self.recipe)))  # a path that leads nowhere says so
        parts = self.config_path.split(".")
        node: Any = plan.stages[parts[1]].config
        for part in parts[2:]:
            if isinstance(node, (list, tuple)):
                node = node[int(part)]
            elif isinstance(node, Mapping):
                node = node[part]
            else:
                node = getattr(node, part)
        return node

    def outputs(self, run_dir: Path) -> dict:
        """What determinism compares: the weights of a training stage, every file's bytes otherwise."""
        return output_tensors(run_dir, self.stage) if self.trains else output_files(run_dir, self.stage)

    def checked_stage(self, path: Path) -> None:
        """Fail, saying what to set, when the recipe at `path` has no stage `stage` (default "fit").

        A recipe naming its stage otherwise failed the run checks with "override matches no stage 'fit'"
        and "no safetensors weights under .../fit/outputs", neither naming the class attribute to set."""
        stages = load_recipe(path, host=self.host()).stages
        if self.stage not in stages:
            pytest.fail(
                f"{type(self).__name__}: the checks train and compare the stage {self.stage!r}, which the recipe "
                f"does not have (its stages: {', '.join(stages)}): name it {self.stage!r}, or set "
                'stage = "<the stage to check>" on the class'
            )

    def test_one_step_runs(self, tmp_path: Path) -> None:
        path = self.recipe_file(tmp_path)
        self.checked_stage(path)
        # warmup 0 too: a recipe's own warmup_steps is longer than one step, which recipes refuse
        one_step = [f"stages.{self.stage}.train.steps=1", f"stages.{self.stage}.train.warmup_steps=0"]
        overrides = one_step if self.trains else []
        # run_recipe_file makes the data pre-flight `xfer run` does first: a stage that reads only a task's
        # train split (its config without `data_splits`) passed every in-process check, and `xfer run` refused it
        result = run_recipe_file(path, tmp_path / "run", self.host(), overrides)
        assert [s.status for s in result.stages] == ["completed"] * len(result.stages)
        assert self.outputs(tmp_path / "run")

    @pytest.fixture(scope="class")
    @classmethod
    def reference(cls, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
        """One uninterrupted run per class: (recipe path, its output weights)."""
        checks = cls()
        directory = tmp_path_factory.mktemp("reference")
        path = checks.recipe_file(directory)
        checks.checked_stage(path)
        run_recipe_file(path, directory / "run", checks.host())
        return path, checks.outputs(directory / "run")

    def test_deterministic(self, reference: tuple[Path, dict], tmp_path: Path) -> None:
        path, expected = reference
        if self.trains:
            run_recipe_file(path, tmp_path / "again", self.host())
            assert_same_weights(expected, self.outputs(tmp_path / "again"))
            return
        # A stage that does not train runs again as `xfer run` in a fresh interpreter with another string-hash
        # salt: two runs in this process share the salt, so a stage writing a set (or a dict built from one) in
        # iteration order passed here and wrote different bytes in every real run; trains = False has no
        # kill-and-resume check (a second interpreter) that would catch it.
        salt = "1" if os.environ.get("PYTHONHASHSEED") == "0" else "0"
        env = {"PYTHONHASHSEED": salt, **({} if self.autoload else {"XFER_DISABLE_PLUGIN_AUTOLOAD": "1"})}
        args = ["run", str(path), "--run-dir", str(tmp_path / "again")]
        again = run_cli(args, plugin_modules=self.modules(), env=env)
        assert again.returncode == 0, again.stderr[-3000:]
        got = self.outputs(tmp_path / "again")
        differ = sorted(name for name in expected.keys() | got.keys() if expected.get(name) != got.get(name))
        assert not differ, (
            f"{type(self).__name__}: stage {self.stage!r} wrote different output files in a second run "
            f"(PYTHONHASHSEED={salt}, a fresh interpreter): {', '.join(differ[:5])}; write sets and dicts in a "
            "sorted order, and seed every random source from ctx.seed"
        )

    def test_kill_and_resume(self, reference: tuple[Path, dict], tmp_path: Path) -> None:
        if not self.trains:
            pytest.skip("the stage does not train (trains = False): no checkpoints to resume from")
        if self.resume_covered_by:
            pytest.skip(f"same code path as {self.resume_covered_by}, whose kill-and-resume check runs")
        path, expected = reference
        modules = self.modules()
        args = ["run", str(path), "--run-dir", str(tmp_path / "killed")]
        env = {} if self.autoload else {"XFER_DISABLE_PLUGIN_AUTOLOAD": "1"}
        killed = run_cli(args, plugin_modules=modules, kill_at_step=self.kill_at_step, env=env)
        if killed.returncode == 0:  # the kill never came: the run ended first, or its step was never logged
            pytest.fail(
                f"{type(self).__name__}: the run finished without reaching a logged training step "
                f"{self.kill_at_step} (kill_at_step): give stage {self.stage!r} more steps than that, with "
                "`log_every: 1`, or set kill_at_step lower"
            )
        assert killed.returncode == -9, f"expected SIGKILL, got {killed.returncode}: {killed.stderr[-2000:]}"
        resumed = run_cli(args, plugin_modules=modules, env=env)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "resuming" in resumed.stdout
        assert_same_weights(expected, output_tensors(tmp_path / "killed", self.stage))


def _strings(node: Any) -> set[str]:
    """Every string value in a parsed YAML subtree (a metric or model is named by one)."""
    if isinstance(node, str):
        return {node}
    if isinstance(node, dict):
        return {s for value in node.values() for s in _strings(value)}
    if isinstance(node, list):
        return {s for value in node for s in _strings(value)}
    return set()


def _gold(example: Any) -> Any:
    """An example's gold answer in the form `Task.evaluate` takes as its prediction (None: unlabelled)."""
    from xfer.core.tasks import ParsingExample, SentenceExample, SpanQAExample, TaggingExample, TranslationExample

    if isinstance(example, SentenceExample):
        return example.label
    if isinstance(example, TaggingExample):
        return None if example.tags is None else list(example.tags)
    if isinstance(example, ParsingExample):
        return None if example.heads is None else (list(example.heads), list(example.relations or ()))
    if isinstance(example, SpanQAExample):
        return example.answers[0].text if example.answers else ("" if example.is_impossible else None)
    if isinstance(example, TranslationExample):
        return example.target
    return None


def _undocumented(cls: type, prefix: str = "", seen: frozenset[type] = frozenset()) -> list[str]:
    """Fields of a config dataclass without a `knob(..., doc)`, nested sections' fields included
    (`schedule.warmup`): only the top level was checked, so a section's undocumented fields passed
    although `xfer explain` lists them like any other. The recipe reference types of xfer.core.config
    (`TaskRef`, `Input`, `Files`) are values, not sections, and documented by the core."""
    import typing

    from xfer.core import config as core_config

    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # unresolvable annotations are reported when a recipe uses the component
        hints = {}
    missing: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.metadata.get("doc"):
            missing.append(prefix + f.name)
        hint = hints.get(f.name)
        for t in (hint, *typing.get_args(hint)):
            if (
                isinstance(t, type)
                and dataclasses.is_dataclass(t)
                and t not in seen
                and t.__module__ != core_config.__name__
            ):
                missing += _undocumented(t, f"{prefix}{f.name}.", seen | {cls, t})
    return missing

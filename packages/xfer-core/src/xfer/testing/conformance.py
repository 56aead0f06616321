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
with a documented config; the resolved recipe round-trips through YAML; an unknown key in the
component's config is reported at its line; one training step runs; two runs give bitwise-identical weights; and a run killed
with SIGKILL at `kill_at_step`, then resumed, ends with the same weights as an
uninterrupted one. Keep `log_every: 1` so the kill lands exactly.

A stage that does not train (it writes files: a corpus, a report, predictions of a given
model) sets `trains = False`: "one step runs" becomes "the recipe runs and the stage writes
files under its outputs", determinism compares those files byte for byte, and the
kill-and-resume check is skipped (there are no checkpoints to resume from).

The kill-and-resume check costs two fresh interpreters (~5-10 s). A family of components that
share one code path (e.g. GLUE tasks with the same file layout) may set
`resume_covered_by = "<the class that checks it>"` on all but one member: the check is then
skipped with that reason, visibly, instead of repeated.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from xfer.core.errors import RecipeError
from xfer.core.recipes.recipe import load_recipe
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
        kind, name = self.component
        spec = host.get(kind, name)
        assert spec.version and spec.summary, f"{name}: give the spec a version and a summary"
        cls = host.config_class(kind, name)
        if cls is not None:
            assert dataclasses.is_dataclass(cls)
            undocumented = [f.name for f in dataclasses.fields(cls) if not f.metadata.get("doc")]
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
        kind, name = self.component
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
        data = yaml.safe_load(textwrap.dedent(self.recipe))
        node, last, target = self.component_node(data)
        if isinstance(target, str):  # `task: name` shorthand -> mapping form
            target = {"name": target}
            node[last] = target
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

    def outputs(self, run_dir: Path) -> dict:
        """What determinism compares: the weights of a training stage, every file's bytes otherwise."""
        return output_tensors(run_dir, self.stage) if self.trains else output_files(run_dir, self.stage)

    def test_one_step_runs(self, tmp_path: Path) -> None:
        path = self.recipe_file(tmp_path)
        # warmup 0 too: a recipe's own warmup_steps is longer than one step, which recipes refuse
        one_step = [f"stages.{self.stage}.train.steps=1", f"stages.{self.stage}.train.warmup_steps=0"]
        result = run_recipe_file(path, tmp_path / "run", self.host(), one_step if self.trains else [])
        assert [s.status for s in result.stages] == ["completed"] * len(result.stages)
        assert self.outputs(tmp_path / "run")

    @pytest.fixture(scope="class")
    @classmethod
    def reference(cls, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
        """One uninterrupted run per class: (recipe path, its output weights)."""
        checks = cls()
        directory = tmp_path_factory.mktemp("reference")
        path = checks.recipe_file(directory)
        run_recipe_file(path, directory / "run", checks.host())
        return path, checks.outputs(directory / "run")

    def test_deterministic(self, reference: tuple[Path, dict], tmp_path: Path) -> None:
        path, expected = reference
        run_recipe_file(path, tmp_path / "again", self.host())
        if self.trains:
            assert_same_weights(expected, self.outputs(tmp_path / "again"))
        else:
            assert self.outputs(tmp_path / "again") == expected

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

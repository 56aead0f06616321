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

The checks: the component is registered with a documented config; the resolved recipe
round-trips through YAML; an unknown key in the component's config is reported at its
line; one training step runs; two runs give bitwise-identical weights; and a run killed
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
from typing import ClassVar

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

    def host(self):
        return make_host([TESTING_PLUGIN, *self.plugin_modules], autoload=self.autoload)

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

    def test_unknown_key_reported_with_line(self, tmp_path: Path) -> None:
        data = yaml.safe_load(textwrap.dedent(self.recipe))
        node = data
        parts = self.config_path.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]
        last = parts[-1]
        target = node[int(last)] if isinstance(node, list) else node[last]
        if isinstance(target, str):  # `task: name` shorthand -> mapping form
            target = {"name": target}
            if isinstance(node, list):
                node[int(last)] = target
            else:
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
        modules = [TESTING_PLUGIN, *self.plugin_modules]
        args = ["run", str(path), "--run-dir", str(tmp_path / "killed")]
        env = {} if self.autoload else {"XFER_DISABLE_PLUGIN_AUTOLOAD": "1"}
        killed = run_cli(args, plugin_modules=modules, kill_at_step=self.kill_at_step, env=env)
        assert killed.returncode == -9, f"expected SIGKILL, got {killed.returncode}: {killed.stderr[-2000:]}"
        resumed = run_cli(args, plugin_modules=modules, env=env)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "resuming" in resumed.stdout
        assert_same_weights(expected, output_tensors(tmp_path / "killed", self.stage))

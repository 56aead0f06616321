"""Plugin host: isolation of broken plugins, duplicates, misspelled hooks, allow-lists, CLI listing."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from xfer.core import hookspecs
from xfer.core.errors import PluginError
from xfer.core.hookspecs import hookimpl
from xfer.core.plugins import PluginHost
from xfer.core.specs import ComponentSpec
from xfer.testing import make_host, run_cli, write_recipe


def fake_distribution(site: Path, dist: str, version: str, entry_name: str, module: str, source: str) -> None:
    """Install a distribution the way pip would, as far as importlib.metadata can tell."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[xfer]\n{entry_name} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


BROKEN = """
    import definitely_not_installed_dependency  # noqa: F401
"""

GOOD = """
    from xfer.core import ComponentSpec, hookimpl

    @hookimpl
    def xfer_stages():
        return [ComponentSpec("stage", "{ns}.work", "xfer.testing.bow:run_fit", "1", "xfer.testing.bow:FitConfig", "A stage.", outputs=("model",))]
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    monkeypatch.delenv("XFER_PLUGINS", raising=False)
    monkeypatch.delenv("XFER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    return path


def test_plugin_that_raises_on_import_is_isolated(site: Path, tmp_path: Path) -> None:
    fake_distribution(site, "xfer-broken", "2.0", "broken", "broken_plugin", BROKEN)
    env = {"PYTHONPATH": str(site)}
    listing = run_cli(["plugins"], env=env)
    assert listing.returncode == 0, listing.stderr
    assert "broken  (xfer-broken 2.0, broken_plugin)" in listing.stdout
    assert (
        "FAILED: import failed: ModuleNotFoundError: No module named 'definitely_not_installed_dependency'"
        in listing.stdout
    )
    assert "toy/agreement" in listing.stdout, "other plugins still work"
    as_json = json.loads(run_cli(["plugins", "--json"], env=env).stdout)
    broken = next(p for p in as_json if p["name"] == "broken")
    assert broken["distribution"] == "xfer-broken" and "definitely_not_installed_dependency" in broken["error"]

    recipe = write_recipe(tmp_path, "stages:\n  s:\n    kind: broken.work\n")
    result = run_cli(["validate", str(recipe)], env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (
        f"{recipe.resolve()}:3:11: stages.s.kind: stage 'broken.work' should come from plugin 'broken' "
        "(distribution xfer-broken 2.0), which failed to load: import failed: ModuleNotFoundError: "
        "No module named 'definitely_not_installed_dependency'"
    ) in result.stderr


def test_duplicate_component_names_error_names_both_providers(site: Path) -> None:
    fake_distribution(site, "xfer-one", "1.0", "twin", "twin_one", GOOD.format(ns="twin"))
    fake_distribution(site, "xfer-two", "3.1", "twin", "twin_two", GOOD.format(ns="twin"))
    host = PluginHost()
    with pytest.raises(
        PluginError, match=r"stage 'twin.work' is registered twice, by twin \(xfer-one 1.0\) and twin \(xfer-two 3.1\)"
    ):
        host.get("stage", "twin.work")


def test_a_namespace_claimed_by_two_distributions_is_refused_not_shared(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second distribution with the entry-point name `quiz` could add `quiz.extra` next to the
    real plugin's `quiz.work` (only identical component names were caught), and XFER_PLUGINS=quiz
    loaded both. Now every component of the namespace is refused, naming both distributions, and
    `xfer plugins --check` fails on it; an unrelated namespace still works."""
    fake_distribution(site, "xfer-quiz", "1.0", "quiz", "quiz_real", GOOD.format(ns="quiz"))
    other = GOOD.format(ns="quiz").replace("quiz.work", "quiz.extra")
    fake_distribution(site, "quiz-tools", "0.3", "quiz", "quiz_other", other)
    fake_distribution(site, "xfer-alpha", "1.0", "alpha", "alpha_plugin", GOOD.format(ns="alpha"))
    for allow in (None, "quiz,alpha"):
        if allow:
            monkeypatch.setenv("XFER_PLUGINS", allow)
        host = PluginHost()
        for name in ("quiz.work", "quiz.extra"):
            with pytest.raises(PluginError) as caught:
                host.get("stage", name)
            assert str(caught.value) == (
                f"stage {name!r}: its namespace 'quiz' is claimed by two distributions, quiz-tools 0.3 and "
                "xfer-quiz 1.0, so which plugin it comes from is not defined; uninstall one of them"
            )
        assert host.get("stage", "alpha.work").name == "alpha.work"
    listing = run_cli(["plugins", "--check"], env={"PYTHONPATH": str(site)})
    assert listing.returncode == 1, listing.stdout
    assert "CONFLICT: namespace 'quiz' claimed by quiz-tools 0.3 and xfer-quiz 1.0" in listing.stdout


def test_allow_list_and_autoload_switch(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_distribution(site, "xfer-alpha", "1.0", "alpha", "alpha_plugin", GOOD.format(ns="alpha"))
    fake_distribution(site, "xfer-beta", "1.0", "beta", "beta_plugin", GOOD.format(ns="beta"))
    monkeypatch.setenv("XFER_PLUGINS", "alpha")
    host = PluginHost()
    assert host.find("stage", "alpha.work") and not host.find("stage", "beta.work")
    assert "beta" not in host.plugins
    monkeypatch.delenv("XFER_PLUGINS")
    monkeypatch.setenv("XFER_DISABLE_PLUGIN_AUTOLOAD", "1")
    host = PluginHost()
    assert set(host.plugins) == {"core", "toy"}
    monkeypatch.setenv("XFER_PLUGIN_MODULES", "xfer.testing.plugin")
    assert set(PluginHost().plugins) == {"core", "toy", "testing"}


def test_a_typo_in_the_plugin_switches_is_reported(
    site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_distribution(site, "xfer-alpha", "1.0", "alpha", "alpha_plugin", GOOD.format(ns="alpha"))
    monkeypatch.setenv("XFER_PLUGINS", "alpah,core")  # core is built in: always loaded, never unknown
    host = PluginHost()
    assert "alpha" not in host.plugins and "core" in host.plugins
    assert host.plugins["alpah"].error == (
        "XFER_PLUGINS names 'alpah', but no installed distribution registers an `xfer` entry point "
        "of that name; did you mean 'alpha'?"
    )
    monkeypatch.delenv("XFER_PLUGINS")
    monkeypatch.setenv("XFER_DISABLE_PLUGIN_AUTOLOAD", "TRUE")  # any case
    assert "alpha" not in PluginHost().plugins
    monkeypatch.setenv("XFER_DISABLE_PLUGIN_AUTOLOAD", "off")
    assert "alpha" in PluginHost().plugins
    monkeypatch.setenv("XFER_DISABLE_PLUGIN_AUTOLOAD", "ture")
    with pytest.raises(PluginError, match="XFER_DISABLE_PLUGIN_AUTOLOAD='ture': expected 1/true/yes/on"):
        PluginHost()
    from xfer.core import cli, plugins

    monkeypatch.setattr(plugins, "_default_host", None)  # the CLI builds its host from the environment
    assert cli.main(["plugins"]) == 2
    assert "error: XFER_DISABLE_PLUGIN_AUTOLOAD='ture'" in capsys.readouterr().err


def test_misspelled_hook_is_an_error() -> None:
    class Typo:
        @hookimpl
        def xfer_task(self) -> list:  # should be xfer_tasks
            return []

    host = make_host()
    record = host.add_object(Typo(), "typo")
    assert record.error == "unknown hook 'xfer_task'; did you mean 'xfer_tasks'?"
    assert not host.pm.is_registered(Typo)


def test_component_outside_its_namespace_is_refused() -> None:
    class Squatter:
        @hookimpl
        def xfer_tasks(self) -> list:
            return [ComponentSpec("task", "glue/rte", "x:y", "1")]

    record = make_host().add_object(Squatter(), "squat")
    assert "must be in the plugin's namespace 'squat'" in (record.error or "")


def test_registration_hook_that_raises_is_isolated() -> None:
    class Exploding:
        @hookimpl
        def xfer_stages(self) -> list:
            raise RuntimeError("boom")

    host = make_host()
    record = host.add_object(Exploding(), "exploding")
    assert record.error and "RuntimeError: boom" in record.error
    with pytest.raises(PluginError, match=r"should come from plugin 'exploding'.*RuntimeError: boom"):
        host.get("stage", "exploding.anything")


def test_import_error_of_a_component_names_its_distribution() -> None:
    class Lazy:
        @hookimpl
        def xfer_tasks(self) -> list:
            return [ComponentSpec("task", "lazy/t", "lazy_missing_module:Task", "1", None, "x")]

    host = make_host()
    host.add_object(Lazy(), "lazy")
    with pytest.raises(
        PluginError, match=r"task 'lazy/t' from lazy \(\(object\) -\) failed to import: ModuleNotFoundError"
    ):
        host.load("task", "lazy/t")


def test_lifecycle_hook_failures_do_not_stop_a_run() -> None:
    calls = []

    class Observer:
        @hookimpl
        def xfer_stage_start(self, stage: str) -> None:
            calls.append(stage)
            raise ValueError("observer bug")

    host = make_host()
    host.add_object(Observer(), "observer")
    with pytest.warns(UserWarning, match="observer.*xfer_stage_start failed") as caught:
        host.notify("xfer_stage_start", run_dir=Path("."), stage="s", kind="k", config=None, resumed=False)
    assert calls == ["s"]
    # attributed to xfer (printed as one `warning:` line by the CLI), not to pluggy's internals
    assert [Path(w.filename).name for w in caught] == ["plugins.py"]
    assert "/xfer/core/" in caught[0].filename.replace("\\", "/")


def test_every_hook_is_documented_in_code_and_docs() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "plugins.md").read_text()
    for name in hookspecs.HOOK_NAMES:
        assert (getattr(hookspecs, name).__doc__ or "").strip(), f"{name} has no docstring"
        assert f"### `{name}`" in docs, f"docs/plugins.md has no section for {name}"


class _Commands:
    """Two CLI commands: one working, one whose configure module does not exist."""

    @staticmethod
    @hookimpl
    def xfer_commands():
        from xfer.core.specs import CommandSpec

        return [
            CommandSpec("hello", "say hello", "xfer.core.scaffold:__name__", "builtins:print"),
            CommandSpec("broken", "a broken command", "no_such_module_xyz:configure", "no_such_module_xyz:run"),
        ]


def test_a_broken_plugin_command_breaks_only_itself(capsys: pytest.CaptureFixture[str]) -> None:
    from xfer.core import cli
    from xfer.core.plugins import set_default_host

    host = make_host(["xfer.testing.plugin"])
    host.add_object(_Commands(), "cmds")
    set_default_host(host)
    try:
        assert cli.main(["components", "stage"]) == 0, "other commands still work"
        assert "testing.fit" in capsys.readouterr().out
        assert cli.main(["broken"]) == 2
        err = capsys.readouterr().err
        assert "command 'broken' from plugin 'cmds' is broken: ModuleNotFoundError" in err and "Traceback" not in err
        with pytest.raises(SystemExit) as help_exit:
            cli.main(["--help"])
        assert help_exit.value.code == 0 and "a broken command" in capsys.readouterr().out
    finally:
        set_default_host(None)


def test_version_lists_core_and_plugin_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    from xfer.core import cli
    from xfer.core.plugins import set_default_host

    set_default_host(make_host(autoload=True))
    try:
        with pytest.raises(SystemExit) as exited:
            cli.main(["--version"])
    finally:
        set_default_host(None)
    out = capsys.readouterr().out.splitlines()
    assert exited.value.code == 0 and out[0].startswith("xfer ") and "  xfer-transformer " in "\n".join(out)


def test_plugins_json_carries_summaries(capsys: pytest.CaptureFixture[str]) -> None:
    from xfer.core import cli
    from xfer.core.plugins import set_default_host

    set_default_host(make_host(["xfer.testing.plugin"]))
    try:
        assert cli.main(["plugins", "--json"]) == 0
    finally:
        set_default_host(None)
    (testing,) = [p for p in json.loads(capsys.readouterr().out) if p["name"] == "testing"]
    assert testing["components"][0]["summary"].startswith("Train a hashed bag-of-words")


def test_lifecycle_hooks_go_through_pluggy_wrappers_ordering_and_unmarked_impls() -> None:
    calls: list[str] = []

    class Wrapper:
        @hookimpl(wrapper=True)
        def xfer_stage_start(self, stage: str):
            calls.append(f"wrapper-before {stage}")
            result = yield
            calls.append("wrapper-after")
            return result

    class First:
        @hookimpl(tryfirst=True)
        def xfer_stage_start(self, stage: str) -> None:
            calls.append("first")

    class Unmarked:  # no @hookimpl: a hookspec name is enough (pytest's rule), never silently ignored
        def xfer_stage_start(self, stage: str) -> None:
            calls.append("unmarked")
            raise RuntimeError("observer bug")

    class Renamed:
        @hookimpl(specname="xfer_stage_start")
        def on_start(self, kind: str) -> None:
            calls.append(f"renamed {kind}")

    host = make_host()
    for plugin, name in ((Renamed(), "renamed"), (Unmarked(), "unmarked"), (First(), "first"), (Wrapper(), "wrap")):
        host.add_object(plugin, name)
    with pytest.warns(UserWarning, match="'unmarked': xfer_stage_start failed: RuntimeError: observer bug"):
        host.notify("xfer_stage_start", run_dir=Path("."), stage="s", kind="k", config=None, resumed=False)
    assert calls[0] == "wrapper-before s" and calls[1] == "first" and calls[-1] == "wrapper-after"
    assert sorted(calls[2:4]) == ["renamed k", "unmarked"], "the failing observer did not stop the others"


def test_registration_hooks_honour_specname() -> None:
    class Plugin:
        @hookimpl(specname="xfer_stages")
        def my_stages(self):
            return [ComponentSpec("stage", "spec.fit", "xfer.testing.bow:run_fit", "1", "xfer.testing.bow:FitConfig")]

    host = make_host()
    record = host.add_object(Plugin(), "spec")
    assert record.error is None and host.find("stage", "spec.fit") is not None


def test_output_kinds_must_name_declared_outputs_and_stay_hashable() -> None:
    fit = ("stage", "spec.fit", "xfer.testing.bow:run_fit", "1")
    with pytest.raises(
        ValueError, match=r"output_kinds names 'modle', which is not a declared output \(outputs: model\)"
    ):
        ComponentSpec(*fit, outputs=("model",), output_kinds=(("modle", "model"),))
    with pytest.raises(ValueError, match="only stages declare outputs, output kinds"):
        ComponentSpec("task", "spec/t", "x:y", "1", output_kinds=(("model", "model"),))
    spec = ComponentSpec(*fit, outputs=("model",), output_kinds={"model": "bow-model"})  # a mapping is stored as pairs
    assert spec.output_kinds == (("model", "bow-model"),) and spec.output_kind("model") == "bow-model"
    assert hash(spec) == hash(ComponentSpec(*fit, outputs=("model",), output_kinds=(("model", "bow-model"),)))
    assert ComponentSpec(*fit, outputs=("model",)).output_kind("model") is None


def test_a_reference_to_an_output_of_another_kind_is_refused_and_undeclared_kinds_pass(tmp_path: Path) -> None:
    """A field with `takes` refuses a stage output whose spec declares another kind; a third-party
    stage that declares no kinds is not checked."""

    def plugin(namespace: str, **kinds: str) -> object:
        class Plugin:
            @hookimpl
            def xfer_stages(self):
                config = "xfer.testing.bow:FitConfig"
                target = "xfer.testing.bow:run_fit"
                return [
                    ComponentSpec(
                        "stage", f"{namespace}.work", target, "1", config, outputs=("model",), output_kinds=kinds
                    )
                ]

        return Plugin()

    host = make_host(modules=["xfer.testing.plugin"])
    host.add_object(plugin("ext"), "ext")  # declares no kinds
    host.add_object(plugin("typed", model="ext-model"), "typed")
    text = """\
stages:
  ext: {kind: ext.work, task: toy/agreement}
  typed: {kind: typed.work, task: toy/agreement}
  fit:
    kind: testing.fit
    task: toy/agreement
    init: ext.model
"""
    from xfer.core.errors import RecipeError
    from xfer.core.recipes.recipe import load_recipe

    load_recipe(write_recipe(tmp_path, text), host=host)
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(tmp_path, text.replace("init: ext.model", "init: typed.model")), host=host)
    [problem] = caught.value.diagnostics
    assert (problem.location.line, problem.location.col) == (7, 11)
    assert problem.message == "stages.fit.init: typed.model is an ext-model; init takes a bow-model"

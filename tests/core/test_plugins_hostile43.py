"""Plugin loading attacked by a third-party author and a broken environment: each mistake is an error
on the plugin's record that names the plugin, where the mistake is and what to fix, never pluggy's
or importlib's text (or a crash of the host), and never silently ignored."""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest

from xfer.core.hookspecs import hookimpl
from xfer.core.plugins import PluginHost
from xfer.testing import make_host


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on sys.path where tests install fake distributions and modules."""
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    for name in ("XFER_PLUGINS", "XFER_DISABLE_PLUGIN_AUTOLOAD", "XFER_PLUGIN_MODULES"):
        monkeypatch.delenv(name, raising=False)
    return path


def _unique(stem: str) -> str:
    """A module name no other test imported (sys.modules keeps modules between tests)."""
    return f"{stem}_{uuid.uuid4().hex[:8]}"


def _install(site: Path, dist: str, entry_points: dict[str, str], module: str, source: str) -> None:
    """Install `dist` as pip would, as far as importlib.metadata can tell, with `module`'s source."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[xfer]\n{lines}")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


def _host(allow: list[str]) -> PluginHost:
    """A host loading only the entry points named (fast, and independent of what else is installed)."""
    return PluginHost(autoload=True, allow=allow)


def test_entry_point_naming_a_missing_attribute_names_the_entry_point_and_a_near_miss(site: Path) -> None:
    # was "AttributeError: module 'm' has no attribute 'plugn' (at .../importlib/metadata/__init__.py:204)"
    module, name = _unique("attrplug"), _unique("attr")
    _install(site, "xfer-attr", {name: f"{module}:plugn"}, module, "plugin = object()\n")
    error = _host([name]).plugins[name].error or ""
    assert "has no attribute 'plugn'; did you mean 'plugin'?" in error
    assert f"entry point '{name} = {module}:plugn' of xfer-attr 1.0" in error
    assert "[project.entry-points.xfer]" in error
    assert "importlib" not in error


def test_syntax_error_in_a_plugin_points_at_its_file_and_line(site: Path) -> None:
    # was "SyntaxError: invalid syntax (m.py, line 2) (at <frozen importlib._bootstrap>:241)"
    module, name = _unique("synplug"), _unique("syn")
    _install(site, "xfer-syn", {name: module}, module, "x = 1\ndef broken(:\n    pass\n")
    error = _host([name]).plugins[name].error or ""
    assert error.startswith("import failed: SyntaxError: ")
    assert f"(at {site / f'{module}.py'}:2)" in error
    assert "frozen" not in error


def test_hookimpl_with_a_misspelt_specname_is_named_at_its_line(site: Path) -> None:
    # was pluggy's "unknown hook 'xfer_task' in plugin <module ...> (at .../pluggy/_manager.py:492)"
    module = _unique("specplug")
    source = "from xfer.core import hookimpl\n\n@hookimpl(specname='xfer_task')\ndef tasks():\n    return []\n"
    (site / f"{module}.py").write_text(source)
    record = make_host([module]).add_module(module)
    assert record.error == (
        f"unknown hook 'xfer_task' (the specname of tasks at {site / f'{module}.py'}:3); did you mean 'xfer_tasks'?"
    )


def test_hookimpl_on_a_function_named_like_no_hook_is_named_at_its_line() -> None:
    class Plugin:
        @hookimpl
        def stage_start(self, run_dir: Path) -> None:  # should be xfer_stage_start
            pass

    record = make_host().add_object(Plugin(), "marked")
    assert record.error is not None
    assert record.error.startswith(f"unknown hook 'stage_start' (@hookimpl at {__file__}:")
    assert record.error.endswith("did you mean 'xfer_stage_start'?")
    assert "pluggy" not in record.error


def test_a_hook_name_bound_to_a_list_is_an_error_not_a_plugin_without_components(site: Path) -> None:
    # `xfer_stages = [ComponentSpec(...)]` loaded as a plugin with no components and no error at all
    module = _unique("listplug")
    (site / f"{module}.py").write_text(
        "from xfer.core import ComponentSpec\n\n"
        f"xfer_stages = [ComponentSpec('stage', '{module}.work', 'xfer.testing.bow:run_fit', '1')]\n"
    )
    record = make_host([module]).add_module(module)
    assert record.error == (
        "xfer_stages is a list, not a function: a hook must be one (`@hookimpl` then `def xfer_stages(): return [...]`)"
    )


def test_a_plugin_attribute_that_raises_when_read_is_recorded_not_raised() -> None:
    # the host itself crashed with the property's RuntimeError while scanning for misspelt hooks
    class Plugin:
        @property
        def xfer_tasks(self) -> list:
            raise RuntimeError("not configured")

    host = make_host()
    record = host.add_object(Plugin(), "prop")
    assert record.error is not None
    assert record.error.startswith("registration failed: RuntimeError: not configured (at ")
    assert host.plugins["core"].error is None


def test_one_module_under_two_entry_points_says_which_plugin_has_it(site: Path) -> None:
    # was pluggy's "ValueError: Plugin already registered under a different name: b=<module ...>" and
    # then the repr of every registered plugin
    module, first, second = _unique("twiceplug"), _unique("a"), _unique("b")
    source = "from xfer.core import hookimpl\n\n@hookimpl\ndef xfer_stage_start(stage):\n    pass\n"
    _install(site, "xfer-twice", {first: module, second: module}, module, source)
    host = _host([first, second])
    assert host.plugins[first].error is None
    assert host.plugins[second].error == (
        f"{module} is already loaded as plugin {first!r} (distribution xfer-twice 1.0): a module is one plugin; "
        "keep one of xfer-twice's `xfer` entry points naming it ([project.entry-points.xfer] in its "
        "pyproject.toml) and reinstall it"
    )


def test_a_registration_hook_taking_an_argument_says_it_is_passed_none() -> None:
    # read "(its arguments: ; take only the ones you use)"
    class Plugin:
        @hookimpl
        def xfer_tasks(self, host: object) -> list:
            return []

    record = make_host().add_object(Plugin(), "args")
    assert record.error is not None
    assert "takes 'host', which xfer_tasks does not pass (it passes no arguments; take only" in record.error


def _namespaced_module(site: Path, namespace: str) -> str:
    """A plugin module (its name differs from its namespace) registering the stage `<namespace>.work`."""
    module = _unique("devplug")
    (site / f"{module}.py").write_text(
        f"XFER_NAMESPACE = {namespace!r}\n\nfrom xfer.core import ComponentSpec, hookimpl\n\n\n@hookimpl\n"
        "def xfer_stages():\n"
        f"    return [ComponentSpec('stage', '{namespace}.work', 'xfer.testing.bow:run_fit', '1', "
        "'xfer.testing.bow:FitConfig', outputs=('model',))]\n"
    )
    return module


def test_xfer_plugins_naming_a_plugin_module_does_not_make_its_components_unusable(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # XFER_PLUGINS=mine with XFER_PLUGIN_MODULES giving `mine`: the allow-list's "no installed
    # distribution" placeholder claimed the namespace first, and `mine.work` was refused as "claimed by
    # two plugins, (XFER_PLUGINS) - and module ...; drop it from XFER_PLUGIN_MODULES"
    namespace = _unique("mine")
    module = _namespaced_module(site, namespace)
    monkeypatch.setenv("XFER_PLUGINS", f"{namespace},nosuchplugin")
    monkeypatch.setenv("XFER_PLUGIN_MODULES", module)
    host = PluginHost(autoload=True)
    assert host.get("stage", f"{namespace}.work").provider == f"{namespace} ((module) -)"
    assert host.plugins[namespace].error is None
    assert not host.namespace_conflicts
    assert "XFER_PLUGINS names 'nosuchplugin'" in (host.plugins["nosuchplugin"].error or "")  # a typo still shows


def test_a_module_added_later_replaces_the_xfer_plugins_placeholder_of_its_namespace(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    namespace = _unique("mine")
    module = _namespaced_module(site, namespace)
    host = PluginHost(autoload=True, allow=[namespace])
    assert host.plugins[namespace].distribution == "(XFER_PLUGINS)"
    record = host.add_module(module)
    assert record.error is None and host.plugins[namespace] is record
    assert host.get("stage", f"{namespace}.work").provider == f"{namespace} ((module) -)"


def test_an_entry_point_naming_a_hook_function_is_an_error_not_a_plugin_without_components(site: Path) -> None:
    # `name = pkg.plugin:xfer_stages` registered the function itself: no hooks, no components, no error
    # (`xfer plugins` showed `hooks: -`, as for a module that has none)
    module, name = _unique("fnplug"), _unique("fn")
    source = "from xfer.core import hookimpl\n\n@hookimpl\ndef xfer_stages():\n    return []\n"
    _install(site, "xfer-fn", {name: f"{module}:xfer_stages"}, module, source)
    assert _host([name]).plugins[name].error == (
        f"'{module}:xfer_stages' names the function xfer_stages, not a plugin: point the `xfer` entry point of "
        f"xfer-fn ([project.entry-points.xfer] in its pyproject.toml) at the module that defines the hooks ({module})"
    )

"""Plugin mistakes the host must catch with a message naming the plugin and its own file:line:
exiting at import, hooks returning the wrong thing, broken `xfer_commands`, config classes that
are not dataclasses, whose annotations do not resolve or whose scalar defaults have the wrong type,
target typos, slow imports. (What the host must not refuse: test_plugins_lenient.py.)"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.errors import PluginError, RecipeError
from xfer.core.hookspecs import hookimpl
from xfer.core.plugins import set_default_host
from xfer.core.recipes.recipe import load_recipe
from xfer.core.specs import ComponentSpec
from xfer.testing import make_host, run_cli, write_recipe


def write(directory: Path, filename: str, source: str) -> Path:
    path = directory / filename
    path.write_text(textwrap.dedent(source).lstrip())
    return path


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


# --- 1. SystemExit at import and in registration hooks ---------------------------------------------


def test_a_plugin_that_exits_at_import_is_recorded_not_fatal(pkg: tuple[str, Path]) -> None:
    name, directory = pkg
    path = write(directory, "plugin.py", "import sys\nsys.exit('plugin gave up')\n")
    write(directory, "cli_plugin.py", "import argparse\nargparse.ArgumentParser().parse_args(['--nope'])\n")
    host = make_host()
    record = host.add_module(f"{name}.plugin", name="quitter")
    assert record.error is not None
    assert "SystemExit('plugin gave up')" in record.error and f"{path}:2" in record.error
    argparse_record = host.add_module(f"{name}.cli_plugin", name="argparser")
    assert argparse_record.error and "SystemExit(2)" in argparse_record.error
    assert host.find("task", "toy/agreement"), "other plugins still work"


def test_a_registration_hook_that_exits_is_recorded() -> None:
    class Exits:
        @hookimpl
        def xfer_tasks(self) -> list:
            raise SystemExit(3)

    record = make_host().add_object(Exits(), "exits")
    assert record.error and record.error.startswith("registration hook failed: SystemExit(3)")
    assert "test_plugins_checks.py" in record.error, "located in the plugin's own code"


def test_xfer_version_works_with_a_plugin_that_exits_at_import(pkg: tuple[str, Path]) -> None:
    name, directory = pkg
    write(directory, "plugin.py", "import sys\nsys.exit('plugin gave up')\n")
    env = {"PYTHONPATH": str(directory.parent), "XFER_PLUGIN_MODULES": f"{name}.plugin"}
    version = run_cli(["--version"], env=env)
    assert version.returncode == 0 and version.stdout.startswith("xfer "), version.stderr
    listing = run_cli(["plugins"], env=env)
    assert listing.returncode == 0 and "FAILED: import failed: SystemExit('plugin gave up')" in listing.stdout


# --- 3. error locations in the plugin's own file; a single spec instead of a list ------------------


def test_errors_point_at_the_plugins_own_line(pkg: tuple[str, Path]) -> None:
    name, directory = pkg
    missing = write(directory, "missing.py", "import os\nimport definitely_not_installed_xyz  # noqa\n")
    bad_name = write(
        directory,
        "badname.py",
        """
        from xfer.core import ComponentSpec, hookimpl

        @hookimpl
        def xfer_tasks():
            return [ComponentSpec("task", "Bad Name", "x:y", "1")]
        """,
    )
    host = make_host()
    record = host.add_module(f"{name}.missing", name="missing")
    assert record.error and f"(at {missing}:2)" in record.error, record.error
    record = host.add_module(f"{name}.badname", name="badname")
    assert record.error and f"(at {bad_name}:{line_of(bad_name, 'Bad Name')})" in record.error, record.error


def test_a_hook_returning_one_spec_instead_of_a_list_says_so(pkg: tuple[str, Path]) -> None:
    name, directory = pkg
    path = write(
        directory,
        "single.py",
        """
        from xfer.core import ComponentSpec, hookimpl

        @hookimpl
        def xfer_tasks():
            return ComponentSpec("task", "single/t", "x:y", "1")
        """,
    )
    record = make_host().add_module(f"{name}.single", name="single")
    assert record.error and "xfer_tasks must return a list of ComponentSpec, got ComponentSpec" in record.error
    assert str(path) in record.error


# --- 4. broken xfer_commands ------------------------------------------------------------------------


class _StrCommands:
    @hookimpl
    def xfer_tasks(self) -> list:
        return [ComponentSpec("task", "cmds/t", "xfer.core.toy.tasks:ToyPosTask", "1")]

    @hookimpl
    def xfer_commands(self) -> list:
        return ["hello"]


def test_a_broken_xfer_commands_marks_the_plugin_failed_and_the_cli_works(capsys: pytest.CaptureFixture[str]) -> None:
    host = make_host()
    record = host.add_object(_StrCommands(), "cmds")
    assert record.error and "xfer_commands must return a list of CommandSpec, got a list holding str" in record.error
    assert host.find("task", "cmds/t"), "its components stay usable"
    set_default_host(host)
    try:
        with pytest.warns(UserWarning, match="xfer_commands"):
            assert cli.main(["plugins"]) == 0
    finally:
        set_default_host(None)
    out = capsys.readouterr().out
    assert "cmds  ((object) -" in out and "FAILED: xfer_commands failed" in out and "cmds/t" in out


# --- 5. import time -----------------------------------------------------------------------------------


def test_a_slow_plugin_import_is_shown(pkg: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    name, directory = pkg
    write(directory, "slow.py", "import time\ntime.sleep(0.3)\n")
    host = make_host()
    record = host.add_module(f"{name}.slow", name="slow")
    assert record.error is None and record.import_seconds >= 0.3
    set_default_host(host)
    try:
        assert cli.main(["plugins"]) == 0
        listing = capsys.readouterr().out
        assert cli.main(["plugins", "--json"]) == 0
        as_json = json.loads(capsys.readouterr().out)
    finally:
        set_default_host(None)
    assert "slow  ((module) -" in listing and "SLOW: import took" not in listing, "under a second: not flagged"
    assert next(p for p in as_json if p["name"] == "slow")["import_seconds"] >= 0.3
    record.import_seconds = 10.0
    set_default_host(host)
    try:
        assert cli.main(["plugins"]) == 0
    finally:
        set_default_host(None)
    listing = capsys.readouterr().out
    assert "slow  ((module) -" in listing and "SLOW: import took 10.0 s" in listing
    assert listing.count("SLOW:") == 1


# --- 2. config classes checked when first resolved ------------------------------------------------------

CONFIG_HEADER = """
    from __future__ import annotations
    from dataclasses import dataclass
    from typing import TYPE_CHECKING
    from xfer.core import knob
    if TYPE_CHECKING:
        import datetime

"""

BROKEN_CONFIGS = {
    "not_a_dataclass": (
        "class Config:\n    size: int = knob(3, 'How many.')\n",
        None,
        ".config.Config is not a dataclass (decorate the class with @dataclass)",
        "class Config",
    ),
    "unresolvable": (
        "@dataclass\nclass Config:\n    size: int = knob(3, 'How many.')\n"
        "    when: datetime.date | None = knob(None, 'When.')\n",
        "when",
        "its type annotation cannot be resolved (NameError: name 'datetime' is not defined)",
        "when:",
    ),
    "wrong_default": (
        "@dataclass\nclass Config:\n    lowercase: bool = knob('no', 'Lower-case.')\n",
        "lowercase",
        "default 'no' does not fit its type: expected true or false, got str",
        "lowercase:",
    ),
    "literal_default_outside_its_choices": (
        "from typing import Literal\n\n@dataclass\nclass Config:\n    mode: Literal['a', 'b'] = knob('c', 'Mode.')\n",
        "mode",
        "default 'c' does not fit its type: 'c' is not one of 'a', 'b'",
        "mode:",
    ),
    "fractional_int_default": (
        "@dataclass\nclass Config:\n    steps: int = knob(1.5, 'Steps.')\n",
        "steps",
        "default 1.5 does not fit its type: expected an integer, got float",
        "steps:",
    ),
    "wrong_nested_default": (
        "@dataclass\nclass Inner:\n    lr: float = knob('fast', 'Rate.')\n\n"
        "@dataclass\nclass Config:\n    inner: Inner = knob(Inner(), 'Inner.')\n",
        "inner.lr",
        "default 'fast' does not fit its type: expected a number, got str",
        "lr:",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN_CONFIGS))
def test_a_broken_config_class_is_a_plugin_error_naming_component_provider_and_field(
    case: str, pkg: tuple[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, directory = pkg
    body, field, problem, line_text = BROKEN_CONFIGS[case]
    config_file = write(directory, "config.py", textwrap.dedent(CONFIG_HEADER) + body)

    class Plugin:
        @hookimpl
        def xfer_tasks(self) -> list:
            return [ComponentSpec("task", "cfg/t", "xfer.core.toy.tasks:ToyPosTask", "1", f"{name}.config:Config")]

    host = make_host()
    record = host.add_object(Plugin(), "cfg")
    assert record.error is None, "checked lazily: start-up stays cheap"
    with pytest.raises(PluginError) as raised:
        host.config_class("task", "cfg/t")
    message = str(raised.value)
    assert message.startswith("task 'cfg/t' from cfg ((object) -): ")
    assert (f"config field {field!r}: " if field else "config: ") in message and problem in message
    assert "; config" not in message, "each problem once"
    assert f"(at {config_file}:{line_of(config_file, line_text)})" in message
    assert record.problems["cfg/t"] == message, "`xfer plugins` shows it"

    set_default_host(host)
    try:
        assert cli.main(["explain", "task", "cfg/t"]) == 2
        err = capsys.readouterr().err
        assert problem in err and "Traceback" not in err
        assert cli.main(["plugins"]) == 0
        assert f"BROKEN: {message}" in capsys.readouterr().out
    finally:
        set_default_host(None)

    recipe = write_recipe(tmp_path, "stages:\n  s:\n    kind: testing.fit\n    task: cfg/t\n")
    host.add_module("xfer.testing.plugin")
    with pytest.raises(RecipeError) as invalid:
        load_recipe(recipe, [], host)
    assert f"{recipe.resolve()}:4:11: {message}" in str(invalid.value)


def test_plugins_check_resolves_every_config_without_being_asked(
    pkg: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    name, directory = pkg
    write(directory, "config.py", "class Config:\n    pass\n")

    class Plugin:
        @hookimpl
        def xfer_tasks(self) -> list:
            return [ComponentSpec("task", "lazy/t", "xfer.core.toy.tasks:ToyPosTask", "1", f"{name}.config:Config")]

    host = make_host()
    host.add_object(Plugin(), "lazy")
    set_default_host(host)
    try:
        assert cli.main(["plugins"]) == 0
        assert "BROKEN" not in capsys.readouterr().out
        assert cli.main(["plugins", "--check"]) == 1, "CI can use it: a broken component is a non-zero exit"
        assert "BROKEN: task 'lazy/t' from lazy ((object) -): config: " in capsys.readouterr().out
        assert cli.main(["plugins"]) == 0, "without --check: a listing, exit 0"
    finally:
        set_default_host(None)


def test_every_first_party_config_passes_the_checks() -> None:
    host = make_host(["xfer.testing.plugin"], autoload=True)
    for kind, name in sorted(host.components):
        host.config_class(kind, name, target=False)


# --- 6. target typos are recipe errors ---------------------------------------------------------------


def test_a_target_typo_is_a_recipe_error_at_the_line_naming_the_provider(tmp_path: Path) -> None:
    class Typo:
        @hookimpl
        def xfer_stages(self) -> list:
            return [ComponentSpec("stage", "typo.fit", "xfer.testing.bow:run_fitt", "1", "xfer.testing.bow:FitConfig")]

        @hookimpl
        def xfer_objectives(self) -> list:
            return [ComponentSpec("objective", "typo.obj", "xfer.core.toy.tasks:Nope", "1")]

    host = make_host(["xfer.testing.plugin"])
    host.add_object(Typo(), "typo")
    recipe = write_recipe(tmp_path, "stages:\n  s:\n    kind: typo.fit\n    task: toy/agreement\n")
    with pytest.raises(RecipeError) as invalid:
        load_recipe(recipe, [], host)
    text = str(invalid.value)
    assert f"{recipe.resolve()}:3:5: stage 'typo.fit' from typo ((object) -): target failed to import: " in text
    assert "'xfer.testing.bow' has no attribute 'run_fitt'; did you mean 'run_fit'?" in text
    assert "test_plugins_checks.py" in text, "where the spec was declared"
    with pytest.raises(PluginError, match=r"objective 'typo.obj' from typo .*target failed to import"):
        host.config_class("objective", "typo.obj")


# --- duplicates ----------------------------------------------------------------------------------------


def test_components_flags_a_component_registered_twice(capsys: pytest.CaptureFixture[str]) -> None:
    class Twice:  # two plugin objects under one namespace, each registering the component once
        @hookimpl
        def xfer_tasks(self) -> list:
            return [ComponentSpec("task", "twice/t", "xfer.core.toy.tasks:ToyPosTask", "1")]

    host = make_host()
    host.add_object(Twice(), "twice")
    host.add_object(Twice(), "twice")
    set_default_host(host)
    try:
        assert cli.main(["components", "task"]) == 0
        out = capsys.readouterr().out
        assert "twice/t" in out and "CONFLICT: registered twice" in out
        assert cli.main(["plugins"]) == 0
        assert "(registered twice)" in capsys.readouterr().out
    finally:
        set_default_host(None)

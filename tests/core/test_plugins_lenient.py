"""What the host must NOT refuse of a plugin (review of the first-resolution config checks): a
field whose type recipes cannot give is fine until a recipe sets it; only clear scalar defaults
of the wrong type are errors; registration hooks may be generators; `xfer plugins --check`
exits non-zero only when it found a problem."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.errors import PluginError, RecipeError
from xfer.core.hookspecs import hookimpl
from xfer.core.plugins import PluginHost, set_default_host
from xfer.core.recipes.recipe import load_recipe
from xfer.core.specs import ComponentSpec
from xfer.testing import make_host, write_recipe

HEADER = """
from __future__ import annotations
import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NewType

def run(ctx):
    pass

class Color(enum.Enum):
    red = "red"

Lang = NewType("Lang", str)

"""

# The reviewer's probe plugins (probecfg): every one of these worked before the checks came in.
LENIENT = """
@dataclass
class Config:
    extra: list = field(default_factory=list)
    table: dict = field(default_factory=dict)
    langs: Sequence[str] = ("en", "de")
    fn: Callable[[int], int] | None = None
    color: Color = Color.red
    lang: Lang = Lang("en")
    stop: set[str] = field(default_factory=set)
    threshold: float = math.nan
    max_examples: int = None  # type: ignore
    data: Path = Path("${XFER_LENIENT_UNSET_VAR}/x")
    seed: int = 2**63
    lr: float = 1
    steps: int = 1e4  # type: ignore
    labels: list[str] = ("a", 3)  # type: ignore
    where: str | Path = "x"
    path: Path = "data/x.txt"  # type: ignore
"""


def stage_host(name: str, config_source: str, directory: Path) -> tuple[PluginHost, object]:
    (directory / "config.py").write_text(textwrap.dedent(HEADER) + textwrap.dedent(config_source))

    class Plugin:
        @hookimpl
        def xfer_stages(self) -> list:
            return [ComponentSpec("stage", "len.s", f"{name}.config:run", "1", f"{name}.config:Config")]

    host = make_host()
    record = host.add_object(Plugin(), "len")
    assert record.error is None
    return host, record


def test_fields_recipes_cannot_set_do_not_refuse_the_component(pkg: tuple[str, Path], tmp_path: Path) -> None:
    name, directory = pkg
    host, record = stage_host(name, LENIENT, directory)
    cls = host.config_class("stage", "len.s")
    assert cls is not None and record.problems == {}  # type: ignore[attr-defined]
    recipe = load_recipe(write_recipe(tmp_path, "name: p\nstages:\n  s:\n    kind: len.s\n"), [], host)
    assert recipe.stages["s"].config.color.name == "red", "defaults used"


def test_bare_list_dict_and_sequence_fields_are_read_from_recipes(pkg: tuple[str, Path], tmp_path: Path) -> None:
    name, directory = pkg
    host, _ = stage_host(name, LENIENT, directory)
    text = (
        "name: p\nstages:\n  s:\n    kind: len.s\n    extra: [1, a, {b: 2}]\n    table: {a: 1, b: [x]}\n"
        "    langs: [fr]\n    fn: null\n"
    )
    config = load_recipe(write_recipe(tmp_path, text), [], host).stages["s"].config
    assert config.extra == [1, "a", {"b": 2}] and config.table == {"a": 1, "b": ["x"]}
    assert config.langs == ["fr"] and config.fn is None
    with pytest.raises(RecipeError, match=r"stages.s.langs: expected a list of strings, got str 'fr'"):
        load_recipe(write_recipe(tmp_path, "name: p\nstages:\n  s:\n    kind: len.s\n    langs: fr\n"), [], host)


@pytest.mark.parametrize(
    ("key", "value", "type_text"),
    [
        ("fn", "os.path.join", "Callable[[int], int]"),
        ("color", "red", "Color"),
        ("lang", "de", "Lang"),
        ("stop", "[a]", "set[str]"),
    ],
)
def test_setting_a_field_recipes_cannot_give_is_an_error_at_its_line(
    key: str, value: str, type_text: str, pkg: tuple[str, Path], tmp_path: Path
) -> None:
    name, directory = pkg
    host, _ = stage_host(name, LENIENT, directory)
    recipe = write_recipe(tmp_path, f"name: p\nstages:\n  s:\n    kind: len.s\n    {key}: {value}\n")
    with pytest.raises(RecipeError) as invalid:
        load_recipe(recipe, [], host)
    text = str(invalid.value)
    column = 7 + len(key)
    assert f"{recipe.resolve()}:5:{column}: stages.s.{key}: stage 'len.s' from len ((object) -): " in text
    assert f"config field {key!r}: type " in text and type_text in text and "cannot be set from a recipe" in text
    assert "Traceback" not in text and "TypeError" not in text


def test_plugins_check_and_explain_show_unsettable_fields_as_notes(
    pkg: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    name, directory = pkg
    host, _ = stage_host(name, LENIENT, directory)
    set_default_host(host)
    try:
        assert cli.main(["plugins", "--check"]) == 0, "notes are not problems"
        out = capsys.readouterr().out
        assert "note: field 'color': type Color cannot be set from a recipe" in out
        assert "note: field 'stop': type set[str] cannot be set from a recipe" in out
        assert "note: field 'extra'" not in out and "note: field 'langs'" not in out, "bare list, Sequence: readable"
        assert "BROKEN" not in out
        assert cli.main(["plugins", "--check", "--json"]) == 0
        component = next(p for p in json.loads(capsys.readouterr().out) if p["name"] == "len")["components"][0]
        assert component["error"] is None and any("'fn'" in n for n in component["notes"])
        assert cli.main(["explain", "stage", "len.s"]) == 0
        assert "note: field 'lang': type " in capsys.readouterr().out
    finally:
        set_default_host(None)


REFUSED_DEFAULTS = {
    "str_for_bool": ("flag: bool = 'no'", "flag", "expected true or false, got str"),
    "int_for_bool": ("flag: bool = 1", "flag", "expected true or false, got int"),
    "str_for_int": ("n: int = '3'", "n", "expected an integer, got str"),
    "bool_for_float": ("lr: float = True", "lr", "expected a number, got bool"),
    "path_for_str": ("out: str = Path('x')", "out", "got PosixPath"),
    "int_for_str": ("out: str = 3", "out", "expected a string, got int"),
    "str_for_optional_int": ("n: int | None = 'x'", "n", "got str"),
    "nested_instance": (
        "inner: Inner = field(default_factory=lambda: Inner(lr='fast'))",
        "inner",
        "lr: expected a number, got str",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED_DEFAULTS))
def test_clear_scalar_default_mismatches_are_refused(case: str, pkg: tuple[str, Path]) -> None:
    name, directory = pkg
    line, field_name, problem = REFUSED_DEFAULTS[case]
    source = f"@dataclass\nclass Inner:\n    lr: float = 1e-3\n\n@dataclass\nclass Config:\n    {line}\n"
    host, _ = stage_host(name, source, directory)
    with pytest.raises(PluginError) as raised:
        host.config_class("stage", "len.s")
    message = str(raised.value)
    assert f"config field {field_name!r}: default " in message and problem in message, message


def test_a_generator_registration_hook_registers_its_specs(pkg: tuple[str, Path]) -> None:
    name, directory = pkg
    (directory / "plugin.py").write_text(
        textwrap.dedent(
            """
            from xfer.core import ComponentSpec, hookimpl
            XFER_NAMESPACE = "gen"

            @hookimpl
            def xfer_stages():
                yield ComponentSpec(kind="stage", name="gen.s", target="xfer.testing.bow:run_fit", version="1")
            """
        )
    )
    host = make_host()
    record = host.add_module(f"{name}.plugin")
    assert record.error is None and [c.name for c in record.components] == ["gen.s"]
    assert host.find("stage", "gen.s") is not None


def test_what_a_registration_hook_may_not_return() -> None:
    spec = ComponentSpec("task", "odd/t", "xfer.core.toy.tasks:ToyPosTask", "1")

    class Broken:
        @hookimpl
        def xfer_tasks(self) -> Iterator[ComponentSpec]:
            yield spec
            raise RuntimeError("third spec failed")

    class Text:
        @hookimpl
        def xfer_tasks(self) -> str:
            return "odd/t"

    class Single:
        @hookimpl
        def xfer_tasks(self) -> ComponentSpec:
            return spec

    class Mapping:
        @hookimpl
        def xfer_tasks(self) -> dict:
            return {"odd/t": spec}

    host = make_host()
    broken = host.add_object(Broken(), "odd")
    assert broken.error and broken.error.startswith("registration hook failed: RuntimeError: third spec failed")
    text = make_host().add_object(Text(), "odd")
    assert text.error and "must return a list of ComponentSpec, got str" in text.error
    single = make_host().add_object(Single(), "odd")
    assert single.error and "must return a list of ComponentSpec, got ComponentSpec (return a list" in single.error
    mapping = make_host().add_object(Mapping(), "odd")
    assert mapping.error and "must return a list of ComponentSpec, got dict" in mapping.error


def test_plugins_check_exits_non_zero_on_a_failed_plugin(
    pkg: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    name, directory = pkg
    host = make_host()
    set_default_host(host)
    try:
        assert cli.main(["plugins", "--check"]) == 0, "a clean host passes"
        capsys.readouterr()
        (directory / "bad.py").write_text("raise ImportError('nope')\n")
        host.add_module(f"{name}.bad", name="bad")
        assert cli.main(["plugins", "--check"]) == 1
        captured = capsys.readouterr()
        assert "FAILED: import failed" in captured.out and "problems found" in captured.err
        assert cli.main(["plugins", "--check", "--json"]) == 1
        capsys.readouterr()
        assert cli.main(["plugins"]) == 0, "a plain listing still exits 0"
    finally:
        set_default_host(None)

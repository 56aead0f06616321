"""More of a third-party plugin author's mistakes, each caught at the component with a message naming it."""

from __future__ import annotations

import dataclasses

import pytest

from xfer.core import knob
from xfer.core.errors import PluginError
from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec
from xfer.testing import make_host


@dataclasses.dataclass
class OutOfBoundsConfig:
    rate: float = knob(-0.5, "A rate; must not be negative.", ge=0)
    depth: int = knob(3, "Within bounds.", ge=1, le=8)
    sentinel: float | None = knob(None, "None is a sentinel, not out of bounds.", ge=0)


@dataclasses.dataclass
class InBoundsConfig:
    rate: float = knob(0.5, "A rate.", ge=0, lt=1)
    nan: float = knob(float("nan"), "NaN is a sentinel.", ge=0)


def _host_with(config: type) -> tuple:
    class Plugin:
        @hookimpl
        def xfer_stages(self) -> list:
            return [ComponentSpec("stage", "author.fit", "xfer.testing.bow:run_fit", "1", config)]

    host = make_host()
    record = host.add_object(Plugin(), "author")
    assert record.error is None, record.error
    return host, record


def test_a_default_outside_its_own_knob_bounds_is_a_plugin_error_naming_the_field() -> None:
    # Bounds were checked only on values a recipe gives: a recipe leaving `rate` out ran with -0.5.
    host, record = _host_with(OutOfBoundsConfig)
    with pytest.raises(PluginError) as caught:
        host.config_class("stage", "author.fit")
    message = str(caught.value)
    assert "stage 'author.fit'" in message
    assert "config field 'rate': default -0.5 is out of its knob's bounds: must be at least 0" in message
    assert "test_plugin_author2.py" in message  # the field's line in the author's file
    assert "depth" not in message and "sentinel" not in message
    assert "rate" in record.problems["author.fit"]


def test_defaults_within_bounds_and_sentinels_pass() -> None:
    host, record = _host_with(InBoundsConfig)
    assert host.config_class("stage", "author.fit") is InBoundsConfig
    assert record.problems == {}


def test_an_entry_point_naming_a_missing_module_says_to_fix_the_entry_point() -> None:
    # A typo in `mytasks = "xfer.mytasks.plugn"` used to read "(at <frozen importlib._bootstrap>:1140)".
    import importlib

    from xfer.core.plugins import PluginRecord

    host = make_host()
    record = PluginRecord("mytasks", "xfer-mytasks", "0.1.0", "xfer.no_such_pkg_h101.plugn")
    host._add(record, lambda: importlib.import_module("xfer.no_such_pkg_h101.plugn"))
    assert record.error is not None
    assert "frozen importlib" not in record.error
    assert "No module named 'xfer.no_such_pkg_h101'" in record.error
    assert "'xfer.no_such_pkg_h101.plugn' does not import" in record.error
    assert "[project.entry-points.xfer]" in record.error
    with pytest.raises(PluginError, match=r"plugin 'mytasks' \(distribution xfer-mytasks 0.1.0\).*entry-points"):
        host.get("task", "mytasks/tsv")


def test_a_plugin_module_path_that_does_not_exist_says_to_check_xfer_plugin_modules() -> None:
    record = make_host().add_module("xfer.no_such_pkg_h101.plugin")
    assert record.name == "no_such_pkg_h101"
    assert record.error is not None
    assert "frozen importlib" not in record.error
    assert "'xfer.no_such_pkg_h101.plugin' does not import; check XFER_PLUGIN_MODULES" in record.error

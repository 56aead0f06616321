"""The plugin host: loads plugins in isolation and answers "which component is called X?".

Plugins come from the `xfer` entry-point group (the entry-point name is the plugin's namespace),
from `XFER_PLUGIN_MODULES=pkg.mod,...` (development and tests; pytest's `PYTEST_PLUGINS`
idea), and from core's own built-in modules. Environment switches:

- `XFER_DISABLE_PLUGIN_AUTOLOAD=1`: load no entry points (built-ins and XFER_PLUGIN_MODULES only);
  any value but 1/true/yes/on/0/false/no/off is an error;
- `XFER_PLUGINS=a,b`: load only these entry-point plugins (a name matching none, nor the namespace
  of an XFER_PLUGIN_MODULES module, is recorded as a failed plugin, so the typo shows). Names are
  stripped and blank items mean nothing: `a, ,b` is `a,b`, and a value of blanks and commas only
  (`" "`, `","`) is unset, as `""` is: every installed plugin loads.

A plugin that fails to import (including one that calls `sys.exit` or runs argparse at import),
has a misspelled hook (a function name, or a `@hookimpl`'s name or `specname`, that is no
hookspec), binds a hook name to something other than a function (`xfer_tasks = [...]`), is a
function itself (an entry point naming `pkg.plugin:xfer_tasks`), is a module another entry point
already loaded, or whose registration hook raises or returns something other than a list of specs
is recorded with its error and skipped; asking for one of its components later raises a
`PluginError` that names its distribution and the original error. Error locations point at the
plugin's own file and line where the traceback passes through it. A plugin whose `xfer_commands`
is broken keeps its components but is marked failed. Each plugin's import time is recorded
(`xfer plugins` shows the slow ones).

A component's config class and target are checked when first resolved (`config_class`, which
recipe validation and `xfer explain` call), not at start-up: a config that is not a dataclass,
an annotation that does not resolve, a scalar default of the wrong type (`"no"` for a bool) or a
numeric default outside its own knob's bounds (`knob(-1.0, ..., ge=0)`), a path or reference
field's default of another kind (`knob(5)` for a `Path`, a bare string for a `TaskRef`, the class
`TrainConfig` for an instance of it), in nested config dataclasses too, is a `PluginError` naming
the component, its provider and the field, and so is a target that does not import or cannot be
what its kind is used as (a stage that is not `run(ctx)`, a task that is not a concrete `Task`
subclass, an objective class that is not a `torch.nn.Module`, a metric that cannot take
`(golds, predictions)`), a config field named like the key that names the component in a
recipe (`kind` for a stage, `name` for a task or objective) and a `growable` key that is not an
`int` field. The problem is also kept on the plugin's record (`problems`). A plugin whose hook
returns one component twice is a failed plugin. A field whose type recipes cannot give
(`Callable`, an `Enum`, `set[str]`) is no error: a recipe that leaves it out works, one that sets
it gets an error at its line; it is kept as a note (`notes`, shown by `xfer plugins --check` and
`xfer explain`).

Every hook is called through pluggy (`pm.hook.<name>`, or `pm.subset_hook_caller` to call one
plugin's registration hooks), so `specname`, `tryfirst`/`trylast` and hook wrappers behave as
pluggy documents. As in pytest, a function named like a hookspec is an implementation even
without the `@hookimpl` marker. Lifecycle observers stay isolated: each (non-wrapper) lifecycle
implementation is guarded when its plugin registers, so an exception in one is reported as a
warning and the other observers and the run go on; each gets its own copy of the dicts and the
config it is handed (editing them in place reaches neither the run nor the other observers). Hook
wrappers of lifecycle hooks are not guarded, but they too are handed copies (one copy, shared by the
wrappers), so editing those in place cannot reach the run either.

A namespace has one owner: two distributions or two `XFER_PLUGIN_MODULES` modules claiming one
make its components unusable (an error naming both), and a plugin claiming a built-in namespace
(`core`, `toy`) is refused on its own record while the built-in keeps working.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import importlib
import importlib.metadata
import inspect
import math
import os
import re
import sys
import time
import traceback
import types
import typing
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any, NoReturn

import pluggy

from xfer.core import hookspecs
from xfer.core.config import ComponentRef, Files, Input, bound_problem
from xfer.core.errors import PluginError
from xfer.core.recipes.schema import (
    _article,
    _default_problem,
    config_class_notes,
    config_class_problems,
    dataclasses_in,
    did_you_mean,
    note_owner,
)
from xfer.core.specs import CommandSpec, ComponentSpec, import_object, namespace_of

BUILTIN_PLUGINS = {"core": "xfer.core.builtin", "toy": "xfer.core.toy.plugin"}
# The distribution of the failed record an XFER_PLUGINS name that no installed plugin has gets.
_ALLOW_PLACEHOLDER = "(XFER_PLUGINS)"


@dataclass
class PluginRecord:
    """One plugin as the host saw it: where it came from and what it did or why it failed."""

    name: str
    distribution: str
    version: str
    module: str
    hooks: list[str] = field(default_factory=list)
    components: list[ComponentSpec] = field(default_factory=list)
    error: str | None = None
    # Seconds spent importing the plugin's module (its entry point's target).
    import_seconds: float = 0.0
    # Problems found later in single components (a broken config class or target), by component name.
    problems: dict[str, str] = field(default_factory=dict)
    # What recipes cannot set in a component's config (`field x: type T cannot be set from a recipe`).
    notes: dict[str, list[str]] = field(default_factory=dict)
    # The package whose frames are the plugin's own (for error locations); derived from `module`.
    package: str = ""

    @property
    def label(self) -> str:
        return f"plugin {self.name!r} (distribution {self.distribution} {self.version})"


def _default_namespace(module: str) -> str:
    """`xfer.demo.plugin` -> `demo`; `my_plugin` -> `my_plugin` (override with XFER_NAMESPACE)."""
    parts = module.split(".")
    return parts[-2] if parts[-1] in ("plugin", "plugins") and len(parts) > 1 else parts[-1]


def _package_of(module: str) -> str:
    """The package whose code counts as a plugin's own: `xfer.mytask.plugin` -> `xfer.mytask`,
    `my_plugin` -> `my_plugin`, `pkg.mod:attr` -> `pkg`."""
    module = module.partition(":")[0].strip()
    return module.rsplit(".", 1)[0] if "." in module else module


def _short_error(exc: BaseException, package: str = "") -> str:
    """`Type: message (at file:line)`, the location being the innermost frame of `package` (the
    plugin's own code, not core's or importlib's frames) if the traceback passes through it."""
    if isinstance(exc, _Refused):
        return str(exc)
    frames = list(traceback.walk_tb(exc.__traceback__))
    own = [
        (frame, line)
        for frame, line in frames
        if package
        and (name := str(frame.f_globals.get("__name__", "")))
        and (name == package or name.startswith(package + "."))
    ]
    chosen = (own or frames)[-1:]
    where = f" (at {chosen[0][0].f_code.co_filename}:{chosen[0][1]})" if chosen else ""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        # no frame of the broken file runs: the traceback ends in `<frozen importlib._bootstrap>`, and
        # str(exc) gives only the file's base name; the error itself knows the full path and line
        return f"{type(exc).__name__}: {exc.msg} (at {exc.filename}:{exc.lineno})"
    if isinstance(exc, SystemExit):
        return f"SystemExit({exc.code!r}): the plugin exited the process{where}"
    return f"{type(exc).__name__}: {exc}{where}"


# First-party distributions whose name is not `xfer-<namespace>`.
KNOWN_DISTRIBUTIONS = {"glue": "xfer-tasks-glue", "conll": "xfer-tasks-conll", "squad": "xfer-tasks-squad"}


def install_hint(namespace: str) -> str:
    """What to do about a namespace no loaded plugin provides: enable it if its distribution is
    installed but was not loaded (XFER_PLUGINS / XFER_DISABLE_PLUGIN_AUTOLOAD), else install it
    (by convention namespace `x` comes from distribution `xfer-x`)."""
    for ep in importlib.metadata.entry_points(group="xfer"):
        if ep.name == namespace:
            dist = ep.dist.name if ep.dist else "its distribution"
            return f"{dist} is installed but was not loaded: check XFER_PLUGINS and XFER_DISABLE_PLUGIN_AUTOLOAD"
    dist = KNOWN_DISTRIBUTIONS.get(namespace, f"xfer-{namespace}")
    return f"install the distribution that provides it (pip install {dist})"


LIFECYCLE_HOOKS = tuple(
    n for n in hookspecs.HOOK_NAMES if n not in hookspecs.REGISTRATION_HOOKS and n != "xfer_commands"
)


class _Manager(pluggy.PluginManager):
    """pluggy's manager, plus pytest's rule: `xfer_*` functions named like a hookspec are
    implementations even without the marker (a forgotten `@hookimpl` must not be silently ignored)."""

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name in hookspecs.HOOK_NAMES:
            found = inspect.getattr_static(plugin, name, None)
            if found is not None and callable(getattr(plugin, name, None)):
                return {}
        return opts


class _Refused(Exception):
    """The host refuses what a plugin's hook returned; the message says where (no traceback location)."""


def _guarded(plugin_name: str, hook: str, function: Any) -> Any:
    """A lifecycle implementation whose exceptions become warnings (observers must not stop runs)."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        # each observer gets its own copy of what it is handed: the trainer passes the very dict it
        # reads the main metric from next, so a logger renaming keys in place (`dev/accuracy`) failed
        # the stage with a bare KeyError, and one rescaling values changed which checkpoint was best
        args = tuple(_own_copy(value) for value in args)
        kwargs = {name: _own_copy(value) for name, value in kwargs.items()}
        try:
            return function(*args, **kwargs)
        except (Exception, SystemExit) as exc:  # `sys.exit` in a logger ended the whole run (Ctrl-C still does)
            warnings.warn(f"plugin {plugin_name!r}: {hook} failed: {_short_error(exc)}", stacklevel=1)
            return None

    return call


def _own_copy(value: Any) -> Any:
    """A copy of a lifecycle hook's mutable argument (a dict, a config dataclass); other values as they are."""
    if isinstance(value, (dict, list)) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        try:
            return copy.deepcopy(value)
        except Exception:  # something in it cannot be copied: a shallow copy of a container still protects its keys
            return copy.copy(value) if isinstance(value, (dict, list)) else value
    return value


def _allowed_by_env() -> list[str] | None:
    """The plugin names XFER_PLUGINS allows, or None (every installed plugin) when it names none.

    Why blanks count as unset: `XFER_PLUGINS=" "` or `","` (a shell variable expanded empty into a
    list) loaded no installed plugin, while `XFER_PLUGINS=""` loaded them all; a value naming no
    plugin is no allow-list, so each of them now loads all, as unset does."""
    names = [name.strip() for name in os.environ.get("XFER_PLUGINS", "").split(",")]
    return [name for name in names if name] or None


class PluginHost:
    """Holds the pluggy manager, the plugin records and the component registry."""

    def __init__(self, autoload: bool | None = None, allow: Iterable[str] | None = None, modules: Iterable[str] = ()):
        self.pm = _Manager("xfer")
        self.pm.add_hookspecs(hookspecs)
        self.plugins: dict[str, PluginRecord] = {}
        self.components: dict[tuple[str, str], ComponentSpec] = {}
        self.conflicts: dict[tuple[str, str], list[str]] = {}
        # A namespace that two distributions claim (their entry points share a name): "dist version" of each.
        self.namespace_conflicts: dict[str, list[str]] = {}
        self._commands: dict[str, list[CommandSpec]] = {}
        self._checked: dict[tuple[str, str], type | None] = {}
        self._targets_ok: set[tuple[str, str]] = set()
        if autoload is None:
            autoload = not _env_flag("XFER_DISABLE_PLUGIN_AUTOLOAD")
        if allow is None:
            allow = _allowed_by_env()
        self.allow = set(allow) if allow is not None else None
        dist = self._own_distribution()
        for name, module in BUILTIN_PLUGINS.items():
            self._add(PluginRecord(name, *dist, module), lambda m=module: importlib.import_module(m))
        known = self._load_entry_points() if autoload else None
        extra = [m.strip() for m in os.environ.get("XFER_PLUGIN_MODULES", "").split(",") if m.strip()]
        for module in [*extra, *modules]:
            self.add_module(module)
        if known is not None:
            self._record_unmatched_allow(known)

    # --- loading -------------------------------------------------------------------------------

    @staticmethod
    def _own_distribution() -> tuple[str, str]:
        try:
            return "xfer-core", importlib.metadata.version("xfer-core")
        except importlib.metadata.PackageNotFoundError:
            return "xfer-core", "0+unknown"

    def _load_entry_points(self) -> list[str]:
        """Load the installed plugins XFER_PLUGINS allows; the names of every installed entry point."""
        entry_points = sorted(importlib.metadata.entry_points(group="xfer"), key=lambda e: e.name)
        for ep in entry_points:
            if self.allow is not None and ep.name not in self.allow:
                continue
            dist = ep.dist.name if ep.dist else "unknown"
            version = ep.dist.version if ep.dist else "unknown"
            self._add(PluginRecord(ep.name, dist, version, ep.value), functools.partial(_load_entry_point, ep))
        return [ep.name for ep in entry_points]

    def _record_unmatched_allow(self, known: list[str]) -> None:
        """An allow-list entry that matches nothing is a typo, not a wish to load nothing: shown as
        a failed plugin, so `xfer plugins` and a recipe needing the plugin both say so. A name that
        an XFER_PLUGIN_MODULES module (which XFER_PLUGINS does not filter) took is matched: its
        placeholder, made before the modules loaded, was a second claim to their namespace, and
        every component of the module was refused as "claimed by two plugins"."""
        taken = {record.name for record in self.plugins.values()}
        for name in sorted((self.allow or set()) - set(known) - set(BUILTIN_PLUGINS) - taken):
            record = PluginRecord(name, _ALLOW_PLACEHOLDER, "-", "")
            record.error = (
                f"XFER_PLUGINS names {name!r}, but no installed distribution registers an `xfer` entry point "
                f"of that name{did_you_mean(name, known)}"
            )
            self.plugins[name] = record

    def add_module(self, module: str, name: str | None = None) -> PluginRecord:
        """Register a plugin module by import path (namespace: `XFER_NAMESPACE` or the module's name).

        `pkg.mod:plugin` registers that object of the module, as an entry point may name it (the
        entry point's value copied here read "No module named 'pkg.mod:plugin' (at <frozen
        importlib._bootstrap>)", under the namespace `mod:plugin`)."""
        path, _, attr = (part.strip() for part in module.partition(":"))
        record = PluginRecord(name or "", "(module)", "-", module)
        started = time.perf_counter()
        try:
            loaded = importlib.import_module(path)
            plugin = import_object(f"{path}:{attr}") if attr else loaded
        except (Exception, SystemExit) as exc:  # isolated: recorded, not fatal (sys.exit/argparse too)
            record.name = record.name or _default_namespace(path)
            record.package = _package_of(module)
            problem = (
                _missing_attribute(exc, record) or _missing_module(exc, record) or _short_error(exc, record.package)
            )
            record.error = f"import failed: {problem}"
            record.import_seconds = time.perf_counter() - started
            # beside, not over, a plugin of that name (`core`: a failed `x.core` hid the built-in's record)
            self.plugins[self._free_key(record)] = record
            return record
        record.import_seconds = time.perf_counter() - started
        record.name = name or getattr(loaded, "XFER_NAMESPACE", _default_namespace(path))
        if self.pm.is_registered(plugin):  # already loaded through its entry point
            return next(r for r in self.plugins.values() if r.module in (module, f"{module}:") or r.name == record.name)
        return self._add(record, lambda: plugin)

    def add_object(self, plugin: Any, name: str) -> PluginRecord:
        """Register an in-memory plugin object (tests, notebooks)."""
        return self._add(PluginRecord(name, "(object)", "-", repr(plugin)), lambda: plugin)

    def _add(self, record: PluginRecord, load: Any) -> PluginRecord:
        # Two distributions may claim one namespace; both are kept, and the namespace is refused in
        # lookups (`get`): otherwise a second distribution could add components to another's
        # namespace, or shadow a plugin that XFER_PLUGINS selects by that name.
        first = self.plugins.get(record.name)
        if first is not None and first.distribution == _ALLOW_PLACEHOLDER:  # a module added later took it
            del self.plugins[record.name]
            first = None
        key = self._free_key(record)
        self.plugins[key] = record
        record.package = record.package or _package_of(record.module)
        if first is not None and BUILTIN_PLUGINS.get(first.name) == first.module:
            # core's own namespaces are never shared: a plugin claiming `core` made every `core.*`
            # component unusable ("claimed by two distributions ... uninstall one": xfer-core), or,
            # from a second XFER_PLUGIN_MODULES module, added components to it unnoticed
            record.error = (
                f"namespace {record.name!r} belongs to xfer-core's built-in plugin ({first.module}); "
                f"{_claimant(record)} cannot register in it: {_rename_hint(record)}"
            )
            return record
        if first is not None and (
            first.distribution != record.distribution
            or (record.distribution == "(module)" and first.module != record.module)
        ):
            claims = self.namespace_conflicts.setdefault(record.name, [_claimant(first)])
            claims.append(_claimant(record))
            claims.sort()  # discovery order is the file system's
        started = time.perf_counter()
        try:
            plugin: ModuleType | Any = load()
        except (Exception, SystemExit) as exc:  # isolated: a broken plugin must not break the host
            record.import_seconds += time.perf_counter() - started
            problem = (
                _missing_attribute(exc, record) or _missing_module(exc, record) or _short_error(exc, record.package)
            )
            record.error = f"import failed: {problem}"
            return record
        record.import_seconds += time.perf_counter() - started
        if isinstance(plugin, type):  # `module:Class`: its package is the class's own
            record.package = _package_of(plugin.__module__)
            methods = sorted(
                n for n in hookspecs.HOOK_NAMES if isinstance(inspect.getattr_static(plugin, n, None), FunctionType)
            )
            if methods:  # pluggy would call them without `self`: "missing 1 required positional argument"
                record.error = (
                    f"the plugin is the class {plugin.__module__}.{plugin.__qualname__}, whose hooks "
                    f"{', '.join(methods)} are instance methods: point the entry point at an instance "
                    f"(`plugin = {plugin.__name__}()` in the module, `module:plugin`) or at the module itself"
                )
                return record
        elif not isinstance(plugin, ModuleType):  # an object (add_object, `module:attr` entry point)
            record.package = _package_of(getattr(type(plugin), "__module__", "") or record.package)
        if self.pm.is_registered(plugin):
            record.error = self._already_registered(plugin, record)
            return record
        try:
            problems = self._hook_problems(plugin)
        except (Exception, SystemExit) as exc:  # an attribute that raises when read (a property)
            record.error = f"registration failed: {_short_error(exc, record.package)}"
            return record
        if problems:
            record.error = "; ".join(problems)
            return record
        try:
            self.pm.register(plugin, name=key)
            self.pm.check_pending()
        except (Exception, SystemExit) as exc:
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            record.error = (
                f"registration failed: {self._signature_error(plugin, exc) or _short_error(exc, record.package)}"
            )
            return record
        record.hooks = sorted(caller.name for caller in self.pm.get_hookcallers(plugin) or [])
        if not record.hooks and inspect.isroutine(plugin):
            self.pm.unregister(plugin)
            record.error = _a_function_not_a_plugin(plugin, record)
            return record
        key_name = key
        self._guard_lifecycle(plugin, key)
        try:
            specs = self._collect(plugin, record)
        except (Exception, SystemExit) as exc:
            self.pm.unregister(plugin)
            record.error = f"registration hook failed: {_short_error(exc, record.package)}"
            return record
        for spec in specs:
            key = (spec.kind, spec.name)
            if key in self.components:
                self.conflicts.setdefault(key, [self.components[key].provider]).append(spec.provider)
            else:
                self.components[key] = spec
        record.components = specs
        self._collect_commands(plugin, key_name, record)
        return record

    def _hook_problems(self, plugin: Any) -> list[str]:
        """What is wrong with the plugin's hooks before pluggy sees them: an `xfer_*` function or a
        `@hookimpl` (its name, or its `specname`) that is no hookspec, said with a did-you-mean and,
        for a marked one, where it is (pluggy's own "unknown hook ... in plugin <module ...>"
        pointed at pluggy's file); and a hook name bound to something that cannot be called
        (`xfer_stages = [ComponentSpec(...)]`), which pluggy silently ignored: the plugin loaded
        with no components and no error. Reading an attribute may raise (a property): the caller
        reports it."""
        problems = []
        for attr in sorted(dir(plugin)):
            value = getattr(plugin, attr, None)
            if attr in hookspecs.HOOK_NAMES and not callable(value):
                body = "return [...]" if attr in (*hookspecs.REGISTRATION_HOOKS, "xfer_commands") else "..."
                problems.append(
                    f"{attr} is {_article(type(value).__name__)} {type(value).__name__}, not a function: "
                    f"a hook must be one (`@hookimpl` then `def {attr}(): {body}`)"
                )
                continue
            if attr.startswith("xfer_") and callable(value) and attr not in hookspecs.HOOK_NAMES:
                problems.append(f"unknown hook {attr!r}{did_you_mean(attr, hookspecs.HOOK_NAMES)}")
                continue
            opts = self.pm.parse_hookimpl_opts(plugin, attr)
            hook = (opts or {}).get("specname") or attr
            if opts is None or hook in hookspecs.HOOK_NAMES:
                continue
            code = getattr(inspect.unwrap(value), "__code__", None)
            where = f" at {code.co_filename}:{code.co_firstlineno}" if code is not None else ""
            marked = f"the specname of {attr}" if hook != attr else "@hookimpl"
            problems.append(f"unknown hook {hook!r} ({marked}{where}){did_you_mean(hook, hookspecs.HOOK_NAMES)}")
        return problems

    def _already_registered(self, plugin: Any, record: PluginRecord) -> str:
        """The error for a plugin object that another record registered already: one module named by
        two entry points (of one distribution, or of two installed under different names). pluggy's
        own refusal printed the module and the whole registry on one line."""
        first = self.plugins.get(self.pm.get_name(plugin) or "")
        if first is None:
            return f"{record.module} is already registered as a plugin; register it once"
        if first.distribution == record.distribution and record.distribution not in ("(module)", "(object)"):
            fix = (
                f"keep one of {record.distribution}'s `xfer` entry points naming it "
                "([project.entry-points.xfer] in its pyproject.toml) and reinstall it"
            )
        else:
            fix = f"uninstall one of {_claimant(first)} and {_claimant(record)}"
        return f"{record.module} is already loaded as {first.label}: a module is one plugin; {fix}"

    def _free_key(self, record: PluginRecord) -> str:
        """The key `record` is kept under: its name, else (a second claim to the namespace) its name
        with where it comes from, so that no record replaces another (`xfer plugins` shows both)."""
        for key in (record.name, f"{record.name} ({record.distribution})", f"{record.name} ({_claimant(record)})"):
            if key not in self.plugins:
                return key
        return f"{record.name} ({_claimant(record)}, #{len(self.plugins)})"

    def _signature_error(self, plugin: Any, exc: BaseException) -> str | None:
        """pluggy's refusal of a hook implementation that names an argument the hook does not pass
        (`xfer_stage_start(run_dir, stage_name)`), said on one line at the plugin's own `def` with the
        hook's arguments and a did-you-mean; pluggy's text spans three lines and its location was
        pluggy's own file. None for any other error."""
        if not isinstance(exc, pluggy.PluginValidationError):
            return None
        for attr in dir(plugin):
            opts = self.pm.parse_hookimpl_opts(plugin, attr)
            if opts is None:
                continue
            hook = opts.get("specname") or attr
            caller = getattr(self.pm.hook, hook, None)
            spec = getattr(caller, "spec", None)
            function = getattr(plugin, attr, None)
            if spec is None or function is None:
                continue
            try:
                parameters = inspect.signature(function).parameters.values()
            except (TypeError, ValueError):
                continue
            positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            names = [p.name for p in parameters if p.kind in positional and p.default is inspect.Parameter.empty]
            unknown = [n for n in names if n not in spec.argnames]
            if not unknown:
                continue
            hints = "".join(did_you_mean(n, spec.argnames) for n in unknown)
            passed = f"its arguments: {', '.join(spec.argnames)}" if spec.argnames else "it passes no arguments"
            code = getattr(inspect.unwrap(function), "__code__", None)
            where = f" (at {code.co_filename}:{code.co_firstlineno})" if code is not None else ""
            return (
                f"{attr}({', '.join(names)}) takes {', '.join(map(repr, unknown))}, which {hook} does not pass "
                f"({passed}; take only the ones you use){hints}{where}"
            )
        return None

    def _guard_lifecycle(self, plugin: Any, name: str) -> None:
        for caller in self.pm.get_hookcallers(plugin) or []:
            if caller.name not in LIFECYCLE_HOOKS:
                continue
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin and not (impl.hookwrapper or impl.wrapper):
                    impl.function = _guarded(name, caller.name, impl.function)

    def _call_one(self, plugin: Any, hook: str) -> list[Any]:
        """Results of `hook` from `plugin` alone, called through pluggy (markers, wrappers apply)."""
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        return self.pm.subset_hook_caller(hook, remove_plugins=others)()

    def _where_hook(self, plugin: Any, hook: str) -> str:
        """` (in xfer_tasks at file:line)`: where the plugin defines `hook` (for errors in what it returned)."""
        for impl in getattr(self.pm.hook, hook).get_hookimpls():
            if impl.plugin is plugin:
                code = getattr(inspect.unwrap(impl.function), "__code__", None)
                if code is not None:
                    return f" (in {impl.function.__name__} at {code.co_filename}:{code.co_firstlineno})"
        return ""

    def _items(self, plugin: Any, hook: str, result: Any, item: type) -> list[Any]:
        """What one registration hook returned, as a list: None, a list or tuple, or any other
        iterable (a generator that yields specs); a single spec, a string or a mapping is refused."""
        if result is None:
            return []
        if isinstance(result, (list, tuple)):
            return list(result)
        if isinstance(result, (str, bytes, Mapping, ComponentSpec, CommandSpec)) or not isinstance(result, Iterable):
            hint = f" (return a list: [{item.__name__}(...)])" if isinstance(result, item) else ""
            raise _Refused(
                f"{hook} must return a list of {item.__name__}, got {type(result).__name__}{hint}"
                f"{self._where_hook(plugin, hook)}"
            )
        return list(result)  # a generator: its errors are the hook's ("registration hook failed")

    def _collect(self, plugin: Any, record: PluginRecord) -> list[ComponentSpec]:
        specs: list[ComponentSpec] = []
        provider = f"{record.name} ({record.distribution} {record.version})"
        for hook_name, kind in hookspecs.REGISTRATION_HOOKS.items():
            results = [self._items(plugin, hook_name, r, ComponentSpec) for r in self._call_one(plugin, hook_name)]
            for spec in (item for result in results for item in result):
                if not isinstance(spec, ComponentSpec):
                    raise _Refused(
                        f"{hook_name} must return a list of ComponentSpec, got a list holding {type(spec).__name__}"
                        f"{self._where_hook(plugin, hook_name)}"
                    )
                where = f" (declared at {spec.defined_at})" if spec.defined_at else self._where_hook(plugin, hook_name)
                if spec.kind != kind:
                    raise _Refused(
                        f"{hook_name} returned {spec.name!r} of kind {spec.kind!r}, expected {kind!r}{where}"
                    )
                if spec.namespace != record.name and not _NAMESPACE.match(record.name):
                    # the suggestion below would be a name ComponentSpec refuses ('xfer-mine/t')
                    raise _Refused(
                        f"the plugin's namespace {record.name!r} (its `xfer` entry point's name) cannot start a "
                        "component name: use lower-case letters, digits and _, e.g. "
                        f"{_suggested_namespace(record.name)!r} in `[project.entry-points.xfer]`, and name "
                        f"components after it{where}"
                    )
                if spec.namespace != record.name:
                    separator = spec.name[len(spec.namespace)]  # `/` for `other/task`, `.` for `other.stage`
                    raise _Refused(
                        f"component {spec.name!r} must be in the plugin's namespace {record.name!r} "
                        f"(e.g. '{record.name}{separator}{spec.name.split('.')[-1].split('/')[-1]}'){where}"
                    )
                # One plugin returning a name twice is its own bug: refused here, it was taken for two
                # providers clashing ("registered twice, by p and p; uninstall one of them").
                earlier = next((s for s in specs if (s.kind, s.name) == (spec.kind, spec.name)), None)
                if earlier is not None:
                    places = " and ".join(dict.fromkeys(x.defined_at for x in (earlier, spec) if x.defined_at))
                    raise _Refused(
                        f"{hook_name} returned {spec.kind} {spec.name!r} twice"
                        + (f" (declared at {places})" if places else "")
                    )
                specs.append(replace(spec, provider=provider))
        return specs

    def _collect_commands(self, plugin: Any, name: str, record: PluginRecord) -> None:
        """The plugin's CLI command specs (nothing of a command is imported). A broken
        `xfer_commands` marks the plugin failed (its components stay usable)."""
        self._commands[name] = []
        if self.pm.hook.xfer_commands not in (self.pm.get_hookcallers(plugin) or []):
            return
        try:
            found: list[CommandSpec] = []
            for result in self._call_one(plugin, "xfer_commands"):
                items = self._items(plugin, "xfer_commands", result, CommandSpec)
                bad = next((c for c in items if not isinstance(c, CommandSpec)), None)
                if bad is not None:
                    raise _Refused(
                        f"xfer_commands must return a list of CommandSpec, got a list holding {type(bad).__name__}"
                        f"{self._where_hook(plugin, 'xfer_commands')}"
                    )
                found += [replace(c, provider=name) for c in items]
        except (Exception, SystemExit) as exc:
            record.error = f"xfer_commands failed (its commands are left out): {_short_error(exc, record.package)}"
            return
        self._commands[name] = found

    # --- queries -------------------------------------------------------------------------------

    def failed(self) -> list[PluginRecord]:
        return [p for p in self.plugins.values() if p.error]

    def names(self, kind: str) -> list[str]:
        return sorted(name for k, name in self.components if k == kind)

    def find(self, kind: str, name: str) -> ComponentSpec | None:
        return self.components.get((kind, name))

    def get(self, kind: str, name: str) -> ComponentSpec:
        """The spec for `name`, or a PluginError that says why it is unavailable."""
        key = (kind, name)
        claims = self.namespace_conflicts.get(namespace_of(name))
        modules = [c for c in claims or [] if c.startswith("module ")]
        fix = self.conflict_fix(namespace_of(name))
        if key in self.conflicts:
            providers = self.conflicts[key]
            if claims and len(set(providers)) < len(providers):  # two modules: `mine ((module) -)` twice
                providers = claims
            raise PluginError(f"{kind} {name!r} is registered twice, by {' and '.join(providers)}; {fix}")
        if claims:
            raise PluginError(
                f"{kind} {name!r}: its namespace {namespace_of(name)!r} is claimed by two "
                f"{'plugins' if modules else 'distributions'}, {' and '.join(claims)}, so which plugin it comes "
                f"from is not defined; {fix}"
            )
        spec = self.components.get(key)
        if spec is not None:
            return spec
        raise PluginError(self.missing_message(kind, name))

    def conflict_fix(self, namespace: str) -> str:
        """How to end two plugins' claim to `namespace`: drop a module from XFER_PLUGIN_MODULES (or
        give it a namespace of its own), or uninstall a distribution; `xfer plugins` and `get` say it alike."""
        modules = [c for c in self.namespace_conflicts.get(namespace, []) if c.startswith("module ")]
        if modules:
            return (
                f"drop {' or '.join(c.removeprefix('module ') for c in modules)} from XFER_PLUGIN_MODULES, or give "
                "that module a namespace of its own (XFER_NAMESPACE = '...' in it)"
            )
        return "uninstall one of them"

    def missing_message(self, kind: str, name: str) -> str:
        namespace = namespace_of(name)
        holders = [r for r in self.plugins.values() if r.name == namespace]
        for record in holders if all(r.error for r in holders) else ():  # not a refused second claim
            if record.error:
                return f"{kind} {name!r} should come from {record.label}, which failed to load: {record.error}"
        known = self.names(kind)
        hint = did_you_mean(name, known)
        if not any(r.name == namespace for r in self.plugins.values()):
            if namespace == name:
                # `xfer explain model tiny` said "pip install xfer-tiny": `tiny` is a preset, a value of
                # a component's field, and a name without a namespace is no distribution's to provide
                unqualified = (
                    f"unknown {kind} {name!r}: component names are namespaced (`plugin.name` or `plugin/name`)"
                )
                tails = [n for n in known if n[len(namespace_of(n)) + 1 :] == name]  # `rte` for glue/rte
                if tails:
                    return f"{unqualified}; did you mean {' or '.join(map(repr, tails))}?"
                return (
                    f"{unqualified}, so no plugin can provide {name!r}; a preset or other value of a component's "
                    f"field is no component{hint or f'; {kind}s: ' + (', '.join(known) or 'none installed')}"
                )
            installed = ", ".join(sorted(r.name for r in self.plugins.values() if not r.error))
            return (
                f"unknown {kind} {name!r}: no installed plugin provides namespace {namespace!r} "
                f"(installed: {installed}); {install_hint(namespace)}{hint}"
            )
        if hint:
            return f"unknown {kind} {name!r}{hint}"
        return f"unknown {kind} {name!r}; plugin {namespace!r} provides: {', '.join(n for n in known if namespace_of(n) == namespace) or 'no ' + kind + 's'}"

    def load(self, kind: str, name: str) -> Any:
        """Import the component's object; an import failure names the distribution that provides it."""
        spec = self.get(kind, name)
        try:
            return spec.load()
        except (Exception, SystemExit) as exc:
            raise PluginError(
                f"{kind} {name!r} from {spec.provider} failed to import: {_import_error(exc, spec, spec.target)}"
            ) from exc

    def config_class(self, kind: str, name: str, *, target: bool = True) -> type | None:
        """The component's config dataclass, checked on first use (see the module docstring); with
        `target` (recipe validation), its target is imported too, so a typo in it is a recipe error
        rather than a failure when the stage starts. Problems raise `PluginError` and are kept on
        the plugin's record."""
        spec = self.get(kind, name)
        key = (kind, name)
        if key not in self._checked:
            try:
                cls = spec.config_class()
            except (Exception, SystemExit) as exc:
                where = spec.config if isinstance(spec.config, str) else ""
                self._problem(
                    spec,
                    f"config of {kind} {name!r} from {spec.provider} failed to import: "
                    f"{_import_error(exc, spec, where)}",
                    exc,
                )
            problems = (
                [] if cls is None else config_class_problems(cls) + _key_problems(spec, cls) + _bound_problems(cls)
            )
            if problems:
                listed = "; ".join(
                    f"{f'config field {field!r}' if field else 'config'}: {problem}{_where_defined(cls, field)}"
                    for field, problem in problems
                )
                self._problem(spec, f"{kind} {name!r} from {spec.provider}: {listed}")
            if cls is not None:
                note_owner(cls, f"{kind} {name!r} from {spec.provider}")
                notes = [f"field {f!r}: {note}" for f, note in config_class_notes(cls)]
                for record in self.plugins.values():
                    if notes and spec in record.components:
                        record.notes[spec.name] = notes
            self._checked[key] = cls
        if target and key not in self._targets_ok:
            try:
                loaded = spec.load()
            except (Exception, SystemExit) as exc:
                self._problem(
                    spec,
                    f"{kind} {name!r} from {spec.provider}: target failed to import: "
                    f"{_import_error(exc, spec, spec.target)}",
                    exc,
                )
            wrong = _target_problem(kind, loaded)
            if wrong is not None:
                declared = f" (declared at {spec.defined_at})" if spec.defined_at else ""
                self._problem(spec, f"{kind} {name!r} from {spec.provider}: target {spec.target!r} {wrong}{declared}")
            self._targets_ok.add(key)
        return self._checked[key]

    def config_notes(self, kind: str, name: str) -> list[str]:
        """What recipes cannot set in the component's config (found when its config was resolved)."""
        spec = self.get(kind, name)
        return next((r.notes.get(name, []) for r in self.plugins.values() if spec in r.components), [])

    def _problem(self, spec: ComponentSpec, message: str, cause: BaseException | None = None) -> NoReturn:
        for record in self.plugins.values():
            if spec in record.components:
                record.problems[spec.name] = message
        raise PluginError(message) from cause

    def check_components(self) -> None:
        """Resolve every component's config and target now (`xfer plugins --check`); problems are kept
        on the plugin records."""
        for kind, name in sorted(self.components):
            if (kind, name) not in self.conflicts:
                with contextlib.suppress(PluginError):
                    self.config_class(kind, name)

    def commands(self) -> list[CommandSpec]:
        """Every plugin's CLI commands (specs only: nothing of a command is imported here).

        A plugin whose `xfer_commands` is broken is marked failed on its record (one warning line
        says so); the others still load."""
        for record in self.plugins.values():
            if record.error and record.error.startswith("xfer_commands failed"):
                warnings.warn(f"plugin {record.name!r}: {record.error}", stacklevel=1)
        return [c for found in self._commands.values() for c in found]

    def notify(self, hook: str, **kwargs: Any) -> None:
        """Call a lifecycle hook through pluggy. Observers are isolated (see the module docstring);
        an exception escaping a hook wrapper is reported the same way, never stopping the run.
        An argument the hook gained later (`hookspecs.HOOK_ARG_DEFAULTS`, e.g. `tags`) that the
        caller leaves out gets its empty default, so a caller written before it still reaches
        every observer instead of pluggy's HookCallError."""
        for name, default in hookspecs.HOOK_ARG_DEFAULTS.get(hook, {}).items():
            if name not in kwargs:
                kwargs[name] = default()
        caller = getattr(self.pm.hook, hook)
        if any(impl.hookwrapper or impl.wrapper for impl in caller.get_hookimpls()):
            # a hook wrapper is not guarded (it must yield), so it got the caller's own dicts: one
            # editing `metrics` in place changed the dev results the trainer picks the best checkpoint
            # from (and writes to state.json), one editing `config` the running stage's settings
            kwargs = {name: _own_copy(value) for name, value in kwargs.items()}
        try:
            caller(**kwargs)
        except Exception as exc:
            warnings.warn(f"{hook} failed in a hook wrapper: {_short_error(exc)}", stacklevel=1)


def _claimant(record: PluginRecord) -> str:
    """Who claims a namespace, for messages: `xfer-quiz 1.0`, or `module pkg.plugin` for a plugin
    added by import path (every such plugin's distribution reads `(module) -`)."""
    if record.distribution == "(module)":
        return f"module {record.module}"
    if record.distribution == "(object)":
        return f"object {record.module:.60}"
    return f"{record.distribution} {record.version}"


def _rename_hint(record: PluginRecord) -> str:
    """How the plugin behind `record` gets a namespace of its own."""
    if record.distribution == "(module)":
        return "give the module a namespace of its own (XFER_NAMESPACE = '...' in it) and name its components after it"
    if record.distribution == "(object)":
        return "add it under a name of its own"
    return (
        f"rename the `xfer` entry point of {record.distribution} ([project.entry-points.xfer] in its "
        "pyproject.toml), name its components after it and reinstall it"
    )


def _a_function_not_a_plugin(function: Any, record: PluginRecord) -> str:
    """The error for an entry point (or XFER_PLUGIN_MODULES path) naming a function, usually the hook
    itself (`pkg.plugin:xfer_tasks`): pluggy registered the function, which has no hooks, so the
    plugin loaded without components and without an error. (A module without hooks stays a plugin
    with none: `xfer plugins` shows `hooks: -`.)"""
    where = (
        "XFER_PLUGIN_MODULES"
        if record.distribution == "(module)"
        else f"the `xfer` entry point of {record.distribution} ([project.entry-points.xfer] in its pyproject.toml)"
    )
    name = getattr(function, "__qualname__", repr(function))
    home = getattr(function, "__module__", None) or "its module"
    return (
        f"{record.module!r} names the function {name}, not a plugin: point {where} at the module that "
        f"defines the hooks ({home})"
    )


def _load_entry_point(ep: importlib.metadata.EntryPoint) -> Any:
    """The object an `xfer` entry point names, with `import_object`'s error for a missing attribute
    (`'mod' has no attribute 'plugn'; did you mean 'plugin'?`): `EntryPoint.load`'s own came from
    inside importlib.metadata, so the error pointed there and suggested nothing."""
    if not ep.attr:
        return importlib.import_module(ep.module)
    return import_object(f"{ep.module}:{ep.attr}")


def _missing_attribute(exc: BaseException, record: PluginRecord) -> str | None:
    """The message for a plugin path `pkg.mod:attr` whose module imports but has no `attr` (a typo in
    the entry point or XFER_PLUGIN_MODULES), or None. The traceback does not reach the plugin's code,
    so the generic message pointed at the import machinery instead of at what to fix."""
    if not isinstance(exc, AttributeError) or ":" not in record.module or _own_frames(exc, record.package):
        return None
    if record.distribution == "(module)":
        return f"AttributeError: {exc} (plugin path {record.module!r}; check XFER_PLUGIN_MODULES)"
    return (
        f"AttributeError: {exc} (entry point '{record.name} = {record.module}' of {record.distribution} "
        f"{record.version}: check the `xfer` entry point in the distribution's pyproject.toml "
        "([project.entry-points.xfer]) and reinstall it (pip install -e .))"
    )


def _missing_module(exc: BaseException, record: PluginRecord) -> str | None:
    """The message for a plugin module path that does not exist (a typo in the entry point, or a
    package missing from this environment), or None. Its traceback never reaches the plugin's code,
    so the generic message pointed at `<frozen importlib._bootstrap>`, which names nothing to fix."""
    path = record.module.partition(":")[0].strip()
    name = getattr(exc, "name", None)
    if not isinstance(exc, ModuleNotFoundError) or not name or not (path + ".").startswith(name + "."):
        return None
    if _own_frames(exc, record.package):
        return None
    return (
        f"ModuleNotFoundError: No module named {name!r}: the plugin's module path {record.module!r} does not "
        "import; "
        + (
            "check XFER_PLUGIN_MODULES (and PYTHONPATH)"
            if record.distribution == "(module)"
            else "check the `xfer` entry point in the distribution's pyproject.toml "
            "([project.entry-points.xfer]) and reinstall it (pip install -e .)"
        )
    )


def _import_error(exc: BaseException, spec: ComponentSpec, path: str) -> str:
    """An import failure of a spec's target or config, located in the plugin's code if it got that
    far, else at the spec's declaration (a typo in the path itself)."""
    text = _short_error(exc, _package_of(path or spec.target))
    if path and (isinstance(exc, (ImportError, AttributeError)) and not _own_frames(exc, _package_of(path))):
        text = f"{type(exc).__name__}: {exc} (path {path!r}" + (
            f", declared at {spec.defined_at})" if spec.defined_at else ")"
        )
    return text


# What a component name starts with (specs._NAME's namespace part).
_NAMESPACE = re.compile(r"^[a-z][a-z0-9_]*$")


def _suggested_namespace(name: str) -> str:
    """`xfer-my-tasks` -> `my_tasks`: the distribution-style name as a namespace."""
    cleaned = re.sub(r"[^a-z0-9_]+", "_", name.lower().removeprefix("xfer-").removeprefix("xfer_")).strip("_")
    return cleaned if _NAMESPACE.match(cleaned) else f"p_{cleaned}".rstrip("_")


# The key a recipe mapping uses for the component itself: `{kind: my.stage, ...}` for a stage,
# `{name: my/task, ...}` for a task or objective reference.
RESERVED_KEYS = {"stage": "kind", "task": "name", "objective": "name"}


def _key_problems(spec: ComponentSpec, cls: Any) -> list[tuple[str | None, str]]:
    """Config keys the spec relies on that the config class gets wrong.

    A field named like the recipe key that names the component (`kind` in a stage's config, `name`
    in a task's or objective's) can never be set from a recipe, and the resolved recipe (`xfer show`,
    the run directory's recipe.resolved.yaml) wrote its default in place of the component's name,
    so that file no longer validated. A `growable` key that is not an integer field of the config
    (a typo: `trails`) never grows: raising `trials` silently re-ran every finished trial."""
    if not dataclasses.is_dataclass(cls):
        return []
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    problems: list[tuple[str | None, str]] = []
    for key in spec.growable:
        if key not in fields:
            problems.append(
                (None, f"growable key {key!r} of the spec is not a field of the config{did_you_mean(key, fields)}")
            )
        elif _hints(cls).get(key, int) is not int:  # (unresolvable annotations are reported on their own)
            problems.append((key, "is declared growable by the spec, but only an `int` field can grow"))
    reserved = RESERVED_KEYS.get(spec.kind)
    if reserved in fields:
        where = f"{spec.kind} mapping" if spec.kind == "stage" else f"{spec.kind} reference"
        problems.append(
            (
                reserved,
                f"a recipe's {where} uses `{reserved}:` for the component itself, so this field can never be "
                "set (and `xfer show` writes its default there); rename it",
            )
        )
    return problems


def _bound_problems(cls: Any, prefix: str = "", seen: set[type] | None = None) -> list[tuple[str | None, str]]:
    """Defaults a recipe that leaves their field out runs with, but that no recipe could give: a
    number outside its own knob's bounds (`knob(-1.0, "...", ge=0)`), a path field's default that
    is no path (`knob(5, ...)` for a `Path`), a reference field's default that is not a reference
    (`knob("toy/agreement", ...)` for a `TaskRef`, where `TaskRef("toy/agreement")` is meant).

    Bounds and types are checked on values a recipe gives, so such a default ran unnoticed until a
    stage used it (a bare `AttributeError: 'str' object has no attribute 'name'`), and the resolved
    recipe it wrote no longer validated. Nested config dataclasses count too (field `train.lr`):
    the nested class's own defaults, and the values of a dataclass instance given as a field's
    default (`knob(TrainConfig(lr=-1.0))`), which is the base a recipe's partial mapping
    completes. `None` and NaN stay allowed as sentinels."""
    if not dataclasses.is_dataclass(cls) or not isinstance(cls, type):
        return []
    seen = set() if seen is None else seen
    if cls in seen:
        return []
    seen.add(cls)
    hints = _hints(cls)
    problems: dict[str, str] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        path = prefix + f.name
        value = _default_of(f)
        if value is not dataclasses.MISSING:
            for where, problem in _value_problems(value, f, hints.get(f.name), path):
                problems.setdefault(where, problem)
        for nested in dataclasses_in(hints.get(f.name)):
            for where, problem in _bound_problems(nested, path + ".", seen):
                problems.setdefault(where or path, problem)
    return list(problems.items())


def _default_of(f: dataclasses.Field) -> Any:
    """A field's default (a factory's value), or MISSING when it has none or its factory fails (a
    failing factory is a note of its own, see `config_class_notes`)."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is dataclasses.MISSING:
        return dataclasses.MISSING
    try:
        return f.default_factory()
    except Exception:
        return dataclasses.MISSING


def _value_problems(value: Any, f: dataclasses.Field, tp: Any, path: str) -> list[tuple[str, str]]:
    """What is wrong with `value` as the value of field `f` (annotation `tp`), and inside it when it
    is a config dataclass instance, as (field path, problem) pairs (see `_bound_problems`)."""
    if value is None:
        return []
    if isinstance(value, type) and dataclasses.is_dataclass(value):  # `knob(TrainConfig, ...)`: the class itself
        # was handed to the stage, and writing the resolved recipe failed with yaml's bare RepresenterError
        return [
            (path, f"default is the class {value.__name__} itself, not a value: write knob({value.__name__}(), ...)")
        ]
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # NaN: a sentinel
    if number and (broken := bound_problem(value, f.metadata)) is not None:
        return [(path, f"default {value!r} is out of its knob's bounds: {broken}")]
    bounded = any(f.metadata.get(bound) is not None for bound in ("ge", "gt", "le", "lt"))
    if number and bounded and not math.isfinite(value):  # a recipe's `.inf` for a bounded knob is refused
        return [
            (path, f"default {value!r} is not a finite number, which a bounded knob refuses; use None for 'no limit'")
        ]
    if (unfit := _literal_union_problem(value, tp)) is not None:
        return [(path, f"default {value!r} does not fit its type: {unfit}")]
    wanted = _wanted_type(tp)
    if wanted is Path and not isinstance(value, (str, os.PathLike)):
        return [(path, f"default {value!r} is not a path ({type(value).__name__}); give a str or Path")]
    if isinstance(wanted, type) and issubclass(wanted, (ComponentRef, Input, Files)) and not isinstance(value, wanted):
        example = f"{wanted.__name__}({value!r})" if isinstance(value, str) else "one (or None)"
        shown = f"{_article(wanted.__name__)} {wanted.__name__}"
        return [(path, f"default {value!r} is not {shown} ({type(value).__name__}); give {example}")]
    if dataclasses.is_dataclass(value) and not isinstance(value, (type, ComponentRef, Input, Files)):
        # a value the nested class gives by default is checked with that class (at its line); one the
        # instance sets (`TrainConfig(lr=-1.0)`) is blamed on this field, where the author wrote it
        hints, problems = _hints(type(value)), []
        for inner in dataclasses.fields(value):
            held = getattr(value, inner.name)
            if inner.init and not _same(held, _default_of(inner)):
                for _, problem in _value_problems(held, inner, hints.get(inner.name), path):
                    problems.append((path, f"{inner.name}: {problem}"))
        return problems
    return []


def _same(value: Any, default: Any) -> bool:
    try:
        return bool(value == default)
    except Exception:
        return False


def _literal_union_problem(value: Any, tp: Any) -> str | None:
    """Why `value` fits no member of a union holding a `Literal` (`Literal["fast", "slow"] | None`,
    `int | Literal["epoch"] | None`), or None. A bare `Literal` is checked with the other scalar
    defaults (`config_class_problems`); in a union it was not, so `"medium"` ran unnoticed and
    recipe.resolved.yaml, which writes it, no longer validated."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return None
    members = [a for a in typing.get_args(tp) if a is not type(None)]
    literals = [m for m in members if typing.get_origin(m) is typing.Literal]
    scalars = [m for m in members if m in (bool, int, float, str)]
    if not literals or len(literals) + len(scalars) != len(members):
        return None  # a union with other kinds of value: not judged here
    choices = [choice for m in literals for choice in typing.get_args(m)]
    if any(type(choice) is type(value) and choice == value for choice in choices):
        return None
    if any(_default_problem(value, m) is None for m in scalars):  # as a recipe's value would fit (2.0 an int)
        return None
    shown = ", ".join(repr(choice) for choice in choices)
    return f"{value!r} is not one of {shown}" + "".join(f" nor {_article(m.__name__)} {m.__name__}" for m in scalars)


def _wanted_type(tp: Any) -> Any:
    """The one type a field holds besides None: `Path` for `Path`, `ExistingPath`, `Path | None` and
    `PathOrName` (a `str | Path`), the reference class for `TaskRef | None`; else None (unions of
    several kinds of value and containers are checked elsewhere or not at all)."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = {a for a in typing.get_args(tp) if a is not type(None)}
        if members in ({Path}, {str, Path}):
            return Path
        if len(members) != 1:
            return None
        (tp,) = members
    return tp if tp is Path or (isinstance(tp, type) and issubclass(tp, (ComponentRef, Input, Files))) else None


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:
        return {}


def _target_problem(kind: str, target: Any) -> str | None:
    """Why an imported target cannot be what its kind is used as, or None. A stage target that is not
    a function of one argument, or a task target that is not a concrete `Task`, imported fine and
    passed `xfer plugins --check` and recipe validation, then failed with a bare TypeError when the
    stage started (after the stages before it had run) or as a "plugin bug" in the pre-flight."""
    if kind == "task":
        from xfer.core.tasks import Task

        if not (isinstance(target, type) and issubclass(target, Task)):
            return f"is {_shown(target)}, not a subclass of xfer.core.tasks.Task"
        if inspect.isabstract(target):
            missing = ", ".join(sorted(getattr(target, "__abstractmethods__", ())))
            return f"is {_shown(target)}, which does not implement {missing} (abstract in xfer.core.tasks.Task)"
        return None
    if not callable(target):
        return f"is {_shown(target)}, which cannot be called"
    if kind == "objective":
        # not imported here just to check: a target that subclasses torch.nn.Module has imported it
        torch = sys.modules.get("torch")
        if isinstance(target, type) and torch is not None and not issubclass(target, torch.nn.Module):
            return f"is {_shown(target)}, not a torch.nn.Module subclass"
        return None
    arity = {"stage": 1, "metric": 2}.get(kind)
    if arity is not None and not isinstance(target, type):
        try:
            inspect.signature(target).bind(*([None] * arity))
        except TypeError:
            expected = "run(ctx)" if kind == "stage" else "metric(golds, predictions)"
            return f"is {_shown(target)}{inspect.signature(target)}, which cannot be called as {expected}"
        except ValueError:  # no signature to read (a builtin): called as it is
            return None
    return None


def _shown(target: Any) -> str:
    if isinstance(target, type):
        return f"class {target.__module__}.{target.__qualname__}"
    if inspect.isfunction(target) or inspect.ismethod(target):
        return f"function {target.__module__}.{target.__qualname__}"
    return f"a {type(target).__name__} ({target!r:.60})"


def _own_frames(exc: BaseException, package: str) -> bool:
    return any(
        (n := str(f.f_globals.get("__name__", ""))) == package or n.startswith(package + ".")
        for f, _ in traceback.walk_tb(exc.__traceback__)
    )


def _where_defined(cls: Any, field_name: str | None) -> str:
    """` (at file:line)` of a config class, or of its field's line where the source can be read."""
    *outer, field_name = (field_name or "").split(".")
    try:
        for part in outer:  # `train.lr`: the line of `lr` in the nested config class
            cls = next(d for d in dataclasses_in(typing.get_type_hints(cls, include_extras=True)[part]))
        lines, first = inspect.getsourcelines(cls)
        path = inspect.getsourcefile(cls)
    except (OSError, TypeError, KeyError, NameError, StopIteration):
        return ""
    line = first
    if field_name:
        pattern = re.compile(rf"^\s*{re.escape(field_name)}\s*[:=]")
        line = next((first + i for i, text in enumerate(lines) if pattern.match(text)), first)
    return f" (at {path}:{line})"


_default_host: PluginHost | None = None


def _env_flag(name: str) -> bool:
    """A yes/no environment variable; anything but the usual spellings is an error, not a "no"."""
    value = os.environ.get(name, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise PluginError(f"{name}={os.environ[name]!r}: expected 1/true/yes/on or 0/false/no/off")


def default_host() -> PluginHost:
    """The process-wide host (created on first use)."""
    global _default_host
    if _default_host is None:
        _default_host = PluginHost()
    return _default_host


def set_default_host(host: PluginHost | None) -> None:
    """Replace the process-wide host (tests and the xfer.testing kit)."""
    global _default_host
    _default_host = host


@contextlib.contextmanager
def recipe_host(host: PluginHost) -> Iterator[PluginHost]:
    """Make `host` the default host while a recipe is validated, checked or run, then restore the
    one before. Code inside a recipe that is not handed the host (a task config naming a metric
    component, a stage config's pre-flight looking up an objective) asks `default_host()`; without
    this, a recipe loaded with its own host (tests, the conformance kit) got another host's answer."""
    previous = _default_host
    set_default_host(host)
    try:
        yield host
    finally:
        set_default_host(previous)

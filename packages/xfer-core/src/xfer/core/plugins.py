"""The plugin host: loads plugins in isolation and answers "which component is called X?".

Plugins come from the `xfer` entry-point group (the entry-point name is the plugin's namespace),
from `XFER_PLUGIN_MODULES=pkg.mod,...` (development and tests; pytest's `PYTEST_PLUGINS`
idea), and from core's own built-in modules. Environment switches:

- `XFER_DISABLE_PLUGIN_AUTOLOAD=1`: load no entry points (built-ins and XFER_PLUGIN_MODULES only);
  any value but 1/true/yes/on/0/false/no/off is an error;
- `XFER_PLUGINS=a,b`: load only these entry-point plugins (a name matching none is recorded
  as a failed plugin, so the typo shows).

A plugin that fails to import, has a misspelled hook, or whose registration hook raises is
recorded with its error and skipped; asking for one of its components later raises a
`PluginError` that names its distribution and the original error.

Every hook is called through pluggy (`pm.hook.<name>`, or `pm.subset_hook_caller` to call one
plugin's registration hooks), so `specname`, `tryfirst`/`trylast` and hook wrappers behave as
pluggy documents. As in pytest, a function named like a hookspec is an implementation even
without the `@hookimpl` marker. Lifecycle observers stay isolated: each (non-wrapper) lifecycle
implementation is guarded when its plugin registers, so an exception in one is reported as a
warning and the other observers and the run go on.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import os
import traceback
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

import pluggy

from xfer.core import hookspecs
from xfer.core.errors import PluginError
from xfer.core.recipes.schema import did_you_mean
from xfer.core.specs import CommandSpec, ComponentSpec, namespace_of

BUILTIN_PLUGINS = {"core": "xfer.core.builtin", "toy": "xfer.core.toy.plugin"}


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

    @property
    def label(self) -> str:
        return f"plugin {self.name!r} (distribution {self.distribution} {self.version})"


def _default_namespace(module: str) -> str:
    """`xfer.demo.plugin` -> `demo`; `my_plugin` -> `my_plugin` (override with XFER_NAMESPACE)."""
    parts = module.split(".")
    return parts[-2] if parts[-1] in ("plugin", "plugins") and len(parts) > 1 else parts[-1]


def _short_error(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
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


def _guarded(plugin_name: str, hook: str, function: Any) -> Any:
    """A lifecycle implementation whose exceptions become warnings (observers must not stop runs)."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            warnings.warn(f"plugin {plugin_name!r}: {hook} failed: {_short_error(exc)}", stacklevel=2)
            return None

    return call


class PluginHost:
    """Holds the pluggy manager, the plugin records and the component registry."""

    def __init__(self, autoload: bool | None = None, allow: Iterable[str] | None = None, modules: Iterable[str] = ()):
        self.pm = _Manager("xfer")
        self.pm.add_hookspecs(hookspecs)
        self.plugins: dict[str, PluginRecord] = {}
        self.components: dict[tuple[str, str], ComponentSpec] = {}
        self.conflicts: dict[tuple[str, str], list[str]] = {}
        if autoload is None:
            autoload = not _env_flag("XFER_DISABLE_PLUGIN_AUTOLOAD")
        if allow is None and os.environ.get("XFER_PLUGINS"):
            allow = [p.strip() for p in os.environ["XFER_PLUGINS"].split(",") if p.strip()]
        self.allow = set(allow) if allow is not None else None
        dist = self._own_distribution()
        for name, module in BUILTIN_PLUGINS.items():
            self._add(PluginRecord(name, *dist, module), lambda m=module: importlib.import_module(m))
        if autoload:
            self._load_entry_points()
        extra = [m.strip() for m in os.environ.get("XFER_PLUGIN_MODULES", "").split(",") if m.strip()]
        for module in [*extra, *modules]:
            self.add_module(module)

    # --- loading -------------------------------------------------------------------------------

    @staticmethod
    def _own_distribution() -> tuple[str, str]:
        try:
            return "xfer-core", importlib.metadata.version("xfer-core")
        except importlib.metadata.PackageNotFoundError:
            return "xfer-core", "0+unknown"

    def _load_entry_points(self) -> None:
        entry_points = sorted(importlib.metadata.entry_points(group="xfer"), key=lambda e: e.name)
        for ep in entry_points:
            if self.allow is not None and ep.name not in self.allow:
                continue
            dist = ep.dist.name if ep.dist else "unknown"
            version = ep.dist.version if ep.dist else "unknown"
            self._add(PluginRecord(ep.name, dist, version, ep.value), ep.load)
        # An allow-list entry that matches nothing is a typo, not a wish to load nothing: shown as
        # a failed plugin, so `xfer plugins` and a recipe needing the plugin both say so.
        known = [ep.name for ep in entry_points]
        for name in sorted((self.allow or set()) - set(known) - set(BUILTIN_PLUGINS)):
            record = PluginRecord(name, "(XFER_PLUGINS)", "-", "")
            record.error = (
                f"XFER_PLUGINS names {name!r}, but no installed distribution registers an `xfer` entry point "
                f"of that name{did_you_mean(name, known)}"
            )
            self.plugins[name] = record

    def add_module(self, module: str, name: str | None = None) -> PluginRecord:
        """Register a plugin module by import path (namespace: `XFER_NAMESPACE` or the module's name)."""
        record = PluginRecord(name or "", "(module)", "-", module)
        try:
            loaded = importlib.import_module(module)
        except Exception as exc:  # isolated: recorded, not fatal
            record.name = record.name or _default_namespace(module)
            record.error = f"import failed: {_short_error(exc)}"
            self.plugins[record.name] = record
            return record
        record.name = name or getattr(loaded, "XFER_NAMESPACE", _default_namespace(module))
        if self.pm.is_registered(loaded):  # already loaded through its entry point
            return next(r for r in self.plugins.values() if r.module in (module, f"{module}:") or r.name == record.name)
        return self._add(record, lambda: loaded)

    def add_object(self, plugin: Any, name: str) -> PluginRecord:
        """Register an in-memory plugin object (tests, notebooks)."""
        return self._add(PluginRecord(name, "(object)", "-", repr(plugin)), lambda: plugin)

    def _add(self, record: PluginRecord, load: Any) -> PluginRecord:
        # Two distributions may claim one namespace; both are kept (and their components conflict).
        key = record.name if record.name not in self.plugins else f"{record.name} ({record.distribution})"
        self.plugins[key] = record
        try:
            plugin: ModuleType | Any = load()
        except Exception as exc:  # isolated: a broken plugin must not break the host
            record.error = f"import failed: {_short_error(exc)}"
            return record
        unknown = [
            n
            for n in dir(plugin)
            if n.startswith("xfer_") and callable(getattr(plugin, n)) and n not in hookspecs.HOOK_NAMES
        ]
        if unknown:
            record.error = "; ".join(
                f"unknown hook {n!r}{did_you_mean(n, hookspecs.HOOK_NAMES)}" for n in sorted(unknown)
            )
            return record
        try:
            self.pm.register(plugin, name=key)
            self.pm.check_pending()
        except Exception as exc:
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            record.error = f"registration failed: {_short_error(exc)}"
            return record
        record.hooks = sorted(caller.name for caller in self.pm.get_hookcallers(plugin) or [])
        self._guard_lifecycle(plugin, key)
        try:
            specs = self._collect(plugin, record)
        except Exception as exc:
            self.pm.unregister(plugin)
            record.error = f"registration hook failed: {_short_error(exc)}"
            return record
        for spec in specs:
            key = (spec.kind, spec.name)
            if key in self.components:
                self.conflicts.setdefault(key, [self.components[key].provider]).append(spec.provider)
            else:
                self.components[key] = spec
        record.components = specs
        return record

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

    def _collect(self, plugin: Any, record: PluginRecord) -> list[ComponentSpec]:
        specs: list[ComponentSpec] = []
        provider = f"{record.name} ({record.distribution} {record.version})"
        for hook_name, kind in hookspecs.REGISTRATION_HOOKS.items():
            for spec in (item for result in self._call_one(plugin, hook_name) for item in result or []):
                if not isinstance(spec, ComponentSpec):
                    raise TypeError(f"{hook_name} returned {type(spec).__name__}, expected ComponentSpec")
                if spec.kind != kind:
                    raise ValueError(f"{hook_name} returned {spec.name!r} of kind {spec.kind!r}, expected {kind!r}")
                if spec.namespace != record.name:
                    raise ValueError(
                        f"component {spec.name!r} must be in the plugin's namespace {record.name!r} "
                        f"(e.g. '{record.name}.{spec.name.split('.')[-1].split('/')[-1]}')"
                    )
                specs.append(replace(spec, provider=provider))
        return specs

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
        if key in self.conflicts:
            providers = " and ".join(self.conflicts[key])
            raise PluginError(f"{kind} {name!r} is registered twice, by {providers}; uninstall one of them")
        spec = self.components.get(key)
        if spec is not None:
            return spec
        raise PluginError(self.missing_message(kind, name))

    def missing_message(self, kind: str, name: str) -> str:
        namespace = namespace_of(name)
        for record in self.plugins.values():
            if record.error and record.name == namespace:
                return f"{kind} {name!r} should come from {record.label}, which failed to load: {record.error}"
        known = self.names(kind)
        hint = did_you_mean(name, known)
        if not any(r.name == namespace for r in self.plugins.values()):
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
        except Exception as exc:
            raise PluginError(f"{kind} {name!r} from {spec.provider} failed to import: {_short_error(exc)}") from exc

    def config_class(self, kind: str, name: str) -> type | None:
        spec = self.get(kind, name)
        try:
            return spec.config_class()
        except Exception as exc:
            raise PluginError(
                f"config of {kind} {name!r} from {spec.provider} failed to import: {_short_error(exc)}"
            ) from exc

    def commands(self) -> list[CommandSpec]:
        """Every plugin's CLI commands (specs only: nothing of a command is imported here).

        A plugin whose `xfer_commands` raises is reported as a warning; the others still load."""
        found: list[CommandSpec] = []
        for name, plugin in self.pm.list_name_plugin():
            if self.pm.hook.xfer_commands not in (self.pm.get_hookcallers(plugin) or []):
                continue
            try:
                results = self._call_one(plugin, "xfer_commands")
                found += [replace(c, provider=name) for result in results for c in result or []]
            except Exception as exc:
                warnings.warn(f"plugin {name!r}: xfer_commands failed: {_short_error(exc)}", stacklevel=1)
        return found

    def notify(self, hook: str, **kwargs: Any) -> None:
        """Call a lifecycle hook through pluggy. Observers are isolated (see the module docstring);
        an exception escaping a hook wrapper is reported the same way, never stopping the run."""
        try:
            getattr(self.pm.hook, hook)(**kwargs)
        except Exception as exc:
            warnings.warn(f"{hook} failed in a hook wrapper: {_short_error(exc)}", stacklevel=1)


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

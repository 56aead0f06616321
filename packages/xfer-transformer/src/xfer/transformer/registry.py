"""The open registry of heads: model components registered through `xfer_models`.

A head is any `nn.Module` class registered as a model component whose target is the class and
which has:

    kind: ClassVar[str]          its registered component name (e.g. "electra.generator_head"):
                                 the name `modelio` stores in xfer_model.json and looks up on load
    config(self) -> dict         JSON-serialisable constructor kwargs: `cls(**head.config())` rebuilds it
    hf: ClassVar[HFHeadMap | None]   optional: its HF `transformers` equivalent (`xfer.transformer.hfmap`)

`modelio` (saving/loading xfer model dirs) and `hf` (HF import/export) find heads only here, so
a method package adds a head (ELECTRA's generator/discriminator heads, a CVT or BAM head) by
registering it in its own plugin, without editing xfer-transformer:

    @hookimpl
    def xfer_models():
        return [ComponentSpec("model", "electra.generator_head", "xfer.electra.heads:GeneratorHead", "1",
                              summary="ELECTRA generator: MLM logits tied to the input embeddings.")]

xfer-transformer registers its own heads the same way (`xfer.transformer.plugin`). Their kinds
are the short historical names `sequence`, `token`, `span_qa` (written by every model directory
so far), which `component_name` maps to `transformer.<kind>_head`. Lookups go through the
process-wide plugin host (`xfer.core.plugins.default_host()`) unless a host is given; the
built-in heads are found even when the host was configured without xfer-transformer's plugin,
since the code asking is xfer-transformer itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch import nn

from xfer.core.errors import PluginError
from xfer.core.plugins import PluginHost, default_host

if TYPE_CHECKING:
    from xfer.core.specs import ComponentSpec

# Short kinds of xfer-transformer's own heads (stored by model dirs) -> their component names.
BUILTIN_KINDS = {
    "sequence": "transformer.sequence_head",
    "token": "transformer.token_head",
    "span_qa": "transformer.span_qa_head",
}


class UnknownHeadError(PluginError, ValueError):
    """A head kind no loaded plugin provides, or a registered component that is not a head."""


def component_name(kind: str) -> str:
    """The model component name registered for head `kind` (`sequence` -> `transformer.sequence_head`)."""
    return BUILTIN_KINDS.get(kind, kind)


def _own_specs() -> dict[str, ComponentSpec]:
    from xfer.transformer import plugin

    return {spec.name: spec for spec in plugin.xfer_models()}


def head_class(kind: str, host: PluginHost | None = None) -> type[nn.Module]:
    """The registered head class for `kind` (as stored in xfer_model.json), checked to be a head."""
    host = host or default_host()
    name = component_name(kind)
    if host.find("model", name) is None and ("model", name) not in host.conflicts:
        own = _own_specs().get(name)
        if own is None:
            raise UnknownHeadError(f"unknown head kind {kind!r}: {host.missing_message('model', name)}")
        cls = own.load()
    else:
        cls = host.load("model", name)  # PluginError naming the provider on conflicts/import failures
    if not (isinstance(cls, type) and issubclass(cls, nn.Module) and callable(getattr(cls, "config", None))):
        raise UnknownHeadError(f"model component {name!r} ({cls!r}) is not a head: no nn.Module with config()")
    if getattr(cls, "kind", None) != kind:
        raise UnknownHeadError(
            f"model component {name!r} is {cls.__name__} whose kind is {getattr(cls, 'kind', None)!r}, not {kind!r}: "
            "a head's `kind` must be its registered component name"
        )
    return cls


def build_head(kind: str, config: dict[str, Any], host: PluginHost | None = None) -> nn.Module:
    """A fresh head of `kind` built from its `config()` (weights are the caller's to load)."""
    cls = head_class(kind, host)
    try:
        return cls(**config)
    except TypeError as e:
        raise UnknownHeadError(f"head kind {kind!r}: config {sorted(config)} does not fit {cls.__name__}: {e}") from e


def head_for_architecture(architecture: str, host: PluginHost | None = None) -> type[nn.Module] | None:
    """The registered head whose `hf` map claims the HF class `architecture`, or None.

    Imports every model component (only when a HF checkpoint is read); one that fails to import
    is skipped (it is reported when used by name). Two heads claiming one class is an error.
    """
    host = host or default_host()
    specs = {**_own_specs(), **{s.name: s for s in host.components.values() if s.kind == "model"}}
    found: list[type[nn.Module]] = []
    for spec in specs.values():
        try:
            cls = spec.load()
        except Exception:  # isolated: a broken plugin must not break reading checkpoints
            continue
        hf = getattr(cls, "hf", None)
        if hf is not None and architecture in hf.architectures.values() and cls not in found:
            found.append(cls)
    if len(found) > 1:
        names = " and ".join(f"{c.__module__}.{c.__qualname__}" for c in found)
        raise UnknownHeadError(f"HF architecture {architecture!r} is claimed by two heads, {names}; uninstall one")
    return found[0] if found else None


def describe_head(module: nn.Module) -> dict[str, Any] | None:
    """{"kind", "config"} if `module` is a head (has `kind` and `config()`), else None."""
    kind = getattr(module, "kind", None)
    if isinstance(kind, str) and callable(getattr(module, "config", None)):
        return {"kind": kind, "config": module.config()}
    return None

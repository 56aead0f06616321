"""The open head registry: a plugin adds heads (save/load through modelio, HF export/import)
without editing xfer-transformer; xfer-transformer's own heads go through the same registry."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from xfer.core.errors import CheckpointError, PluginError
from xfer.core.hookspecs import hookimpl
from xfer.core.plugins import PluginHost, set_default_host
from xfer.core.specs import ComponentSpec
from xfer.testing import make_host
from xfer.transformer import registry
from xfer.transformer.encoder import Encoder
from xfer.transformer.heads import SequenceHead, SpanQAHead, TokenHead, build_head
from xfer.transformer.hf import export_hf, load_hf
from xfer.transformer.hfmap import HFHeadMap
from xfer.transformer.modelio import load_model_dir, save_model_dir
from xfer.transformer.presets import preset

MODULE = "xfer_toy_heads"  # the toy plugin's "package", put in sys.modules by the `toy` fixture


class DiscriminatorHead(nn.Module):
    """Replaced-token detection, as HF ElectraDiscriminatorPredictions: out(gelu(dense(h)))."""

    kind = "acme.discriminator_head"
    hf = HFHeadMap(
        architectures={"electra": "ElectraForPreTraining"},
        tensors={"dense": "discriminator_predictions.dense", "out": "discriminator_predictions.dense_prediction"},
        config_from_hf=lambda state, hf_config, encoder_config: {"hidden": encoder_config.hidden_size},
    )

    def __init__(self, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.dense = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 1)

    def config(self) -> dict[str, Any]:
        return {"hidden": self.hidden}

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.out(F.gelu(self.dense(hidden))).squeeze(-1)


class GeneratorHead(nn.Module):
    """An MLM-like generator head with no HF mapping declared (hf = None)."""

    kind = "acme.generator_head"

    def __init__(self, hidden: int, vocab_size: int):
        super().__init__()
        self.hidden, self.vocab_size = hidden, vocab_size
        self.dense = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.decoder = nn.Linear(hidden, vocab_size)

    def config(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "vocab_size": self.vocab_size}

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.norm(F.gelu(self.dense(hidden))))


class Misnamed(GeneratorHead):
    kind = "acme.something_else"  # registered as acme.misnamed: its kind does not match


class ToyPlugin:
    """What a method package's plugin module does: register its heads through xfer_models."""

    @hookimpl
    def xfer_models(self) -> list[ComponentSpec]:
        return [
            ComponentSpec("model", "acme.discriminator_head", f"{MODULE}:DiscriminatorHead", "1", summary="RTD head"),
            ComponentSpec("model", "acme.generator_head", f"{MODULE}:GeneratorHead", "1", summary="MLM head"),
            ComponentSpec("model", "acme.misnamed", f"{MODULE}:Misnamed", "1", summary="kind mismatch"),
        ]


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> PluginHost:
    """A host with xfer-transformer's plugin and the toy plugin (namespace `acme`; core's own
    `toy` plugin is always loaded), nothing else, no entry points."""
    module = types.ModuleType(MODULE)
    module.DiscriminatorHead, module.GeneratorHead, module.Misnamed = DiscriminatorHead, GeneratorHead, Misnamed
    monkeypatch.setitem(sys.modules, MODULE, module)
    host = make_host(["xfer.transformer.plugin"])
    record = host.add_object(ToyPlugin(), "acme")
    assert not record.error, record.error
    return host


def tiny_encoder() -> Encoder:
    torch.manual_seed(0)
    return Encoder(preset("tiny", vocab_size=50, max_position_embeddings=16)).eval()


def toy_heads() -> tuple[DiscriminatorHead, GeneratorHead]:
    torch.manual_seed(1)
    return DiscriminatorHead(128).eval(), GeneratorHead(128, 50).eval()


def test_builtin_heads_are_registered_through_xfer_models() -> None:
    host = make_host(["xfer.transformer.plugin"])
    for kind, cls in (("sequence", SequenceHead), ("token", TokenHead), ("span_qa", SpanQAHead)):
        assert host.get("model", f"transformer.{kind}_head").target.endswith(f"heads:{cls.__name__}")
        assert registry.head_class(kind, host) is cls
    # xfer-transformer's own code finds its heads even in a host configured without its plugin
    assert registry.head_class("token", make_host()) is TokenHead
    with pytest.raises(ValueError, match="unknown head kind 'pooling'"):
        build_head("pooling", {})


def test_plugin_head_saves_and_loads_through_modelio(toy: PluginHost, tmp_path: Path) -> None:
    encoder, (disc, gen) = tiny_encoder(), toy_heads()
    out = save_model_dir(tmp_path / "m", {"encoder": encoder, "discriminator": disc, "generator": gen}, host=toy)
    described = json.loads((out / "xfer_model.json").read_text())["modules"]
    assert described["generator"] == {"type": "head", "kind": "acme.generator_head", "config": gen.config()}
    loaded = load_model_dir(out)
    enc2 = loaded.build("encoder").eval()
    disc2, gen2 = loaded.build("discriminator", host=toy).eval(), loaded.build("generator", host=toy).eval()
    assert type(disc2) is DiscriminatorHead and type(gen2) is GeneratorHead
    ids = torch.randint(1, 50, (2, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        h, h2 = encoder(ids).last_hidden_state, enc2(ids).last_hidden_state
        assert torch.equal(disc(h), disc2(h2)) and torch.equal(gen(h), gen2(h2))
    # the process-wide host is what modelio uses by default
    set_default_host(toy)
    try:
        assert type(load_model_dir(out).build("generator")) is GeneratorHead
    finally:
        set_default_host(None)


def test_heads_of_plugins_that_are_not_loaded_are_clear_errors(toy: PluginHost, tmp_path: Path) -> None:
    _, gen = toy_heads()
    bare = make_host(["xfer.transformer.plugin"])  # without the acme plugin
    with pytest.raises(ValueError, match=r"acme\.generator_head.*not a registered head.*namespace 'acme'"):
        save_model_dir(tmp_path / "m", {"generator": gen}, host=bare)
    assert not (tmp_path / "m").exists()
    save_model_dir(tmp_path / "m", {"generator": gen}, host=toy)
    with pytest.raises(CheckpointError, match=r"xfer_model\.json: module 'generator'.*namespace 'acme'"):
        load_model_dir(tmp_path / "m").build("generator", host=bare)
    with pytest.raises(PluginError, match=r"whose kind is 'acme\.something_else'"):
        registry.head_class("acme.misnamed", toy)


def test_hf_export_uses_the_declared_mapping(toy: PluginHost, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers", reason="HF parity needs `transformers`")
    encoder, (disc, gen) = tiny_encoder(), toy_heads()
    out = export_hf(tmp_path / "hf", encoder, head=disc, host=toy)
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["ElectraForPreTraining"]
    names = set(load_file(out / "model.safetensors"))
    assert {n for n in names if not n.startswith("electra.")} == {
        f"discriminator_predictions.{m}.{p}" for m in ("dense", "dense_prediction") for p in ("weight", "bias")
    }
    hf, loading = transformers.ElectraForPreTraining.from_pretrained(out, output_loading_info=True)
    assert not loading["missing_keys"] and not loading["unexpected_keys"] and not loading["mismatched_keys"]
    ids = torch.randint(1, 50, (3, 11), generator=torch.Generator().manual_seed(3))
    mask = (torch.arange(11)[None] < torch.tensor([11, 4, 7])[:, None]).long()
    with torch.no_grad():
        ours = disc(encoder(ids, mask).last_hidden_state)
        theirs = hf.eval()(input_ids=ids, attention_mask=mask).logits
    assert (ours - theirs)[mask.bool()].abs().max() <= 1e-5

    # import: the head whose map claims ElectraForPreTraining is rebuilt, nothing left over
    _, _, info = load_hf(out, host=toy)
    assert info.kind == "acme.discriminator_head" and not info.remaining
    head = info.build(host=toy).eval()
    with torch.no_grad():
        assert torch.equal(head(encoder(ids, mask).last_hidden_state), ours)
    # without the plugin the same checkpoint is a base model plus unmapped tensors, as before
    _, _, plain = load_hf(out, host=make_host(["xfer.transformer.plugin"]))
    assert plain.kind is None and set(plain.remaining) == {n for n in names if n.startswith("discriminator_")}

    with pytest.raises(ValueError, match=r"'acme\.generator_head' .*declares no HF mapping"):
        export_hf(tmp_path / "gen", encoder, head=gen, host=toy)
    with pytest.raises(ValueError, match="no HF bert class"):
        export_hf(tmp_path / "bert", Encoder(preset("tiny", vocab_size=50)), head=disc, model_type="bert", host=toy)


def test_hf_import_refuses_head_tensors_that_do_not_fit(toy: PluginHost, tmp_path: Path) -> None:
    encoder, (disc, _) = tiny_encoder(), toy_heads()
    out = export_hf(tmp_path / "hf", encoder, head=disc, host=toy)
    tensors = load_file(out / "model.safetensors")
    tensors["discriminator_predictions.dense.weight"] = torch.zeros(128, 7)
    save_file(tensors, out / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"head tensors of ElectraForPreTraining do not fit DiscriminatorHead"):
        load_hf(out, host=toy)
    del (
        tensors["discriminator_predictions.dense_prediction.weight"],
        tensors["discriminator_predictions.dense_prediction.bias"],
    )
    save_file(tensors, out / "model.safetensors")
    with pytest.raises(CheckpointError, match="architecture ElectraForPreTraining but its head tensors"):
        load_hf(out, host=toy)


def test_two_heads_claiming_one_hf_class_is_an_error(toy: PluginHost, tmp_path: Path) -> None:
    class Rival:
        @hookimpl
        def xfer_models(self) -> list[ComponentSpec]:
            return [ComponentSpec("model", "rival.rtd_head", f"{MODULE}:Rival", "1")]

    class RivalHead(DiscriminatorHead):
        kind = "rival.rtd_head"

    sys.modules[MODULE].Rival = RivalHead
    toy.add_object(Rival(), "rival")
    with pytest.raises(PluginError, match="'ElectraForPreTraining' is claimed by two heads"):
        registry.head_for_architecture("ElectraForPreTraining", toy)
    assert registry.head_for_architecture("ElectraForTokenClassification", toy) is TokenHead

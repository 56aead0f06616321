"""Behaviour of the xfer encoder (masks, unpadding, autocast, init, sharing) and of its CPU
attention/dropout kernels (`xfer.transformer.kernels`)."""

from __future__ import annotations

import pytest
import torch

import xfer.transformer.encoder as E
import xfer.transformer.kernels as K
from xfer.transformer.encoder import Encoder, EncoderConfig
from xfer.transformer.presets import generator_config, preset


def tiny(**overrides) -> EncoderConfig:
    values = {
        "vocab_size": 100,
        "embedding_size": 16,
        "hidden_size": 32,
        "num_layers": 2,
        "num_heads": 4,
        "intermediate_size": 64,
        "max_position_embeddings": 64,
    }
    return EncoderConfig(**{**values, **overrides})


def batch(lengths: list[int], length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    mask = (torch.arange(length)[None] < torch.tensor(lengths)[:, None]).long()
    ids = torch.randint(1, 100, (len(lengths), length), generator=g) * mask
    types = torch.randint(0, 2, (len(lengths), length), generator=g) * mask
    return ids, mask, types


def encoder(seed: int = 0, **overrides) -> Encoder:
    torch.manual_seed(seed)
    return Encoder(tiny(**overrides)).eval()


def real_max_diff(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> float:
    return (a - b)[mask.bool()].abs().max().item()


@pytest.mark.parametrize("unpad", [True, False])
@pytest.mark.parametrize("direction", ["ltr", "rtl"])
def test_causal_masks_hide_the_other_side(unpad: bool, direction: str) -> None:
    model = encoder(unpad=unpad)
    ids, mask, types = batch([10, 6, 10], 10)
    changed = ids.clone()
    j = 4
    changed[:, j] = (changed[:, j] % 99) + 1  # a different real token at position j
    with torch.no_grad():
        a = model(ids, mask, types, causal=direction).last_hidden_state
        b = model(changed, mask, types, causal=direction).last_hidden_state
        full_a = model(ids, mask, types).last_hidden_state
        full_b = model(changed, mask, types).last_hidden_state
    hidden_side = slice(0, j) if direction == "ltr" else slice(j + 1, None)
    seen_side = slice(j, None) if direction == "ltr" else slice(0, j + 1)
    m = mask.bool()
    assert (a - b)[:, hidden_side][m[:, hidden_side]].abs().max() < 1e-6
    assert (a - b)[:, seen_side][m[:, seen_side]].abs().max() > 1e-3
    assert (full_a - full_b)[:, hidden_side][m[:, hidden_side]].abs().max() > 1e-3  # bidirectional sees it


def test_causal_matches_explicit_prefix_runs() -> None:
    """One layer: ltr output at t equals the bidirectional output of the prefix ending at t."""
    model = encoder(num_layers=1)
    ids, mask, types = batch([9, 5], 9)
    with torch.no_grad():
        out = model(ids, mask, types, causal="ltr").last_hidden_state
        for t in (2, 4, 7):
            prefix = model(ids[:, : t + 1], mask[:, : t + 1], types[:, : t + 1]).last_hidden_state
            real = mask[:, t].bool()
            assert (out[real, t] - prefix[real, t]).abs().max() < 1e-5


@pytest.mark.parametrize("causal", [None, "ltr", "rtl"])
def test_padding_invariance_and_unpad_agreement(causal) -> None:
    lengths = [12, 3, 7, 12, 1, 9]
    ids, mask, types = batch(lengths, 12)
    pad = torch.zeros(len(lengths), 5, dtype=torch.long)
    outputs = []
    for unpad in (True, False):
        model = encoder(unpad=unpad)
        with torch.no_grad():
            short = model(ids, mask, types, causal=causal).last_hidden_state
            long = model(
                torch.cat([ids, pad], 1), torch.cat([mask, pad], 1), torch.cat([types, pad], 1), causal=causal
            ).last_hidden_state
        assert real_max_diff(short, long[:, :12], mask) < 1e-5
        outputs.append(short)
    assert real_max_diff(outputs[0], outputs[1], mask) < 1e-5
    assert outputs[0][~mask.bool()].abs().max() == 0  # unpadded: padding positions are zeros


def test_unpad_and_dense_gradients_agree() -> None:
    ids, mask, types = batch([8, 2, 5, 8], 8)
    grads = []
    for unpad in (True, False):
        model = encoder(unpad=unpad, hidden_dropout=0.0, attention_dropout=0.0).train()
        out = model(ids, mask, types).last_hidden_state
        (out.square() * mask[..., None]).sum().backward()
        grads.append({n: p.grad for n, p in model.named_parameters()})
    for name, g in grads[0].items():
        assert torch.allclose(g, grads[1][name], atol=1e-5, rtol=1e-4), name


def test_cpu_attention_gradcheck_with_dropout_and_buckets(monkeypatch) -> None:
    monkeypatch.setattr(K, "_BUCKET_COST", 0)  # force one bucket per distinct length
    mask = torch.arange(7)[None] < torch.tensor([7, 3, 5, 1, 0])[:, None]
    for causal in (None, "ltr", "rtl"):
        plan, rows, _ = K.unpadded_plan(mask, 2, causal)
        assert len(plan.buckets) == 4
        qkv = torch.randn(rows.numel(), 3 * 2 * 3, dtype=torch.float64, requires_grad=True)

        def f(x: torch.Tensor, plan: K.AttentionPlan = plan) -> torch.Tensor:
            torch.manual_seed(123)  # same dropout mask at every evaluation
            return K._CpuAttention.apply(x, plan, 0.3)

        assert torch.autograd.gradcheck(f, (qkv,), eps=1e-6, atol=1e-6, fast_mode=True)


@pytest.mark.parametrize("causal", [None, "ltr", "rtl"])
def test_cpu_attention_matches_sdpa(causal) -> None:
    mask = torch.arange(9)[None] < torch.tensor([9, 4, 6])[:, None]
    for plan, n in (
        (K.unpadded_plan(mask, 2, causal)[0], int(mask.sum())),
        (K.dense_plan(mask, 3, 9, 2, causal, torch.device("cpu")), 27),
    ):
        qkv = torch.randn(n, 24, dtype=torch.float64, requires_grad=True)
        a = K._CpuAttention.apply(qkv, plan, 0.0)
        b = K.sdpa_attention(qkv, plan, 0.0)
        weights = torch.randn_like(a)
        ga = torch.autograd.grad((a * weights).sum(), qkv)[0]
        gb = torch.autograd.grad((b * weights).sum(), qkv)[0]
        assert torch.allclose(a, b, atol=1e-10) and torch.allclose(ga, gb, atol=1e-10)


@pytest.mark.parametrize("lengths", [[6, 0, 2], [0, 0]])
def test_no_nan_with_empty_sequences_and_rtl_padding(lengths: list[int]) -> None:
    ids, mask, types = batch(lengths, 6)
    for unpad in (True, False):
        for causal in (None, "ltr", "rtl"):
            model = encoder(unpad=unpad).train()
            out = model(ids, mask, types, causal=causal).last_hidden_state
            out.sum().backward()
            assert torch.isfinite(out).all()
            assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_bf16_autocast_close_to_fp32() -> None:
    model = encoder()
    ids, mask, types = batch([16, 9, 13, 4], 16)
    with torch.no_grad():
        ref = model(ids, mask, types).last_hidden_state
    model.train()
    for grad in (False, True):
        with torch.set_grad_enabled(grad), torch.autocast("cpu", dtype=torch.bfloat16):
            out = model.eval()(ids, mask, types).last_hidden_state
        assert out.dtype == torch.float32  # residual stream and LayerNorms stay fp32
        err = (out.float() - ref)[mask.bool()].abs()
        assert err.mean() < 0.02 and err.max() < 0.15
    model.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(ids, mask, types).last_hidden_state
    out.float().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_hidden_states() -> None:
    model = encoder()
    ids, mask, types = batch([5, 3], 5)
    with torch.no_grad():
        out = model(ids, mask, types, output_hidden_states=True)
        assert model(ids, mask, types).hidden_states is None
    assert len(out.hidden_states) == model.num_layers + 1 == 3
    assert all(h.shape == (2, 5, 32) for h in out.hidden_states)
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
    emb = model.embed(ids, types)
    assert real_max_diff(out.hidden_states[0], emb, mask) < 1e-6


def test_dropout_is_active_in_training_and_reproducible() -> None:
    model = encoder()
    ids, mask, types = batch([8, 8], 8)
    with torch.no_grad():
        ref = model(ids, mask, types).last_hidden_state
        model.train()
        torch.manual_seed(7)
        a = model(ids, mask, types).last_hidden_state
        torch.manual_seed(7)
        b = model(ids, mask, types).last_hidden_state
    assert torch.equal(a, b)
    assert (a - ref).abs().max() > 1e-2


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_cpu_dropout_statistics(p: float) -> None:
    x = torch.ones(400_000, requires_grad=True)
    torch.manual_seed(0)
    y = K.dropout(x, p, True)
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - p) < 0.005
    assert abs(y.mean().item() - 1.0) < 0.01  # inverted dropout keeps the expectation
    y.backward(torch.full_like(y, 2.0))
    assert torch.equal(x.grad, 2 * y.detach())
    x2 = torch.randn(1000, requires_grad=True)
    r = torch.randn(1000, requires_grad=True)
    torch.manual_seed(1)
    out = K.residual_dropout(r, x2, p, True)
    kept = out.detach() != r.detach()
    assert torch.allclose(out[kept], (r + x2 / (1 - p))[kept], atol=1e-4)
    assert torch.equal(K.dropout(x2, p, False), x2)


def test_parameter_depth() -> None:
    model = encoder()
    depths = {n: model.parameter_depth(n) for n, _ in model.named_parameters()}
    assert depths["embeddings.word.weight"] == 0
    assert depths["embeddings.norm.bias"] == 0
    assert depths["embeddings_project.weight"] == 0
    assert depths["layers.0.qkv.weight"] == 1
    assert depths["layers.1.ffn_norm.bias"] == 2
    assert model.parameter_depth("head.out.weight") is None
    assert set(depths.values()) == {0, 1, 2}
    assert model.num_layers == 2


def test_init() -> None:
    torch.manual_seed(0)
    model = Encoder(preset("mini", vocab_size=5000))
    w = model.layers[0].ffn_in.weight
    assert abs(w.std().item() - 0.02 * 0.88) < 0.001  # std of N(0, 0.02) truncated at 2 std is 0.88 * 0.02
    assert w.abs().max() <= 0.04
    assert abs(model.embeddings.word.weight.std().item() - 0.0176) < 0.001
    assert torch.count_nonzero(model.layers[0].qkv.bias) == 0
    assert torch.all(model.layers[1].attn_norm.weight == 1)


def test_shared_embeddings_between_generator_and_discriminator() -> None:
    disc_config = tiny(hidden_size=128, intermediate_size=256)
    disc = Encoder(disc_config)
    gen_config = generator_config(disc_config, 0.25)
    assert (gen_config.hidden_size, gen_config.num_heads, gen_config.intermediate_size) == (32, 1, 64)
    before = disc.embeddings.word.weight.detach().clone()
    gen = Encoder(gen_config, embeddings=disc.embeddings)
    assert torch.equal(disc.embeddings.word.weight, before)  # sharing does not re-initialise
    assert gen.embeddings is disc.embeddings
    assert gen.embeddings_project is not disc.embeddings_project
    assert gen.embeddings_project.weight.shape == (32, 16) and disc.embeddings_project.weight.shape == (128, 16)
    ids, mask, types = batch([6, 4], 6)
    (gen(ids, mask, types).last_hidden_state * torch.randn(2, 6, 32)).sum().backward()
    g1 = disc.embeddings.word.weight.grad.clone()
    assert g1.abs().max() > 1e-4
    (disc(ids, mask, types).last_hidden_state * torch.randn(2, 6, 128)).sum().backward()
    assert (disc.embeddings.word.weight.grad - g1).abs().max() > 1e-4  # both accumulate into the shared block
    with pytest.raises(ValueError, match="shared embeddings"):
        Encoder(tiny(embedding_size=8), embeddings=disc.embeddings)


def test_length_buckets_cover_every_sequence_once() -> None:
    lengths = [5, 0, 17, 128, 64, 64, 3, 100, 128, 33] * 4
    buckets = K._length_buckets(lengths)
    seen = sorted(s for _, seqs in buckets for s in seqs)
    assert seen == sorted(i for i, n in enumerate(lengths) if n > 0)
    assert all(lengths[s] <= cap for cap, seqs in buckets for s in seqs)
    assert 1 < len(buckets) < 8
    assert K._length_buckets([0, 0]) == []


def test_config_roundtrip_and_validation() -> None:
    config = tiny()
    assert EncoderConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="hidden_sise"):
        EncoderConfig.from_dict({**config.to_dict(), "hidden_sise": 3})
    with pytest.raises(ValueError, match="multiple of num_heads"):
        tiny(num_heads=5)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        encoder()(torch.zeros(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match="causal"):
        encoder()(torch.zeros(1, 3, dtype=torch.long), causal="both")


def test_presets() -> None:
    small = preset("electra-small")
    assert (small.hidden_size, small.num_layers, small.num_heads, small.intermediate_size, small.embedding_size) == (
        256,
        12,
        4,
        1024,
        128,
    )
    assert preset("bert-small").hidden_size == 512 and preset("tiny", vocab_size=7).vocab_size == 7
    assert generator_config(preset("electra-base"), 1 / 3).hidden_size == 256
    with pytest.raises(ValueError, match="did you mean 'electra-small'"):
        preset("electra-smal")


def test_position_ids_and_no_mask() -> None:
    model = encoder()
    ids, _, _ = batch([6, 6], 6)
    with torch.no_grad():
        a = model(ids).last_hidden_state
        b = model(ids, torch.ones_like(ids), position_ids=torch.arange(6)).last_hidden_state
        c = model(ids, position_ids=torch.arange(6).flip(0)).last_hidden_state
    assert torch.allclose(a, b, atol=1e-6)
    assert (a - c).abs().max() > 1e-3


def test_encoder_module_is_the_network_and_kernels_live_beside_it() -> None:
    """encoder.py holds the modules only; every autograd kernel is in kernels.py, and the names
    other modules import from encoder.py (dropout for heads, ...) are the kernels' own objects."""
    import inspect

    own = [obj for _, obj in inspect.getmembers(E, inspect.isclass) if obj.__module__ == E.__name__]
    assert {c.__name__ for c in own} == {"EncoderConfig", "EncoderOutput", "Embeddings", "Layer", "Encoder"}
    assert not any(issubclass(c, torch.autograd.Function) for c in own)
    kernels = [c for _, c in inspect.getmembers(K, inspect.isclass) if issubclass(c, torch.autograd.Function)]
    assert {c.__name__ for c in kernels} == {"_CpuDropout", "_CpuResidualDropout", "_CpuAttention"}
    assert E.dropout is K.dropout and E.residual_dropout is K.residual_dropout and E.attention is K.attention

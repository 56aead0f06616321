"""Learning-rate schedules, parameter groups (weight-decay exclusion, layer-wise LR decay) and the
bias-correction-free AdamW of the original BERT/ELECTRA code."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from xfer.core.optim import AdamW, lr_multiplier, make_optimizer, param_groups

# --- schedules ---------------------------------------------------------------------------------

T, W = 100, 10  # total steps, warmup steps


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        # step:          0    5      10    55     99      100
        ("linear", [0.0, 0.5, 1.0, 0.5, 1 / 90, 0.0]),
        # original ELECTRA: (1 - t/T) * min(1, t/W); the peak (at t=W) is 0.9, not 1
        ("warmup_on_decay", [0.0, 0.95 * 0.5, 0.9, 0.45, 0.01, 0.0]),
        ("constant", [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
        ("constant_warmup", [0.0, 0.5, 1.0, 1.0, 1.0, 1.0]),
        # CVT (cvt_text): min(1, t/W) / (1 + 0.005 sqrt(t)); the warm-up is the original's too
        ("inverse_sqrt_t", [0.0, *(min(1, t / W) / (1 + 0.005 * math.sqrt(t)) for t in (5, 10, 55, 99, 100))]),
    ],
)
def test_lr_multiplier_at_key_steps(schedule: str, expected: list[float]) -> None:
    got = [lr_multiplier(schedule, t, T, W) for t in (0, 5, 10, 55, 99, 100)]  # type: ignore[arg-type]
    assert got == pytest.approx(expected, abs=1e-12)


def test_warmup_on_decay_is_the_electra_formula_everywhere() -> None:
    for t in range(T + 1):
        electra = (1 - t / T) * min(1.0, t / W)
        assert lr_multiplier("warmup_on_decay", t, T, W) == pytest.approx(electra, abs=1e-12)
        # linear reaches the full peak at the end of warmup, warmup_on_decay never does
        assert lr_multiplier("warmup_on_decay", t, T, W) <= lr_multiplier("linear", t, T, W) + 1e-12
    assert max(lr_multiplier("warmup_on_decay", t, T, W) for t in range(T)) == pytest.approx(0.9)
    assert max(lr_multiplier("linear", t, T, W) for t in range(T)) == pytest.approx(1.0)


def test_linear_decay_slope_after_warmup() -> None:
    # after warmup the linear schedule decays over the T - W remaining steps (HF semantics)
    for t in range(W, T + 1):
        assert lr_multiplier("linear", t, T, W) == pytest.approx((T - t) / (T - W))


@pytest.mark.parametrize("schedule", ["linear", "warmup_on_decay", "constant_warmup"])
def test_no_warmup_starts_at_the_peak(schedule: str) -> None:
    assert lr_multiplier(schedule, 0, T, 0) == 1.0  # type: ignore[arg-type]


def test_unknown_schedule_raises() -> None:
    with pytest.raises(ValueError, match="unknown schedule 'cosine'"):
        lr_multiplier("cosine", 3, T, W)  # type: ignore[arg-type]


# --- parameter groups ----------------------------------------------------------------------------


class FakeEncoder(nn.Module):
    """Reports depths like a transformer encoder: embeddings 0, layer i -> i + 1, pooler None."""

    num_layers = 3

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(11, 4)
        self.LayerNorm = nn.LayerNorm(4)  # embedding LayerNorm (HF naming)
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(self.num_layers))
        self.layer_norms = nn.ModuleList(nn.LayerNorm(4) for _ in range(self.num_layers))
        self.pooler = nn.Linear(4, 4)

    def parameter_depth(self, name: str) -> int | None:
        if name.startswith(("embeddings.", "LayerNorm.")):
            return 0
        if name.startswith(("layers.", "layer_norms.")):
            return int(name.split(".")[1]) + 1
        return None


class FakeModel(nn.Module):
    def __init__(self, tie: bool = False) -> None:
        super().__init__()
        self.encoder = FakeEncoder()
        self.head = nn.Linear(4, 2)
        self.decoder = nn.Linear(4, 11, bias=False)
        if tie:
            self.decoder.weight = self.encoder.embeddings.weight
        self.frozen = nn.Parameter(torch.zeros(3), requires_grad=False)


def _scale_and_decay(groups: list[dict]) -> dict[int, tuple[float, float]]:
    out: dict[int, tuple[float, float]] = {}
    for group in groups:
        assert group["lr"] == pytest.approx(0.1 * group["lr_scale"])
        for p in group["params"]:
            assert id(p) not in out, "a parameter is in two groups"
            out[id(p)] = (group["lr_scale"], group["weight_decay"])
    return out


def test_weight_decay_exclusion_by_name_pattern() -> None:
    model = FakeModel()
    groups = param_groups(model, 0.1, 0.01, ["bias", "LayerNorm", "layer_norm"])
    info = _scale_and_decay(groups)
    names = dict(model.named_parameters())
    for name, param in names.items():
        if name == "frozen":
            assert id(param) not in info, "parameters without requires_grad are not optimised"
            continue
        excluded = name.endswith("bias") or "layernorm" in name.lower() or "layer_norm" in name
        assert info[id(param)] == (1.0, 0.0 if excluded else 0.01), name
    # case-insensitive: "LayerNorm" also excludes "encoder.LayerNorm.weight"
    assert info[id(model.encoder.LayerNorm.weight)][1] == 0.0
    assert info[id(model.encoder.layer_norms[2].weight)][1] == 0.0
    assert info[id(model.encoder.layers[0].weight)][1] == 0.01
    # without layer decay there are exactly two groups
    assert sorted(g["weight_decay"] for g in groups) == [0.0, 0.01]


@pytest.mark.parametrize(("top_layer", "offset"), [("decay", 1), ("decay_squared", 2)])
def test_layer_wise_lr_decay(top_layer: str, offset: int) -> None:
    d, n = 0.5, FakeEncoder.num_layers
    model = FakeModel()
    info = _scale_and_decay(param_groups(model, 0.1, 0.01, ["bias", "layernorm"], d, top_layer))  # type: ignore[arg-type]
    enc = model.encoder
    expected = {
        enc.embeddings.weight: d ** (n + offset),  # embeddings deepest
        enc.LayerNorm.weight: d ** (n + offset),
        enc.layers[0].weight: d ** (n + offset - 1),
        enc.layers[0].bias: d ** (n + offset - 1),
        enc.layers[1].weight: d ** (n + offset - 2),
        enc.layers[2].weight: d**offset,  # top layer: decay (thesis) or decay**2 (ELECTRA code)
        enc.layer_norms[2].bias: d**offset,
        enc.pooler.weight: 1.0,  # depth None inside the encoder
        model.head.weight: 1.0,  # above the encoder
        model.head.bias: 1.0,
        model.decoder.weight: 1.0,
    }
    for param, scale in expected.items():
        assert info[id(param)][0] == pytest.approx(scale)
    # exclusions still apply inside each depth group
    assert info[id(enc.layers[0].bias)][1] == 0.0 and info[id(enc.layers[0].weight)][1] == 0.01


def test_top_layer_values_spelled_out() -> None:
    # 3 layers, decay 0.8: thesis formula top=0.8, embeddings=0.8**4; ELECTRA code top=0.64, emb=0.8**5
    for top_layer, top, emb in (("decay", 0.8, 0.8**4), ("decay_squared", 0.64, 0.8**5)):
        model = FakeModel()
        info = _scale_and_decay(param_groups(model, 0.1, 0.0, [], 0.8, top_layer))  # type: ignore[arg-type]
        assert info[id(model.encoder.layers[2].weight)][0] == pytest.approx(top)
        assert info[id(model.encoder.embeddings.weight)][0] == pytest.approx(emb)
        assert info[id(model.head.weight)][0] == 1.0


def test_tied_parameters_appear_once() -> None:
    model = FakeModel(tie=True)
    for decay in (1.0, 0.5):
        groups = param_groups(model, 0.1, 0.01, ["bias"], decay)
        params = [p for g in groups for p in g["params"]]
        assert len(params) == len({id(p) for p in params})
        assert sum(p is model.encoder.embeddings.weight for p in params) == 1
        unique = {id(p) for p in model.parameters() if p.requires_grad}
        assert {id(p) for p in params} == unique
        # it must be acceptable to an optimizer (torch refuses duplicates across groups)
        make_optimizer(groups, "adamw", 0.1, (0.9, 0.999), 1e-6, True, 0.9)


def test_no_layered_submodule_means_no_decay() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.LayerNorm(2))
    groups = param_groups(model, 0.1, 0.01, ["bias"], layer_decay=0.5)
    assert {g["lr_scale"] for g in groups} == {1.0}


# --- optimizers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "foreach"])
def test_adamw_without_bias_correction_matches_hand_computation(fused: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both paths: torch's fused kernel (CPU/CUDA) at a step where its bias corrections are 1,
    and the foreach fallback (devices without the kernel)."""
    from xfer.core import optim

    if not fused:
        monkeypatch.setattr(optim, "_fused_supported", lambda params: False)
    else:
        assert optim._fused_supported([torch.ones(1, dtype=torch.float64)])
    torch.manual_seed(0)
    lr, beta1, beta2, eps = 0.01, 0.9, 0.999, 1e-6
    a = torch.randn(3, 2, dtype=torch.float64)
    b = torch.randn(4, dtype=torch.float64)
    grads = [[torch.randn_like(a), torch.randn_like(b)] for _ in range(3)]
    wd = {0: 0.1, 1: 0.0}  # a decays, b does not (like a bias)

    pa, pb = nn.Parameter(a.clone()), nn.Parameter(b.clone())
    opt = AdamW(
        [{"params": [pa], "weight_decay": wd[0]}, {"params": [pb], "weight_decay": wd[1]}],
        lr=lr,
        betas=(beta1, beta2),
        eps=eps,
    )

    weights = [a.clone(), b.clone()]
    m = [torch.zeros_like(a), torch.zeros_like(b)]
    v = [torch.zeros_like(a), torch.zeros_like(b)]
    for step_grads in grads:
        pa.grad, pb.grad = step_grads[0].clone(), step_grads[1].clone()
        opt.step()
        for i, g in enumerate(step_grads):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            update = m[i] / (v[i].sqrt() + eps) + wd[i] * weights[i]
            weights[i] = weights[i] - lr * update
        torch.testing.assert_close(pa.detach(), weights[0], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(pb.detach(), weights[1], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(opt.state[pa]["exp_avg"], m[0], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(opt.state[pb]["exp_avg_sq"], v[1], rtol=1e-12, atol=1e-12)

    # and it really differs from bias-corrected AdamW: the first update is ~3x larger
    ref = nn.Parameter(a.clone())
    torch_opt = torch.optim.AdamW([ref], lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=0.0)
    mine = nn.Parameter(a.clone())
    my_opt = AdamW([mine], lr=lr, betas=(beta1, beta2), eps=eps)
    ref.grad, mine.grad = grads[0][0].clone(), grads[0][0].clone()
    torch_opt.step()
    my_opt.step()
    ratio = (mine.detach() - a).abs() / (ref.detach() - a).abs()
    assert torch.allclose(ratio, torch.full_like(ratio, (1 - beta1) / math.sqrt(1 - beta2)), rtol=1e-3)


def test_fused_adamw_is_chosen_only_where_torch_has_the_kernel() -> None:
    from xfer.core.optim import _fused_supported

    assert _fused_supported([nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(3, dtype=torch.bfloat16))])
    assert not _fused_supported([nn.Parameter(torch.ones(2, device="meta"))]), "no fused kernel on meta"
    assert not _fused_supported([nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(2, device="meta"))])
    groups = [{"params": [nn.Parameter(torch.ones(2, device="meta"))], "lr_scale": 1.0}]
    opt = make_optimizer(groups, "adamw", 0.1, (0.9, 0.999), 1e-6, True, 0.9)
    assert not opt.defaults["fused"] and opt.defaults["foreach"]


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "foreach"])
def test_adamw_skips_parameters_without_gradient(fused: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from xfer.core import optim

    if not fused:
        monkeypatch.setattr(optim, "_fused_supported", lambda params: False)
    p, q = nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(2))
    opt = AdamW([p, q], lr=0.1, weight_decay=0.5)
    p.grad = torch.ones(2)
    opt.step()
    assert torch.equal(q.detach(), torch.ones(2)), "no gradient -> untouched (not even weight decay)"
    assert q not in opt.state and p in opt.state
    assert not torch.equal(p.detach(), torch.ones(2))


def test_make_optimizer_kinds() -> None:
    model = FakeModel()
    groups = param_groups(model, 0.1, 0.01, ["bias"], 0.5)
    corrected = make_optimizer(groups, "adamw", 0.1, (0.9, 0.98), 1e-6, True, 0.9)
    assert type(corrected) is torch.optim.AdamW
    assert corrected.param_groups[0]["betas"] == (0.9, 0.98)
    # torch's fused kernel on CPU: one pass per tensor (the foreach path is a slow per-tensor loop there)
    assert corrected.defaults["fused"] is True and not corrected.defaults["foreach"]
    groups = param_groups(model, 0.1, 0.01, ["bias"], 0.5)
    plain = make_optimizer(groups, "adamw", 0.1, (0.9, 0.98), 1e-6, False, 0.9)
    assert type(plain) is AdamW and plain.param_groups[0]["eps"] == 1e-6
    groups = param_groups(model, 0.1, 0.01, ["bias"], 0.5)
    sgd = make_optimizer(groups, "sgd", 0.1, (0.9, 0.98), 1e-6, True, 0.7)
    assert type(sgd) is torch.optim.SGD and sgd.param_groups[0]["momentum"] == 0.7
    # group metadata survives into the optimizer (the trainer reads lr_scale every step)
    for opt in (corrected, plain, sgd):
        assert sorted(g["lr_scale"] for g in opt.param_groups) == sorted(g["lr_scale"] for g in groups)
        assert all(g["lr"] == pytest.approx(0.1 * g["lr_scale"]) for g in opt.param_groups)


def test_normalization_layers_are_never_decayed_whatever_their_names() -> None:
    """The xfer encoder names its LayerNorms `norm`, `attn_norm`, `ffn_norm`: no name pattern matches."""
    model = nn.Sequential()
    model.add_module("proj", nn.Linear(4, 4))
    model.add_module("attn_norm", nn.LayerNorm(4))
    groups = _scale_and_decay(param_groups(model, 0.1, 0.01, ["bias"]))
    assert groups[id(model.attn_norm.weight)][1] == 0.0 and groups[id(model.attn_norm.bias)][1] == 0.0
    assert groups[id(model.proj.weight)][1] == 0.01


@pytest.mark.parametrize("depth", [3, -1, 1.5, True])
def test_a_parameter_depth_outside_the_layers_is_a_plugin_error(depth: object) -> None:
    """A depth past the top (3 for 2 layers) gave a learning-rate multiplier above 1, silently."""
    from xfer.core.errors import PluginError

    class Layered(nn.Module):
        num_layers = 2

        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 2)

        def parameter_depth(self, name: str) -> object:
            return depth

    with pytest.raises(PluginError, match=r"parameter_depth\('layer\.weight'\) returned .*: a depth is 0"):
        param_groups(Layered(), 1e-3, 0.0, (), layer_decay=0.8)

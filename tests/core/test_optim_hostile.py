"""Hostile review of parameter groups and training-length settings: tied parameters judged by their
first name only, a second encoder left out of layer-wise LR decay, hand-written normalization layers
decayed, and `warmup_fraction` rounded half-to-even with float noise."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from xfer.core.optim import param_groups
from xfer.core.train_config import TrainConfig
from xfer.testing import write_recipe

from .recipes import BARE, testing_host, validate_errors  # noqa: F401 (testing_host: autouse fixture)


class Encoder(nn.Module):
    """Reports depths like a transformer encoder: embeddings 0, layer i -> i + 1."""

    num_layers = 2

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(11, 4)
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(self.num_layers))

    def parameter_depth(self, name: str) -> int | None:
        if name.startswith("embeddings."):
            return 0
        if name.startswith("layers."):
            return int(name.split(".")[1]) + 1
        return None


def _info(groups: list[dict]) -> dict[int, tuple[float, float]]:
    """id(parameter) -> (lr_scale, weight_decay), checking each parameter is in one group only."""
    out: dict[int, tuple[float, float]] = {}
    for group in groups:
        for p in group["params"]:
            assert id(p) not in out, "a parameter is in two groups"
            out[id(p)] = (group["lr_scale"], group["weight_decay"])
    return out


# --- tied parameters --------------------------------------------------------------------------------


class DecoderFirst(nn.Module):
    """An MLM-style objective that registers its tied decoder (and an output offset tied to the top
    layer's bias) before the encoder: the tied parameters' first names are the head's."""

    def __init__(self) -> None:
        super().__init__()
        self.decoder = nn.Linear(4, 11, bias=False)
        self.offset = nn.Module()
        self.encoder = Encoder()
        self.decoder.weight = self.encoder.embeddings.weight
        self.offset.shift = self.encoder.layers[1].bias


def test_a_tied_parameter_gets_its_encoder_depth_whatever_name_comes_first() -> None:
    """The word embeddings, first named `decoder.weight`, trained at the head's full lr (scale 1)
    instead of the deepest layer-decay factor."""
    model = DecoderFirst()
    d = 0.5
    info = _info(param_groups(model, 1.0, 0.0, [], layer_decay=d))
    assert info[id(model.encoder.embeddings.weight)][0] == pytest.approx(d**3), "embeddings: the deepest factor"
    assert info[id(model.encoder.layers[1].bias)][0] == pytest.approx(d), "the top layer's bias"
    assert info[id(model.encoder.layers[0].weight)][0] == pytest.approx(d**2)
    params = [p for g in param_groups(model, 1.0, 0.0, [], layer_decay=d) for p in g["params"]]
    assert len(params) == len({id(p) for p in model.parameters()}), "each tied parameter once"


def test_a_tied_parameter_is_excluded_from_decay_by_any_of_its_names() -> None:
    """`encoder.layers.1.bias`, first named `offset.shift`, was weight-decayed: no_decay's "bias" was
    matched against the first name only."""
    model = DecoderFirst()
    info = _info(param_groups(model, 1.0, 0.01, ["bias"]))
    assert info[id(model.encoder.layers[1].bias)][1] == 0.0
    assert info[id(model.encoder.layers[0].bias)][1] == 0.0
    assert info[id(model.encoder.layers[1].weight)][1] == 0.01
    assert info[id(model.encoder.embeddings.weight)][1] == 0.01


# --- more than one encoder ----------------------------------------------------------------------------


class DualEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query = Encoder()
        self.document = Encoder()
        self.head = nn.Linear(8, 2)


def test_every_encoder_of_a_model_gets_layer_wise_decay() -> None:
    """Only the first module reporting depths was used: the second encoder's embeddings and layers
    all trained at the head's full lr, silently."""
    model = DualEncoder()
    d = 0.5
    info = _info(param_groups(model, 1.0, 0.0, [], layer_decay=d))
    for encoder in (model.query, model.document):
        assert info[id(encoder.embeddings.weight)][0] == pytest.approx(d**3)
        assert info[id(encoder.layers[0].weight)][0] == pytest.approx(d**2)
        assert info[id(encoder.layers[1].weight)][0] == pytest.approx(d)
    assert info[id(model.head.weight)][0] == 1.0


def test_a_layered_module_inside_another_defers_to_the_outer_one() -> None:
    """The outer module names the depths of everything under it (an inner encoder is not asked)."""

    class Outer(nn.Module):
        num_layers = 3

        def __init__(self) -> None:
            super().__init__()
            self.inner = Encoder()  # depths 0..2 of its own; the outer one says 3 for all of it
            self.top = nn.Linear(4, 4)

        def parameter_depth(self, name: str) -> int | None:
            return 3 if name.startswith("inner.") else None

    model = Outer()
    info = _info(param_groups(model, 1.0, 0.0, [], layer_decay=0.5))
    assert info[id(model.inner.embeddings.weight)][0] == pytest.approx(0.5)
    assert info[id(model.top.weight)][0] == 1.0


# --- normalization layers written by hand ---------------------------------------------------------------


class RMSNorm(nn.Module):
    """A plugin's own RMSNorm (no torch normalization type)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.gain


class MixNorm(nn.Module):
    """Named like a normalization layer, but holding a weight matrix as well."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))
        self.mix = nn.Parameter(torch.ones(4, 4))


def test_a_hand_written_normalization_layer_is_never_decayed() -> None:
    """docs/recipes.md: "normalization layers' parameters are always excluded, whatever their
    names"; a plugin's own RMSNorm (`gate.gain`) was decayed towards 0."""
    model = nn.Sequential()
    model.add_module("proj", nn.Linear(4, 4))
    model.add_module("gate", RMSNorm(4))
    model.add_module("other", MixNorm())
    info = _info(param_groups(model, 1.0, 0.01, ["bias", "layernorm", "layer_norm"]))
    assert info[id(model.gate.gain)][1] == 0.0
    assert info[id(model.other.scale)][1] == 0.0
    assert info[id(model.other.mix)][1] == 0.01, "a matrix is no per-feature normalization parameter"
    assert info[id(model.proj.weight)][1] == 0.01


# --- warmup_fraction ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fraction", "total", "expected"),
    [
        (0.1, 25, 3),  # 2.5: round() gave 2 (half to even)
        (0.1, 35, 4),  # 3.5000000000000004: 4 either way
        (0.1, 45, 5),  # 4.5: round() gave 4
        (0.1, 5, 1),  # 0.5: round() gave no warmup at all
        (0.02, 25, 1),  # 0.5
        (0.15, 20, 3),  # 3.0000000000000004: the noise does not make it 4
        (0.1, 24, 2),
        (0.1, 26, 3),
        (0.0, 100, 0),
        (1.0, 7, 7),
    ],
)
def test_warmup_fraction_rounds_to_the_nearest_step_with_halves_up(fraction: float, total: int, expected: int) -> None:
    assert TrainConfig(warmup_fraction=fraction).warmup_for(total) == expected


def test_warmup_steps_when_given_override_the_fraction() -> None:
    assert TrainConfig(warmup_fraction=0.5, warmup_steps=7).warmup_for(100) == 7
    assert TrainConfig(warmup_fraction=0.5, warmup_steps=0).warmup_for(100) == 0


# --- no_decay patterns ----------------------------------------------------------------------------------


def test_an_empty_no_decay_pattern_is_refused() -> None:
    """ "" is a substring of every name: weight decay was silently off for every parameter."""
    from xfer.core.config import FieldError

    with pytest.raises(FieldError, match=r"no_decay\.1: an empty pattern matches every parameter name"):
        TrainConfig(weight_decay=0.01, no_decay=["bias", ""])
    TrainConfig(no_decay=[])  # no pattern at all: only normalization layers are excluded, as documented


def test_an_empty_no_decay_pattern_is_a_recipe_error_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_recipe(tmp_path, BARE + '    train: {weight_decay: 0.01, no_decay: [bias, ""]}\n')
    err = validate_errors(path, capsys)
    assert f"{path.resolve()}:6:" in err and "stages.fit.train.no_decay.1" in err, err

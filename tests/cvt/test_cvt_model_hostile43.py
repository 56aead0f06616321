"""Hostile review of the CVT model modules (session 43): LSTM projections and edge cases."""

from __future__ import annotations

import pytest
import torch

from xfer.cvt.model import BiLSTM
from xfer.cvt.objective import Settings
from xfer.cvt.parsing import ParsingModule


def _lstmp_reference(x: torch.Tensor, lstm: torch.nn.LSTM, w_hm: torch.Tensor, w_p: torch.Tensor) -> torch.Tensor:
    """The original's LSTMP cell (TF `LSTMCell(num_proj=...)`), one step at a time: the recurrent
    state m is the projected cell output, m_t = W_p (o_t * tanh(c_t)). Torch gate order i, f, g, o."""
    batch, hidden = x.shape[0], w_p.shape[0]
    m, c = x.new_zeros(batch, w_p.shape[0]), x.new_zeros(batch, hidden)
    outputs = []
    for t in range(x.shape[1]):
        gates = x[:, t] @ lstm.weight_ih_l0.T + m @ w_hm.T + lstm.bias_ih_l0 + lstm.bias_hh_l0
        i, f, g, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        m = (torch.sigmoid(o) * torch.tanh(c)) @ w_p.T
        outputs.append(m)
    return torch.stack(outputs, dim=1)


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("projection", [8, 11])
def test_a_projection_at_or_above_the_lstm_size_is_the_originals_square_projection(packed, projection):
    """`LSTMCell(size, num_proj=min(size, projection))` in the original: a projection of the LSTM's
    own size still multiplies every output (and recurrent state) by a matrix. It was dropped
    without a word (so `model: thesis`, LSTM 512 with projection 512, had none on layer 2)."""
    torch.manual_seed(0)
    hidden = 8
    layer = BiLSTM(5, hidden, projection)
    assert layer.output_size == hidden
    assert layer.fw_proj is not None and layer.bw_proj is not None  # AttributeError before the fix
    w_hm, w_p = torch.randn(4 * hidden, hidden) * 0.3, torch.randn(hidden, hidden) * 0.3
    with torch.no_grad():  # the LSTMP (W_hm, W_p) as a plain LSTM: W_hh = W_hm W_p, outputs times W_p
        layer.fw.weight_hh_l0.copy_(w_hm @ w_p)
        layer.fw_proj.weight.copy_(w_p)
        layer.fw.bias_ih_l0.normal_()
    x = torch.randn(2, 6, 5)
    lengths = torch.tensor([6, 6])
    fw, bw = layer(x, lengths, packed)
    torch.testing.assert_close(fw, _lstmp_reference(x, layer.fw, w_hm, w_p), rtol=1e-5, atol=1e-5)
    assert bw.shape == fw.shape


def test_a_projection_below_the_lstm_size_stays_torchs_lstmp():
    layer = BiLSTM(5, 8, 6)
    assert layer.output_size == 6 and layer.fw.proj_size == 6 and layer.fw_proj is None
    assert BiLSTM(5, 8, None).fw_proj is None


@pytest.mark.parametrize("decoding", ["argmax", "mst"])
def test_a_test_sentence_without_words_parses_to_an_empty_tree(kit, decoding):
    """Train and dev sentences without words are refused by the stage, test ones are not (their
    prediction is empty). MST decoding crashed on one: `torch.tensor([])` is a float tensor, an
    IndexError as an index; argmax decoding returned the empty tree."""
    k = kit()
    module = ParsingModule(k.encoder.full_size, k.encoder.uni_size, 16, 8, ["root", "nsubj"], ["root"], []).eval()
    states = k.states([[], ["dog"], ["bob", "runs"]])
    out = module.predict(states, {}, Settings(parse_decoding=decoding))
    assert out[0] == ([], [])
    assert len(out[1][0]) == 1 and len(out[2][0]) == 2
    assert out[1][0] == [0] and out[1][1] == ["root"]  # a one-word sentence: its word hangs from ROOT


def test_the_thesis_shape_projection_runs_on_layer_2_alike_packed_and_padded(kit, sentences):
    """`projection` equal to lstm2 (the thesis preset's 512 / 512, here 12 / 12): layer 1 gets
    torch's LSTMP (16 -> 12), layer 2 the square projection; both LSTM implementations agree."""
    padded, packed = kit(sizes={"projection": 12}), kit(packed=True, sizes={"projection": 12})
    assert padded.encoder.layer1.fw.proj_size == 12 and padded.encoder.layer2.fw_proj is not None
    assert padded.encoder.full_size == 4 * 12
    a, b = padded.states(sentences), packed.states(sentences)
    for name in ("fw1", "bw1", "fw2", "bw2"):
        torch.testing.assert_close(getattr(a, name)[a.mask], getattr(b, name)[b.mask], rtol=1e-5, atol=1e-6)

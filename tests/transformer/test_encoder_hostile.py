"""Hostile review of the encoder's inputs: attention masks of the wrong shape or kind, ids outside
their embedding tables, and shared embedding blocks that do not fit the config. Each was silently
wrong or a bare `IndexError`/unpacking error before."""

from __future__ import annotations

import pytest
import torch

from xfer.transformer.encoder import Embeddings, Encoder, EncoderConfig


def tiny(**overrides) -> EncoderConfig:
    values = {
        "vocab_size": 50,
        "embedding_size": 16,
        "hidden_size": 32,
        "num_layers": 2,
        "num_heads": 2,
        "intermediate_size": 64,
        "max_position_embeddings": 20,
    }
    return EncoderConfig(**{**values, **overrides})


def encoder(**overrides) -> Encoder:
    torch.manual_seed(0)
    return Encoder(tiny(**overrides)).eval()


def ids_and_mask(lengths: list[int], length: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    mask = (torch.arange(length)[None] < torch.tensor(lengths)[:, None]).long()
    return torch.randint(1, 50, (len(lengths), length), generator=g) * mask, mask


@pytest.mark.parametrize("unpad", [True, False])
def test_mask_of_another_length_is_refused_not_misread(unpad: bool) -> None:
    # a [B, 5] mask for [B, 10] ids picked flat rows of the wrong tokens and wrote the outputs
    # to the wrong positions (zeros in the middle of a real sentence), without an error
    model = encoder(unpad=unpad)
    ids, _ = ids_and_mask([10, 10], 10)
    short = torch.ones(2, 5, dtype=torch.long)
    short[0, 3:] = 0
    with pytest.raises(ValueError, match=r"attention_mask has shape \[2, 5\], expected \[2, 10\]"):
        model(ids, short)


@pytest.mark.parametrize("shape", [(2, 10, 10), (2, 1, 10)])
def test_three_d_masks_are_refused_with_a_clear_error(shape: tuple[int, ...]) -> None:
    # 3-D masks ran while all ones, and crashed ("too many values to unpack") at the first batch
    # with padding: refused up front whatever they hold
    model = encoder()
    ids, _ = ids_and_mask([10, 10], 10)
    mask = torch.ones(shape).tril() if len(shape) == 3 and shape[1] == shape[2] else torch.ones(shape)
    with pytest.raises(ValueError, match=r"attention_mask has shape .* like input_ids"):
        model(ids, mask)


def test_additive_hf_style_mask_is_refused() -> None:
    # 0 = real, -10000 = padding: `.bool()` read it as "real tokens are padding, padding is real"
    model = encoder()
    ids, mask = ids_and_mask([8, 10], 10)
    additive = (1.0 - mask.float()) * -10000.0
    with pytest.raises(ValueError, match=r"attention_mask holds -10000.0 at \[0, 8\]: it must be 0/1"):
        model(ids, additive)


@pytest.mark.parametrize("dtype", [torch.bool, torch.long, torch.int32, torch.float32, torch.bfloat16])
def test_zero_one_masks_of_every_dtype_give_the_same_outputs(dtype: torch.dtype) -> None:
    model = encoder()
    ids, mask = ids_and_mask([6, 10, 0], 10)
    want = model(ids, mask.bool()).last_hidden_state
    got = model(ids, mask.to(dtype)).last_hidden_state
    assert torch.equal(got, want)
    alone = model(ids[:1, :6]).last_hidden_state
    assert (got[0, :6] - alone[0]).abs().max() < 1e-5  # padding invariance of the real tokens
    assert got[2].isfinite().all()  # an all-padding row stays finite


def test_explicit_position_ids_beyond_the_table_name_the_limit() -> None:
    # the length check covered only default positions; explicit ones hit "index out of range in self"
    model = encoder()
    ids, mask = ids_and_mask([6, 6], 6)
    with pytest.raises(ValueError, match=r"position_ids hold 20 at \[0, 5\].*max_position_embeddings=20"):
        model(ids, mask, position_ids=torch.arange(6) + 15)
    with pytest.raises(ValueError, match=r"position_ids hold -1 at \[0, 0\]"):
        model(ids, mask, position_ids=torch.arange(6) - 1)
    model(ids, mask, position_ids=torch.arange(6) + 14)  # the last row of the table is fine


def test_token_type_and_input_ids_outside_their_tables_name_the_limit() -> None:
    model = encoder()
    ids, mask = ids_and_mask([6, 4], 6)
    types = torch.zeros_like(ids)
    types[1, 2] = 2
    with pytest.raises(ValueError, match=r"token_type_ids hold 2 at \[1, 2\].*type_vocab_size=2"):
        model(ids, mask, types)
    bad = ids.clone()
    bad[1, 3] = 50
    with pytest.raises(ValueError, match=r"input_ids hold 50 at \[1, 3\].*vocab_size=50"):
        model(bad, mask)
    with pytest.raises(ValueError, match=r"input_ids hold 50 at \[1, 3\]"):
        model.embed(bad)


def test_shared_embeddings_must_match_every_table() -> None:
    # only the word table was compared: a shared block with 10 positions under a 20-position
    # config passed the length check and crashed in nn.Embedding at the 11th token
    shared = Embeddings(tiny(max_position_embeddings=10))
    with pytest.raises(ValueError, match=r"position table has shape \(10, 16\), config wants \(20, 16\)"):
        Encoder(tiny(), embeddings=shared)
    shared = Embeddings(tiny(type_vocab_size=3))
    with pytest.raises(ValueError, match=r"token_type table has shape \(3, 16\).*type_vocab_size=2"):
        Encoder(tiny(), embeddings=shared)
    shared = Embeddings(tiny())
    assert Encoder(tiny(hidden_size=64), embeddings=shared).embeddings is shared


def test_all_padding_batch_gives_zeros_when_unpadding() -> None:
    # `unpad` promises zeros at padding positions; a batch with no real token at all ran dense
    # and returned the padding tokens' (non-zero) encodings instead
    model = encoder()
    ids = torch.zeros(2, 6, dtype=torch.long)
    out = model(ids, torch.zeros(2, 6, dtype=torch.long), output_hidden_states=True)
    assert torch.equal(out.last_hidden_state, torch.zeros(2, 6, 32))
    assert all(torch.equal(h, torch.zeros(2, 6, 32)) for h in out.hidden_states)
    model.train()
    out = model(ids, torch.zeros(2, 6, dtype=torch.long)).last_hidden_state
    out.sum().backward()  # still part of the graph, with zero gradients
    assert model.layers[0].qkv.weight.grad is not None and not model.layers[0].qkv.weight.grad.any()
    dense = encoder(unpad=False)
    assert dense(ids, torch.zeros(2, 6, dtype=torch.long)).last_hidden_state.abs().sum() > 0  # unspecified there


@pytest.mark.parametrize("residual", [False, True])
def test_cpu_dropout_just_below_one_does_not_divide_by_zero(residual: bool) -> None:
    # p = 0.999999 passes every `0 <= p < 1` check but rounded to 65536/65536 drop levels:
    # ZeroDivisionError in the keep-probability scale
    from xfer.transformer.kernels import dropout, residual_dropout

    torch.manual_seed(0)
    x = torch.ones(4096)
    out = residual_dropout(torch.zeros(4096), x, 0.999999, True) if residual else dropout(x, 0.999999, True)
    assert out.isfinite().all()
    assert set(out.unique().tolist()) <= {0.0, 65536.0}  # kept values scaled by the exact 1 / keep probability


def test_unbatched_input_ids_are_refused_with_a_clear_error() -> None:
    model = encoder()
    with pytest.raises(ValueError, match=r"input_ids must be a \[batch, length\] batch, got shape \[10\]"):
        model(torch.arange(1, 11))
    with pytest.raises(ValueError, match=r"got shape \[10\]"):
        model.embed(torch.arange(1, 11))

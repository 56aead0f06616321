"""`residual_dropout`'s CPU backward: y's gradient is (grad * keep * scale) computed in fp32 and
rounded once to y's dtype, x's gradient is grad itself — also when y is bf16 (autocast linears)
and the residual stream fp32, where the cast is fused into the multiplication."""

from __future__ import annotations

import pytest
import torch

from xfer.transformer.kernels import _keep_mask, residual_dropout


@pytest.mark.parametrize("y_dtype", [torch.float32, torch.bfloat16])
def test_residual_dropout_gradients_match_the_mask(y_dtype: torch.dtype) -> None:
    x = torch.randn(48, 64, requires_grad=True)
    y = torch.randn(48, 64, dtype=y_dtype, requires_grad=True)
    torch.manual_seed(7)
    out = residual_dropout(x, y, 0.1, training=True)
    grad = torch.randn_like(out)
    out.backward(grad)
    torch.manual_seed(7)  # the same random bits: the same mask
    keep, scale = _keep_mask(y, 0.1, torch.float32)
    keep = keep * scale
    assert out.dtype == torch.float32
    assert torch.equal(out, torch.addcmul(x.detach(), y.detach(), keep))
    assert y.grad.dtype == y_dtype
    assert torch.equal(y.grad, (grad * keep).to(y_dtype))
    assert torch.equal(x.grad, grad)
    assert 0 < int((keep == 0).sum()) < keep.numel()  # some dropped, some kept

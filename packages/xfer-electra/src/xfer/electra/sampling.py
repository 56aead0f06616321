"""Drawing the generator's replacements: exact softmax samples in fp32, fused with its loss.

METHODS.md asks for samples from softmax(logits / T) in fp32 without gradient (the original
uses the Gumbel-max trick). Any exact sampler of that distribution is the same algorithm; what
differs is the cost on the [masked positions x vocabulary] logits, the largest non-matmul tensor
of an ELECTRA step. Gumbel-max needs a uniform draw, two logarithms and an argmax per entry
(on CPU the random draw alone is ~130 ms for 614 x 30522 on one thread, and does not get
faster with more threads). Inverse-CDF sampling needs one random number per *row*: exp(x - max)
once, which the generator's cross-entropy needs anyway. `generator_loss_and_sample` therefore
computes the loss, its gradient, the sample and the argmax accuracy from a single fp32
exponential pass (the `cross_entropy` + Gumbel + two argmaxes it replaces made ~9 passes).

`generator_step_from_features` goes one step further for the training step: it also owns the
vocabulary projection (features @ embeddings.T + bias), so that every [rows x vocabulary] tensor
of the step — the logits, the exponentials, the gradient — lives in buffers an `OutputWorkspace`
keeps from step to step. On CPU a fresh tensor of that size is returned to the kernel when freed
and costs its page faults again on the next step (~20 ms per 75 MB here, more than the matmul
that fills it); the reused buffers cost nothing after the first step.

Precision: a single fp32 cumulative sum over 30k probabilities would round away tokens whose
probability is below ~6e-8 of the running total. The CDF is therefore inverted in two levels —
first a block of `BLOCK` tokens by block masses, then a token inside the block by its own
cumulative sum — so a token is lost only if its whole block holds < ~6e-8 of the mass, or
the token < ~6e-8 of its block's mass.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

BLOCK = 256


def _below(total: Tensor, uniform: Tensor) -> Tensor:
    """uniform * total, kept strictly below total (fp32 rounding of the product may reach it)."""
    return torch.minimum(uniform * total, torch.nextafter(total, torch.zeros_like(total)))


def _exp_blocks(x: Tensor, top: Tensor) -> Tensor:
    """exp(x - top) [N, V] written into a zero-padded [N, blocks, BLOCK] buffer (one pass, no copy
    to pad it afterwards); `[..., :V]` of its flat view are the weights."""
    n, vocab = x.shape
    blocks = -(-vocab // BLOCK)
    buffer = x.new_empty(n, blocks * BLOCK)
    buffer[:, vocab:] = 0.0
    torch.sub(x, top, out=buffer[:, :vocab]).exp_()
    return buffer.view(n, blocks, BLOCK)


def _draw(blocks: Tensor, vocab: int) -> tuple[Tensor, Tensor]:
    """(one index per row drawn with probability weight / row total, the row totals [N, 1]) from
    non-negative weights in blocks [N, K, BLOCK], each row with positive mass.

    A returned index always has positive weight: the draw u is < the row's total, and the search
    takes the first block (then token) whose cumulative mass exceeds u. (Rows with NaN weights,
    from diverged logits, still get an id below `vocab`, so the step reaches the trainer's check
    of its non-finite loss instead of failing on an out-of-range embedding lookup.)"""
    n, count, _ = blocks.shape
    block_cdf = blocks.sum(-1).cumsum_(-1)
    total = block_cdf[:, -1:]
    noise = torch.rand(n, 2, device=blocks.device, dtype=torch.float32)
    block = torch.searchsorted(block_cdf, _below(total, noise[:, :1]), right=True).clamp_(max=count - 1).squeeze(1)
    within_cdf = blocks[torch.arange(n, device=blocks.device), block].cumsum(-1)
    token = torch.searchsorted(within_cdf, _below(within_cdf[:, -1:], noise[:, 1:]), right=True)
    return (block * BLOCK + token.squeeze(1)).clamp_(max=vocab - 1), total


@torch.no_grad()
def sample_softmax(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """One draw per row from softmax(logits / temperature), computed in fp32 (also under bf16
    autocast: bf16 logits would round away most of the distribution's tail), without gradient."""
    scaled = logits.detach().float() / temperature
    return _draw(_exp_blocks(scaled, scaled.max(-1, keepdim=True).values), scaled.shape[1])[0]


class GeneratorStep(NamedTuple):
    """The generator's contribution to one step."""

    loss: Tensor  # mean cross-entropy over the rows, fp32, with gradient
    sampled: Tensor  # [N] one draw per row from softmax(logits / T), no gradient
    accuracy: Tensor  # percent of rows whose argmax is the target


class _CrossEntropyWithSample(torch.autograd.Function):
    """Mean cross-entropy whose forward pass also draws a T = 1 sample and the argmax, sharing
    the fp32 exponentials; backward is the usual (softmax - one-hot) / N."""

    @staticmethod
    def forward(ctx, logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x = logits.detach().float()
        top, argmax = x.max(-1, keepdim=True)
        blocks = _exp_blocks(x, top)
        sampled, total = _draw(blocks, x.shape[1])
        loss = (total.log() + top - x.gather(1, targets[:, None])).mean()
        ctx.save_for_backward(blocks, total, targets)
        ctx.logits_dtype, ctx.vocab_size = logits.dtype, logits.shape[1]
        ctx.mark_non_differentiable(sampled, argmax)
        return loss, sampled, argmax.squeeze(1)

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _sampled: Tensor, _argmax: Tensor) -> tuple[Tensor, None]:
        blocks, total, targets = ctx.saved_tensors
        scale = grad_loss / targets.numel()
        vocab = ctx.vocab_size
        # In place on the saved buffer: a fresh [N, V] fp32 tensor costs its page faults (on CPU ~100 ms
        # of an ELECTRA-Small step for 608 x 30522, against ~3 ms for the multiplication). A second
        # backward through a retained graph then fails autograd's saved-tensor version check, loudly.
        grad = blocks.view(targets.numel(), -1).mul_(scale / total)[:, :vocab]
        grad[torch.arange(targets.numel(), device=grad.device), targets] -= scale
        return grad.to(ctx.logits_dtype), None


class OutputWorkspace:
    """Buffers for the [rows x vocabulary] tensors of `generator_step_from_features`, kept between
    steps. A buffer is grown (never shrunk) when a step has more rows. One workspace serves one
    forward/backward at a time: a second forward before the first one's backward overwrites the
    saved buffers, and that backward then fails autograd's version check instead of computing a
    wrong gradient."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[str, torch.dtype, torch.device, int], Tensor] = {}

    def get(self, name: str, rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        """A contiguous [rows, cols] view of the named buffer (contents undefined)."""
        key = (name, dtype, device, cols)
        buffer = self._buffers.get(key)
        if buffer is None or buffer.shape[0] < rows:
            buffer = torch.empty(-(-rows // 64) * 64, cols, dtype=dtype, device=device)
            self._buffers = {k: v for k, v in self._buffers.items() if k[0] != name} | {key: buffer}
        return buffer[:rows]


def _compute_dtype(device: torch.device, dtype: torch.dtype) -> torch.dtype:
    """The matmul dtype an `F.linear` would use here: autocast's when it is on, else the input's."""
    if torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return dtype


class _ProjectionLossAndSample(torch.autograd.Function):
    """`_CrossEntropyWithSample` of `features @ weight.T + bias`, the projection included, with
    every [rows x vocabulary] tensor in workspace buffers (see the module docstring). The matmuls
    run in the autocast dtype when autocast is on (as `F.linear` would), the softmax in fp32."""

    @staticmethod
    def forward(ctx, features, weight, bias, targets, workspace):  # type: ignore[override]
        # rows past len(targets) only round the matmuls' shape up (`xfer.transformer.kernels.row_multiple`):
        # projected, never scored, sampled or given a gradient
        device, (rows, vocab), n = features.device, (features.shape[0], weight.shape[0]), targets.numel()
        dtype = _compute_dtype(device, features.dtype)
        h, w = features.detach().to(dtype), weight.detach().to(dtype)
        logits = workspace.get("logits", rows, vocab, dtype, device)
        with torch.autocast(device.type, enabled=False):
            torch.addmm(bias.detach().to(dtype), h, w.t(), out=logits)
        logits = logits[:n]
        top, argmax = logits.max(-1, keepdim=True)
        top = top.float()
        blocks_count = -(-vocab // BLOCK)
        flat = workspace.get("exp", rows, blocks_count * BLOCK, torch.float32, device)
        flat[:, vocab:] = 0.0
        torch.sub(logits, top, out=flat[:n, :vocab]).exp_()
        blocks = flat[:n].view(n, blocks_count, BLOCK)
        sampled, total = _draw(blocks, vocab)
        loss = (total.log() + top - logits.gather(1, targets[:, None]).float()).mean()
        ctx.save_for_backward(flat, total, targets, h, w)
        ctx.workspace, ctx.vocab = workspace, vocab
        ctx.dtypes = (features.dtype, weight.dtype, bias.dtype)
        ctx.mark_non_differentiable(sampled, argmax)
        return loss, sampled, argmax.squeeze(1)

    @staticmethod
    def backward(ctx, grad_loss, _sampled, _argmax):  # type: ignore[override]
        flat, total, targets, h, w = ctx.saved_tensors
        n, vocab, rows = targets.numel(), ctx.vocab, h.shape[0]
        scale = grad_loss / n
        flat[:n].mul_(scale / total)  # in place, as _CrossEntropyWithSample
        flat[n:] = 0.0  # the rows that only round the shape up
        grad = flat[:, :vocab]
        grad[torch.arange(n, device=grad.device), targets] -= scale
        grad_bias = grad.sum(0)
        if h.dtype != torch.float32:  # the low-precision copy goes into the (now free) logits buffer
            grad = ctx.workspace.get("logits", rows, vocab, h.dtype, h.device).copy_(grad)
        with torch.autocast(h.device.type, enabled=False):
            grad_features = grad @ w
            grad_weight = grad.t() @ h
        features_dtype, weight_dtype, bias_dtype = ctx.dtypes
        return (
            grad_features.to(features_dtype),
            grad_weight.to(weight_dtype),
            grad_bias.to(bias_dtype),
            None,
            None,
        )


def generator_step_from_features(
    features: Tensor,
    weight: Tensor,
    bias: Tensor,
    targets: Tensor,
    workspace: OutputWorkspace,
    temperature: float = 1.0,
) -> GeneratorStep:
    """`generator_loss_and_sample(features @ weight.T + bias, targets, temperature)`, with the
    vocabulary projection fused in and its large tensors in `workspace` (same loss, gradients and
    sampling distribution; see `_ProjectionLossAndSample`). `features` may have rows past
    len(targets), gathered only to round the matmul's shape up (`xfer.transformer.kernels.padded_index`):
    they are projected and dropped."""
    if features.shape[0] < targets.numel():
        raise ValueError(f"{features.shape[0]} feature rows for {targets.numel()} targets")
    if targets.numel() == 0 or temperature != 1.0:
        logits = F.linear(features, weight.to(features.dtype), bias.to(features.dtype))
        return generator_loss_and_sample(logits[: targets.numel()], targets, temperature)
    loss, sampled, argmax = _ProjectionLossAndSample.apply(features, weight, bias, targets, workspace)
    return GeneratorStep(loss, sampled, 100.0 * (argmax == targets).float().mean())


def generator_loss_and_sample(logits: Tensor, targets: Tensor, temperature: float = 1.0) -> GeneratorStep:
    """Cross-entropy of `logits` [N, V] against `targets` [N], a sample per row from
    softmax(logits / temperature) and the argmax accuracy, in fp32, from one exponential pass
    (a second one only when temperature != 1)."""
    if targets.numel() == 0:
        zero = logits.sum() * 0.0
        return GeneratorStep(zero.float(), targets.new_empty(0), zero.detach().float())
    loss, sampled, argmax = _CrossEntropyWithSample.apply(logits, targets)
    if temperature != 1.0:
        sampled = sample_softmax(logits, temperature)
    return GeneratorStep(loss, sampled, 100.0 * (argmax == targets).float().mean())

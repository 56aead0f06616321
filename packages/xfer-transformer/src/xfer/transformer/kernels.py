"""CPU-fast building blocks of the encoder: dropout, the attention plan, attention kernels.

`xfer.transformer.encoder` is the network, read top to bottom; this module holds the speed
tricks it calls (`dropout`, `residual_dropout`, `dense_plan` / `unpadded_plan`, `attention`),
each computing exactly what its plain PyTorch counterpart would. On the 2-core CPU benchmark
(`tools/bench_encoder.py`: ELECTRA-Small, batch 32 x 128, lengths uniform in [32, 128],
training mode) a forward+backward step is ~1.85x faster than HF in fp32 and ~2.4x in bf16
autocast, with about half the peak memory (on an idle machine; other jobs on the 2 cores
compress the gap, see the benchmark's docstring). Where the speed comes from:

* Unpadding (`EncoderConfig.unpad`, default on). With padding in the batch, only the real
  tokens go through the embeddings, linears, GELU, dropout and LayerNorms, as a flat
  [num_real_tokens, H] matrix. Attention is the only op that needs sequences: each layer
  scatters the fused QKV rows into a head-major padded buffer and gathers the outputs back
  (`AttentionPlan`, built once per forward by `unpadded_plan`). Sequences are grouped into
  length buckets (`_length_buckets`) so short ones are not padded to the longest one.
* One fused QKV projection (`Layer.qkv` in the encoder, weight rows [query; key; value]: HF's
  separate matrices are `torch.cat` / `chunk` of it); `attention` takes its [rows, 3H] output.
* CPU: cheap dropout masks from `random_()` bits instead of `bernoulli_` (which was 15% of
  HF's step), residual dropout as a single `addcmul`, and attention with a hand-written
  backward (`_CpuAttention`) that writes gradients in place and folds scales into the matmuls.
  Every op is a parallel region, so fewer ops also means less sensitivity to a busy machine.
  CUDA and other devices use `F.scaled_dot_product_attention` and `F.dropout`, which are
  fused there; so does CPU inference (no autograd).

torch.compile is not needed (and not tried on the hand-written autograd functions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

# Attention direction: None (bidirectional), "ltr" (position t sees <= t), "rtl" (sees >= t).
Causal = Literal["ltr", "rtl"] | None

# ----------------------------------------------------------------------------------------------
# Dropout: cheap random bits on CPU.
#
# On CPU `bernoulli_` (what `F.dropout` uses) costs ~40x an elementwise multiply, and ops mixing
# bool masks with floats are unvectorised. Instead `random_()` fills int64 words (4 x 16 random
# bits each) and `torch.ge(bits, threshold, out=<float tensor>)` writes a 0/1 keep-mask directly
# in a float dtype; applying it is a plain multiply. The drop probability is quantised to
# multiples of 1/65536 (0.1 -> 0.1000061); kept values are scaled by the exact inverse of the
# quantised keep probability, so the expectation is unchanged. CUDA (and other devices) use
# `F.dropout`, which is already fused there.


def _keep_mask(like: Tensor, p: float, dtype: torch.dtype) -> tuple[Tensor, float]:
    """A 0/1 keep-mask shaped like `like` in `dtype`, and the inverse keep probability."""
    # at most 65535 of 65536 levels: a p within 2**-17 of 1 (which the configs' `< 1` admits)
    # rounded to all of them and the scale divided by zero
    drop_levels = min(round(p * 65536), 65535)
    n = like.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=like.device).random_(-(2**63), None)
    keep = torch.empty(like.shape, dtype=dtype, device=like.device)
    torch.ge(words.view(torch.int16)[:n].view(like.shape), drop_levels - 32768, out=keep)
    return keep, 65536.0 / (65536 - drop_levels)


class _CpuDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, p: float) -> Tensor:
        keep, ctx.scale = _keep_mask(x, p, x.dtype)
        ctx.save_for_backward(keep)
        return x.mul(keep).mul_(ctx.scale)  # the scale in fp32 math, also for bf16 inputs

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None


class _CpuResidualDropout(torch.autograd.Function):
    """x + dropout(y) as one `addcmul` with a pre-scaled fp32 mask (fewer passes over memory)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor, p: float) -> Tensor:
        keep, scale = _keep_mask(y, p, x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32)
        keep.mul_(scale)
        ctx.save_for_backward(keep)
        ctx.y_dtype = y.dtype
        return torch.addcmul(x, y, keep).to(x.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, None]:
        (keep,) = ctx.saved_tensors
        # written in y's dtype by the multiplication itself (fp32 math, one rounding on store): under
        # bf16 autocast a separate `.to()` was another pass over the activations, per sublayer
        grad_y = torch.mul(grad, keep, out=grad.new_empty(grad.shape, dtype=ctx.y_dtype))
        return grad, grad_y, None


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Inverted dropout (cheap mask on CPU, `F.dropout` elsewhere)."""
    if not training or p == 0.0:
        return x
    if x.device.type == "cpu":
        return _CpuDropout.apply(x, p)
    return F.dropout(x, p, True)


def residual_dropout(x: Tensor, y: Tensor, p: float, training: bool) -> Tensor:
    """x + dropout(y): the residual connection of a Transformer sublayer."""
    if not training or p == 0.0:
        return x + y
    if x.device.type == "cpu":
        return _CpuResidualDropout.apply(x, y, p)
    return x + F.dropout(y, p, True)


# ----------------------------------------------------------------------------------------------
# Attention plan: where each token's queries/keys/values go for attention, built once per forward.
#
# The hidden states are a flat [rows, H] matrix (rows = B*T, or only the real tokens when
# unpadding). Sequences are grouped into buckets; a bucket of n sequences padded to length L is
# a block [3, n, heads, L, head_dim] of a flat buffer (q, k, v, each head-major, so attention
# needs no transposes or copies). One `index_copy_` scatters the fused QKV projection of every
# token into the buffer, and one `index_select` gathers the attention outputs back into rows.


@dataclass
class Bucket:
    """n sequences padded to `length`; `mask` is the SDPA bool mask (True = may attend),
    [n, 1, 1, L] or [n, 1, L, L] (causal), or None when nothing is masked."""

    n: int
    length: int
    mask: Tensor | None
    _bias: dict[torch.dtype, Tensor] = field(default_factory=dict)

    def bias(self, num_heads: int, dtype: torch.dtype) -> Tensor | None:
        """The mask as an additive bias [n * heads, 1 | L, L] for `torch.baddbmm` (cached per dtype)."""
        if self.mask is None:
            return None
        if dtype not in self._bias:
            m = self.mask.expand(self.n, num_heads, *self.mask.shape[2:]).reshape(
                self.n * num_heads, *self.mask.shape[2:]
            )
            self._bias[dtype] = torch.zeros(m.shape, dtype=dtype, device=m.device).masked_fill_(~m, float("-inf"))
        return self._bias[dtype]


@dataclass
class AttentionPlan:
    """Shared by all layers of one forward: buckets, the scatter/gather indices, buffer sizes.

    `scatter` [rows * 3 * heads]: buffer row (of head_dim values) of each (token, q/k/v, head);
    `gather` [rows * heads]: row of each (token, head) in the concatenated attention outputs.
    `needs_zeros`: the buffer has padding slots (they must hold finite values).
    """

    num_heads: int
    buckets: list[Bucket]
    scatter: Tensor
    gather: Tensor
    buffer_rows: int
    needs_zeros: bool

    @property
    def block_rows(self) -> list[int]:
        """Buffer rows of each bucket's [3, n, heads, L, head_dim] block."""
        return [3 * b.n * self.num_heads * b.length for b in self.buckets]

    @property
    def out_rows(self) -> list[int]:
        """Output rows of each bucket's [n, heads, L, head_dim] block."""
        return [b.n * self.num_heads * b.length for b in self.buckets]

    @property
    def output_rows(self) -> int:
        return self.buffer_rows // 3


def _causal_mask(length: int, causal: Causal, device: torch.device) -> Tensor:
    ones = torch.ones(length, length, dtype=torch.bool, device=device)
    if causal == "ltr":
        return ones.tril()  # query t sees keys <= t
    if causal == "rtl":
        return ones.triu()  # query t sees keys >= t
    raise ValueError(f"causal must be None, 'ltr' or 'rtl', got {causal!r}")


def _block_mask(real: Tensor | None, length: int, causal: Causal, device: torch.device) -> Tensor | None:
    """SDPA bool mask for a [n, length] block whose real positions are `real` ([n, length] bool).

    Padding queries may see every key: their outputs are discarded, but a fully masked row would
    give NaN, and NaN * 0 gradients poison the backward pass. Likewise a sequence without any
    real token sees everything.
    """
    if causal is None:
        if real is None:
            return None
        return (real | ~real.any(-1, keepdim=True))[:, None, None, :]
    mask = _causal_mask(length, causal, device)[None, None]
    if real is None:
        return mask
    return (mask & real[:, None, None, :]) | ~real[:, None, :, None]


def _make_plan(
    num_heads: int,
    buckets: list[tuple[int, list[int]]],
    seq_lengths: list[int],
    real: Tensor | None,
    row_seq: Tensor,
    row_pos: Tensor,
    causal: Causal,
    batch: int,
    device: torch.device,
    sequence_multiple: int = 1,
) -> AttentionPlan:
    """Plan for buckets `(padded_length, [sequence, ...])`; row i belongs to sequence row_seq[i] at
    position row_pos[i] within its bucket block. `real` [B, T] is the padding mask in dense mode
    (pads are rows then), None when only real tokens are rows (then `seq_lengths` decide). In that
    unpadded mode each bucket's sequence count is rounded up to `sequence_multiple` by empty
    sequences: zero slots that no row reads or writes (see `BUCKET_MULTIPLE`)."""
    if real is not None and sequence_multiple > 1:
        raise ValueError("sequence_multiple > 1 needs an unpadded plan (real=None)")
    h = num_heads
    in_start = [0] * batch  # buffer row of (q, head 0, position 0) of each sequence
    out_start = [0] * batch  # output row of (head 0, position 0) of each sequence
    part_stride = [0] * batch  # buffer rows between q, k and v of a sequence
    seq_len = [0] * batch
    plan_buckets, in_base, out_base, needs_zeros = [], 0, 0, False
    for length, seqs in buckets:
        n = _round_up(len(seqs), sequence_multiple)
        for rank, s in enumerate(seqs):
            in_start[s], out_start[s] = in_base + rank * h * length, out_base + rank * h * length
            part_stride[s], seq_len[s] = n * h * length, length
        if real is not None:
            block_real = real[torch.tensor(seqs, device=device)] if len(seqs) != batch else real
            block_real = None if bool(block_real.all()) else block_real
        else:
            lens = [seq_lengths[s] for s in seqs] + [0] * (n - len(seqs))
            block_real = None
            if min(lens) < length:
                needs_zeros = True
                block_real = torch.arange(length, device=device) < torch.tensor(lens, device=device)[:, None]
        plan_buckets.append(Bucket(n, length, _block_mask(block_real, length, causal, device)))
        in_base += 3 * n * h * length
        out_base += n * h * length

    def per_row(values: list[int]) -> Tensor:
        return torch.tensor(values, device=device).index_select(0, row_seq)

    row_len = per_row(seq_len)[:, None]
    heads = torch.arange(h, device=device)[None, :] * row_len  # [rows, h]
    parts = torch.arange(3, device=device)[None, :] * per_row(part_stride)[:, None]  # [rows, 3]
    scatter = (per_row(in_start) + row_pos)[:, None, None] + parts[:, :, None] + heads[:, None, :]
    gather = (per_row(out_start) + row_pos)[:, None] + heads
    return AttentionPlan(h, plan_buckets, scatter.reshape(-1), gather.reshape(-1), in_base, needs_zeros)


def dense_plan(
    attention_mask: Tensor | None, batch: int, length: int, num_heads: int, causal: Causal, device: torch.device
) -> AttentionPlan:
    """Rows are the padded [B*T] layout: one bucket covering the batch."""
    real = None if attention_mask is None else attention_mask.bool()
    flat = torch.arange(batch * length, device=device)
    return _make_plan(
        num_heads,
        [(length, list(range(batch)))],
        [length] * batch,
        real,
        flat // length,
        flat % length,
        causal,
        batch,
        device,
    )


# Cost model for grouping sequences into attention buckets, in units of "one padded slot of one
# attention key": a bucket of n sequences padded to length L costs n * L * (L + _SLOT_COST) plus
# _BUCKET_COST for the extra kernel launches. Tuned on CPU for head_dim 64; the optimum is flat,
# so the constants need not be precise (and on CUDA fewer buckets only waste a little compute).
_SLOT_COST = 48
_BUCKET_COST = 48_000
_MAX_CANDIDATES = 32

# Bucket shapes for low-precision attention on CPU. Like the Linears' row counts (`ROW_MULTIPLE`
# below), each new [n * heads, L, L] batched-matmul shape makes oneDNN compile a bf16 kernel (~0.87 ms
# a call against ~0.17 ms for a cached shape at the toy tasks' sizes, on an AMX CPU), and a length
# bucket's (n, L) was new at almost every step of pad-to-longest fine-tuning: its 21 attention matmuls
# were ~12 of the quickstart fine-tuning step's ~42 ms (torch.profiler). With n and L rounded up to
# multiples of BUCKET_MULTIPLE a run sees about (batch / 8) x (max_length / 8) bucket shapes at most,
# and that step took 27-33 ms instead of 38-44; the empty slots cost a little attention arithmetic
# (the bucketing's cost model counts them).
BUCKET_MULTIPLE = 8


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _length_buckets(lengths: list[int], multiple: int = 1) -> list[tuple[int, list[int]]]:
    """Group sequence indices (lengths > 0) into buckets `(padded_length, [seq, ...])`.

    Optimal contiguous partition of the length-sorted sequences under the cost model above, by
    dynamic programming over the distinct lengths (coarsened to multiples of 8 when there are many).
    With `multiple` > 1 the padded lengths are multiples of it and a bucket is costed as if its
    sequence count were rounded up to one (as `_make_plan` then pads it).
    """
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: lengths[i])
    if not order:
        return []
    distinct = sorted({lengths[i] for i in order})
    if multiple > 1:
        distinct = sorted({_round_up(n, multiple) for n in distinct})
    elif len(distinct) > _MAX_CANDIDATES:
        distinct = sorted({_round_up(n, 8) for n in distinct})
    count, k = [], 0  # count[j] = number of sequences with length <= distinct[j]
    for cap in distinct:
        while k < len(order) and lengths[order[k]] <= cap:
            k += 1
        count.append(k)
    best = [0.0] * (len(distinct) + 1)  # best[j]: cost of covering the lengths <= distinct[j-1]
    cut = [0] * (len(distinct) + 1)
    for j in range(1, len(distinct) + 1):
        cap = distinct[j - 1]
        best[j], cut[j] = min(
            (
                best[i]
                + _round_up(count[j - 1] - (count[i - 1] if i else 0), multiple) * cap * (cap + _SLOT_COST)
                + _BUCKET_COST,
                i,
            )
            for i in range(j)
        )
    buckets = []
    j = len(distinct)
    while j > 0:
        i = cut[j]
        lo, hi = (count[i - 1] if i else 0), count[j - 1]
        if hi > lo:
            buckets.append((distinct[j - 1], order[lo:hi]))
        j = i
    buckets.reverse()
    return buckets


# Row counts for low-precision matmuls on CPU. oneDNN compiles (JITs) a bf16/fp16 matmul kernel for each
# new shape, ~5-15 ms per Linear's forward + backward on an AMX or AVX512-BF16 CPU (fp32 goes to MKL,
# which does not), and keeps the last 1,024 in a cache. Unpadding makes the row count the batch's number
# of real tokens, new at almost every step of pre-training or pad-to-longest fine-tuning: on the
# quickstart's tiny ELECTRA-TT step that was ~100 of ~250 ms. Rounding the count up to a multiple leaves
# a handful of shapes for the whole run, for at most ROW_MULTIPLE - 1 extra rows of work.
ROW_MULTIPLE = 64


def row_multiple(device: torch.device, dtype: torch.dtype | None = None) -> int:
    """The multiple to round matmul row counts up to on `device`: ROW_MULTIPLE where oneDNN would compile
    a kernel per shape (CPU, bf16/fp16: under autocast, or `dtype`), else 1 (no padding: fp32 on CPU,
    CUDA's kernels are not per-shape)."""
    if device.type != "cpu":
        return 1
    compute = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else dtype
    return ROW_MULTIPLE if compute in (torch.bfloat16, torch.float16) else 1


def padded_index(index: Tensor, multiple: int) -> Tensor:
    """`index` [n] grown to a multiple of `multiple` entries by repeating its last one (unchanged when
    already a multiple, or empty). Rows gathered with it are computed and then dropped (`[:n]`): their
    outputs are never read, so they get zero gradient and change nothing but the shape."""
    extra = -index.numel() % multiple
    if not extra or not index.numel():
        return index
    return torch.cat([index, index[-1:].expand(extra)])


def unpadded_plan(
    attention_mask: Tensor, num_heads: int, causal: Causal, multiple: int = 1
) -> tuple[AttentionPlan, Tensor, int]:
    """Plan over the real tokens only; also returns `rows`, the flat [B*T] indices of the rows the
    encoder computes, and `n`, how many of them are real tokens (the first `n`).

    Within its bucket block a sequence's real tokens are packed to the front in their original
    order, so any mask pattern (not only right padding) works, and causal masks still follow
    token order. With `multiple` > 1 (see `row_multiple`) the row count is rounded up by rows that
    repeat the last real token's index (`padded_index`, as the objectives' heads do), attending only
    among themselves (an extra sequence of the plan): their outputs are dropped, so they touch no
    real token's output or gradient. Bucket shapes are then rounded too (`BUCKET_MULTIPLE`).
    """
    real = attention_mask.bool()
    batch, length = real.shape
    rows = real.reshape(-1).nonzero().squeeze(1)
    lengths = real.sum(1).tolist()
    rank_in_seq = (real.cumsum(1) - 1).reshape(-1).index_select(0, rows)
    row_seq, n = rows // length, rows.numel()
    extra = -n % multiple if n else 0
    if extra:
        lengths.append(extra)
        row_seq = torch.cat([row_seq, row_seq.new_full((extra,), batch)])
        rank_in_seq = torch.cat([rank_in_seq, torch.arange(extra, device=real.device)])
        rows = padded_index(rows, multiple)
    bucket_multiple = BUCKET_MULTIPLE if multiple > 1 else 1  # low precision on CPU: few bucket shapes too
    buckets = _length_buckets(lengths, bucket_multiple)
    plan = _make_plan(
        num_heads, buckets, lengths, None, row_seq, rank_in_seq, causal, len(lengths), real.device, bucket_multiple
    )
    return plan, rows, n


class _CpuAttention(torch.autograd.Function):
    """Bucketed attention with dropout on the probabilities, forward and backward written out.

    Used for training on CPU, where SDPA with dropout falls back to its unfused math path
    anyway. Writing the backward by hand lets every gradient land directly in its place in one
    buffer (no stack/cat copies), folds the 1/sqrt(d) and dropout scales into the matmuls, and
    keeps the operation count low (each op is a parallel region: on a busy 2-core machine the
    count matters as much as the FLOPs). Saved per bucket: probabilities and kept probabilities,
    as the autograd math path would.
    """

    @staticmethod
    def forward(ctx: Any, qkv: Tensor, plan: AttentionPlan, p: float) -> Tensor:
        rows, h = qkv.shape[0], plan.num_heads
        d = qkv.shape[1] // (3 * h)
        alpha = d**-0.5
        with torch.autocast(qkv.device.type, enabled=False):
            new = qkv.new_zeros if plan.needs_zeros else qkv.new_empty
            buffer = new(plan.buffer_rows, d).index_copy_(0, plan.scatter, qkv.reshape(rows * 3 * h, d))
            out = qkv.new_empty(plan.output_rows, d)
            saved, scales = [], []
            for b, block, out_block in zip(
                plan.buckets, buffer.split(plan.block_rows), out.split(plan.out_rows), strict=True
            ):
                q, k, v = block.view(3, b.n * h, b.length, d).unbind(0)
                bias = b.bias(h, qkv.dtype)
                if bias is None:
                    scores = q.new_empty(b.n * h, b.length, b.length).baddbmm_(
                        q, k.transpose(1, 2), beta=0, alpha=alpha
                    )
                else:
                    scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=alpha)
                probs = torch.softmax(scores, -1)
                keep, scale = _keep_mask(probs, p, probs.dtype) if p > 0 else (None, 1.0)
                kept = probs * keep if keep is not None else probs
                out_block.view(b.n * h, b.length, d).baddbmm_(kept, v, beta=0, alpha=scale)
                saved += [probs, kept]
                scales.append(scale)
        ctx.save_for_backward(buffer, *saved)
        ctx.plan, ctx.scales, ctx.alpha, ctx.shape = plan, scales, alpha, qkv.shape
        return out.index_select(0, plan.gather).view(rows, h * d)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        plan, alpha = ctx.plan, ctx.alpha
        buffer, *saved = ctx.saved_tensors
        h, d = plan.num_heads, buffer.shape[1]
        grad = grad.to(buffer.dtype)
        # padding query rows must get zero gradient: it would flow into the real keys and values
        new = grad.new_zeros if plan.needs_zeros else grad.new_empty
        grad_out = new(plan.output_rows, d).index_copy_(0, plan.gather, grad.reshape(-1, d))
        grad_buffer = torch.empty_like(buffer)  # every slot is written below
        blocks = zip(
            plan.buckets,
            buffer.split(plan.block_rows),
            grad_buffer.split(plan.block_rows),
            grad_out.split(plan.out_rows),
            ctx.scales,
            strict=True,
        )
        for i, (b, block, grad_block, grad_out_block, scale) in enumerate(blocks):
            nh, length = b.n * h, b.length
            q, k, v = block.view(3, nh, length, d).unbind(0)
            dq, dk, dv = grad_block.view(3, nh, length, d).unbind(0)
            do = grad_out_block.view(nh, length, d)
            probs, kept = saved[2 * i], saved[2 * i + 1]
            dkept = probs.new_empty(nh, length, length).baddbmm_(do, v.transpose(1, 2), beta=0, alpha=scale)
            dv.baddbmm_(kept.transpose(1, 2), do, beta=0, alpha=scale)
            t = kept * dkept  # = probs * d(probs) (the dropout mask cancels into `kept`)
            dscores = torch.addcmul(t, probs, t.sum(-1, keepdim=True), value=-1)  # softmax backward
            dq.baddbmm_(dscores, k, beta=0, alpha=alpha)
            dk.baddbmm_(dscores.transpose(1, 2), q, beta=0, alpha=alpha)
        return grad_buffer.index_select(0, plan.scatter).view(ctx.shape), None, None


def attention(qkv: Tensor, plan: AttentionPlan, dropout_p: float) -> Tensor:
    """Multi-head self-attention of the fused [rows, 3H] projections (q; k; v); returns [rows, H]."""
    if qkv.device.type == "cpu" and (dropout_p > 0.0 or (torch.is_grad_enabled() and qkv.requires_grad)):
        # SDPA's CPU backward and its dropout path are slower than _CpuAttention (bf16: 1.7x)
        return _CpuAttention.apply(qkv, plan, dropout_p)
    return sdpa_attention(qkv, plan, dropout_p)


def sdpa_attention(qkv: Tensor, plan: AttentionPlan, dropout_p: float) -> Tensor:
    """`attention` with `F.scaled_dot_product_attention` per bucket (autograd does the backward)."""
    rows, h = qkv.shape[0], plan.num_heads
    d = qkv.shape[1] // (3 * h)
    new = qkv.new_zeros if plan.needs_zeros else qkv.new_empty
    buffer = new(plan.buffer_rows, d).index_copy_(0, plan.scatter, qkv.reshape(rows * 3 * h, d))
    outputs = []
    for block, b in zip(buffer.split(plan.block_rows), plan.buckets, strict=True):
        q, k, v = block.view(3, b.n, h, b.length, d).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=b.mask, dropout_p=dropout_p)
        outputs.append(out.reshape(-1, d))
    out = outputs[0] if len(outputs) == 1 else torch.cat(outputs)
    return out.index_select(0, plan.gather).view(rows, h * d)

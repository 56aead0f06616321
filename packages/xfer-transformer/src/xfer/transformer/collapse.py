"""Representation collapse: an encoder that maps every token to nearly the same vector.

A discriminator can end pre-training this way (docs/results.md, "A second pre-training seed": its
final hidden states differed by 1e-4 of their norm from token to token). Its detection loss sits at
the base rate, like one that merely has not learned context yet, but it no longer reads its input:
more steps did not undo it, and fine-tuned it stayed at chance on every GLUE task. `electra.pretrain`
logs `encoder_token_spread` as `token_spread` at every training log (eval mode: on the training
forward, dropout on the common vector makes a collapsed encoder's tokens look different);
`transformer.finetune` and the BAM stages probe their `init:` encoder the same way and warn before
spending a fine-tuning budget on such a checkpoint.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

REPRESENTATION_COLLAPSE = 1e-3
"""A token spread below this is a collapse. Measured with `encoder_token_spread`: 1.5e-4 and
1.6e-5-3.5e-5 for collapsed discriminators; 0.55 for healthy pre-trained encoders, 0.73-0.81 at
random init; but 0.009-0.09 for a while early in pre-training (seed 2's replay, steps 500-1,300,
before it collapsed at ~2,350), so the line sits a decade below that (docs/results.md)."""


@torch.no_grad()
def token_spread(hidden: Tensor) -> Tensor:
    """How much an encoder's output differs from token to token (0-dim, no device sync): the mean
    distance of the rows of `hidden` ([tokens, H]) from their mean, over their mean norm."""
    rows = hidden.detach().float().reshape(-1, hidden.shape[-1])
    return (rows - rows.mean(0)).norm(dim=1).mean() / rows.norm(dim=1).mean().clamp(min=1e-12)


def ordinary_ids(tokenizer: Any) -> Tensor:
    """The tokenizer's ids without its special tokens: what the probe draws random text from."""
    return torch.tensor([i for i in range(tokenizer.vocab_size) if i not in tokenizer.special_ids])


@torch.no_grad()
def encoder_token_spread(encoder: torch.nn.Module, ordinary_ids: Tensor, rows: int = 8, length: int = 64) -> float:
    """`token_spread` of `encoder`'s last hidden states over `rows` sequences of `length` tokens
    drawn (fixed seed) from `ordinary_ids` (the vocabulary without special tokens), in eval mode.

    Random tokens rather than task text: the probe needs no data, and a collapsed encoder maps any
    input to the same vector while a working one (or a random init) does not."""
    generator = torch.Generator().manual_seed(0)
    device = next(encoder.parameters()).device
    length = min(length, encoder.config.max_position_embeddings)
    picks = torch.randint(0, ordinary_ids.numel(), (rows, length), generator=generator)
    ids = ordinary_ids[picks].to(device)
    attention = torch.ones_like(ids)
    was_training = encoder.training
    encoder.eval()
    try:
        hidden = encoder(ids, attention, torch.zeros_like(ids)).last_hidden_state
    finally:
        encoder.train(was_training)
    return float(token_spread(hidden))


def warn_if_collapsed(ctx: Any, encoder_config: Any, state: dict[str, Tensor], tokenizer: Any, source: object) -> None:
    """Warn (stderr and the stage's report, main process) when the `init:` encoder `state` read
    from `source` has collapsed. `transformer.finetune` and the BAM stages call this once before
    training: one forward pass over 512 random tokens, next to thousands of fine-tuning steps."""
    if not ctx.is_main:
        return
    message = collapsed_init_message(encoder_config, state, tokenizer, source)
    if message:
        ctx.warn(message)


def collapsed_init_message(encoder_config: Any, state: dict[str, Tensor], tokenizer: Any, source: object) -> str | None:
    """The warning `warn_if_collapsed` gives for the encoder `state`, or None when it has not collapsed."""
    from xfer.transformer.encoder import Encoder

    encoder = Encoder(encoder_config)
    encoder.load_state_dict(state)
    ordinary = ordinary_ids(tokenizer)
    if ordinary.numel() == 0:
        return None
    spread = encoder_token_spread(encoder, ordinary)
    if spread >= REPRESENTATION_COLLAPSE:
        return None
    return (
        f"{source}: this encoder maps every token to nearly the same vector (token spread {spread:.1e} on random "
        f"text, below {REPRESENTATION_COLLAPSE}; pre-trained encoders that fine-tune well: ~0.55, random init ~0.8): "
        'its pre-training collapsed. In docs/results.md ("A second pre-training seed") such an encoder fine-tuned '
        "to chance on every GLUE task. Fine-tuning goes on as asked."
    )

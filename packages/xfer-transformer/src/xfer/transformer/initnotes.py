"""What a stage that starts from a checkpoint (`transformer.finetune`, the BAM stages, CVT's
Transformer features) says or refuses about it beyond the shape checks of `checkpoint_problems`.

Torch-free, one wording for every stage:

- `generator_init_message`: the checkpoint is an ELECTRA generator (said, not refused);
- `untrained_positions_message`: `max_length` reaches past the length the checkpoint was
  pre-trained on (said: those position embeddings were never trained);
- `token_type_problem`: a pair task on a checkpoint with one token type (refused: it was an
  IndexError traceback in the first step).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from xfer.core.errors import UserError

MAX_LENGTH_KEY = "xfer_max_length"
"""HF config.json key (written by `electra.pretrain`'s HF export, read through `xfer.transformer.hf`):
the tokens per example the weights were pre-trained on. The position embeddings go further (512
for the presets), and positions past it were never trained: PLL scoring windows texts at this
length, fine-tuning warns past it. Here, not in `hf`, because this module stays torch-free."""


def generator_init_message(
    folder: Path, key: str = "init", goes_on: str = "Fine-tuning goes on as asked."
) -> str | None:
    """A warning when `folder` is the generator of an ELECTRA-style pre-training, else None.

    ELECTRA's generator is a small masked LM (1/4 of the discriminator's width by default) trained
    only to make noise; the thesis fine-tunes the discriminator. Giving the generator folder by
    mistake (`pretrain.generator` for `pretrain.discriminator`) trained silently on the wrong
    network. Using a generator on purpose is a legitimate experiment, so this warns rather than
    refuses. The MLM baseline's generator output is its one model and passes."""
    from xfer.transformer.modelio import recorded_role

    if not folder.is_dir():
        return None
    role, objective, evidence = recorded_role(folder)
    if role != "generator" or objective == "electra.mlm":
        return None
    sibling = folder.parent / "discriminator"
    instead = f"; the discriminator is {sibling}" if sibling.is_dir() else ""
    return (
        f"{key}: {folder} is the generator of an {objective or 'ELECTRA'} pre-training ({evidence}), the small "
        f"network trained to make replacements, not the encoder the thesis fine-tunes{instead}. {goes_on}"
    )


def pretraining_length(folder: Path) -> int | None:
    """Tokens per example the checkpoint was pre-trained on (`electra.pretrain` records it as
    `max_length` in xfer_model.json, and as `xfer_max_length` in its HF export's config.json); None
    when the folder does not say (other HF folders, fine-tuned models)."""
    for name, key in (("xfer_model.json", "max_length"), ("config.json", MAX_LENGTH_KEY)):
        try:
            length = json.loads((folder / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(length, int) and not isinstance(length, bool):
            return length
    return None


def untrained_positions_message(folder: Path, max_length: int, key: str = "max_length") -> str | None:
    """A warning when `max_length` reaches past the length `folder` was pre-trained on, else None.

    ELECTRA packs examples of exactly its max_length, so position embeddings past it keep their
    random init: a 64-token pre-training read with windows of 128 gave every word past piece 64
    untrained positions (measured on `cvt-on-electra.yaml`: 1.1% of CoNLL-2000's training words)."""
    length = pretraining_length(folder)
    if length is None or max_length <= length:
        return None
    return (
        f"{key} {max_length} is more than the {length} tokens per example {folder} was pre-trained on: inputs "
        f"past token {length} use position embeddings that pre-training never trained; {key}: {length} avoids them"
    )


def token_type_problem(
    task: str, features: Iterable[Mapping[str, Any]], type_vocab_size: int, source: str
) -> UserError | None:
    """The error for a task whose inputs use a token type the encoder has no embedding for (a pair
    task's second segment on a checkpoint pre-trained on single segments, `type_vocab_size: 1`),
    else None. It was an IndexError traceback in the first training step."""
    used = max((max(f.get("token_type_ids") or [0]) for f in features), default=0)
    if used < type_vocab_size:
        return None
    plural = "s" if type_vocab_size != 1 else ""
    return UserError(
        f"{task}: its inputs use token type {used} (a pair of texts) but {source} has {type_vocab_size} token "
        f"type{plural} (type_vocab_size): use a checkpoint pre-trained with two segments, or a single-text task"
    )

"""Checks of a BAM stage's `init` checkpoint and tokenizer, before any weights are read.

The same checks run twice: in the pre-flight (`xfer run`, `xfer validate --data`) for folders
that exist before the run, and when the stage starts for folders that earlier stages of the
recipe write (an `electra.pretrain` stage's `discriminator`, a teachers stage's `init`). Without
them a BAM stage composed with an ELECTRA checkpoint accepted, silently or with a traceback deep
in training:

- a folder that is no checkpoint at all (found only when the stage read it, after the stages
  before it had trained);
- a `tokenizer:` trained apart from the checkpoint (same size or smaller): every token id then
  meant another word for every pre-trained embedding;
- `max_length` beyond the checkpoint's position embeddings: a ValueError traceback in the first
  training step.

The vocabulary, embedding-count and position checks are `transformer.finetune`'s
(`checkpoint_problems`); a BAM `models` output (`models.json`) is checked model by model. An
ELECTRA generator given as `init` is said, not refused, as `transformer.finetune` does
(`stage.check_sources`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xfer.core.errors import CheckpointError, UserError

MODELS_INDEX = "models.json"


def read_models_index(index: Path) -> dict[str, str]:
    """task -> model folder (relative to the index's folder) of a BAM `models` output's `models.json`.

    One reader for the pre-flight and the stage: a hand-edited or foreign index with `tasks: {}` passed
    the pre-flight (no folder to check) and ended the stage in a bare StopIteration."""
    try:
        tasks = json.loads(index.read_text(encoding="utf-8"))["tasks"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{index}: unreadable ({exc})") from exc
    if not isinstance(tasks, dict) or not tasks or not all(isinstance(v, str) and v for v in tasks.values()):
        raise CheckpointError(f"{index}: `tasks` must map each task to its model folder, got {tasks!r:.200}")
    return tasks


def init_folders(init: Path) -> list[Path]:
    """The checkpoint folders `init` stands for: the folder itself, or every model dir of a BAM
    `models` output (task -> folder in `models.json`)."""
    index = init / MODELS_INDEX
    if not index.is_file():
        return [init]
    return sorted({init / sub for sub in read_models_index(index).values()})


def source_problems(
    init: Path | None, tokenizer: Path | None, encoder: Mapping[str, Any], max_length: int, key: str = "init"
) -> list[UserError]:
    """Every problem of an `init` folder (None: random init) with its tokenizer folder (None: the
    checkpoint's own) and the stage's `encoder:` overrides and `max_length`."""
    from xfer.transformer.finetune_config import checkpoint_format_problem, checkpoint_problems

    if init is None:
        return checkpoint_problems(tokenizer, None, encoder, max_length, random_init=True)
    problem = checkpoint_format_problem(init, key) if not (init / MODELS_INDEX).is_file() else None
    if problem is not None:
        return [problem]
    problems: list[UserError] = []
    try:
        folders = init_folders(init)
    except UserError as exc:
        return [exc]
    for folder in folders:
        found = checkpoint_format_problem(folder, key)
        if found is not None:
            problems.append(found)
            continue
        problems += checkpoint_problems(
            tokenizer if tokenizer is not None else folder, folder, encoder, max_length, random_init=False
        )
    return problems

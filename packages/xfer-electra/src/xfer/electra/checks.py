"""The `electra.pretrain` pre-flight: problems found before any stage trains (`xfer run`,
`xfer validate --data`), each naming the file it is about.

- an empty corpus: every file the corpus names holds no text;
- a tokenizer whose vocabulary does not fit the `init` checkpoint's embeddings;
- a compute budget that does not buy a single step.

Files produced by earlier stages do not exist yet and are checked by the stage itself. Bytes
that are not UTF-8 are reported with file and line by the reader when the corpus is read (the
`transformer.vocab` stage reading the same files reports them before any training too).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xfer.core.errors import DataError, UserError

_PROBE_BYTES = 1 << 20


def preflight(config: Any) -> list[UserError]:
    """Every problem found; each check runs on its own, so one does not hide another."""
    problems: list[UserError] = []
    tokenizer_vocab = _tokenizer_vocab_size(config)
    init_vocab = _checkpoint_vocab_size(config.init.path) if config.init is not None and config.init.path else None
    checks = [lambda: _empty_corpus(config), lambda: _vocabulary(config, tokenizer_vocab, init_vocab)]
    if config.budget is not None and config.budget.steps is None:
        checks.append(lambda: _budget(config, tokenizer_vocab or init_vocab))
    for check in checks:
        try:
            problems += check()
        except UserError as exc:
            problems.append(exc)
    return problems


def _vocabulary(config: Any, tokenizer_vocab: int | None, init_vocab: int | None) -> list[UserError]:
    if tokenizer_vocab is None or init_vocab is None or tokenizer_vocab <= init_vocab:
        return []
    return [
        DataError(
            str(config.init.path),
            0,
            f"the checkpoint has {init_vocab} token embeddings but the tokenizer ({_tokenizer_dir(config)}) "
            f"has {tokenizer_vocab} tokens: use the checkpoint's own vocabulary",
        )
    ]


def _empty_corpus(config: Any) -> list[UserError]:
    files = config.corpus.files
    if files is None or files.inputs:  # text from an earlier stage: not there yet
        return []
    import glob

    paths = [Path(p) for pattern in files.patterns for p in sorted(glob.glob(pattern, recursive=True))]
    paths = [p for p in paths if p.is_file()]
    if not paths or any(_has_text(p) for p in paths):
        return []
    return [DataError(str(paths[0]), 0, f"the corpus has no text ({len(paths)} file(s), all empty or blank)")]


def _has_text(path: Path) -> bool:
    """True if the file has a non-blank byte (files over 1 MiB are assumed to have text)."""
    if path.stat().st_size > _PROBE_BYTES:
        return True
    return bool(path.read_bytes().strip())


def _tokenizer_dir(config: Any) -> Path | None:
    source = config.tokenizer if config.tokenizer is not None else config.init
    return source.path if source is not None and source.path is not None else None


def _tokenizer_vocab_size(config: Any) -> int | None:
    folder = _tokenizer_dir(config)
    if folder is None:
        return None
    vocab = folder / "vocab.txt"
    if vocab.is_file():
        return sum(1 for _ in vocab.open(encoding="utf-8", errors="replace"))
    tokenizer = folder / "tokenizer.json"
    if tokenizer.is_file():
        try:
            return len(json.loads(tokenizer.read_text(encoding="utf-8"))["model"]["vocab"])
        except (ValueError, KeyError, TypeError):
            return None
    return None


def _checkpoint_vocab_size(folder: Path) -> int | None:
    """vocab_size from an HF config.json or an xfer model dir's encoder config (None if unreadable)."""
    for name, path in (
        ("config.json", ("vocab_size",)),
        ("xfer_model.json", ("modules", "encoder", "config", "vocab_size")),
    ):
        file = folder / name
        if file.is_file():
            try:
                value: Any = json.loads(file.read_text(encoding="utf-8"))
                for key in path:
                    value = value[key]
                return int(value)
            except (ValueError, KeyError, TypeError):
                return None
    return None


def _budget(config: Any, vocab_size: int | None) -> list[UserError]:
    """A budget must buy at least one step; one step is costed at full-length sequences."""
    from xfer.electra.stage import planned_step

    per_step, tokens_per_step = planned_step(config, vocab_size)
    budget = config.budget
    if budget.flops is not None and budget.flops < per_step:
        return [UserError(f"budget.flops {budget.flops:.3g} is less than one training step ({per_step:.3g} FLOPs)")]
    if budget.tokens is not None and budget.tokens < tokens_per_step:
        return [UserError(f"budget.tokens {budget.tokens:.3g} is less than one step's {tokens_per_step:.0f} tokens")]
    return []

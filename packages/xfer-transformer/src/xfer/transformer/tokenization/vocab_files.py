"""Tokenizer files on disk: BERT `vocab.txt`, `tokenizer_config.json` casing, atomic writes.

Also the normaliser inspection that loading needs: a `vocab.txt` or `tokenizer.json` does not say
plainly whether input is lower-cased, and getting that wrong turns most words into `[UNK]`
without any error, so casing is inferred or read from the files here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, normalizers

from xfer.core.atomic import atomic_write_text
from xfer.core.errors import DataError
from xfer.core.textfile import read_text

# A vocabulary is "cased" when more than this share of its ordinary tokens has upper-case letters
# (bert-base-cased: about a quarter; uncased vocabularies: none, bar a few odd Unicode letters).
_CASED_SHARE = 0.01


def read_vocab_txt(path: Path | str) -> dict[str, int]:
    """Read a BERT `vocab.txt`: one token a line, the id is the 0-based line number.

    Duplicate tokens are an error rather than "last one wins" (HF's behaviour), because they leave
    embedding rows that no token maps to and make the vocabulary impossible to write back.
    """
    path = Path(path)
    lines = re.split(r"\r\n|\r|\n", read_text(path, allow_empty=True))
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise DataError(path, 0, "vocabulary is empty")
    vocab: dict[str, int] = {}
    for number, token in enumerate(lines):
        if token in vocab:
            raise DataError(path, number + 1, f"duplicate token {token!r} (first on line {vocab[token] + 1})")
        vocab[token] = number
    return vocab


def _looks_cased(vocab: dict[str, int]) -> bool:
    ordinary = [t for t in vocab if not (t.startswith("[") and t.endswith("]"))]
    cased = sum(1 for t in ordinary if t != t.lower())
    return cased > _CASED_SHARE * max(len(ordinary), 1)


def _normalizer_state(tokenizer: Tokenizer) -> dict[str, Any]:
    """The normaliser's JSON configuration ({} when there is none); cheap, unlike `to_str()`."""
    normalizer = tokenizer.normalizer
    if normalizer is None:
        return {}
    state = json.loads(normalizer.__getstate__())
    return state if isinstance(state, dict) else {}


def _normalizer_lowercases(state: dict[str, Any]) -> bool:
    kind = state.get("type")
    if kind == "BertNormalizer":
        return bool(state.get("lowercase"))
    if kind == "Lowercase":
        return True
    if kind == "Sequence":
        return any(_normalizer_lowercases(s) for s in state.get("normalizers", []))
    return False


def _set_lowercase(tokenizer: Tokenizer, lowercase: bool, path: Path) -> None:
    """Change lower-casing of a BertNormalizer in place, as HF does for `do_lower_case`."""
    state = _normalizer_state(tokenizer)
    if _normalizer_lowercases(state) == lowercase:
        return
    if state.get("type") != "BertNormalizer":
        raise DataError(path, 0, f"cannot set lowercase={lowercase} on a {state.get('type')} normalizer")
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=state.get("clean_text", True),
        handle_chinese_chars=state.get("handle_chinese_chars", True),
        strip_accents=state.get("strip_accents"),
        lowercase=lowercase,
    )


def _config_lowercase(path: Path) -> bool | None:
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(path, 0, f"cannot read tokenizer config: {error}") from None
    value = config.get("do_lower_case") if isinstance(config, dict) else None
    return value if isinstance(value, bool) else None


def _write_atomic(path: Path, text: str) -> None:
    """A crash never leaves a half-written vocabulary (see xfer.core.atomic)."""
    atomic_write_text(path, text)

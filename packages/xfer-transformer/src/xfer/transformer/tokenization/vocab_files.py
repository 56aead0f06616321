"""Tokenizer files on disk: BERT `vocab.txt`, `tokenizer_config.json` casing, atomic writes.

Also the normaliser inspection that loading needs: a `vocab.txt` or `tokenizer.json` does not say
plainly whether input is lower-cased, and getting that wrong turns most words into `[UNK]`
without any error, so casing is inferred or read from the files here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
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
    A token containing whitespace is an error too: the BERT pre-tokenizer splits words there, so
    such a token can never be produced and its word silently becomes `[UNK]`. Trailing spaces are
    editor damage that Google's BERT strips but HF's `BertTokenizer` keeps, and a tab usually
    means a "token<TAB>count" file rather than a vocab.txt.
    """
    path = Path(path)
    vocab: dict[str, int] = {}
    for number, token in enumerate(_vocab_lines(path)):
        if token in vocab:
            raise DataError(path, number + 1, f"duplicate token {token!r} (first on line {vocab[token] + 1})")
        if any(char.isspace() for char in token):
            raise DataError(
                path,
                number + 1,
                f"token {token!r} contains whitespace, so no text can ever produce it "
                "(trailing spaces, or a 'token count' file rather than a vocab.txt?)",
            )
        vocab[token] = number
    return vocab


def _vocab_lines(path: Path) -> list[str]:
    """The tokens of a `vocab.txt`, one a line (CRLF, CR or LF endings), without further checks."""
    lines = re.split(r"\r\n|\r|\n", read_text(path, allow_empty=True))
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise DataError(path, 0, "vocabulary is empty")
    return lines


def check_vocab_txt_matches(path: Path, vocab: dict[str, int], source: Path) -> None:
    """Raise DataError at the first line of the vocab.txt `path` whose token is not the one
    `source` (the folder's tokenizer.json, whose `vocab` is used) has at that id.

    Both load the folder, tokenizer.json first; a vocab.txt edited by hand (BERT users put domain
    words over `[unusedN]` lines) was ignored without a word while the recipe pre-flight checked
    the model against it. Tokens tokenizer.json adds after vocab.txt's (HF's added tokens) fit.
    """
    by_id = {i: t for t, i in vocab.items()}
    # Line by line, without `read_vocab_txt`'s whitespace check: that is for a vocab.txt used on
    # its own. A tokenizer.json's added token may hold a space ("new york", matched before
    # pre-tokenization), which `save` writes as is, and its folder then failed to load back.
    for index, token in enumerate(_vocab_lines(path)):
        if by_id.get(index) != token:
            raise DataError(
                path,
                index + 1,
                f"token {token!r}, but {source.name} has {by_id.get(index)!r} at id {index}: the two files "
                f"disagree and {source.name} would be used; remove the one that is out of date",
            )


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
    """Change lower-casing of a BertNormalizer in place, as HF does for `do_lower_case`.

    Accent stripping then follows the new casing (`strip_accents=None`), again as in HF: keeping
    the old setting made an uncased tokenizer loaded with `do_lower_case: false` keep the case but
    still strip the accents ("Café" -> "Cafe"), a pipeline no BERT model was trained with.
    """
    state = _normalizer_state(tokenizer)
    if _normalizer_lowercases(state) == lowercase:
        return
    if state.get("type") != "BertNormalizer":
        raise DataError(path, 0, f"cannot set lowercase={lowercase} on a {state.get('type')} normalizer")
    _set_bert_options(tokenizer, {"lowercase": lowercase, "strip_accents": None})


def _set_bert_options(tokenizer: Tokenizer, options: Mapping[str, bool | None]) -> None:
    """Replace a BertNormalizer by one with `options` changed (a no-op for other normalisers,
    which have no such options, as in HF)."""
    state = _normalizer_state(tokenizer)
    if state.get("type") != "BertNormalizer" or all(state.get(k) == v for k, v in options.items()):
        return
    current = {k: state.get(k, d) for k, d in _BERT_DEFAULTS.items()}
    tokenizer.normalizer = normalizers.BertNormalizer(**{**current, **options})


# BertNormalizer's options and their defaults; HF's tokenizer_config.json name for each.
_BERT_DEFAULTS: dict[str, bool | None] = {
    "clean_text": True,
    "handle_chinese_chars": True,
    "strip_accents": None,
    "lowercase": True,
}
_CONFIG_KEYS = {
    "do_lower_case": "lowercase",
    "strip_accents": "strip_accents",
    "tokenize_chinese_chars": "handle_chinese_chars",
}


def _config_options(path: Path) -> dict[str, bool]:
    """The BertNormalizer options a `tokenizer_config.json` sets (`lowercase`, `strip_accents`,
    `handle_chinese_chars`), only those given as true/false (null: the default); {} when there is
    no such file.

    HF `transformers` applies `strip_accents` and `tokenize_chinese_chars` as well as
    `do_lower_case`; reading only the last made e.g. `{"do_lower_case": true, "strip_accents":
    false}` strip the accents, so accented words of the vocabulary never matched.
    """
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(path, 0, f"cannot read tokenizer config: {error}") from None
    if not isinstance(config, dict):
        return {}
    for key in _CONFIG_KEYS:
        if config.get(key) is not None and not isinstance(config[key], bool):
            # "false" (a string) is truthy: which way HF would take it is anyone's guess
            raise DataError(path, 0, f"must be true, false or null, got {config[key]!r}", key=key)
    return {option: config[key] for key, option in _CONFIG_KEYS.items() if isinstance(config.get(key), bool)}


def _write_atomic(path: Path, text: str) -> None:
    """A crash never leaves a half-written vocabulary (see xfer.core.atomic)."""
    atomic_write_text(path, text)

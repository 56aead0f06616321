"""A small reversible tokenizer for raw text (translation sources and targets, raw unlabeled text).

Words are runs of letters/digits/underscore; every other non-space character is a token of its
own. `tokenize_joined` marks a token that was written without a space before it with a leading
joiner `￭` (OpenNMT's convention), so `detokenize(tokenize_joined(s))` gives back `s` with its
whitespace normalised to single spaces: a translation model trained on joined target tokens
produces detokenised text for sacrebleu without a language-specific detokenizer.
"""

from __future__ import annotations

import re

JOINER = "￭"
_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """Words and single punctuation characters (no joiners): encoder input."""
    return _TOKEN.findall(text)


def tokenize_joined(text: str) -> list[str]:
    """Tokens; those not preceded by whitespace (except the first) carry a leading JOINER."""
    tokens = []
    for match in _TOKEN.finditer(text):
        start = match.start()
        attached = bool(tokens) and start > 0 and not text[start - 1].isspace()
        tokens.append(JOINER + match.group() if attached else match.group())
    return tokens


def detokenize(tokens: list[str]) -> str:
    """Inverse of `tokenize_joined` (up to whitespace normalisation)."""
    out: list[str] = []
    for token in tokens:
        if token.startswith(JOINER) and out:
            out.append(token[len(JOINER) :])
        else:
            if out:
                out.append(" ")
            out.append(token.removeprefix(JOINER))
    return "".join(out)

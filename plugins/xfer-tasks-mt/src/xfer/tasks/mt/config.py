"""Config of the `mt/parallel` task (torch-free: the recipe validator imports it)."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Any, Literal

from xfer.core.config import ExistingPath, knob

_LANG = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


@dataclass
class ParallelConfig:
    """Line-aligned parallel files `<data_dir>/<split>.<lang>` (the Multi30k layout)."""

    data_dir: ExistingPath | None = knob(
        None, "Folder with the parallel files (relative paths resolve against the recipe).", required=True
    )
    source_lang: str = knob("en", "Source language suffix: train.<source_lang> is the input.")
    target_lang: str = knob("de", "Target language suffix: train.<target_lang> is the reference.")
    file_pattern: str = knob(
        "{split}.{lang}", "File name of a split in one language; {split} is train/dev/test, {lang} a language."
    )
    max_examples: int | None = knob(
        None, "Keep only the FIRST N sentence pairs of each split (file order), for quick runs. None keeps all."
    )
    bleu_tokenize: Literal["13a", "intl", "char", "zh", "none"] = knob(
        "13a",
        "sacrebleu's tokenizer for BLEU (13a = mteval-v13a, WMT's default; a Chinese target needs zh or char, Japanese char).",
    )
    lowercase: bool = knob(False, "Case-insensitive BLEU (sacrebleu -lc).")

    def __post_init__(self) -> None:
        value: Any = self.max_examples
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"max_examples must be a positive integer or null, not {value!r}")
        for name in ("source_lang", "target_lang"):
            if not _LANG.match(getattr(self, name)):
                raise ValueError(f"{name} must be a language suffix such as 'en', not {getattr(self, name)!r}")
        if self.source_lang == self.target_lang:
            raise ValueError(f"source_lang and target_lang are both {self.source_lang!r}")
        problem = _tokenize_problem(self.target_lang, self.bleu_tokenize)
        if problem:
            raise ValueError(problem)
        if "{split}" not in self.file_pattern or "{lang}" not in self.file_pattern:
            raise ValueError(f"file_pattern must contain {{split}} and {{lang}}, not {self.file_pattern!r}")
        problem = _pattern_problem(self.file_pattern)
        if problem:
            raise ValueError(f"file_pattern {self.file_pattern!r}: {problem}")


_UNSPACED = {
    "zh": ("Chinese", "'zh' (sacrebleu's tokenizer for Chinese) or 'char'"),
    "ja": ("Japanese", "'char' (sacrebleu's 'ja-mecab' is not offered)"),
}
"""Languages written without spaces between words (by the primary subtag of `target_lang`), and
the tokenizers to use for them."""


def _tokenize_problem(target_lang: str, tokenize: str) -> str | None:
    """Why `tokenize` cannot score BLEU in `target_lang`, or None. 13a, intl and none cut words at
    spaces (and punctuation) only: in Chinese or Japanese a clause is then one "word", so a
    translation one character off a reference scored 0.0 BLEU (sacrebleu itself picks `zh` or
    `ja-mecab` for these targets; the default 13a here was taken silently)."""
    unspaced = _UNSPACED.get(re.split(r"[-_]", target_lang)[0].lower())
    if unspaced is None or tokenize not in ("13a", "intl", "none"):
        return None
    language, use = unspaced
    return (
        f"bleu_tokenize {tokenize!r} splits words at spaces, which {language} (target_lang {target_lang!r}) does "
        f"not write: BLEU would count whole clauses as single words; set bleu_tokenize to {use}"
    )


def _pattern_problem(pattern: str) -> str | None:
    """Why `pattern.format(split=..., lang=...)` would fail, or None. Checked here so that a
    stray `{x}` or `{` is reported at the recipe line, not as a KeyError (a "plugin bug") when
    the files are read."""
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(pattern) if name is not None]
    except ValueError as err:  # a lone { or }
        return f"{err} (write {{{{ or }}}} for a literal brace)"
    for name, spec, conversion in fields:
        if name not in ("split", "lang") or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            return f"unknown field {shown}: only {{split}} and {{lang}} are replaced (write {{{{ or }}}} for a literal brace)"
    return None

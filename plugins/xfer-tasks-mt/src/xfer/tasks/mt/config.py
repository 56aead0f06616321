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
        None,
        "Folder with the parallel files (relative paths resolve against the recipe). A test split may have its "
        "source file only: a blind test set, predicted and written, not scored.",
        required=True,
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
        "sacrebleu's tokenizer for BLEU (13a = mteval-v13a, WMT's default; a Chinese target needs zh or char, "
        "Japanese, Thai, Lao, Khmer or Burmese char, Tibetan or Dzongkha intl or char).",
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
    code: (language, tokenizers)
    for codes, language, tokenizers in (
        (("zh", "zho", "chi", "cmn", "yue"), "Chinese", ("zh", "char")),
        (("ja", "jpn"), "Japanese", ("char",)),
        (("th", "tha"), "Thai", ("char",)),
        (("lo", "lao"), "Lao", ("char",)),
        (("km", "khm"), "Khmer", ("char",)),
        (("my", "mya", "bur"), "Burmese", ("char",)),
        (("bo", "bod", "tib"), "Tibetan", ("intl", "char")),
        (("dz", "dzo"), "Dzongkha", ("intl", "char")),
    )
    for code in codes
}
"""Languages written without spaces between words (by the primary subtag of `target_lang`, ISO
639-1 or 639-3/639-2 as OPUS and Tatoeba name them), and the tokenizers that cut their words.
Thai, Lao, Khmer and Burmese put spaces between phrases at most: with 13a a Thai translation one
word off its reference scored 0.0 BLEU (char: 86.5), as Chinese did before `zh` was required;
`zh` splits only Chinese characters, so kana or Thai text stays whole clauses under it too.
Tibetan and Dzongkha (Tibetan script) mark syllables with the tsheg (U+0F0B), a punctuation mark
that `intl` splits at and 13a does not: a Tibetan translation one syllable off its reference
scored 0.0 BLEU with 13a, zh and none (intl: 87.4, char: 89.3)."""
_TOKENIZER_NOTES = {
    "zh": "'zh' (sacrebleu's tokenizer for Chinese)",
    "char": "'char'",
    "intl": "'intl' (which splits at the tsheg, U+0F0B)",
}


def _tokenize_problem(target_lang: str, tokenize: str) -> str | None:
    """Why `tokenize` cannot score BLEU in `target_lang`, or None. 13a, intl and none cut words at
    spaces (and punctuation) only: in Chinese or Japanese a clause is then one "word", so a
    translation one character off a reference scored 0.0 BLEU (sacrebleu itself picks `zh` or
    `ja-mecab` for these targets; the default 13a here was taken silently)."""
    unspaced = _UNSPACED.get(re.split(r"[-_]", target_lang)[0].lower())
    if unspaced is None or tokenize in unspaced[1]:
        return None
    language, tokenizers = unspaced
    use = " or ".join(_TOKENIZER_NOTES[name] for name in tokenizers)
    if language == "Japanese":
        use += " (sacrebleu's 'ja-mecab' is not offered)"
    how = "splits words at spaces" if tokenize != "zh" else "splits only Chinese characters"
    return (
        f"bleu_tokenize {tokenize!r} {how}, and {language} (target_lang {target_lang!r}) is not written with "
        f"spaces between words: BLEU would count whole clauses as single words; set bleu_tokenize to {use}"
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

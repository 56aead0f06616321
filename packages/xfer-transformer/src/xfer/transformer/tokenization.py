"""WordPiece tokenization for BERT/ELECTRA-style encoders, built on HF `tokenizers`.

Why a wrapper instead of using `tokenizers.Tokenizer` directly: the model code needs a small,
stable contract (fixed special-token ids, `[CLS] a [SEP] b [SEP]` pairs with type ids 0/1,
word-level alignment for tagging, doc-stride windows for span QA) that behaves the same whether
the vocabulary was trained here, shipped as a Google/HF `vocab.txt`, or loaded from a
`tokenizer.json`. Everything heavy (normalisation, WordPiece, pair truncation) stays in the
Rust library; Python only assembles ids.

Conventions shared by every encoder method:

* Padding is never done here; an `Encoding` has exactly as many ids as real tokens and the
  collator pads a batch to its longest member (cheaper than padding to `max_length`).
* `max_length` always counts the special tokens.
* Special token ids are read from the vocabulary, never assumed: vocabularies trained with
  `train_wordpiece` have `[PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4`, Google's BERT/ELECTRA
  `vocab.txt` has `[PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103`.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from xfer.core.errors import DataError

__all__ = [
    "SPECIAL_TOKENS",
    "Encoding",
    "QAFeature",
    "TruncationStrategy",
    "WordAlignment",
    "WordPieceTokenizer",
    "build_bert_tokenizer",
    "read_vocab_txt",
    "train_wordpiece",
]

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, UNK, CLS, SEP, MASK)
"""The five BERT special tokens, in the order that gives trained vocabularies ids 0..4."""

CONTINUATION_PREFIX = "##"
VOCAB_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"

TruncationStrategy = Literal["longest_first", "only_first", "only_second"]
_STRATEGIES: tuple[str, ...] = ("longest_first", "only_first", "only_second")

# Input files are read in blocks of about this many bytes (cut at a line end) to count characters.
_READ_BLOCK_BYTES = 1 << 22
_UNICODE_SIZE = 0x110000
# A vocabulary is "cased" when more than this share of its ordinary tokens has upper-case letters
# (bert-base-cased: about a quarter; uncased vocabularies: none, bar a few odd Unicode letters).
_CASED_SHARE = 0.01


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
class Encoding:
    """Ids for one sequence or pair: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, unpadded."""

    input_ids: list[int]
    token_type_ids: list[int]

    @property
    def length(self) -> int:
        """Number of real tokens; the attention mask is `length` ones followed by the padding."""
        return len(self.input_ids)

    @property
    def attention_mask(self) -> list[int]:
        """All ones: nothing is padded here (see the module docstring)."""
        return [1] * len(self.input_ids)


@dataclass(frozen=True, slots=True)
class WordAlignment:
    """A word-tokenized sentence (or a window of one) encoded as `[CLS] pieces... [SEP]`.

    `word_starts[i]` is the index in `input_ids` of the first sub-token of word
    `first_word + i`; a tagger predicts one label per word at those positions. Only the words that
    fit are encoded: `truncated_words` counts the words left out, which the caller must encode in
    further windows (see `WordPieceTokenizer.split_for_tagging`) rather than lose.
    """

    input_ids: list[int]
    word_starts: list[int]
    truncated_words: int
    first_word: int = 0

    @property
    def num_words(self) -> int:
        """How many words this encoding covers (`len(word_starts)`)."""
        return len(self.word_starts)

    @property
    def length(self) -> int:
        return len(self.input_ids)

    @property
    def token_type_ids(self) -> list[int]:
        """All zeros: a tagging input is a single segment."""
        return [0] * len(self.input_ids)


@dataclass(frozen=True, slots=True)
class QAFeature:
    """One window of a (question, context) example: `[CLS] question [SEP] context-window [SEP]`.

    `offsets[i]` is the `(start, end)` character span in the original context of token `i`, or
    None for question and special tokens, so predicted token positions map back to answer text
    as `context[offsets[start][0]:offsets[end][1]]`. `start_position`/`end_position` are the
    answer's first/last token inside this window, or 0 (`[CLS]`) when the answer is not entirely
    inside it or no answer was given (the SQuAD convention). `token_is_max_context[i]` is True
    when this window gives context token `i` the most context on both sides among all windows
    containing it; prediction should only use answer starts/ends at such tokens, so that every
    context token is scored by exactly one window.
    """

    example_index: int
    input_ids: list[int]
    token_type_ids: list[int]
    offsets: list[tuple[int, int] | None]
    token_is_max_context: list[bool]
    start_position: int
    end_position: int

    @property
    def length(self) -> int:
        return len(self.input_ids)

    @property
    def attention_mask(self) -> list[int]:
        return [1] * len(self.input_ids)


# ---------------------------------------------------------------------------------------------
# Training


def train_wordpiece(
    files: Sequence[Path | str],
    vocab_size: int,
    lowercase: bool = True,
    min_frequency: int = 2,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
    limit_alphabet: int = 1000,
) -> Tokenizer:
    """Train a BERT-style WordPiece tokenizer on plain-text files (one or more sentences a line).

    Special tokens get the first ids in the order given, so with the default order the ids are
    fixed: `[PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4` (models can hard-wire `padding_idx=0`).
    The `limit_alphabet` most frequent characters (after normalisation) come next, sorted by code
    point, then their `##` continuation forms, then the learned merges; the alphabet is always
    kept, so the result can exceed `vocab_size` when the alphabet alone is that large, and can
    fall short of it when no pair occurs `min_frequency` times any more.

    Deterministic: the same files and settings give an identical vocabulary in every process.
    `tokenizers`' own trainer is not (huggingface/tokenizers#1794: `##` ids are assigned in
    hash-map order and feed merge tie-breaking), so the alphabet is computed here with explicit
    tie-breaking and handed to the trainer pre-registered, leaving it nothing to order by hash.
    A side effect is that every kept word character gets a `##` form even if the corpus never
    shows it inside a word, which avoids `[UNK]` for such words at inference time.

    Raises DataError naming the file for a missing, unreadable, non-UTF-8 or empty input file.
    """
    paths = [Path(f) for f in files]
    if not paths:
        raise ValueError("train_wordpiece needs at least one input file")
    specials = _check_special_tokens(special_tokens)
    if vocab_size <= len(specials):
        raise ValueError(f"vocab_size={vocab_size} leaves no room beyond the {len(specials)} special tokens")
    if min_frequency < 1 or limit_alphabet < 1:
        raise ValueError("min_frequency and limit_alphabet must be at least 1")

    normalizer = _bert_normalizer(lowercase)
    char_counts = _count_characters(paths, normalizer)
    alphabet = _select_alphabet(char_counts, limit_alphabet, exclude=set(specials))
    continuations = [CONTINUATION_PREFIX + c for c in alphabet if _can_continue_word(c)]
    preregistered = [*specials, *alphabet, *(t for t in continuations if t not in specials)]

    trainee = Tokenizer(models.WordPiece(unk_token=UNK))
    trainee.normalizer = normalizer
    trainee.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=preregistered,
        # The alphabet is already registered; 0 stops the trainer adding characters by itself.
        limit_alphabet=0,
        continuing_subword_prefix=CONTINUATION_PREFIX,
        show_progress=False,
    )
    trainee.train([str(p) for p in paths], trainer=trainer)
    # Rebuild from the bare vocabulary: the trainer registered the whole alphabet as special
    # (added) tokens, which would make e.g. a literal "##a" in text unsplittable.
    vocab = trainee.get_vocab(with_added_tokens=False)
    for expected_id, token in enumerate(specials):
        if vocab.get(token) != expected_id:  # pragma: no cover - guards a tokenizers behaviour change
            raise RuntimeError(f"trained vocabulary has {token} at id {vocab.get(token)}, expected {expected_id}")
    return build_bert_tokenizer(vocab, lowercase=lowercase)


def build_bert_tokenizer(vocab: dict[str, int], lowercase: bool) -> Tokenizer:
    """The standard BERT pipeline around a WordPiece vocabulary (what `BertTokenizerFast` builds).

    BertNormalizer cleans control characters, pads CJK characters with spaces and, when
    lower-casing, also strips accents (as the original uncased BERT did); BertPreTokenizer splits
    on whitespace and punctuation; the post-processor adds `[CLS]`/`[SEP]` with type ids 0/1.
    """
    missing = [t for t in (UNK, CLS, SEP) if t not in vocab]
    if missing:
        raise ValueError(f"vocabulary lacks {', '.join(missing)}")
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token=UNK, max_input_chars_per_word=100))
    tokenizer.normalizer = _bert_normalizer(lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix=CONTINUATION_PREFIX)
    tokenizer.add_special_tokens([t for t in SPECIAL_TOKENS if t in vocab])
    tokenizer.post_processor = _bert_post_processor(vocab[CLS], vocab[SEP])
    return tokenizer


def _bert_normalizer(lowercase: bool) -> normalizers.BertNormalizer:
    return normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=lowercase, lowercase=lowercase
    )


def _bert_post_processor(cls_id: int, sep_id: int) -> processors.TemplateProcessing:
    return processors.TemplateProcessing(
        single=f"{CLS}:0 $A:0 {SEP}:0",
        pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
        special_tokens=[(CLS, cls_id), (SEP, sep_id)],
    )


def _check_special_tokens(special_tokens: Sequence[str]) -> list[str]:
    specials = list(special_tokens)
    if len(set(specials)) != len(specials):
        raise ValueError(f"special_tokens has duplicates: {specials}")
    missing = [t for t in SPECIAL_TOKENS if t not in specials]
    if missing:
        raise ValueError(f"special_tokens must include {', '.join(missing)} (BERT models need all five)")
    return specials


def _count_characters(paths: list[Path], normalizer: normalizers.BertNormalizer) -> Counter[str]:
    """Count the non-space characters of the normalised text, validating every file on the way.

    Raw characters are counted (vectorised) and each distinct one is normalised on its own:
    BertNormalizer works character by character (cleaning, CJK padding, NFD + accent removal,
    `char::to_lowercase`), so this gives exactly the counts of the normalised text while running
    the slow normaliser a few thousand times instead of over the whole corpus.
    """
    total: Counter[str] = Counter()
    for path in paths:
        counts: Counter[str] = Counter()
        for char, count in _count_raw_characters(path).items():
            for normalized in normalizer.normalize_str(char):
                if not normalized.isspace():
                    counts[normalized] += count
        if not counts:
            raise DataError(path, 0, "file is empty: no text to train a vocabulary on")
        total.update(counts)
    return total


def _count_raw_characters(path: Path) -> dict[str, int]:
    import torch  # only needed here; keeps `import xfer.transformer.tokenization` light

    totals = torch.zeros(_UNICODE_SIZE, dtype=torch.int64)
    for text in _read_text_blocks(path):
        codes = torch.frombuffer(bytearray(text.encode("utf-32-le")), dtype=torch.int32)
        totals += torch.bincount(codes, minlength=_UNICODE_SIZE)
    present = totals.nonzero().flatten().tolist()
    return {chr(code): int(totals[code]) for code in present}


def _read_text_blocks(path: Path) -> Iterator[str]:
    """Yield a UTF-8 file's text in blocks of whole lines; errors become DataError.

    Blocks end at a newline (or, inside a very long line, at a character boundary) so no
    character is split, and a decoding error can be reported with its 1-based line number.
    """
    line = 1
    pending = b""
    try:
        with path.open("rb") as stream:
            while block := stream.read(_READ_BLOCK_BYTES):
                data = pending + block
                cut = data.rfind(b"\n") + 1 or _utf8_boundary(data)
                pending, data = data[cut:], data[:cut]
                if data:
                    yield _decode(data, path, line)
                    line += data.count(b"\n")
        if pending:
            yield _decode(pending, path, line)
    except IsADirectoryError:
        raise DataError(path, 0, "is a directory, not a text file") from None
    except FileNotFoundError:
        raise DataError(path, 0, "file not found") from None
    except PermissionError:
        raise DataError(path, 0, "permission denied") from None
    except OSError as error:
        raise DataError(path, 0, f"cannot read: {error.strerror or error}") from None


def _utf8_boundary(data: bytes) -> int:
    """The last index in `data` where a UTF-8 character starts (skipping continuation bytes)."""
    cut = len(data)
    while cut > 0 and len(data) - cut < 4 and data[cut - 1] & 0xC0 == 0x80:
        cut -= 1
    return cut - 1 if cut > 0 and data[cut - 1] >= 0xC0 else len(data)


def _decode(data: bytes, path: Path, first_line: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = first_line + data[: error.start].count(b"\n")
        raise DataError(path, line, f"not valid UTF-8 ({error.reason})") from None


def _select_alphabet(counts: Counter[str], limit: int, exclude: set[str]) -> list[str]:
    """The `limit` most frequent characters (ties: lower code point first), sorted by code point."""
    ranked = sorted((c for c in counts if c not in exclude), key=lambda c: (-counts[c], c))
    return sorted(ranked[:limit])


def _can_continue_word(char: str) -> bool:
    """Whether BertPreTokenizer can put `char` after the first character of a word.

    Punctuation is always split into one-character words, and BertNormalizer surrounds CJK
    ideographs with spaces, so `##` forms of those could never be used.
    """
    return not (_is_bert_punctuation(char) or _is_cjk(char) or char.isspace())


def _is_bert_punctuation(char: str) -> bool:
    """BERT's definition: all non-alphanumeric printable ASCII, plus Unicode category P*."""
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


# ---------------------------------------------------------------------------------------------
# The tokenizer


class WordPieceTokenizer:
    """A BERT-style WordPiece tokenizer with the encoders the xfer task heads need.

    Wraps (a private copy of) a `tokenizers.Tokenizer` whose model is WordPiece with `##`
    continuations and whose vocabulary holds `[PAD] [UNK] [CLS] [SEP] [MASK]` at any ids. The
    post-processor is always rebuilt from the detected ids, and truncation/padding settings stored
    in a `tokenizer.json` are dropped, so every source behaves the same way.
    """

    def __init__(self, tokenizer: Tokenizer, *, source: str | Path = "<tokenizer>"):
        self._source = str(source)
        self._tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self._check_model()
        vocab = self._tokenizer.get_vocab(with_added_tokens=True)
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise DataError(self._source, 0, f"vocabulary lacks the special token(s) {', '.join(missing)}")
        self._special_ids = {t: vocab[t] for t in SPECIAL_TOKENS}
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
        self._tokenizer.post_processor = _bert_post_processor(self.cls_id, self.sep_id)
        self._vocab: dict[str, int] | None = None

    def _check_model(self) -> None:
        model = self._tokenizer.model
        if not isinstance(model, models.WordPiece):
            raise DataError(self._source, 0, f"not a WordPiece tokenizer (model is {type(model).__name__})")
        if model.continuing_subword_prefix != CONTINUATION_PREFIX:
            raise DataError(
                self._source,
                0,
                f"WordPiece continuation prefix is {model.continuing_subword_prefix!r}, expected '##'",
            )

    # -- loading and saving -------------------------------------------------------------------

    @classmethod
    def train(cls, files: Sequence[Path | str], vocab_size: int, **options: Any) -> WordPieceTokenizer:
        """`train_wordpiece(files, vocab_size, **options)`, wrapped."""
        return cls(train_wordpiece(files, vocab_size, **options), source="<trained>")

    @classmethod
    def from_vocab(cls, vocab: dict[str, int], lowercase: bool = True) -> WordPieceTokenizer:
        """A tokenizer for an in-memory `token -> id` vocabulary with the BERT pipeline."""
        try:
            return cls(build_bert_tokenizer(vocab, lowercase), source="<vocab>")
        except ValueError as error:
            raise DataError("<vocab>", 0, str(error)) from None

    @classmethod
    def from_file(cls, path: Path | str, lowercase: bool | None = None) -> WordPieceTokenizer:
        """Load a `tokenizer.json` (any `.json` file) or a BERT `vocab.txt` (anything else).

        `lowercase=None` keeps a `tokenizer.json`'s own normaliser and, for a `vocab.txt`, infers
        the casing from the vocabulary: a vocabulary with upper-case tokens was built from cased
        text, and lower-casing the input for it (or not lower-casing for an uncased one) would
        turn most words into `[UNK]` without any error.
        """
        path = Path(path)
        if path.suffix == ".json":
            return cls._from_tokenizer_json(path, lowercase)
        vocab = read_vocab_txt(path)
        if lowercase is None:
            lowercase = not _looks_cased(vocab)
        try:
            return cls(build_bert_tokenizer(vocab, lowercase), source=path)
        except ValueError as error:
            raise DataError(path, 0, str(error)) from None

    @classmethod
    def _from_tokenizer_json(cls, path: Path, lowercase: bool | None) -> WordPieceTokenizer:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise DataError(path, 0, "file not found") from None
        except (OSError, UnicodeDecodeError) as error:
            raise DataError(path, 0, f"cannot read: {error}") from None
        try:
            tokenizer = Tokenizer.from_str(text)
        except Exception as error:  # tokenizers raises a bare Exception for malformed JSON
            raise DataError(path, 0, f"not a valid tokenizer.json: {error}") from None
        if lowercase is not None:
            _set_lowercase(tokenizer, lowercase, path)
        return cls(tokenizer, source=path)

    @classmethod
    def from_dir(cls, directory: Path | str, lowercase: bool | None = None) -> WordPieceTokenizer:
        """Load a saved tokenizer or an HF model directory.

        Prefers `tokenizer.json` (it records the exact normaliser) and falls back to `vocab.txt`.
        `tokenizer_config.json`'s `do_lower_case`, when present, decides the casing as it does in
        HF `transformers`; an explicit `lowercase` argument overrides both.
        """
        directory = Path(directory)
        if lowercase is None:
            lowercase = _config_lowercase(directory / TOKENIZER_CONFIG_FILE)
        for name in (TOKENIZER_FILE, VOCAB_FILE):
            if (directory / name).is_file():
                return cls.from_file(directory / name, lowercase=lowercase)
        raise DataError(directory, 0, f"no {TOKENIZER_FILE} or {VOCAB_FILE} in this directory")

    def save(self, directory: Path | str) -> Path:
        """Write `vocab.txt` (for BERT tooling) and `tokenizer.json` (exact pipeline) atomically.

        Returns the directory. Both files load back to identical encodings with `from_dir`.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tokens = self._tokens_by_id()
        _write_atomic(directory / VOCAB_FILE, "".join(f"{t}\n" for t in tokens))
        _write_atomic(directory / TOKENIZER_FILE, self._tokenizer.to_str(pretty=True))
        return directory

    def _tokens_by_id(self) -> list[str]:
        """Tokens in id order; vocab.txt cannot represent gaps or tokens spanning lines."""
        by_id = {i: t for t, i in self.vocab.items()}
        if sorted(by_id) != list(range(len(by_id))) or len(by_id) != len(self.vocab):
            raise ValueError("vocabulary ids are not contiguous from 0, so it cannot be written as vocab.txt")
        tokens = [by_id[i] for i in range(len(by_id))]
        bad = [t for t in tokens if "\n" in t or "\r" in t]
        if bad:
            raise ValueError(f"tokens containing line breaks cannot be written to vocab.txt: {bad[:3]!r}")
        return tokens

    # -- properties -----------------------------------------------------------------------------

    @property
    def backend(self) -> Tokenizer:
        """The underlying `tokenizers.Tokenizer` (do not enable truncation or padding on it)."""
        return self._tokenizer

    @property
    def vocab_size(self) -> int:
        """Embedding rows a model needs: the largest id plus one (the vocabulary size for vocab.txt)."""
        return max(self.vocab.values()) + 1

    @property
    def vocab(self) -> dict[str, int]:
        """`token -> id` (a shared dict: do not modify)."""
        if self._vocab is None:
            self._vocab = self._tokenizer.get_vocab(with_added_tokens=True)
        return self._vocab

    @property
    def lowercase(self) -> bool:
        """Whether input text is lower-cased (read from the normaliser)."""
        return _normalizer_lowercases(_normalizer_state(self._tokenizer))

    @property
    def pad_id(self) -> int:
        return self._special_ids[PAD]

    @property
    def unk_id(self) -> int:
        return self._special_ids[UNK]

    @property
    def cls_id(self) -> int:
        return self._special_ids[CLS]

    @property
    def sep_id(self) -> int:
        return self._special_ids[SEP]

    @property
    def mask_id(self) -> int:
        return self._special_ids[MASK]

    @property
    def special_ids(self) -> frozenset[int]:
        """Ids of the five special tokens (MLM/RTD masking must never replace them)."""
        return frozenset(self._special_ids.values())

    # -- plain text -----------------------------------------------------------------------------

    def tokenize(self, text: str) -> list[str]:
        """Word pieces of `text` without special tokens (for inspection and tests)."""
        return self._tokenizer.encode(text, add_special_tokens=False).tokens

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text for ids, joining `##` pieces (lower-cased/accent-stripped text stays so)."""
        return self._tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    # -- sequences and pairs --------------------------------------------------------------------

    def encode_pair(
        self,
        text_a: str,
        text_b: str | None = None,
        *,
        max_length: int = 512,
        truncation: TruncationStrategy = "longest_first",
    ) -> Encoding:
        """Encode `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` (type ids 0 then 1), truncated.

        Truncation to `max_length` tokens (specials included) cuts from the right and matches HF
        `BertTokenizerFast` exactly: `longest_first` keeps the shorter text whole when cutting the
        longer one suffices and otherwise splits the room evenly; `only_first`/`only_second` cut
        that text alone and raise ValueError when it is too short to make the pair fit (HF raises
        too). A single text is simply cut with `longest_first`/`only_first`.
        """
        texts_b = None if text_b is None else [text_b]
        return self.encode_pairs([text_a], texts_b, max_length=max_length, truncation=truncation)[0]

    def encode_pairs(
        self,
        texts_a: Sequence[str],
        texts_b: Sequence[str] | None = None,
        *,
        max_length: int = 512,
        truncation: TruncationStrategy = "longest_first",
    ) -> list[Encoding]:
        """Batch `encode_pair`: all texts are tokenized in one parallel Rust call.

        Truncation is applied here rather than by `tokenizers`, with the same arithmetic: its
        truncation also builds every overflowing window combination of a pair, which costs
        seconds for long pairs with a small `max_length` and is never used.
        """
        if texts_b is not None and len(texts_b) != len(texts_a):
            raise ValueError(f"texts_a has {len(texts_a)} items but texts_b has {len(texts_b)}")
        if truncation not in _STRATEGIES:
            raise ValueError(f"truncation must be one of {', '.join(_STRATEGIES)}, not {truncation!r}")
        texts = [*texts_a, *(texts_b or ())]
        pieces = [e.ids for e in self._tokenizer.encode_batch_fast(texts, add_special_tokens=False)] if texts else []
        firsts = pieces[: len(texts_a)]
        seconds: list[list[int] | None] = list(pieces[len(texts_a) :]) if texts_b is not None else [None] * len(firsts)
        return [self._assemble_pair(a, b, max_length, truncation) for a, b in zip(firsts, seconds, strict=True)]

    def _assemble_pair(self, a: list[int], b: list[int] | None, max_length: int, strategy: str) -> Encoding:
        budget = max_length - (2 if b is None else 3)
        if budget < 0:
            raise ValueError(f"max_length={max_length} cannot even hold the special tokens")
        keep_a, keep_b = _truncated_lengths(len(a), None if b is None else len(b), budget, strategy)
        input_ids = [self.cls_id, *a[:keep_a], self.sep_id]
        if b is None:
            return Encoding(input_ids, [0] * len(input_ids))
        first_length = len(input_ids)
        input_ids += [*b[:keep_b], self.sep_id]
        return Encoding(input_ids, [0] * first_length + [1] * (len(input_ids) - first_length))

    # -- word-level alignment (tagging) ---------------------------------------------------------

    def encode_words(self, words: Sequence[str], *, max_length: int = 512) -> WordAlignment:
        """Encode a pre-split sentence, keeping the first sub-token index of every word.

        Each word is tokenized on its own, so a word never merges with its neighbours and the
        alignment is exact. A word that yields no pieces (an empty string, a control character)
        becomes `[UNK]` so it still has a position to carry its label. Words are never silently
        dropped: when the sentence does not fit, the alignment covers the longest prefix that does
        and `truncated_words` says how many are left (use `split_for_tagging` or
        `encode_words_windows`). A single word longer than `max_length - 2` pieces alone is cut to
        its first pieces; its start, which carries the label, is kept.
        """
        return self.encode_words_batch([words], max_length=max_length)[0]

    def encode_words_batch(self, sentences: Sequence[Sequence[str]], *, max_length: int = 512) -> list[WordAlignment]:
        """Batch `encode_words` (one parallel Rust call for all sentences)."""
        alignments = []
        for pieces in self._word_pieces_batch(sentences):
            end = _fit_words(pieces, 0, _word_budget(max_length))
            alignments.append(self._align(pieces, 0, end, max_length))
        return alignments

    def split_for_tagging(self, words: Sequence[str], *, max_length: int = 512) -> list[tuple[int, int]]:
        """Consecutive `(start_word, end_word)` windows (end exclusive) that each fit `max_length`.

        The windows cover every word exactly once, in order; `encode_words(words[s:e])` of each
        window has `truncated_words == 0`. An empty sentence gives one empty window `(0, 0)` so
        every sentence yields at least one input.
        """
        return self.split_for_tagging_batch([words], max_length=max_length)[0]

    def split_for_tagging_batch(
        self, sentences: Sequence[Sequence[str]], *, max_length: int = 512
    ) -> list[list[tuple[int, int]]]:
        """Batch `split_for_tagging`."""
        budget = _word_budget(max_length)
        return [_windows(pieces, budget) for pieces in self._word_pieces_batch(sentences)]

    def encode_words_windows(self, words: Sequence[str], *, max_length: int = 512) -> list[WordAlignment]:
        """`encode_words` of every `split_for_tagging` window, tokenizing the sentence once.

        Each alignment's `first_word` says where its window starts in `words`.
        """
        (pieces,) = self._word_pieces_batch([words])
        windows = _windows(pieces, _word_budget(max_length))
        return [self._align(pieces, start, end, max_length) for start, end in windows]

    def _word_pieces_batch(self, sentences: Sequence[Sequence[str]]) -> list[list[list[int]]]:
        """For each sentence, the piece ids of each word (`[UNK]` for words without pieces)."""
        batch = [list(words) for words in sentences]
        nonempty = [words for words in batch if words]
        # encode_batch_fast would be quicker but does not report word ids.
        encoded = iter(self._tokenizer.encode_batch(nonempty, is_pretokenized=True, add_special_tokens=False))
        result = []
        for words in batch:
            pieces: list[list[int]] = [[] for _ in words]
            if words:
                encoding = next(encoded)
                for token_id, word_id in zip(encoding.ids, encoding.word_ids, strict=True):
                    if word_id is not None:
                        pieces[word_id].append(token_id)
            for word_pieces in pieces:
                if not word_pieces:
                    word_pieces.append(self.unk_id)
            result.append(pieces)
        return result

    def _align(self, pieces: list[list[int]], start: int, end: int, max_length: int) -> WordAlignment:
        budget = _word_budget(max_length)
        input_ids = [self.cls_id]
        word_starts = []
        for word_pieces in pieces[start:end]:
            word_starts.append(len(input_ids))
            input_ids.extend(word_pieces[: budget - (len(input_ids) - 1)])
        input_ids.append(self.sep_id)
        return WordAlignment(input_ids, word_starts, truncated_words=len(pieces) - end, first_word=start)

    # -- span question answering ----------------------------------------------------------------

    def encode_qa(
        self,
        question: str,
        context: str,
        *,
        answer: tuple[int, int] | None = None,
        example_index: int = 0,
        max_length: int = 384,
        doc_stride: int = 128,
        max_query_length: int = 64,
    ) -> list[QAFeature]:
        """Encode one SQuAD-style example as one or more overlapping windows over the context.

        `answer` is `(start_char, end_char)` into `context`, end exclusive, so that
        `context[start_char:end_char]` is the answer text. See `encode_qa_batch`.
        """
        return self.encode_qa_batch(
            [question],
            [context],
            [answer],
            max_length=max_length,
            doc_stride=doc_stride,
            max_query_length=max_query_length,
            first_example_index=example_index,
        )

    def encode_qa_batch(
        self,
        questions: Sequence[str],
        contexts: Sequence[str],
        answers: Sequence[tuple[int, int] | None] | None = None,
        *,
        max_length: int = 384,
        doc_stride: int = 128,
        max_query_length: int = 64,
        first_example_index: int = 0,
    ) -> list[QAFeature]:
        """Encode SQuAD-style examples with the original BERT doc-stride windowing.

        The question is cut to its first `max_query_length` tokens; the context is split into
        windows of up to `max_length - len(question) - 3` tokens whose starts are `doc_stride`
        tokens apart (Google's `run_squad.py` meaning, which differs from HF's `stride` = overlap),
        the last window ending at the end of the context. Example `i` gets
        `example_index = first_example_index + i` so features of a chunked dataset stay unique.
        Offsets come from the fast tokenizer, so accents, lower-casing and removed control
        characters never shift the mapping back to context characters.
        """
        if len(contexts) != len(questions) or (answers is not None and len(answers) != len(questions)):
            raise ValueError("questions, contexts and answers must have the same length")
        if doc_stride < 1 or max_query_length < 0:
            raise ValueError("doc_stride must be at least 1 and max_query_length non-negative")
        if not questions:
            return []
        question_ids = self._tokenizer.encode_batch_fast(list(questions), add_special_tokens=False)
        context_encodings = self._tokenizer.encode_batch(list(contexts), add_special_tokens=False)
        features: list[QAFeature] = []
        for i, (question, context) in enumerate(zip(question_ids, context_encodings, strict=True)):
            answer = answers[i] if answers is not None else None
            span = None
            if answer is not None:
                span = _answer_token_span(context.offsets, answer, len(contexts[i]))
            features.extend(
                self._qa_windows(
                    question.ids[:max_query_length],
                    context.ids,
                    context.offsets,
                    span,
                    first_example_index + i,
                    max_length,
                    doc_stride,
                )
            )
        return features

    def _qa_windows(
        self,
        question_ids: list[int],
        context_ids: list[int],
        context_offsets: list[tuple[int, int]],
        answer_span: tuple[int, int] | None,
        example_index: int,
        max_length: int,
        doc_stride: int,
    ) -> list[QAFeature]:
        room = max_length - len(question_ids) - 3
        if room < 1:
            raise ValueError(
                f"max_length={max_length} leaves no room for context after a {len(question_ids)}-token question"
            )
        spans = _doc_spans(len(context_ids), room, doc_stride)
        best_span = _max_context_spans(spans, len(context_ids))
        head = [self.cls_id, *question_ids, self.sep_id]
        first = len(head)
        features = []
        for index, (start, length) in enumerate(spans):
            end = start + length
            start_position = end_position = 0
            if answer_span is not None and start <= answer_span[0] and answer_span[1] < end:
                start_position = answer_span[0] - start + first
                end_position = answer_span[1] - start + first
            features.append(
                QAFeature(
                    example_index=example_index,
                    input_ids=[*head, *context_ids[start:end], self.sep_id],
                    token_type_ids=[0] * first + [1] * (length + 1),
                    offsets=[None] * first + list(context_offsets[start:end]) + [None],
                    token_is_max_context=[False] * first + [best_span[p] == index for p in range(start, end)] + [False],
                    start_position=start_position,
                    end_position=end_position,
                )
            )
        return features


# ---------------------------------------------------------------------------------------------
# Helpers


def read_vocab_txt(path: Path | str) -> dict[str, int]:
    """Read a BERT `vocab.txt`: one token a line, the id is the 0-based line number.

    Duplicate tokens are an error rather than "last one wins" (HF's behaviour), because they leave
    embedding rows that no token maps to and make the vocabulary impossible to write back.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(path, 0, "file not found") from None
    except OSError as error:
        raise DataError(path, 0, f"cannot read: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(path, data[: error.start].count(b"\n") + 1, "not valid UTF-8") from None
    lines = re.split(r"\r\n|\r|\n", text)
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
    """Write via a temporary file and rename, so a crash never leaves a half-written vocabulary."""
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _truncated_lengths(n_a: int, n_b: int | None, budget: int, strategy: str) -> tuple[int, int]:
    """How many pieces of text a and b to keep; a transcription of `tokenizers`' `truncate_encodings`.

    `longest_first` keeps the shorter text whole when the longer one can absorb the cut, else
    gives each half the budget (the extra token of an odd budget to the longer text, or to the
    second when both are equally long). `only_first`/`only_second` cut one text and fail when
    that would take all of it.
    """
    total = n_a + (n_b or 0)
    if total <= budget:
        return n_a, n_b or 0
    if strategy == "longest_first":
        if n_b is None:
            return budget, 0
        swap = n_a > n_b
        short, long = (n_b, n_a) if swap else (n_a, n_b)
        long = short if short > budget else max(short, budget - short)
        if short + long > budget:
            short = budget // 2
            long = short + budget % 2
        keep_a, keep_b = (long, short) if swap else (short, long)
        return min(n_a, keep_a), min(n_b, keep_b)
    if strategy == "only_second" and n_b is None:
        raise ValueError("truncation='only_second' needs a second text to cut")
    target = n_a if strategy == "only_first" else n_b or 0
    remove = total - budget
    if target <= remove:
        raise ValueError(
            f"truncation={strategy!r} cannot fit the pair in {budget} pieces: "
            f"the text to cut has {target} and {remove} must go"
        )
    return (n_a - remove, n_b or 0) if strategy == "only_first" else (n_a, target - remove)


def _word_budget(max_length: int) -> int:
    if max_length < 3:
        raise ValueError(f"max_length={max_length} cannot hold [CLS], one word piece and [SEP]")
    return max_length - 2


def _fit_words(pieces: list[list[int]], start: int, budget: int) -> int:
    """End (exclusive) of the longest run of words from `start` whose pieces fit in `budget`.

    Always takes at least one word (it gets cut to `budget` pieces), so windows always advance.
    """
    used = 0
    end = start
    while end < len(pieces) and (end == start or used + len(pieces[end]) <= budget):
        used += len(pieces[end])
        end += 1
    return end


def _windows(pieces: list[list[int]], budget: int) -> list[tuple[int, int]]:
    if not pieces:
        return [(0, 0)]
    windows = []
    start = 0
    while start < len(pieces):
        end = _fit_words(pieces, start, budget)
        windows.append((start, end))
        start = end
    return windows


def _doc_spans(num_tokens: int, room: int, stride: int) -> list[tuple[int, int]]:
    """`(start, length)` windows over the context tokens, as in Google's run_squad.py.

    An empty context still gets one (empty) window so that every example yields a feature.
    """
    spans = []
    start = 0
    while True:
        length = min(num_tokens - start, room)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, stride)


def _max_context_spans(spans: list[tuple[int, int]], num_tokens: int) -> list[int]:
    """For every context token, the window giving it the most context (run_squad.py's rule).

    Score = min(tokens to the left, tokens to the right) + 0.01 * window length; the first window
    wins ties.
    """
    best = [-1] * num_tokens
    best_score = [float("-inf")] * num_tokens
    for index, (start, length) in enumerate(spans):
        for position in range(start, start + length):
            score = min(position - start, start + length - 1 - position) + 0.01 * length
            if score > best_score[position]:
                best[position], best_score[position] = index, score
    return best


def _answer_token_span(
    offsets: list[tuple[int, int]], answer: tuple[int, int], context_length: int
) -> tuple[int, int] | None:
    """First and last context token overlapping `[start_char, end_char)`, or None if none does."""
    start_char, end_char = answer
    if not 0 <= start_char < end_char <= context_length:
        raise ValueError(f"answer span {answer} is not a non-empty span of the {context_length}-character context")
    covered = [i for i, (start, end) in enumerate(offsets) if start < end_char and end > start_char]
    if not covered:
        return None
    return covered[0], covered[-1]

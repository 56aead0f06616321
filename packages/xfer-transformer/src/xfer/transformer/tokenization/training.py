"""Training a WordPiece vocabulary and building the BERT pipeline around one.

Training lives here rather than being a thin call into `tokenizers` because its trainer is not
deterministic (see `train_wordpiece`): the alphabet is counted and ordered in Python first. The
character counting, file reading and word-continuation test below exist only to serve that.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from xfer.core.errors import DataError
from xfer.core.textfile import not_utf8, nul_byte, read_error
from xfer.transformer.tokenization.encodings import CLS, CONTINUATION_PREFIX, SEP, SPECIAL_TOKENS, UNK

# Input files are read in blocks of about this many bytes (cut at a line end) to count characters.
_READ_BLOCK_BYTES = 1 << 22
_UNICODE_SIZE = 0x110000

MAX_VOCAB_SIZE = 4_000_000
"""Largest `vocab_size` accepted for training: 8x LaBSE's 501k, the largest published WordPiece
vocabulary. `tokenizers` reserves about 70 bytes per requested token up front, so a typo such as
`--size 1000000000` aborted the whole process (a failed 70 GB allocation) instead of an error."""


def train_wordpiece(
    files: Sequence[Path | str],
    vocab_size: int,
    lowercase: bool = True,
    min_frequency: int = 2,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
    limit_alphabet: int = 1000,
) -> Tokenizer:
    """Train a BERT-style WordPiece tokenizer on plain-text files (one or more sentences a line).

    Special tokens get the first ids in the order given (extra ones are matched whole in text, as
    the five are), so with the default order the ids are fixed: `[PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3,
    [MASK]=4` (models can hard-wire `padding_idx=0`).
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

    Raises DataError naming the file for a missing, unreadable, non-UTF-8, NUL-holding or empty input
    file.
    """
    paths = [Path(f) for f in files]
    if not paths:
        raise ValueError("train_wordpiece needs at least one input file")
    specials = _check_special_tokens(special_tokens)
    if vocab_size <= len(specials):
        raise ValueError(f"vocab_size={vocab_size} leaves no room beyond the {len(specials)} special tokens")
    if vocab_size > MAX_VOCAB_SIZE:
        raise ValueError(f"vocab_size={vocab_size} is more than {MAX_VOCAB_SIZE}, far beyond any WordPiece vocabulary")
    if min_frequency < 1 or limit_alphabet < 1:
        raise ValueError("min_frequency and limit_alphabet must be at least 1")

    normalizer = _bert_normalizer(lowercase)
    char_counts = _count_characters(paths, normalizer)
    alphabet = _select_alphabet(char_counts, limit_alphabet, exclude=set(specials))
    continuations = [CONTINUATION_PREFIX + c for c in alphabet if _can_continue_word(c, normalizer)]
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
    tokenizer = build_bert_tokenizer(vocab, lowercase=lowercase)
    # The rebuild keeps only the five BERT tokens special; the extra ones asked for ("[E1]", "<ent>")
    # must stay matched in text as `tokenizers`' own training leaves them, or the pre-tokenizer split
    # each into "[", "e", "##1", "]" (or [UNK]s) and no text could ever produce its id.
    tokenizer.add_special_tokens([t for t in specials if t not in SPECIAL_TOKENS])
    return tokenizer


def build_bert_tokenizer(vocab: dict[str, int], lowercase: bool) -> Tokenizer:
    """The standard BERT pipeline around a WordPiece vocabulary (what `BertTokenizerFast` builds).

    BertNormalizer cleans control characters, pads CJK characters with spaces and, when
    lower-casing, also strips accents (as the original uncased BERT did); BertPreTokenizer splits
    on whitespace and punctuation; the post-processor adds `[CLS]`/`[SEP]` with type ids 0/1.
    """
    # All five, at once: checking only these three here (the others in `WordPieceTokenizer`) made a
    # vocab.txt lacking e.g. [UNK] and [PAD] fail twice, one token each time.
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise ValueError(f"vocabulary lacks the special token(s) {', '.join(missing)}")
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token=UNK, max_input_chars_per_word=100))
    tokenizer.normalizer = _bert_normalizer(lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix=CONTINUATION_PREFIX)
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
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
        raw = _count_raw_characters(path)
        for char, count in raw.items():
            for normalized in normalizer.normalize_str(char):
                if not normalized.isspace():
                    counts[normalized] += count
        if "\x00" in raw:  # before the empty test: the normaliser deletes NULs, so a file of only
            raise _nul_error(path)  # NULs (a zeroed or binary file) was called "empty", line unsaid
        if not counts:
            raise DataError(path, 0, "file is empty: no text to train a vocabulary on")
        total.update(counts)
    return total


def _nul_error(path: Path) -> DataError:
    """The DataError at a file's first NUL byte, refused as the pre-training corpus reader refuses
    it (`nul_byte`): the BERT normaliser deletes it without a space, so "Re<NUL>eve" was counted,
    and learned, as "reeve", and the vocabulary stage completed on a corpus the next stage rejected.
    """
    line, line_start = 1, 0  # characters of the current line in earlier blocks (a line longer than one)
    for index, text in enumerate(_read_text_blocks(path)):  # blocks of whole lines, as counted
        if index == 0:  # columns after a UTF-8 BOM, as `read_text` (the corpus reader) counts them
            text = text.removeprefix("\ufeff")
        nul = text.find("\x00")
        if nul >= 0:
            return DataError(path, line + text.count("\n", 0, nul), nul_byte(_column(text, nul, "\n", line_start)))
        line += text.count("\n")
        line_start = _line_start_after(text, "\n", line_start)
    return DataError(path, 0, nul_byte(0))  # pragma: no cover - the file changed since it was counted


def _column(block: str | bytes, index: int, newline: str | bytes, line_start: int) -> int:
    """1-based column of `block[index]`; `line_start` is how much of its line came in earlier blocks.

    A block is cut inside a line only when the line is longer than `_READ_BLOCK_BYTES` (a corpus
    without line breaks, as text8 is): counted from the block's start, a bad byte 5 MB into such a
    line was reported at a column of at most 4 MiB, a place in the line that holds nothing wrong.
    """
    before = block.rfind(newline, 0, index)
    return index - before if before >= 0 else line_start + index + 1


def _line_start_after(block: str | bytes, newline: str | bytes, line_start: int) -> int:
    """`line_start` for the block after `block`: its characters (or bytes) after its last newline."""
    last = block.rfind(newline)
    return len(block) - last - 1 if last >= 0 else line_start + len(block)


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
    line, line_start = 1, 0  # bytes of the current line in earlier blocks (see `_column`)
    pending = b""
    try:
        with path.open("rb") as stream:
            while block := stream.read(_READ_BLOCK_BYTES):
                data = pending + block
                cut = data.rfind(b"\n") + 1 or _utf8_boundary(data)
                pending, data = data[cut:], data[:cut]
                if data:
                    yield _decode(data, path, line, line_start)
                    line += data.count(b"\n")
                    line_start = _line_start_after(data, b"\n", line_start)
        if pending:
            yield _decode(pending, path, line, line_start)
    except OSError as error:
        raise read_error(path, error) from None


def _utf8_boundary(data: bytes) -> int:
    """The last index in `data` where a UTF-8 character starts (skipping continuation bytes)."""
    cut = len(data)
    while cut > 0 and len(data) - cut < 4 and data[cut - 1] & 0xC0 == 0x80:
        cut -= 1
    return cut - 1 if cut > 0 and data[cut - 1] >= 0xC0 else len(data)


def _decode(data: bytes, path: Path, first_line: int, line_start: int) -> str:
    """The block's text; a bad byte is reported as every text reader does (`not_utf8`: line,
    byte column, and "gzip-compressed; decompress it first" for a `corpus.txt.gz`). The block
    starts `line_start` bytes into line `first_line`."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = first_line + data[: error.start].count(b"\n")
        column = _column(data, error.start, b"\n", line_start)
        raise DataError(path, line, not_utf8(path, data[error.start], column)) from None


def _select_alphabet(counts: Counter[str], limit: int, exclude: set[str]) -> list[str]:
    """The `limit` most frequent characters (ties: lower code point first), sorted by code point."""
    ranked = sorted((c for c in counts if c not in exclude), key=lambda c: (-counts[c], c))
    return sorted(ranked[:limit])


def _can_continue_word(char: str, normalizer: normalizers.BertNormalizer) -> bool:
    """Whether `char` of the normalised text can follow the first character of a word.

    BertNormalizer surrounds CJK ideographs with spaces and BertPreTokenizer splits punctuation
    into one-character words, so `##` forms of those could never be used. The pipeline itself is
    asked: Python's tables (BERT's CJK ranges, `unicodedata`'s punctuation) disagreed with the Rust
    library's on 362 characters (it pads CJK Extension E from U+2B920, not U+2B820, and its Unicode
    tables are older, e.g. U+061D). For one the library keeps inside words, the trainer then added
    the missing `##` form itself, in hash-map order: another vocabulary in every process.
    """
    return len(_PRE_TOKENIZER.pre_tokenize_str(normalizer.normalize_str(f"a{char}a"))) == 1


_PRE_TOKENIZER = pre_tokenizers.BertPreTokenizer()

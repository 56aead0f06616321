"""Word and character vocabularies, word normalisation, pre-trained vectors.

Following the original code: word embeddings are looked up by a normalised key (PTB escapes
undone, lower-cased, digits -> 0), while the char-CNN reads the word as written (escapes undone),
so capitalisation still reaches the model through characters. Every sentence is wrapped in
<start> ... <end> tokens, which get their own embeddings and a <missing> character.

The vocabulary is built from the data a run learns from (the README explains the choice): words
of the labeled training sets (after `labeled_fraction`), the most frequent words of the unlabeled
corpus in modes that train on it, and optionally the first words of a vectors file. Order is
deterministic (count, then string), so a re-run builds the same ids.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from xfer.core.errors import DataError, UserError
from xfer.core.textfile import CARRIAGE_RETURN, stream_lines

WORD_SPECIALS = ("<pad>", "<unk>", "<start>", "<end>", "<removed>")
PAD, UNK, START, END, REMOVED = range(5)
CHAR_SPECIALS = ("<pad>", "<unk>", "<bow>", "<eow>", "<missing>")
CHAR_PAD, CHAR_UNK, BOW, EOW, MISSING = range(5)

_PTB = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]"}
_DIGIT = re.compile(r"\d")


def surface(word: str) -> str:
    """The word as the char-CNN reads it: PTB bracket escapes and backslash escapes undone."""
    return _PTB.get(word) or word.replace("\\/", "/").replace("\\*", "*")


def embedding_key(word: str, lowercase: bool = True) -> str:
    """The key of a word's embedding: surface form, lower-cased, every digit 0 (original code)."""
    text = surface(word)
    return _DIGIT.sub("0", text.lower() if lowercase else text)


@dataclass
class Vocab:
    """Word keys and characters with ids; specials first.

    `word_id` looks words up among the entries after the specials only: a word of the data that
    is written like a special (web text and code hold `<pad>`, PTB's language-model text `<unk>`,
    HTML-like tokens `<start>`) is an ordinary word, with an id of its own when it is in the
    vocabulary (so `words` may hold its key twice: as the special and as that word). It used to
    take the special's id: `<pad>` the zero, never-trained padding embedding, `<start>` the
    sentence marker, `<removed>` the embedding of the views' removed words. Saved vocabularies
    load with the same ids: they never held such a word (it was skipped as already present).
    Characters need no such care: the char-CNN reads single characters, which no special is."""

    words: list[str]
    chars: list[str]
    lowercase: bool = True
    word_index: dict[str, int] = field(init=False, repr=False)
    char_index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        start = len(WORD_SPECIALS)
        self.word_index = {w: i for i, w in enumerate(self.words[start:], start=start)}
        self.char_index = {c: i for i, c in enumerate(self.chars)}
        if len(self.word_index) != len(self.words[start:]) or len(self.char_index) != len(self.chars):
            raise ValueError("vocabulary entries must be unique")

    def word_id(self, word: str) -> int:
        return self.word_index.get(embedding_key(word, self.lowercase), UNK)

    def char_ids(self, word: str, max_chars: int) -> list[int]:
        """<bow> c1 ... ck <eow> with k <= max_chars (longer words keep their first characters)."""
        get = self.char_index.get
        return [BOW, *(get(c, CHAR_UNK) for c in surface(word)[:max_chars]), EOW]

    def to_json(self) -> dict:
        return {"words": self.words, "chars": self.chars, "lowercase": self.lowercase}

    @classmethod
    def from_json(cls, data: dict) -> Vocab:
        return cls(list(data["words"]), list(data["chars"]), bool(data["lowercase"]))

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), ensure_ascii=False) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Vocab:
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))


def _ranked(counts: Counter[str]) -> list[str]:
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def build_vocab(
    labeled_words: Iterable[str],
    unlabeled_counts: Counter[str] | None,
    *,
    lowercase: bool,
    min_count: int,
    unlabeled_words: int,
    char_min_count: int,
    vector_words: Iterable[str] = (),
) -> Vocab:
    """Words: labeled words seen `min_count` times, then the `unlabeled_words` most frequent
    unlabeled ones, then the vector words; characters of all of them (by count)."""
    labeled = Counter(labeled_words)
    keys: Counter[str] = Counter()
    chars: Counter[str] = Counter()
    for word, count in labeled.items():
        keys[embedding_key(word, lowercase)] += count
        for c in surface(word):
            chars[c] += count
    words = list(WORD_SPECIALS)
    seen: set[str] = set()  # data words only: one written like a special is a word (see `Vocab`)
    for key in _ranked(keys):
        if keys[key] >= min_count and key not in seen:
            words.append(key)
            seen.add(key)
    if unlabeled_counts:
        unlabeled_keys: Counter[str] = Counter()
        for word, count in unlabeled_counts.items():
            unlabeled_keys[embedding_key(word, lowercase)] += count
            for c in surface(word):
                chars[c] += count
        added = 0
        for key in _ranked(unlabeled_keys):
            if added >= unlabeled_words:
                break
            if key not in seen:
                words.append(key)
                seen.add(key)
                added += 1
    for word in vector_words:
        key = embedding_key(word, lowercase)
        if key not in seen:
            words.append(key)
            seen.add(key)
    char_list = list(CHAR_SPECIALS) + [c for c in _ranked(chars) if chars[c] >= char_min_count]
    return Vocab(words, char_list, lowercase)


def check_limits(vocab: Vocab, labeled_words: Iterable[str], min_count: int, char_min_count: int) -> None:
    """Refuse `vocab.min_count` / `vocab.char_min_count` values that leave no word / character: every
    word was then <unk> (a zero vector by default) or every character the char-CNN's <unk>, and the
    model trained on the rest without a word said."""
    if len(vocab.words) > len(WORD_SPECIALS) and len(vocab.chars) > len(CHAR_SPECIALS):
        return
    if len(vocab.words) == len(WORD_SPECIALS):
        keys = Counter(embedding_key(w, vocab.lowercase) for w in labeled_words)
        raise UserError(
            f"vocab.min_count {min_count} leaves no word in the vocabulary (the most frequent labeled word is "
            f"seen {max(keys.values(), default=0)} times, and no unlabeled or vectors words are added): every word "
            "would be <unk>; lower vocab.min_count"
        )
    raise UserError(
        f"vocab.char_min_count {char_min_count} leaves no character in the vocabulary: the char-CNN would read "
        "only <unk>; lower vocab.char_min_count"
    )


def check_vector_coverage(
    path: Path, vectors: dict[str, np.ndarray], labeled_words: Iterable[str], lowercase: bool
) -> None:
    """Refuse a vectors file that has no vector for any labeled word (another language, another
    normalisation, a file of something else): every labeled word started random, as without the
    file, and nothing said so. Likewise lower-cased vectors (GloVe 6B, a `cvt.vectors` file given
    by its path) under `vocab.lowercase: false` (`check_cased_keys`)."""
    keys = {embedding_key(w, lowercase) for w in labeled_words}
    if not lowercase:
        check_cased_keys(path, vectors, keys)
    if keys and not any(embedding_key(w, lowercase) in keys for w in vectors):
        sample = next(iter(vectors), None)  # none at all with vectors_limit 0
        such = f" (its words are such as {sample!r})" if sample is not None else ""
        raise DataError(
            path,
            0,
            f"vocab.vectors: none of the {len(keys)} labeled words (e.g. {sorted(keys)[0]!r}) has a vector in this "
            f"file{such}: vectors of another language or normalisation?",
        )


def check_cased_keys(path: Path, vectors: dict[str, np.ndarray], keys: set[str]) -> None:
    """Refuse vectors of lower-cased words for a cased vocabulary (`keys`, the labeled words'
    keys under `vocab.lowercase: false`): no word read from the file has a capital letter, and
    capitalised labeled words have their vector under the lower-cased key only. Each of them
    ("Paris", "The", every sentence's first word) silently started random while the run read as
    one with pre-trained vectors; the recipe check covers a `cvt.vectors` stage of the recipe
    only, not a file named by its path."""
    if any(w != w.lower() for w in vectors):
        return  # a cased file: capitalised words are looked up as written
    found = {embedding_key(w, lowercase=False) for w in vectors}
    lost = sorted(k for k in keys if k != k.lower() and k.lower() in found)
    if lost:
        raise DataError(
            path,
            0,
            f"vocab.vectors: none of the {len(vectors)} words read from this file has a capital letter, and "
            f"vocab.lowercase is false: {len(lost)} capitalised labeled words (e.g. {lost[0]!r}) would start without "
            f"the vector of their lower-cased form ({lost[0].lower()!r}); set vocab.lowercase: true, or give "
            "vectors of cased words",
        )


def read_vectors(
    path: Path, dim: int, limit: int | None, keep: Callable[[str], bool] | None = None
) -> dict[str, np.ndarray]:
    """Word -> vector (float32, as the embedding takes it) from a GloVe (`word v1 ... vd`) or word2vec
    text file (first line `count dim`), in file order. Kept as lists of Python floats, the default
    100k vectors of 300 numbers took ~1 GB and GloVe 840B with `vectors_limit: null` ~20 GB; float32
    rows take an eighth, with the same values (the embedding rounded to float32 when copying them).

    Every line must end with `dim` finite numbers, fields separated by single spaces; a malformed
    line (or a NaN/inf value, which would silently poison training) is a DataError naming file and
    line. The word is everything before them, spaces included: GloVe 840B has a few such entries
    ("at name@domain.com"); they are kept, and never match a whitespace-split word. The first
    occurrence of a word wins. `limit` keeps the first N words (files are ordered by frequency,
    so these are the frequent ones); after them, only the words `keep` accepts are kept (the
    words a vocabulary has anyway, which must not lose their vectors to the limit), and reading
    stops at the limit when there is no `keep`. A word2vec header's count is checked when the file
    is read to its end: fewer lines than it says is a truncated download or copy, which used to be
    read as the whole file."""
    vectors: dict[str, np.ndarray] = {}
    seen_vector = False
    header_count: int | None = None
    vector_lines = 0
    for number, line in _vector_lines(path):
        full = limit is not None and len(vectors) >= limit
        if full and keep is None:
            return vectors  # `limit: 0` keeps nothing (it used to keep the first word)
        vector_lines += number > 1 and bool(line.strip())  # compared with a word2vec header's count
        if full and not keep(line.split(" ", 1)[0]):  # type: ignore[misc]
            seen_vector = seen_vector or bool(line.strip())  # not "no vectors in file": none was wanted
            continue  # past the limit, not wanted: skipped unparsed (GloVe has 400k-2M lines); a wanted
            # word never holds a space, so a word whose first token is unwanted is unwanted too
        parts = line.rstrip().split(" ")
        header = _word2vec_header(line) if number == 1 else None
        if header is not None and header != dim:  # its lines were then refused one by one, from line 2
            raise DataError(path, 1, f"the word2vec header gives {header}-dimensional vectors, word_dim is {dim}")
        if header is not None:
            header_count = int(line.split(" ", 1)[0])
            continue
        if not line.strip():
            continue
        if "\t" in line.rstrip():
            raise DataError(path, number, "a tab: fields (the word and its numbers) are separated by single spaces")
        if "\r" in line:  # CR-only endings made the whole file one line: one "word" of every line but
            # the last, holding the last line's vector, and every other vector silently lost
            raise DataError(path, number, CARRIAGE_RETURN.format(column=line.index("\r") + 1))
        if "" in parts:
            raise DataError(path, number, "two spaces in a row: fields are separated by single spaces")
        if len(parts) < dim + 1 or (len(parts) > dim + 1 and _is_number(parts[-dim - 1])):
            raise DataError(
                path, number, f"expected a word and {dim} numbers (word_dim), found {len(parts) - 1} fields"
            )
        try:
            values = [float(x) for x in parts[-dim:]]
        except ValueError:
            raise DataError(
                path, number, f"expected a word and {dim} numbers (word_dim); the last {dim} fields are not all numbers"
            ) from None
        if not all(math.isfinite(v) for v in values):
            raise DataError(path, number, "vector values must be finite (found NaN or infinity)")
        seen_vector = True
        word = " ".join(parts[:-dim])
        if (not full or (keep is not None and keep(word))) and word not in vectors:
            vectors[word] = _float32_row(path, number, values)  # only rows kept: a file may hold millions
    if not seen_vector:
        raise DataError(path, 1, "no vectors in file")
    if header_count is not None and header_count != vector_lines:
        raise DataError(
            path,
            1,
            f"the word2vec header announces {header_count} vectors, the file holds {vector_lines} lines of vectors: "
            "a truncated download or copy? (a file whose header is wrong reads as GloVe without its first line)",
        )
    return vectors


def _float32_row(path: Path, number: int, values: list[float]) -> np.ndarray:
    """The row as float32, refused when a value is beyond float32's range (|x| > 3.4e38): finite as
    a Python float, it became infinity in the cast (with a RuntimeWarning at most), and the
    embedding it was copied into poisoned training as a NaN/inf in the file would have."""
    with np.errstate(over="ignore"):
        row = np.array(values, dtype=np.float32)
    if not np.isfinite(row).all():
        big = next(v for v, x in zip(values, row.tolist(), strict=True) if not math.isfinite(x))
        raise DataError(
            path, number, f"vector values must be finite: {big:g} is beyond the float32 range of the embeddings"
        )
    return row


def _word2vec_header(line: str) -> int | None:
    """The dimension a word2vec header line (`count dim`) gives, or None for any other line.
    `isdecimal`, not `isdigit`: superscripts such as "²" are digits that `int` refuses (a bare
    ValueError from a first line "¹ ²")."""
    parts = line.rstrip().split(" ")
    return int(parts[1]) if len(parts) == 2 and all(p.isdecimal() for p in parts) else None


def _vector_lines(path: Path) -> Iterator[tuple[int, str]]:
    """`stream_lines`, saying what a binary word2vec file is: its header is text, the rest is not
    (it was reported as bytes that are not UTF-8 at line 2, and nothing more)."""
    header = False
    try:
        for number, line in stream_lines(path):
            header = header or (number == 1 and _word2vec_header(line) is not None)
            yield number, line
    except DataError as err:
        if header and err.line == 2 and err.key == "encoding":
            raise DataError(
                path,
                2,
                "binary data after a word2vec header: a binary word2vec file? vocab.vectors reads the text format "
                "(gensim: save_word2vec_format(..., binary=False))",
            ) from None
        raise


def _is_number(field: str) -> bool:
    """Whether a field parses as a number: more than `dim` of them means the file has another dimension."""
    try:
        float(field)
    except ValueError:
        return False
    return True

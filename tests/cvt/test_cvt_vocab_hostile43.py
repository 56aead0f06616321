"""The CVT vocabulary and word vectors against hostile data: words of the data written like the
vocabulary's specials (`<pad>`, `<start>`, `<removed>`), lower-cased vectors read into a cased
vocabulary, and vector values that are finite numbers but not float32 ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xfer.core.errors import DataError
from xfer.cvt.data import Featurizer
from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
from xfer.cvt.vocab import (
    END,
    PAD,
    REMOVED,
    START,
    UNK,
    WORD_SPECIALS,
    Vocab,
    build_vocab,
    check_vector_coverage,
    read_vectors,
)
from xfer.testing import make_host, run_recipe_file, write_recipe

CHUNK = "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}"
SPECIAL_IDS = set(range(len(WORD_SPECIALS)))


def vocab_of(words: list[str], lowercase: bool = True, vector_words: tuple[str, ...] = ()) -> Vocab:
    return build_vocab(
        words,
        None,
        lowercase=lowercase,
        min_count=1,
        unlabeled_words=0,
        char_min_count=1,
        vector_words=vector_words,
    )


def test_a_data_word_written_like_a_special_is_a_word_of_its_own() -> None:
    """`<pad>` in web text or code took the padding id (a zero, never-trained embedding),
    `<start>` the sentence marker's and `<REMOVED>` (lower-cased) the removed-word views' own."""
    vocab = vocab_of(["<pad>", "<pad>", "<start>", "<REMOVED>", "x"])
    ids = {w: vocab.word_id(w) for w in ("<pad>", "<start>", "<REMOVED>", "<removed>", "x")}
    assert not set(ids.values()) & SPECIAL_IDS, ids
    assert vocab.words[ids["<pad>"]] == "<pad>" and vocab.words[ids["<start>"]] == "<start>"
    assert ids["<REMOVED>"] == ids["<removed>"]  # lower-cased like any word
    assert vocab.words[: len(WORD_SPECIALS)] == list(WORD_SPECIALS)  # the specials keep their ids
    assert vocab.word_id("<end>") == UNK != END  # not in the vocabulary: unknown, not the end marker
    assert vocab_of(["<pad>"], vector_words=("<start>",)).word_id("<start>") not in SPECIAL_IDS


def test_the_featurizer_gives_a_literal_pad_its_word_id() -> None:
    vocab = vocab_of(["a", "<pad>", "b"])
    words = Featurizer(vocab, 10).inputs([["a", "<pad>", "b"]])["words"][0].tolist()
    assert words[0] == START and words[-1] == END
    assert PAD not in words and REMOVED not in words and words[2] == vocab.words.index("<pad>", len(WORD_SPECIALS))


def test_a_saved_vocabulary_loads_with_the_same_ids() -> None:
    """vocab.json written before the change (specials first, then the data keys) keeps every id."""
    saved = {"words": [*WORD_SPECIALS, "the", "dog", "paris"], "chars": ["<pad>", "<unk>", "x"], "lowercase": True}
    vocab = Vocab.from_json(saved)
    assert [vocab.word_id(w) for w in ("the", "dog", "Paris", "cat")] == [5, 6, 7, UNK]
    assert Vocab.from_json(vocab.to_json()).words == saved["words"]
    with pytest.raises(ValueError, match="vocabulary entries must be unique"):
        Vocab.from_json({**saved, "words": [*WORD_SPECIALS, "the", "the"]})


def write_vectors(path: Path, words: list[str], dim: int = 16) -> Path:
    path.write_text("".join(f"{w} " + " ".join(["0.1"] * dim) + "\n" for w in words), encoding="utf-8")
    return path


def test_lower_cased_vectors_under_a_cased_vocabulary_are_refused(tmp_path: Path) -> None:
    """GloVe 6B (or a cvt.vectors file given by its path) with `vocab.lowercase: false`: every
    capitalised word ("Paris", "Bob") started random, and the run went on as one with vectors."""
    write_tiny_data(tmp_path)
    write_vectors(tmp_path / "glove.txt", ["the", "a", "dog", "sees", "bob", "mary", "paris", "london", "oslo"])
    extra = "    vocab: {vectors: glove.txt, lowercase: false}"
    recipe = write_recipe(tmp_path, tiny_cvt_recipe(CHUNK, mode="supervised", steps=2, extra=extra))
    with pytest.raises(DataError, match=r"glove\.txt: vocab\.vectors: none of the 9 words .* capital letter, and "):
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))


def test_cased_vocabularies_take_cased_vectors_and_lower_casing_ones_any(tmp_path: Path) -> None:
    labeled = ["The", "dog", "sees", "Paris", "1990"]
    lower = read_vectors(write_vectors(tmp_path / "lower.txt", ["the", "dog", "paris", "1990"], 2), 2, None)
    cased = read_vectors(write_vectors(tmp_path / "cased.txt", ["The", "dog", "Paris", "the"], 2), 2, None)
    with pytest.raises(DataError, match=r"lower\.txt: .*2 capitalised labeled words \(e\.g\. 'Paris'\) .*'paris'"):
        check_vector_coverage(tmp_path / "lower.txt", lower, labeled, lowercase=False)
    check_vector_coverage(tmp_path / "cased.txt", cased, labeled, lowercase=False)
    check_vector_coverage(tmp_path / "lower.txt", lower, labeled, lowercase=True)
    check_vector_coverage(tmp_path / "cased.txt", cased, labeled, lowercase=True)
    # no capitalised labeled word: nothing is lost
    check_vector_coverage(tmp_path / "lower.txt", lower, ["dog", "sees"], lowercase=False)


@pytest.mark.parametrize("value", ["1e39", "-3.5e38"])
def test_a_value_beyond_float32_is_refused_at_its_line(tmp_path: Path, value: str) -> None:
    """Finite as a Python float, it became infinity in the float32 row: a poisoned embedding."""
    path = tmp_path / "big.txt"
    path.write_text(f"the 0.1 0.2\ndog 0.3 {value}\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"big\.txt:2: vector values must be finite: {value[:2]}.*float32"):
        read_vectors(path, 2, None)
    path.write_text("the 0.1 0.2\ndog 0.3 3.4e38\n", encoding="utf-8")  # the largest float32 still reads
    assert np.isfinite(read_vectors(path, 2, None)["dog"]).all()

"""Streams, corpus reading, subsets, vocabulary and the raw-text tokenizer."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch

from xfer.core.errors import DataError
from xfer.cvt.data import Featurizer, PooledStream, UnlabeledCorpus, UnlabeledStream, subsample
from xfer.cvt.text import JOINER, detokenize, tokenize, tokenize_joined
from xfer.cvt.vocab import BOW, EOW, MISSING, START, UNK, build_vocab, embedding_key, read_vectors, surface

# --- labeled stream ----------------------------------------------------------------------------


def _as_lists(vectors):
    """read_vectors' float32 rows as lists, rounded back to the file's decimals."""
    return {word: [round(x, 6) for x in vector.tolist()] for word, vector in vectors.items()}


def take(stream, steps: int) -> list:
    return [stream.next_step() for _ in range(steps)]


def test_pooled_stream_batches_are_full_sorted_within_pools_and_cover_each_epoch():
    items = list(range(50))
    lengths = [(7 * i) % 13 for i in items]
    stream = PooledStream(items, lengths, 5, list, seed=3, pool_batches=2)
    steps = take(stream, 10)  # one epoch of 50 items = 5 pools of 10
    assert all(len(s) == 1 and len(s[0]) == 5 for s in steps)
    assert sorted(i for s in steps for i in s[0]) == items
    for a, b in zip(steps[::2], steps[1::2], strict=True):  # the two batches of a pool split it by length
        assert max(lengths[i] for i in a[0]) <= min(lengths[i] for i in b[0]) or max(lengths[i] for i in b[0]) <= min(
            lengths[i] for i in a[0]
        )
    assert stream.steps_per_epoch == 10
    crossing = PooledStream(items, lengths, 5, list, seed=3, pool_batches=4)  # pools span epoch ends
    counts = Counter(i for s in take(crossing, 40) for i in s[0])  # 4 epochs = 10 pools
    assert set(counts.values()) == {4} and len(counts) == 50


def test_pooled_stream_resumes_exactly_and_slices_ranks():
    items = list(range(37))
    lengths = [i % 5 for i in items]
    stream = PooledStream(items, lengths, 4, list, seed=1, pool_batches=3)
    take(stream, 7)
    state = stream.state_dict()
    expected = take(stream, 20)
    again = PooledStream(items, lengths, 4, list, seed=1, pool_batches=3)
    again.load_state_dict(state)
    assert take(again, 20) == expected
    ranks = [PooledStream(items, lengths, 4, list, seed=1, pool_batches=3, rank=r, world_size=2) for r in (0, 1)]
    single = PooledStream(items, lengths, 4, list, seed=1, pool_batches=3)
    for _ in range(12):
        whole = single.next_step()[0]
        parts = [r.next_step()[0] for r in ranks]
        assert sorted(parts[0] + parts[1]) == sorted(whole) and len(parts[0]) == len(parts[1]) == 2
    with pytest.raises(ValueError, match="data changed"):
        PooledStream(items[:-1], lengths[:-1], 4, list, seed=1).load_state_dict(state)


def test_subsample_is_reproducible_and_ordered():
    a, b = subsample(1000, 0.1, 0), subsample(1000, 0.1, 0)
    assert a == b and len(a) == 100 and a == sorted(a)
    assert subsample(1000, 0.1, 1) != a
    assert subsample(7, 0.01, 0) and len(subsample(7, 0.01, 0)) == 1
    assert subsample(5, 1.0, 0) == list(range(5))


# --- unlabeled corpus ----------------------------------------------------------------------------


def write_corpus(folder: Path) -> list[Path]:
    a = folder / "a.txt"
    a.write_text("one two three\n\nfour five\n" + " ".join(f"w{i}" for i in range(25)) + "\nsix\n", encoding="utf-8")
    b = folder / "b.txt"
    b.write_text("".join(f"s{i} t{i}\n" for i in range(23)), encoding="utf-8")
    return [a, b]


def test_corpus_cuts_long_lines_and_skips_only_blank_lines(tmp_path):
    corpus = UnlabeledCorpus(write_corpus(tmp_path), chunk_lines=4, max_length=10, tokenizer="whitespace")
    sentences = [s for i in range(len(corpus.chunks)) for s in corpus.read(i)]
    assert sentences[:2] == [["one", "two", "three"], ["four", "five"]]
    assert [len(s) for s in sentences[2:5]] == [10, 10, 5]  # 25 words: cut, never dropped
    assert sum(len(s) for s in sentences) == 3 + 2 + 25 + 1 + 46
    assert Counter(corpus.words())["w3"] == 1 and sum(1 for _ in corpus.words(lines=1)) == 3


def test_corpus_bad_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine line\nanother\nbroken \xff here\n")
    with pytest.raises(DataError, match=r"bad\.txt:3: not valid UTF-8"):  # when indexed, before any chunk is read
        UnlabeledCorpus([path], chunk_lines=2, max_length=10, tokenizer="whitespace")


@pytest.mark.parametrize("tokenizer", ["whitespace", "punct"])
def test_corpus_drops_a_byte_order_mark(tmp_path, tokenizer):
    """At the start of a file, as every other reader: it was read into the first word ("\\ufeffThe", or a word of its own
    with `punct`), a vocabulary entry and a sentence no other reader of the same file sees."""
    path = tmp_path / "bom.txt"
    path.write_bytes("\ufeffThe dog .\nA cat .\n".encode())
    corpus = UnlabeledCorpus([path], chunk_lines=1, max_length=10, tokenizer=tokenizer)
    assert list(corpus.words()) == ["The", "dog", ".", "A", "cat", "."]


def test_corpus_refuses_cr_only_line_endings(tmp_path):
    """They made the file one line, cut into max_length pieces across sentence ends (and PPMI windows
    reached across sentences); CRLF endings read as LF."""
    path = tmp_path / "mac.txt"
    path.write_bytes(b"one two\nthree four\rfive six\r")
    with pytest.raises(DataError, match=r"mac\.txt:2: carriage return \(CR\) inside the line at column 11"):
        UnlabeledCorpus([path], chunk_lines=4, max_length=10, tokenizer="whitespace")
    path.write_bytes(b"one two\r\nthree\r\n")
    assert list(UnlabeledCorpus([path], 4, 10, "whitespace").words()) == ["one", "two", "three"]


def test_compressed_files_are_named_as_such(tmp_path):
    """A gzip-compressed corpus or GloVe file was reported as "not valid UTF-8 (byte 0x8b)" alone."""
    import gzip

    corpus, vectors = tmp_path / "u.txt.gz", tmp_path / "glove.txt.gz"
    corpus.write_bytes(gzip.compress(b"the dog runs .\n"))
    vectors.write_bytes(gzip.compress(b"the 0.1 0.2\n"))
    with pytest.raises(
        DataError, match=r"u\.txt\.gz:1: not valid UTF-8 .*: the file is gzip-compressed; decompress it"
    ):
        list(UnlabeledCorpus([corpus], 4, 10, "whitespace").words())
    with pytest.raises(DataError, match=r"glove\.txt\.gz:1: encoding: not valid UTF-8 .*gzip-compressed"):
        read_vectors(vectors, 2, None)


def test_unlabeled_stream_visits_every_sentence_once_per_epoch_and_resumes(tmp_path):
    corpus = UnlabeledCorpus(write_corpus(tmp_path), chunk_lines=4, max_length=10, tokenizer="whitespace")
    total = sum(len(corpus.read(i)) for i in range(len(corpus.chunks)))  # 29 sentences
    stream = UnlabeledStream(corpus, 2, list, seed=5, pool_batches=3)
    first_epoch = [tuple(s) for _ in range(total // 2) for s in stream.next_step()[0]]
    everything = [tuple(s) for i in range(len(corpus.chunks)) for s in corpus.read(i)]
    assert Counter(first_epoch) <= Counter(everything) and len(first_epoch) == 2 * (total // 2)
    state = stream.state_dict()
    expected = take(stream, 40)  # crosses epochs; batches stay full
    assert all(len(s[0]) == 2 for s in expected)
    again = UnlabeledStream(corpus, 2, list, seed=5, pool_batches=3)
    again.load_state_dict(state)
    assert take(again, 40) == expected
    other = UnlabeledStream(corpus, 2, list, seed=6, pool_batches=3)
    assert take(other, 10) != take(UnlabeledStream(corpus, 2, list, seed=5, pool_batches=3), 10)


def test_unlabeled_stream_without_words_is_an_error(tmp_path):
    path = tmp_path / "blank.txt"
    path.write_text("\n\n  \n", encoding="utf-8")
    stream = UnlabeledStream(UnlabeledCorpus([path], 2, 10, "whitespace"), 2, list, seed=0)
    with pytest.raises(DataError, match="no words"):
        stream.next_step()


# --- vocabulary and inputs -------------------------------------------------------------------------


def test_normalisation_and_vocab_order():
    assert surface("-LRB-") == "(" and surface("1\\/2") == "1/2"
    assert embedding_key("Paris1990") == "paris0000" and embedding_key("Paris", lowercase=False) == "Paris"
    vocab = build_vocab(
        ["b", "a", "b", "C"],
        Counter({"zz": 5, "b": 1, "yy": 2}),
        lowercase=True,
        min_count=1,
        unlabeled_words=1,
        char_min_count=1,
    )
    assert vocab.words[5:] == ["b", "a", "c", "zz"]  # labeled by count then string, then top unlabeled
    again = build_vocab(
        ["b", "a", "b", "C"],
        Counter({"zz": 5, "b": 1, "yy": 2}),
        lowercase=True,
        min_count=1,
        unlabeled_words=1,
        char_min_count=1,
    )
    assert again.words == vocab.words and again.chars == vocab.chars
    assert vocab.word_id("B") == vocab.words.index("b") and vocab.word_id("never") == UNK


def test_featurizer_positions_and_char_rows():
    vocab = build_vocab(["Big", "dog"], None, lowercase=True, min_count=1, unlabeled_words=0, char_min_count=1)
    batch = Featurizer(vocab, max_word_chars=2).inputs([["Big", "dog", "Big"], ["dog"]])
    assert batch["words"][0].tolist() == [START, vocab.word_id("big"), vocab.word_id("dog"), vocab.word_id("big"), 3]
    assert batch["lengths"].tolist() == [5, 3]
    slots = batch["slots"][0].tolist()
    assert slots[0] == slots[4] == 1 and slots[1] == slots[3] != slots[2]  # one char row per word type
    assert batch["chars"][1].tolist()[:3] == [BOW, MISSING, EOW]
    row = batch["chars"][slots[1]].tolist()
    assert row[:4] == [BOW, vocab.char_index["B"], vocab.char_index["i"], EOW]  # cut to 2 chars, case kept


def test_vectors_file_formats_and_errors(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text("the 0.1 0.2\ndog 0.3 0.4\nthe 9 9\n", encoding="utf-8")
    assert _as_lists(read_vectors(glove, 2, None)) == {"the": [0.1, 0.2], "dog": [0.3, 0.4]}
    w2v = tmp_path / "w2v.txt"
    w2v.write_text("2 2\ncat 1 2 \nbat 3 4\n", encoding="utf-8")  # word2vec writes a trailing space
    assert list(read_vectors(w2v, 2, 1)) == ["cat"]
    bad = tmp_path / "bad.txt"
    bad.write_text("the 0.1 0.2\ndog 0.3\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.txt:2: expected a word and 2 numbers"):
        read_vectors(bad, 2, None)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"the 0.1 0.2 0.3\n", r"wide\.txt:1: expected a word and 2 numbers \(word_dim\), found 3 fields"),
        (b"the 0.1 0.2\ndog 0.3 nan\n", r"wide\.txt:2: vector values must be finite"),
        (b"the 0.1 0.2\ndog 0.3 -inf\n", r"wide\.txt:2: vector values must be finite"),
        (b"the 0.1 0.2\nd\xf6g 0.3 0.4\n", r"wide\.txt:2: encoding: not valid UTF-8 \(byte 0xf6 at column 2\)"),
        (b"the 0.1 0.2\ndog 0.3 x\n", r"wide\.txt:2: .*the last 2 fields are not all numbers"),
        (b"", r"wide\.txt:1: no vectors in file"),
    ],
)
def test_bad_vectors_files_are_refused_at_their_line(tmp_path, content: bytes, message: str) -> None:
    path = tmp_path / "wide.txt"
    path.write_bytes(content)
    with pytest.raises(DataError, match=message):
        read_vectors(path, 2, None)


def test_vectors_limit_keeps_the_first_words_and_every_word_asked_for(tmp_path) -> None:
    """The limit cut rare labeled words off their vectors; `limit: 0` kept one word."""
    path = tmp_path / "glove.txt"
    path.write_text("the 0.1 0.2\nof 0.3 0.4\nparis 0.5 0.6\nrome 0.7 0.8\n", encoding="utf-8")
    assert list(read_vectors(path, 2, 1)) == ["the"]
    assert _as_lists(read_vectors(path, 2, 0)) == {}
    kept = read_vectors(path, 2, 1, keep=lambda word: word == "rome")
    assert _as_lists(kept) == {"the": [0.1, 0.2], "rome": [0.7, 0.8]}
    # lines past the limit that are not wanted are skipped unparsed, as before `keep` (a file cut
    # short past the limit still reads)
    path.write_text("the 0.1 0.2\nof 0.3 0.4\nparis 0.5\n", encoding="utf-8")
    assert _as_lists(read_vectors(path, 2, 1, keep=lambda word: word == "rome")) == {"the": [0.1, 0.2]}


@pytest.mark.parametrize(
    ("line", "message"),
    [("river  0.1 0.2", "two spaces in a row"), ("river\t0.1\t0.2", "a tab: fields .* single spaces")],
)
def test_vectors_fields_are_separated_by_single_spaces(tmp_path, line: str, message: str) -> None:
    """A double space after the word stored the vector under 'river ' (never matched)."""
    path = tmp_path / "glove.txt"
    path.write_text(f"the 0.1 0.2\n{line}\n", encoding="utf-8")
    with pytest.raises(DataError, match=f"glove.txt:2: {message}"):
        read_vectors(path, 2, None)


def test_vectors_whose_word_has_spaces_are_kept_whole(tmp_path) -> None:
    """GloVe 840B has entries such as "at name@domain.com": the word is all before the numbers."""
    path = tmp_path / "glove.txt"
    path.write_text("\ufeffthe 0.1 0.2\r\n. . . 0.3 0.4\nat name@domain.com 0.5 0.6\n", encoding="utf-8")
    assert _as_lists(read_vectors(path, 2, None)) == {
        "the": [0.1, 0.2],
        ". . .": [0.3, 0.4],
        "at name@domain.com": [0.5, 0.6],
    }


@pytest.mark.parametrize(
    "text",
    [
        "Two young, White males are outside near many bushes.",
        'Ein Mann (mit Hut) sagt: "Hallo!" -- z.B. 3,5 kg.',
        "don't stop   the   music",
    ],
)
def test_joined_tokens_detokenize_exactly(text):
    tokens = tokenize_joined(text)
    assert detokenize(tokens) == " ".join(text.split())
    assert [t.removeprefix(JOINER) for t in tokens] == tokenize(text)


def test_vectors_are_kept_as_float32_rows(tmp_path):
    """As lists of Python floats the default 100k GloVe vectors took ~1 GB (GloVe 840B without a limit
    ~20 GB); float32 rows hold the same values the embedding takes, in an eighth of the memory."""
    import numpy as np

    path = tmp_path / "v.txt"
    path.write_text("the 0.1 0.2\ndog 0.3 0.4\n")
    vectors = read_vectors(path, 2, None)
    assert all(isinstance(v, np.ndarray) and v.dtype == np.float32 and v.shape == (2,) for v in vectors.values())
    assert vectors["dog"].tolist() == torch.tensor([0.3, 0.4]).tolist()  # as torch rounded the floats

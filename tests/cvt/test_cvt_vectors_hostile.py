"""Hostile review of CVT word vectors, vocabularies and the sequence-to-sequence views: each test
pins a defect that was found and fixed (it failed before the fix)."""

from __future__ import annotations

import random
import string
import tracemalloc

import numpy as np
import pytest

from xfer.cvt import vectors as vectors_module
from xfer.cvt.vectors import train_vectors

# --- cvt.vectors: memory ---------------------------------------------------------------------------

TWO_LETTER_WORDS = [a + b for a in string.ascii_lowercase[:8] for b in string.ascii_lowercase[:8]]


def _random_lines(lines: int, seed: int = 0):
    """A generator, as the stage reads its corpus: only what train_vectors keeps stays in memory."""
    rng = random.Random(seed)
    for _ in range(lines):
        yield rng.choices(TWO_LETTER_WORDS, k=20)


def test_the_corpus_is_kept_as_ids_not_as_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The corpus was kept as lists of key strings (a new string object and a list slot per token),
    then as a list of Python ints: ~125 bytes a token at its peak, so a 100M-token corpus needed
    ~12 GB; int32 ids (and co-occurrences counted a block at a time) take ~20."""
    monkeypatch.setattr(vectors_module, "BLOCK_TOKENS", 1 << 12, raising=False)
    options = dict(dim=4, words=100, min_count=1, window=2, lowercase=True, std=0.5, seed=0)
    train_vectors(_random_lines(10), **options)  # scipy's imports, outside the measurement
    tokens = 10_000 * 20
    tracemalloc.start()
    try:
        words, vectors = train_vectors(_random_lines(10_000), **options)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(words) == len(TWO_LETTER_WORDS) and vectors.shape == (64, 4)
    assert peak / tokens < 40, f"{peak / tokens:.0f} bytes per corpus token"


def test_counting_a_block_at_a_time_gives_the_same_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks smaller than a line, and than the window: the same pairs, the same sums, the same file;
    no window reaches across a line (a pair only ever seen across lines gets no count)."""
    rng = random.Random(1)
    corpus = [rng.choices(TWO_LETTER_WORDS, k=rng.randint(0, 12)) for _ in range(300)]
    options = dict(dim=6, words=100, min_count=2, window=3, lowercase=True, std=0.5, seed=2)
    whole = train_vectors(corpus, **options)
    monkeypatch.setattr(vectors_module, "BLOCK_TOKENS", 2)
    blocked = train_vectors(corpus, **options)
    assert whole[0] == blocked[0]
    np.testing.assert_allclose(whole[1], blocked[1], atol=1e-6)
    ids = np.array([0, 1, -1, -1, 1, 0, 2], dtype=np.intc)  # lines "a b" and "b a c", window 2
    counts = vectors_module.cooccurrences(ids, 3, 2, block=1).toarray()
    expected = np.array([[0, 2, 1], [2, 0, 0.5], [1, 0.5, 0]])  # a-b twice at distance 1, b-c at 2
    np.testing.assert_allclose(counts, expected)


# --- text: scripts written without spaces ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        (
            "我爱北京。我们去北京吧！",
            ["我", "￭爱", "￭北", "￭京", "￭。", "￭我", "￭们", "￭去", "￭北", "￭京", "￭吧", "￭！"],
        ),
        ("私は学生です", ["私", "￭は", "￭学", "￭生", "￭で", "￭す"]),
        ("รักไทย มาก", ["รั", "￭ก", "￭ไ", "￭ท", "￭ย", "ม", "￭า", "￭ก"]),  # a vowel sign stays on its letter
        ("iPhone手机 café", ["iPhone", "￭手", "￭机", "café"]),
        ("don't  stop_now", ["don", "￭'", "￭t", "stop_now"]),  # spaced scripts: as before
    ],
)
def test_text_without_spaces_is_cut_into_characters(text: str, tokens: list[str]) -> None:
    """`\\w` runs cut Chinese, Japanese or Thai at punctuation only: "我爱北京" was one token, so a
    translation target in those languages had next to no token seen target_min_count times (it
    trained on <unk>s) and a source was mostly <unk> words. Each character is now a token, as BLEU's
    `char` tokenizer counts them, joined so that it detokenises exactly."""
    from xfer.cvt.text import detokenize, tokenize, tokenize_joined

    assert tokenize_joined(text) == tokens
    assert tokenize(text) == [t.removeprefix("￭") for t in tokens]
    assert detokenize(tokenize_joined(text)) == " ".join(text.split())


# --- seq2seq: the `full` decoder -----------------------------------------------------------------


def test_seq2seq_can_add_a_full_view_decoder_without_attention_dropout() -> None:
    """Thesis 4.3.1 adds to every task's auxiliary modules one that sees the whole input, with
    dropout (tagging and parsing have it as `full`); a seq2seq module had no such decoder. It has
    its own attention and softmax, the shared embeddings and LSTM, the students' dropout and no
    attention dropout: its loss does not move with that rate."""
    import torch

    from tests.cvt.conftest import Kit
    from xfer.cvt.objective import Settings
    from xfer.cvt.seq2seq import Seq2seqModule

    k = Kit()
    k.encoder.train()
    vocab = ["<pad>", "<unk>", "<s>", "</s>", *[f"w{i}" for i in range(12)]]
    views = ["attention_dropout", "future", "full"]
    module = Seq2seqModule(k.encoder.full_size, 2 * k.encoder.layer2.output_size, vocab, k.sizes, views).train()
    assert sorted(module.aux) == sorted(views)
    heads = [module.primary, *module.aux.values()]
    assert len({id(p) for head in heads for p in head.parameters()}) == sum(len(list(h.parameters())) for h in heads)
    sentences = [["bob", "saw", "the", "dog", "near", "a", "big", "house", "."], ["mary", "runs", ";", "it"]]
    batch = k.batch(sentences)
    targets = {
        "dec_in": torch.tensor([[2, 5, 6, 7, 8, 9], [2, 10, 11, 12, 0, 0]]),
        "dec_out": torch.tensor([[5, 6, 7, 8, 9, 3], [10, 11, 12, 3, 0, 0]]),
    }
    losses = {}
    for rate in (0.0, 0.9):
        torch.manual_seed(0)
        states = k.encoder(batch, 0.2)
        out = module.student_losses(states, batch, targets, Settings(attention_dropout=rate), primary_only=False)
        assert [name for name, _, _ in out] == views
        losses[rate] = {name: (loss.item(), int(count)) for name, loss, count in out}
    assert losses[0.0]["full"] == losses[0.9]["full"] and losses[0.0]["full"][1] == 10
    assert losses[0.0]["attention_dropout"] != losses[0.9]["attention_dropout"]


def test_a_word_starting_with_a_byte_order_mark_does_not_make_the_vectors_file_unreadable(tmp_path) -> None:
    """Wikipedia text has words starting with U+FEFF ("°N \\ufeff/ \\ufeff47.650" in coordinates;
    `tokenize: punct` makes U+FEFF a word of its own). Its vector line starts with U+FEFF, which
    the reader takes for a byte-order mark: the stage succeeded and cvt.train refused its file
    ("byte-order mark ... concatenated files?"), or, on line 1, read the word without it."""
    from xfer.cvt.vectors import write_vectors
    from xfer.cvt.vocab import read_vectors

    rng = random.Random(3)
    corpus = []
    for _ in range(300):
        corpus.append(["\ufeff47.650", "\ufeff9.317", *rng.choices(TWO_LETTER_WORDS[:20], k=6)])  # most frequent
        corpus.append(rng.choices(TWO_LETTER_WORDS[:20], k=8))
    words, vectors = train_vectors(corpus, dim=4, words=100, min_count=1, window=2, lowercase=True, std=0.5, seed=0)
    path = tmp_path / "vectors.txt"
    write_vectors(path, words, vectors)
    read = read_vectors(path, 4, None)
    assert list(read) == words and len(words) == 20
    assert not any(w.startswith("\ufeff") for w in words)

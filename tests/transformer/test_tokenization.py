"""WordPiece training, the tokenizer wrapper and `xfer vocab train`.

Everything runs on small generated corpora (no network); parity checks against HF
`transformers.BertTokenizerFast` are skipped when transformers is not installed.
"""

from __future__ import annotations

import argparse
import pickle
import random
import shutil
from pathlib import Path

import pytest

from xfer.core.errors import DataError, UserError
from xfer.transformer import vocab_cli
from xfer.transformer.tokenization import (
    SPECIAL_TOKENS,
    WordAlignment,
    WordPieceTokenizer,
    train_wordpiece,
)

# fmt: off
WORDS = [
    "the", "a", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at",
    "from", "it", "an", "be", "this", "are", "which", "or", "has", "had", "tokenization",
    "tokenizer", "tokenize", "unbelievable", "believe", "running", "runner", "runs", "quickly",
    "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "transformer", "transfer", "learning",
    "electra", "discriminator", "generator", "sentence", "pair", "question", "answer", "context",
    "window", "stride", "alignment", "Café", "naïve", "résumé", "Zürich", "Ångström", "Paris",
    "London", "Berlin", "2024", "1999", "42", "3.14", "e-mail", "co-operate", "don't"
]
# fmt: on
PUNCTUATION = [".", ",", "!", "?", ";"]


def make_corpus(path: Path, lines: int, seed: int) -> Path:
    """Sentences of Zipf-distributed words (so some pairs tie in frequency, stressing determinism)."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]
    with path.open("w", encoding="utf-8") as stream:
        for _ in range(lines):
            words = rng.choices(WORDS, weights, k=rng.randint(4, 18))
            words = [w.capitalize() if rng.random() < 0.15 else w for w in words]
            stream.write(" ".join(words) + rng.choice(PUNCTUATION) + "\n")
        stream.write("東京 大阪 北京\n")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("corpus")
    return [make_corpus(root / "a.txt", 400, seed=1), make_corpus(root / "b.txt", 300, seed=2)]


@pytest.fixture(scope="module")
def tokenizer(corpus: list[Path]) -> WordPieceTokenizer:
    return WordPieceTokenizer.train(corpus, vocab_size=220)


@pytest.fixture(scope="module")
def saved_dir(tokenizer: WordPieceTokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tokenizer.save(tmp_path_factory.mktemp("saved"))


@pytest.fixture(scope="module")
def hf_tokenizer(saved_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """`BertTokenizerFast` built from our vocab.txt alone (not our tokenizer.json)."""
    transformers = pytest.importorskip("transformers")
    only_vocab = tmp_path_factory.mktemp("hf_vocab")
    shutil.copy(saved_dir / "vocab.txt", only_vocab / "vocab.txt")
    return transformers.BertTokenizerFast.from_pretrained(str(only_vocab), do_lower_case=True)


SHORT = "The quick brown fox."
LONG = " ".join(WORDS * 3)
PAIRS: list[tuple[str, str | None]] = [
    (SHORT, None),
    (LONG, None),
    ("", None),
    (SHORT, "Is it quick?"),
    ("Unbelievable tokenization!", LONG),
    (LONG, "short one"),
    (LONG, " ".join(reversed(WORDS * 2))),
    (LONG[: len(LONG) // 2], LONG),
    ("Café naïve RÉSUMÉ Zürich Ångström", "東京 and 北京, e-mail: don't"),
    ("control\x00chars\tand   spaces\u200b here", "unknown ☃ snowman ⚡"),
    ("a [MASK] token in text", "[SEP] literally"),
    ("", "only the second text has words in it, quite a few of them"),
    ("one two three four five six", "one two three four five six"),
]
STRATEGIES = ("longest_first", "only_first", "only_second")


def _ours_or_error(tok: WordPieceTokenizer, a: str, b: str | None, max_length: int, strategy: str):
    try:
        encoding = tok.encode_pair(a, b, max_length=max_length, truncation=strategy)  # type: ignore[arg-type]
    except ValueError:
        return "error"
    return encoding.input_ids, encoding.token_type_ids


def _hf_or_error(hf, a: str, b: str | None, max_length: int, strategy: str):
    try:
        out = hf(a, b, truncation=strategy, max_length=max_length)
    except Exception:  # tokenizers raises a bare Exception when the chosen text is too short
        return "error"
    return out["input_ids"], out["token_type_ids"]


# --- training --------------------------------------------------------------------------------


def test_trained_special_ids_are_fixed(tokenizer: WordPieceTokenizer, saved_dir: Path) -> None:
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (
        0,
        1,
        2,
        3,
        4,
    )
    lines = (saved_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert lines[:5] == list(SPECIAL_TOKENS)
    assert tokenizer.special_ids == frozenset(range(5))
    assert tokenizer.vocab_size == len(tokenizer.vocab) == len(lines) - 1


def test_extra_special_tokens_follow_in_order(corpus: list[Path]) -> None:
    trained = train_wordpiece(corpus, 200, special_tokens=(*SPECIAL_TOKENS, "[BOS]"))
    assert [trained.token_to_id(t) for t in (*SPECIAL_TOKENS, "[BOS]")] == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        train_wordpiece(corpus, 200, special_tokens=("[PAD]", "[UNK]", "[CLS]", "[SEP]"))


def test_training_is_deterministic(corpus: list[Path]) -> None:
    # Plain `tokenizers` training differs from run to run (huggingface/tokenizers#1794), also
    # within one process, so three in-process runs catch a regression.
    vocabs = [WordPieceTokenizer.train(corpus, vocab_size=220).vocab for _ in range(3)]
    assert vocabs[0] == vocabs[1] == vocabs[2]


def test_training_respects_size_and_min_frequency(corpus: list[Path]) -> None:
    small = WordPieceTokenizer.train(corpus, vocab_size=150)
    assert small.vocab_size == 150
    rare = WordPieceTokenizer.train(corpus, vocab_size=5000, min_frequency=10_000)
    assert rare.vocab_size < 150  # alphabet only: no pair is that frequent


def test_lowercasing(corpus: list[Path], tokenizer: WordPieceTokenizer) -> None:
    assert tokenizer.lowercase
    assert tokenizer.tokenize("THE Café RÉSUMÉ") == tokenizer.tokenize("the cafe resume")
    cased = WordPieceTokenizer.train(corpus, vocab_size=220, lowercase=False)
    assert not cased.lowercase
    assert any(t != t.lower() for t in cased.vocab)
    assert cased.tokenize("The") != cased.tokenize("the")
    assert "é" in "".join(cased.tokenize("Café"))


# --- pairs and truncation vs. HF -------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_pairs_and_truncation_match_hf(
    tokenizer: WordPieceTokenizer, hf_tokenizer, saved_dir: Path, strategy: str
) -> None:
    from_vocab = WordPieceTokenizer.from_file(saved_dir / "vocab.txt", lowercase=True)
    compared = 0
    for a, b in PAIRS:
        for max_length in (5, 9, 16, 40, 512):
            expected = _hf_or_error(hf_tokenizer, a, b, max_length, strategy)
            assert _ours_or_error(tokenizer, a, b, max_length, strategy) == expected, (a, b, max_length)
            assert _ours_or_error(from_vocab, a, b, max_length, strategy) == expected, (a, b, max_length)
            compared += expected != "error"
    assert compared >= 30


# (len a, len b) -> kept (a, b) for 7 pieces of room: the table of tokenizers' own unit test.
RUST_LONGEST_FIRST = {
    (0, 0): (0, 0), (0, 2): (0, 2), (0, 4): (0, 4), (0, 8): (0, 7),
    (2, 0): (2, 0), (2, 2): (2, 2), (2, 4): (2, 4), (2, 8): (2, 5),
    (4, 0): (4, 0), (4, 2): (4, 2), (4, 4): (3, 4), (4, 8): (3, 4),
    (8, 0): (7, 0), (8, 2): (5, 2), (8, 4): (4, 3), (8, 8): (3, 4),
}  # fmt: skip


def test_truncation_arithmetic(tokenizer: WordPieceTokenizer) -> None:
    """Runs without transformers: single-piece words make the segment lengths visible."""
    for (n_a, n_b), (keep_a, keep_b) in RUST_LONGEST_FIRST.items():
        if n_b == 0:  # an empty second text is a single sequence, as Google's run_classifier (test_tokenizer_hostile4)
            continue
        ids = tokenizer.encode_pair("a " * n_a, "a " * n_b, max_length=7 + 3).input_ids
        assert ids.index(tokenizer.sep_id) - 1 == keep_a and len(ids) - keep_a - 3 == keep_b, (n_a, n_b)
    assert tokenizer.encode_pair("a " * 2, "a " * 8, max_length=10, truncation="only_second").length == 10
    assert tokenizer.encode_pair("a " * 8, max_length=6).length == 6
    with pytest.raises(ValueError, match="only_first"):
        tokenizer.encode_pair("a " * 2, "a " * 8, max_length=10, truncation="only_first")
    with pytest.raises(ValueError, match="second text"):
        tokenizer.encode_pair("a " * 8, max_length=6, truncation="only_second")
    with pytest.raises(ValueError, match="max_length"):
        tokenizer.encode_pair("a", "b", max_length=2)


def test_pair_layout_and_batch(tokenizer: WordPieceTokenizer) -> None:
    encoding = tokenizer.encode_pair("quick fox", "lazy dog", max_length=64)
    ids, types = encoding.input_ids, encoding.token_type_ids
    first_sep = ids.index(tokenizer.sep_id)
    assert ids[0] == tokenizer.cls_id and ids[-1] == tokenizer.sep_id
    assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
    assert encoding.attention_mask == [1] * encoding.length
    texts_a = [a for a, _ in PAIRS]
    texts_b = [b or "" for _, b in PAIRS]
    batch = tokenizer.encode_pairs(texts_a, texts_b, max_length=24)
    assert batch == [tokenizer.encode_pair(a, b, max_length=24) for a, b in zip(texts_a, texts_b, strict=True)]
    assert all(e.length <= 24 for e in batch)
    with pytest.raises(ValueError, match="truncation"):
        tokenizer.encode_pair("a", "b", truncation="sideways")  # type: ignore[arg-type]


# --- loading and saving ----------------------------------------------------------------------


def test_save_load_round_trip(tokenizer: WordPieceTokenizer, saved_dir: Path) -> None:
    assert (saved_dir / "tokenizer.json").is_file()
    tokens = (saved_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert tokens == sorted(tokenizer.vocab, key=tokenizer.vocab.__getitem__)
    loaded = [
        WordPieceTokenizer.from_dir(saved_dir),
        WordPieceTokenizer.from_file(saved_dir / "vocab.txt"),  # casing inferred: uncased
        WordPieceTokenizer.from_file(saved_dir / "tokenizer.json"),
    ]
    texts = [a for a, _ in PAIRS]
    expected = tokenizer.encode_pairs(texts, max_length=64)
    for other in loaded:
        assert other.vocab == tokenizer.vocab
        assert other.lowercase
        assert other.encode_pairs(texts, max_length=64) == expected
        assert other.encode_words(WORDS, max_length=64) == tokenizer.encode_words(WORDS, max_length=64)
    restored = pickle.loads(pickle.dumps(tokenizer))
    assert restored.encode_pairs(texts, max_length=64) == expected


def _google_style_vocab(tokenizer: WordPieceTokenizer) -> list[str]:
    """Google's BERT/ELECTRA layout: [PAD], 99 unused, [UNK] [CLS] [SEP] [MASK], then the rest."""
    ordinary = [t for t in sorted(tokenizer.vocab, key=tokenizer.vocab.__getitem__) if t not in SPECIAL_TOKENS]
    return ["[PAD]", *(f"[unused{i}]" for i in range(99)), "[UNK]", "[CLS]", "[SEP]", "[MASK]", *ordinary]


def test_google_special_ids(tokenizer: WordPieceTokenizer, tmp_path: Path) -> None:
    (tmp_path / "vocab.txt").write_text("\n".join(_google_style_vocab(tokenizer)) + "\n", encoding="utf-8")
    google = WordPieceTokenizer.from_file(tmp_path / "vocab.txt")
    assert (google.pad_id, google.unk_id, google.cls_id, google.sep_id, google.mask_id) == (0, 100, 101, 102, 103)
    encoding = google.encode_pair("quick fox", "lazy ☃", max_length=32)
    assert encoding.input_ids[0] == 101 and encoding.input_ids[-1] == 102
    assert 100 in encoding.input_ids  # the snowman is unknown
    assert google.encode_words(["", "fox"]).input_ids[1] == 100
    google.save(tmp_path / "copy")
    assert WordPieceTokenizer.from_dir(tmp_path / "copy").vocab == google.vocab


def test_google_special_ids_match_hf(tokenizer: WordPieceTokenizer, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    (tmp_path / "vocab.txt").write_text("\n".join(_google_style_vocab(tokenizer)) + "\n", encoding="utf-8")
    google = WordPieceTokenizer.from_dir(tmp_path)
    hf = transformers.BertTokenizerFast.from_pretrained(str(tmp_path))
    for a, b in PAIRS:
        assert _ours_or_error(google, a, b, 20, "longest_first") == _hf_or_error(hf, a, b, 20, "longest_first")


def test_casing_from_config_and_inference(tokenizer: WordPieceTokenizer, tmp_path: Path) -> None:
    tokenizer.save(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": false}', encoding="utf-8")
    assert not WordPieceTokenizer.from_dir(tmp_path).lowercase
    assert WordPieceTokenizer.from_dir(tmp_path, lowercase=True).lowercase
    cased_vocab = tmp_path / "cased" / "vocab.txt"
    cased_vocab.parent.mkdir()
    cased_vocab.write_text("\n".join([*SPECIAL_TOKENS, "The", "Paris", "the", "##s"]) + "\n", encoding="utf-8")
    assert not WordPieceTokenizer.from_file(cased_vocab).lowercase
    assert WordPieceTokenizer.from_file(cased_vocab, lowercase=True).lowercase


def test_bad_vocab_files(tmp_path: Path) -> None:
    duplicate = tmp_path / "dup.txt"
    duplicate.write_text("\n".join([*SPECIAL_TOKENS, "a", "b", "a"]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"dup\.txt:8: duplicate token 'a'"):
        WordPieceTokenizer.from_file(duplicate)
    latin1 = tmp_path / "latin1_vocab.txt"
    latin1.write_bytes("\n".join([*SPECIAL_TOKENS, "caf\u00e9"]).encode("latin-1") + b"\n")
    with pytest.raises(DataError, match=r"latin1_vocab\.txt:6: encoding: not valid UTF-8 \(byte 0xe9"):
        WordPieceTokenizer.from_file(latin1)
    empty = tmp_path / "empty_vocab.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty_vocab\.txt: vocabulary is empty"):
        WordPieceTokenizer.from_file(empty)
    bom = tmp_path / "bom_vocab.txt"  # a BOM written by an editor must not become part of [PAD]
    bom.write_text("\ufeff" + "\n".join([*SPECIAL_TOKENS, "a"]) + "\n", encoding="utf-8")
    assert WordPieceTokenizer.from_file(bom).pad_id == 0
    no_mask = tmp_path / "no_mask.txt"
    no_mask.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"no_mask\.txt: .*\[MASK\]"):
        WordPieceTokenizer.from_file(no_mask)
    with pytest.raises(DataError, match=r"no tokenizer\.json or vocab\.txt"):
        WordPieceTokenizer.from_dir(tmp_path / "nowhere")
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(DataError, match=r"tokenizer\.json: not a valid tokenizer\.json"):
        WordPieceTokenizer.from_file(broken)


# --- word alignment --------------------------------------------------------------------------


def _pieces(tokenizer: WordPieceTokenizer, word: str) -> list[int]:
    ids = [tokenizer.vocab[t] for t in tokenizer.tokenize(word)]
    return ids or [tokenizer.unk_id]


def _check_alignment(tokenizer: WordPieceTokenizer, words: list[str], alignment: WordAlignment) -> None:
    """Every word starts where expected and its pieces are its own tokenization."""
    ids = alignment.input_ids
    assert ids[0] == tokenizer.cls_id and ids[-1] == tokenizer.sep_id
    ends = [*alignment.word_starts[1:], len(ids) - 1]
    for word, start, end in zip(words, alignment.word_starts, ends, strict=True):
        assert ids[start:end] == _pieces(tokenizer, word), word


def test_word_alignment(tokenizer: WordPieceTokenizer) -> None:
    words = ["Unbelievable", "tokenization", "\x00", "", "of", "Zürich", "☃", "don't", "3.14", "東京", "[MASK]"]
    alignment = tokenizer.encode_words(words, max_length=128)
    assert alignment.num_words == len(words) and alignment.truncated_words == 0 and alignment.first_word == 0
    assert alignment.word_starts[0] == 1
    assert all(a < b for a, b in zip(alignment.word_starts, alignment.word_starts[1:], strict=False))
    _check_alignment(tokenizer, words, alignment)
    assert alignment.input_ids[alignment.word_starts[2]] == tokenizer.unk_id  # control char -> [UNK]
    assert alignment.input_ids[alignment.word_starts[3]] == tokenizer.unk_id  # empty word -> [UNK]
    assert alignment.token_type_ids == [0] * alignment.length
    batch = tokenizer.encode_words_batch([words, [], ["fox"]], max_length=128)
    assert batch[0] == alignment
    assert batch[1] == WordAlignment([tokenizer.cls_id, tokenizer.sep_id], [], 0)


def test_word_alignment_matches_hf_word_ids(tokenizer: WordPieceTokenizer, hf_tokenizer) -> None:
    words = ["Unbelievable", "tokenization", "of", "Zürich", "don't", "3.14", "東京", "naïve"]
    word_ids = hf_tokenizer(words, is_split_into_words=True).word_ids()
    hf_starts = [word_ids.index(i) for i in range(len(words))]
    alignment = tokenizer.encode_words(words)
    assert alignment.word_starts == hf_starts
    assert alignment.input_ids == hf_tokenizer(words, is_split_into_words=True)["input_ids"]


def test_long_sentence_windows_cover_every_word_once(tokenizer: WordPieceTokenizer) -> None:
    words = (WORDS * 4)[: len(WORDS) * 4 - 3]
    max_length = 24
    first = tokenizer.encode_words(words, max_length=max_length)
    assert first.length <= max_length and first.truncated_words > 0
    assert first.num_words + first.truncated_words == len(words)
    windows = tokenizer.split_for_tagging(words, max_length=max_length)
    assert windows[0] == (0, first.num_words)
    covered = [i for start, end in windows for i in range(start, end)]
    assert covered == list(range(len(words)))
    encoded = tokenizer.encode_words_windows(words, max_length=max_length)
    assert [(a.first_word, a.first_word + a.num_words) for a in encoded] == windows
    for (start, end), alignment in zip(windows, encoded, strict=True):
        assert alignment.length <= max_length
        own = tokenizer.encode_words(words[start:end], max_length=max_length)
        assert own.truncated_words == 0 and own.input_ids == alignment.input_ids
        assert alignment.truncated_words == len(words) - end
        _check_alignment(tokenizer, words[start:end], alignment)
    assert tokenizer.split_for_tagging_batch([words, []], max_length=max_length) == [windows, [(0, 0)]]


def test_word_longer_than_window_keeps_its_start(tokenizer: WordPieceTokenizer) -> None:
    huge = "".join(["unbelievable"] * 8)  # < 100 chars: WordPiece splits it rather than [UNK]
    assert len(_pieces(tokenizer, huge)) > 10
    words = ["a", huge, "dog"]
    windows = tokenizer.split_for_tagging(words, max_length=10)
    assert windows == [(0, 1), (1, 2), (2, 3)]
    alignment = tokenizer.encode_words([huge], max_length=10)
    assert alignment.length == 10 and alignment.word_starts == [1] and alignment.truncated_words == 0
    with pytest.raises(ValueError, match="max_length"):
        tokenizer.encode_words(words, max_length=2)


# --- question answering ----------------------------------------------------------------------


def test_qa_doc_stride_windows(tokenizer: WordPieceTokenizer) -> None:
    rng = random.Random(3)
    before = " ".join(rng.choices(WORDS, k=60))
    after = " ".join(rng.choices(WORDS, k=60))
    answer_text = "Café Zürich résumé"
    context = f"{before} {answer_text} {after}"
    start_char = len(before) + 1
    answer = (start_char, start_char + len(answer_text))
    question = "where is the naïve tokenizer of the quick brown fox jumping over the lazy dog?"
    features = tokenizer.encode_qa(
        question, context, answer=answer, max_length=64, doc_stride=8, max_query_length=8, example_index=7
    )
    assert len(features) > 3
    containing = 0
    max_context_hits: dict[tuple[int, int], int] = {}
    for feature in features:
        assert feature.example_index == 7
        assert feature.length <= 64
        assert feature.token_type_ids.count(0) == 8 + 2  # [CLS] question(8) [SEP]
        assert feature.input_ids[0] == tokenizer.cls_id and feature.input_ids[-1] == tokenizer.sep_id
        assert all(o is None for o in feature.offsets[:10]) and feature.offsets[-1] is None
        context_offsets = [o for o in feature.offsets if o is not None]
        assert len(context_offsets) == feature.length - 11
        for offset, is_max in zip(feature.offsets, feature.token_is_max_context, strict=True):
            if offset is not None and is_max:
                max_context_hits[offset] = max_context_hits.get(offset, 0) + 1
        window = (context_offsets[0][0], context_offsets[-1][1])
        if window[0] <= answer[0] and answer[1] <= window[1]:
            containing += 1
            s, e = feature.start_position, feature.end_position
            assert 0 < s <= e
            assert context[feature.offsets[s][0] : feature.offsets[e][1]] == answer_text
        else:
            assert (feature.start_position, feature.end_position) == (0, 0)
    assert containing >= 2 and containing < len(features)
    # Every context token is scored by exactly one window.
    all_offsets = {o for f in features for o in f.offsets if o is not None}
    assert max_context_hits == dict.fromkeys(all_offsets, 1)


def test_qa_batch_and_edge_cases(tokenizer: WordPieceTokenizer) -> None:
    features = tokenizer.encode_qa_batch(
        ["who?", "what?"], ["the quick fox", ""], [(4, 9), None], max_length=32, first_example_index=10
    )
    assert [f.example_index for f in features] == [10, 11]
    first, empty = features
    assert first.offsets[first.start_position] == (4, 9)
    assert empty.input_ids == [tokenizer.cls_id, *empty.input_ids[1:-2], tokenizer.sep_id, tokenizer.sep_id]
    assert (empty.start_position, empty.end_position) == (0, 0)
    with pytest.raises(ValueError, match="answer span"):
        tokenizer.encode_qa("who?", "the fox", answer=(3, 99))
    with pytest.raises(ValueError, match="no room"):
        tokenizer.encode_qa("a b c d e f g h", "fox", max_length=8)


# --- errors in training input ----------------------------------------------------------------


def test_empty_or_unreadable_file_is_a_data_error(corpus: list[Path], tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty\.txt: file is empty"):
        train_wordpiece([corpus[0], empty], 200)
    blank = tmp_path / "blank.txt"
    blank.write_text("  \n\t\n\x00\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"blank\.txt:3: NUL byte at column 1"):
        train_wordpiece([blank], 200)
    with pytest.raises(DataError, match=r"missing\.txt: file not found"):
        train_wordpiece([tmp_path / "missing.txt"], 200)
    with pytest.raises(DataError, match="is a directory"):
        train_wordpiece([tmp_path], 200)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"fine line\nsecond line\ncaf\xe9\n")
    with pytest.raises(DataError, match=r"latin1\.txt:3: not valid UTF-8") as caught:
        train_wordpiece([latin1], 200)
    assert caught.value.path == str(latin1) and caught.value.line == 3


# --- CLI -------------------------------------------------------------------------------------


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="xfer vocab")
    vocab_cli.configure(parser)
    return parser.parse_args(argv)


def test_cli_trains_and_writes_files(corpus: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "vocab_out"
    pattern = str(corpus[0].parent / "*.txt")
    args = _parse(["train", pattern, "--size", "220", "--out", str(out)])
    assert vocab_cli.run(args) == 0
    printed = capsys.readouterr().out
    assert str(out) in printed and "220" in printed
    loaded = WordPieceTokenizer.from_dir(out)
    assert loaded.vocab_size == 220 and loaded.lowercase
    assert (out / "vocab.txt").is_file() and (out / "tokenizer.json").is_file()
    # Same corpus, same vocabulary as the library call.
    assert loaded.vocab == WordPieceTokenizer.train(corpus, vocab_size=220).vocab

    cased = _parse(
        ["train", str(corpus[0]), "--size", "200", "--out", str(tmp_path / "cased"), "--cased", "--min-frequency", "3"]
    )
    assert cased.cased and cased.min_frequency == 3
    assert vocab_cli.run(cased) == 0
    assert not WordPieceTokenizer.from_dir(tmp_path / "cased").lowercase


def test_cli_errors(corpus: list[Path], tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    with pytest.raises(UserError, match="matches no file"):
        vocab_cli.run(_parse(["train", str(tmp_path / "nothing-*.txt"), "--size", "100", "--out", out]))
    with pytest.raises(UserError, match="no such file"):
        vocab_cli.run(_parse(["train", str(tmp_path / "absent.txt"), "--size", "100", "--out", out]))
    with pytest.raises(UserError, match="vocab_size"):
        vocab_cli.run(_parse(["train", str(corpus[0]), "--size", "3", "--out", out]))
    with pytest.raises(SystemExit):
        _parse(["train", str(corpus[0]), "--out", out])  # --size is required
    with pytest.raises(SystemExit):
        _parse([])  # a vocab sub-command is required
    assert vocab_cli.expand_files([str(corpus[0]), str(corpus[0].parent / "*.txt")]) == corpus


def test_hf_folders_tokenize_in_transformers_as_in_xfer(tmp_path: Path) -> None:
    """An HF export held vocab.txt and tokenizer.json only: transformers' Electra tokenizer then
    lower-cased a cased vocabulary's input (["j", "##a", "##ck"] for xfer's ["J", "##a", "##ck"]) and
    had no length limit, so `truncation=True` passed inputs longer than the position embeddings."""
    transformers = pytest.importorskip("transformers")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "J", "##a", "##ck", "j", "runs", "the", "Dog", "dog"]
    cased = WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(tokens)}, lowercase=False)
    cased.save_hf(tmp_path, model_max_length=8)
    theirs = transformers.ElectraTokenizerFast.from_pretrained(tmp_path)
    text = "Jack the Dog runs"
    assert theirs.tokenize(text) == ["J", "##a", "##ck", "the", "Dog", "runs"]
    assert theirs(text)["input_ids"] == cased.encode_pair(text, None, max_length=64).input_ids
    assert len(theirs(f"{text} runs runs runs", truncation=True)["input_ids"]) == 8
    assert WordPieceTokenizer.from_dir(tmp_path).lowercase is False  # xfer reads the folder back alike

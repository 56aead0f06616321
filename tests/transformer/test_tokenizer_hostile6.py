"""Sixth round of hostile inputs for WordPiece training and tokenization: bad bytes deep inside a
line longer than a read block, and the BERT pipeline against Hugging Face's on text built to break
it (accents, CJK, emoji, zero-width joiners, combining marks, right-to-left scripts, words over 100
characters, special tokens spelt in the text)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.core.textfile import read_text
from xfer.transformer.tokenization import WordPieceTokenizer, train_wordpiece
from xfer.transformer.tokenization import training as training_module

HOSTILE = [
    "Café naïve RÉSUMÉ Ångström",
    "e\u0301 a\u0308 combining marks, o\u0336verstrike",
    "東京は日本の首都です 中文",
    "emoji 😀 👍🏽 family 👨\u200d👩\u200d👧 and x\u200d\u200dy",
    "مرحبا بالعالم שלום עולם",
    "x" * 101,
    "y" * 100,
    "the [MASK] and [mask] and [SEP]x [PAD] [UNK] [CLS]a",
    "tab\there\u00a0nbsp ctrl\x07bell zero\u200bwidth \ufeffbom soft\u00adhyphen",
    "$5 + 3 = 8 ^_^ `q` ~ «x» „y“ ##ab ab##cd",
    "Ｆｕｌｌｗｉｄｔｈ ﬁ İstanbul ß ẞ ǅ Ⅻ 𝔘𝔫𝔦",
    "line\u2028sep next\x85line",
]


@pytest.mark.parametrize(
    ("bad", "expected"),
    # four 2-byte characters and 40 ASCII ones before it: byte column 49, character column 45
    [(b"\xff", "not valid UTF-8 (byte 0xff at column 49)"), (b"\x00", "NUL byte at column 45")],
)
def test_error_column_in_a_line_longer_than_a_read_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: bytes, expected: str
) -> None:
    """Files are read in blocks of whole lines, cut inside a line only when it is longer than a block
    (4 MiB; a corpus without line breaks, as text8 is). The column of a bad byte or a NUL was counted
    from the block's start, so one 5 MB into such a line was put at a column below 4 MiB, where
    nothing is wrong. Blocks of 16 bytes stand in for 4 MiB; the corpus reader's column is the truth."""
    monkeypatch.setattr(training_module, "_READ_BLOCK_BYTES", 16)
    path = tmp_path / "long.txt"
    path.write_bytes(("\ufefffirst line\n" + "é" * 4).encode() + b"abcdefghij" * 4 + bad + b" tail\nnext\n")
    with pytest.raises(DataError) as ours:
        train_wordpiece([path], 200)
    with pytest.raises(DataError) as reader:
        read_text(path)
    assert ours.value.line == reader.value.line == 2
    assert ours.value.message == reader.value.message
    assert expected in ours.value.message


@pytest.fixture(scope="module")
def vocab_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    """A cased and an uncased vocabulary trained on the hostile text, saved (vocab.txt included)."""
    root = tmp_path_factory.mktemp("hostile6")
    corpus = root / "corpus.txt"
    corpus.write_text(
        "\n".join(HOSTILE * 3 + ["the quick brown fox jumps over the lazy dog"] * 20) + "\n", encoding="utf-8"
    )
    return {
        lowercase: WordPieceTokenizer.train([corpus], 300, lowercase=lowercase).save(root / f"lowercase-{lowercase}")
        for lowercase in (True, False)
    }


@pytest.mark.parametrize("lowercase", [True, False])
def test_ids_match_hugging_face_bert_tokenizers_on_hostile_text(
    vocab_folders: dict[bool, Path], lowercase: bool
) -> None:
    """The same vocab.txt through HF `tokenizers`' BertWordPieceTokenizer and `transformers`' Python
    BertTokenizer (the transcription of Google's BasicTokenizer + WordpieceTokenizer) gives the same
    ids as xfer, with the same casing and accent settings, on every hostile text."""
    from tokenizers.implementations import BertWordPieceTokenizer

    transformers = pytest.importorskip("transformers")

    vocab = vocab_folders[lowercase] / "vocab.txt"
    ours = WordPieceTokenizer.from_dir(vocab_folders[lowercase])
    fast = BertWordPieceTokenizer(str(vocab), lowercase=lowercase, strip_accents=lowercase)
    slow = transformers.BertTokenizer(str(vocab), do_lower_case=lowercase, strip_accents=lowercase)
    for text in HOSTILE:
        expected = fast.encode(text).ids
        assert ours.encode_pair(text).input_ids == expected == slow(text)["input_ids"], text
    assert ours.tokenize("x" * 101) == ["[UNK]"]  # max_input_chars_per_word = 100, as BERT
    assert ours.tokenize("y" * 100) != ["[UNK]"]


def test_special_tokens_spelt_in_text_are_kept_whole_as_in_hugging_face(vocab_folders: dict[bool, Path]) -> None:
    """What the class docstring says: an exact spelling of a special token in text is that token (HF's
    fast and slow BERT tokenizers; Google's BasicTokenizer would split it); another casing is text."""
    ours = WordPieceTokenizer.from_dir(vocab_folders[True])
    pieces = ours.tokenize("the [MASK] and [mask] [SEP]")
    assert pieces[:2] == ["the", "[MASK]"] and pieces[-1] == "[SEP]"
    assert "[" in pieces and "[MASK]" not in pieces[2:]

"""Fourth round of hostile inputs for tokenization: empty second texts, NUL-only training files and
vocabularies lacking several special tokens must give the reference encoding or one error that
names every problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.core.textfile import nul_byte, read_text
from xfer.transformer.tokenization import WordPieceTokenizer, train_wordpiece
from xfer.transformer.tokenization.windows import _truncated_lengths

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "fox", "dog", "a", "runs"]


def _tokenizer(tokens: list[str] = TOKENS) -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(tokens)})


@pytest.mark.parametrize("empty", ["", "   ", "\x00\u200b"])
def test_second_text_without_pieces_is_a_single_sequence(empty: str) -> None:
    """Google's BERT and ELECTRA (`if tokens_b:`) encode an empty second text (QQP has empty
    questions) as `[CLS] a [SEP]`; xfer gave `[CLS] a [SEP] [SEP]` with a type-1 [SEP], and the
    sequence objective, which passes "" for the single-text examples of a batch holding pairs, thus
    encoded the same example two ways depending on its batch."""
    tok = _tokenizer()
    single = tok.encode_pair("the fox runs")
    assert single.input_ids == [tok.cls_id, 5, 6, 9, tok.sep_id]
    assert tok.encode_pair("the fox runs", empty) == single
    mixed = tok.encode_pairs(["the fox runs", "a dog"], [empty, "the fox"])
    assert mixed[0] == single
    assert mixed[1].input_ids == [tok.cls_id, 8, 7, tok.sep_id, 5, 6, tok.sep_id]
    assert mixed[1].token_type_ids == [0, 0, 0, 0, 1, 1, 1]
    # truncation then has the single sequence's budget: max_length - 2 pieces of text a
    assert tok.encode_pair("the fox runs a dog", empty, max_length=5).input_ids == [tok.cls_id, 5, 6, 9, tok.sep_id]


def test_empty_first_text_with_a_second_stays_a_pair() -> None:
    """Only an empty *second* text collapses (as in Google's BERT); "" then "b" is still a pair."""
    tok = _tokenizer()
    encoding = tok.encode_pair("", "the dog")
    assert encoding.input_ids == [tok.cls_id, tok.sep_id, 5, 7, tok.sep_id]
    assert encoding.token_type_ids == [0, 0, 1, 1, 1]


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (b"\x00\x00\x00\n", r"nul\.txt:1: NUL byte at column 1"),
        (b"  \n\t \x00\n\x00", r"nul\.txt:2: NUL byte at column 3"),
    ],
)
def test_training_file_of_only_nul_bytes_is_reported_as_nul_not_empty(tmp_path: Path, data: bytes, where: str) -> None:
    """The normaliser deletes NUL bytes, so a file holding only NULs (and whitespace), a zeroed or
    binary file, was "file is empty" without a line; it is the NUL error every text reader gives."""
    path = tmp_path / "nul.txt"
    path.write_bytes(data)
    with pytest.raises(DataError, match=where) as caught:
        train_wordpiece([path], 200)
    assert "empty" not in str(caught.value)


@pytest.mark.parametrize("missing", [("[UNK]", "[PAD]"), ("[SEP]", "[MASK]"), ("[PAD]", "[UNK]", "[CLS]", "[MASK]")])
def test_every_missing_special_token_is_named_at_once(tmp_path: Path, missing: tuple[str, ...]) -> None:
    """`build_bert_tokenizer` checked [UNK], [CLS] and [SEP] only, so a vocab.txt lacking [UNK] and
    [PAD] named [UNK] alone, and after that was fixed failed again on [PAD]."""
    path = tmp_path / "vocab.txt"
    path.write_text("".join(f"{t}\n" for t in TOKENS if t not in missing), encoding="utf-8")
    with pytest.raises(DataError, match=r"vocab\.txt: vocabulary lacks the special token\(s\) ") as caught:
        WordPieceTokenizer.from_file(path)
    named = str(caught.value).rsplit(") ", 1)[1].split(", ")
    assert sorted(named) == sorted(missing)
    with pytest.raises(DataError) as in_memory:
        _tokenizer([t for t in TOKENS if t not in missing])
    assert all(token in str(in_memory.value) for token in missing)


# tokenizers' own table for 7 pieces of room, (len a, len b) -> kept (a, b): `_truncated_lengths` still
# follows it for a second text of 0 pieces, which `encode_pair` now encodes as a single sequence.
RUST_LONGEST_FIRST = {
    (0, 0): (0, 0), (0, 2): (0, 2), (0, 4): (0, 4), (0, 8): (0, 7),
    (2, 0): (2, 0), (2, 2): (2, 2), (2, 4): (2, 4), (2, 8): (2, 5),
    (4, 0): (4, 0), (4, 2): (4, 2), (4, 4): (3, 4), (4, 8): (3, 4),
    (8, 0): (7, 0), (8, 2): (5, 2), (8, 4): (4, 3), (8, 8): (3, 4),
}  # fmt: skip


def test_pair_truncation_follows_the_tokenizers_table() -> None:
    """Pairs with two non-empty texts are cut as `tokenizers` cuts them; an empty second text gets the
    single sequence's room (max_length - 2), as in Google's BERT."""
    tok = _tokenizer()
    for (n_a, n_b), (keep_a, keep_b) in RUST_LONGEST_FIRST.items():
        assert _truncated_lengths(n_a, n_b, 7, "longest_first") == (keep_a, keep_b), (n_a, n_b)
        ids = tok.encode_pair("a " * n_a, "a " * n_b, max_length=7 + 3).input_ids
        if n_b:
            assert ids.index(tok.sep_id) - 1 == keep_a and len(ids) - keep_a - 3 == keep_b, (n_a, n_b)
        else:
            assert ids == [tok.cls_id, *[8] * min(n_a, 8), tok.sep_id], n_a


def test_nul_column_after_a_bom_is_the_corpus_readers(tmp_path: Path) -> None:
    """The column of a NUL on a file's first line counted a UTF-8 byte-order mark, which `read_text`
    (the pre-training corpus reader) drops: the same byte was at column 4 here and 3 there."""
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfab\x00cd\n")
    with pytest.raises(DataError) as ours:
        train_wordpiece([path], 200)
    with pytest.raises(DataError) as reader:
        read_text(path)
    assert (
        (ours.value.line, ours.value.message)
        == (reader.value.line, reader.value.message)
        == (
            1,
            nul_byte(3),
        )
    )

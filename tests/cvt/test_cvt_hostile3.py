"""Hostile review of CVT's text processing and sequence-to-sequence decoding, third round:
the reversible tokenizer's joiner, beam search limits and outputs, vocabulary and vectors files."""

from __future__ import annotations

import pytest

# --- the reversible tokenizer ----------------------------------------------------------------------


def _as_lists(vectors):
    """read_vectors' float32 rows as lists, rounded back to the file's decimals."""
    return {word: [round(x, 6) for x in vector.tolist()] for word, vector in vectors.items()}


@pytest.mark.parametrize(
    "text",
    [
        "a ￭ b",  # the joiner character between spaces
        "Hund ￭",  # last: it was dropped ("Hund")
        "￭ a",  # first: it was dropped (" a")
        "￭",
        "a￭b",  # written against its neighbours
        "a￭ ￭b",
        "a ￭\u0301 b",  # with a combining mark of its own: the accent moved onto "a"
        "x ￭￭ y",
    ],
)
def test_a_joiner_character_in_the_text_survives_the_round_trip(text: str) -> None:
    """`tokenize_joined` marks attached tokens with a leading `￭`; a `￭` written in the text after a
    space became the token "￭", which `detokenize` read as an empty attached token and dropped: a
    target (or reference) with it could never be produced."""
    from xfer.cvt.text import detokenize, tokenize_joined

    assert detokenize(tokenize_joined(text)) == " ".join(text.split())


# --- beam search ---------------------------------------------------------------------------------

SOURCES = [["bob", "saw", "the", "dog", "near", "a", "big", "house", "."], ["mary", "runs"]]
TARGET_VOCAB = ["<pad>", "<unk>", "<s>", "</s>", *[f"w{i}" for i in range(12)]]


def seq2seq_module(eos_bias: float = 0.0):
    """A tiny untrained decoder over TARGET_VOCAB (and the Kit's encoder); `eos_bias` is added to
    the </s> logit (very negative: the decoder never wants to stop)."""
    import torch

    from tests.cvt.conftest import Kit
    from xfer.cvt.seq2seq import EOS, Seq2seqModule

    k = Kit()
    torch.manual_seed(0)
    module = Seq2seqModule(k.encoder.full_size, 2 * k.encoder.layer2.output_size, TARGET_VOCAB, k.sizes, []).eval()
    with torch.no_grad():
        module.primary.output.bias[EOS] += eos_bias
    return k, module


def test_an_unk_output_is_written_as_the_text_unk_spaced_off_its_neighbours() -> None:
    """What `predict` documents: an emitted <unk> stays visible in the output as one "<unk>" word
    (sacrebleu's 13a then counts three tokens for it), never glued to a neighbour nor dropped."""
    import torch

    from xfer.cvt.objective import Settings
    from xfer.cvt.seq2seq import T_UNK

    k, module = seq2seq_module()
    with torch.no_grad():
        module.primary.output.bias[T_UNK] += 20.0
    outputs = module.predict(k.states(SOURCES), k.batch(SOURCES), Settings(beam_size=2, max_target_length=3))
    assert all(output and set(output.split(" ")) == {"<unk>"} for output in outputs), outputs


# --- vectors files -------------------------------------------------------------------------------


def test_a_first_line_of_superscript_digits_is_a_data_error_not_a_traceback(tmp_path) -> None:
    """The word2vec header test took "¹ ²" for `count dim` (`str.isdigit` accepts superscripts) and
    `int("²")` raised a bare ValueError, in the pre-flight and in the stage."""
    from xfer.core.errors import DataError
    from xfer.cvt.vocab import read_vectors

    path = tmp_path / "vectors.txt"
    path.write_text("¹ ²\nthe 0.1 0.2\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"vectors\.txt:1: expected a word and 2 numbers"):
        read_vectors(path, 2, None)
    with pytest.raises(DataError, match=r"vectors\.txt:1: "):
        read_vectors(path, 2, limit=1)  # the pre-flight's reading


# --- unlabeled text files ------------------------------------------------------------------------


def test_a_byte_order_mark_starting_a_later_line_of_unlabeled_text_is_refused(tmp_path) -> None:
    """Files concatenated with `cat` keep each file's byte-order mark at the start of a line: it was
    read into that line's first word ("\\ufeffthe", a vocabulary word and a `cvt.vectors` row of its
    own), where every task reader refuses it. Both the stage's index and the pre-flight read lines
    through `index_file`."""
    from xfer.core.errors import DataError
    from xfer.cvt.text import index_file

    path = tmp_path / "unlabeled.txt"
    path.write_bytes("\ufeffthe dog runs\n\ufeffthe cat sits\n".encode())
    with pytest.raises(DataError, match=r"unlabeled\.txt:2: byte-order mark \(U\+FEFF\) at the start of a line"):
        index_file(path, chunk_lines=10)
    path.write_bytes("\ufeffthe dog runs\nthe cat sits\n".encode())  # the file's own: dropped, as before
    assert index_file(path, chunk_lines=10)[1]


def test_a_truncated_word2vec_file_is_refused(tmp_path) -> None:
    """A word2vec file cut short (a partial download or copy) was read as the whole file: its header's
    count was never compared with what the file holds. Blank lines are not vectors; a file read to the
    end under a `limit` with `keep` is checked too, one stopped at the limit is not."""
    from xfer.core.errors import DataError
    from xfer.cvt.vocab import read_vectors

    path = tmp_path / "w2v.txt"
    path.write_text("3 2\ncat 1 2\n\nbat 3 4\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"w2v\.txt:1: the word2vec header announces 3 vectors, the file holds 2"):
        read_vectors(path, 2, None)
    with pytest.raises(DataError, match="announces 3 vectors"):
        read_vectors(path, 2, 1, keep=lambda word: word == "bat")
    assert _as_lists(read_vectors(path, 2, 1)) == {"cat": [1.0, 2.0]}
    path.write_text("2 2\ncat 1 2\n\nbat 3 4\n", encoding="utf-8")
    assert _as_lists(read_vectors(path, 2, None)) == {"cat": [1.0, 2.0], "bat": [3.0, 4.0]}

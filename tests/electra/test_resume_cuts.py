"""Resuming ELECTRA pre-training after xfer changed how it cuts or packs the same corpus.

Text with CRLF line ends or a byte-order mark over one block has been cut where its LF twin is cut
(before: at raw byte offsets). A map-style cursor saved before was refused with a message that
told the user to restore a corpus they never changed; a stream cursor names shards by number and
resumed onto shifted byte ranges without a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.config import Files
from xfer.core.errors import UserError
from xfer.electra.corpus import CorpusConfig
from xfer.electra.data import PretrainBatches, build_examples
from xfer.transformer.tokenization import WordPieceTokenizer

DOCUMENT = "the dog saw a big cat near the river .\nthe cat ran home .\n\n"
BLOCK = 300  # bytes: the corpus below spans several blocks


def corpus_file(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def tokenizer(tmp_path: Path) -> Path:
    folder = tmp_path / "vocab"
    if not folder.exists():
        (tmp_path / "train.txt").write_text(DOCUMENT * 5)
        WordPieceTokenizer.train([tmp_path / "train.txt"], vocab_size=60).save(folder)
    return folder


def batches(tmp_path: Path, path: Path, *, streaming: bool) -> PretrainBatches:
    corpus = CorpusConfig(files=Files((str(path),)), streaming=streaming)
    examples = build_examples(
        corpus, [path], tokenizer(tmp_path), 16, tmp_path / f"cache-{path.stem}", 1, block_bytes=BLOCK
    )
    return PretrainBatches(examples, 4, seed=1, pad_id=0, shuffle_buffer=8)


LF = (DOCUMENT * 40).encode()
CRLF = LF.replace(b"\n", b"\r\n")


@pytest.mark.parametrize("data", [CRLF, b"\xef\xbb\xbf" + LF], ids=["crlf", "bom"])
def test_a_stream_cursor_saved_before_blocks_were_named_is_refused_where_the_old_rule_cut_elsewhere(
    tmp_path: Path, data: bytes
) -> None:
    path = corpus_file(tmp_path, "corpus.txt", data)
    first = batches(tmp_path, path, streaming=True)
    first.next_step()
    cursor = first.state_dict()
    assert isinstance(cursor.get("blocks"), str), "a stream cursor names the byte ranges of its shards"
    batches(tmp_path, path, streaming=True).load_state_dict(cursor)  # the same blocks: resumes
    legacy = {k: v for k, v in cursor.items() if k != "blocks"}  # saved by xfer before the LF-text cut
    with pytest.raises(UserError, match=r"upgrade of xfer cuts text with CRLF line ends or a byte-order mark"):
        batches(tmp_path, path, streaming=True).load_state_dict(legacy)


def test_a_stream_cursor_over_other_blocks_is_refused_and_an_lf_corpus_resumes_an_old_cursor(tmp_path: Path) -> None:
    path = corpus_file(tmp_path, "corpus.txt", LF)
    first = batches(tmp_path, path, streaming=True)
    expected = [first.next_step() for _ in range(3)]
    cursor_at_1 = None
    again = batches(tmp_path, path, streaming=True)
    again.next_step()
    cursor_at_1 = again.state_dict()
    legacy = {k: v for k, v in cursor_at_1.items() if k != "blocks"}  # the old rule cut LF text the same way
    resumed = batches(tmp_path, path, streaming=True)
    resumed.load_state_dict(legacy)
    for want in expected[1:]:
        got = resumed.next_step()
        assert all((g["input_ids"] == w["input_ids"]).all() for g, w in zip(got, want, strict=True))
    moved = {**cursor_at_1, "blocks": "0" * 64}
    with pytest.raises(UserError, match=r"data cursor was saved over other corpus blocks"):
        batches(tmp_path, path, streaming=True).load_state_dict(moved)


def test_a_map_cursor_over_the_same_inputs_packed_otherwise_names_an_upgrade_not_the_corpus(tmp_path: Path) -> None:
    path = corpus_file(tmp_path, "corpus.txt", CRLF)
    first = batches(tmp_path, path, streaming=False)
    first.next_step()
    cursor = first.state_dict()
    assert isinstance(cursor.get("inputs"), str)
    batches(tmp_path, path, streaming=False).load_state_dict(cursor)  # the same examples: resumes
    repacked = {**cursor, "examples": "0" * 64}  # as a cursor of the old cut rule: same inputs, other key
    with pytest.raises(
        UserError, match=r"while the corpus, its tokenizer and the packing settings did not: an upgrade"
    ):
        batches(tmp_path, path, streaming=False).load_state_dict(repacked)
    older = {k: v for k, v in repacked.items() if k != "inputs"}  # from before cursors named their inputs
    with pytest.raises(UserError, match=r"or, with the same files, an upgrade of xfer packs them differently"):
        batches(tmp_path, path, streaming=False).load_state_dict(older)
    path.write_bytes(CRLF.replace(b"dog", b"cat"))  # the corpus itself changed: not blamed on an upgrade
    with pytest.raises(UserError, match=r"Restore what it read to resume") as caught:
        batches(tmp_path, path, streaming=False).load_state_dict(cursor)
    assert "packing settings did not" not in str(caught.value)

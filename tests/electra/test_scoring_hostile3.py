"""Third hostile review of PLL scoring and `xfer score`'s inputs.

Each test pins a defect found in that review and fails on the code before its fix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.electra import scoring


@pytest.mark.parametrize("text", ["\\ufeffthe cat", "the\\ufeffcat", "the cat\\ufeff"])
def test_a_byte_order_mark_in_a_jsonl_text_is_refused_like_in_a_text_line(tmp_path: Path, text: str) -> None:
    """A plain-text line starting with U+FEFF is refused (`split_lines`), and so is one in an n-best
    text (`rerank.bom_in_text`); a JSONL `text` holding one was scored silently: WordPiece drops
    it between words, but glues "the\\ufeffcat" into one unknown word, scored as a single [UNK].
    It is now an error naming the file, line and field, before the model loads."""
    path = tmp_path / "in.jsonl"
    path.write_text('{"text": "a dog"}\n{"id": 2, "text": "' + text + '"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:2: text: byte-order mark \(U\+FEFF\) at character"):
        scoring.read_texts(path)
    other = tmp_path / "other.jsonl"
    other.write_text('{"sentence": "' + text + '"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"{other}:1: sentence: byte-order mark"):
        scoring.read_texts(other, text_field="sentence")


def test_the_file_byte_order_mark_of_a_jsonl_file_is_still_accepted(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"text": "the cat"}\n')
    assert [x.text for x in scoring.read_texts(path)] == ["the cat"]


def test_xfer_score_refuses_it_before_loading_the_model(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from xfer.core.cli import main

    path = tmp_path / "in.jsonl"
    path.write_text('{"id": "u1", "text": "the\\ufeffcat"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["score", str(tmp_path / "no-model"), str(path), "--out", str(out)]) == 2
    assert f"{path}:1: text: byte-order mark" in capsys.readouterr().err
    assert not out.exists()

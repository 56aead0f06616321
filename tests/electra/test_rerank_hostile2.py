"""Hostile review of byte-order marks and encodings in n-best JSONL input (`xfer.electra.rerank.read_nbest`,
`xfer score --nbest-dev/--nbest-test`): a BOM inside the file (`cat a.jsonl b.jsonl`, b with a BOM),
a BOM inside a hypothesis or reference text, and bytes that are not UTF-8. Torch-free: `xfer score`
reads every input before it loads the model, so the checkpoint is an empty folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.core.textfile import BOM_INSIDE
from xfer.electra import rerank


def _line(text: str, **extra: object) -> str:
    return json.dumps({**extra, "hypotheses": [{"text": text, "score": 0.0}], "reference": text}) + "\n"


def _score(tmp_path: Path, nbest: Path, capsys: pytest.CaptureFixture, flag: str = "--nbest-dev") -> str:
    """`xfer score` on `nbest`, which must fail with a data error (exit 2): its stderr."""
    from xfer.core.cli import main

    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir(exist_ok=True)
    args = ["score", str(checkpoint), "--metric", "wer"]
    if flag == "--nbest-test":
        dev = tmp_path / "dev.jsonl"
        dev.write_text(_line("the cat", id="d"), encoding="utf-8")
        args += ["--nbest-dev", str(dev)]
    assert main([*args, flag, str(nbest)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


# --- a BOM at the start of a later line: two files concatenated with `cat` -----------------------


@pytest.mark.parametrize("flag", ["--nbest-dev", "--nbest-test"])
@pytest.mark.parametrize("with_id", [True, False])
def test_a_bom_starting_a_later_line_is_the_projects_bom_inside_error(
    tmp_path: Path, capsys: pytest.CaptureFixture, flag: str, with_id: bool
) -> None:
    """`cat a.jsonl b.jsonl` with both files saved with a BOM: `read_text` drops the first, the second
    starts line 2. json said "Unexpected UTF-8 BOM (decode using utf-8-sig)", advice for a program,
    not for the user's file; now it is the BOM_INSIDE message every other line reader gives."""
    a = "\ufeff" + (_line("the cat", id="u1") if with_id else _line("the cat"))
    b = "\ufeff" + (_line("a dog", id="u2") if with_id else _line("a dog"))
    nbest = tmp_path / "cat.jsonl"
    nbest.write_text(a + b, encoding="utf-8")
    with pytest.raises(DataError) as error:
        rerank.read_nbest(nbest, need_reference=True)
    assert str(error.value) == f"{nbest}:2: {BOM_INSIDE}"
    err = _score(tmp_path, nbest, capsys, flag)
    assert f"{nbest}:2: {BOM_INSIDE}" in err and "utf-8-sig" not in err


def test_a_line_that_is_only_a_bom_or_indented_bom_is_bom_inside(tmp_path: Path) -> None:
    """An empty file saved with a BOM, concatenated, leaves a line holding only the BOM (not blank to
    `str.strip`); whitespace before the BOM changes nothing."""
    for body in ("\ufeff\n", "  \ufeff" + _line("b")):
        nbest = tmp_path / "x.jsonl"
        nbest.write_text(_line("a") + body, encoding="utf-8")
        with pytest.raises(DataError, match="^" + str(nbest).replace("\\", "\\\\") + ":2: byte-order mark"):
            rerank.read_nbest(nbest)


def test_a_bom_after_a_line_without_newline_says_so(tmp_path: Path) -> None:
    """a.jsonl without a final newline, then b.jsonl's BOM: both objects on line 1. json said only
    "Extra data (column 42)", naming neither the BOM nor the missing newline."""
    nbest = tmp_path / "x.jsonl"
    first = _line("a").rstrip("\n")
    nbest.write_text(first + "\ufeff" + _line("b"), encoding="utf-8")
    with pytest.raises(DataError) as error:
        rerank.read_nbest(nbest)
    message = str(error.value)
    assert message.startswith(
        f"{nbest}:1: byte-order mark (U+FEFF) at column {len(first) + 1}, after a complete object"
    )
    assert "newline" in message and "Extra data" not in message
    inside = '{"hypotheses": [{"text": "a", "score": \ufeff0}]}'
    nbest.write_text(inside + "\n", encoding="utf-8")
    column = inside.index("\ufeff") + 1
    with pytest.raises(
        DataError, match=rf":1: byte-order mark \(U\+FEFF\) at column {column}: not valid in JSON outside"
    ):
        rerank.read_nbest(nbest)


def test_the_files_own_bom_and_other_json_errors_are_unchanged(tmp_path: Path) -> None:
    nbest = tmp_path / "x.jsonl"
    nbest.write_text("\ufeff" + _line("the cat", id="u1") + _line("a dog", id="u2"), encoding="utf-8")
    assert [n.id for n in rerank.read_nbest(nbest)] == ["u1", "u2"]
    nbest.write_text(_line("a") + "{oops\n", encoding="utf-8")
    with pytest.raises(DataError, match=r":2: not valid JSON: Expecting property name"):
        rerank.read_nbest(nbest)


# --- a BOM inside a text: scored as if absent, counted by the metric -------------------------------


@pytest.mark.parametrize(
    ("row", "key"),
    [
        ({"hypotheses": [{"text": "the cat", "score": 0.0}], "reference": "\ufeffthe cat"}, "reference"),
        ({"hypotheses": [{"text": "the cat", "score": 0.0}, {"text": "\ufeffthe cat", "score": -1.0}],
          "reference": "the cat"}, "hypotheses[1].text"),
        ({"hypotheses": [{"text": "the\ufeffcat", "score": 0.0}], "reference": "the cat"}, "hypotheses[0].text"),
    ],
)  # fmt: skip
def test_a_bom_inside_a_text_or_reference_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture, row: dict, key: str
) -> None:
    """A reference list written by a script that read a BOM file with `open()` has "\\ufeffthe" as
    its first word: the tokenizer drops the BOM, but WER counted one error and BLEU was 76 instead
    of 100 for identical texts, so λ was chosen on a wrong metric, silently."""
    assert rerank.word_errors("\ufeffthe cat", "the cat") == 1  # why it matters
    nbest = tmp_path / "x.jsonl"
    nbest.write_text(_line("a dog") + json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf":2: {re.escape(key)}: byte-order mark"):
        rerank.read_nbest(nbest, need_reference=True)
    assert f"{nbest}:2: {key}: byte-order mark (U+FEFF) at character" in _score(tmp_path, nbest, capsys)


def test_a_bom_in_an_id_or_extra_key_is_kept(tmp_path: Path) -> None:
    """Ids and extra keys are carried to the output, never compared as words: left alone."""
    nbest = tmp_path / "x.jsonl"
    row = {"id": "\ufeffu1", "hypotheses": [{"text": "a", "score": 0.0, "note": "\ufeffn"}], "reference": "a"}
    nbest.write_text(json.dumps(row) + "\n", encoding="utf-8")
    (entry,) = rerank.read_nbest(nbest)
    assert entry.id == "\ufeffu1" and entry.hypotheses[0].extra == {"note": "\ufeffn"}


# --- bytes that are not UTF-8 ---------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--nbest-dev", "--nbest-test"])
def test_a_latin1_byte_is_a_data_error_naming_file_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture, flag: str
) -> None:
    nbest = tmp_path / "x.jsonl"
    nbest.write_bytes(_line("a").encode() + b'{"hypotheses": [{"text": "caf\xe9", "score": 0}], "reference": "x"}\n')
    err = _score(tmp_path, nbest, capsys, flag)
    assert f"{nbest}:2: encoding: not valid UTF-8 (byte 0xe9 at column 30)" in err


def test_xfer_score_jsonl_file_gets_the_same_bom_message(tmp_path: Path) -> None:
    """`xfer score FILE.jsonl` reads its lines with the same `rerank.json_object`."""
    from xfer.electra import scoring

    texts = tmp_path / "t.jsonl"
    texts.write_text('\ufeff{"text": "a"}\n\ufeff{"text": "b"}\n', encoding="utf-8")
    with pytest.raises(DataError) as error:
        scoring.read_texts(texts)
    assert str(error.value) == f"{texts}:2: {BOM_INSIDE}"


def test_a_bom_starting_a_later_line_of_a_plain_text_file_is_bom_inside(tmp_path: Path) -> None:
    """`cat a.txt b.txt` of two BOM-saved files: line 2 began with U+FEFF, which the tokenizer
    dropped but the output kept as the line's text ("\\ufeffa dog"), without a word."""
    from xfer.electra.scoring import read_texts

    path = tmp_path / "cat.txt"
    path.write_bytes("\ufeffthe cat\n".encode() + "\ufeffa dog\n".encode())
    with pytest.raises(DataError) as caught:
        read_texts(path)
    assert str(caught.value) == f"{path}:2: {BOM_INSIDE}"
    path.write_bytes("\ufeffthe cat\na dog\n".encode())  # the file's own BOM: dropped, as before
    assert [line.text for line in read_texts(path)] == ["the cat", "a dog"]

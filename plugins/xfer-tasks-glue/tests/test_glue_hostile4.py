"""Hostile review, fourth pass: `glue/tsv` reading edge cases (header width, delimiters)."""

from __future__ import annotations

import pytest

from xfer.core.config import FieldError
from xfer.core.errors import DataError
from xfer.tasks.glue.config import TsvTaskConfig
from xfer.tasks.glue.readers import TableLayout, read_sentence_examples

LAYOUT = TableLayout(text_a="t", label="l")


def test_trailing_delimiter_on_header_only_is_named_at_the_header_line(tmp_path):
    """Every row is right and the header has a stray trailing tab: the error named line 2."""
    path = tmp_path / "train.tsv"
    path.write_text("t\tl\t\nhello\ta\nbye\ta\n", encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_sentence_examples(path, "train", LAYOUT, labels=["a"])
    message = str(info.value)
    assert f"{path}:1:" in message
    assert "the header has 3 columns (its last name is empty: a trailing delimiter?) but every row has 2" in message


def test_header_wider_than_every_row_is_named_at_the_header_with_quoting(tmp_path):
    """The header's line is the record's own line (here after a BOM-free CSV with quoting)."""
    path = tmp_path / "train.csv"
    path.write_text("t,l,extra\nhello,a\nbye,a\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.csv:1: the header has 3 columns but every row has 2"):
        read_sentence_examples(path, "train", LAYOUT, labels=["a"], delimiter=",", quoting=True)


def test_one_odd_row_is_still_named_at_its_own_line(tmp_path):
    """Rows that disagree among themselves: the odd row is the one to fix, not the header."""
    path = tmp_path / "train.tsv"
    path.write_text("t\tl\nhello\ta\nbye\ta\textra\nok\ta\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.tsv:3: expected 2 columns \(as in the header\), found 3"):
        read_sentence_examples(path, "train", LAYOUT, labels=["a"])
    path.write_text("t\tl\tm\nhello\ta\n", encoding="utf-8")  # a single row: no majority
    with pytest.raises(DataError, match=r"train\.tsv:2: expected 3 columns"):
        read_sentence_examples(path, "train", LAYOUT, labels=["a"])


def test_consistent_file_still_reads(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("t\tl\nhello\ta\nbye\ta\n", encoding="utf-8")
    examples = read_sentence_examples(path, "train", LAYOUT, labels=["a"])
    assert [(e.text_a, e.label) for e in examples] == [("hello", "a"), ("bye", "a")]


def _config(tmp_path, **kwargs) -> TsvTaskConfig:
    path = tmp_path / "train.tsv"
    path.write_text("t\tl\nhello\ta\n", encoding="utf-8")
    return TsvTaskConfig(train=path, text_a_column="t", label_column="l", labels=["a"], **kwargs)


def test_quote_delimiter_with_quoting_is_refused_naming_the_key(tmp_path):
    """`"` is csv's quote character: `""` became an escaped quote and rows misparsed or failed far away."""
    with pytest.raises(FieldError, match=r"quote character of `quoting: true`") as info:
        _config(tmp_path, delimiter='"', quoting=True)
    assert info.value.key == ("delimiter",)
    _config(tmp_path, delimiter='"', quoting=False)  # verbatim fields: a plain separator


@pytest.mark.parametrize("quoting", [False, True])
@pytest.mark.parametrize("delimiter", ["\n", "\r"])
def test_line_break_delimiter_is_refused_naming_the_key(tmp_path, delimiter, quoting):
    """It passed, and the file then read as one column ("no column named 'l' in the header")."""
    with pytest.raises(FieldError, match=r"is a line break, which ends records") as info:
        _config(tmp_path, delimiter=delimiter, quoting=quoting)
    assert info.value.key == ("delimiter",)


def test_delimiter_problem_is_reported_with_the_others(tmp_path):
    """Several problems are still reported together, the delimiter's among them."""
    with pytest.raises(ValueError, match=r"labels: required.*delimiter: '\\n' is a line break"):
        TsvTaskConfig(delimiter="\n")


def test_stray_cr_in_unquoted_field_is_an_error_not_two_examples(tmp_path):
    """With `quoting: true` csv read universal newlines: `hel<CR>lo` became two test examples,
    shifting every later id and prediction; without quoting the same file is refused."""
    path = tmp_path / "test.csv"
    path.write_bytes(b"t\nok\nhel\rlo\nbye\n")
    with pytest.raises(DataError, match=r"test\.csv:3: carriage return \(CR\) inside an unquoted field"):
        read_sentence_examples(path, "test", TableLayout(text_a="t"), delimiter=",", quoting=True)
    path.write_bytes(b"t\rok\rbye\r")  # CR-only endings: refused as without quoting
    with pytest.raises(DataError, match=r"test\.csv:1: carriage return \(CR\)"):
        read_sentence_examples(path, "test", TableLayout(text_a="t"), delimiter=",", quoting=True)


def test_cr_inside_quoted_field_is_kept_and_line_numbers_count_lf(tmp_path):
    """A CR inside quotes is text; it no longer counts as a line, so later errors name the editor's line."""
    path = tmp_path / "train.csv"
    path.write_bytes(b't,l\r\n"a\rb",x\r\n"c\nd",x\r\n"e",zz\r\n')
    with pytest.raises(DataError, match=r"train\.csv:5: l: unknown label 'zz'"):
        read_sentence_examples(path, "train", LAYOUT, labels=["x"], delimiter=",", quoting=True)
    path.write_bytes(b't,l\r\n"a\rb",x\r\n"c\nd",x\r\n')
    examples = read_sentence_examples(path, "train", LAYOUT, labels=["x"], delimiter=",", quoting=True)
    assert [e.text_a for e in examples] == ["a\rb", "c\nd"]

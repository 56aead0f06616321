"""Hostile-review regressions (3): `punctuation: upos` on words without UPOS, fields padded with
spaces under `separator: tab`, a space-separated `-DOCSTART-` line in a tab-separated file, and
predictions that are not a tag list / a (heads, relations) pair (bare TypeErrors before)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.tasks.conll.config import ColumnsConfig, UdParseConfig
from xfer.tasks.conll.parsing import UdParseTask
from xfer.tasks.conll.tasks import ColumnsTask


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def conllu_row(i: int, form: str, upos: str, head: int, rel: str) -> str:
    return f"{i}\t{form}\t_\t{upos}\t_\t_\t{head}\t{rel}\t_\t_\n"


def test_punctuation_upos_refuses_words_without_upos(tmp_path):
    # parser output without a tagger: UPOS `_` everywhere; the comma was silently scored
    text = (
        conllu_row(1, "Hi", "INTJ", 0, "root")
        + conllu_row(2, ",", "_", 1, "punct")
        + conllu_row(3, "you", "PRON", 1, "obj")
    )
    path = write(tmp_path / "dev.conllu", "# sent_id = s1\n" + text + "\n")
    upos = UdParseTask("conll/ud-parse", UdParseConfig(train_file=path, dev_file=path, punctuation="upos"))
    with pytest.raises(DataError, match=r"dev\.conllu:3: UPOS: no UPOS \('_'\), but `punctuation: upos`"):
        upos.examples("dev")
    # the other rules do not read UPOS: the same file is fine for them
    for rule in ("form", "none"):
        task = UdParseTask("conll/ud-parse", UdParseConfig(train_file=path, dev_file=path, punctuation=rule))
        (example,) = task.examples("dev")
        assert task.scored(example) == [True, rule == "none", True]


def test_punctuation_upos_still_leaves_out_punct(tmp_path):
    text = conllu_row(1, "Hi", "INTJ", 0, "root") + conllu_row(2, "--", "PUNCT", 1, "punct")
    path = write(tmp_path / "dev.conllu", text + "\n")
    task = UdParseTask("conll/ud-parse", UdParseConfig(train_file=path, dev_file=path, punctuation="upos"))
    (example,) = task.examples("dev")
    assert task.scored(example) == [True, False]


@pytest.mark.parametrize(
    ("line", "column"),
    [
        ("runs\tNN \n", "column 1 \\('NN '\\)"),
        ("runs \tNN\n", "column 0 \\('runs '\\)"),
        (" runs\tNN\n", "column 0 \\(' runs'\\)"),
    ],
)
def test_tab_separated_fields_with_surrounding_spaces_are_refused(tmp_path, line, column):
    # 'NN ' became a tag of its own next to 'NN', silently (a trailing space left by an editor)
    path = write(tmp_path / "train.txt", "Peter\tNN\n" + line + "\n")
    task = ColumnsTask("conll/columns", ColumnsConfig(train_file=path, scheme="none", separator="tab"))
    with pytest.raises(DataError, match=rf"train\.txt:2: {column} has leading or trailing spaces"):
        _ = task.labels


def test_tab_separated_fields_may_hold_inner_spaces(tmp_path):
    path = write(tmp_path / "train.txt", "New York\tNNP\nruns\tVBZ\n\n")
    task = ColumnsTask("conll/columns", ColumnsConfig(train_file=path, scheme="none", separator="tab"))
    assert [e.words for e in task.examples("train")] == [("New York", "runs")]
    assert task.labels == ("NNP", "VBZ")


@pytest.mark.parametrize("where", ["first", "middle"])
def test_space_separated_docstart_in_a_tab_file_is_a_document_separator(tmp_path, where):
    # the original `-DOCSTART- -X- -X- O` left in a file whose tokens were converted to tabs: as line 1 it set
    # the column count to 1 ("line 3: expected 1 columns (as on line 1), found 4"), later it was a bad token
    docstart = "-DOCSTART- -X- -X- O\n\n"
    sentence = "Peter\tNNP\tB-NP\tB-PER\nruns\tVBZ\tB-VP\tO\n\n"
    text = docstart + sentence + sentence if where == "first" else sentence + docstart + sentence
    path = write(tmp_path / "train.txt", text)
    task = ColumnsTask("conll/columns", ColumnsConfig(train_file=path, separator="tab"))
    examples = task.examples("train")
    assert [(e.words, e.tags) for e in examples] == [(("Peter", "runs"), ("B-PER", "O"))] * 2


@pytest.mark.parametrize("predicted", [None, 5, 1.5])
def test_a_tagging_prediction_that_is_not_a_tag_list_is_a_value_error_naming_the_sentence(tmp_path, predicted):
    # a None for a sentence the model skipped was a bare "TypeError: 'NoneType' object is not iterable"
    path = write(tmp_path / "train.txt", "Peter B-PER\nruns O\n\n")
    task = ColumnsTask("conll/columns", ColumnsConfig(train_file=path))
    examples = task.examples("train")
    message = rf"prediction for 'train-0' must be a list of tag strings, not {type(predicted).__name__}"
    with pytest.raises(ValueError, match=message):
        task.evaluate(examples, {"train-0": predicted})
    with pytest.raises(ValueError, match=message):
        task.write_predictions(tmp_path / "out", "train", examples, {"train-0": predicted})
    assert not (tmp_path / "out" / "train.conll").exists()
    assert task.evaluate(examples, {"train-0": ("B-PER", "O")})["f1"] == 100.0  # any sequence of tags is fine


@pytest.mark.parametrize("predicted", [(None, None), ([0, 1], None), (5, 6)])
def test_a_parse_prediction_without_head_and_relation_lists_is_a_value_error_naming_the_sentence(tmp_path, predicted):
    text = conllu_row(1, "Hi", "INTJ", 0, "root") + conllu_row(2, "you", "PRON", 1, "obj")
    path = write(tmp_path / "train.conllu", text + "\n")
    task = UdParseTask("conll/ud-parse", UdParseConfig(train_file=path))
    examples = task.examples("train")
    with pytest.raises(ValueError, match=r"prediction for 'train-0' must be a pair \(heads, relations\)"):
        task.evaluate(examples, {"train-0": predicted})
    assert task.evaluate(examples, {"train-0": ((0, 1), ("root", "obj"))})["las"] == 100.0

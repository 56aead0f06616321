"""Hostile-review regressions (5): predicted tags that no CoNLL file can hold; span tasks on
tab-separated files whose words hold spaces."""

from __future__ import annotations

import pytest

from xfer.core.errors import DataError
from xfer.core.tasks import TaggingExample
from xfer.tasks.conll import schemes
from xfer.tasks.conll.config import ChunkingConfig, ColumnsConfig, SpanTaggingConfig, UdPosConfig
from xfer.tasks.conll.tasks import ChunkingTask, ColumnsTask, SpanTaggingTask, UdPosTask

NER_GOLD = [TaggingExample(id="a", words=("Peter", "Blackburn", "said"), tags=("B-PER", "I-PER", "O"))]
POS_GOLD = [TaggingExample(id="a", words=("I", "run"), tags=("PRON", "VERB"))]


@pytest.mark.parametrize("scheme", ["IOB1", "IOB2", "BIO", "BIOES"])
def test_a_tag_ending_in_a_line_break_is_not_well_formed(scheme):
    """`re.match` with `$` accepted `B-PER\\n` and `O\\n` (`$` matches before a final newline)."""
    problem = schemes.bad_form(["O", "B-PER\n"], scheme)
    assert problem is not None and problem[0] == 1 and "'B-PER\\n'" in problem[1]
    assert schemes.bad_form(["O\n"], scheme) is not None
    assert schemes.bad_form(["O", "B-PER", "I-PER"], scheme) is None


def test_span_predictions_read_back_with_their_newlines_are_refused(tmp_path):
    """Predictions read back from a `.conll` file with `line.split("\\t")` keep the newline on the
    last field. Without a train_file (no tag set to check against) they were accepted: evaluate
    reported F1 0 for the gold spans, and the prediction file got a blank line (a sentence break for
    conlleval) after every word, where conlleval then found F1 100."""
    task = SpanTaggingTask("conll/ner", SpanTaggingConfig(tag_scheme="BIO"))
    predicted = {"a": ["B-PER\n", "I-PER\n", "O\n"]}
    with pytest.raises(
        ValueError, match=r"conll/ner: sentence 'a', word 1 \('Peter'\): predicted tag 'B-PER\\n' is empty, holds a tab"
    ):
        task.evaluate(NER_GOLD, predicted)
    with pytest.raises(ValueError, match="predicted tag 'B-PER\\\\n'"):
        task.write_predictions(tmp_path, "dev", NER_GOLD, predicted)
    assert not (tmp_path / "dev.conll").exists()
    clean = {"a": [tag.rstrip("\n") for tag in predicted["a"]]}
    assert task.evaluate(NER_GOLD, clean)["f1"] == 100.0


@pytest.mark.parametrize(
    ("tags", "shown"),
    [
        (["PRON", ""], "''"),
        (["PRON", "VERB\n"], "'VERB\\\\n'"),
        (["PRON\tX", "VERB"], "'PRON\\\\tX'"),
        (["PRON ", "VERB"], "'PRON '"),
        (["PRON", "VE\rRB"], "'VE\\\\rRB'"),
    ],
)
@pytest.mark.parametrize(
    "make", [lambda: UdPosTask("conll/ud-pos", UdPosConfig()), lambda: ColumnsTask("c", ColumnsConfig(scheme="none"))]
)
def test_per_token_tags_that_would_break_the_prediction_file_are_refused(tmp_path, make, tags, shown):
    """Per-token tags (POS) had no check at all without a train_file: an empty tag wrote a row with
    two fields, a tab one with four, a newline split the row; `PRON ` was scored as a wrong tag."""
    task = make()
    with pytest.raises(
        ValueError, match=f"sentence 'a', word [12] \\('[a-zI]+'\\): predicted tag {shown} is empty, holds a tab"
    ):
        task.write_predictions(tmp_path, "dev", POS_GOLD, {"a": tags})
    with pytest.raises(ValueError, match="holds a tab or line break"):
        task.evaluate(POS_GOLD, {"a": tags})
    assert not (tmp_path / "dev.conll").exists()
    out = task.write_predictions(tmp_path, "dev", POS_GOLD, {"a": ["PRON", "VERB"]})
    assert out.read_text() == "I\tPRON\tPRON\nrun\tVERB\tVERB\n\n"


def test_tags_the_readers_can_produce_stay_possible_predictions(tmp_path):
    """`separator: tab` keeps spaces inside a field, and `separator: whitespace` a no-break space
    anywhere in a token (tags included): gold given as predictions still scores 100."""
    path = tmp_path / "train.tsv"
    path.write_text("New York\tNN P\nis\tVBZ\n")
    task = ColumnsTask("c", ColumnsConfig(train_file=path, scheme="none", separator="tab"))
    (example,) = task.examples("train")
    assert example.tags == ("NN P", "VBZ")
    assert task.evaluate([example], {example.id: ["NN P", "VBZ"]}) == {"accuracy": 100.0}
    path = tmp_path / "nbsp.txt"
    path.write_text("a \u00a0NN\nb VBZ\u00a0\n")
    task = ColumnsTask("c", ColumnsConfig(train_file=path, scheme="none"))
    (example,) = task.examples("train")
    assert example.tags == ("\u00a0NN", "VBZ\u00a0")
    assert task.evaluate([example], {example.id: list(example.tags)}) == {"accuracy": 100.0}
    out = task.write_predictions(tmp_path, "train", [example], {example.id: list(example.tags)})
    assert out.read_text() == "a\t\u00a0NN\t\u00a0NN\nb\tVBZ\u00a0\tVBZ\u00a0\n\n"


# --- span tasks on tab-separated files whose words hold spaces ---------------------------------

TAB_NER = "New York\tNNP\tI-NP\tI-LOC\nis\tVBZ\tI-VP\tO\n\nParis\tNNP\tI-NP\tI-LOC\nHilton\tNNP\tI-NP\tI-PER\n"


def test_ner_and_chunking_read_tab_separated_files_whose_words_hold_spaces(tmp_path):
    """UD-derived data has words with spaces (`New York`): conll/ner and conll/chunking had no
    `separator`, so such a file could not be read at all (conll/columns, which could, converts no
    IOB1 and carves no dev)."""
    path = tmp_path / "train.tsv"
    path.write_text(TAB_NER)
    ner = SpanTaggingTask("conll/ner", SpanTaggingConfig(train_file=path, separator="tab"))
    assert [e.words for e in ner.examples("train")] == [("New York", "is"), ("Paris", "Hilton")]
    assert [e.tags for e in ner.examples("train")] == [("S-LOC", "O"), ("S-LOC", "S-PER")]
    assert ner.info().extra["input_schemes"] == {str(path): "IOB1"}
    chunking = ChunkingTask(
        "conll/chunking", ChunkingConfig(train_file=path, separator="tab", tag_column=2, dev_from_train=1)
    )
    assert chunking.examples("train")[0].tags == ("S-NP", "S-VP")
    assert chunking.examples("dev")[0].words == ("Paris", "Hilton")


@pytest.mark.parametrize("first", [True, False])
def test_a_space_inside_a_word_of_a_tab_separated_file_is_named_with_the_fix(tmp_path, first):
    """With the whitespace separator the line with `New York` has one column more. When it was the
    first line, the error blamed the regular line after it ("expected 5 columns, found 4")."""
    lines = TAB_NER.splitlines(keepends=True)
    path = tmp_path / "train.tsv"
    path.write_text("".join(lines if first else [lines[1], lines[0]]))
    found = (5, 4) if first else (4, 5)
    for task in (
        SpanTaggingTask("conll/ner", SpanTaggingConfig(train_file=path)),
        ColumnsTask("conll/columns", ColumnsConfig(train_file=path)),
    ):
        with pytest.raises(
            DataError,
            match=rf"{path}:2: expected {found[0]} columns \(as on line 1\), found {found[1]} \(split on tabs only, "
            r"it has 4 columns like line 1: .*set `separator: tab`",
        ):
            task.examples("train")
    # a column missing from a line of a tab-separated file gets no such hint
    path.write_text("New\tNNP\tI-NP\tI-LOC\nis\tVBZ\tO\n")
    with pytest.raises(DataError, match=r"expected 4 columns \(as on line 1\), found 3$"):
        SpanTaggingTask("conll/ner", SpanTaggingConfig(train_file=path)).examples("train")


def test_the_new_separator_field_leaves_old_fingerprints_alone():
    """`separator: whitespace` is what conll/ner and conll/chunking did before the field existed:
    fingerprints leave it out (existing runs stay up to date), and sign any other value."""
    from xfer.core.recipes.schema import to_plain

    for config_class in (SpanTaggingConfig, ChunkingConfig):
        assert "separator" not in to_plain(config_class(), signing=True)
        assert to_plain(config_class(separator="tab"), signing=True)["separator"] == "tab"
    with pytest.raises(ValueError, match="separator must be one of 'whitespace', 'tab', not 'tabs'"):
        SpanTaggingConfig(separator="tabs")

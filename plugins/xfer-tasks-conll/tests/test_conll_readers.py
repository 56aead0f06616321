"""Column and CoNLL-U readers on small generated files, and every bad-input path (file:line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import DataError, UserError
from xfer.tasks.conll.config import ChunkingConfig, ColumnsConfig, SpanTaggingConfig, UdPosConfig
from xfer.tasks.conll.tasks import ChunkingTask, ColumnsTask, SpanTaggingTask, UdPosTask


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


NER = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
-DOCSTART- -X- -X- O
BRUSSELS NNP B-NP B-LOC
"""


def ner(path: Path, **kw) -> SpanTaggingTask:
    return SpanTaggingTask("conll/ner", SpanTaggingConfig(train_file=path, **kw))


def test_ner_bioes_default_and_docstart_separators(tmp_path):
    task = ner(write(tmp_path / "train.txt", NER))
    examples = task.examples("train")
    # -DOCSTART- lines are document separators (so also sentence separators), never tokens
    assert [e.words for e in examples] == [
        ("EU", "rejects", "German", "call"),
        ("Peter", "Blackburn"),
        ("BRUSSELS",),
    ]
    assert [e.tags for e in examples] == [("S-ORG", "O", "S-MISC", "O"), ("B-PER", "E-PER"), ("S-LOC",)]
    assert [e.id for e in examples] == ["train-0", "train-1", "train-2"]
    assert task.labels == ("B-PER", "E-PER", "O", "S-LOC", "S-MISC", "S-ORG")
    assert task.info().extra["input_schemes"] == {str(tmp_path / "train.txt"): "IOB2"}


def test_ner_bio_output(tmp_path):
    task = ner(write(tmp_path / "train.txt", NER), tag_scheme="BIO")
    assert task.examples("train")[1].tags == ("B-PER", "I-PER")
    assert task.labels == ("B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER", "O")


def test_ner_iob1_input_is_converted(tmp_path):
    path = write(
        tmp_path / "train.txt", "Peter I-PER\nBlackburn I-PER\nand O\nJohn I-PER\nJane B-PER\nin O\nRome I-LOC\n"
    )
    task = ner(path, tag_scheme="BIO")
    (example,) = task.examples("train")
    assert example.tags == ("B-PER", "I-PER", "O", "B-PER", "B-PER", "O", "B-LOC")
    assert task.info().extra["input_schemes"][str(path)] == "IOB1"
    with pytest.raises(DataError, match=f"{path}:1: tag: 'I-PER' after 'O' does not continue"):
        ner(path, input_scheme="IOB2").examples("train")


def test_ner_bioes_input(tmp_path):
    path = write(tmp_path / "train.txt", "Peter B-PER\nBlackburn E-PER\nin O\nRome S-LOC\n")
    (example,) = ner(path, tag_scheme="BIO").examples("train")
    assert example.tags == ("B-PER", "I-PER", "O", "B-LOC")
    bad = write(tmp_path / "bad.txt", "Peter B-PER\nBlackburn O\n")
    with pytest.raises(DataError, match=f"{bad}:2: tag: 'O' inside an open PER span"):
        ner(bad, input_scheme="BIOES").examples("train")


def test_a_stray_bioes_tag_is_named_when_auto_reads_a_file_as_bioes(tmp_path):
    """One E- tag made auto read an IOB2 file as BIOES, and the error blamed a valid line."""
    path = write(tmp_path / "train.txt", "The B-NP\nbook E-NP\n\nbuilds B-VP\na B-NP\nhouse I-NP\n")
    with pytest.raises(DataError, match=f"{path}:5: tag: .*because line 2 has an E-/S- tag"):
        ner(path).examples("train")


def test_auto_refuses_an_iob2_file_with_an_i_tag_after_o(tmp_path):
    """auto read an IOB2 file with one `I-PER` after `O` as IOB1: the invalid tag silently became
    a span start and `input_schemes` called the file IOB1. The error names the typo's line."""
    path = write(
        tmp_path / "train.txt",
        "EU B-ORG\nrejects O\n\nPeter B-PER\nBlackburn I-PER\nsaid O\nJohn I-PER\n\nRome B-LOC\n",
    )
    with pytest.raises(DataError, match=f"{path}:7: tag: 'I-PER' after 'O' starts a span with I-.*3 span.*line 1"):
        ner(path).examples("train")
    # the explicit schemes still decide: IOB2 rejects the tag, IOB1 reads it as a span start
    with pytest.raises(DataError, match=f"{path}:7: tag: 'I-PER' after 'O' does not continue"):
        ner(path, input_scheme="IOB2").examples("train")
    assert ner(path, input_scheme="IOB1", tag_scheme="BIO").examples("train")[1].tags == (
        "B-PER",
        "I-PER",
        "O",
        "B-PER",
    )


def test_auto_names_a_stray_b_tag_in_an_iob1_file(tmp_path):
    """In an IOB1 file `B-X` only follows an `X` span; a `B-LOC` after `O` is the odd one out."""
    path = write(tmp_path / "train.txt", "Peter I-PER\nBlackburn I-PER\nin O\nRome B-LOC\n\nJohn I-PER\nJane B-PER\n")
    with pytest.raises(DataError, match=f"{path}:4: tag: 'B-LOC' after 'O' starts a span with B-.*first on line 1"):
        ner(path).examples("train")


def test_chunking_carves_dev_from_the_end_of_train(tmp_path):
    text = "".join(f"w{i} NN B-NP\nx{i} VBZ B-VP\n\n" for i in range(10))
    task = ChunkingTask(
        "conll/chunking", ChunkingConfig(train_file=write(tmp_path / "train.txt", text), dev_from_train=3)
    )
    train, dev = task.examples("train"), task.examples("dev")
    assert [e.words[0] for e in train] == [f"w{i}" for i in range(7)]
    assert [e.words[0] for e in dev] == ["w7", "w8", "w9"]
    assert [e.id for e in dev] == ["dev-0", "dev-1", "dev-2"]
    assert dev[0].tags == ("S-NP", "S-VP")
    # with an explicit dev file nothing is carved
    dev_file = write(tmp_path / "dev.txt", "a DT B-NP\n")
    task = ChunkingTask("conll/chunking", ChunkingConfig(train_file=tmp_path / "train.txt", dev_file=dev_file))
    assert len(task.examples("train")) == 10 and len(task.examples("dev")) == 1
    too_many = ChunkingTask("conll/chunking", ChunkingConfig(train_file=tmp_path / "train.txt", dev_from_train=10))
    with pytest.raises(UserError, match="has only 10 sentences"):
        too_many.examples("dev")


def test_max_examples_keeps_first_sentences(tmp_path):
    path = write(tmp_path / "train.txt", "".join(f"w{i} O\n\n" for i in range(5)))
    task = ner(path, max_examples=2)
    assert [e.words for e in task.examples("train")] == [("w0",), ("w1",)]
    assert task.labels == ("O",)


CONLLU = """# newdoc id = d1
# sent_id = s-1
# text = I don't know.
1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
3.1\tknow\t_\t_\t_\t_\t_\t_\t_\t_
4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = s-2
1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_
"""


def test_conllu_words_skip_ranges_and_empty_nodes(tmp_path):
    path = write(tmp_path / "dev.conllu", CONLLU)
    task = UdPosTask("conll/ud-pos", UdPosConfig(train_file=path, dev_file=path))
    first, second = task.examples("dev")
    assert first.id == "s-1" and second.id == "s-2"
    assert first.words == ("I", "do", "n't", "know", ".")
    assert first.tags == ("PRON", "AUX", "PART", "VERB", "PUNCT")
    assert task.labels == ("AUX", "INTJ", "PART", "PRON", "PUNCT", "VERB")
    xpos = UdPosTask("conll/ud-pos", UdPosConfig(dev_file=path, tag_column="xpos"))
    assert xpos.examples("dev")[0].tags == ("PRP", "VBP", "RB", "VB", ".")


WORDS3 = "".join(f"{i}\tw{i}\tw\tX\tX\t_\t0\troot\t_\t_\n" for i in (1, 2, 3))
MWT = "2-3\tw23\t_\t_\t_\t_\t_\t_\t_\t_\n"
EMPTY = "2.{m}\te\t_\t_\t_\t_\t_\t_\t_\t_\n"


def _sentence(before: dict[int, str]) -> str:
    """WORDS3 with extra lines inserted before word i (i = 4: at the end)."""
    lines = [*WORDS3.splitlines(keepends=True), ""]
    return "".join(before.get(i, "") + line for i, line in enumerate(lines, start=1))


@pytest.mark.parametrize(
    ("extra", "line", "match"),
    [
        ({3: MWT}, 3, "multiword token 2-3 out of place: it must precede word 2, the next is 3"),
        ({2: MWT.replace("2-3", "2-2")}, 2, "multiword token 2-2 does not span two or more words"),
        ({2: MWT.replace("2-3", "2-9")}, 2, r"multiword token 2-9 ends after the last word \(3\)"),
        ({1: MWT.replace("2-3", "1-2"), 2: MWT}, 3, r"multiword token 2-3 overlaps 1-2 \(line 1\)"),
        ({3: EMPTY.format(m=0)}, 3, r"empty node 2.0 out of sequence \(expected 2.1\)"),
        ({3: EMPTY.format(m=1) + EMPTY.format(m=3)}, 4, r"empty node 2.3 out of sequence \(expected 2.2\)"),
        ({2: EMPTY.format(m=1)}, 2, "empty node 2.1 out of place: it must follow word 2, not word 1"),
        ({2: MWT.replace("2-3", "2-3.1")}, 2, "malformed ID '2-3.1'"),
    ],
)
def test_conllu_multiword_and_empty_node_ids_are_checked(tmp_path, extra, line, match):
    """Ranges and empty nodes were skipped whatever their IDs said: `2-9` in a 3-word sentence
    (a truncated sentence), `2.0` or a range after its words passed silently."""
    path = write(tmp_path / "x.conllu", _sentence(extra))
    with pytest.raises(DataError, match=f"{path}:{line}: ID: {match}"):
        UdPosTask("u", UdPosConfig(train_file=path)).examples("train")


def test_conllu_well_placed_ranges_and_empty_nodes_are_skipped(tmp_path):
    path = write(tmp_path / "x.conllu", _sentence({2: MWT, 3: EMPTY.format(m=1) + EMPTY.format(m=2)}))
    assert UdPosTask("u", UdPosConfig(train_file=path)).examples("train")[0].words == ("w1", "w2", "w3")


def test_conllu_form_lemma_and_misc_may_hold_spaces(tmp_path):
    path = write(tmp_path / "x.conllu", "1\tNew York\tNew York\tPROPN\tNNP\t_\t0\troot\t_\tGloss=a b\n")
    assert UdPosTask("u", UdPosConfig(train_file=path)).examples("train")[0].words == ("New York",)


def test_conllu_without_sent_ids(tmp_path):
    path = write(tmp_path / "x.conllu", "1\ta\ta\tDET\tDT\t_\t0\troot\t_\t_\n\n1\tb\tb\tX\tX\t_\t0\troot\t_\t_\n")
    task = UdPosTask("conll/ud-pos", UdPosConfig(test_file=path))
    assert [e.id for e in task.examples("test")] == ["test-0", "test-1"]


def test_columns_task_pos_and_tab_separator(tmp_path):
    path = write(tmp_path / "train.tsv", "New York\tNNP\tB-LOC\nis\tVBZ\tO\n\nok\tJJ\tO\n")
    pos = ColumnsTask("conll/columns", ColumnsConfig(train_file=path, tag_column=1, scheme="none", separator="tab"))
    assert pos.main_metric == "accuracy"
    assert pos.examples("train")[0].words == ("New York", "is")
    assert pos.labels == ("JJ", "NNP", "VBZ")
    spans = ColumnsTask("conll/columns", ColumnsConfig(train_file=path, separator="tab"))
    assert spans.main_metric == "f1" and spans.examples("train")[0].tags == ("B-LOC", "O")


# --- bad input: every error names file:line ----------------------------------------------------


def raises_at(task, split: str, where: str, match: str) -> None:
    with pytest.raises(DataError, match=match) as info:
        task.examples(split)
    assert where in str(info.value), str(info.value)


def test_wrong_column_count(tmp_path):
    path = write(tmp_path / "train.txt", "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\ncall NN O\n")
    raises_at(ner(path), "train", f"{path}:4:", r"expected 4 columns \(as on line 1\), found 3")


@pytest.mark.parametrize("tag", ["X-FOO", "I-", "B", "PER"])
def test_bad_tag(tmp_path, tag):
    path = write(tmp_path / "train.txt", f"EU B-ORG\nrejects {tag}\n")
    raises_at(ner(path), "train", f"{path}:2:", f"bad tag '{tag}'")


def test_bad_tag_in_columns_task(tmp_path):
    path = write(tmp_path / "train.txt", "a O\nb E-X\n")
    raises_at(ColumnsTask("c", ColumnsConfig(train_file=path)), "train", f"{path}:2:", "bad tag 'E-X' for scheme BIO")


def test_empty_file(tmp_path):
    path = write(tmp_path / "train.txt", "")
    raises_at(ner(path), "train", f"{path}:1:", "file is empty")
    write(path, "-DOCSTART- -X- -X- O\n\n")
    raises_at(ner(path), "train", f"{path}:1:", "no sentences")


def test_bad_encoding(tmp_path):
    path = write(tmp_path / "train.txt", "Zürich B-LOC\n\nK\xf6ln B-LOC\n", encoding="latin-1")
    raises_at(ner(path), "train", f"{path}:1:", "not valid UTF-8")
    path = write(tmp_path / "ud.conllu", "1\tK\xf6ln\tx\tPROPN\tNNP\t_\t0\troot\t_\t_\n", encoding="latin-1")
    raises_at(UdPosTask("u", UdPosConfig(train_file=path)), "train", f"{path}:1:", "not valid UTF-8")


def test_whitespace_separator_is_spaces_and_tabs(tmp_path):
    """As documented ("runs of spaces/tabs"): a no-break space or U+2028 inside a word is part of
    the word (str.split() made it a column: a wrong column count, or a shifted tag column when
    every line had one); a line holding only a no-break space is a token, not a sentence break."""
    path = write(tmp_path / "train.txt", "1\u00a0000 CD O\n \t \nVoir\u2028ici VB O\n")
    task = ColumnsTask("c", ColumnsConfig(train_file=path))
    assert [e.words for e in task.examples("train")] == [("1\u00a0000",), ("Voir\u2028ici",)]
    path = write(tmp_path / "nbsp.txt", "a O\n\u00a0\nb O\n")
    raises_at(ner(path), "train", f"{path}:2:", r"expected 2 columns \(as on line 1\), found 1")


def test_line_endings(tmp_path):
    """CRLF is fine; a CR-only (classic Mac) file is one line, which str.split() used to cut into
    columns: it read as a single one-token sentence with the last tag of the file."""
    path = write(tmp_path / "train.txt", "EU B-ORG\r\nrejects O\r\n\r\nGerman B-MISC\r\n")
    assert [e.words for e in ner(path).examples("train")] == [("EU", "rejects"), ("German",)]
    path = write(tmp_path / "mac.txt", "EU B-ORG\rrejects O\r\rGerman B-MISC\r")
    raises_at(ner(path), "train", f"{path}:1:", "carriage return .* column 9: CR-only")
    path = write(tmp_path / "mac.conllu", "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\r\r")
    raises_at(UdPosTask("u", UdPosConfig(train_file=path)), "train", f"{path}:1:", "carriage return")


def test_conllu_column_count(tmp_path):
    path = write(tmp_path / "x.conllu", "# sent_id = a\n1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\n")
    raises_at(UdPosTask("u", UdPosConfig(train_file=path)), "train", f"{path}:2:", "10 tab-separated columns, found 9")


def test_conllu_sent_id_collision(tmp_path):
    path = write(tmp_path / "x.conllu", CONLLU.replace("s-2", "s-1"))
    raises_at(UdPosTask("u", UdPosConfig(train_file=path)), "train", f"{path}:12:", "'s-1' already used on line 1")


def test_conllu_word_ids_and_missing_tags(tmp_path):
    path = write(tmp_path / "x.conllu", CONLLU.replace("5\t.\t.", "6\t.\t."))
    raises_at(UdPosTask("u", UdPosConfig(train_file=path)), "train", f"{path}:10:", "out of sequence")
    path = write(tmp_path / "y.conllu", CONLLU.replace("INTJ\tUH", "INTJ\t_"))
    raises_at(UdPosTask("u", UdPosConfig(train_file=path, tag_column="xpos")), "train", f"{path}:13:", "no XPOS tag")


def test_missing_files_and_splits(tmp_path):
    with pytest.raises(UserError, match="no dev file configured"):
        ner(write(tmp_path / "train.txt", NER)).examples("dev")
    with pytest.raises(UserError, match="tag set is read from train_file"):
        _ = SpanTaggingTask("conll/ner", SpanTaggingConfig()).labels
    with pytest.raises(DataError, match="file not found"):
        ner(tmp_path / "nope.txt").examples("train")


def test_config_checks():
    with pytest.raises(ValueError, match="max_examples must be a positive integer"):
        SpanTaggingConfig(max_examples=0)
    with pytest.raises(ValueError, match="dev_from_train must be a non-negative integer"):
        ChunkingConfig(dev_from_train=-1)
    with pytest.raises(ValueError, match="tag_scheme must be one of 'BIO', 'BIOES', not 'IOBES'"):
        SpanTaggingConfig(tag_scheme="IOBES")
    with pytest.raises(ValueError, match="scheme must be one of"):
        ColumnsConfig(scheme="bio")
    with pytest.raises(ValueError, match="tag_column must be one of 'upos', 'xpos'"):
        UdPosConfig(tag_column="pos")

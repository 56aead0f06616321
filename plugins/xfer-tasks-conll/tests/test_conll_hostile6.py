"""Hostile-review regressions (6): conll/ud-pos predictions as a CoNLL-U file UD tools read; CoNLL-U
sentences without words, treebanks without their text, negative columns across files."""

from __future__ import annotations

import pytest

from xfer.core.errors import DataError
from xfer.core.tasks import TaggingExample
from xfer.tasks.conll.config import ColumnsConfig, SpanTaggingConfig, UdParseConfig, UdPosConfig
from xfer.tasks.conll.parsing import UdParseTask
from xfer.tasks.conll.readers import read_conllu
from xfer.tasks.conll.tasks import ColumnsTask, SpanTaggingTask, UdPosTask

# a comment, a multiword token (`du` = `de le`), an empty node, and a sentence without sent_id
FRENCH = (
    "# sent_id = fr-1\n"
    "# text = Il parle du chat.\n"
    "1\tIl\til\tPRON\tCLS\t_\t2\tnsubj\t_\t_\n"
    "2\tparle\tparler\tVERB\tV\t_\t0\troot\t_\t_\n"
    "3-4\tdu\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "3\tde\tde\tADP\tP\t_\t5\tcase\t_\t_\n"
    "4\tle\tle\tDET\tDET\t_\t5\tdet\t_\t_\n"
    "4.1\tvu\tvoir\tVERB\tV\t_\t_\t_\t2:conj\t_\n"
    "5\tchat\tchat\tNOUN\tNC\t_\t2\tobl\t_\tSpaceAfter=No\n"
    "6\t.\t.\tPUNCT\tPONCT\t_\t2\tpunct\t_\t_\n"
    "\n"
    "1\tOui\toui\tINTJ\tADV\t_\t0\troot\t_\t_\n"
    "\n"
)


def _with_column(text: str, column: int, tags: dict[str, str]) -> str:
    """`text` with field `column` of each word line whose FORM is a key of `tags` replaced."""
    out = []
    for line in text.split("\n"):
        fields = line.split("\t")
        if len(fields) == 10 and fields[0].isdigit() and fields[1] in tags:
            fields[column] = tags[fields[1]]
        out.append("\t".join(fields))
    return "\n".join(out)


@pytest.mark.parametrize(("tag_column", "column"), [("upos", 3), ("xpos", 4)])
def test_ud_pos_writes_the_read_sentences_with_the_predicted_tags(tmp_path, tag_column, column):
    """Only `word<TAB>gold<TAB>predicted` (`dev.conll`) was written: no comments, no multiword
    tokens, which the CoNLL 2018 evaluator needs to align the file with the gold one, and no UD tool
    reads the format. `dev.conllu` is now the dev file as read, the predicted tag in its column."""
    path = tmp_path / "dev.conllu"
    path.write_text(FRENCH, encoding="utf-8")
    task = UdPosTask("conll/ud-pos", UdPosConfig(dev_file=str(path), tag_column=tag_column))
    examples = task.examples("dev")
    assert [e.id for e in examples] == ["fr-1", "dev-1"]
    changed = {"parle": "AUX", "chat": "PROPN", "Oui": "ADV"}
    predictions = {e.id: [changed.get(w, t) for w, t in zip(e.words, e.tags, strict=True)] for e in examples}
    out = task.write_predictions(tmp_path / "out", "dev", examples, predictions)
    assert out == tmp_path / "out" / "dev.conll"  # the documented file is still written and returned
    written = (tmp_path / "out" / "dev.conllu").read_text(encoding="utf-8")
    assert written == _with_column(FRENCH, column, changed)
    back = read_conllu(tmp_path / "out" / "dev.conllu", tag_column=tag_column)
    assert [s.tags for s in back] == [predictions["fr-1"], predictions["dev-1"]]
    assert FRENCH.count("\t_\t_\t_\t_\t_\t_\t_\t_\n") == written.count("\t_\t_\t_\t_\t_\t_\t_\t_\n")  # `3-4 du`


def test_ud_pos_conllu_of_sentences_built_in_code(tmp_path):
    """A sentence not read from the split's file gets `# sent_id`, ID, FORM and the tag in its column."""
    task = UdPosTask("conll/ud-pos", UdPosConfig(tag_column="xpos"))
    examples = [TaggingExample(id="a", words=("New York", "."), tags=("NNP", "."))]
    task.write_predictions(tmp_path, "test", examples, {"a": ["NNP", "."]})
    assert (tmp_path / "test.conllu").read_text(encoding="utf-8") == (
        "# sent_id = a\n1\tNew York\t_\t_\tNNP\t_\t_\t_\t_\t_\n2\t.\t_\t_\t.\t_\t_\t_\t_\t_\n\n"
    )


def test_ud_pos_refuses_a_tag_with_whitespace_before_writing_either_file(tmp_path):
    """CoNLL-U has no whitespace in UPOS/XPOS: `PROPN X` would make a file UD tools refuse."""
    task = UdPosTask("conll/ud-pos", UdPosConfig())
    examples = [TaggingExample(id="a", words=("I", "run"), tags=("PRON", "VERB"))]
    with pytest.raises(ValueError, match=r"sentence 'a', word 2 \('run'\): predicted tag 'VERB X' holds whitespace"):
        task.write_predictions(tmp_path, "dev", examples, {"a": ["PRON", "VERB X"]})
    assert not (tmp_path / "dev.conll").exists() and not (tmp_path / "dev.conllu").exists()


# --- hostile files ---------------------------------------------------------------------------------

WORDS = "1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t0\troot\t_\t_\n"


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("comment", ["", "# sent_id = a\n"])
def test_a_sentence_of_multiword_tokens_only_is_named_as_such(tmp_path, comment):
    """A sentence whose word lines were lost under its `1-2 du` was "sentence has no words (comments
    without word lines)", also when it had no comment: the message now names the range and its line."""
    path = _write(tmp_path, "mwt.conllu", WORDS + "\n" + comment + "1-2\tdu\t_\t_\t_\t_\t_\t_\t_\t_\n\n" + WORDS)
    line = 5 if comment else 4
    task = UdPosTask("conll/ud-pos", UdPosConfig(train_file=str(path)))
    with pytest.raises(DataError, match=rf"mwt\.conllu:{line}: ID: sentence has no words: multiword token 1-2 is not"):
        task.examples("train")


def test_a_sentence_of_empty_nodes_only_is_named_as_such(tmp_path):
    path = _write(tmp_path, "empty.conllu", "0.1\tvu\t_\t_\t_\t_\t_\t_\t_\t_\n\n" + WORDS)
    with pytest.raises(DataError, match=r"empty\.conllu:1: sentence has no words, only empty nodes"):
        read_conllu(path)


def test_a_treebank_without_its_text_is_refused(tmp_path):
    """UD's licensed treebanks ship with every FORM `_`: read as they were, every word was '_' and a
    tagger or parser trained on tags alone, without a word. One `_` among words is the underscore."""
    hidden = WORDS.replace("\tThe\t", "\t_\t").replace("\tdog\t", "\t_\t")
    path = _write(tmp_path, "hidden.conllu", "# sent_id = a\n" + hidden)
    for task in (
        UdPosTask("conll/ud-pos", UdPosConfig(train_file=str(path))),
        UdParseTask("conll/ud-parse", UdParseConfig(train_file=str(path))),
    ):
        with pytest.raises(DataError, match=r"hidden\.conllu:2: FORM: every FORM of the file is '_'"):
            task.examples("train")
    underscore = _write(tmp_path, "under.conllu", WORDS.replace("\tThe\t", "\t_\t"))
    assert read_conllu(underscore)[0].words == ["_", "dog"]


@pytest.mark.parametrize(
    ("make", "key"),
    [
        (lambda train, dev: SpanTaggingTask("conll/ner", SpanTaggingConfig(train_file=train, dev_file=dev)), "tag"),
        (lambda train, dev: ColumnsTask("conll/columns", ColumnsConfig(train_file=train, dev_file=dev)), "tag"),
        (
            lambda train, dev: ColumnsTask(
                "conll/columns",
                ColumnsConfig(train_file=train, dev_file=dev, word_column=-3, scheme="none"),
            ),
            "word",
        ),
    ],
)
def test_a_negative_column_must_name_the_same_column_in_every_file(tmp_path, make, key):
    """With the default `tag_column: -1`, a dev file without the train file's NER column (CoNLL-2003
    `WORD POS CHUNK`) gave its chunk tags as the dev entities: gold F1 100, a model near 0, silently."""
    train = _write(tmp_path, "train.txt", "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n")
    dev = _write(tmp_path, "dev.txt", "EU NNP B-NP\nrejects VBZ B-VP\n")
    task = make(str(train), str(dev))
    assert task.labels
    with pytest.raises(DataError, match=rf"dev\.txt:1: {key}_column: {key}_column -\d is column \d \(0-based\) of "):
        task.examples("dev")
    same = make(str(train), str(_write(tmp_path, "dev4.txt", "Paris NNP B-NP B-LOC\n")))
    assert len(same.examples("dev")) == 1  # a dev file with the train file's columns


def test_a_positive_column_reads_files_of_other_widths(tmp_path):
    """A column counted from the start is the same column in every file: no error."""
    train = _write(tmp_path, "train.txt", "EU NNP B-NP B-ORG\n")
    dev = _write(tmp_path, "dev.txt", "EU NNP B-NP\n")
    task = ColumnsTask("conll/columns", ColumnsConfig(train_file=str(train), dev_file=str(dev), tag_column=2))
    assert task.examples("dev")[0].tags == ("B-NP",)

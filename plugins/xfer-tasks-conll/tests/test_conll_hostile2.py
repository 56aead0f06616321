"""Hostile-review regressions (2): predicted tags outside the task's tag set or scheme; CoNLL-U
IDs and HEADs with leading zeros."""

from __future__ import annotations

import pytest

from xfer.core.errors import DataError
from xfer.core.tasks import TaggingExample
from xfer.tasks.conll.config import ColumnsConfig, SpanTaggingConfig, UdParseConfig, UdPosConfig
from xfer.tasks.conll.parsing import UdParseTask
from xfer.tasks.conll.readers import read_conllu_rows, read_conllu_trees
from xfer.tasks.conll.tasks import ColumnsTask, SpanTaggingTask, UdPosTask

TRAIN = "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n\n"
DEV = [TaggingExample(id="a", words=("Peter", "Blackburn", "in", "Paris"), tags=("B-PER", "I-PER", "O", "B-LOC"))]


def _bio_task(tmp_path) -> SpanTaggingTask:
    path = tmp_path / "train.txt"
    path.write_text(TRAIN, encoding="utf-8")
    return SpanTaggingTask("conll/ner", SpanTaggingConfig(train_file=str(path), tag_scheme="BIO"))


@pytest.mark.parametrize(
    ("predicted", "message"),
    [
        # seqeval read S-PER as a one-word span: F1 80 on a BIO task whose model cannot predict S-
        (["S-PER", "I-PER", "O", "B-LOC"], r"word 1 \('Peter'\): predicted bad tag 'S-PER' for scheme BIO"),
        (["B-PER", "E-PER", "O", "B-LOC"], r"word 2 \('Blackburn'\): predicted bad tag 'E-PER'"),
        (["B_PER", "I-PER", "O", "B-LOC"], r"bad tag 'B_PER'"),
        # a type the train file does not have (nor this sentence's gold): a span the model cannot predict
        (["B-PER", "I-PER", "O", "B-GPE"], r"word 4 \('Paris'\): predicted tag 'B-GPE' is not in the task's tag set"),
    ],
)
def test_predicted_tags_outside_the_task_tag_set_or_scheme_are_refused(tmp_path, predicted, message):
    task = _bio_task(tmp_path)
    with pytest.raises(ValueError, match=message):
        task.evaluate(DEV, {"a": predicted})
    with pytest.raises(ValueError, match=message):  # nor written as if the model had predicted them
        task.write_predictions(tmp_path / "out", "dev", DEV, {"a": predicted})
    assert not (tmp_path / "out" / "dev.conll").exists()


def test_tags_the_model_can_predict_are_still_scored(tmp_path):
    """The labels of the train file (as the model predicts them), ill-formed sequences included,
    and the sentence's own gold tags (B-LOC is in no train sentence): gold as predictions is 100."""
    task = _bio_task(tmp_path)
    assert set(task.labels) == {"B-ORG", "B-PER", "I-PER", "O"}
    assert task.evaluate(DEV, {"a": list(DEV[0].tags)})["f1"] == 100.0
    assert task.evaluate(DEV, {"a": ["I-PER", "I-PER", "O", "B-ORG"]})["f1"] == pytest.approx(50.0)


def test_bioes_task_refuses_iob1_style_garbage_and_pos_task_a_foreign_tag(tmp_path):
    bioes = ColumnsTask("conll/columns", ColumnsConfig(scheme="BIOES"))  # no train file: the form is checked
    gold = [TaggingExample(id="a", words=("x",), tags=("S-PER",))]
    with pytest.raises(ValueError, match=r"predicted bad tag 'U-PER' for scheme BIOES"):
        bioes.evaluate(gold, {"a": ["U-PER"]})
    path = tmp_path / "train.conllu"
    path.write_text("1\tI\t_\tPRON\t_\t_\t2\tnsubj\t_\t_\n2\trun\t_\tVERB\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    pos = UdPosTask("conll/ud-pos", UdPosConfig(train_file=str(path)))
    gold = [TaggingExample(id="a", words=("I", "run"), tags=("PRON", "VERB"))]
    assert pos.evaluate(gold, {"a": ["PRON", "PRON"]}) == {"accuracy": 50.0}
    with pytest.raises(ValueError, match=r"predicted tag 'PRP' is not in the task's tag set \(the 2 tags"):
        pos.evaluate(gold, {"a": ["PRP", "VBP"]})  # XPOS predictions scored against UPOS: 0, silently


def _line(ident: str, head: str, rel: str = "dep") -> str:
    return f"{ident}\tw\t_\tNOUN\t_\t_\t{head}\t{rel}\t_\t_\n"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        # `01` was word 1 and the sentence read as if well formed
        (_line("01", "0", "root") + _line("2", "1"), 1, r"ID: word ID '01' out of sequence \(expected 1\) \(written"),
        (_line("1", "0", "root") + _line("02", "1"), 2, r"word ID '02' out of sequence \(expected 2\) \(written"),
        ("01-02\tww\t_\t_\t_\t_\t_\t_\t_\t_\n" + _line("1", "0", "root") + _line("2", "1"), 1, "malformed ID '01-02'"),
        (_line("1", "0", "root") + "1.01\tw\t_\t_\t_\t_\t_\t_\t_\t_\n" + _line("2", "1"), 2, "malformed ID '1.01'"),
    ],
    ids=["word-01", "word-02", "multiword-01-02", "empty-node-1.01"],
)
def test_conllu_ids_with_leading_zeros_are_refused(tmp_path, text, line, message):
    path = tmp_path / "x.conllu"
    path.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=message) as error:
        read_conllu_rows(path)
    assert f"x.conllu:{line}:" in str(error.value)


@pytest.mark.parametrize("head", ["01", "00", "002"])
def test_conllu_heads_with_leading_zeros_are_refused(tmp_path, head):
    """HEAD `00` was ROOT and `01` word 1, silently; the tree was scored and trained on as read."""
    path = tmp_path / "x.conllu"
    path.write_text(_line("1", "2", "amod") + _line("2", "0", "root") + _line("3", head) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"x\.conllu:3: HEAD: HEAD '{head}' is not a word index .* leading zero"):
        read_conllu_trees(path)
    task = UdParseTask("conll/ud-parse", UdParseConfig(train_file=str(path)))
    with pytest.raises(DataError, match="leading zero"):
        _ = task.labels


def test_conllu_plain_integers_zero_root_and_empty_node_zero_are_fine(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_text("0.1\te\t_\t_\t_\t_\t_\t_\t_\t_\n" + _line("1", "0", "root") + _line("2", "1") + "\n")
    (tree,) = read_conllu_trees(path)
    assert tree.heads == [0, 1]


def test_ill_formed_bioes_is_read_as_seqeval_reads_it_by_every_scorer_of_the_plugin(tmp_path):
    """Pins the reading of ill-formed BIOES that xfer reports (and that xfer.cvt, which scores with
    `task.evaluate`, reports too): an `E-` ends a span and the next `E-` starts a new one, so
    `B-PER E-PER E-PER` holds two spans, 0-1 and 2-2. The thesis's CVT code (`get_span_labels`)
    reads one span 0-2 there and would report F1 0 for these predictions, not 100."""
    gold = [TaggingExample(id="a", words=("Peter", "Blackburn", "Paris"), tags=("B-PER", "E-PER", "S-PER"))]
    predicted = {"a": ["B-PER", "E-PER", "E-PER"]}
    task = SpanTaggingTask("conll/ner")  # BIOES
    assert task.evaluate(gold, predicted)["f1"] == 100.0
    out = task.write_predictions(tmp_path, "dev", gold, predicted)
    assert [line.split("\t")[2] for line in out.read_text().splitlines()[:3]] == ["B-PER", "I-PER", "B-PER"]


@pytest.mark.parametrize("task_class", ["pos", "parse"])
@pytest.mark.parametrize("explicit_first", [True, False])
def test_a_default_sentence_id_equal_to_a_sent_id_says_which_sentence_has_none(tmp_path, task_class, explicit_first):
    """A sentence without `# sent_id` is `<split>-<n>`; another sentence's `# sent_id = dev-1` can
    equal it. Refused, but the message "sentence id 'dev-1' already used on line 1" named a
    sentence without a sent_id, or pointed at one."""
    implicit = _line("1", "0", "root") + "\n"
    if explicit_first:  # line 1: sent_id dev-1; line 4: no sent_id, the second sentence, so dev-1
        text, implicit_line, explicit_line, error_line = "# sent_id = dev-1\n" + implicit * 2, 4, 1, 4
    else:  # line 1: no sent_id, the first sentence, so dev-0; line 3: sent_id dev-0
        text, implicit_line, explicit_line, error_line = implicit + "# sent_id = dev-0\n" + implicit, 1, 3, 3
    path = tmp_path / "dev.conllu"
    path.write_text(text, encoding="utf-8")
    if task_class == "pos":
        task = UdPosTask("conll/ud-pos", UdPosConfig(train_file=str(path), dev_file=str(path)))
    else:
        task = UdParseTask("conll/ud-parse", UdParseConfig(train_file=str(path), dev_file=str(path)))
    with pytest.raises(DataError) as error:
        task.examples("dev")
    message = str(error.value)
    assert message.startswith(f"{path}:{error_line}: sent_id: sentence id ")
    assert f"the sentence on line {implicit_line} has no sent_id, so its id is dev-<n>" in message
    assert f"the sentence on line {explicit_line} has that sent_id" in message


@pytest.mark.parametrize(
    ("make", "text", "column"),
    [
        (lambda p: ColumnsTask("c", ColumnsConfig(train_file=p, word_column=-1)), "EU B-ORG\nsays O\n", 1),
        (lambda p: ColumnsTask("c", ColumnsConfig(train_file=p, word_column=1, scheme="none")), "EU NNP\n", 1),
        (lambda p: SpanTaggingTask("n", SpanTaggingConfig(train_file=p)), "O\nB-PER\n", 0),  # one column
        (lambda p: SpanTaggingTask("n", SpanTaggingConfig(train_file=p, tag_column=0)), "EU B-ORG\n", 0),
    ],
    ids=["columns-word-1", "columns-none", "ner-one-column", "ner-tag-0"],
)
def test_a_tag_column_that_is_the_word_column_is_refused(tmp_path, make, text, column):
    """`word_column: -1` next to the default `tag_column: -1` (or a one-column file) made every tag
    its own input word: training copied it and dev F1 was ~100, silently."""
    path = tmp_path / "train.txt"
    path.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"train\.txt:1: tag_column: .* both column {column} .* the input word"):
        make(str(path)).examples("train")

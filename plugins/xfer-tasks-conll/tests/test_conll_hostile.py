"""Hostile-review regressions: prediction files score as evaluated; CoNLL-U comments; BOMs inside files."""

from __future__ import annotations

import random

import pytest

from xfer.core.errors import DataError
from xfer.core.tasks import TaggingExample
from xfer.tasks.conll.config import ColumnsConfig, SpanTaggingConfig
from xfer.tasks.conll.readers import read_conllu_rows
from xfer.tasks.conll.tasks import ColumnsTask, SpanTaggingTask


def _conlleval_chunks(tags: list[str]) -> set[tuple[int, int, str]]:
    """Chunks as conlleval.pl's startOfChunk/endOfChunk find them in B/I/O tags (`-r` off)."""
    chunks, start, prev_tag, prev_type = set(), None, "O", ""
    for i, label in enumerate([*tags, "O"]):
        tag, kind = (label, "") if label == "O" else (label[0], label[2:])
        ends = (prev_tag in "BI" and tag in "BO") or (prev_tag != "O" and prev_type != kind)
        starts = tag == "B" or (tag == "I" and (prev_tag == "O" or prev_type != kind))
        if start is not None and (ends or starts):
            chunks.add((start, i - 1, prev_type))
            start = None
        if starts:
            start = i
        prev_tag, prev_type = tag, kind
    return chunks


def _conlleval_f1(text: str) -> float:
    """conlleval's overall FB1 of a `word gold predicted` file (sentences separated by blank lines)."""
    correct = found_gold = found_pred = 0
    for block in text.strip("\n").split("\n\n"):
        rows = [line.split("\t") for line in block.split("\n")]
        gold, pred = _conlleval_chunks([r[1] for r in rows]), _conlleval_chunks([r[2] for r in rows])
        correct, found_gold, found_pred = correct + len(gold & pred), found_gold + len(gold), found_pred + len(pred)
    precision, recall = correct / found_pred if found_pred else 0, correct / found_gold if found_gold else 0
    return 100 * 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def test_ill_formed_bioes_predictions_are_written_as_the_spans_that_were_scored(tmp_path):
    """An argmax tagger predicts ill-formed BIOES. Renaming prefixes (S- -> B-, E- -> I-) wrote
    `S-PER I-PER E-PER E-PER` as one 4-word span, where the scorer had found three spans, so
    conlleval on the written file disagreed with the F1 xfer reported (72.7 vs 61.5 here)."""
    gold = [
        TaggingExample(id="a", words=("Peter", "Blackburn", "Paris", "Hilton"), tags=("B-PER", "E-PER") * 2),
        TaggingExample(id="b", words=("EU", "rejects"), tags=("S-ORG", "O")),
    ]
    predicted = {"a": ["S-PER", "I-PER", "E-PER", "E-PER"], "b": ["S-ORG", "O"]}
    task = SpanTaggingTask("conll/ner")  # tag_scheme BIOES
    out = task.write_predictions(tmp_path, "dev", gold, predicted)
    assert [line.split("\t")[2] for line in out.read_text().split("\n")[:4]] == ["B-PER", "B-PER", "I-PER", "B-PER"]
    # scored: PER 0-0, 1-2, 3-3 and ORG 0-0 for 3 gold spans, 1 correct: P 1/4, R 1/3
    assert task.evaluate(gold, predicted)["f1"] == pytest.approx(100 * 2 / 7)
    assert _conlleval_f1(out.read_text()) == pytest.approx(100 * 2 / 7)


@pytest.mark.parametrize(
    "task", [SpanTaggingTask("conll/ner"), ColumnsTask("conll/columns", ColumnsConfig(scheme="BIOES"))]
)
def test_conlleval_on_the_written_file_equals_the_reported_f1_on_random_bioes(tmp_path, task):
    rng = random.Random(7)
    labels = ["O", *(f"{p}-{k}" for p in "BIES" for k in ("PER", "LOC"))]
    gold = [
        TaggingExample(id=str(i), words=("w",) * 6, tags=("B-LOC", "E-LOC", "O", "S-PER", "B-PER", "E-PER"))
        for i in range(40)
    ]
    predicted = {example.id: [rng.choice(labels) for _ in example.words] for example in gold}
    out = task.write_predictions(tmp_path, "dev", gold, predicted)
    assert _conlleval_f1(out.read_text()) == pytest.approx(task.evaluate(gold, predicted)["f1"])
    perfect = {example.id: list(example.tags) for example in gold}
    out = task.write_predictions(tmp_path, "dev", gold, perfect)
    assert _conlleval_f1(out.read_text()) == 100.0


def _word(ident: int, head: int = 0) -> str:
    return f"{ident}\tw{ident}\t_\tNOUN\t_\t_\t{head}\t{'root' if head == 0 else 'dep'}\t_\t_\n"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        # a comment among the words took over the sentence id ('b' instead of 'a')
        ("# sent_id = a\n" + _word(1) + "# sent_id = b\n" + _word(2, 1) + "\n", 3, "comment after the word lines"),
        ("# sent_id = a\n1-2\tww\t_\t_\t_\t_\t_\t_\t_\t_\n# c\n" + _word(1) + _word(2, 1), 3, "comment after"),
        ("# sent_id = a\n# sent_id = b\n" + _word(1) + "\n", 2, "second sent_id of one sentence .first on line 1"),
        ("# sent_id =  \n" + _word(1) + "\n", 1, "empty sent_id"),  # was the fallback id `<split>-<n>`
    ],
)
def test_conllu_comments_that_would_rename_a_sentence_are_errors(tmp_path, text, line, message):
    path = tmp_path / "x.conllu"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=message) as error:
        read_conllu_rows(path)
    assert f"x.conllu:{line}:" in str(error.value)


def test_conllu_comments_before_the_words_are_kept(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_text("# newdoc id = d\n# sent_id = a\n# text = w1\n" + _word(1) + "\n# sent_id = b\n" + _word(1))
    assert [(s.sent_id, s.line) for s in read_conllu_rows(path)] == [("a", 1), ("b", 6)]


def test_a_bom_inside_a_column_file_is_an_error_not_a_word(tmp_path):
    """`cat a.txt b.txt` of files saved with a BOM: the second BOM made `\\ufeff-DOCSTART-` a
    one-word sentence (tag O) and `\\ufeffPeter` a word, silently. The file's own first BOM is fine."""
    path = tmp_path / "cat.txt"
    part = "\ufeff-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\n\n"
    path.write_text(part + part, encoding="utf-8")
    with pytest.raises(DataError, match="byte-order mark") as error:
        SpanTaggingTask("conll/ner", SpanTaggingConfig(train_file=str(path))).examples("train")
    assert "cat.txt:5:" in str(error.value)
    path.write_text(part, encoding="utf-8")
    task = SpanTaggingTask("conll/ner", SpanTaggingConfig(train_file=str(path)))
    assert [e.words for e in task.examples("train")] == [("EU",)]


def test_a_bom_inside_a_conllu_file_is_named_as_such(tmp_path):
    path = tmp_path / "cat.conllu"
    path.write_text(("\ufeff# sent_id = a\n" + _word(1) + "\n") * 2, encoding="utf-8")
    with pytest.raises(DataError, match=r"cat\.conllu:4: byte-order mark"):
        read_conllu_rows(path)

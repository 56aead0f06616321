"""Hostile-review regressions (4): `conll/ud-parse` prediction files keep the source sentences
(comments, multiword tokens, empty nodes, every column) and replace only HEAD and DEPREL, so the
CoNLL 2018 evaluator accepts them and they compare line by line with the gold file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xfer.core.tasks import ParsingExample
from xfer.tasks.conll.config import UdParseConfig
from xfer.tasks.conll.parsing import UdParseTask

SHARED = Path(os.environ.get("XFER_DATA", Path(__file__).resolve().parents[3].parent / "shared" / "data"))

# French `du` = `de le`: the multiword token is not its words joined; 5.1 is an empty node
GOLD = (
    "# newdoc id = doc1\n"
    "# sent_id = fr-1\n"
    "# text = Il parle du chat.\n"
    "1\tIl\til\tPRON\t_\tNumber=Sing|Person=3\t2\tnsubj\t2:nsubj\t_\n"
    "2\tparle\tparler\tVERB\t_\tMood=Ind\t0\troot\t0:root\t_\n"
    "3-4\tdu\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "3\tde\tde\tADP\t_\t_\t5\tcase\t5:case\t_\n"
    "4\tle\tle\tDET\t_\tDefinite=Def\t5\tdet\t5:det\t_\n"
    "5\tchat\tchat\tNOUN\tNC\tGender=Masc\t2\tobl:arg\t2:obl:arg\tSpaceAfter=No\n"
    "5.1\tparle\tparler\tVERB\t_\t_\t_\t_\t2:conj\tCopyOf=2\n"
    "6\t.\t.\tPUNCT\t_\t_\t2\tpunct\t2:punct\t_\n"
    "\n"
    "# sent_id = fr-2\n"
    "1\tOui\toui\tINTJ\t_\t_\t0\troot\t0:root\t_\n"
    "2\t!\t!\tPUNCT\t_\t_\t1\tpunct\t1:punct\t_\n"
    "\n"
)

PREDICTED = {
    "fr-1": ([5, 0, 2, 5, 2, 5], ["nsubj", "root", "case", "det", "obl:arg", "punct"]),
    "fr-2": ([2, 0], ["punct", "root"]),
}


def replaced(line: str, head: int, relation: str) -> str:
    fields = line.split("\t")
    fields[6], fields[7] = str(head), relation
    return "\t".join(fields)


def expected_file(gold: str, predicted: dict[str, tuple[list[int], list[str]]]) -> str:
    """`gold` with HEAD/DEPREL of the integer-ID lines replaced, sentence by sentence."""
    out, sent = [], None
    for line in gold.split("\n"):
        if line.startswith("# sent_id = "):
            sent = line.removeprefix("# sent_id = ")
        ident = line.split("\t", 1)[0]
        if line and not line.startswith("#") and ident.isdigit():
            heads, relations = predicted[sent]
            line = replaced(line, heads[int(ident) - 1], relations[int(ident) - 1])
        out.append(line)
    return "\n".join(out)


def test_prediction_file_is_the_source_with_only_head_and_deprel_replaced(tmp_path):
    """Before: `# sent_id`, ID, FORM, UPOS, HEAD, DEPREL only; the `du` line, the empty node, the
    `# text`/`# newdoc` comments and LEMMA/XPOS/FEATS/DEPS/MISC were dropped."""
    path = tmp_path / "dev.conllu"
    path.write_text(GOLD, encoding="utf-8")
    task = UdParseTask("conll/ud-parse", UdParseConfig(train_file=path, dev_file=path))
    dev = task.examples("dev")
    written = task.write_predictions(tmp_path / "out", "dev", dev, PREDICTED)
    text = written.read_text(encoding="utf-8")
    assert text == expected_file(GOLD, PREDICTED)
    assert (
        "3-4\tdu\t_\t_\t_\t_\t_\t_\t_\t_\n" in text
        and "5.1\tparle\tparler\tVERB\t_\t_\t_\t_\t2:conj\tCopyOf=2\n" in text
    )
    # and it reads back as the predicted trees
    again = UdParseTask("conll/ud-parse", UdParseConfig(train_file=path, dev_file=written))
    assert [(list(e.heads), list(e.relations)) for e in again.examples("dev")] == list(PREDICTED.values())


def test_prediction_file_under_universal_relations_and_max_examples(tmp_path):
    """`relations: universal` strips subtypes on read, not in the kept lines: the written DEPREL is
    the prediction; `max_examples` writes the kept sentences only, each whole."""
    path = tmp_path / "dev.conllu"
    path.write_text(GOLD, encoding="utf-8")
    config = UdParseConfig(train_file=path, dev_file=path, relations="universal", max_examples=1)
    task = UdParseTask("conll/ud-parse", config)
    dev = task.examples("dev")
    predicted = {"fr-1": ([2, 0, 5, 5, 2, 2], ["nsubj", "root", "case", "det", "obl", "punct"])}
    text = task.write_predictions(tmp_path / "out", "dev", dev, predicted).read_text(encoding="utf-8")
    first = GOLD[: GOLD.index("\n\n") + 2]
    assert text == expected_file(first, predicted)
    assert "5\tchat\tchat\tNOUN\tNC\tGender=Masc\t2\tobl\t2:obl:arg\tSpaceAfter=No\n" in text


def test_examples_not_read_from_the_file_still_get_a_minimal_file(tmp_path):
    """Sentences built in code have no source lines: ID, FORM, UPOS, HEAD, DEPREL are written."""
    path = tmp_path / "dev.conllu"
    path.write_text(GOLD, encoding="utf-8")
    task = UdParseTask("conll/ud-parse", UdParseConfig(dev_file=path))
    example = ParsingExample("made", ("Hi", "!"), (0, 1), ("root", "punct"), ("INTJ", "PUNCT"))
    text = task.write_predictions(tmp_path / "out", "dev", [example], {"made": ([0, 1], ["root", "punct"])})
    assert text.read_text() == (
        "# sent_id = made\n1\tHi\t_\tINTJ\t_\t_\t0\troot\t_\t_\n2\t!\t_\tPUNCT\t_\t_\t1\tpunct\t_\t_\n\n"
    )


def test_ud_ewt_dev_prediction_file_keeps_every_line_and_column(tmp_path):
    gold = SHARED / "ud_ewt" / "dev.conllu"
    if not gold.is_file():
        pytest.skip(f"UD English-EWT dev file not found: {gold} (set XFER_DATA)")
    task = UdParseTask("conll/ud-parse", UdParseConfig(dev_file=gold))
    dev = task.examples("dev")
    # heads as gold, relations rotated within each sentence: DEPREL differs, HEAD does not
    predicted = {e.id: (list(e.heads), list(e.relations[1:] + e.relations[:1])) for e in dev}
    written = task.write_predictions(tmp_path / "out", "dev", dev, predicted)
    gold_lines = gold.read_text(encoding="utf-8").removeprefix("\ufeff").splitlines()
    out_lines = written.read_text(encoding="utf-8").splitlines()
    assert len(out_lines) == len(gold_lines)
    by_id = {}
    sent = None
    for old, new in zip(gold_lines, out_lines, strict=True):
        if old.startswith("# sent_id = "):
            sent = old.removeprefix("# sent_id = ").strip()
        ident = old.split("\t", 1)[0]
        if old and not old.startswith("#") and ident.isdigit():
            a, b = old.split("\t"), new.split("\t")
            assert a[:6] + a[8:] == b[:6] + b[8:]
            by_id.setdefault(sent, ([], []))
            by_id[sent][0].append(int(b[6]))
            by_id[sent][1].append(b[7])
        else:
            assert new == old
    assert by_id == predicted


@pytest.mark.parametrize(
    ("heads", "problem"),
    [
        ([5, 0, 5, 5, 0, 2], r"2 words attached to ROOT \(2, 5\)"),
        ([5, 0, 4, 3, 2, 2], "heads form a cycle through words 3, 4"),
        ([1, 0, 5, 5, 2, 2], "heads form a cycle through words 1"),  # a word its own head
    ],
)
def test_predictions_that_are_not_trees_are_written_with_a_warning(tmp_path, heads, problem):
    """Argmax decoding (the CVT default) predicts cycles and several root words: the file was
    written without a word, and the CoNLL 2018 evaluator (and reading it back) refused it."""
    path = tmp_path / "dev.conllu"
    path.write_text(GOLD, encoding="utf-8")
    task = UdParseTask("conll/ud-parse", UdParseConfig(dev_file=path))
    dev = task.examples("dev")
    predicted = dict(PREDICTED, **{"fr-1": (heads, PREDICTED["fr-1"][1])})
    with pytest.warns(
        UserWarning,
        match=rf"conll/ud-parse: 1 of 2 predicted sentence\(s\) .* are not trees \(first 'fr-1': {problem}\)",
    ):
        written = task.write_predictions(tmp_path / "out", "dev", dev, predicted)
    assert written.read_text(encoding="utf-8") == expected_file(GOLD, predicted)  # written as predicted


def test_tree_predictions_write_without_a_warning(tmp_path, recwarn):
    path = tmp_path / "dev.conllu"
    path.write_text(GOLD, encoding="utf-8")
    task = UdParseTask("conll/ud-parse", UdParseConfig(dev_file=path))
    task.write_predictions(tmp_path / "out", "dev", task.examples("dev"), PREDICTED)
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]

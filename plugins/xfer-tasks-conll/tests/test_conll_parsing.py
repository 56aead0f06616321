"""conll/ud-parse: CoNLL-U trees, bad-input errors with file:line, CoNLL-2007 scoring."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.tasks.conll.config import UdParseConfig
from xfer.tasks.conll.parsing import UdParseTask, is_punctuation

TREES = """# sent_id = a
# text = I don't know.
1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
3\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_
3.1\tknow\t_\t_\t_\t_\t_\t_\t_\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = b
1\tNew\tnew\tADJ\tJJ\t_\t2\tamod\t_\t_
2\tYork\tYork\tPROPN\tNNP\t_\t0\troot\t_\t_
3\t$\t$\tSYM\t$\t_\t2\tnmod:poss\t_\t_
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def task(path: Path, **options) -> UdParseTask:
    return UdParseTask("conll/ud-parse", UdParseConfig(train_file=path, dev_file=path, **options))


def test_trees_skip_ranges_and_empty_nodes(tmp_path):
    t = task(write(tmp_path / "t.conllu", TREES))
    a, b = t.examples("dev")
    assert (a.id, a.words, a.heads, a.relations) == (
        "a",
        ("I", "do", "know", "."),
        (3, 3, 0, 3),
        ("nsubj", "aux", "root", "punct"),
    )
    assert a.upos == ("PRON", "AUX", "VERB", "PUNCT") and b.relations[2] == "nmod:poss"
    assert t.labels == ("amod", "aux", "nmod:poss", "nsubj", "punct", "root")
    assert task(write(tmp_path / "u.conllu", TREES), relations="universal").labels == (
        "amod",
        "aux",
        "nmod",
        "nsubj",
        "punct",
        "root",
    )
    assert t.info().type == "parsing" and t.info().main_metric == "las"


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        (
            "3\tknow\tknow\tVERB\tVB\t_\t0\troot",
            "3\tknow\tknow\tVERB\tVB\t_\t9\troot",
            6,
            "HEAD: HEAD '9' is not a word index in 0..4",
        ),
        ("1\tI\tI\tPRON\tPRP\t_\t3\tnsubj", "1\tI\tI\tPRON\tPRP\t_\t1\tnsubj", 3, "word 1 is its own head"),
        ("1\tI\tI\tPRON\tPRP\t_\t3\tnsubj", "1\tI\tI\tPRON\tPRP\t_\t_\tnsubj", 3, "HEAD '_' is not a word index"),
        ("2\tdo\tdo\tAUX\tVBP\t_\t3\taux", "2\tdo\tdo\tAUX\tVBP\t_\t3\t_", 5, "DEPREL: no dependency relation"),
        # ':aux' became the relation '' under `relations: universal`; 'aux:' kept a dangling colon
        (
            "2\tdo\tdo\tAUX\tVBP\t_\t3\taux",
            "2\tdo\tdo\tAUX\tVBP\t_\t3\t:aux",
            5,
            "DEPREL: relation ':aux' has an empty",
        ),
        (
            "2\tdo\tdo\tAUX\tVBP\t_\t3\taux",
            "2\tdo\tdo\tAUX\tVBP\t_\t3\taux:",
            5,
            "DEPREL: relation 'aux:' has an empty",
        ),
        # non-ASCII digits: '²' was a ValueError traceback from int(), '３' and '٣' were read as 3
        ("1\tI\tI\tPRON\tPRP\t_\t3\tnsubj", "1\tI\tI\tPRON\tPRP\t_\t²\tnsubj", 3, "HEAD '²' is not a word index"),
        ("1\tI\tI\tPRON\tPRP\t_\t3\tnsubj", "1\tI\tI\tPRON\tPRP\t_\t３\tnsubj", 3, "HEAD '３' is not a word index"),
        ("2\tdo\tdo\tAUX", "²\tdo\tdo\tAUX", 5, "ID: word ID '²' out of sequence"),
        ("2\tdo\tdo\tAUX", "٢\tdo\tdo\tAUX", 5, "ID: word ID '٢' out of sequence"),
        ("2-3\tdon't", "２-３\tdon't", 4, "ID: malformed ID '２-３'"),
        # fields the format forbids: DEPREL ' ' was a relation label, FORM '' a word
        ("2\tdo\tdo\tAUX\tVBP\t_\t3\taux", "2\tdo\tdo\tAUX\tVBP\t_\t3\t ", 5, "DEPREL: ' ' contains whitespace"),
        ("2\tdo\tdo\tAUX", "2\t\tdo\tAUX", 5, "FORM: empty field"),
        ("2\tdo\tdo\tAUX", "2\tdo \tdo\tAUX", 5, "FORM: 'do ' has leading or trailing whitespace"),
        ("2\tdo\tdo\tAUX\tVBP\t_\t3", "2\tdo\tdo\tAUX\tVBP\t_\t3\u00a0", 5, "HEAD: '3\\xa0' contains whitespace"),
        # two root words: accepted before, though the decoder can only ever predict one
        (
            "1\tNew\tnew\tADJ\tJJ\t_\t2\tamod",
            "1\tNew\tnew\tADJ\tJJ\t_\t0\tamod",
            12,
            "HEAD: 2 words (words 1, 2) have HEAD 0; a tree has exactly one root word",
        ),
        (
            "1\tNew\tnew\tADJ\tJJ\t_\t2\tamod",
            "1\tNew\tnew\tADJ\tJJ\t_\t3\tamod",
            11,
            "heads form a cycle through words 1, 3",
        ),
    ],
)
def test_bad_trees_name_file_and_line(tmp_path, old, new, line, message):
    if "cycle" in message:
        text = TREES.replace(old, new).replace("3\t$\t$\tSYM\t$\t_\t2", "3\t$\t$\tSYM\t$\t_\t1")
    else:
        text = TREES.replace(old, new)
    assert text != TREES
    path = write(tmp_path / "bad.conllu", text)
    with pytest.raises(DataError) as caught:
        task(path).examples("train")
    assert str(caught.value).startswith(f"{path}:{line}:") and message in str(caught.value)


def test_punctuation_follows_conll_2007():
    assert is_punctuation(".") and is_punctuation("...") and is_punctuation('"') and is_punctuation("«")
    assert not is_punctuation("$") and not is_punctuation("+") and not is_punctuation("a.") and not is_punctuation("")


def test_las_uas_exclude_punctuation_by_form(tmp_path):
    t = task(write(tmp_path / "t.conllu", TREES))
    dev = t.examples("dev")
    gold = {e.id: (list(e.heads), list(e.relations)) for e in dev}
    assert t.evaluate(dev, gold) == {"las": 100.0, "uas": 100.0, "label_accuracy": 100.0}
    wrong = dict(gold)
    wrong["a"] = ([3, 3, 0, 1], ["nsubj", "aux", "root", "amod"])  # only the punctuation is wrong
    wrong["b"] = ([2, 0, 2], ["amod", "root", "amod"])  # "$" is a symbol, not punctuation: scored
    scores = t.evaluate(dev, wrong)
    assert scores["uas"] == 100.0 and scores["las"] == pytest.approx(100 * 5 / 6)
    with_upos = task(write(tmp_path / "u.conllu", TREES), punctuation="upos")
    assert with_upos.evaluate(with_upos.examples("dev"), wrong)["las"] == pytest.approx(100 * 5 / 6)
    everything = task(write(tmp_path / "n.conllu", TREES), punctuation="none")
    assert everything.evaluate(everything.examples("dev"), wrong)["uas"] == pytest.approx(100 * 6 / 7)


def test_split_with_no_scored_word_is_a_data_error(tmp_path):
    """Only punctuation: LAS/UAS have no word to count. This was a ValueError traceback from
    evaluate (after training); now the reader's pre-flight names the file and the rule."""
    punct = "1\t.\t.\tPUNCT\t.\t_\t0\troot\t_\t_\n2\t,\t,\tPUNCT\t,\t_\t1\tpunct\t_\t_\n"
    path = write(tmp_path / "p.conllu", punct)
    with pytest.raises(
        DataError, match=r"p\.conllu: punctuation: no word of the 1 sentence\(s\) counts .*`punctuation: form`"
    ):
        task(path).examples("dev")
    everything = task(path, punctuation="none")
    dev = everything.examples("dev")
    assert everything.evaluate(dev, {e.id: (list(e.heads), list(e.relations)) for e in dev})["las"] == 100.0
    mixed = task(write(tmp_path / "m.conllu", punct + "\n" + TREES), max_examples=1)
    with pytest.raises(DataError, match=r"1 sentence\(s\) kept by max_examples"):
        mixed.examples("dev")


def test_prediction_errors_and_files(tmp_path):
    t = task(write(tmp_path / "t.conllu", TREES))
    dev = t.examples("dev")
    good = {e.id: (list(e.heads), list(e.relations)) for e in dev}
    for bad, message in [
        ({"a": good["a"]}, "no prediction for sentence 'b'"),
        ({**good, "a": ([3, 3, 0], ["x", "y", "z"])}, "4 words but 3 heads"),
        ({**good, "a": ([3, 3, 0, 7], ["a", "b", "c", "d"])}, "heads must be integers in 0..4"),
        ({**good, "a": "3 3 0 3"}, "must be a pair"),
    ]:
        with pytest.raises(ValueError, match=message):
            t.evaluate(dev, bad)
    path = t.write_predictions(tmp_path / "out", "dev", dev, good)
    again = task(path)
    assert [(e.heads, e.relations) for e in again.examples("dev")] == [(e.heads, e.relations) for e in dev]
    before = path.read_text()
    for bad, message in [({"a": good["a"]}, "no prediction for sentence 'b'"), ({**good, "zz": good["a"]}, "'zz'")]:
        with pytest.raises(ValueError, match=message):  # checked before writing: the previous file stays whole
            t.write_predictions(tmp_path / "out", "dev", dev, bad)
        assert path.read_text() == before


def test_a_predicted_relation_outside_the_relation_set_is_refused(tmp_path):
    """`nsubj:pass` under `relations: universal` (or a relation of another treebank) only counted as
    a wrong label; a model predicts the relation set, so such predictions came from elsewhere."""
    path = write(tmp_path / "t.conllu", TREES)
    t = task(path, relations="universal")
    a, b = t.examples("dev")
    gold = {e.id: (list(e.heads), list(e.relations)) for e in (a, b)}
    assert t.evaluate([a, b], gold)["las"] == 100.0
    wrong = dict(gold, b=([2, 0, 2], ["amod", "root", "nmod:poss"]))  # the subtype `universal` strips
    with pytest.raises(ValueError, match=r"sentence 'b', word 3 \('\$'\): predicted relation 'nmod:poss' is not"):
        t.evaluate([a, b], wrong)
    full = task(path)  # relations: full keeps the subtype: the same prediction is a right label there
    assert full.evaluate(full.examples("dev"), dict(gold, b=([2, 0, 2], ["amod", "root", "nmod:poss"])))["las"] == 100.0

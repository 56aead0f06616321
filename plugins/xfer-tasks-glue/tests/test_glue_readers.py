"""GLUE readers on small generated files, every bad-input path, and counts on the real data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xfer.core.errors import DataError, UserError
from xfer.tasks.glue.config import GlueTaskConfig
from xfer.tasks.glue.tasks import (
    CoLATask,
    MNLIMismatchedTask,
    MNLITask,
    MRPCTask,
    QNLITask,
    QQPTask,
    RTETask,
    SST2Task,
    STSBTask,
    WNLITask,
)

SHARED = Path(os.environ.get("XFER_DATA", Path(__file__).resolve().parents[3].parent / "shared" / "data"))


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def task(cls, folder: Path, **kw):
    return cls(cls.__name__, GlueTaskConfig(data_dir=folder, **kw))


RTE = 'index\tsentence1\tsentence2\tlabel\n0\tA "quoted\tB.\tentailment\n1\tC.\tD.\tnot_entailment\n'


def test_rte_pairs_labels_and_ids(tmp_path):
    write(tmp_path / "train.tsv", RTE)
    examples = task(RTETask, tmp_path).examples("train")
    assert [e.id for e in examples] == ["train-0", "train-1"]
    # quoting is off: an unbalanced quote stays in the text, exactly as GLUE's loaders read it
    assert (examples[0].text_a, examples[0].text_b, examples[0].label) == ('A "quoted', "B.", "entailment")
    assert examples[1].label == "not_entailment"


def test_cola_headerless_train_and_headered_test(tmp_path):
    write(tmp_path / "train.tsv", "gj04\t1\t\tGood sentence.\ngj04\t0\t*\tBad sentence.")  # no final newline
    write(tmp_path / "test.tsv", "index\tsentence\n0\tFirst.\n1\tSecond.\n")
    cola = task(CoLATask, tmp_path)
    train = cola.examples("train")
    assert [(e.id, e.text_a, e.label) for e in train] == [
        ("train-0", "Good sentence.", "1"),
        ("train-1", "Bad sentence.", "0"),
    ]
    test = cola.examples("test")
    assert [(e.id, e.text_a, e.label) for e in test] == [("test-0", "First.", None), ("test-1", "Second.", None)]


def test_mrpc_bom_header_label_first(tmp_path):
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    write(tmp_path / "dev.tsv", header + "1\t11\t12\tS one .\tS two .\n0\t13\t14\tS three .\tS four .\n")
    write(tmp_path / "test.tsv", "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n7\t1\t2\tX .\tY .\n")
    mrpc = task(MRPCTask, tmp_path)
    dev = mrpc.examples("dev")
    assert [(e.id, e.text_a, e.text_b, e.label) for e in dev] == [
        ("dev-0", "S one .", "S two .", "1"),
        ("dev-1", "S three .", "S four .", "0"),
    ]
    (test,) = mrpc.examples("test")
    assert (test.id, test.label) == ("test-7", None)


def test_stsb_ten_columns_raw_scores(tmp_path):
    head = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    write(tmp_path / "train.tsv", head + "0\tg\tf\t2012\t1\tnone\tnone\tA.\tB.\t3.800\n")
    (example,) = task(STSBTask, tmp_path).examples("train")
    assert example.label == pytest.approx(3.8) and isinstance(example.label, float)
    assert (example.text_a, example.text_b) == ("A.", "B.")


def test_mnli_matched_and_mismatched_files(tmp_path):
    cols = ["index", "promptID", "pairID", "genre", "s1b", "s2b", "s1p", "s2p", "sentence1", "sentence2"]
    train = "\t".join([*cols, "label1", "gold_label"]) + "\n0\t1\t1e\tfic\t-\t-\t-\t-\tP.\tH.\tneutral\tneutral\n"
    dev = "\t".join([*cols, *(f"label{i}" for i in range(1, 6)), "gold_label"]) + "\n"
    write(tmp_path / "train.tsv", train)
    write(tmp_path / "dev_matched.tsv", dev + "5\t1\t1e\tfic\t-\t-\t-\t-\tP.\tH.\tneutral\t-\t-\t-\t-\tcontradiction\n")
    write(tmp_path / "dev_mismatched.tsv", dev + "9\t1\t1e\tfic\t-\t-\t-\t-\tP.\tH.\tneutral\t-\t-\t-\t-\tentailment\n")
    write(tmp_path / "test_mismatched.tsv", "\t".join(cols) + "\n3\t1\t1e\tfic\t-\t-\t-\t-\tP.\tH.\n")
    m, mm = task(MNLITask, tmp_path), task(MNLIMismatchedTask, tmp_path)
    assert m.examples("train") == mm.examples("train")
    assert [(e.id, e.label) for e in m.examples("dev")] == [("dev-5", "contradiction")]
    assert [(e.id, e.label) for e in mm.examples("dev")] == [("dev-9", "entailment")]
    assert [(e.id, e.label) for e in mm.examples("test")] == [("test-3", None)]
    assert m.labels == ("contradiction", "entailment", "neutral")


def test_qqp_uses_id_column(tmp_path):
    write(tmp_path / "dev.tsv", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n42\t1\t2\tQ1?\tQ2?\t1\n")
    (example,) = task(QQPTask, tmp_path).examples("dev")
    assert (example.id, example.text_a, example.text_b, example.label) == ("dev-42", "Q1?", "Q2?", "1")


def test_max_examples_keeps_first_n(tmp_path):
    write(tmp_path / "train.tsv", "sentence\tlabel\n" + "".join(f"s{i}\t{i % 2}\n" for i in range(10)))
    examples = task(SST2Task, tmp_path, max_examples=3).examples("train")
    assert [e.text_a for e in examples] == ["s0", "s1", "s2"]
    with pytest.raises(ValueError, match="max_examples"):
        GlueTaskConfig(max_examples=0)
    with pytest.raises(ValueError, match="source must be"):
        GlueTaskConfig(source="web")


def test_crlf_line_endings(tmp_path):
    write(tmp_path / "train.tsv", "sentence\tlabel\r\na\t1\r\n")
    assert task(SST2Task, tmp_path).examples("train")[0].label == "1"


# --- bad input: every error names file:line ----------------------------------------------------


def expect_error(folder: Path, cls, split: str, where: str, match: str) -> DataError:
    with pytest.raises(DataError, match=match) as info:
        task(cls, folder).examples(split)
    assert where in str(info.value), str(info.value)
    return info.value


def test_wrong_column_count(tmp_path):
    path = write(tmp_path / "train.tsv", RTE + "2\tonly two\n")
    expect_error(tmp_path, RTETask, "train", f"{path}:4", "expected 4 columns")


def test_cr_only_line_endings(tmp_path):
    """A CR-only file is one physical line; it was reported as a header without examples."""
    path = write(tmp_path / "train.tsv", RTE.replace("\n", "\r"))
    expect_error(tmp_path, RTETask, "train", f"{path}:1", "carriage return .* CR-only")


def test_cola_wrong_column_count(tmp_path):
    path = write(tmp_path / "train.tsv", "gj04\t1\t\tOk.\ngj04\t1\tOk too.\n")
    expect_error(tmp_path, CoLATask, "train", f"{path}:2", "expected 4 columns")


def test_unknown_label(tmp_path):
    path = write(tmp_path / "dev.tsv", RTE.replace("not_entailment", "contradiction"))
    err = expect_error(tmp_path, RTETask, "dev", f"{path}:3", "unknown label 'contradiction'")
    assert err.key == "label"


def test_missing_label_column_in_train(tmp_path):
    path = write(tmp_path / "train.tsv", "index\tsentence1\tsentence2\n0\tA\tB\n")
    expect_error(tmp_path, RTETask, "train", f"{path}:1", "no column named 'label'")


def test_ambiguous_header_column(tmp_path):
    """A name the header repeats was resolved to its first occurrence, silently."""
    path = write(tmp_path / "train.tsv", "index\tsentence1\tsentence2\tsentence2\tlabel\n0\tA\tB\tC\tentailment\n")
    expect_error(
        tmp_path,
        RTETask,
        "train",
        f"{path}:1",
        r"text_b_column: column name 'sentence2' is ambiguous: the header has it at \[2, 3\]",
    )


def test_score_out_of_range_and_not_a_number(tmp_path):
    head = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    path = write(tmp_path / "train.tsv", head + "0\tg\tf\ty\t1\tn\tn\tA.\tB.\t5.5\n")
    expect_error(tmp_path, STSBTask, "train", f"{path}:2", "outside")
    write(path, head + "0\tg\tf\ty\t1\tn\tn\tA.\tB.\thigh\n")
    expect_error(tmp_path, STSBTask, "train", f"{path}:2", "not a number")


def test_empty_file(tmp_path):
    path = write(tmp_path / "train.tsv", "")
    expect_error(tmp_path, RTETask, "train", f"{path}:1", "empty")
    write(path, "index\tsentence1\tsentence2\tlabel\n")
    expect_error(tmp_path, RTETask, "train", f"{path}:2", "no examples")


def test_empty_line_inside_file(tmp_path):
    path = write(tmp_path / "train.tsv", RTE.replace("\n1\t", "\n\n1\t"))
    expect_error(tmp_path, RTETask, "train", f"{path}:3", "empty line")


@pytest.mark.parametrize("ending", ["\n", "\n\n", "\r\n\r\n\n"])
def test_blank_lines_may_end_the_file(tmp_path, ending):
    """The docstring said so; a file ending in one blank line was refused ("empty line")."""
    write(tmp_path / "train.tsv", RTE.rstrip("\n") + ending)
    assert [e.id for e in task(RTETask, tmp_path).examples("train")] == ["train-0", "train-1"]


@pytest.mark.parametrize("sentence", ["", "  "])
def test_empty_sentences_are_kept_and_counted_aloud(tmp_path, capsys, sentence):
    """Official files have them (QQP's train.tsv: two empty question2), so they are read as GLUE's
    own code reads them, but never silently: one warning per file, naming the first."""
    path = write(tmp_path / "train.tsv", RTE.replace("\tD.\t", f"\t{sentence}\t"))
    examples = task(RTETask, tmp_path).examples("train")
    assert [e.text_b for e in examples] == ["B.", sentence]
    err = capsys.readouterr().err
    assert f"warning: {path}: 1 empty sentence(s), kept as empty inputs (first: line 3, sentence2)" in err


def test_bad_encoding(tmp_path):
    path = write(tmp_path / "train.tsv", RTE + "2\tcaf\xe9\tB\tentailment\n", encoding="latin-1")
    expect_error(tmp_path, RTETask, "train", f"{path}:4", "not valid UTF-8")


def test_a_nul_byte_names_its_line_and_column(tmp_path):
    """A NUL byte passed the reader; the WordPiece normaliser then deleted it without a space,
    merging two words ("Re\\x00eve" became "Reeve") without a word."""
    path = write(tmp_path / "train.tsv", RTE + "2\tRe\x00eve\tB\tentailment\n")
    expect_error(tmp_path, RTETask, "train", f"{path}:4", "encoding: NUL byte at column 5")


def test_duplicate_index(tmp_path):
    path = write(tmp_path / "train.tsv", RTE + "1\tE.\tF.\tentailment\n")
    expect_error(tmp_path, RTETask, "train", f"{path}:4", "duplicate example id 'train-1'")


@pytest.mark.parametrize("index", ["", " "])
def test_empty_index_is_an_error(tmp_path, index):
    """An empty index column became the id `train-` (and an empty index in a submission file)."""
    path = write(tmp_path / "train.tsv", RTE + f"{index}\tE.\tF.\tentailment\n")
    err = expect_error(tmp_path, RTETask, "train", f"{path}:4", "empty example id")
    assert err.key == "index"


def test_missing_split_and_missing_data_dir(tmp_path):
    with pytest.raises(DataError, match="split of RTETask is missing"):
        task(RTETask, tmp_path).examples("dev")
    with pytest.raises(UserError, match="data_dir is not set"):
        RTETask("glue/rte", GlueTaskConfig()).examples("dev")
    with pytest.raises(UserError, match="unknown split"):
        task(RTETask, tmp_path).examples("validation")


# --- the real GLUE files -------------------------------------------------------------------------

REAL_COUNTS = {
    CoLATask: ("CoLA", 8551, 1043),
    SST2Task: ("SST-2", 67349, 872),
    MRPCTask: ("MRPC", 3668, 408),
    RTETask: ("RTE", 2490, 277),
    STSBTask: ("STS-B", 5749, 1500),
    WNLITask: ("WNLI", 635, 71),
}


@pytest.mark.skipif(not (SHARED / "glue").is_dir(), reason=f"shared GLUE data not found at {SHARED / 'glue'}")
@pytest.mark.parametrize("cls", list(REAL_COUNTS), ids=lambda c: c.__name__)
def test_real_glue_counts(cls):
    folder, n_train, n_dev = REAL_COUNTS[cls]
    t = task(cls, SHARED / "glue" / folder)
    assert len(t.examples("train")) == n_train
    dev = t.examples("dev")
    assert len(dev) == n_dev
    if t.type == "classification":
        assert {e.label for e in dev} == set(t.labels)
    else:
        assert all(0.0 <= e.label <= 5.0 for e in dev)


@pytest.mark.skipif(not (SHARED / "glue").is_dir(), reason=f"shared GLUE data not found at {SHARED / 'glue'}")
def test_real_qnli_dev_only():
    t = task(QNLITask, SHARED / "glue" / "QNLI")
    assert len(t.examples("dev")) == 5463
    with pytest.raises(DataError, match="the train split of QNLITask is missing"):
        t.examples("train")  # QNLI train is not in the shared data: a clear error, not an empty list


def test_a_random_subsample_is_seeded_in_file_order_and_spans_the_file(tmp_path):
    """`subsample: random` keeps N rows drawn by seed (not the first N), in file order, reproducibly."""
    write(tmp_path / "train.tsv", "sentence\tlabel\n" + "".join(f"s{i}\t{i % 2}\n" for i in range(100)))
    kept = [int(e.text_a[1:]) for e in task(SST2Task, tmp_path, max_examples=10, subsample="random").examples("train")]
    assert len(kept) == 10 and kept == sorted(kept) and max(kept) >= 50  # spread over the file
    again = [int(e.text_a[1:]) for e in task(SST2Task, tmp_path, max_examples=10, subsample="random").examples("train")]
    assert again == kept
    other = task(SST2Task, tmp_path, max_examples=10, subsample="random", subsample_seed=1).examples("train")
    assert [int(e.text_a[1:]) for e in other] != kept
    everything = task(SST2Task, tmp_path, max_examples=1000, subsample="random").examples("train")
    assert len(everything) == 100  # N at least the split's size keeps all
    with pytest.raises(ValueError, match="subsample must be"):
        GlueTaskConfig(subsample="shuffle")

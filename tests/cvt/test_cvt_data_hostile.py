"""Hostile review of the data side of CVT: vectors files, the unlabeled corpus and its streams,
the `cvt.vectors` stage and `xfer.cvt.results`. Each test pins a defect that was found and fixed
(it failed before the fix): a silently dropped or misaligned vector, an empty output written as
success, or an error that did not say what was wrong."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xfer.core.errors import DataError, UserError
from xfer.cvt.vectors import train_vectors
from xfer.cvt.vocab import read_vectors

# --- vectors files -------------------------------------------------------------------------------


def _as_lists(vectors):
    """read_vectors' float32 rows as lists, rounded back to the file's decimals."""
    return {word: [round(x, 6) for x in vector.tolist()] for word, vector in vectors.items()}


def test_a_vectors_file_with_cr_only_line_endings_is_refused_not_read_as_one_vector(tmp_path: Path) -> None:
    """Classic Mac (CR-only) endings: the file was one line, read as a single "word"
    ("a 1 2 3\\rb") holding the last line's vector; every other vector was dropped without a word."""
    path = tmp_path / "v.txt"
    path.write_bytes(b"a 1 2 3\rb 4 5 6\rc 7 8 9\n")
    with pytest.raises(DataError, match=r"v\.txt:1: carriage return \(CR\) inside the line at column 8"):
        read_vectors(path, 3, None)
    path.write_bytes(b"a 1 2 3\r\nb 4 5 6\r\n")  # CRLF stays fine
    assert _as_lists(read_vectors(path, 3, None)) == {"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]}


# --- cvt.vectors ---------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_corpus_without_co_occurrences_is_refused_not_written_as_an_empty_vectors_file() -> None:
    """One word per line (a word list given as text): no window reaches another word, no word has a
    positive PMI, and the stage wrote an empty vectors file as a success (cvt.train refused it later)."""
    with pytest.raises(UserError, match="no word gets a vector"):
        train_vectors(
            [["alpha"], ["beta"], ["gamma"], ["delta"]],
            dim=2,
            words=10,
            min_count=1,
            window=2,
            lowercase=True,
            std=0.5,
            seed=0,
        )


# --- python -m xfer.cvt.results ------------------------------------------------------------------


def _stage(folder: Path, status: str = "completed", runs: list[dict] | None = None) -> Path:
    """A finished-looking cvt.train stage folder: stage.json and outputs/results/results.json."""
    import json

    runs = runs if runs is not None else [{"f1": 90.0, "seed": 1, "seconds": 60}, {"f1": 92.0, "seed": 2}]
    folder.mkdir(parents=True)
    record = {"kind": "cvt.train", "status": status, "signature": {"config": {"mode": "cvt"}}}
    (folder / "stage.json").write_text(json.dumps(record))
    (folder / "outputs" / "results").mkdir(parents=True)
    summary = {"f1": {"mean": 91.0, "median": 91.0, "std": 1.4, "min": 90.0, "max": 92.0}}
    results = {"chunk": {"main_metric": "f1", "summary": summary, "runs": runs}}
    (folder / "outputs" / "results" / "results.json").write_text(json.dumps(results))
    return folder


def _table(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from xfer.cvt.results import main

    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("order", [1, -1])
def test_results_of_a_diverged_trial_are_shown_not_a_traceback(tmp_path: Path, capsys, order: int) -> None:
    """A diverged trial's NaN score (results.json holds it, `xfer results` shows it): `statistics.stdev`
    raised a bare AttributeError, and min/max depended on where the NaN stood."""
    runs = [{"f1": float("nan"), "seed": 1}, {"f1": 92.0, "seed": 2}][::order]
    stage = _stage(tmp_path / "run" / "cvt-10", runs=runs)
    code, out, _ = _table(capsys, str(stage))
    assert code == 0
    assert "**nan** ± nan | nan–92.0 |" in out


def test_results_count_only_numeric_scores_and_recorded_times(tmp_path: Path, capsys) -> None:
    """A `true` score was averaged as 1.0, and a trial without `seconds` as 0 s of training."""
    stage = _stage(tmp_path / "run" / "cvt-10", runs=[{"f1": True, "seed": 1}, {"f1": 92.0, "seed": 2, "seconds": 120}])
    code, out, _ = _table(capsys, str(stage))
    assert code == 0
    assert "| chunk f1 | **92.0** | 92.0–92.0 | 92.0 | 1 |" in out
    assert out.splitlines()[2].endswith("| 2.0 |")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("runs", [1, 2], "runs is not a list of run records"),
        ("summary", {"f1": 5}, "summary is not a mapping"),
        ("summary", [], "summary is not a mapping"),
        ("main_metric", ["f1"], "main_metric is \\['f1'\\], not a metric name"),
    ],
)
@pytest.mark.parametrize("pooled", [False, True])
def test_an_edited_results_file_is_an_error_naming_it(
    tmp_path: Path, capsys, key: str, value: object, message: str, pooled: bool
) -> None:
    """`read_results` checks only the three keys: the table raised bare TypeErrors/AttributeErrors."""
    import json

    stage = _stage(tmp_path / "a" / "cvt-10")
    other = _stage(tmp_path / "b" / "cvt-10", runs=[{"f1": 91.0, "seed": 3}])
    path = stage / "outputs" / "results" / "results.json"
    results = json.loads(path.read_text())
    results["chunk"][key] = value
    path.write_text(json.dumps(results))
    code, out, err = _table(capsys, f"{stage}+{other}" if pooled else str(stage))
    assert code == 2 and out == ""
    assert str(path) in err and "task chunk: " in err
    assert re.search(message, err)


def test_stale_results_of_an_unfinished_stage_are_marked(tmp_path: Path, capsys) -> None:
    """An invalidated (or failed, or resumed) stage keeps the results.json of an earlier attempt: it
    was shown as a plain row, as if it were the stage's result."""
    done = _stage(tmp_path / "run1" / "cvt-10")
    stale = _stage(tmp_path / "run2" / "cvt-10", status="invalidated")
    code, out, _ = _table(capsys, str(done), str(stale))
    assert code == 0
    assert "| run1/cvt-10 | chunk f1 |" in out
    assert "| run2/cvt-10 [invalidated] | chunk f1 |" in out
    assert f"{stale} is invalidated: its results.json is left from an attempt" in out


@pytest.mark.parametrize("line", ["3", '{"split": "dev", "f1": 91}', '{"split": "dev", "step": "x", "f1": 91}'])
def test_a_curve_over_a_metrics_line_that_is_no_record_names_the_line(tmp_path: Path, capsys, line: str) -> None:
    """A JSON line that is no mapping, or a dev row without an integer step: AttributeError,
    KeyError or ValueError from `--curve`."""
    stage = _stage(tmp_path / "run" / "cvt-10")
    (stage / "metrics.jsonl").write_text(line + '\n{"split": "dev", "step": 20, "f1": 91}\n')
    code, out, err = _table(capsys, "--curve", str(stage))
    assert code == 2 and out == ""
    assert f"{stage / 'metrics.jsonl'}:1: not a metrics record" in err
    (stage / "metrics.jsonl").write_text('{"split": "dev", "step": 20, "f1": 91}\n')
    assert _table(capsys, "--curve", str(stage))[0] == 0


# --- tokenisation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),  # Devanagari vowel signs and virama
        ("שָׁלוֹם", ["שָׁלוֹם"]),  # Hebrew points
        ("nai\u0308ve cafe\u0301!", ["nai\u0308ve", "cafe\u0301", "!"]),  # accents written apart (NFD)
        ("z.B. don't", ["z", ".", "B", ".", "don", "'", "t"]),  # punctuation still split off
    ],
)
def test_punct_tokenizer_keeps_combining_marks_in_their_words(text: str, words: list[str]) -> None:
    """`\\w` does not match combining marks: `unlabeled.tokenize: punct` (and translation text) cut
    every Hindi or Hebrew word, and every decomposed accented word, into one-letter tokens."""
    from xfer.cvt.text import JOINER, detokenize, tokenize, tokenize_joined

    assert tokenize(text) == words
    joined = tokenize_joined(text)
    assert [t.removeprefix(JOINER) for t in joined] == words
    assert detokenize(joined) == text


def test_a_trial_record_that_is_no_mapping_is_an_error_naming_it(tmp_path: Path, capsys) -> None:
    """A running stage's table reads trials/trial-N/done.json: a JSON list there raised a bare
    AttributeError."""
    from xfer.core.results import RESULTS_FILE

    stage = _stage(tmp_path / "run" / "cvt-10", status="running")
    (stage / RESULTS_FILE).unlink()
    done = stage / "trials" / "trial-0" / "done.json"
    done.parent.mkdir(parents=True)
    done.write_text("[1]\n")
    code, out, err = _table(capsys, str(stage))
    assert code == 2 and out == ""
    assert f"{done}: not a trial record" in err


def test_a_metric_without_curve_is_refused_not_ignored(tmp_path: Path, capsys) -> None:
    """`--metric acc` without `--curve` printed the main-metric table as if it had been honoured."""
    stage = _stage(tmp_path / "run" / "cvt-10")
    with pytest.raises(SystemExit) as exit_info:
        _table(capsys, "--metric", "acc", str(stage))
    assert exit_info.value.code == 2
    assert "--metric chooses the metric of --curve" in capsys.readouterr().err


# --- unlabeled corpus and stream (guards: these held) ----------------------------------------------


@pytest.mark.parametrize(
    ("chunk_lines", "max_length", "batch", "pool_batches"), [(1, 2, 3, 1), (3, 4, 2, 3), (7, 1, 4, 2)]
)
def test_unlabeled_stream_yields_each_sentence_once_per_epoch_and_resumes_anywhere(
    tmp_path: Path, chunk_lines: int, max_length: int, batch: int, pool_batches: int
) -> None:
    """Sentences in (every piece of every non-blank line of every file) against sentences out, over
    whole epochs, across chunk, pool and epoch boundaries, empty and blank-only files included; and a
    stream restarted from any step's state yields exactly the continuation."""
    import math
    from collections import Counter

    from xfer.cvt.data import UnlabeledCorpus, UnlabeledStream

    texts = ["a b c d e\n\n   \nf g\nh i j k l m n\n", "", " \n\t\n", "o\np q r\n\ns t u v\nw"]
    files = []
    for i, text in enumerate(texts):
        files.append(tmp_path / f"u{i}.txt")
        files[-1].write_text(text)
    corpus = UnlabeledCorpus(files, chunk_lines=chunk_lines, max_length=max_length, tokenizer="whitespace")
    expected: Counter[tuple[str, ...]] = Counter()
    for text in texts:
        for line in text.split("\n"):
            words = line.split()
            expected.update(tuple(words[i : i + max_length]) for i in range(0, len(words), max_length))
    total, pool = sum(expected.values()), batch * pool_batches
    epochs = pool // math.gcd(pool, total)
    steps = epochs * total // batch

    def stream() -> UnlabeledStream:
        return UnlabeledStream(corpus, batch, lambda b: [tuple(s) for s in b], seed=3, pool_batches=pool_batches)

    reference, states, seen = stream(), [], Counter()
    batches = []
    for _ in range(steps):
        states.append(reference.state_dict())
        batches.append(reference.next_step())
        seen.update(batches[-1][0])
    assert seen == Counter({s: epochs * n for s, n in expected.items()})
    for step in range(0, steps, max(1, steps // 7)):
        resumed = stream()
        resumed.load_state_dict(states[step])
        assert [resumed.next_step() for _ in range(steps - step)] == batches[step:]


def test_task_sentences_keep_their_tokens_under_the_punct_tokenizer(tmp_path: Path) -> None:
    """With `unlabeled.tokenize: punct` and `task_sentences`, the tasks' already tokenized
    sentences were cut again ("U.S." into "U . S ."): their unlabeled view was not the sentence
    the task trains on."""
    from types import SimpleNamespace

    from xfer.core.tasks import TaggingExample, TaskInfo
    from xfer.cvt.stage import TaskData, read_unlabeled

    raw = tmp_path / "raw.txt"
    raw.write_text("The U.S. economy grew.\n")
    task = TaskData(
        "t",
        None,
        TaskInfo(name="t", type="tagging", labels=("O",)),
        [TaggingExample("s1", ("U.S.", "rose", "."), ("O",) * 3)],
        [],
    )
    unlabeled = SimpleNamespace(
        files=[raw], task_sentences=True, chunk_lines=8, max_length=20, tokenize="punct", vocab_lines=None
    )
    ctx = SimpleNamespace(dir=tmp_path, resolve_files=lambda files: list(files))
    corpus, _ = read_unlabeled(ctx, SimpleNamespace(mode="cvt", unlabeled=unlabeled), [task])
    sentences = [s for index in range(len(corpus.chunks)) for s in corpus.read(index)]
    assert sentences == [["The", "U", ".", "S", ".", "economy", "grew", "."], ["U.S.", "rose", "."]]

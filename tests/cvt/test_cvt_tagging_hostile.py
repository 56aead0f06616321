"""Hostile review of CVT sequence tagging: its data streams, objective and tagging module."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from xfer.cvt.data import UnlabeledCorpus, UnlabeledStream


def _take(stream: UnlabeledStream, steps: int) -> list:
    return [stream.next_step() for _ in range(steps)]


def _sentences_file(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


LINES = [f"w{i} x{i % 3} y{i % 5} z" for i in range(23)]


def test_an_unlabeled_cursor_resumes_on_the_same_sentences_in_a_moved_run_directory(tmp_path: Path) -> None:
    """The task-sentence file lives in the run directory: after `--fork` or a moved run directory the
    cursor named the old absolute path and an interrupted stage could not resume (CheckpointError)."""
    original = _sentences_file(tmp_path / "run-a" / "fit" / "task-sentences.txt", LINES)
    stream = UnlabeledStream(UnlabeledCorpus([original], 4, 10, "whitespace"), 2, list, seed=3, pool_batches=2)
    _take(stream, 7)
    state = stream.state_dict()
    expected = _take(stream, 12)
    moved = tmp_path / "run-b" / "fit" / "task-sentences.txt"
    moved.parent.mkdir(parents=True)
    shutil.copyfile(original, moved)
    again = UnlabeledStream(UnlabeledCorpus([moved], 4, 10, "whitespace"), 2, list, seed=3, pool_batches=2)
    again.load_state_dict(state)
    assert _take(again, 12) == expected


def test_an_unlabeled_cursor_is_refused_on_other_bytes_of_the_same_shape(tmp_path: Path) -> None:
    """Same path, same line count, one word changed: the positions would name other sentences."""
    path = _sentences_file(tmp_path / "u.txt", LINES)
    stream = UnlabeledStream(UnlabeledCorpus([path], 4, 10, "whitespace"), 2, list, seed=3, pool_batches=2)
    _take(stream, 3)
    state = stream.state_dict()
    _sentences_file(path, [*LINES[:10], "another line here", *LINES[11:]])
    again = UnlabeledStream(UnlabeledCorpus([path], 4, 10, "whitespace"), 2, list, seed=3, pool_batches=2)
    with pytest.raises(ValueError, match="unlabeled files or the seed changed"):
        again.load_state_dict(state)


def test_an_older_checkpoints_unlabeled_cursor_still_resumes_and_ignores_the_path(tmp_path: Path) -> None:
    path = _sentences_file(tmp_path / "u.txt", LINES)
    corpus = UnlabeledCorpus([path], 4, 10, "whitespace")
    stream = UnlabeledStream(corpus, 2, list, seed=3, pool_batches=2)
    _take(stream, 5)
    state = {k: v for k, v in stream.state_dict().items() if k != "content"}
    state["chunks"] = [["/elsewhere/u.txt", 0, 4], len(corpus.chunks)]  # as older xfer wrote it
    expected = _take(stream, 6)
    again = UnlabeledStream(corpus, 2, list, seed=3, pool_batches=2)
    again.load_state_dict(state)
    assert _take(again, 6) == expected
    state["chunks"] = [["/elsewhere/u.txt", 0, 4], len(corpus.chunks) + 1]
    with pytest.raises(ValueError, match="cannot resume exactly"):
        UnlabeledStream(corpus, 2, list, seed=3, pool_batches=2).load_state_dict(state)

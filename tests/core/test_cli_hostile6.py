"""Hostile use of the small `xfer` sub-commands, sixth round: `xfer vocab train --out` that must
appear whole or not at all, `xfer explain` of a name that cannot be a component, and `xfer score`
records whose `id` is null."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core import cli

CORPUS = "hello world the cat\nthe dog sat on the mat\nthe cat sat\n"


def _corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS)
    return corpus


def test_vocab_train_that_fails_leaves_no_out_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--out` was created before training: a run the trainer refused (`--size` too small, an empty
    file) left an empty folder, and its missing parents, behind."""
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    out = tmp_path / "new" / "vocab"
    for argv in (
        ["vocab", "train", str(_corpus(tmp_path)), "--size", "3", "--out", str(out)],
        ["vocab", "train", str(empty), "--size", "100", "--out", str(out)],
    ):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "Traceback" not in err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "empty.txt"]


def test_vocab_train_stopped_between_its_two_files_leaves_no_half_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after vocab.txt and before tokenizer.json, a run left `--out` with vocab.txt alone,
    which `WordPieceTokenizer.from_dir` loads as a complete tokenizer (its casing guessed); the
    folder is now built aside and renamed into place once both files are written."""
    from xfer.transformer.tokenization import WordPieceTokenizer
    from xfer.transformer.tokenization import tokenizer as tokenizer_module

    real_write = tokenizer_module._write_atomic

    def stop_after_vocab_txt(path: Path, text: str) -> None:
        real_write(path, text)
        if path.name == "vocab.txt":
            raise KeyboardInterrupt

    corpus = _corpus(tmp_path)
    out = tmp_path / "models" / "vocab"
    monkeypatch.setattr(tokenizer_module, "_write_atomic", stop_after_vocab_txt)
    assert cli.main(["vocab", "train", str(corpus), "--size", "30", "--out", str(out)]) == 130  # Ctrl-C
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]  # nothing, not even a hidden leftover
    monkeypatch.undo()
    assert cli.main(["vocab", "train", str(corpus), "--size", "30", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["tokenizer.json", "vocab.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "models"]
    assert WordPieceTokenizer.from_dir(out).vocab_size >= 6
    # an existing folder (a model's) is written into in place, keeping what it holds
    (out / "keep.txt").write_text("mine\n")
    assert cli.main(["vocab", "train", str(corpus), "--size", "30", "--out", str(out), "--cased"]) == 0
    assert (out / "keep.txt").read_text() == "mine\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["vocab"]


def test_vocab_train_out_in_the_way_is_refused_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file or a dangling link where `--out` or one of its folders goes is a one-line error, and
    nothing is created next to it."""
    corpus = _corpus(tmp_path)
    afile = tmp_path / "afile"
    afile.write_text("keep\n")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    for out, message in (
        (afile, f"--out {afile} is a file, not a directory"),
        (afile / "sub", f"--out {afile / 'sub'} cannot be created: {afile} is a file"),
        (dangling, f"--out {dangling} cannot be created: {dangling} is a broken symbolic link"),
        (dangling / "sub", f"--out {dangling / 'sub'} cannot be created: {dangling} is a broken symbolic link"),
    ):
        assert cli.main(["vocab", "train", str(corpus), "--size", "30", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"error: vocab train: {message}" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "corpus.txt", "dangling"]
    assert afile.read_text() == "keep\n"


def test_score_keeps_a_null_id_as_its_neighbours_keep_theirs(tmp_path: Path) -> None:
    """`xfer score` of JSON lines: a record with `"id": null` came out without an `id` key while
    the records around it had theirs, so a reader joining outputs to inputs by `id` lost it (or
    crashed on the missing key); a record without `id` still gets none."""
    from xfer.electra import scoring

    texts = tmp_path / "texts.jsonl"
    texts.write_text('{"id": "a", "text": "the cat"}\n{"id": null, "text": "a dog"}\n{"text": "no id"}\n')
    lines = scoring.read_texts(texts)
    score = scoring.TextScore(pll=-1.5, pieces=[7, 8], token_scores=[-1.0, -0.5], windows=1)
    records = [scoring.record(line, score, "pll") for line in lines]
    assert [r.get("id", "absent") for r in records] == ["a", None, "absent"]
    assert records[1] == {"line": 2, "id": None, "pll": -1.5, "tokens": 2, "method": "pll"}


def test_explain_a_name_without_namespace_gives_no_install_hint(capsys: pytest.CaptureFixture[str]) -> None:
    """`xfer explain model tiny` said "pip install xfer-tiny": `tiny` is a preset (a value of
    `transformer.encoder`'s field), and a name without a namespace can come from no distribution.
    The message now says component names are namespaced and lists the models there are."""
    assert cli.main(["explain", "model", "tiny"]) == 2
    err = capsys.readouterr().err
    assert "pip install" not in err and "Traceback" not in err
    assert "error: unknown model 'tiny': component names are namespaced (`plugin.name` or `plugin/name`)" in err
    assert "a preset or other value of a component's field is no component; models: " in err
    assert "transformer.encoder" in err
    # a name that is some component's without its namespace gets that component
    assert cli.main(["explain", "stage", "finetune"]) == 2
    err = capsys.readouterr().err
    assert (
        "component names are namespaced (`plugin.name` or `plugin/name`); did you mean 'transformer.finetune'?" in err
    )
    assert "pip install" not in err
    # a namespaced name of a plugin that is not installed still says what to install
    assert cli.main(["explain", "model", "gpt.decoder"]) == 2
    assert "(pip install xfer-gpt)" in capsys.readouterr().err


def test_vocab_train_takes_the_stages_limit_alphabet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`xfer vocab train` mirrors the `transformer.vocab` stage's knobs (size, lowercase as --cased,
    min_frequency) but had no `--limit-alphabet`: the stage's vocabulary of a `limit_alphabet: 5`
    recipe could not be made with the command, and its note said nothing of how to shrink it."""
    from xfer.transformer.tokenization import WordPieceTokenizer
    from xfer.transformer.tokenization.training import train_wordpiece

    corpus = tmp_path / "accents.txt"
    corpus.write_text("héllo wörld çà ñ ü ß ø å æ\nabc def\nthe cat sat\n")
    out = tmp_path / "v"
    argv = ["vocab", "train", str(corpus), "--size", "20", "--limit-alphabet", "5", "--cased", "--out", str(out)]
    assert cli.main(argv) == 0
    stage = train_wordpiece([corpus], 20, lowercase=False, limit_alphabet=5)
    assert WordPieceTokenizer.from_dir(out).vocab == stage.get_vocab()
    assert "no further pair of pieces occurs --min-frequency=2 times" in capsys.readouterr().err
    assert cli.main(["vocab", "train", str(corpus), "--size", "20", "--out", str(tmp_path / "w")]) == 0
    err = capsys.readouterr().err
    assert "alphabet, each character with its ## form, are always kept: lower --limit-alphabet (1000)" in err
    with pytest.raises(SystemExit) as exited:
        cli.main(["vocab", "train", str(corpus), "--size", "20", "--limit-alphabet", "0", "--out", str(out)])
    assert exited.value.code == 2
    assert "argument --limit-alphabet: 0 must be at least 1" in capsys.readouterr().err


def test_vocab_train_refuses_a_fifo_or_a_non_utf8_name_among_its_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO matched by a glob was dropped as "not a file" and the vocabulary trained "from 1
    file(s)" without its text (the `transformer.vocab` stage refuses it); a file name that is not
    UTF-8 was the trainer's "'utf-8' codec can't encode character", naming no file."""
    import os

    fifo_dir = tmp_path / "fifo"
    fifo_dir.mkdir()
    (fifo_dir / "a.txt").write_text(CORPUS)
    os.mkfifo(fifo_dir / "b.txt")
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    (bad_dir / "a.txt").write_text(CORPUS)
    bad_name = os.fsencode(bad_dir) + b"/c\xff.txt"
    with open(bad_name, "w") as handle:
        handle.write(CORPUS)
    for pattern, message in (
        (fifo_dir / "*.txt", f"matches {fifo_dir / 'b.txt'}, not a regular file (a FIFO, device or socket)"),
        (bad_dir / "*.txt", f"{bad_dir}/c\\xff.txt: files: the file name is not valid UTF-8"),
    ):
        out = tmp_path / "out"
        assert cli.main(["vocab", "train", str(pattern), "--size", "30", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
        assert not out.exists()

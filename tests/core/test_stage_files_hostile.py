"""How stages find their input files (`StageContext.resolve_files`, the `transformer.vocab` stage):
what the file list used to leave out, or take in, without a word."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from xfer.core.config import Files, Input
from xfer.core.errors import DataError
from xfer.core.plugins import default_host
from xfer.core.stage import StageContext


def _ctx(run_dir: Path, stage_dirs: dict[str, Path] | None = None, config: object = None) -> StageContext:
    return StageContext(
        run_dir, "vocab", "transformer.vocab", config, 1, run_dir / "vocab", torch.device("cpu"), default_host(),
        stage_dirs or {},
    )  # fmt: skip


def _recipe(folder: Path, vocab_files: str) -> Path:
    recipe = folder / "r.yaml"
    recipe.write_text(
        "name: r\nseed: 1\nstages:\n"
        "  corpus: {kind: toy.corpus, sentences: 60}\n"
        f"  vocab: {{kind: transformer.vocab, files: {vocab_files}, size: 60, min_frequency: 1}}\n"
    )
    return recipe


def _run(recipe: Path, run_dir: Path, *args: str) -> int:
    from xfer.core import cli

    return cli.main(["run", str(recipe), "--run-dir", str(run_dir), *args])


def test_a_fifo_matched_by_a_glob_is_refused_not_dropped(tmp_path: Path) -> None:
    """A FIFO (or device, socket) among a glob's matches was dropped from the list: the stage trained
    on the other files and said nothing (only electra's corpus check refused it). Now the stage, and
    the vocabulary's pre-flight before anything runs, refuse it naming the path and the key."""
    from xfer.transformer.vocab_stage import VocabConfig

    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("the cat sat .\n")
    os.mkfifo(data / "b.txt")
    config = VocabConfig(files=Files((str(data / "*.txt"),)), size=50)
    ctx = _ctx(tmp_path / "run", config=config)
    with pytest.raises(DataError, match=r"b\.txt: stages\.vocab\.files: matched by .*not a regular file \(a FIFO"):
        ctx.resolve_files(config.files)
    [problem] = config.preflight()
    assert "b.txt" in str(problem) and "not a regular file" in str(problem)
    (data / "b.txt").unlink()
    (data / "sub.txt").mkdir()  # a folder matched by the glob is still skipped: `**` matches folders
    assert ctx.resolve_files(config.files) == [data / "a.txt"]
    assert config.preflight() == []


def test_a_glob_into_a_stage_folder_of_the_run_is_refused_at_the_stage(tmp_path: Path) -> None:
    """`*/*/outputs/*/*.txt` next to the run directory matches the run's own outputs once an earlier
    stage wrote them: the runner's check before anything runs saw nothing there, so a first run
    trained the vocabulary on the corpus stage's output too, and the next run refused the recipe.
    The same file named with `..` (which the runner compares as written) is refused as well."""
    run = tmp_path / "run"
    out = run / "corpus" / "outputs" / "text"
    out.mkdir(parents=True)
    (out / "toy.txt").write_text("made by the run .\n")
    mine = tmp_path / "data" / "set" / "outputs" / "text"
    mine.mkdir(parents=True)
    (mine / "a.txt").write_text("the user's text .\n")
    ctx = _ctx(run, {"corpus": run / "corpus", "vocab": run / "vocab"})
    for pattern in (str(tmp_path / "*/*/outputs/*/*.txt"), str(tmp_path / "data/../run/corpus/outputs/*/*.txt")):
        with pytest.raises(DataError, match=r"toy\.txt: files: matched by .* inside the run directory"):
            ctx.resolve_files(Files((pattern,)))
    (tmp_path / "link").symlink_to(out)  # a data folder that is a link to the run's output
    with pytest.raises(DataError, match=r"link/toy\.txt: files: matched by .* inside the run directory"):
        ctx.resolve_files(Files((str(tmp_path / "link/*.txt"),)))
    assert ctx.resolve_files(Files((str(tmp_path / "data/*/outputs/*/*.txt"),))) == [mine / "a.txt"]


def test_a_first_run_does_not_train_on_its_own_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """End to end: the first run used to complete (vocabulary from 2 files, one the corpus stage's
    output), the second to refuse the same recipe; now the first run stops at the stage, exit 2."""
    mine = tmp_path / "data" / "set" / "outputs" / "text"
    mine.mkdir(parents=True)
    (mine / "a.txt").write_text("the user's text .\n")
    recipe = _recipe(tmp_path, '["*/*/outputs/*/*.txt"]')
    assert _run(recipe, tmp_path / "run") == 2
    err = capsys.readouterr().err
    assert "toy.txt: stages.vocab.files: matched by" in err and "inside the run directory" in err
    assert "Traceback" not in err


def test_a_pruned_output_file_fails_the_stage_that_reads_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The runner says of a stage output file deleted since its stage completed: "a stage that reads
    them will fail". `resolve_files` listed what was left instead: the vocabulary re-ran on the
    recipe's other file alone ("on 1 file(s)"), without the corpus, and completed."""
    (tmp_path / "a.txt").write_text("the cat sat on the mat .\n")
    recipe = _recipe(tmp_path, "[a.txt, corpus.text]")
    run = tmp_path / "run"
    assert _run(recipe, run) == 0
    (run / "corpus" / "outputs" / "text" / "toy.txt").unlink()
    capsys.readouterr()
    assert _run(recipe, run, "stages.vocab.size=55", "--force") == 2
    err = capsys.readouterr().err
    assert "toy.txt: stages.vocab.files: corpus.text: 1 of its file(s) deleted since stage 'corpus' completed" in err
    assert "Traceback" not in err


def test_a_missing_output_folder_is_named(tmp_path: Path) -> None:
    """A referenced output whose folder is gone (no record of its files, as from an older xfer) read
    as no files at all; it is now named."""
    run = tmp_path / "run"
    (run / "corpus").mkdir(parents=True)
    ctx = _ctx(run, {"corpus": run / "corpus"})
    with pytest.raises(DataError, match=r"outputs/text: files: corpus\.text: the stage output folder is missing"):
        ctx.resolve_files(Files((), (Input(stage="corpus", output="text"),)))


def test_the_vocabulary_refuses_a_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    """A file named in Latin-1 (`c\\xff.txt`) is listed by glob, but the tokenizers trainer takes names
    as UTF-8 strings: the stage stopped on a bare UnicodeEncodeError once every file had been read."""
    from xfer.transformer.vocab_stage import VocabConfig, run_vocab

    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("the cat sat on the mat .\n")
    try:
        with open(os.fsencode(data) + b"/c\xff.txt", "wb") as out:
            out.write(b"a dog ran .\n")
    except OSError:
        pytest.skip("the file system refuses names that are not UTF-8")
    config = VocabConfig(files=Files((str(data / "*.txt"),)), size=50)
    [problem] = config.preflight()
    assert "c\\xff.txt: files: the file name is not valid UTF-8" in str(problem)
    with pytest.raises(DataError, match=r"c\\xff\.txt: files: the file name is not valid UTF-8"):
        run_vocab(_ctx(tmp_path / "run", config=config))


def test_check_distinct_refuses_one_path_object_listed_twice(tmp_path: Path) -> None:
    """`check_distinct` compared the first path seen with `is`: one `Path` object listed twice (a
    plugin's `[path] * 2`, or the same list entry appended again) passed as a single file."""
    from xfer.core.textfile import check_distinct

    path = tmp_path / "a.txt"
    path.write_text("the cat .\n")
    with pytest.raises(DataError, match=r"a\.txt: listed twice in files \(also as .*a\.txt\)"):
        check_distinct([path, path], "files")
    with pytest.raises(DataError, match="listed twice"):
        check_distinct([path, Path(str(path))], "files")
    check_distinct([path, tmp_path / "missing.txt", tmp_path / "missing.txt"], "files")  # read errors name those


def test_a_pattern_that_matches_no_file_by_the_time_the_stage_starts_is_refused(tmp_path: Path) -> None:
    """The recipe check found a file for every pattern, but by the stage's start (hours later in a
    long recipe) one pattern's files were moved away: the stage trained on the other patterns' text
    without a word (or failed as "empty" naming no pattern)."""
    from xfer.transformer.vocab_stage import VocabConfig

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "one.txt").write_text("the cat sat .\n")
    (tmp_path / "b" / "two.txt").write_text("a dog ran .\n")
    config = VocabConfig(files=Files((str(tmp_path / "a" / "*.txt"), str(tmp_path / "b" / "*.txt"))), size=50)
    ctx = _ctx(tmp_path / "run", config=config)
    assert len(ctx.resolve_files(config.files)) == 2
    (tmp_path / "b" / "two.txt").rename(tmp_path / "two.txt")
    with pytest.raises(DataError, match=r"b/\*\.txt: stages\.vocab\.files: matches no file now"):
        ctx.resolve_files(config.files)
    (tmp_path / "b" / "sub.txt").mkdir()  # a folder alone is no file either
    with pytest.raises(DataError, match=r"matches no file now"):
        ctx.resolve_files(config.files)


def test_an_input_edited_while_its_stage_runs_makes_it_run_again_even_when_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fingerprint is taken when a stage starts: a file edited while it ran and put back before the
    next run (an editor's undo, a checkout of another branch and back) matched it again, and the
    outputs built partly from the edit were kept without a word."""
    import json

    from xfer.transformer import vocab_stage

    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat .\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: r\nseed: 1\nstages:\n  vocab: {{kind: transformer.vocab, files: {text}, size: 60}}\n")
    trained = vocab_stage.run_vocab

    def edited_meanwhile(ctx: StageContext) -> None:
        trained(ctx)
        text.write_text("a dog ran in the park .\n")

    monkeypatch.setattr(vocab_stage, "run_vocab", edited_meanwhile)
    assert _run(recipe, tmp_path / "run") == 0
    assert "[vocab] its input files changed while it ran" in capsys.readouterr().err
    state = json.loads((tmp_path / "run" / "vocab" / "stage.json").read_text())
    assert state["status"] == "completed" and state["inputs_changed_while_running"]

    monkeypatch.setattr(vocab_stage, "run_vocab", trained)
    text.write_text("the cat sat on the mat .\n")  # as it was when the stage started
    assert _run(recipe, tmp_path / "run") == 0
    out = capsys.readouterr().out
    assert "[vocab] runs again: its input files changed while it ran" in out
    assert "inputs_changed_while_running" not in json.loads((tmp_path / "run" / "vocab" / "stage.json").read_text())
    assert _run(recipe, tmp_path / "run") == 0
    assert "[vocab] up to date, skipped" in capsys.readouterr().out

"""Hostile use of the `xfer` command line, fifth round: mistyped commands, kinds and options, and
what `xfer run` tells the user to do after it was stopped (Ctrl-C, SIGTERM) during a `--fork`."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.testing import write_recipe

from .recipes import testing_host  # noqa: F401  (autouse: the testing plugin as the default host)

TWO = "name: two\nstages:\n  a: {kind: toy.corpus, sentences: 5}\n  b: {kind: toy.corpus, sentences: 6}\n"


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_a_mistyped_command_kind_or_option_names_the_one_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`xfer rn` listed all the commands without naming `run`; `--onyl` was "unrecognized" under
    the usage of `xfer` itself, not `xfer run`'s, with no word of `--only`."""
    err = _usage_error(["rn", "r.yaml"], capsys)
    assert "invalid choice: 'rn'; did you mean 'run'? (choose from 'run', 'validate'" in err
    assert "did you mean 'results'?" in _usage_error(["resuls", "runs/x"], capsys)
    assert "invalid choice: 'stag'; did you mean 'stage'?" in _usage_error(["explain", "stag", "toy.corpus"], capsys)
    assert "did you mean 'stage'?" in _usage_error(["components", "stages"], capsys)
    err = _usage_error(["zzzz"], capsys)  # nothing near: the list alone, no guess
    assert "invalid choice: 'zzzz' (choose from 'run'" in err and "did you mean" not in err

    recipe = write_recipe(tmp_path, TWO)
    err = _usage_error(["run", str(recipe), "--onyl", "a", "--run-dir", str(tmp_path / "run")], capsys)
    assert err.startswith("usage: xfer run ")
    assert "xfer run: error: unrecognized arguments: --onyl a; did you mean --only?" in err
    err = _usage_error(["run", str(recipe), "--bogus"], capsys)
    assert "unrecognized arguments: --bogus" in err and "did you mean" not in err
    assert "did you mean --json?" in _usage_error(["status", str(tmp_path), "--jsno"], capsys)
    assert not (tmp_path / "run").exists()


def test_a_mistyped_option_of_a_plugin_sub_sub_command_names_the_one_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`xfer vocab train ... --cassed` was refused under `xfer`'s usage; it is `xfer vocab train`'s."""
    from xfer.core.plugins import set_default_host
    from xfer.testing import make_host

    set_default_host(make_host(autoload=True))
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b\n")
    err = _usage_error(["vocab", "train", str(corpus), "--size", "9", "--out", str(tmp_path / "v"), "--cassed"], capsys)
    assert err.startswith("usage: xfer vocab train ")
    assert "xfer vocab train: error: unrecognized arguments: --cassed; did you mean --cased?" in err
    assert "did you mean 'train'?" in _usage_error(["vocab", "tran"], capsys)
    assert not (tmp_path / "v").exists()


def _stop_stage_b(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in the middle of stage `b` (a toy.corpus stage)."""
    from xfer.core.toy import stage

    run_corpus = stage.run_corpus

    def interrupted(ctx: object) -> None:
        if getattr(ctx, "name", None) == "b":
            raise KeyboardInterrupt
        run_corpus(ctx)  # type: ignore[arg-type]

    monkeypatch.setattr(stage, "run_corpus", interrupted)


def test_ctrl_c_in_a_fork_says_how_to_resume_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After Ctrl-C (or SIGTERM) in a stage of `xfer run R --run-dir A --fork B`, xfer said "re-run the
    same command to resume", which was then refused ("--fork target B already exists"): the fork
    resumes as `--run-dir B`, and the message now says so."""
    recipe = write_recipe(tmp_path, TWO)
    source, fork = tmp_path / "run", tmp_path / "fork"
    assert cli.main(["run", str(recipe), "--run-dir", str(source)]) == 0
    capsys.readouterr()
    _stop_stage_b(monkeypatch)
    argv = ["run", str(recipe), "--run-dir", str(source), "--fork", str(fork), "stages.b.sentences=7"]
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    assert f"interrupted; re-run it with --run-dir {fork} in place of --fork {fork} (the fork exists now)" in err
    monkeypatch.undo()
    assert cli.main(argv) == 2  # what the old advice led to
    assert f"--fork target {fork} already exists" in capsys.readouterr().err
    assert cli.main(["run", str(recipe), "--run-dir", str(fork), "stages.b.sentences=7"]) == 0  # the new one
    assert len((fork / "b" / "outputs" / "text" / "toy.txt").read_text().split("\n\n")[0].splitlines()) == 7

    # SIGTERM says the same; a run without --fork keeps the plain advice
    args = cli.argparse.Namespace(command="run", fork=fork, _fork_was_free=True)
    assert cli._terminated(args) == 143
    assert f"re-run it with --run-dir {fork} in place of --fork {fork}" in capsys.readouterr().err
    assert cli._rerun(cli.argparse.Namespace(command="run", fork=None)) == "re-run the same command"


def test_ctrl_c_during_the_fork_copy_says_to_delete_the_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while `--fork B` copied the run left B half-copied (no recipe.resolved.yaml, by design):
    "re-run the same command to resume" was refused ("already exists"), and `--run-dir B` too (not a
    run directory). B is this command's own copy, so the message says to delete it first."""
    from xfer.core.runs import runner

    recipe = write_recipe(tmp_path, TWO)
    source, fork = tmp_path / "run", tmp_path / "fork"
    assert cli.main(["run", str(recipe), "--run-dir", str(source)]) == 0
    capsys.readouterr()

    def cut_short(src: str, dst: str, *args: object, **kwargs: object) -> None:
        Path(dst).mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(src) / "environment.json", dst)
        raise KeyboardInterrupt

    monkeypatch.setattr(runner.shutil, "copytree", cut_short)
    argv = ["run", str(recipe), "--run-dir", str(source), "--fork", str(fork), "stages.b.sentences=7"]
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    assert f"interrupted; delete {fork} (a copy of the run directory cut short) and re-run the same command" in err
    monkeypatch.undo()
    shutil.rmtree(fork)
    assert cli.main(argv) == 0  # the advice works
    assert (fork / "recipe.resolved.yaml").is_file()


def test_a_fork_target_that_was_the_users_is_never_called_a_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A --fork target that held files before the command is the user's: Ctrl-C before the runner
    refused it must not tell them to delete it."""
    from xfer.core.recipes import recipe as recipes

    recipe = write_recipe(tmp_path, TWO)
    fork = tmp_path / "mine"
    fork.mkdir()
    (fork / "notes.txt").write_text("keep me\n")

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(recipes, "load_recipe", interrupted)
    assert cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "run"), "--fork", str(fork)]) == 130
    err = capsys.readouterr().err
    assert err == "interrupted; re-run the same command to resume\n"
    assert (fork / "notes.txt").read_text() == "keep me\n"


def test_ctrl_c_in_a_command_that_does_not_resume_says_only_interrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in `xfer validate --data` (or `vocab train`, `score`, `compare`) said "re-run the same
    command to resume": nothing of theirs resumes."""
    from xfer.core.recipes import recipe as recipes

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(recipes, "load_recipe", interrupted)
    recipe = write_recipe(tmp_path, TWO)
    assert cli.main(["validate", str(recipe), "--data"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_explain_of_a_component_under_the_wrong_kind_names_its_kind(capsys: pytest.CaptureFixture[str]) -> None:
    """`xfer explain task transformer.finetune` said only "plugin 'transformer' provides: no tasks"
    (and `explain stage glue/rte` "no stages"): the name exists, as a component of another kind."""
    assert cli.main(["explain", "stage", "toy/agreement"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown stage 'toy/agreement'")
    assert err.rstrip().endswith("toy/agreement is a task: xfer explain task toy/agreement")
    assert cli.main(["explain", "task", "toy.corpus"]) == 2
    assert "toy.corpus is a stage: xfer explain stage toy.corpus" in capsys.readouterr().err
    assert cli.main(["explain", "task", "toy/agreemnt"]) == 2  # a typo keeps its did-you-mean, no other kind
    err = capsys.readouterr().err
    assert "did you mean 'toy/agreement'?" in err and " is a " not in err
    assert cli.main(["explain", "task", "toy/agreement"]) == 0


def test_flops_refuses_a_tokenizer_folder_without_a_vocabulary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`xfer flops` with `tokenizer:` a folder holding no vocab.txt or tokenizer.json (a vocab stage's
    `outputs/` instead of `outputs/tokenizer`) costed the model at the preset's 30,522 tokens, exit 0:
    a FLOP count, and the steps a budget buys, for a stage that cannot load its tokenizer."""
    from xfer.core.plugins import set_default_host
    from xfer.testing import make_host

    outputs = tmp_path / "vocab" / "outputs"
    (outputs / "tokenizer").mkdir(parents=True)
    (outputs / "tokenizer" / "vocab.txt").write_text(
        "".join(f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])
    )
    (tmp_path / "text.txt").write_text("a b a b\nb a\n")
    stage = "{kind: electra.pretrain, corpus: {files: text.txt}, model: tiny, budget: {tokens: 1e6}, tokenizer: %s}"
    recipe = write_recipe(tmp_path, f"stages:\n  pretrain: {stage % outputs}\n")
    good = write_recipe(tmp_path, f"stages:\n  pretrain: {stage % (outputs / 'tokenizer')}\n", "good.yaml")
    set_default_host(make_host(autoload=True))
    assert cli.main(["flops", str(recipe), "--json"]) == 2
    err = capsys.readouterr().err
    assert f"error: stage 'pretrain': tokenizer: {outputs} holds no vocab.txt or tokenizer.json" in err
    assert cli.main(["flops", str(good), "--json"]) == 0  # the tokenizer folder itself: its 7 tokens
    (row,) = __import__("json").loads(capsys.readouterr().out)
    assert row["vocab_size"] == 7 and row["vocab_from"] == "tokenizer"


def test_a_bad_device_is_refused_before_the_data_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`xfer run R --device gpu` (or `cuda` on a CPU machine) was refused only once the data check had
    read every data file of the recipe, minutes on a large data set; it is now refused first."""
    from xfer.core.runs import preflight

    checked: list[object] = []
    check_data = preflight.check_data
    monkeypatch.setattr(
        preflight, "check_data", lambda *args, **kwargs: checked.append(args) or check_data(*args, **kwargs)
    )
    recipe = write_recipe(tmp_path, TWO)
    assert cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "run"), "--device", "gpu"]) == 2
    assert capsys.readouterr().err.startswith("error: --device 'gpu': ")
    assert checked == [] and not (tmp_path / "run").exists()
    assert cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "run"), "--device", "cpu"]) == 0
    assert len(checked) == 1


def test_every_commands_help_says_what_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    """`xfer run --help` (and every other sub-command's but `score` and `vocab train`) showed usage
    and options without a word of what the command does, and `status`, `plugins`, `components` and
    `explain` listed arguments without any help (`--json` bare)."""
    from xfer.core.plugins import set_default_host
    from xfer.testing import make_host

    host = make_host(autoload=True)
    set_default_host(host)
    top = cli.build_parser(host, [])
    sub = next(a for a in top._actions if isinstance(a, cli.argparse._SubParsersAction))
    summaries = {choice.dest: choice.help for choice in sub._choices_actions}
    assert {"run", "results", "explain", "flops", "compare", "vocab"} <= set(summaries)
    for command, summary in summaries.items():
        with pytest.raises(SystemExit) as exited:
            cli.main([command, "--help"])
        assert exited.value.code == 0
        text = capsys.readouterr().out
        description = text.split("\n\n")[1]
        assert description.strip(), f"xfer {command} --help says nothing of what it does"
        if command not in ("score", "compare"):  # those have a description of their own
            assert " ".join(description.split()) == summary, command
        if command in ("status", "plugins", "components"):
            assert re.search(r"--json +print JSON instead of a", text), text
        if command in ("status", "explain", "components"):  # positionals with help of their own
            assert re.search(r"\n  (run_dir|name|\{task,[a-z,]+\})\s+[a-z]", text), text

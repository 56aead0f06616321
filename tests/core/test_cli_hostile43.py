"""Hostile use of the `xfer` command line, round 43: the end of options (`--`) and a forgotten `=`
after an option, and `xfer validate` of several recipes at once (a shell glob)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core import cli
from xfer.testing import write_recipe

from .recipes import testing_host  # noqa: F401  (autouse: the testing plugin as the default host)

TWO = "name: two\nstages:\n  a: {kind: toy.corpus, sentences: 5}\n  b: {kind: toy.corpus, sentences: 6}\n"
ONE = "name: one\nstages:\n  a: {kind: toy.corpus, sentences: 5}\n"
BAD = "name: bad\nstages:\n  a: {kind: toy.corpus, sentences: many}\n"


def test_overrides_after_the_end_of_options_are_taken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`xfer run R --run-dir D -- a.b=1` (`--`, the usual end of options) was refused with
    "unrecognized arguments: --"; only `xfer run R -- a.b=1`, `--` right after the recipe, worked."""
    recipe = write_recipe(tmp_path, TWO)
    run_dir = tmp_path / "run"
    argv = ["run", str(recipe), "--run-dir", str(run_dir), "stages.a.sentences=7", "--", "stages.b.sentences=8"]
    assert cli.main(argv) == 0
    resolved = (run_dir / "recipe.resolved.yaml").read_text()
    assert "sentences: 7" in resolved and "sentences: 8" in resolved
    assert cli.main(["show", str(recipe), "--", "stages.b.sentences=9"]) == 0
    assert "sentences: 9" in capsys.readouterr().out


def test_an_override_without_its_equals_sign_after_an_option_gets_the_override_diagnostic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before the options a forgotten `=` is reported at the override; after one (`--run-dir D a.b`) it
    was "unrecognized arguments: a.b", a usage error that did not say it was taken for no override."""
    recipe = write_recipe(tmp_path, TWO)
    run_dir = tmp_path / "run"
    assert cli.main(["run", str(recipe), "--run-dir", str(run_dir), "stages.a.sentences"]) == 2
    err = capsys.readouterr().err
    assert "<override 1: stages.a.sentences>:1:1: an override must look like 'path.to.key=value'" in err
    assert "Traceback" not in err and not run_dir.exists()
    # next to an unknown option its value stays with it in the usage error (`--onyl a`)
    with pytest.raises(SystemExit) as exited:
        cli.main(["run", str(recipe), "--onyl", "a", "--run-dir", str(run_dir)])
    assert exited.value.code == 2
    assert "unrecognized arguments: --onyl a; did you mean --only?" in capsys.readouterr().err
    # a command without overrides still refuses a stray word
    with pytest.raises(SystemExit) as exited:
        cli.main(["status", str(tmp_path), "extra"])
    assert exited.value.code == 2 and "unrecognized arguments: extra" in capsys.readouterr().err


def test_validate_of_several_recipes_validates_each_and_exits_with_the_worst(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`xfer validate recipes/*.yaml` took every recipe after the first for an override ("an override
    must look like 'path.to.key=value'" once per file) and validated none of them."""
    two, one = write_recipe(tmp_path, TWO, "two.yaml"), write_recipe(tmp_path, ONE, "one.yml")
    bad = write_recipe(tmp_path, BAD, "bad.yaml")
    assert cli.main(["validate", str(two), str(one)]) == 0
    out = capsys.readouterr().out
    assert f"{two}: ok (2 stages: a -> b)" in out and f"{one}: ok (1 stage: a)" in out

    assert cli.main(["validate", str(bad), str(two), str(tmp_path / "missing.yaml"), str(one)]) == 2
    captured = capsys.readouterr()
    assert f"{two}: ok" in captured.out and f"{one}: ok" in captured.out and str(bad) not in captured.out
    assert f"{bad}:3:" in captured.err and "stages.a.sentences" in captured.err
    assert "missing.yaml" in captured.err and "override must look like" not in captured.err
    assert "Traceback" not in captured.err

    # overrides apply to each recipe named
    assert cli.main(["validate", str(bad), str(one), "stages.a.sentences=3"]) == 0
    assert f"{bad}: ok" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["run", "show"])
def test_run_or_show_of_two_recipes_names_the_second_as_a_recipe(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`xfer run a.yaml b.yaml` said of b.yaml "an override must look like 'path.to.key=value'"."""
    two, one = write_recipe(tmp_path, TWO, "two.yaml"), write_recipe(tmp_path, ONE, "one.yaml")
    options = ["--run-dir", str(tmp_path / "run")] if command == "run" else []
    assert cli.main([command, str(two), str(one), *options]) == 2
    err = capsys.readouterr().err
    assert f"error: xfer {command} takes one recipe, not also {one}" in err and "xfer validate` takes several" in err
    assert "override must look like" not in err and not (tmp_path / "run").exists()


def test_a_repeated_only_runs_every_stage_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--only a --only b` ran b alone (a second `--only` silently replaced the first) and said of a
    "not selected (--only), left as it is"."""
    three = TWO + "  c: {kind: toy.corpus, sentences: 7}\n"
    recipe = write_recipe(tmp_path, three)
    run_dir = tmp_path / "run"
    assert cli.main(["run", str(recipe), "--run-dir", str(run_dir), "--only", "a", "--only", "c"]) == 0
    out = capsys.readouterr().out
    assert "[b] not selected (--only)" in out and out.count("not selected (--only)") == 1
    assert (run_dir / "a" / "stage.json").is_file() and (run_dir / "c" / "stage.json").is_file()
    assert not (run_dir / "b" / "stage.json").exists()
    assert cli.main(["run", str(recipe), "--run-dir", str(run_dir), "--only", "a", "--only", "zz"]) == 2
    assert "--only: recipe 'two' has no stage 'zz'" in capsys.readouterr().err

"""CLI commands: plugins, components, explain, new-plugin (scaffold works out of the box)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.plugins import set_default_host
from xfer.testing import make_host


@pytest.fixture(autouse=True)
def host():
    set_default_host(make_host(["xfer.testing.plugin"]))
    yield
    set_default_host(None)


def test_plugins_lists_hooks_and_components(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "toy  (xfer-core" in out and "hooks: xfer_stages, xfer_tasks" in out
    assert "task      toy/agreement" in out
    assert cli.main(["plugins", "--json"]) == 0
    data = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    assert {"core", "toy", "testing"} <= set(data)
    fit = next(c for c in data["testing"]["components"] if c["name"] == "testing.fit")
    assert fit["kind"] == "stage" and fit["version"] == "1" and "bag-of-words" in fit["summary"]


def test_components_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["components", "task"]) == 0
    out = capsys.readouterr().out
    assert "toy/pos" in out and "testing.fit" not in out
    assert cli.main(["explain", "stage", "testing.fit"]) == 0
    out = capsys.readouterr().out
    assert "outputs: model (bow-model)" in out, "what each output holds (ComponentSpec.output_kinds)"
    assert "(a stage output must be: bow-model)" in out, "what a reference field takes"
    assert "task: a task name or a mapping with 'name' = (required)" in out
    assert "train.lr: a number = 0.01  # Peak learning rate." in out
    assert "train.schedule: one of 'linear', 'warmup_on_decay'" in out
    assert cli.main(["explain", "stage", "testing.fitt"]) == 2
    assert "did you mean 'testing.fit'" in capsys.readouterr().err


def test_new_plugin_scaffold_passes_its_own_conformance_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "xfer-mine"
    assert cli.main(["new-plugin", "mine", "--dir", str(target)]) == 0
    assert (target / "src/xfer/mine/plugin.py").exists() and not (target / "src/xfer/__init__.py").exists()
    assert cli.main(["new-plugin", "mine", "--dir", str(target)]) == 2, "refuses to overwrite"
    assert cli.main(["new-plugin", "Bad-Name"]) == 2
    capsys.readouterr()
    for taken in ("core", "toy", "testing"):  # a built-in namespace, a built-in plugin, an xfer package
        assert cli.main(["new-plugin", taken, "--dir", str(tmp_path / taken)]) == 2
        assert f"plugin name {taken!r} is taken" in capsys.readouterr().err
        assert not (tmp_path / taken).exists()
    env = {**os.environ, "PYTHONPATH": str(target / "src")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(target / "tests"),
            "-k",
            "registered or round_trip or unknown_key or one_step",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=target,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "8 passed" in result.stdout


def test_recipe_reference_documents_every_train_setting() -> None:
    import dataclasses

    from xfer.core.train_config import TrainConfig

    docs = (Path(__file__).resolve().parents[2] / "docs" / "recipes.md").read_text()
    missing = [f.name for f in dataclasses.fields(TrainConfig) if f"| `{f.name}` |" not in docs]
    assert not missing, f"docs/recipes.md lacks TrainConfig fields {missing}"


def test_unavailable_device_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    from xfer.testing import write_recipe

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    recipe = write_recipe(tmp_path, "stages:\n  c: {kind: toy.corpus, sentences: 5}\n")
    assert cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "run"), "--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err
    assert not (tmp_path / "run").exists(), "nothing is written before the device is known to work"


def test_overrides_may_come_before_or_after_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xfer.testing import write_recipe

    recipe = write_recipe(tmp_path, "stages:\n  c: {kind: toy.corpus, sentences: 5}\n")
    args = [str(recipe), "stages.c.sentences=7", "--run-dir", str(tmp_path / "run"), "stages.c.seed=3"]
    assert cli.main(["show", *args[:2], *args[4:]]) == 0
    shown = capsys.readouterr().out
    assert "sentences: 7" in shown and "seed: 3" in shown
    assert cli.main(["run", *args]) == 0
    resolved = (tmp_path / "run" / "recipe.resolved.yaml").read_text()
    assert "sentences: 7" in resolved and "seed: 3" in resolved
    with pytest.raises(SystemExit) as caught:
        cli.main(["run", *args, "--bogus"])
    assert caught.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_an_abbreviated_option_is_not_taken_for_the_full_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--run D` is not `--run-dir D`, nor `--for D` `--fork D`: a typo or a shortened flag is refused
    (argparse's default prefix matching would accept it, and a flag added later could change its meaning)."""
    from xfer.testing import write_recipe

    recipe = write_recipe(tmp_path, "stages:\n  c: {kind: toy.corpus, sentences: 5}\n")
    for argv in (
        ["run", str(recipe), "--run", str(tmp_path / "run")],
        ["run", str(recipe), "--for", str(tmp_path / "fork")],
        ["status", str(tmp_path), "--js"],
    ):
        with pytest.raises(SystemExit) as caught:
            cli.main(argv)
        assert caught.value.code == 2, argv
        assert "unrecognized arguments: " + argv[-2 if argv[0] == "run" else -1] in capsys.readouterr().err
    assert not (tmp_path / "run").exists() and not (tmp_path / "fork").exists()


def test_a_full_disk_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from xfer.core import checkpoint
    from xfer.testing import write_recipe

    from .recipes import FIT

    def full(directory: Path, *args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory / ".tmp-step-0000005-1"))

    monkeypatch.setattr(checkpoint, "save_checkpoint", full)
    recipe = write_recipe(tmp_path, FIT)
    assert cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"error: {tmp_path / 'run'}/fit/checkpoints/.tmp-step-0000005-1: No space left on device; fix that" in err


def test_status_of_a_wrong_path_says_what_it_is(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo'd run directory is missing, not "not a run directory (no recipe.resolved.yaml)"."""
    assert cli.main(["status", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'nope'}: no such directory"
    (tmp_path / "afile").write_text("x")
    assert cli.main(["status", str(tmp_path / "afile")]) == 2
    assert "afile: not a directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["status", str(tmp_path / "empty")]) == 2
    assert "empty: not a run directory (no recipe.resolved.yaml)" in capsys.readouterr().err
    (tmp_path / "run" / "stage").mkdir(parents=True)
    (tmp_path / "run" / "stage" / "stage.json").write_text('{"status": "completed"}')
    assert cli.main(["status", str(tmp_path / "run" / "stage")]) == 2
    assert f"a stage folder, not a run directory; try `xfer status {tmp_path / 'run'}`" in capsys.readouterr().err


def test_xfer_warnings_read_as_warning_lines_and_other_libraries_keep_pythons_format(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tag unseen in training printed as `.../xfer/core/tasks.py:551: UnseenTagsWarning: ...` plus
    a source line: xfer's internals, where the user needs one `warning:` line."""
    import warnings

    from xfer.core.tasks import UnseenTagsWarning

    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)  # restored after the test
    with pytest.raises(SystemExit):  # argparse's --version exits; main installed the format before parsing
        cli.main(["--version"])
    assert warnings.formatwarning is cli._format_warning
    ours = warnings.formatwarning("2 dev tags not in training", UnseenTagsWarning, "/elsewhere/plugin.py", 7)
    assert ours == "warning: 2 dev tags not in training\n"
    raised_in_xfer = warnings.formatwarning("x", UserWarning, "/venv/site-packages/xfer/core/plugins.py", 3)
    assert raised_in_xfer == "warning: x\n"
    theirs = warnings.formatwarning("deprecated", DeprecationWarning, "/venv/site-packages/torch/nn/x.py", 12)
    assert theirs.startswith("/venv/site-packages/torch/nn/x.py:12: DeprecationWarning: deprecated")


class _ClosedPipe:
    """stdout after the reader of `xfer run ... | head` exited."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        import io

        raise io.UnsupportedOperation("no descriptor here")


def test_a_run_whose_output_pipe_closed_is_not_a_success(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`xfer run r.yaml | head -1` stopped the run at its next line of output and exited 0, so a
    script (or `make`) took a run cut after its first stage for a finished one."""
    from xfer.testing import write_recipe

    recipe = write_recipe(tmp_path, "stages:\n  c: {kind: toy.corpus, sentences: 5}\n")
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "run")]) == 141
    assert "the run's output pipe was closed" in capsys.readouterr().err


@pytest.mark.parametrize("number", [122, 27])  # EDQUOT, EFBIG: on a disk that still has free space
def test_a_quota_or_file_size_limit_met_by_safetensors_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, number: int
) -> None:
    """safetensors reports an OS error as SafetensorError("... (os error N)"), which is no OSError:
    only a nearly full disk was recognised, so a quota or `ulimit -f` ended the run in a traceback."""
    from safetensors import SafetensorError

    from xfer.core import checkpoint
    from xfer.testing import write_recipe

    from .recipes import FIT

    def refused(*args: object, **kwargs: object) -> None:
        raise SafetensorError(f"Error while serializing: I/O error: {os.strerror(number)} (os error {number})")

    monkeypatch.setattr(checkpoint, "save_model", refused)
    recipe = write_recipe(tmp_path, FIT)
    assert cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"fit/checkpoints/.tmp-step-0000005-{os.getpid()}: {os.strerror(number)}; fix that" in err
    assert not list((tmp_path / "run/fit/checkpoints").glob(".tmp-*")), "no half-written checkpoint left"


def test_a_full_disk_met_by_a_stage_export_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stage's own safetensors export (outside the checkpoint code) meeting a full disk raised
    SafetensorError, no OSError: a traceback instead of the full-disk line."""
    from safetensors import SafetensorError

    from xfer.core.runs import runner

    def export(*args: object, **kwargs: object) -> None:
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(runner, "run_recipe", export)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("stages:\n  c: {kind: toy.corpus, sentences: 5}\n")
    assert cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: No space left on device (Error while serializing") and err.count("\n") == 1


@pytest.mark.parametrize("command", ["run", "validate", "show"])
def test_a_missing_recipe_names_only_the_recipe_as_required(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The optional `key=value` overrides were listed as required too ("required: recipe, key=value")."""
    with pytest.raises(SystemExit) as caught:
        cli.main([command])
    err = capsys.readouterr().err
    assert caught.value.code == 2
    assert err.rstrip().endswith("error: the following arguments are required: recipe")


def test_status_json_is_strict_json_and_show_keeps_unicode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A damaged stage.json (`"started": NaN`) made `xfer status --json` print a bare NaN duration,
    which strict JSON readers refuse; `xfer show` printed a recipe name "ü" as "\\xFC"."""
    from xfer.testing import write_recipe

    recipe = write_recipe(
        tmp_path,
        "name: rüb\nstages:\n  fit:\n    kind: testing.fit\n    task: {name: toy/agreement, train_size: 32, dev_size: 16}\n"
        "    train: {steps: 1, batch_size: 8}\n",
    )
    assert cli.main(["run", str(recipe), "--run-dir", str(tmp_path / "run")]) == 0
    state_path = tmp_path / "run" / "fit" / "stage.json"
    state = json.loads(state_path.read_text())
    state["started"] = float("nan")
    state_path.write_text(json.dumps(state))
    capsys.readouterr()
    assert cli.main(["status", str(tmp_path / "run"), "--json"]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out, parse_constant=lambda c: pytest.fail(f"bare {c} in the JSON"))
    assert rows and rows[0]["stage"] == "fit"
    assert cli.main(["show", str(recipe)]) == 0
    assert "rüb" in capsys.readouterr().out

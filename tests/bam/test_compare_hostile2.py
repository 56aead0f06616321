"""`xfer compare` against hostile inputs, second round: where and how its files are written, and its
statistics against independent references.

Systems are synthetic stage folders (`write_system` of test_compare_hostile: no training).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from xfer.bam import stats
from xfer.core import cli

from .test_compare_hostile import TAGS, two_systems


def _run_folder(root: Path) -> Path:
    """A run folder holding two finished bam stages, A (better) and B, as `xfer run` leaves them."""
    run = root / "runs" / "exp"
    run.mkdir(parents=True)
    two_systems(run)
    (run / "recipe.resolved.yaml").write_text(
        "name: exp\nstages:\n  A: {kind: bam.teachers}\n  B: {kind: bam.student}\n"
    )
    return run


# --- the output folder ----------------------------------------------------------------------------


def test_the_default_output_folder_is_in_the_run_not_the_current_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --out, compare.{md,json,png} went to ./compare: run from a repository's root, the
    tables of runs under the git-ignored runs/ landed in the repository (and were committed)."""
    run = _run_folder(tmp_path)
    cwd = tmp_path / "repo"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    code = cli.main(["compare", str(run / "A"), str(run / "B"), "--no-plot", "--bootstrap", "100"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert list(cwd.iterdir()) == []
    saved = json.loads((run / "compare" / "compare.json").read_text())
    assert list(saved["systems"]) == ["A", "B"]
    assert f"written: {run / 'compare' / 'compare.md'}" in out
    # a run folder given whole: the same place, and the earlier comparison's folder is not a system
    code = cli.main(["compare", str(run), "--no-plot", "--bootstrap", "100"])
    assert code == 0, capsys.readouterr().err
    assert list(json.loads((run / "compare" / "compare.json").read_text())["systems"]) == ["A", "B"]
    assert list(cwd.iterdir()) == []


def test_a_stage_named_compare_is_not_written_into(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run whose recipe has a stage called `compare`: its folder is the stage's (run or not yet)."""
    run = _run_folder(tmp_path)
    (run / "compare").mkdir()
    (run / "compare" / "stage.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    code = cli.main(["compare", str(run / "A"), str(run / "B"), "--no-plot", "--bootstrap", "100"])
    err = capsys.readouterr().err
    assert code == 2 and "stage 'compare': give the comparison's folder with --out" in err
    assert sorted(p.name for p in (run / "compare").iterdir()) == ["stage.json"]
    shutil.rmtree(run / "compare")  # not run yet: named in the recipe only
    recipe = run / "recipe.resolved.yaml"
    recipe.write_text(recipe.read_text() + "  compare: {kind: bam.student}\n")
    code = cli.main(["compare", str(run / "A"), str(run / "B"), "--no-plot", "--bootstrap", "100"])
    assert code == 2 and "stage 'compare'" in capsys.readouterr().err
    assert not (run / "compare").exists()


def test_a_stage_outside_a_run_folder_still_writes_to_the_current_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two_systems(tmp_path / "loose")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["compare", str(a), str(b), "--no-plot", "--bootstrap", "100"]) == 0, capsys.readouterr().err
    assert (tmp_path / "compare" / "compare.md").is_file()


def test_no_plot_does_not_leave_an_earlier_comparisons_plot(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """--no-plot left the compare.png of an earlier comparison (other systems, other runs) beside
    the new compare.md and compare.json, which it then contradicted."""
    a, b = two_systems(tmp_path)
    out = tmp_path / "c"
    out.mkdir()
    (out / "compare.png").write_bytes(b"the plot of another comparison")
    code = cli.main(["compare", f"A={a}", f"B={b}", "--no-plot", "--bootstrap", "100", "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["compare.json", "compare.md"]
    assert f"(removed the earlier {out / 'compare.png'})" in printed


def test_the_plot_is_written_atomically(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fig.savefig(path)` wrote the PNG in place: a crash (or a full disk) while saving left a
    cut-short compare.png."""
    import matplotlib.figure

    def savefig(self: object, target: object, **kwargs: object) -> None:
        Path(str(target)).write_bytes(b"\x89PNG cut short")
        raise OSError(28, "No space left on device")

    a, b = two_systems(tmp_path)
    out = tmp_path / "c"
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    code = cli.main(["compare", f"A={a}", f"B={b}", "--bootstrap", "100", "--out", str(out)])
    assert code != 0
    capsys.readouterr()
    assert not (out / "compare.png").exists()
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


# --- statistics -----------------------------------------------------------------------------------


def test_token_accuracy_of_a_resample_of_empty_sentences_is_not_nan() -> None:
    """A dev set holding an empty sentence: a resample of it alone gave 0/0 = NaN words right, so
    the bootstrap interval was NaN (written as NaN into compare.json) and those resamples counted
    in no comparison: here p must be exactly 1 (Δ* ≥ 2Δ = −100 on every resample), it was ~26/27."""
    gold = [[], ["O"], ["B-A"]]
    a = stats.build_metric("tagging", "accuracy", gold, [[[], ["B-A"], ["B-A"]]], TAGS)
    b = stats.build_metric("tagging", "accuracy", gold, [[[], ["O"], ["B-A"]]], TAGS)
    assert a.full().tolist() == [50.0] and b.full().tolist() == [100.0]
    assert a(np.zeros((1, 3), dtype=int)).tolist() == [[0.0]]
    result = stats.paired_bootstrap([a], [b], 2000, seed=0)
    assert result.delta == -50.0
    assert np.isfinite([result.low, result.high]).all()
    assert result.p == 1.0


def test_a_file_on_the_output_path_is_refused_before_the_work(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`--out notes.txt/compare` (a file where a folder must be) ran every test, then died in
    `mkdir` with a NotADirectoryError traceback."""
    a, b = two_systems(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    out = tmp_path / "notes.txt" / "sub" / "compare"
    code = cli.main(["compare", str(a), str(b), "--no-plot", "--bootstrap", "100", "--out", str(out)])
    printed, err = capsys.readouterr()
    assert code == 2
    assert f"--out {out}: {tmp_path / 'notes.txt'} exists and is not a folder" in err
    assert printed == ""  # refused before any table was computed


def test_a_system_name_with_dollar_signs_is_drawn_as_written(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """matplotlib read `$...$` in a system name as math: `x $\\badcmd$` raised a ParseFatalException
    traceback after compare.md and compare.json were written (and `$\\lambda$` became a Greek letter)."""
    a, b = two_systems(tmp_path)
    out = tmp_path / "c"
    code = cli.main(
        ["compare", f"S2M $\\lambda_0$={a}", f"x $\\badcmd$ y={b}", "--bootstrap", "100", "--out", str(out)]
    )
    printed, err = capsys.readouterr()
    assert code == 0, err
    assert "| S2M $\\lambda_0$ |" in printed
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""What a finished or damaged run directory tells the user, second hostile pass: strict JSON for
diverged scores (results.json, metrics.jsonl), `xfer results` agreeing with `xfer status` on a
damaged completed stage, and plots of earlier attempts left next to a new report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.results import RESULTS_FILE, markdown_rows, read_results, task_result
from xfer.core.runs.report import metric_json, read_metrics, write_report


@pytest.fixture(autouse=True)
def _draw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XFER_REPORT_PLOTS", "1")


def write_stage(stage: Path, results: dict | str, record: dict | None = None) -> Path:
    (stage / RESULTS_FILE).parent.mkdir(parents=True, exist_ok=True)
    (stage / "stage.json").write_text(json.dumps(record or {"status": "completed", "signature": {"config": {}}}))
    path = stage / RESULTS_FILE
    path.write_text(results if isinstance(results, str) else json.dumps(results))
    return path


DIVERGED = [
    {"trial": 0, "seed": 1, "steps": 5, "checkpoint": "best", "f1": math.nan, "loss": math.inf},
    {"trial": 1, "seed": 2, "steps": 5, "checkpoint": "best", "f1": 80.0, "loss": -math.inf},
    {"trial": 2, "seed": 3, "steps": 5, "checkpoint": "best", "f1": 82.0, "loss": 0.5},
]


# --- strict JSON ----------------------------------------------------------------------------------


def test_results_of_a_diverged_trial_are_strict_json_and_read_back_as_diverged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stage writes `task_result(...)` with json.dumps: a diverged trial's NaN became a bare `NaN`
    token, which jq, JavaScript and Go refuse (the whole file unreadable to them). Now it is the
    string "NaN", read back as the float: the table still shows the trial as diverged."""
    entry = task_result("f1", DIVERGED)
    text = json.dumps({"t": entry}, allow_nan=False)  # raised ValueError: out of range float values
    assert json.loads(text)["t"]["runs"][0]["f1"] == "NaN"
    assert json.loads(text)["t"]["runs"][1]["loss"] == "-Infinity"
    assert json.loads(text)["t"]["summary"]["f1"]["mean"] == "NaN"
    path = write_stage(tmp_path / "run" / "ft", text)
    results = read_results(path.parent.parent.parent)
    assert results is not None
    run = results["t"]["runs"][0]
    assert math.isnan(run["f1"]) and run["loss"] == math.inf and run["checkpoint"] == "best"
    assert math.isnan(results["t"]["summary"]["f1"]["mean"]) and results["t"]["summary"]["f1"]["median"] == 80.0
    assert cli.main(["results", str(tmp_path / "run")]) == 0
    row = capsys.readouterr().out.splitlines()[2]
    assert row.startswith("| ft | t | f1 | **80.0** | nan ± nan | nan–82.0 | 3 |"), row


def test_a_stage_table_from_task_result_shows_diverged_scores() -> None:
    """A stage prints its report's table from `task_result`'s entries (now strict JSON) directly."""
    [row] = markdown_rows("ft", {"t": task_result("f1", DIVERGED)})
    assert row.startswith("| ft | t | f1 | **80.0** | nan ± nan | nan–82.0 | 3 | loss 0.5 |"), row


def test_old_results_with_bare_nan_tokens_still_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = {"t": {"main_metric": "f1", "summary": {"f1": {"median": 80.0, "mean": math.nan}}, "runs": DIVERGED}}
    write_stage(tmp_path / "run" / "ft", json.dumps(old))  # Python's default: bare NaN / Infinity
    assert cli.main(["results", str(tmp_path / "run")]) == 0
    assert "| ft | t | f1 | **80.0** | nan |" in capsys.readouterr().out


def test_pooled_diverged_runs_stay_diverged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Pooling re-summarises the runs it read: "NaN" strings must be scores, not dropped as text
    (a dropped NaN would make the pool's mean look like a good score)."""
    write_stage(tmp_path / "a" / "ft", {"t": task_result("f1", DIVERGED[:1])})
    write_stage(tmp_path / "b" / "ft", {"t": task_result("f1", DIVERGED[1:])})
    assert cli.main(["results", f"{tmp_path / 'a'}+{tmp_path / 'b'}"]) == 0
    out = capsys.readouterr().out
    assert "| ft (pooled) | t | f1 | **80.0** | nan ± nan | nan–82.0 | 3 |" in out, out


def test_metrics_lines_are_strict_json_and_the_report_still_counts_diverged_values(tmp_path: Path) -> None:
    """metrics.jsonl in strict JSON (`metric_json`): the report must still count the NaN/inf losses
    under "Values not drawn" (a string value was skipped as no number: the curve just ended) and keep
    one curve per run (a "NaN" string read as a tag split the curve)."""
    records = [
        {"step": 1, "split": "train", "task": "t", "loss": 2.0},
        {"step": 2, "split": "train", "task": "t", "loss": 1.0, "grad_norm": math.inf},
        {"step": 3, "split": "train", "task": "t", "loss": math.nan},
    ]
    lines = [metric_json(r) for r in records]
    assert '"loss": "NaN"' in lines[2] and '"grad_norm": "Infinity"' in lines[1]
    (tmp_path / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert "- train loss: 1 of 3 values not finite (NaN or infinite)" in text
    assert "- train grad_norm: 1 of 1 values not finite (NaN or infinite)" in text
    read = read_metrics(tmp_path / "metrics.jsonl")
    assert math.isnan(read[2]["loss"]) and read[1]["grad_norm"] == math.inf and read[0]["task"] == "t"


def test_a_nan_string_does_not_split_a_curve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.axes

    records = [
        {"step": 1, "split": "dev", "acc": 50.0, "f1": 1.0},
        {"step": 2, "split": "dev", "acc": 60.0, "f1": math.nan},
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(metric_json(r) + "\n" for r in records))
    labels: list[str] = []
    plot = matplotlib.axes.Axes.plot

    def spy(self: matplotlib.axes.Axes, *args: object, **kwargs: object) -> object:
        labels.append(str(kwargs.get("label")))
        return plot(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    write_report(tmp_path, "t", {}, [])
    assert labels == ["run", "run"]  # acc: one curve of 2 points (not "f1=NaN" apart), f1: one


# --- a damaged completed stage: `xfer results` agrees with `xfer status` --------------------------


@pytest.mark.parametrize(
    ("record", "damage"),
    [
        ({"fingerprint": 12}, "fingerprint is int 12, expected str"),
        ({"started": "yesterday"}, 'started is str "yesterday", expected int or float'),
        ({"output_files": {"results/results.json": 1}}, "output_files['results/results.json'] is not a sha256"),
        ({"earlier_attempts": [{"started": 1}]}, "earlier_attempts[0].finished is missing"),
        ({"signature": {"config": []}}, "signature.config is not an object"),
        ({"status": 5}, "status is int 5, expected str"),
        ({"status": "failed", "finished": True}, "finished is bool true, expected int or float"),
    ],
)
def test_a_damaged_completed_stage_is_flagged_as_xfer_status_flags_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], record: dict, damage: str
) -> None:
    """stage.json says completed but a field has the wrong type: `xfer status` shows the stage as
    damaged (and `xfer run` runs it afresh), while `xfer results` printed its row as the final result
    and pooled it."""
    from xfer.core.runs.runner import read_status

    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.resolved.yaml").write_text("name: r\nstages:\n  ft: {kind: x}\n")
    base = {"status": "completed", "fingerprint": "f" * 64, "started": 1.0, "finished": 2.0}
    write_stage(run / "ft", {"t": task_result("f1", DIVERGED[1:])}, {**base, **record})
    assert [row["status"] for row in read_status(run)] == ["damaged"]
    assert cli.main(["results", str(run)]) == 0
    out = capsys.readouterr().out
    assert "| ft [damaged] | t | f1 |" in out
    assert f"{run / 'ft'} is damaged: {run / 'ft' / 'stage.json'} is malformed ({damage}" in out
    write_stage(tmp_path / "other" / "ft", {"t": task_result("f1", DIVERGED[:1])})
    assert cli.main(["results", f"{tmp_path / 'other'}+{run}"]) == 2
    assert f"{run / 'ft'}: its results are not final (damaged: " in capsys.readouterr().err


def test_a_truncated_stage_record_is_damaged_in_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xfer.core.runs.runner import read_status

    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.resolved.yaml").write_text("name: r\nstages:\n  ft: {kind: x}\n")
    write_stage(run / "ft", {"t": task_result("f1", DIVERGED[1:])})
    (run / "ft" / "stage.json").write_text('{"status": "compl')
    assert [row["status"] for row in read_status(run)] == ["damaged"]
    assert cli.main(["results", str(run)]) == 0
    out = capsys.readouterr().out
    assert "| ft [damaged] | t | f1 |" in out
    assert f"{run / 'ft' / 'stage.json'} is unreadable (truncated or not a JSON object)" in out


def test_an_intact_completed_record_stays_a_plain_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import hashlib

    stage = tmp_path / "run" / "ft"
    path = write_stage(stage, {"t": task_result("f1", DIVERGED[1:])})
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    record = {"status": "completed", "fingerprint": "f" * 64, "started": 1, "finished": 2.5, "earlier_attempts": []}
    (stage / "stage.json").write_text(json.dumps({**record, "output_files": {"results/results.json": digest}}))
    assert cli.main(["results", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "| ft | t | f1 | **81.0** |" in out and "[" not in out


def test_results_edited_after_the_stage_completed_are_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """stage.json records the sha256 of every output when the stage completes; `xfer status` says a
    stage whose results.json was edited since runs again ("outputs/results/results.json was modified
    after the stage completed"), while `xfer results` showed the edited numbers as the stage's."""
    import hashlib

    stage = tmp_path / "run" / "ft"
    path = write_stage(stage, {"t": task_result("f1", DIVERGED[1:])})
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    record = {"status": "completed", "fingerprint": "f" * 64, "output_files": {"results/results.json": digest}}
    (stage / "stage.json").write_text(json.dumps(record))
    path.write_text(path.read_text().replace("82.0", "99.0"))
    assert cli.main(["results", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "| ft [stale] | t | f1 |" in out
    assert f"{path} was modified after the stage completed" in out


# --- plots of an earlier attempt ------------------------------------------------------------------


def test_plots_of_an_earlier_report_that_this_one_does_not_draw_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stage run again (another config, a fresh start) logged other metrics: the first attempt's
    dev-acc.png stayed in plots/, unlinked from the new report but read as this run's curve. Files
    the report never linked (someone's notes.png) are left alone."""
    plots = tmp_path / "plots"
    (tmp_path / "metrics.jsonl").write_text(
        '{"step": 1, "split": "train", "loss": 1.0}\n{"step": 1, "split": "dev", "acc": 50.0}\n'
    )
    write_report(tmp_path, "t", {}, [])
    assert sorted(p.name for p in plots.iterdir()) == ["dev-acc.png", "train-loss.png"]
    (plots / "notes.png").write_bytes(b"mine")
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "split": "train", "loss": 2.0}\n')
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert "dev-acc" not in text
    assert sorted(p.name for p in plots.iterdir()) == ["notes.png", "train-loss.png"]
    monkeypatch.setenv("XFER_REPORT_PLOTS", "0")  # curves not drawn: none of an earlier attempt shown either
    write_report(tmp_path, "t", {}, [])
    assert sorted(p.name for p in plots.iterdir()) == ["notes.png"]


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_a_curve_matplotlib_cannot_scale_does_not_drop_the_others(tmp_path: Path) -> None:
    """Finite losses of 1e308 and -1e308 (a run blowing up before it turns inf): matplotlib's axis
    ticks raised ValueError, and the runner's fallback wrote the report without any curve, the
    healthy dev curve too. Now only that curve is left out, and the report says so."""
    (tmp_path / "metrics.jsonl").write_text(
        '{"step": 1, "split": "train", "loss": 1e308}\n{"step": 2, "split": "train", "loss": -1e308}\n'
        '{"step": 1, "split": "dev", "acc": 50.0}\n{"step": 2, "split": "dev", "acc": 60.0}\n'
    )
    text = write_report(tmp_path, "t", {}, []).read_text()
    assert "![dev acc](plots/dev-acc.png)" in text and (tmp_path / "plots" / "dev-acc.png").is_file()
    assert "- train loss: curve not drawn (ValueError: " in text and "train-loss.png" not in text
    import matplotlib.pyplot as plt

    assert plt.get_fignums() == []


def test_an_integer_too_large_for_a_float_in_results_is_shown_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An edited results.json with a 400-digit score: the table's formatting (and a pool's median)
    ended `xfer results` in a bare OverflowError."""
    huge = "9" * 400
    runs = f'[{{"trial": 0, "seed": 1, "f1": {huge}}}, {{"trial": 1, "seed": 2, "f1": -{huge}}}]'
    summary = f'{{"f1": {{"median": {huge}, "mean": 1.0, "min": -{huge}, "max": {huge}}}}}'
    write_stage(tmp_path / "a" / "ft", f'{{"t": {{"main_metric": "f1", "summary": {summary}, "runs": {runs}}}}}')
    write_stage(tmp_path / "b" / "ft", {"t": task_result("f1", [{"trial": 0, "seed": 3, "f1": 5.0}])})
    assert cli.main(["results", str(tmp_path / "a")]) == 0
    assert "| ft | t | f1 | **inf** | 1.0 | -inf–inf | 2 |" in capsys.readouterr().out
    assert cli.main(["results", f"{tmp_path / 'a'}+{tmp_path / 'b'}"]) == 0
    assert "| ft (pooled) | t | f1 | **5.0** | nan ± nan | -inf–inf | 3 |" in capsys.readouterr().out


def test_a_very_long_metric_name_gets_a_plot_the_file_system_accepts(tmp_path: Path) -> None:
    """A 300-character metric name gave a 300-character file name: OSError ENAMETOOLONG, which the
    runner re-raises (as it does a full disk), so the stage failed after training, at every re-run."""
    long_a, long_b = "a" * 300, "a" * 299 + "b"  # alike in their first 120 characters
    records = [{"step": 1, "split": "dev", long_a: 1.0, long_b: 2.0}, {"step": 2, "split": "dev", long_a: 1.5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    text = write_report(tmp_path, "t", {}, []).read_text()
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert len(names) == 2 and all(len(name) <= 130 for name in names)
    assert all(f"(plots/{name})" in text for name in names)


def test_status_names_the_damage_when_it_cannot_say_why_a_stage_reruns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`xfer status` shows why a damaged stage runs again only among the reasons a re-signing gives;
    with a recipe that no longer validates (data moved, a plugin gone) it printed "damaged" alone,
    naming neither the file nor what is wrong with it."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.resolved.yaml").write_text("name: r\nstages:\n  ft: {kind: no.such.kind}\n")
    write_stage(run / "ft", {"t": task_result("f1", DIVERGED[1:])}, {"status": "completed", "fingerprint": 12})
    assert cli.main(["status", str(run)]) == 0
    captured = capsys.readouterr()
    assert "cannot check whether stages are up to date" in captured.err
    assert f"damaged: {run / 'ft' / 'stage.json'} is malformed (fingerprint is int 12, expected str)" in captured.out

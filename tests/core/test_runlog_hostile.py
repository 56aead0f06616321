"""RunLog events and lifecycle hooks, fed hostile input: numeric run tags (`ctx.events(fold=2)`) in
metrics.jsonl and the report, and hook wrappers that edit the dicts they are handed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from xfer.core.errors import PluginError
from xfer.core.hookspecs import hookimpl
from xfer.core.plugins import PluginHost
from xfer.core.runs.report import read_metrics, write_report
from xfer.core.stage import StageContext
from xfer.testing import make_host


@pytest.fixture(autouse=True)
def _no_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XFER_REPORT_PLOTS", "0")


def context(tmp_path: Path, host: PluginHost | None = None) -> StageContext:
    stage = tmp_path / "s"
    stage.mkdir(parents=True, exist_ok=True)
    return StageContext(tmp_path, "s", "k", None, 1, stage, torch.device("cpu"), host or make_host(), {})


# --- numeric tags stay tags -------------------------------------------------------------------------


def _curves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[set[str], str]:
    """The plot files the report links and its text (plots drawn)."""
    monkeypatch.setenv("XFER_REPORT_PLOTS", "1")
    text = write_report(tmp_path / "s", "t", {}, []).read_text()
    return {p.name for p in (tmp_path / "s" / "plots").glob("*.png")}, text


def test_numeric_tags_are_not_drawn_as_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ctx.events(fold=2, seed=7)`: the tags were written as plain numbers beside the metrics, and the
    report took every number but `trial` for a metric: a `train fold` and a `train seed` curve were
    drawn, and the folds' losses merged into one zig-zag curve labelled `run`."""
    ctx = context(tmp_path)
    for fold in (1, 2):
        log = ctx.events(fold=fold, seed=7)
        for step in (1, 2, 3):
            log.log(step, "train", {"loss": fold + 1.0 / step})
    plots, text = _curves(tmp_path, monkeypatch)
    assert plots == {"train-loss.png"}, plots
    assert "train fold" not in text and "train seed" not in text
    records = read_metrics(ctx.metrics_file)
    assert [(r["fold"], r["seed"], r["loss"]) for r in records][:2] == [(1, 7, 2.0), (1, 7, 1.5)]


def test_numeric_tags_split_curves(tmp_path: Path) -> None:
    """One curve per distinct tags (docs/plugins.md): two folds are two curves, not one."""
    from xfer.core.runs.report import _read_curves

    ctx = context(tmp_path)
    for fold in (1, 2):
        ctx.events(fold=fold, task="glue/rte").log(1, "train", {"loss": float(fold)})
    curves, *_ = _read_curves(ctx.metrics_file)
    assert set(curves) == {("train", "loss")}
    assert sorted(curves["train", "loss"]) == ["fold=1, task=glue/rte", "fold=2, task=glue/rte"]


def test_tagged_resume_still_drops_redone_records(tmp_path: Path) -> None:
    """The tag list written with each record must not stop a resume from finding its own run's records."""
    ctx = context(tmp_path)
    log = ctx.events(fold=1)
    for step in (1, 2, 3):
        log.log(step, "train", {"loss": 1.0})
    ctx.events(fold=2).log(3, "train", {"loss": 2.0})
    ctx.events(fold=1).resumed(1)
    kept = [(r["fold"], r["step"], r["split"]) for r in read_metrics(ctx.metrics_file)]
    assert kept == [(1, 1, "train"), (2, 3, "train"), (1, 1, "resume")]


def test_untagged_records_are_unchanged(tmp_path: Path) -> None:
    """A stage that trains once (`ctx.events()`) writes the same records as before."""
    ctx = context(tmp_path)
    ctx.events().log(1, "train", {"loss": 1.0})
    (record,) = [json.loads(line) for line in ctx.metrics_file.read_text().splitlines()]
    assert set(record) == {"step", "split", "loss", "time"}


# --- hook wrappers get copies -----------------------------------------------------------------------


class Wrapper:
    """A new-style and an old-style wrapper that both vandalize what they are handed."""

    @hookimpl(wrapper=True)
    def xfer_metrics_logged(self, metrics: dict[str, Any], tags: dict[str, Any]) -> Iterator[None]:
        metrics["loss"] = -1.0
        metrics.pop("accuracy", None)
        tags["fold"] = 99
        return (yield)

    @hookimpl(hookwrapper=True)
    def xfer_stage_start(self, config: dict[str, Any]) -> Iterator[None]:
        config["lr"] = 0.0
        yield


class Seen:
    def __init__(self) -> None:
        self.metrics: list[dict[str, Any]] = []

    @hookimpl
    def xfer_metrics_logged(self, metrics: dict[str, Any]) -> None:
        self.metrics.append(metrics)


def test_a_hook_wrapper_cannot_change_what_the_trainer_logged_or_uses(tmp_path: Path) -> None:
    """Observers got copies, hook wrappers the trainer's own dict: a wrapper editing `metrics` in place
    changed the dev results the trainer reads its main metric from next (and writes to state.json)."""
    host = make_host()
    host.add_object(Wrapper(), "wrap")
    ctx = context(tmp_path, host)
    results = {"loss": 0.5, "accuracy": 0.75}
    ctx.events(fold=1).log(1, "dev", results)
    ctx.events(fold=1).log(2, "dev", results)
    assert results == {"loss": 0.5, "accuracy": 0.75}
    assert [(r["loss"], r["accuracy"], r["fold"]) for r in read_metrics(ctx.metrics_file)] == [(0.5, 0.75, 1)] * 2


def test_a_hook_wrapper_cannot_change_the_stage_config(tmp_path: Path) -> None:
    host = make_host()
    host.add_object(Wrapper(), "wrap")
    config = {"lr": 1e-3}
    host.notify("xfer_stage_start", run_dir=tmp_path, stage="s", kind="k", config=config, resumed=False)
    assert config == {"lr": 1e-3}


def test_observers_still_see_what_was_logged(tmp_path: Path) -> None:
    """The copy is made for the wrappers; plain observers still get the values as logged (each its own)."""
    host, seen = make_host(), Seen()
    host.add_object(seen, "seen")
    ctx = context(tmp_path, host)
    results = {"loss": 0.5}
    ctx.events().log(1, "dev", results)
    assert seen.metrics == [{"loss": 0.5}] and seen.metrics[0] is not results


@pytest.mark.parametrize("name", ["step", "split", "time", "tags"])
def test_a_tag_named_like_a_record_key_is_refused(tmp_path: Path, name: str) -> None:
    """`ctx.events(step=1)` was overwritten by the record's own `step`: the runs merged, silently."""
    with pytest.raises(PluginError, match=rf"stage 's' \(k\): ctx.events\(\) tag '{name}' is a key"):
        context(tmp_path).events(**{name: 1})


def test_a_metric_named_like_a_record_key_keeps_step_split_and_tags(tmp_path: Path) -> None:
    """An objective's metric named `step`, `split`, `time` or like a tag replaced that key of the record:
    the logged step became the metric's value (a resume then dropped the wrong records, the curve was
    drawn at the wrong steps) and the metric `time` was lost under the wall time, without a word."""
    ctx = context(tmp_path)
    log = ctx.events(trial=1)
    with pytest.warns(
        UserWarning, match=r"metric 'step', 'time', 'trial' .* as 'metric/step', 'metric/time', 'metric/trial'"
    ):
        log.log(4, "train", {"loss": 1.0, "step": 0.5, "time": 2.0, "trial": 9.0})
    log.log(5, "train", {"loss": 0.5, "step": 0.25, "time": 3.0, "trial": 9.0})  # warned once per run
    first, second = read_metrics(ctx.metrics_file)
    assert (first["step"], first["split"], first["trial"], first["loss"]) == (4, "train", 1, 1.0)
    assert (first["metric/step"], first["metric/time"], first["metric/trial"]) == (0.5, 2.0, 9.0)
    assert second["step"] == 5 and second["metric/step"] == 0.25
    ctx.events(trial=1).resumed(4)  # the step is the logged one again: records after step 4 are dropped
    assert [r["step"] for r in read_metrics(ctx.metrics_file)] == [4, 4]


@pytest.mark.parametrize(
    ("value", "kind"),
    [(Path("glue/rte"), "PosixPath"), ((1, 2), "tuple"), (float("nan"), "float nan"), (float("-inf"), "float -inf")],
)
def test_a_tag_that_json_cannot_keep_is_refused_before_training(tmp_path: Path, value: Any, kind: str) -> None:
    """A Path tag failed the first log with a bare TypeError from json (after the first `log_every`
    steps); a tuple came back from metrics.jsonl a list and a NaN the string "NaN", never equal to the
    tag again, so a resume kept the killed attempt's records and every redone step was logged twice."""
    with pytest.raises(PluginError, match=rf"stage 's' \(k\): ctx.events\(\) tag 'task' is a {kind}"):
        context(tmp_path).events(task=value)


def test_a_tuple_tag_run_resumes_without_duplicates(tmp_path: Path) -> None:
    """The tags that are allowed come back from metrics.jsonl equal: a resume finds its run's records."""
    ctx = context(tmp_path)
    log = ctx.events(task="glue/rte", trial=0, lr=0.5, final=True, group=None)
    for step in (1, 2, 3):
        log.log(step, "train", {"loss": 1.0})
    ctx.events(task="glue/rte", trial=0, lr=0.5, final=True, group=None).resumed(2)
    assert [(r["step"], r["split"]) for r in read_metrics(ctx.metrics_file)] == [
        (1, "train"),
        (2, "train"),
        (2, "resume"),
    ]

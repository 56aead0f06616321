"""BAM, round 43: the comparison table's average (metric direction, MNLI counted once), the random
streams of the student's batches, and `xfer compare` against hostile inputs.

Systems are synthetic stage folders (`write_system` of test_compare_hostile: no training).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xfer.bam import compare as compare_module
from xfer.bam.data import MixedTaskSource, batch_mixing_source
from xfer.bam.sampling import task_probabilities

from .test_compare_hostile import DEV, LABELS, _edit, _noisy, _task, compare, two_systems, write_system

RESULTS = "outputs/results/results.json"


def _avg_cells(out: str) -> dict[str, str]:
    """The Avg cell of each system's row of the medians table."""
    rows = {}
    for line in out.split("### Per task")[0].splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) > 2 and cells[0] not in ("system", "---"):
            rows[cells[0]] = cells[1]
    return rows


# --- 1a: the direction of a task's main metric ------------------------------------------------------


def test_a_lower_is_better_task_is_refused_not_averaged_raw(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A results entry with `greater_is_better: false` (how a stage records a loss-like main metric) was
    averaged raw into Avg and tested as if higher were better (exit 0, stars for the worse system)."""
    a, b = two_systems(tmp_path, seeds_b=(1, 2, 3))
    for system in (a, b):
        _edit(system / RESULTS, lambda r: r["glue/cls"].update(greater_is_better=False))
    code, out, err = compare(capsys, str(a), str(b), out=tmp_path / "c")
    assert code == 2, out
    assert re.search(
        r"A/outputs/results/results\.json: glue/cls\.greater_is_better is false: its main metric 'accuracy' "
        r"is lower-is-better, and xfer compare averages and tests greater-is-better metrics only",
        err,
    ), err
    assert "Traceback" not in err and not (tmp_path / "c").exists()


# --- 1b: MNLI matched and mismatched count once in the average -------------------------------------------


def _mnli_systems(root: Path, names: dict[str, str]) -> tuple[Path, Path]:
    """A and B with a classification task and MNLI's matched and mismatched dev sets, under the
    task keys `names` gives for "cls", "m" and "mm"."""
    rng = random.Random(3)
    gold = {part: [rng.choice(LABELS) for _ in range(30)] for part in ("cls", "m", "mm")}
    quality = {"A": {"cls": 0.9, "m": 0.5, "mm": 0.5}, "B": {"cls": 0.6, "m": 0.95, "mm": 0.95}}

    def system(name: str) -> Path:
        tasks = {
            names[part]: _task(
                "classification",
                "accuracy",
                gold[part],
                [(s, _noisy(rng, gold[part], quality[name][part], LABELS)) for s in (1, 2, 3)],
            )
            for part in ("cls", "m", "mm")
        }
        return write_system(root / name, tasks)

    return system("A"), system("B")


def test_mnli_mismatched_is_not_a_second_mnli_in_the_average(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """With glue/mnli and glue/mnli-mm both compared, Avg (and the average test) weighed MNLI twice;
    the thesis's GLUE average has one MNLI (Table 3.1: 8 tasks, matched dev)."""
    a, b = _mnli_systems(tmp_path, {"cls": "glue/cls", "m": "glue/mnli", "mm": "glue/mnli-mm"})
    code, out, err = compare(capsys, str(a), str(b), out=tmp_path / "c")
    assert code == 0, err
    saved = json.loads((tmp_path / "c/compare.json").read_text())
    assert saved["average_tasks"] == ["glue/cls", "glue/mnli"]
    for name, cell in _avg_cells(out).items():
        scores = saved["systems"][name]["tasks"]
        expected = np.mean([np.median(scores[t]["scores"]) for t in ("glue/cls", "glue/mnli")])
        assert cell.strip("*") == f"{expected:.1f}", (name, cell, expected)
    assert "MNLI counts once, as in the thesis's GLUE average: glue/mnli-mm (mismatched)" in out
    # mismatched keeps its column and its own test; the average test covers the averaged tasks only
    assert "| glue/mnli-mm | accuracy |" in out
    tests = {t["task"] for t in saved["tests"]}
    assert tests == {"glue/cls", "glue/mnli", "glue/mnli-mm", "average"}
    average = next(t for t in saved["tests"] if t["task"] == "average")
    per_task = {t["task"]: t["delta"] for t in saved["tests"]}
    assert average["delta"] == pytest.approx((per_task["glue/cls"] + per_task["glue/mnli"]) / 2)


def test_mnli_under_aliases_is_recognised_from_the_stage_record(tmp_path: Path) -> None:
    """Results name tasks by key (`as:` alias): which one is MNLI mismatched is in the signed config."""
    stage = tmp_path / "distill"
    stage.mkdir()
    config = {"tasks": [{"name": "glue/mnli", "as": "nli"}, {"name": "glue/mnli-mm", "as": "nli_mm"}, "glue/rte"]}
    (stage / "stage.json").write_text(json.dumps({"kind": "bam.student", "signature": {"config": config}}))
    registered = compare_module._registered_tasks(stage)
    assert registered == {"nli": "glue/mnli", "nli_mm": "glue/mnli-mm", "glue/rte": "glue/rte"}
    system = compare_module.System("S", stage, registered=registered)
    system.tasks = dict.fromkeys(["nli", "nli_mm", "glue/rte"])  # type: ignore[arg-type]
    assert compare_module.average_tasks([system]) == ["nli", "glue/rte"]
    # mismatched alone is the one MNLI there is: it stays in the average
    system.tasks = dict.fromkeys(["nli_mm", "glue/rte"])  # type: ignore[arg-type]
    assert compare_module.average_tasks([system]) == ["nli_mm", "glue/rte"]


# --- 2: random streams ---------------------------------------------------------------------------------


def _record_streams(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[tuple[int, ...]]]:
    """Every numpy generator made from here on, by the function that made it -> its stream (the
    first words of its seed sequence's state: equal states are one stream)."""
    made: dict[str, set[tuple[int, ...]]] = {}
    real = np.random.default_rng

    def default_rng(seed: Any = None) -> np.random.Generator:
        caller = sys._getframe(1).f_code.co_name
        state = tuple(np.random.SeedSequence(seed).generate_state(4).tolist())
        made.setdefault(caller, set()).add(state)
        return real(seed)

    monkeypatch.setattr(np.random, "default_rng", default_rng)
    return made


def test_the_step_draws_and_the_task_permutations_are_separate_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    """SeedSequence ignores trailing zeros, so `default_rng([seed, k])` (step k's task counts) was
    `default_rng([seed, k, 0])` (task k's first permutation): one stream drawn for both."""
    assert np.random.default_rng([5, 3, 0]).random() == np.random.default_rng([5, 3]).random()  # the premise
    made = _record_streams(monkeypatch)
    features = {name: list(range(size)) for name, size in (("a", 5), ("b", 7), ("c", 3))}
    for seed in (0, 5):
        source = MixedTaskSource(features, {"a": 0.3, "b": 0.3, "c": 0.4}, 4, lambda g: g, seed=seed)
        for _ in range(30):  # several epochs of every task
            source.next_step()
    draws, permutations = made["draw_counts"], made["_take"]
    assert len(draws) == 60 and len(permutations) > 6
    assert not draws & permutations


def test_batch_mixing_draws_and_task_orders_are_separate_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    """`mixing: batch`: task streams were seeded seed*1000+index and the task draws seed: at seed 0,
    task 0's epoch-e order and step e's task choice came from `default_rng([0, e])` both."""
    made = _record_streams(monkeypatch)
    features = {name: list(range(size)) for name, size in (("a", 6), ("b", 4))}
    for seed in (0, 1):
        source = batch_mixing_source(features, task_probabilities({"a": 6, "b": 4}), 2, lambda g: g, seed=seed)
        for _ in range(40):
            source.next_step()
    draws, permutations = made["next_step"], made["_permutation"]
    assert len(draws) == 80 and len(permutations) > 4
    assert not draws & permutations


def test_a_single_task_group_trains_on_the_same_batches_as_before() -> None:
    """The fix leaves the permutations' seeds alone: a teacher (one task per group) sees the batches
    it saw before, so bam.teachers' outputs do not change (only bam.student's)."""
    size, batch, seed = 7, 3, 11
    source = MixedTaskSource({"t": list(range(size))}, {"t": 1.0}, batch, lambda g: g, seed=seed)
    seen = [i for _ in range(10) for i in source.next_step()[0]["t"]]
    before = [int(i) for e in range(5) for i in np.random.default_rng([seed, 0, e]).permutation(size)]
    assert seen == before[: len(seen)]


# --- 3: hostile inputs ----------------------------------------------------------------------------------


def test_a_task_named_like_the_average_column_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A task keyed `average` (an `as: average` from before it was refused, or an edited file) shared
    the Avg's name: its test and the average test were two rows "average", and the Avg took the stars
    of whichever came last."""
    a, b = two_systems(tmp_path, seeds_b=(1, 2, 3))
    for system in (a, b):
        shutil.copytree(system / DEV / "glue-cls", system / DEV / "average")
        _edit(system / RESULTS, lambda r: r.update(average=r["glue/cls"]))
    code, out, err = compare(capsys, str(a), str(b), out=tmp_path / "c")
    assert code == 2, out
    assert "A/outputs/results/results.json: task 'average' has the name of xfer compare's average column" in err


def test_a_system_name_with_a_pipe_keeps_the_tables_columns(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """NAME= is free text: `x|y` split its rows into one cell more than the header, so every number
    after the name stood under the wrong task in compare.md."""
    a, b = two_systems(tmp_path, seeds_b=(1, 2, 3))
    code, out, err = compare(capsys, f"x|y={a}", str(b), out=tmp_path / "c")
    assert code == 0, err
    header = ""
    for line in (line for line in out.splitlines() if line.startswith("|")):
        if line.startswith(("| system", "| task")):
            header = line
        assert len(re.split(r"(?<!\\)\|", line)) == len(re.split(r"(?<!\\)\|", header)), line
    assert "| x\\|y | " in out
    assert json.loads((tmp_path / "c/compare.json").read_text())["baselines"] == ["x|y"]


def test_a_run_folder_without_bam_stages_says_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A run of transformer.finetune stages (results.json, no per-example dev predictions) was told
    "no outputs/results/results.json here or in a stage folder below", which it has."""
    a, _ = two_systems(tmp_path)
    run = tmp_path / "run"
    for stage in ("finetune", "other"):
        (run / stage / "outputs/results").mkdir(parents=True)
        shutil.copy(a / RESULTS, run / stage / RESULTS)
    code, _, err = compare(capsys, str(run), out=tmp_path / "c")
    assert code == 2
    assert (
        f"{run}: its stages with results (finetune, other) recorded no per-example dev predictions "
        "(outputs/results/dev): xfer compare compares bam.teachers and bam.student stages"
    ) in err
    # one of them given as a stage: its kind is named
    (run / "finetune/stage.json").write_text(json.dumps({"status": "completed", "kind": "transformer.finetune"}))
    code, _, err = compare(capsys, str(run / "finetune"), out=tmp_path / "c")
    assert code == 2 and "(a transformer.finetune stage): xfer compare compares bam.teachers" in err, err

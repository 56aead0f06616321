"""`cvt.train` run by a user (h117): what its logs, curves and results say about the run must be
what the run did."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
from xfer.testing import make_host, run_recipe_file, write_recipe

CHUNK = "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}"


def train_records(stage: Path) -> list[dict]:
    lines = (stage / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("split") == "train"]


def test_logged_labeled_and_unlabeled_losses_are_their_means_in_windows_of_odd_length(tmp_path: Path) -> None:
    """`sup_loss` and `cvt_loss` were multiplied by 2 (the alternation period), right only when a log
    window holds as many labeled steps as unlabeled ones. With `log_every: 3` the windows are L U L,
    U L U and (the last, partial) L U: the step losses then sum to sup_loss x (labeled steps) +
    cvt_loss x (unlabeled steps) = loss x (window length); with `log_every: 1` every labeled step
    logged twice its loss."""
    write_tiny_data(tmp_path)
    recipe = tiny_cvt_recipe(CHUNK, steps=8).replace("log_every: 1,", "log_every: 3,")
    run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", make_host(autoload=True))
    records = train_records(tmp_path / "run" / "fit")
    assert [r["step"] for r in records] == [3, 6, 8]
    windows = {3: (2, 1), 6: (1, 2), 8: (1, 1)}  # step -> (labeled, unlabeled) steps in its window
    for record in records:
        labeled, unlabeled = windows[record["step"]]
        expected = (record["sup_loss"] * labeled + record["cvt_loss"] * unlabeled) / (labeled + unlabeled)
        assert record["loss"] == pytest.approx(expected, rel=1e-5), record


def test_a_labeled_step_logs_its_own_loss_when_logged_alone(tmp_path: Path) -> None:
    """`log_every: 1` (the conformance recipes'): each record is one step, whose `loss` is its
    supervised or its CVT loss; `sup_loss` was logged doubled."""
    write_tiny_data(tmp_path)
    run_recipe_file(write_recipe(tmp_path, tiny_cvt_recipe(CHUNK, steps=4)), tmp_path / "run", make_host(autoload=True))
    records = train_records(tmp_path / "run" / "fit")
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    for record in records:
        kind = "sup_loss" if record["step"] % 2 else "cvt_loss"  # step 1 is the first (labeled) one
        assert record[kind] == pytest.approx(record["loss"], rel=1e-6), record


def _finished_stage(folder: Path, mode: str, dev: dict[int, float]) -> Path:
    """A finished-looking cvt.train stage of `mode` whose metrics.jsonl has dev F1 `dev[step]`."""
    folder.mkdir(parents=True)
    record = {"kind": "cvt.train", "status": "completed", "signature": {"config": {"mode": mode}}}
    (folder / "stage.json").write_text(json.dumps(record))
    (folder / "outputs" / "results").mkdir(parents=True)
    runs = [{"f1": list(dev.values())[-1], "seed": 1, "trial": 0}]
    summary = {"f1": {"mean": runs[0]["f1"], "median": runs[0]["f1"], "std": 0.0, "min": 0.0, "max": 0.0}}
    results = {"chunk": {"main_metric": "f1", "summary": summary, "runs": runs}}
    (folder / "outputs" / "results" / "results.json").write_text(json.dumps(results))
    rows = [{"step": step, "split": "dev", "trial": 0, "f1": f1} for step, f1 in dev.items()]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_the_curve_counts_the_labeled_minibatch_of_an_odd_step(tmp_path: Path, capsys) -> None:
    """Mode cvt takes a labeled minibatch at steps 1, 3, 5, 7: after 7 steps it has taken 4, as a
    supervised run after 4 steps. The curve put it at 7 // 2 = 3, beside the supervised score after 3."""
    from xfer.cvt.results import main

    supervised = _finished_stage(tmp_path / "run" / "supervised", "supervised", {3: 40.0, 4: 50.0})
    cvt = _finished_stage(tmp_path / "run" / "cvt", "cvt", {4: 45.0, 7: 60.0})
    assert main(["--curve", str(supervised), str(cvt)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| stage, dev metric \\ labeled minibatches | 2 | 3 | 4 |"
    assert lines[2] == "| run/supervised f1 |  | 40.0 | 50.0 |"
    assert lines[3] == "| run/cvt f1 | 45.0 |  | 60.0 |"


def test_dev_tags_that_the_labeled_subset_never_shows_are_said(tmp_path: Path, capsys) -> None:
    """Core's UnseenTagsWarning compares the dev tags with the task's tag set, read from its whole
    training file; `labeled_fraction` trains on fewer sentences, and a tag none of them shows is
    never predicted: its dev occurrences were misses without a word. One sentence of the tiny
    chunking data (`labeled_fraction: 0.02` of 48) lacks some tags the dev set has."""
    write_tiny_data(tmp_path)
    recipe = tiny_cvt_recipe(CHUNK, mode="supervised", steps=2, extra="    labeled_fraction: 0.02")
    run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", make_host(autoload=True))
    err = capsys.readouterr().err
    message = (
        r"conll/chunking: \d+ dev gold tags \(\d+ of the task's tags, first '[BIES]-[A-Z]+' in example '[^']+'\) "
        r"never occur in the 1 labeled training sentences \(labeled_fraction 0.02\): the model cannot learn them"
    )
    assert len(re.findall(message, err)) == 1, err
    assert re.search(message, (tmp_path / "run" / "fit" / "report.md").read_text(encoding="utf-8"))
    run_recipe_file(  # every training sentence: the tiny dev set holds no tag they lack
        write_recipe(tmp_path, recipe.replace("labeled_fraction: 0.02", "labeled_fraction: 1.0")),
        tmp_path / "all",
        make_host(autoload=True),
    )
    assert "never occur in the" not in capsys.readouterr().err


def test_a_negative_subset_seed_is_a_recipe_error_at_its_line(tmp_path: Path) -> None:
    """numpy's generators take no negative seed: `subset_seed: -1` passed validation and ended the
    stage, after the stages before it had trained, in a bare ValueError traceback from numpy."""
    from xfer.core.errors import RecipeError
    from xfer.core.recipes.recipe import load_recipe

    write_tiny_data(tmp_path)
    recipe = tiny_cvt_recipe(CHUNK, extra="    labeled_fraction: 0.5\n    subset_seed: -1")
    with pytest.raises(
        RecipeError, match=r"recipe\.yaml:\d+:\d+: stages\.fit\.subset_seed: must be at least 0, got -1"
    ):
        load_recipe(write_recipe(tmp_path, recipe), host=make_host(autoload=True))


def test_a_running_stages_finished_trials_are_listed_in_trial_order(tmp_path):
    """Sorted as text, trial-10 came before trial-2 in the running stage's row of values."""
    import json

    from xfer.cvt.results import finished_trials

    for trial in (0, 1, 2, 10, 11):
        folder = tmp_path / "trials" / f"trial-{trial}"
        folder.mkdir(parents=True)
        (folder / "done.json").write_text(json.dumps({"trial": trial, "f1": float(trial)}))
    assert [record["trial"] for record in finished_trials(tmp_path)] == [0, 1, 2, 10, 11]


def test_dev_references_longer_than_beam_search_may_output_are_said() -> None:
    """Beam search stops at max_target_length tokens and at 2 x the source's words + 10: a longer
    reference can never be matched, and BLEU fell through its brevity penalty without a word."""
    from types import SimpleNamespace

    from xfer.cvt.stage import unreachable_target_warnings

    def pair(i: int, source: str, target: str | None) -> SimpleNamespace:
        return SimpleNamespace(id=f"dev-{i}", source=source, target=target)

    dev = [
        pair(0, "a b", "x y z"),
        pair(1, "a", " ".join("w" * 1 for _ in range(13))),  # 13 > 2 x 1 + 10
        pair(2, "a " * 30, " ".join(["w"] * 40)),  # within 2 x 30 + 10, past max_target_length 30
        pair(3, "a", None),  # unlabelled: nothing to compare
    ]
    task = SimpleNamespace(name="mt/parallel", kind="seq2seq", dev=dev)
    [message] = unreachable_target_warnings(SimpleNamespace(max_target_length=30), [task])
    assert message.startswith("mt/parallel: 2 of 4 dev references (first 'dev-1') are longer than beam search may")
    assert unreachable_target_warnings(SimpleNamespace(max_target_length=100), [task]) != []  # dev-1 still
    tagging = SimpleNamespace(name="conll/chunking", kind="tagging", dev=dev)
    assert unreachable_target_warnings(SimpleNamespace(max_target_length=1), [tagging]) == []

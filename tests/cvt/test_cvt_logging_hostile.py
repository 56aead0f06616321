"""Hostile review of CVT's training logs and of CVT's and BAM's final evaluations (h191).

The logged `sup_loss`/`sup_accuracy` (labeled steps) and `cvt_loss` (unlabeled steps) must be the means over
the steps of their kind in each log window, whatever the window's layout; and a stage's final evaluation
must record plain numbers, as `xfer.core.evaluation.TaskEvaluator` does."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.cvt.conftest import Kit
from xfer.core.data import AlternatingSource, TaggedBatch
from xfer.core.train_config import TrainConfig
from xfer.core.trainer import StepOutput, Trainer
from xfer.cvt.objective import CvtObjective, Settings
from xfer.cvt.tagging import TaggingModule

SENTENCES = [
    ["bob", "saw", "the", "dog", "near", "a", "big", "house", "."],
    ["mary", "runs", ";", "it", "was", "very", "big"],
    ["the", "dog", "runs"],
    ["paris", "was", "big", "yesterday", "."],
]

# --- the logged training metrics ------------------------------------------------------------------


class Cycle:
    """A BatchSource of `accumulation` micro-batches per step, cycling through `batches`; its state is its cursor."""

    steps_per_epoch = None

    def __init__(self, batches: list[Any], accumulation: int):
        self.batches, self.accumulation, self.cursor = batches, accumulation, 0

    def next_step(self) -> list[Any]:
        out = [self.batches[(self.cursor + i) % len(self.batches)] for i in range(self.accumulation)]
        self.cursor += self.accumulation
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"cursor": self.cursor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.cursor = state["cursor"]


class Tagging(TaggingModule):
    """Records the accuracy of each labeled micro-batch, computed from the module's own counts."""

    def supervised(self, states: Any, batch: dict, smoothing: float, p: float = 0.0) -> tuple[list, dict]:
        terms, stats = super().supervised(states, batch, smoothing, p)
        self.accuracies.append(100.0 * stats["correct"].item() / stats["total"])
        return terms, stats


class Recording(CvtObjective):
    """Records the true loss (and accuracy) of every micro-batch as (step, kind, value); raises
    KeyboardInterrupt at step `kill_at` (a crash in the middle of a log window)."""

    def __init__(self, *args: Any, kill_at: int | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.kill_at = kill_at
        self.seen: list[tuple[int, str, float]] = []

    def forward(self, tagged: TaggedBatch) -> StepOutput:
        if self.step == self.kill_at:
            raise KeyboardInterrupt("killed in the middle of a log window")
        out = super().forward(tagged)
        if tagged.source == "labeled":
            self.seen += [(self.step, "sup_loss", out.loss.item())]
            self.seen += [(self.step, "sup_accuracy", self.head("tag").accuracies[-1])]
        else:
            self.seen += [(self.step, "cvt_loss", out.loss.item())]
        return out


class Events:
    def __init__(self) -> None:
        self.train: dict[int, dict[str, float]] = {}

    def log(self, step: int, split: str, metrics: dict[str, float]) -> None:
        if split == "train":
            self.train[step] = dict(metrics)

    def checkpoint_saved(self, step: int, path: Path) -> None:
        pass

    def resumed(self, step: int) -> None:
        pass


def _labeled(k: Kit, sentences: list[list[str]], shift: int) -> dict[str, torch.Tensor]:
    batch = k.batch(sentences)
    batch["labels"] = torch.full_like(batch["words"], -100)
    for b, sentence in enumerate(sentences):
        batch["labels"][b, 1 : len(sentence) + 1] = (torch.arange(len(sentence)) + shift) % 3
    return batch


def train(
    workdir: Path, *, mode: str = "cvt", steps: int, log_every: int, accumulation: int = 1, **config: Any
) -> tuple[Recording, Events]:
    """A CVT objective built as a user of the package would (no knowledge of the trainer's log windows),
    trained by the shared trainer on labeled/unlabeled steps that alternate (labeled ones only when supervised)."""
    kill_at = config.pop("kill_at", None)
    k = Kit()
    e = k.encoder.train()
    module = Tagging(e.full_size, e.uni_size, 16, ["A", "B", "C"], ["fwd", "bwd", "future", "past", "full"])
    module.accuracies = []
    objective = Recording(e, {"tag": module}, Settings(), mode=mode, kill_at=kill_at)
    labeled = [TaggedBatch("tag", _labeled(k, SENTENCES[i : i + 2], i)) for i in range(3)]
    unlabeled = [k.batch(SENTENCES[i : i + 3]) for i in range(2)]
    sources = {"labeled": Cycle(labeled, accumulation), "unlabeled": Cycle(unlabeled, accumulation)}
    pattern = ["labeled"] if mode == "supervised" else ["labeled", "unlabeled"]
    settings: dict[str, Any] = {
        "steps": steps,
        "batch_size": 4,
        "lr": 1e-3,
        "precision": "fp32",
        "log_every": log_every,
        "checkpoint_every": 1000,
        "eval_every": None,
        "grad_accum": accumulation,
        "prefetch": 0,
        "schedule": "constant",
    }
    events = Events()
    trainer = Trainer(
        TrainConfig(**(settings | config)),
        objective,
        AlternatingSource(sources, pattern),
        workdir,
        device=torch.device("cpu"),
        events=events,
    )
    torch.manual_seed(0)
    trainer.fit()
    return objective, events


def true_means(seen: list[tuple[int, str, float]], ends: list[int]) -> dict[int, dict[str, float]]:
    """For each log window (ending after step `end`), each metric's mean over the micro-batches that measured it."""
    means, start = {}, 0
    for end in ends:
        window = [(name, value) for step, name, value in seen if start <= step < end]
        means[end] = {n: statistics.fmean(v for m, v in window if m == n) for n in {m for m, _ in window}}
        start = end
    return means


STEP_METRICS = ("sup_loss", "sup_accuracy", "cvt_loss")


@pytest.mark.parametrize(
    ("mode", "steps", "log_every", "accumulation"),
    [
        ("cvt", 7, 3, 1),  # windows L U L | U L U | L (the last, cut by the end of training: no unlabeled step)
        ("cvt", 5, 1, 1),  # every window one step: its own kind's metrics only
        ("cvt", 6, 4, 2),  # gradient accumulation; the last window, cut by the end of training, is L U
        ("word_dropout", 5, 5, 1),
        ("supervised", 5, 2, 1),  # no unlabeled step: no cvt_loss logged at all
    ],
)
def test_logged_step_metrics_are_the_means_over_the_steps_of_their_kind(
    tmp_path: Path, mode: str, steps: int, log_every: int, accumulation: int
) -> None:
    """`sup_loss` and `sup_accuracy` were multiplied by the window's length over its number of labeled steps
    (`cvt_loss` likewise), worked out from `log_every`, which only the stage passed: an objective built
    without it (a user's, a test's) scaled by 2 whatever the windows, so with `log_every: 3` the window
    L U L logged (2a + 2c) / 3 for the mean (a + c) / 2. Now each metric is pooled over the steps of its kind
    (weights), whatever the trainer's windows: the true mean, and nothing for a kind absent from the window."""
    objective, events = train(tmp_path, mode=mode, steps=steps, log_every=log_every, accumulation=accumulation)
    ends = sorted(events.train)
    assert ends == sorted({*range(log_every, steps + 1, log_every), steps})
    expected = true_means(objective.seen, ends)
    for end in ends:
        logged = {n: v for n, v in events.train[end].items() if n in STEP_METRICS}
        assert logged == pytest.approx(expected[end], rel=1e-5), f"window ending at step {end}"
        assert not [n for n in events.train[end] if "@" in n]  # the weights are not logged
    if mode == "supervised":
        assert not [end for end in ends if "cvt_loss" in events.train[end]]


def test_a_resumed_run_logs_the_true_means_of_the_window_it_was_killed_in(tmp_path: Path) -> None:
    """Killed in step 4 (checkpoint after step 3, log window 0..5): the resumed run's log at step 5 pools the
    checkpointed sums of steps 0..2 with steps 3 and 4, per kind: what the uninterrupted run logs, and the
    true means (the scaled metrics logged twice the mean loss when the objective was not told the windows)."""
    config = {"steps": 7, "log_every": 5, "checkpoint_every": 3}
    straight, straight_events = train(tmp_path / "straight", **config)
    with pytest.raises(KeyboardInterrupt):
        train(tmp_path / "resumed", kill_at=4, **config)
    _, events = train(tmp_path / "resumed", **config)
    assert sorted(events.train) == [5, 7]
    expected = true_means(straight.seen, [5, 7])
    for end in (5, 7):
        logged = {n: v for n, v in events.train[end].items() if n in STEP_METRICS}
        assert logged == pytest.approx(expected[end], rel=1e-5), f"window ending at step {end}"
        assert logged == pytest.approx({n: straight_events.train[end][n] for n in logged}, rel=1e-6)


# --- the final evaluation's records -----------------------------------------------------------------

CHUNK = "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}"


def _numpy_scores(evaluate: Any) -> Any:
    """`evaluate` whose scores come back as numpy scalars (f1) and one-number tensors (the rest), as a
    plugin computing them with numpy or torch returns them."""

    def wrapped(self: Any, examples: Any, predictions: Any) -> dict[str, Any]:
        scores = evaluate(self, examples, predictions)
        return {k: np.float32(v) if k == "f1" else torch.tensor(float(v)) for k, v in scores.items()}

    return wrapped


def test_cvt_trial_records_hold_numbers_when_a_task_scores_with_numpy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final evaluation called `task.evaluate` itself, past `TaskEvaluator`'s conversion: a trial's
    done.json recorded np.float32 scores as strings ("66.66667", tensors as "tensor(0.5)"), and a stage resumed
    with more trials, reading trial 0 back, sorted its string against trial 1's number: a bare TypeError
    after every trial had trained. The records hold Python numbers, and the summary counts both trials."""
    from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
    from xfer.tasks.conll.tasks import ChunkingTask
    from xfer.testing import make_host, run_recipe_file, write_recipe

    monkeypatch.setattr(ChunkingTask, "evaluate", _numpy_scores(ChunkingTask.evaluate))
    write_tiny_data(tmp_path)
    recipe = write_recipe(tmp_path, tiny_cvt_recipe(CHUNK, steps=2))
    stage = tmp_path / "run" / "fit"
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    record = json.loads((stage / "trials" / "trial-0" / "done.json").read_text())
    assert type(record["f1"]) is float and all(type(record[k]) is float for k in ("precision", "recall"))
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True), ["stages.fit.trials=2"], force=True)
    results = json.loads((stage / "outputs" / "results" / "results.json").read_text())["conll/chunking"]
    assert [type(r["f1"]) for r in results["runs"]] == [float, float]
    assert results["summary"]["f1"]["mean"] == pytest.approx(statistics.fmean(r["f1"] for r in results["runs"]))


def test_cvt_final_evaluation_without_the_main_metric_names_the_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task whose evaluate lacks its main metric, with no evaluation during training (`eval_every: null`):
    the final evaluation recorded the trial without it and the stage ended in a bare KeyError (sorting the
    trials by it) after training. Now a PluginError naming the task and the metric, before any record."""
    from xfer.core.errors import PluginError
    from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
    from xfer.tasks.conll.tasks import ChunkingTask
    from xfer.testing import make_host, run_recipe_file, write_recipe

    def without_f1(self: Any, examples: Any, predictions: Any) -> dict[str, Any]:
        return {k: v for k, v in evaluate(self, examples, predictions).items() if k != "f1"}

    evaluate = ChunkingTask.evaluate
    monkeypatch.setattr(ChunkingTask, "evaluate", without_f1)
    write_tiny_data(tmp_path)
    recipe = write_recipe(tmp_path, tiny_cvt_recipe(CHUNK, steps=2).replace("eval_every: 4", "eval_every: null"))
    with pytest.raises(PluginError, match=r"task 'conll/chunking'.*main metric 'f1'"):
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    assert not (tmp_path / "run" / "fit" / "trials" / "trial-0" / "done.json").exists()


BAM_TASK = "[{name: toy/agreement, train_size: 32, dev_size: 24}]"


def _bam_recipe(tmp_path: Path) -> Path:
    from tests.bam.bam_recipes import ENCODER
    from xfer.testing import write_recipe

    train = (
        "{steps: 2, batch_size: 16, lr: 2e-3, log_every: 2, checkpoint_every: 50, eval_every: null, precision: fp32}"
    )
    return write_recipe(
        tmp_path,
        f"""
name: bam-numpy
seed: 3
stages:
  corpus: {{kind: toy.corpus, sentences: 120}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200, min_frequency: 1}}
  teachers:
    kind: bam.teachers
    tokenizer: vocab.tokenizer
    encoder: {ENCODER}
    max_length: 40
    trials: 2
    tasks: {BAM_TASK}
    train: {train}
""",
    )


def test_bam_trial_records_hold_numbers_and_a_resumed_stage_summarises_every_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`GroupEvaluator.evaluate` (BAM's final evaluation) called `task.evaluate` itself: np.float32 scores went
    into a trial's done.json as strings, and a stage interrupted after trial 0 and resumed read them back:
    `group_score` (the median trial) failed on a string in a bare TypeError. The records hold Python
    numbers, and the summary counts both trials."""
    from xfer.core.toy.tasks import ToyAgreementTask
    from xfer.testing import make_host, run_recipe_file

    evaluate, calls = ToyAgreementTask.evaluate, []

    def numpy_scores(self: Any, examples: Any, predictions: Any) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 2 and interrupt:
            raise KeyboardInterrupt("killed in trial 1's final evaluation")
        return {k: np.float32(v) for k, v in evaluate(self, examples, predictions).items()}

    monkeypatch.setattr(ToyAgreementTask, "evaluate", numpy_scores)
    recipe, interrupt = _bam_recipe(tmp_path), True
    with pytest.raises(KeyboardInterrupt):
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    done = next((tmp_path / "run" / "teachers" / "trials").glob("*/trial-0/done.json"))
    assert type(json.loads(done.read_text())["metrics"]["toy/agreement"]["accuracy"]) is float
    interrupt = False
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    results = json.loads((tmp_path / "run" / "teachers" / "outputs" / "results" / "results.json").read_text())
    runs = results["toy/agreement"]["runs"]
    assert [type(r["accuracy"]) for r in runs] == [float, float]
    summary = results["toy/agreement"]["summary"]["accuracy"]
    assert summary["mean"] == pytest.approx(statistics.fmean(r["accuracy"] for r in runs))


def test_bam_evaluation_without_the_main_metric_names_the_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task whose evaluate lacks its main metric: BAM's evaluator ended in a bare KeyError (`main_metrics`
    during training, `group_score` after it); now a PluginError naming the task and the metric."""
    from xfer.core.errors import PluginError
    from xfer.core.toy.tasks import ToyAgreementTask
    from xfer.testing import make_host, run_recipe_file

    evaluate = ToyAgreementTask.evaluate
    monkeypatch.setattr(ToyAgreementTask, "evaluate", lambda self, e, p: {"acc": evaluate(self, e, p)["accuracy"]})
    with pytest.raises(PluginError, match=r"task 'toy/agreement'.*main metric 'accuracy'"):
        run_recipe_file(_bam_recipe(tmp_path), tmp_path / "run", make_host(autoload=True))


def test_cvt_exports_the_median_trial_with_a_nan_score_counted_as_the_worst(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trials scoring f1 60, NaN, 50: results.json's median is 50 (a NaN counts as the worst score,
    `xfer.core.results.score_order`), but the stage sorted the raw scores to pick the model it exports, and
    NaN compares false with everything: [60, NaN, 50] stayed in that order and the NaN trial's model was
    exported as the median one. Now trial 2's (f1 50), the run the summary's median is."""
    from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
    from xfer.tasks.conll.tasks import ChunkingTask
    from xfer.testing import make_host, run_recipe_file, write_recipe

    evaluate, scripted = ChunkingTask.evaluate, [60.0, math.nan, 50.0]

    def scored(self: Any, examples: Any, predictions: Any) -> dict[str, Any]:
        return evaluate(self, examples, predictions) | {"f1": scripted.pop(0)}

    monkeypatch.setattr(ChunkingTask, "evaluate", scored)
    write_tiny_data(tmp_path)
    text = tiny_cvt_recipe(CHUNK, steps=2, extra="    trials: 3").replace("eval_every: 4", "eval_every: null")
    run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", make_host(autoload=True))
    stage = tmp_path / "run" / "fit" / "outputs"
    assert not scripted
    assert json.loads((stage / "results" / "results.json").read_text())["conll/chunking"]["summary"]["f1"][
        "median"
    ] == pytest.approx(50.0)
    meta = json.loads((stage / "model" / "xfer_model.json").read_text())
    assert meta["cvt"]["trial"] == 2 and meta["cvt"]["metrics"]["f1"] == pytest.approx(50.0)


def test_cvt_model_metadata_is_strict_json_when_the_median_trial_scored_nan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exported model's xfer_model.json carries the median trial's dev metrics: a NaN score went in as
    Python's bare `NaN` token, which jq, JavaScript and Go refuse (`transformer.finetune` writes its model's
    metrics with `strict_json`; results.json and metrics.jsonl spell it "NaN" too)."""
    from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
    from xfer.tasks.conll.tasks import ChunkingTask
    from xfer.testing import make_host, run_recipe_file, write_recipe

    evaluate = ChunkingTask.evaluate
    monkeypatch.setattr(ChunkingTask, "evaluate", lambda self, e, p: evaluate(self, e, p) | {"recall": math.nan})
    write_tiny_data(tmp_path)
    text = tiny_cvt_recipe(CHUNK, steps=2).replace("eval_every: 4", "eval_every: null")
    run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", make_host(autoload=True))

    def refuse(token: str) -> None:
        raise AssertionError(f"bare {token} token: not strict JSON")

    meta = json.loads(
        (tmp_path / "run" / "fit" / "outputs" / "model" / "xfer_model.json").read_text(), parse_constant=refuse
    )
    assert meta["cvt"]["metrics"]["recall"] == "NaN" and isinstance(meta["cvt"]["metrics"]["f1"], float)

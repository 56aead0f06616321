"""Hostile review of the BAM stages: METHODS.md's details, teacher-cache compatibility, resume."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from xfer.bam.cache import TeacherPredictions
from xfer.bam.data import MixedTaskSource
from xfer.bam.objective import gold_weight, mixed_squared_error, soft_cross_entropy
from xfer.bam.sampling import task_probabilities
from xfer.bam.stage import check_compatible
from xfer.core.errors import UserError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import preflight
from xfer.core.trainer import TrainingProgress
from xfer.testing import make_host

# --- METHODS.md: teacher annealing, loss mixing, sampling ----------------------------------------


def test_lambda_rises_linearly_from_zero_at_the_first_step_towards_one() -> None:
    total = 10
    values = [gold_weight("linear", TrainingProgress(step, total).fraction) for step in range(total)]
    assert values[0] == 0.0
    assert values[5] == pytest.approx(0.5)
    assert values[-1] == pytest.approx(0.9)  # the last step's λ: step / total, as the original percent_done
    assert np.allclose(np.diff(values), 0.1)


def test_classification_target_is_the_lambda_mix_of_gold_and_teacher() -> None:
    scores = torch.tensor([[0.3, -1.0, 2.0]])
    teacher = torch.tensor([[1.0, 0.0, -1.0]])
    gold = torch.tensor([1])
    lam = 0.3
    target = lam * F.one_hot(gold, 3).float() + (1 - lam) * F.softmax(teacher, -1)
    expected = -(target * F.log_softmax(scores, -1)).sum(-1).mean()
    assert soft_cross_entropy(scores, gold, teacher, lam).item() == pytest.approx(expected.item(), rel=1e-6)
    assert soft_cross_entropy(scores, gold, teacher, 1.0).item() == pytest.approx(F.cross_entropy(scores, gold).item())


def test_regression_target_is_the_lambda_mix_of_gold_and_teacher() -> None:
    scores, gold, teacher = torch.tensor([[0.2], [0.9]]), torch.tensor([0.0, 1.0]), torch.tensor([[0.5], [0.5]])
    lam = 0.25
    expected = ((0.2 - 0.375) ** 2 + (0.9 - 0.625) ** 2) / 2
    assert mixed_squared_error(scores, gold, teacher, lam).item() == pytest.approx(expected, rel=1e-6)


def test_sampling_is_proportional_to_size_to_the_power_three_quarters() -> None:
    p = task_probabilities({"big": 10000, "small": 1}, "power", 0.75)
    assert p["big"] / p["small"] == pytest.approx(10000**0.75)
    source = MixedTaskSource({"big": list(range(10000)), "small": [0]}, p, 64, lambda g: g, seed=1)
    counts = np.sum([source.draw_counts(step) for step in range(400)], axis=0)
    assert counts[1] / counts.sum() == pytest.approx(p["small"], abs=0.002)


def test_a_resumed_source_continues_exactly_with_gradient_accumulation() -> None:
    features = {"a": list(range(7)), "b": list(range(100, 103)), "one": [999]}
    p = task_probabilities({k: len(v) for k, v in features.items()})

    def source() -> MixedTaskSource:
        return MixedTaskSource(features, p, 8, lambda g: {k: list(v) for k, v in g.items()}, seed=5, accumulation=2)

    straight = source()
    expected = [straight.next_step() for _ in range(12)]
    first = source()
    for _ in range(5):
        first.next_step()
    state = json.loads(json.dumps(first.state_dict()))  # as it goes through a checkpoint
    resumed = source()
    resumed.load_state_dict(state)
    assert [resumed.next_step() for _ in range(7)] == expected[5:]


# --- teacher predictions that do not mean what the student's head predicts ----------------------


def _predictions(task_type: str, labels: tuple[str, ...], extra: dict) -> TeacherPredictions:
    return TeacherPredictions(
        key="k",
        task="t",
        type=task_type,
        labels=labels,
        ids=["a"],
        values=np.zeros((1, 1), dtype=np.float32),
        offsets=np.array([0, 1], dtype=np.int64),
        digests=np.zeros(1, dtype=np.int64),
        extra=extra,
        source="p.safetensors",
    )


def _task(task_type: str, labels: tuple[str, ...], extra: dict) -> SimpleNamespace:
    return SimpleNamespace(name="t", info=SimpleNamespace(type=task_type, labels=labels, extra=extra))


def test_a_regression_teacher_without_score_range_does_not_teach_a_scaled_student() -> None:
    # the teacher's outputs are raw 0..5 scores (its targets were not scaled), the student's targets
    # are scaled to [0, 1]: the mix would pull the student five times too high
    with pytest.raises(UserError, match="scale scores"):
        check_compatible(_task("regression", (), {"score_range": (0, 5)}), _predictions("regression", (), {}))
    with pytest.raises(UserError, match="scale scores"):
        check_compatible(_task("regression", (), {}), _predictions("regression", (), {"score_range": [0, 5]}))
    check_compatible(
        _task("regression", (), {"score_range": (0, 5)}), _predictions("regression", (), {"score_range": [0.0, 5.0]})
    )
    check_compatible(_task("regression", (), {}), _predictions("regression", (), {}))


def test_permuted_teacher_labels_are_refused() -> None:
    with pytest.raises(UserError, match="labels"):
        check_compatible(_task("classification", ("0", "1"), {}), _predictions("classification", ("1", "0"), {}))


def _teachers_folder_recipe(tmp_path: Path, entries: dict) -> Path:
    folder = tmp_path / "predictions"
    folder.mkdir()
    (folder / "index.json").write_text(json.dumps({"format": 1, "tasks": entries}), encoding="utf-8")
    (folder / "x.safetensors").write_bytes(b"")  # the file every `_entry` names (the pre-flight checks it exists)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "name: t\nstages:\n  student:\n    kind: bam.student\n"
        f"    teachers: {folder}\n    tasks: [{{name: toy/agreement}}, {{name: toy/pos}}]\n",
        encoding="utf-8",
    )
    return recipe


def _entry(labels: list[str]) -> dict:
    return {"file": "x.safetensors", "key": "x", "type": "classification", "labels": labels, "examples": 3}


def test_preflight_names_a_task_a_teachers_folder_does_not_cover(tmp_path: Path) -> None:
    host = make_host(autoload=True)
    recipe = _teachers_folder_recipe(tmp_path, {"toy/agreement": _entry(["0", "1"])})
    problems = preflight(load_recipe(recipe, host=host), host)
    assert any("recipe.yaml:4" in p and "tasks.1" in p and "'toy/pos' has no teacher" in p for p in problems), problems


def test_preflight_refuses_a_teachers_folder_with_permuted_labels(tmp_path: Path) -> None:
    host = make_host(autoload=True)
    pos = host.load("task", "toy/pos")("toy/pos", None).info()
    recipe = _teachers_folder_recipe(
        tmp_path, {"toy/agreement": _entry(["1", "0"]), "toy/pos": {**_entry(list(pos.labels)), "type": "tagging"}}
    )
    problems = preflight(load_recipe(recipe, host=host), host)
    assert len(problems) == 1 and "tasks.0" in problems[0] and "label order must match" in problems[0], problems


# --- a head from `init` whose labels mean something else ----------------------------------------


def test_a_head_from_init_with_permuted_labels_is_refused(tmp_path: Path) -> None:
    from xfer.bam.weights import InitialWeights, head_records
    from xfer.core.tasks import TaskInfo

    folder = tmp_path / "model"
    folder.mkdir()
    record = {"module": "head-t", "type": "classification", "labels": ["yes", "no"], "objective": "x", "extra": {}}
    (folder / "xfer_model.json").write_text(json.dumps({"bam": {"tasks": {"t": record}}}), encoding="utf-8")
    head = {"out.weight": torch.zeros(2, 4)}  # same shape for either label order: load_state_dict cannot tell
    weights = InitialWeights(
        encoder_config=None,
        encoder_state={},
        heads={"t": head},
        tokenizer_folder=folder,
        head_records=head_records(folder),
    )
    with pytest.raises(UserError, match=r"labels \['yes', 'no'\].*labels \['no', 'yes'\]"):
        weights.for_tasks(["t"], {"t": TaskInfo("t", "classification", ("no", "yes"), "accuracy")})
    _, heads = weights.for_tasks(["t"], {"t": TaskInfo("t", "classification", ("yes", "no"), "accuracy")})
    assert set(heads) == {"t"}
    record.update(type="regression", labels=[], extra={})
    (folder / "xfer_model.json").write_text(json.dumps({"bam": {"tasks": {"t": record}}}), encoding="utf-8")
    per_task = InitialWeights(encoder_config=None, head_records=head_records(folder))
    per_task.heads, per_task.encoder_state = {"t": head}, {}
    with pytest.raises(UserError, match="score range"):
        per_task.for_tasks(["t"], {"t": TaskInfo("t", "regression", (), "spearman", extra={"score_range": (0, 5)})})


def test_a_wrong_head_in_init_stops_the_stage_before_any_task_trains(tmp_path: Path) -> None:
    from tests.bam.bam_recipes import ENCODER, TASKS, TRAIN, prepare, recipe
    from xfer.testing import run_recipe_file

    first = tmp_path / "first"
    run_recipe_file(prepare(first, recipe(trials=1)), first / "run", make_host(autoload=True))
    models = first / "run/teachers/outputs/models"
    meta_path = models / "toy-chunk/xfer_model.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["bam"]["tasks"]["toy/chunk"]["labels"].reverse()  # the same tags in another order: same head shape
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    again = tmp_path / "again"
    text = (
        f"name: again\nseed: 3\nstages:\n  again:\n    kind: bam.teachers\n    init: {models}\n"
        f"    encoder: {ENCODER}\n    max_length: 40\n    trials: 1\n    tasks: {TASKS}\n    train: {TRAIN}\n"
    )
    with pytest.raises(UserError, match="toy/chunk: the head in init"):
        run_recipe_file(prepare(again, text), again / "run", make_host(autoload=True))
    assert not (again / "run/again/trials").exists()  # toy/agreement, listed first, did not train


def test_a_missing_evaluated_teacher_checkpoint_is_an_error_not_another_exported(tmp_path: Path) -> None:
    """The teacher export fell back to `latest` when the teaching trial's recorded checkpoint was
    gone: its predictions and model would be of other weights than the trial's metrics (or a bare
    error when `latest` was that checkpoint)."""
    from xfer.core.errors import CheckpointError
    from xfer.testing import run_recipe_file

    from .bam_recipes import prepare, recipe

    recipe_file, run = prepare(tmp_path / "project", recipe(trials=1)), tmp_path / "run"
    run_recipe_file(recipe_file, run, make_host(autoload=True))
    trial = run / "teachers" / "trials" / "toy-agreement" / "trial-0"
    chosen = trial / "checkpoints" / json.loads((trial / "done.json").read_text())["checkpoint"]
    status_file = run / "teachers" / "stage.json"  # a crash while exporting: the stage re-runs its finish
    status_file.write_text(json.dumps({**json.loads(status_file.read_text()), "status": "failed"}))
    for path in chosen.iterdir():
        path.unlink()
    chosen.rmdir()
    with pytest.raises(CheckpointError, match=rf"{chosen.name}: the checkpoint that trial 0 of toy/agreement"):
        run_recipe_file(recipe_file, run, make_host(autoload=True))

"""The BAM loss: λ schedules, the mixed targets per task type, and one encoder pass per mixed batch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from xfer.bam.data import MixedCollate
from xfer.bam.model import HiddenStates, MultiTaskModel
from xfer.bam.objective import (
    TASK_KINDS,
    DistillationObjective,
    gold_weight,
    mixed_squared_error,
    soft_cross_entropy,
)
from xfer.core.tasks import SentenceExample, TaggingExample, TaskInfo
from xfer.core.trainer import TrainingProgress
from xfer.transformer.encoder import Encoder
from xfer.transformer.objectives import SequenceObjective, TaggingObjective
from xfer.transformer.presets import preset
from xfer.transformer.tokenization import WordPieceTokenizer

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "dog", "runs", "big", "a", "sleeps"]


@pytest.mark.parametrize(
    ("schedule", "value", "expected"),
    [
        ("linear", 0.0, {0: 0.0, 50: 0.5, 99: 0.99}),  # teacher annealing: 0 -> 1 over training
        ("constant", 0.0, {0: 0.0, 50: 0.0, 99: 0.0}),  # pure distillation
        ("constant", 0.5, {0: 0.5, 50: 0.5, 99: 0.5}),
        ("none", 0.0, {0: 1.0, 50: 1.0, 99: 1.0}),  # plain supervised training
    ],
)
def test_lambda_schedule_at_start_middle_end(schedule: str, value: float, expected: dict[int, float]) -> None:
    for step, lam in expected.items():
        assert gold_weight(schedule, TrainingProgress(step, 100).fraction, value) == pytest.approx(lam)


def test_objective_follows_the_trainers_progress() -> None:
    objective = DistillationObjective(_model(["toy/c"]), "linear")
    for step, lam in ((0, 0.0), (30, 0.25), (119, 119 / 120)):
        objective.set_progress(TrainingProgress(step, 120))
        assert objective.lam == pytest.approx(lam)


def test_regression_is_mse_to_the_mixed_target() -> None:
    prediction = torch.tensor([[0.2], [0.9], [0.5]])
    gold = torch.tensor([0.0, 1.0, 0.4])
    teacher = torch.tensor([[0.6], [0.5], [0.4]])
    lam = 0.25
    target = lam * gold + (1 - lam) * teacher.squeeze(-1)
    expected = ((prediction.squeeze(-1) - target) ** 2).mean()
    assert mixed_squared_error(prediction, gold, teacher, lam) == pytest.approx(expected.item())
    assert mixed_squared_error(prediction, gold, teacher, 1.0) == pytest.approx(
        F.mse_loss(prediction[:, 0], gold).item()
    )
    assert TASK_KINDS["regression"].loss is mixed_squared_error


def test_classification_is_cross_entropy_to_the_mixed_distribution() -> None:
    torch.manual_seed(0)
    scores, teacher = torch.randn(4, 3), torch.randn(4, 3)
    gold = torch.tensor([0, 2, 1, 1])
    lam = 0.3
    target = lam * F.one_hot(gold, 3).float() + (1 - lam) * teacher.softmax(-1)
    expected = -(target * scores.log_softmax(-1)).sum(-1).mean()
    assert soft_cross_entropy(scores, gold, teacher, lam) == pytest.approx(expected.item(), rel=1e-6)
    assert soft_cross_entropy(scores, gold, None, 0.0) == pytest.approx(F.cross_entropy(scores, gold).item(), rel=1e-6)


def test_tagging_ignores_padding_words() -> None:
    torch.manual_seed(1)
    scores, teacher = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    gold = torch.tensor([[1, 2, -100], [0, -100, -100]])
    real = gold != -100
    full = soft_cross_entropy(scores[real], gold[real], teacher[real], 0.5)
    assert soft_cross_entropy(scores, gold, teacher, 0.5) == pytest.approx(full.item(), rel=1e-6)
    scores_changed = scores.clone()
    scores_changed[~real] = 100.0  # padding positions must not matter
    assert soft_cross_entropy(scores_changed, gold, teacher, 0.5) == pytest.approx(full.item(), rel=1e-6)


# --- the model ---------------------------------------------------------------------------------


def _tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab({w: i for i, w in enumerate(WORDS)})


def _infos() -> dict[str, TaskInfo]:
    return {
        "toy/c": TaskInfo("toy/c", "classification", ("0", "1"), "accuracy"),
        "toy/r": TaskInfo("toy/r", "regression", (), "spearman", extra={"score_range": (0.0, 5.0)}),
        "toy/t": TaskInfo("toy/t", "tagging", ("N", "V", "D"), "accuracy"),
    }


def _model(tasks: list[str], seed: int = 0) -> MultiTaskModel:
    torch.manual_seed(seed)
    config = preset("tiny", vocab_size=len(WORDS), num_layers=1, hidden_size=16, embedding_size=16, num_heads=2,
                    intermediate_size=32, hidden_dropout=0.0, attention_dropout=0.0)  # fmt: skip
    encoder = Encoder(config)
    infos = _infos()
    objectives = {}
    for task in tasks:
        cls = TaggingObjective if infos[task].type == "tagging" else SequenceObjective
        objectives[task] = cls(HiddenStates(config), infos[task], _tokenizer(), 16, None)
    return MultiTaskModel(encoder, objectives, {t: infos[t] for t in tasks})


def _features(model: MultiTaskModel) -> dict[str, list[dict]]:
    examples = {
        "toy/c": [SentenceExample("c0", "the cat runs", label="1"), SentenceExample("c1", "a dog", label="0")],
        "toy/r": [SentenceExample("r0", "the dog", "a big cat", label=4.0)],
        "toy/t": [
            TaggingExample("t0", ("the", "cat", "sleeps"), ("D", "N", "V")),
            TaggingExample("t1", ("dog",), ("N",)),
        ],
    }
    return {t: model.objective(t).featurize(examples[t]) for t in model.task_names}


def test_a_mixed_batch_equals_each_task_on_its_own() -> None:
    """One encoder pass over the mixed batch gives each task the loss it would get alone (no dropout)."""
    tasks = ["toy/c", "toy/r", "toy/t"]
    model = _model(tasks).eval()  # heads have dropout
    features = _features(model)
    kinds = {t: TASK_KINDS[model.infos[t].type] for t in tasks}
    collate = MixedCollate({t: model.objective(t) for t in tasks}, kinds, pad_id=0)
    mixed = DistillationObjective(model, "none")(collate(features)).loss
    alone = {t: DistillationObjective(model, "none")(collate({t: features[t]})).loss for t in tasks}
    sizes = {t: len(features[t]) for t in tasks}
    expected = sum(alone[t] * sizes[t] for t in tasks) / sum(sizes.values())
    assert mixed.item() == pytest.approx(expected.item(), rel=1e-5)
    # ... and a single-task batch gives exactly the fine-tuning objective's own loss
    sequence = model.objective("toy/c")
    batch = sequence.collate(features["toy/c"])
    sequence.encoder.provide(model.encode(batch))
    assert alone["toy/c"].item() == pytest.approx(sequence(batch).loss.item(), rel=1e-6)


def test_distillation_targets_come_from_the_batch_and_absent_heads_get_zero_gradients() -> None:
    tasks = ["toy/c", "toy/t"]
    model = _model(tasks).eval()
    features = _features(model)
    for f in features["toy/c"]:
        f["teacher"] = torch.tensor([[3.0, -3.0]]).numpy()  # the teacher is sure of class 0
    collate = MixedCollate(
        {t: model.objective(t) for t in tasks}, {t: TASK_KINDS[model.infos[t].type] for t in tasks}, 0
    )
    batch = collate({"toy/c": features["toy/c"]})
    assert batch["parts"][0]["teacher"].shape == (2, 2)
    objective = DistillationObjective(model, "constant", 0.0)
    loss = objective(batch).loss
    scores = model.scores("toy/c", model.objective("toy/c").collate(features["toy/c"]))
    expected = -(torch.tensor([3.0, -3.0]).softmax(-1) * scores.log_softmax(-1)).sum(-1).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    loss.backward()
    tagging_head = model.objective("toy/t").head.out.weight
    assert tagging_head.grad is not None and torch.count_nonzero(tagging_head.grad) == 0


def test_hidden_states_refuses_stale_or_missing_inputs() -> None:
    stand_in = HiddenStates(preset("tiny"))
    with pytest.raises(RuntimeError, match="without provided"):
        stand_in(torch.zeros(2, 3, dtype=torch.long))
    stand_in.provide(torch.zeros(2, 4, 8))
    with pytest.raises(RuntimeError, match="do not match"):
        stand_in(torch.zeros(2, 3, dtype=torch.long))

"""ELECTRA's detection metrics are logged pooled over the log window (weights `NAME@weight`,
xfer.core.trainer.WEIGHT_SUFFIX): averaged per batch, a batch with no replaced token pulled the window's
AUC toward its placeholder 50 and its recall toward 0, one with nothing predicted replaced its precision
toward 0, and per-batch precision and recall were not the window's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from xfer.core.trainer import WEIGHT_SUFFIX, StepOutput, TrainConfig, Trainer
from xfer.electra import sampling
from xfer.electra.config import NCEConfig, RTDConfig
from xfer.electra.objective import ElectricObjective, RTDObjective, SpecialTokens, detection_metrics
from xfer.transformer.presets import preset

pytestmark = pytest.mark.usefixtures("one_thread")

DETECTION = ("disc_accuracy", "disc_precision", "disc_recall", "disc_auc")
TOKENS = SpecialTokens(pad=0, cls=2, sep=3, mask=4)
VOCAB = 300


class Scripted(torch.nn.Module):
    """Returns the detection metrics of scripted (logits, replaced) pairs, one pair per micro-batch."""

    def __init__(self, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        super().__init__()
        self.w, self.batches, self.calls = torch.nn.Parameter(torch.zeros(())), batches, 0

    def forward(self, batch: Any) -> StepOutput:
        logits, replaced = self.batches[self.calls % len(self.batches)]
        self.calls += 1
        return StepOutput((self.w - 1.0) ** 2, detection_metrics(logits, replaced))


class Repeat:
    """A batch source of the same batch, `accumulation` micro-batches a step."""

    steps_per_epoch = None

    def __init__(self, batch: Any, accumulation: int = 1) -> None:
        self.batch, self.accumulation = batch, accumulation

    def next_step(self) -> list[Any]:
        return [self.batch] * self.accumulation

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class Log:
    def __init__(self) -> None:
        self.train: list[dict[str, float]] = []

    def log(self, step: int, split: str, metrics: dict[str, float]) -> None:
        if split == "train":
            self.train.append(metrics)

    def checkpoint_saved(self, step: int, path: Path) -> None:
        pass

    def resumed(self, step: int) -> None:
        pass


def logged(tmp_path: Path, objective: torch.nn.Module, steps: int, batch: Any = None, accumulation: int = 1) -> dict:
    """The one train log of a `steps`-step window."""
    config = TrainConfig(
        steps=steps,
        batch_size=accumulation,
        grad_accum=accumulation,
        lr=0.0,
        precision="fp32",
        log_every=steps,
        eval_every=None,
        schedule="constant",
    )
    events = Log()
    source = Repeat(batch if batch is not None else torch.zeros(1), accumulation)
    Trainer(config, objective, source, tmp_path, device=torch.device("cpu"), events=events, progress=False).fit()
    (metrics,) = events.train
    return metrics


def test_detection_metrics_give_their_weights() -> None:
    """Accuracy by the tokens scored, precision by those predicted replaced, recall by the replaced ones,
    AUC by the (replaced, original) pairs; float32 counts. The per-batch values are as before."""
    logits = torch.tensor([2.0, -1.0, 0.5, -3.0, 1.0, -0.5, -2.0])
    replaced = torch.tensor([1, 1, 0, 0, 0, 0, 0], dtype=torch.bool)
    got = detection_metrics(logits, replaced)
    weights = {name: got[name + WEIGHT_SUFFIX] for name in DETECTION}
    assert {k: v.item() for k, v in weights.items()} == {
        "disc_accuracy": 7.0,
        "disc_precision": 3.0,
        "disc_recall": 2.0,
        "disc_auc": 10.0,
    }
    assert all(w.dtype == torch.float32 and w.dim() == 0 for w in weights.values())
    assert got["disc_recall"].item() == pytest.approx(50.0) and got["disc_precision"].item() == pytest.approx(100 / 3)


def test_a_batch_without_replaced_tokens_leaves_the_window_pooled_not_pulled(tmp_path: Path) -> None:
    """Step 1: 4 replaced tokens, 2 of them detected, nothing else predicted replaced, perfectly ranked.
    Step 2: no replaced token and nothing predicted replaced (its placeholders: AUC 50, recall 0,
    precision 0). The window's log was AUC 75, recall 25, precision 50; pooled it is 100, 50, 100."""
    batches = [
        (torch.tensor([3.0, 2.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0]), torch.tensor([1, 1, 1, 1, 0, 0, 0, 0]).bool()),
        (torch.tensor([-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0]), torch.zeros(8, dtype=torch.bool)),
    ]
    got = logged(tmp_path, Scripted(batches), steps=2)
    assert (got["disc_auc"], got["disc_recall"], got["disc_precision"]) == pytest.approx((100.0, 50.0, 100.0))
    assert got["disc_accuracy"] == pytest.approx(100.0 * 14 / 16)
    assert not [name for name in got if name.endswith(WEIGHT_SUFFIX)]


def test_the_window_figures_are_those_of_all_its_tokens(tmp_path: Path) -> None:
    """Over micro-batches of different sizes and replaced counts (two a step, three steps), the logged
    accuracy, precision and recall are sklearn's over all the window's tokens at once, and the AUC the
    pair-weighted mean of the batches' AUCs."""
    from sklearn.metrics import accuracy_score, precision_score, recall_score, roc_auc_score

    generator = torch.Generator().manual_seed(3)
    batches = []
    for size, rate in ((40, 0.05), (200, 0.3), (16, 0.0), (120, 0.15), (60, 0.5), (90, 0.1)):
        replaced = torch.rand(size, generator=generator) < rate
        batches.append((torch.randn(size, generator=generator) + 1.5 * replaced - 0.8, replaced))
    got = logged(tmp_path, Scripted(batches), steps=3, accumulation=2)
    y = torch.cat([r for _, r in batches]).numpy()
    predicted = torch.cat([lg for lg, _ in batches]).numpy() > 0
    assert got["disc_accuracy"] == pytest.approx(100 * accuracy_score(y, predicted), rel=1e-5)
    assert got["disc_precision"] == pytest.approx(100 * precision_score(y, predicted), rel=1e-5)
    assert got["disc_recall"] == pytest.approx(100 * recall_score(y, predicted), rel=1e-5)
    pairs = [float(r.sum() * (~r).sum()) for _, r in batches]
    aucs = [roc_auc_score(r.numpy(), lg.numpy()) if p else 0.0 for (lg, r), p in zip(batches, pairs, strict=True)]
    assert got["disc_auc"] == pytest.approx(100 * np.average(aucs, weights=pairs), rel=1e-5)


def _packed_batch(lengths: list[int], width: int = 64) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids, mask = torch.zeros(len(lengths), width, dtype=torch.long), torch.zeros(len(lengths), width, dtype=torch.long)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(5, VOCAB, (n,), generator=g)
        ids[row, 0], ids[row, n // 2], ids[row, n - 1] = 2, 3, 3
        mask[row, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def _tiny() -> Any:
    return preset("tiny", vocab_size=VOCAB, num_layers=1, hidden_dropout=0.0, attention_dropout=0.0)


def test_electra_training_pools_a_step_whose_generator_replaced_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real electra.rtd objective, two steps in one window; in the second the generator samples every
    original token back (nothing replaced). The window's recall and AUC are the first step's, not their
    mean with the placeholders 0 and 50."""
    generate = RTDObjective._generate
    seen: list[dict[str, float]] = []

    def perfect_on_the_second_step(self: Any, batch: Any, selection: Any, originals: torch.Tensor) -> Any:
        if len(seen) == 1:
            logits = torch.full((originals.numel(), VOCAB), -1e4)
            logits[torch.arange(originals.numel()), originals] = 1e4
            return sampling.generator_loss_and_sample(logits, originals)
        return generate(self, batch, selection, originals)

    forward = RTDObjective.forward

    def recorded(self: Any, batch: Any) -> StepOutput:
        out = forward(self, batch)
        seen.append({k: float(v) for k, v in out.metrics.items()})
        return out

    monkeypatch.setattr(RTDObjective, "_generate", perfect_on_the_second_step)
    monkeypatch.setattr(RTDObjective, "forward", recorded)
    torch.manual_seed(0)
    objective = RTDObjective(_tiny(), TOKENS, 64, RTDConfig())
    got = logged(tmp_path, objective, steps=2, batch=_packed_batch([64, 40]))
    first, second = seen
    assert second["disc_recall" + WEIGHT_SUFFIX] == 0.0 and second["disc_auc"] == pytest.approx(50.0)
    assert first["disc_recall" + WEIGHT_SUFFIX] > 0
    assert got["disc_recall"] == pytest.approx(first["disc_recall"], rel=1e-5)
    assert got["disc_auc"] == pytest.approx(first["disc_auc"], rel=1e-5)


def test_electric_gives_the_detection_weights_too() -> None:
    """electric.nce reports the same detection metrics, with their weights."""
    torch.manual_seed(0)
    objective = ElectricObjective(_tiny(), TOKENS, 64, NCEConfig())
    metrics = objective(_packed_batch([64, 40])).metrics
    n_real = 104
    assert metrics["disc_accuracy" + WEIGHT_SUFFIX].item() == n_real
    noise = metrics["disc_recall" + WEIGHT_SUFFIX].item()
    assert noise == pytest.approx(metrics["replaced"].item() * n_real / 100)
    assert metrics["disc_auc" + WEIGHT_SUFFIX].item() == noise * (n_real - noise)

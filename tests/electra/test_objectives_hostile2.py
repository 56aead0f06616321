"""Hostile review of the ELECTRA/Electric objectives: device-agnostic arithmetic and the Table 5.7 ablations.

Apple's MPS has no float64 (`--device mps` is accepted), so the mask count and the detection AUC
must not create float64 tensors on the training device, while giving the same numbers as before on
CPU/CUDA. The `meta` device stands in for such a device: a dispatch mode records every tensor an
op creates, and `masking.has_float64` is told that meta has no float64, as MPS.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from xfer.electra import masking
from xfer.electra.objective import detection_metrics

pytestmark = pytest.mark.usefixtures("one_thread")


class _Created(TorchDispatchMode):
    """Records (op, dtype, device type) of every tensor an op returns."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, torch.dtype, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.seen.append((str(func), t.dtype, t.device.type))
        return out


def _old_ceil_count(n: torch.Tensor, p: float) -> torch.Tensor:
    """The count as computed before (float64 on the tokens' device)."""
    return torch.ceil(n.double() * p - 1e-9)


def _old_auc(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The AUC as computed before (float64 average ranks, boolean-mask indexing)."""
    logits, labels = logits.float(), labels.bool()
    n_pos = labels.sum()
    n_neg = labels.numel() - n_pos
    ordered = logits.sort().values
    below = torch.searchsorted(ordered, logits, right=False)
    through = torch.searchsorted(ordered, logits, right=True)
    ranks = (below + through + 1).double() / 2
    u = ranks[labels].sum() - n_pos.double() * (n_pos + 1) / 2
    return 100.0 * torch.where((n_pos > 0) & (n_neg > 0), u / (n_pos * n_neg).clamp(min=1), torch.full_like(u, 0.5))


def test_mask_count_and_auc_create_no_float64_on_a_device_without_it(monkeypatch) -> None:
    """`target_count(..., "ceil")` (Electric's k, every step) and `detection_metrics` (every ELECTRA and
    Electric step) made float64 tensors on the batch's device: on MPS the first step failed."""
    monkeypatch.setattr(masking, "has_float64", lambda device: device.type not in ("mps", "meta"), raising=False)
    if hasattr(masking, "_count_table"):
        masking._count_table.cache_clear()
    with _Created() as created:
        n = torch.randint(0, 129, (8,), device="meta")
        count = masking.target_count(n, 0.15, "ceil", max_tokens=128)
        metrics = detection_metrics(torch.randn(50, device="meta"), torch.rand(50, device="meta") < 0.3)
    on_device = [s for s in created.seen if s[1] == torch.float64 and s[2] != "cpu"]
    assert on_device == [], f"float64 tensors created on the device: {on_device}"
    assert count.dtype == torch.int64 and count.device.type == "meta"
    assert metrics["disc_auc"].dtype == torch.float32 and metrics["disc_auc"].device.type == "meta"


def test_select_bounds_the_counts_so_they_are_looked_up_not_computed_on_the_device(monkeypatch) -> None:
    """`select` (what every objective calls) gives `target_count` the batch width as the bound, so the
    counts come from the int64 table, on any device."""
    seen: list[int | None] = []
    original = masking.target_count

    def spy(n_tokens, mask_prob, rounding="round", max_tokens=None):
        seen.append(max_tokens)
        return (
            original(n_tokens, mask_prob, rounding, max_tokens=max_tokens)
            if max_tokens
            else original(n_tokens, mask_prob, rounding)
        )

    monkeypatch.setattr(masking, "target_count", spy)
    ids = torch.full((3, 40), 7)
    mask = (torch.arange(40)[None] < torch.tensor([40, 21, 2])[:, None]).long()
    for rounding, counts in (("ceil", [6, 4, 1]), ("round", [6, 3, 1])):
        selection = masking.select(ids * mask, mask, torch.tensor([2, 3, 4]), 0.15, 19, rounding=rounding)
        assert selection.count.tolist() == counts
    assert [m for m in seen if m is not None] == [40, 40]  # (the table itself is built by an unbounded call)


@pytest.mark.parametrize("seed", range(4))
def test_count_table_equals_the_old_formulas(seed: int) -> None:
    """The int64 table gives exactly the old float64 ceil(n p - 1e-9) and float32 round(n p) (ties
    included: n = 190, 350, 390 at 0.15) for every n up to the bound, for the thesis's
    probabilities and random ones."""
    g = torch.Generator().manual_seed(seed)
    probs = [0.15, 0.1, 0.2, 0.25, 0.3, 1 / 3, 0.4, 0.5, *torch.rand(40, generator=g).clamp(1e-3, 0.999).tolist()]
    n = torch.randperm(1025, generator=g)  # every n in 0 .. 1024, in random order
    for p in probs:
        new = masking.target_count(n, p, "ceil", max_tokens=1024)
        assert new.dtype == torch.int64
        assert torch.equal(new, _old_ceil_count(n, p).long()), f"ceil, mask_prob {p}"
        rounded = masking.target_count(n, p, "round", max_tokens=1024)
        assert torch.equal(rounded, torch.round(n.float() * p).long()), f"round, mask_prob {p}"


def test_detection_auc_is_bitwise_the_old_value_where_float64_exists_and_close_without() -> None:
    """Exact int64 rank sums, divided in float64 on CPU/CUDA: the very bits of the float64 ranks, on
    random batches with many ties; on a device without float64, float32 within rounding."""
    g = torch.Generator().manual_seed(0)
    for trial in range(200):
        size = int(torch.randint(1, 400, (1,), generator=g))
        levels = int(torch.randint(1, 12, (1,), generator=g))
        logits = (torch.randint(0, levels, (size,), generator=g).float() - levels / 2) * 0.5
        if trial % 3 == 0:
            logits = torch.randn(size, generator=g)
        labels = torch.rand(size, generator=g) < torch.rand(1, generator=g)
        old = _old_auc(logits, labels)
        new = detection_metrics(logits, labels)["disc_auc"]
        assert new.dtype == old.dtype == torch.float64
        assert torch.equal(new, old), (trial, new.item(), old.item())


def test_detection_auc_in_float32_without_float64(monkeypatch) -> None:
    monkeypatch.setattr(masking, "has_float64", lambda device: False)
    g = torch.Generator().manual_seed(1)
    for _ in range(50):
        logits = torch.randint(0, 6, (300,), generator=g).float()
        labels = torch.rand(300, generator=g) < 0.2
        new = detection_metrics(logits, labels)["disc_auc"]
        assert new.dtype == torch.float32
        assert new.item() == pytest.approx(_old_auc(logits, labels).item(), rel=1e-6)


# --- All-Tokens MLM (Table 5.7) ---------------------------------------------------------------------


def _all_tokens_objective():
    from xfer.electra.config import GeneratorConfig, RTDConfig
    from xfer.electra.objective import RTDObjective, SpecialTokens
    from xfer.transformer.presets import preset

    encoder = preset("tiny", vocab_size=60, num_layers=1, hidden_dropout=0.0, attention_dropout=0.0)
    config = RTDConfig(variant="all_tokens_mlm", generator=GeneratorConfig(kind="uniform"))
    return RTDObjective(encoder, SpecialTokens(pad=0, cls=2, sep=3, mask=4), 64, config)


def _batch(lengths: list[int], width: int = 64) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(5, 60, (n,), generator=g)
        ids[row, 0], ids[row, n - 1] = 2, 3
        mask[row, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


@pytest.mark.parametrize("copy_bias", [40.0, -40.0])
def test_all_tokens_mlm_accuracy_is_the_copy_mixtures_prediction_at_the_masked_positions(
    monkeypatch, copy_bias: float
) -> None:
    """All-Tokens MLM predicts with D [input] + (1 - D) softmax (thesis 5.4.3); its `mlm_accuracy` was
    the softmax's argmax alone over every token, so a model that copies (D ~ 1) every unchanged token
    read ~0% while predicting them all right, next to electra.mlm's accuracy at masked positions."""
    from xfer.electra.sampling import GeneratorStep

    objective = _all_tokens_objective()
    with torch.no_grad():
        objective.copy.weight.zero_()
        objective.copy.bias.fill_(copy_bias)  # D = sigmoid(40) ~ 1: copy; sigmoid(-40) ~ 0: the softmax alone
    batch = _batch([64, 40, 17])
    replaced_at: dict[str, torch.Tensor] = {}

    def generate(batch, selection, originals):  # every other masked position gets a wrong token
        sampled = originals.clone()
        sampled[::2] = torch.where(originals[::2] == 5, 6, 5)
        replaced_at["flat"], replaced_at["wrong"] = selection.flat, sampled != originals
        return GeneratorStep(torch.zeros(()), sampled, torch.zeros(()))

    monkeypatch.setattr(objective, "_generate", generate)
    torch.manual_seed(0)
    metrics = objective(batch).metrics
    wrong = replaced_at["wrong"]
    real = int(batch["attention_mask"].sum())
    if copy_bias > 0:  # the input token is predicted: right exactly where the generator kept the original
        assert metrics["mlm_accuracy"].item() == pytest.approx(100.0 * (~wrong).float().mean().item())
        assert metrics["all_tokens_accuracy"].item() == pytest.approx(100.0 * (real - int(wrong.sum())) / real)
    else:  # D ~ 0: the softmax's argmax, at the masked positions
        ids = batch["input_ids"].reshape(-1)
        corrupted = ids.clone()
        corrupted[replaced_at["flat"]] = torch.where(
            wrong, torch.where(ids[replaced_at["flat"]] == 5, 6, 5), ids[replaced_at["flat"]]
        )
        rows = replaced_at["flat"]
        with torch.no_grad():
            hidden = objective.discriminator(
                corrupted.view_as(batch["input_ids"]), batch["attention_mask"]
            ).last_hidden_state
            logits = objective.head(
                hidden.reshape(-1, hidden.shape[-1])[rows], objective.discriminator.embeddings.word.weight
            )
        expected = 100.0 * (logits.argmax(-1) == ids[rows]).float().mean().item()
        assert metrics["mlm_accuracy"].item() == pytest.approx(expected)

"""Row counts rounded up for bf16 matmuls on CPU (`xfer.transformer.kernels.row_multiple`).

oneDNN compiles a bf16 matmul kernel per shape; unpadding and the objectives' gathers at real or
masked positions gave a new row count at almost every step (~40% of the quickstart's ELECTRA-TT
step on an AMX CPU). The rounded-up rows must change nothing but the shapes: these tests force the
padding in fp32 (where results can be compared to 1e-5) and check losses, metrics and gradients
against the unpadded computation, and check that under real bf16 autocast every Linear sees a
multiple of 64 rows.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from xfer.electra import objective as objective_module
from xfer.electra.config import GeneratorConfig, MLMConfig, NCEConfig, RTDConfig
from xfer.electra.objective import ElectricObjective, MLMObjective, RTDObjective, SpecialTokens
from xfer.transformer import encoder as encoder_module
from xfer.transformer import kernels
from xfer.transformer.encoder import Encoder
from xfer.transformer.presets import preset

TOKENS = SpecialTokens(pad=0, cls=2, sep=3, mask=4)
VOCAB = 300


def tiny(**overrides):
    return preset("tiny", vocab_size=VOCAB, hidden_dropout=0.0, attention_dropout=0.0, **overrides)


def batch_of(lengths: list[int], seed: int = 0, width: int = 64) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(5, VOCAB, (n,), generator=g)
        ids[row, 0], ids[row, n - 1] = 2, 3
        mask[row, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def force_multiple(monkeypatch: pytest.MonkeyPatch, multiple: int) -> None:
    """Round row counts up to `multiple` whatever the dtype (in the encoder and the objectives)."""
    monkeypatch.setattr(encoder_module, "row_multiple", lambda device, dtype=None: multiple)
    monkeypatch.setattr(objective_module, "row_multiple", lambda device, dtype=None: multiple)


def test_row_multiple_is_64_only_for_low_precision_on_cpu() -> None:
    cpu = torch.device("cpu")
    assert kernels.row_multiple(cpu, torch.float32) == 1
    assert kernels.row_multiple(cpu, torch.bfloat16) == kernels.ROW_MULTIPLE == 64
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert kernels.row_multiple(cpu, torch.float32) == 64
    assert kernels.row_multiple(torch.device("cuda"), torch.bfloat16) == 1  # cuBLAS: no kernel per shape


def test_padded_index_repeats_the_last_entry_to_a_multiple() -> None:
    index = torch.tensor([3, 5, 9])
    assert kernels.padded_index(index, 4).tolist() == [3, 5, 9, 9]
    assert kernels.padded_index(index, 3) is index
    assert kernels.padded_index(index, 1) is index
    assert kernels.padded_index(index[:0], 64).numel() == 0


@pytest.mark.parametrize(
    ("causal", "lengths"),
    [
        (None, [64, 37, 5, 1, 20]),  # 127 real tokens: 1 row short of 2 x 64
        ("ltr", [64, 37, 5, 1, 20]),
        ("rtl", [64, 37, 5, 1, 20]),
        (None, [64, 64, 64]),  # no padding: 192 rows, already a multiple
        (None, [23, 23, 23]),  # no padding either (width 23): 69 rows, rounded up too
        ("ltr", [23, 23, 23]),
    ],
)
def test_encoder_rows_rounded_up_change_no_output_or_gradient(
    monkeypatch: pytest.MonkeyPatch, causal, lengths: list[int]
) -> None:
    batch = batch_of(lengths, width=max(lengths))
    runs = []
    for multiple in (1, 64):
        force_multiple(monkeypatch, multiple)
        torch.manual_seed(0)
        model = Encoder(tiny())
        out = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], causal=causal)
        (out.last_hidden_state.square() * batch["attention_mask"][..., None]).sum().backward()
        runs.append((out.last_hidden_state.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (plain, plain_grads), (padded, padded_grads) = runs
    assert torch.allclose(plain, padded, atol=1e-5)
    if not batch["attention_mask"].all():
        assert padded[batch["attention_mask"] == 0].abs().max() == 0  # padding positions stay zeros
    for name, grad in plain_grads.items():
        assert torch.allclose(grad, padded_grads[name], atol=1e-5, rtol=1e-4), name


def test_plan_puts_the_extra_rows_in_a_sequence_of_their_own() -> None:
    mask = torch.arange(8)[None] < torch.tensor([8, 3, 2])[:, None]  # 13 real tokens
    plan, rows, n = kernels.unpadded_plan(mask, 2, None, multiple=16)
    assert n == 13 and rows.numel() == 16
    assert rows[:13].tolist() == mask.reshape(-1).nonzero().squeeze(1).tolist()
    assert rows[13:].tolist() == [17, 17, 17]  # the last real token's index, repeated (as padded_index does)
    qkv = torch.randn(16, 3 * 2 * 4, dtype=torch.float64)
    moved = qkv.clone()
    moved[13:] += 100.0  # whatever the extra rows hold ...
    same = kernels._CpuAttention.apply(qkv, plan, 0.0), kernels._CpuAttention.apply(moved, plan, 0.0)
    assert torch.equal(same[0][:13], same[1][:13])  # ... no real token attends to them


def _objectives() -> dict[str, Callable[[], torch.nn.Module]]:
    def rtd(**settings) -> Callable[[], torch.nn.Module]:
        generator = GeneratorConfig(**settings.pop("generator", {}))
        return lambda: RTDObjective(tiny(), TOKENS, 64, RTDConfig(generator=generator, **settings))

    return {
        "electra": rtd(),
        "electra T=2": rtd(generator={"temperature": 2.0}),
        "electra-tt": rtd(generator={"kind": "two_tower"}),
        "electra_15": rtd(variant="electra_15"),
        "replace_mlm": rtd(variant="replace_mlm"),
        "all_tokens_mlm": rtd(variant="all_tokens_mlm"),
        "mlm": lambda: MLMObjective(tiny(), TOKENS, 64, MLMConfig()),
        "electric": lambda: ElectricObjective(tiny(), TOKENS, 64, NCEConfig()),
    }


@pytest.mark.parametrize("name", list(_objectives()))
def test_objective_rows_rounded_up_change_no_loss_metric_or_gradient(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    batch = batch_of([64, 50, 23, 9], seed=3)
    runs = []
    for multiple in (1, 64):
        force_multiple(monkeypatch, multiple)
        torch.manual_seed(0)
        objective = _objectives()[name]()
        torch.manual_seed(7)  # the same masks and samples: padding draws no extra random numbers
        out = objective(batch)
        out.loss.backward()
        grads = {n: p.grad for n, p in objective.named_parameters() if p.grad is not None}
        runs.append((out, grads))
    (plain, plain_grads), (padded, padded_grads) = runs
    assert torch.allclose(plain.loss, padded.loss, atol=1e-5), (plain.loss, padded.loss)
    assert plain.metrics.keys() == padded.metrics.keys()
    for key, value in plain.metrics.items():
        assert torch.allclose(value.float(), padded.metrics[key].float(), atol=1e-3), key
    assert plain_grads.keys() == padded_grads.keys()
    for key, grad in plain_grads.items():
        assert torch.allclose(grad, padded_grads[key], atol=1e-5, rtol=1e-4), key


@pytest.mark.parametrize("name", ["electra", "electra-tt", "electric", "mlm"])
def test_under_bf16_every_linear_sees_a_multiple_of_64_rows(name: str) -> None:
    """What the rounding is for: batches with different numbers of real tokens and masked
    positions give the matmuls no new row count (each one a kernel compilation on a bf16 CPU)."""
    torch.manual_seed(0)
    objective = _objectives()[name]()
    seen: set[int] = set()
    for module in objective.modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_pre_hook(lambda _m, args: seen.add(args[0].reshape(-1, args[0].shape[-1]).shape[0]))
    for seed, lengths in enumerate([[64, 50, 23, 9], [61, 64, 30, 2], [40, 41, 42, 43]]):
        torch.manual_seed(seed)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            objective(batch_of(lengths, seed=seed)).loss.backward()
    assert seen and all(rows % 64 == 0 for rows in seen), sorted(seen)


def _scorers() -> dict[str, Callable[[], torch.nn.Module]]:
    from xfer.electra.heads import DiscriminatorHead
    from xfer.electra.model import MaskedGenerator, TwoTower
    from xfer.electra.scoring import ElectraTTScorer, ElectricScorer, MLMScorer, TwoTowerScorer

    def head() -> DiscriminatorHead:
        return DiscriminatorHead(tiny().hidden_size, 0.02)

    return {
        "electric": lambda: ElectricScorer(Encoder(tiny()), head()),
        "two-tower": lambda: TwoTowerScorer(TwoTower(tiny(), None)),
        "electra-tt": lambda: ElectraTTScorer(Encoder(tiny()), head(), TwoTower(tiny(), None), 0.15, 2.0),
        "mlm": lambda: MLMScorer(MaskedGenerator(tiny(), None), TOKENS.mask),
    }


def _segments() -> list:
    from xfer.electra.scoring import make_segments

    g = torch.Generator().manual_seed(11)
    pieces = [torch.randint(5, VOCAB, (n,), generator=g).tolist() for n in (3, 17, 9, 30, 1, 12, 25)]
    return make_segments(pieces, 64, TOKENS.cls, TOKENS.sep)


@pytest.mark.parametrize("name", list(_scorers()))
def test_scorer_rows_rounded_up_change_no_score(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The PLL scorers gather their heads' rows with `kernel_rows` too (a batch's scored positions
    are a new row count each time); the extra rows are sliced off before any score."""
    runs = []
    for multiple in (1, 64):
        force_multiple(monkeypatch, multiple)
        torch.manual_seed(0)
        scorer = _scorers()[name]().eval()
        runs.append(scorer.score(_segments(), batch_size=3))
    plain, padded = runs
    assert [len(s) for s in plain] == [len(s) for s in padded] == [len(s.scored) for s in _segments()]
    for a, b in zip(plain, padded, strict=True):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-5), (a, b)


@pytest.mark.parametrize("name", list(_scorers()))
def test_scoring_under_bf16_gives_every_linear_a_multiple_of_64_rows(name: str) -> None:
    torch.manual_seed(0)
    scorer = _scorers()[name]().eval()
    seen: set[int] = set()
    for module in scorer.modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_pre_hook(lambda _m, args: seen.add(args[0].reshape(-1, args[0].shape[-1]).shape[0]))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        scorer.score(_segments(), batch_size=3)
    assert seen and all(rows % 64 == 0 for rows in seen), sorted(seen)


def test_low_precision_buckets_come_in_few_shapes() -> None:
    """With rows rounded (bf16 on CPU) every bucket's sequence count and length are multiples of 8, so
    random pad-to-longest batches reuse a handful of attention shapes; without rounding they do not."""
    g = torch.Generator().manual_seed(0)
    shapes: dict[int, set[tuple[int, int]]] = {1: set(), 64: set()}
    for _ in range(100):
        lengths = torch.randint(1, 49, (64,), generator=g)
        mask = torch.arange(48)[None] < lengths[:, None]
        for multiple, seen in shapes.items():
            plan, _, n = kernels.unpadded_plan(mask, 2, None, multiple=multiple)
            assert n == int(lengths.sum())
            seen.update((b.n, b.length) for b in plan.buckets)
    assert all(n % kernels.BUCKET_MULTIPLE == 0 and length % 8 == 0 for n, length in shapes[64])
    assert len(shapes[64]) <= (72 // 8) * (64 // 8)  # (the rows' rounding adds a sequence of up to 63)
    assert len(shapes[1]) > 2 * len(shapes[64])  # fp32 keeps exact buckets (MKL compiles nothing per shape)

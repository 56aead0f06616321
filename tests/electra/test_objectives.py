"""The ELECTRA and Electric details METHODS.md pins, each checked on a tiny model.

Mask count and candidates, 85/15 with no random replacement, BERT's 80/10/10, labels when the
sample equals the original, loss weights, whole-embedding tying, generator logits only at the
masked positions, no gradient from the discriminator into the generator, fp32 Gumbel sampling,
the NCE correction, and the two-tower model's causality (by perturbing inputs).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from xfer.electra import masking, sampling
from xfer.electra import objective as objective_module
from xfer.electra.config import GeneratorConfig, MLMConfig, NCEConfig, RTDConfig
from xfer.electra.heads import GeneratorHead
from xfer.electra.model import MaskedGenerator, TwoTower, generator_encoder_config
from xfer.electra.objective import ElectricObjective, MLMObjective, RTDObjective, SpecialTokens
from xfer.transformer.presets import preset

TOKENS = SpecialTokens(pad=0, cls=2, sep=3, mask=4)
SPECIAL = torch.tensor([2, 3, 4])
VOCAB = 300


def config(**overrides):
    return preset("tiny", vocab_size=VOCAB, num_layers=2, hidden_dropout=0.0, attention_dropout=0.0, **overrides)


def packed_batch(lengths: list[int], seed: int = 0, width: int = 128) -> dict[str, torch.Tensor]:
    """[CLS] a [SEP] b [SEP] sequences of the given lengths, right-padded to `width`."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    types = torch.zeros_like(ids)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(5, VOCAB, (n,), generator=g)
        ids[row, 0], ids[row, n // 2], ids[row, n - 1] = 2, 3, 3
        types[row, n // 2 + 1 : n] = 1
        mask[row, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


# --- masking ---------------------------------------------------------------------------------------


def test_mask_count_is_fixed_capped_and_only_on_candidates() -> None:
    assert masking.max_predictions(0.15, 128) == 19
    batch = packed_batch([128, 100, 40, 7, 4])
    torch.manual_seed(0)
    selection = masking.select(batch["input_ids"], batch["attention_mask"], SPECIAL, 0.15, 19)
    # round(0.15 n) capped at 19, at least 1, never more than the candidates (n - 3 here)
    assert selection.count.tolist() == [19, 15, 6, 1, 1]
    chosen_ids = batch["input_ids"].reshape(-1)[selection.flat]
    assert not torch.isin(chosen_ids, torch.tensor([0, 2, 3, 4])).any(), "never pad, [CLS], [SEP] or [MASK]"
    assert selection.chosen.sum(-1).tolist() == selection.count.tolist(), "distinct positions"
    assert (selection.rows == selection.flat // 128).all()
    empty = packed_batch([3])  # [CLS] [SEP] [SEP]: nothing to mask
    none = masking.select(empty["input_ids"], empty["attention_mask"], SPECIAL, 0.15, 19)
    assert none.count.tolist() == [0] and none.flat.numel() == 0


def test_positions_are_uniform_over_candidates() -> None:
    batch = packed_batch([20] * 4000)
    torch.manual_seed(1)
    selection = masking.select(batch["input_ids"], batch["attention_mask"], SPECIAL, 0.15, 19)
    frequency = selection.chosen.float().mean(0)[:20]
    candidates = [t for t in range(20) if t not in (0, 10, 19)]
    expected = 3 / 17  # round(0.15 * 20) = 3 of the 17 candidates
    assert torch.allclose(frequency[candidates], torch.full((17,), expected), atol=0.02)
    assert frequency[[0, 10, 19]].sum() == 0


def test_electra_generator_input_is_85_percent_mask_15_unchanged_never_random() -> None:
    batch = packed_batch([128] * 200)
    torch.manual_seed(2)
    selection = masking.select(batch["input_ids"], batch["attention_mask"], SPECIAL, 0.15, 19)
    shown = masking.electra_generator_input(batch["input_ids"], selection, 4, 0.85)
    original = batch["input_ids"].reshape(-1)[selection.flat]
    seen = shown.reshape(-1)[selection.flat]
    masked = (seen == 4).float().mean().item()
    assert abs(masked - 0.85) < 0.02
    assert bool(((seen == 4) | (seen == original)).all()), "no random-token replacement"
    untouched = ~selection.chosen
    assert torch.equal(shown[untouched], batch["input_ids"][untouched])


def test_bert_input_is_80_10_10() -> None:
    batch = packed_batch([128] * 200)
    torch.manual_seed(3)
    selection = masking.select(batch["input_ids"], batch["attention_mask"], SPECIAL, 0.15, 19)
    shown = masking.bert_input(batch["input_ids"], selection, 4, VOCAB).reshape(-1)[selection.flat]
    original = batch["input_ids"].reshape(-1)[selection.flat]
    as_mask = (shown == 4).float().mean().item()
    unchanged = (shown == original).float().mean().item()
    assert abs(as_mask - 0.8) < 0.02 and abs(unchanged - 0.1 - 0.1 / VOCAB) < 0.02
    assert abs(1 - as_mask - unchanged - 0.1) < 0.02, "~10% random tokens"


def test_sampling_draws_from_the_softmax_in_fp32() -> None:
    logits = torch.tensor([[2.0, 0.0, -1.0, 1.0]]).expand(40000, -1).to(torch.bfloat16)
    torch.manual_seed(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        draws = sampling.sample_softmax(logits)
    frequency = torch.bincount(draws, minlength=4).float() / draws.numel()
    assert torch.allclose(frequency, torch.softmax(logits[0].float(), -1), atol=0.01)
    with_temperature = sampling.sample_softmax(torch.tensor([[2.0, 0.0]]).expand(40000, -1), temperature=2.0)
    assert abs((with_temperature == 0).float().mean().item() - torch.sigmoid(torch.tensor(1.0)).item()) < 0.01


def test_two_level_sampling_never_draws_zero_mass_and_reaches_every_block() -> None:
    """Ids of probability zero (-inf logits, the padding of the last block) are never drawn, and a
    rare id in the padded last block is (relative mass 4.5e-5, 200k draws: ~9 expected)."""
    vocab = 3 * sampling.BLOCK + 5
    logits = torch.full((vocab,), float("-inf"))
    logits[[0, sampling.BLOCK - 1, sampling.BLOCK, 2 * sampling.BLOCK + 3, vocab - 1]] = torch.tensor(
        [0.0, -1.0, 1.0, -2.0, 0.5]
    )
    torch.manual_seed(5)
    draws = sampling.sample_softmax(logits.expand(100_000, -1))
    assert torch.isfinite(logits[draws]).all() and draws.max() < vocab, "drew an id of probability zero"
    frequency = torch.bincount(draws, minlength=vocab).float() / draws.numel()
    assert torch.allclose(frequency, torch.softmax(logits, -1), atol=0.01)
    rare = torch.full((vocab,), float("-inf"))
    rare[0], rare[vocab - 1] = 10.0, 0.0
    counts = torch.bincount(sampling.sample_softmax(rare.expand(200_000, -1)), minlength=vocab)
    assert counts[vocab - 1] > 0 and counts[0] + counts[vocab - 1] == counts.sum()


def test_fused_generator_loss_matches_cross_entropy_and_its_gradient() -> None:
    torch.manual_seed(6)
    logits = (torch.randn(37, 700) * 4).requires_grad_()
    targets = torch.randint(700, (37,))
    step = sampling.generator_loss_and_sample(logits, targets)
    step.loss.backward()
    fused_grad = logits.grad.clone()
    logits.grad = None
    reference = F.cross_entropy(logits, targets)
    reference.backward()
    assert torch.allclose(step.loss, reference, atol=1e-5)
    assert torch.allclose(fused_grad, logits.grad, atol=1e-6)
    assert step.sampled.shape == (37,) and not step.sampled.requires_grad
    assert step.accuracy.item() == pytest.approx(100.0 * (logits.argmax(-1) == targets).float().mean().item())
    with torch.autocast("cpu", dtype=torch.bfloat16):  # bf16 logits: loss in fp32, gradient in bf16
        half = logits.detach().bfloat16().requires_grad_()
        out = sampling.generator_loss_and_sample(half, targets)
    out.loss.backward()
    assert out.loss.dtype == torch.float32 and half.grad.dtype == torch.bfloat16
    assert torch.allclose(out.loss, F.cross_entropy(half.float(), targets), atol=1e-5)


def _projection_case(rows: int = 29, vocab: int = 700, dim: int = 16):
    torch.manual_seed(11)
    features = torch.randn(rows, dim, requires_grad=True)
    weight = (torch.randn(vocab, dim) * 0.5).requires_grad_()
    bias = (torch.randn(vocab) * 0.1).requires_grad_()
    return features, weight, bias, torch.randint(vocab, (rows,))


@pytest.mark.parametrize("bf16", [False, True])
def test_fused_projection_matches_linear_then_cross_entropy(bf16: bool) -> None:
    """The projection fused into the loss (with workspace buffers) gives F.linear + cross-entropy's
    loss and gradients for features, embeddings and bias, in fp32 and under bf16 autocast."""
    features, weight, bias, targets = _projection_case()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        step = sampling.generator_step_from_features(features, weight, bias, targets, sampling.OutputWorkspace())
    step.loss.backward()
    fused = [features.grad, weight.grad, bias.grad]
    for tensor in (features, weight, bias):
        tensor.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = F.linear(features, weight, bias)
    reference = F.cross_entropy(logits.float(), targets)
    reference.backward()
    tolerance = 2e-2 if bf16 else 1e-5
    assert step.loss.dtype == torch.float32 and torch.allclose(step.loss, reference, atol=tolerance)
    for mine, theirs in zip(fused, [features.grad, weight.grad, bias.grad], strict=True):
        assert mine.dtype == theirs.dtype == torch.float32
        assert torch.allclose(mine, theirs, atol=tolerance * 0.1, rtol=tolerance)
    assert step.accuracy.item() == pytest.approx(100.0 * (logits.argmax(-1) == targets).float().mean().item())


def test_fused_projection_reuses_its_buffers_and_refuses_an_interleaved_backward() -> None:
    features, weight, bias, targets = _projection_case()
    workspace = sampling.OutputWorkspace()
    first = sampling.generator_step_from_features(features, weight, bias, targets, workspace)
    pointer = workspace.get("exp", 1, 3 * sampling.BLOCK, torch.float32, features.device).data_ptr()
    second = sampling.generator_step_from_features(features, weight, bias, targets, workspace)
    assert workspace.get("exp", 1, 3 * sampling.BLOCK, torch.float32, features.device).data_ptr() == pointer
    second.loss.backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        first.loss.backward()  # its saved exponentials were overwritten by the second forward


def test_fused_projection_samples_follow_the_softmax() -> None:
    weight = torch.eye(5)
    logits = torch.tensor([1.0, 0.0, 2.0, -1.0, 0.5])
    features = logits.repeat(40000, 1)  # features @ I = the logits
    torch.manual_seed(8)
    step = sampling.generator_step_from_features(
        features, weight, torch.zeros(5), torch.zeros(40000, dtype=torch.long), sampling.OutputWorkspace()
    )
    frequency = torch.bincount(step.sampled, minlength=5).float() / step.sampled.numel()
    assert torch.allclose(frequency, torch.softmax(logits, -1), atol=0.01)


def test_fused_generator_samples_follow_the_softmax() -> None:
    logits = torch.tensor([[1.0, 0.0, 2.0, -1.0, 0.5]]).repeat(40000, 1)
    torch.manual_seed(7)
    draws = sampling.generator_loss_and_sample(logits, torch.zeros(40000, dtype=torch.long)).sampled
    frequency = torch.bincount(draws, minlength=5).float() / draws.numel()
    assert torch.allclose(frequency, torch.softmax(logits[0], -1), atol=0.01)
    hot = sampling.generator_loss_and_sample(logits, torch.zeros(40000, dtype=torch.long), temperature=0.25).sampled
    assert abs((hot == 2).float().mean().item() - torch.softmax(logits[0] / 0.25, -1)[2].item()) < 0.01


# --- ELECTRA -----------------------------------------------------------------------------------------


def test_generator_is_narrow_same_depth_and_shares_the_whole_embedding_block() -> None:
    disc = preset("electra-small", vocab_size=VOCAB)
    gen = generator_encoder_config(disc, GeneratorConfig())
    assert (gen.hidden_size, gen.intermediate_size, gen.num_heads, gen.num_layers) == (64, 256, 1, 12)
    assert gen.embedding_size == 128
    objective = RTDObjective(config(), TOKENS, 128, RTDConfig())
    generator = objective.generator
    assert isinstance(generator, MaskedGenerator)
    assert generator.encoder.embeddings is objective.discriminator.embeddings, "token, position, type + LayerNorm"
    assert generator.encoder.embeddings_project is not objective.discriminator.embeddings_project
    untied = RTDObjective(config(), TOKENS, 128, RTDConfig(generator=GeneratorConfig(tie_embeddings=False)))
    assert untied.generator.encoder.embeddings is not untied.discriminator.embeddings


def test_generator_output_embeddings_are_its_input_embeddings() -> None:
    objective = RTDObjective(config(), TOKENS, 128, RTDConfig())
    word = objective.discriminator.embeddings.word.weight
    head = objective.generator.head
    rows = torch.randn(3, objective.generator.encoder.config.hidden_size)
    expected = F.linear(head.norm(F.gelu(head.dense(rows))), word, head.bias)
    assert torch.allclose(head(rows, word), expected)
    assert not any(p.shape == word.shape for p in head.parameters()), "no separate output matrix"


def test_generator_logits_only_at_masked_positions(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    features = GeneratorHead.features

    def spy(self, hidden):
        seen.append(hidden.shape[0])
        return features(self, hidden)

    monkeypatch.setattr(GeneratorHead, "features", spy)
    objective = RTDObjective(config(), TOKENS, 128, RTDConfig())
    batch = packed_batch([128, 60, 9])
    torch.manual_seed(5)
    objective(batch)
    assert seen == [19 + 9 + 1], "softmax rows = masked positions only, not every token"


@pytest.mark.parametrize(("gen_weight", "disc_weight"), [(1.0, 50.0), (2.0, 10.0)])
def test_loss_is_weighted_generator_mlm_plus_weighted_detection(gen_weight: float, disc_weight: float) -> None:
    objective = RTDObjective(config(), TOKENS, 128, RTDConfig(gen_weight=gen_weight, disc_weight=disc_weight))
    torch.manual_seed(6)
    out = objective(packed_batch([128, 77]))
    expected = gen_weight * out.metrics["gen_loss"] + disc_weight * out.metrics["main_loss"]
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-6)


def test_replaced_labels_are_exactly_where_the_sample_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Half the samples equal the original token, half differ: only the differing ones are positives."""
    objective = RTDObjective(config(), TOKENS, 128, RTDConfig())
    batch = packed_batch([128, 64])
    captured: dict[str, torch.Tensor] = {}

    def half_right(self, batch_, selection, originals):
        wanted = torch.where(originals == 5, 6, 5)  # a different token ...
        wanted[::2] = originals[::2]  # ... except at every other position
        captured["flat"], captured["differs"] = selection.flat, wanted != originals
        logits = torch.full((originals.numel(), VOCAB), -1e4)
        logits[torch.arange(originals.numel()), wanted] = 1e4
        return sampling.generator_loss_and_sample(logits, originals)

    monkeypatch.setattr(RTDObjective, "_generate", half_right)
    labels_seen: dict[str, torch.Tensor] = {}
    bce = F.binary_cross_entropy_with_logits

    def spy(logits: torch.Tensor, labels: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        labels_seen["y"] = labels
        return bce(logits, labels, *args, **kwargs)

    monkeypatch.setattr(F, "binary_cross_entropy_with_logits", spy)
    objective(batch)
    real = batch["attention_mask"].reshape(-1).nonzero().squeeze(1)
    expected = torch.zeros(batch["input_ids"].numel())
    expected[captured["flat"][captured["differs"]]] = 1.0
    assert torch.equal(labels_seen["y"], expected[real])
    assert 0 < captured["differs"].sum() < captured["differs"].numel()


def test_discriminator_loss_never_reaches_generator_weights() -> None:
    objective = RTDObjective(config(), TOKENS, 128, RTDConfig(gen_weight=0.0))
    batch = packed_batch([128, 90])
    torch.manual_seed(7)
    objective(batch).loss.backward()
    own = [p for n, p in objective.generator.named_parameters() if not n.startswith("encoder.embeddings.")]
    assert all(p.grad is None or not p.grad.any() for p in own), "disc -> generator gradient"
    assert objective.discriminator.embeddings.word.weight.grad.any(), "the shared embeddings do learn"


def test_a_sample_equal_to_the_original_is_labelled_real(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force the generator's samples to be the original tokens: nothing is 'replaced'."""
    objective = RTDObjective(config(), TOKENS, 128, RTDConfig())
    batch = packed_batch([128, 64])

    def perfect(self, batch_, selection, originals):
        logits = torch.full((originals.numel(), VOCAB), -1e4)
        logits[torch.arange(originals.numel()), originals] = 1e4
        return sampling.generator_loss_and_sample(logits, originals)

    monkeypatch.setattr(RTDObjective, "_generate", perfect)
    out = objective(batch)
    assert out.metrics["replaced"].item() == 0.0 and out.metrics["sampled_accuracy"].item() == 100.0
    assert out.metrics["disc_recall"].item() == 0.0  # no positives at all


def test_discriminator_loss_is_bce_over_every_real_token(monkeypatch: pytest.MonkeyPatch) -> None:
    objective = RTDObjective(config(), TOKENS, 128, RTDConfig())
    batch = packed_batch([128, 50])
    rows_seen: list[int] = []
    head_forward = type(objective.head).forward

    def spy(self, hidden):
        rows_seen.append(hidden.shape[0])
        return head_forward(self, hidden)

    monkeypatch.setattr(type(objective.head), "forward", spy)
    objective(batch)
    assert rows_seen == [178], "every non-pad token, [CLS]/[SEP] included, no padding"
    fifteen = RTDObjective(config(), TOKENS, 128, RTDConfig(variant="electra_15"))
    rows_seen.clear()
    fifteen(batch)
    assert rows_seen == [19 + 8], "ELECTRA-15%: only the masked positions"


# --- the MLM baseline --------------------------------------------------------------------------------


def test_mlm_baseline_predicts_only_masked_positions_with_tied_softmax() -> None:
    objective = MLMObjective(config(), TOKENS, 128, MLMConfig())
    batch = packed_batch([128, 31])
    torch.manual_seed(8)
    out = objective(batch)
    torch.manual_seed(8)
    selection = objective.select(batch)
    assert selection.flat.numel() == 19 + 5  # round(0.15 * 31) = 5
    assert out.loss.item() == pytest.approx(math.log(VOCAB), rel=0.05), "untrained: ~uniform over the vocabulary"
    assert objective.exports()["discriminator"]["head"] is objective.mlm.head


# --- Electric -------------------------------------------------------------------------------------------


def test_two_tower_prediction_at_t_never_sees_token_t() -> None:
    torch.manual_seed(9)
    tower = TwoTower(config(), shared=None).eval()
    batch = packed_batch([40, 25], seed=1)
    ids, mask, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    every = mask.reshape(-1).nonzero().squeeze(1)
    base = tower.logits_at(ids, mask, types, every)
    for t in (1, 7, 20, 38):
        changed = ids.clone()
        changed[0, t] = (changed[0, t] + 17) % (VOCAB - 5) + 5
        after = tower.logits_at(changed, mask, types, every)
        diff = (after - base).abs().amax(-1)[:40]
        assert diff[t] == 0, f"q at {t} depends on token {t}"
        assert diff[t - 1] > 0 and diff[t + 1] > 0, "neighbours do see it (from the right and from the left)"
        assert torch.equal(after[40:], base[40:]), "other sequences are unaffected"


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_electric_nce_correction_and_all_replaced_positions_are_noise(
    monkeypatch: pytest.MonkeyPatch, temperature: float
) -> None:
    """The correction is log q of the distribution the noise is drawn from: with a sampling
    temperature, softmax(log q / T) (it added log q at T = 1 while sampling at T)."""
    settings = NCEConfig()
    settings.generator.temperature = temperature
    objective = ElectricObjective(config(), TOKENS, 128, settings)
    batch = packed_batch([128, 41])
    captured: dict[str, torch.Tensor] = {}
    bce = F.binary_cross_entropy_with_logits

    def spy(logits, labels, *args, **kwargs):
        captured["logits"], captured["labels"] = logits.detach(), labels
        return bce(logits, labels, *args, **kwargs)

    monkeypatch.setattr(F, "binary_cross_entropy_with_logits", spy)
    monkeypatch.setattr(objective_module, "sample_softmax", lambda logits, temperature=1.0: logits.argmax(-1) * 0 + 7)
    torch.manual_seed(10)
    out = objective(batch)
    torch.manual_seed(10)
    selection = objective.select(batch, rounding="ceil")
    # k = ceil(0.15 n) (METHODS.md), 20 at n = 128: ELECTRA's masking cap (19 at 128) cut it to 19
    assert selection.count.tolist() == [math.ceil(0.15 * 128), math.ceil(0.15 * 41)] == [20, 7]
    real = batch["attention_mask"].reshape(-1).nonzero().squeeze(1)
    noised = batch["input_ids"].reshape(-1).index_copy(0, selection.flat, torch.full_like(selection.flat, 7))
    labels = torch.zeros(batch["input_ids"].numel(), dtype=torch.bool)
    labels[selection.flat] = True
    assert torch.equal(captured["labels"], labels[real].float()), "every replaced position is noise"
    with torch.no_grad():
        log_q = (
            objective.generator.logits_at(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], real)
            .float()
            .log_softmax(-1)
        )
        log_q = (log_q / temperature).log_softmax(-1)  # the noise distribution
        energy = objective.energy(noised.view_as(batch["input_ids"]), batch, real)
    k = selection.count.float()
    n = batch["attention_mask"].sum(-1).float()
    correction = (k / (n - k)).log()[real // 128]
    expected = energy + log_q.gather(1, noised[real][:, None]).squeeze(1) + correction
    assert torch.allclose(captured["logits"], expected, atol=1e-5), "noise logit = E + log(k q / (n - k))"
    assert out.metrics["replaced"].item() == pytest.approx(100.0 * labels.sum().item() / real.numel())


def test_electrics_noise_count_is_the_exact_ceiling() -> None:
    """k = ceil(0.15 n) was taken of a float32 product: 0.15 x 100 = 15.000001 gave 16 (8 lengths in
    1-512 were one too many)."""
    lengths = [100, 101, 99, 41, 20]
    ids = torch.full((len(lengths), 110), 5)
    mask = (torch.arange(110)[None] < torch.tensor(lengths)[:, None]).long()
    selection = masking.select(ids * mask, mask, SPECIAL, 0.15, 200, rounding="ceil")
    assert selection.count.tolist() == [15, 16, 15, 7, 3]


def test_a_collapsed_discriminator_is_reported_and_a_learning_one_is_not() -> None:
    """The stage warns when detection ends at the base rate (loss = entropy of the replaced share, AUC ~50)."""
    from xfer.electra.stage import detection_collapse

    def row(step: int, loss: float, auc: float) -> dict:
        return {"step": step, "split": "train", "main_loss": loss, "replaced": 14.0, "disc_auc": auc}

    base = -(0.14 * math.log(0.14) + 0.86 * math.log(0.86))  # 0.405
    collapsed = [row(s, base - 0.002, 54.0) for s in (100, 150, 200)]
    assert "collapsed" in detection_collapse(collapsed) and "up to step 200" in detection_collapse(collapsed)
    assert detection_collapse([*collapsed[:2], row(200, 0.30, 85.0)]) is None  # recovered at the end
    assert detection_collapse([row(s, 0.25, 90.0) for s in (100, 150, 200)]) is None
    assert detection_collapse(collapsed[:2]) is None  # too few rows to judge


def test_a_collapse_in_the_unigram_phase_says_to_train_longer() -> None:
    """With the generator's loss at the corpus's unigram entropy, the advice is more steps, not a lower lr."""
    from xfer.electra.stage import detection_collapse, unigram_entropy

    assert unigram_entropy(np.array([1.0, 1.0, 0.0, 2.0])) == pytest.approx(
        -(2 * 0.25 * math.log(0.25) + 0.5 * math.log(0.5))
    )
    assert unigram_entropy(np.zeros(3)) is None
    base = -(0.14 * math.log(0.14) + 0.86 * math.log(0.86))
    rows = [
        {"step": s, "main_loss": base, "replaced": 14.0, "disc_auc": 55.0, "gen_loss": 6.8} for s in (100, 150, 200)
    ]
    in_phase = detection_collapse(rows, unigram_entropy=6.85)
    assert "unigram entropy (6.85)" in in_phase and "more steps" in in_phase
    past_phase = detection_collapse(rows, unigram_entropy=8.0)  # the generator already beats the unigram model
    assert "generator uses context" in past_phase and "neither network" not in past_phase
    assert "unigram entropy" not in detection_collapse(rows)  # a stream: no counts, no claim
    assert "more steps" in detection_collapse(rows) and "train.lr" not in detection_collapse(rows)


def test_token_spread_tells_a_collapsed_encoder_from_a_working_one() -> None:
    """The probe is ~0 when every token's final hidden state is the same vector (the final
    LayerNorm's gain zeroed: every row is its bias) and well above the collapse threshold for a fresh
    encoder; it runs in eval mode, restores training mode and draws no random numbers (training
    stays reproducible), and fits an encoder with fewer positions than its 64 tokens."""
    from xfer.transformer.collapse import REPRESENTATION_COLLAPSE, encoder_token_spread, token_spread
    from xfer.transformer.encoder import Encoder

    ordinary = torch.arange(5, VOCAB)
    encoder = Encoder(preset("tiny", vocab_size=VOCAB, num_layers=2))  # with dropout, in training mode
    torch.manual_seed(0)
    state = torch.get_rng_state()
    healthy = encoder_token_spread(encoder, ordinary)
    assert healthy > 0.3 > REPRESENTATION_COLLAPSE and healthy == encoder_token_spread(encoder, ordinary)
    assert encoder.training and torch.equal(torch.get_rng_state(), state)
    with torch.no_grad():
        encoder.layers[-1].ffn_norm.weight.zero_()
        encoder.layers[-1].ffn_norm.bias.normal_()
    assert encoder_token_spread(encoder, ordinary) < 1e-5
    encoder.train()
    assert encoder_token_spread(Encoder(config(max_position_embeddings=16)), ordinary) > 0.3
    rows = torch.randn(50, 8)
    assert token_spread(rows).item() == pytest.approx(
        ((rows - rows.mean(0)).norm(dim=1).mean() / rows.norm(dim=1).mean()).item()
    )


def _spread_rows(spreads: dict[int, float], loss: float = 0.405) -> list[dict]:
    return [
        {"step": s, "main_loss": loss, "replaced": 14.0, "disc_auc": 50.1, "gen_loss": 6.0, "token_spread": v}
        for s, v in spreads.items()
    ]


def test_a_representation_collapse_is_told_apart_and_not_advised_more_steps() -> None:
    """An encoder whose tokens all map to one vector gets its own message (when it started, do not
    fine-tune it, another seed) instead of the "train longer" advice, which did not help it."""
    from xfer.electra.stage import detection_collapse, representation_collapse

    rows = _spread_rows({100: 0.5, 150: 0.2, 200: 4e-4, 250: 0.009, 300: 3e-4, 350: 1e-4, 400: 2e-5})
    message = representation_collapse(rows)
    assert message and "since step 300 (up to step 400)" in message and "2.0e-05" in message
    assert "another seed" in message and "do not fine-tune" in message and "AUC 50.1" in message
    assert detection_collapse(rows, unigram_entropy=6.85) == message  # not "train for more steps"
    assert "more steps" in detection_collapse(_spread_rows({100: 0.5, 150: 0.4, 200: 0.45}), unigram_entropy=6.85)
    assert representation_collapse(_spread_rows({100: 1e-4, 150: 1e-4, 200: 0.3})) is None  # recovered
    assert representation_collapse(_spread_rows({100: 1e-4, 150: 1e-4})) is None  # too few rows to judge
    # early pre-training of the collapsed run went this low and was not (yet) a collapse
    assert representation_collapse(_spread_rows({600: 0.014, 650: 0.009, 700: 0.009, 750: 0.009})) is None
    assert representation_collapse([{k: v for k, v in r.items() if k != "token_spread"} for r in rows]) is None


def test_the_collapse_watch_logs_the_spread_warns_once_and_passes_every_event_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from xfer.electra.stage import CollapseWatch

    class Recorder:
        host = "the host"

        def __init__(self) -> None:
            self.calls: list[tuple] = []

        def log(self, step: int, split: str, metrics: dict) -> None:
            self.calls.append(("log", step, split, metrics.get("token_spread")))

        def checkpoint_saved(self, step: int, path: object) -> None:
            self.calls.append(("checkpoint", step))

        def resumed(self, step: int) -> None:
            self.calls.append(("resumed", step))

    probed = iter([0.5, 5e-4, 4e-4, 3e-4, 2e-4])
    inner = Recorder()
    watch = CollapseWatch(inner, lambda: next(probed))
    watch.resumed(50)
    for step in (100, 150, 200):
        watch.log(step, "train", {"loss": 1.0})
    assert not watch.warned and capsys.readouterr().err == ""
    watch.log(225, "dev", {"accuracy": 1.0})  # only training logs are probed and count
    assert not watch.warned
    for step in (250, 300):
        watch.log(step, "train", {"loss": 1.0})
    err = capsys.readouterr().err
    assert watch.warned and err.count("warning: step 250:") == 1 and "since step 150" in err
    watch.checkpoint_saved(300, "ckpt")
    assert watch.host == "the host"
    assert inner.calls == [
        ("resumed", 50),
        ("log", 100, "train", 0.5),
        ("log", 150, "train", 5e-4),
        ("log", 200, "train", 4e-4),
        ("log", 225, "dev", None),
        ("log", 250, "train", 3e-4),
        ("log", 300, "train", 2e-4),
        ("checkpoint", 300),
    ]
    assert capsys.readouterr().err == ""  # once per run
    assert watch.stop_requested() is None  # the default warns and trains on


def test_the_collapse_watch_told_to_stop_asks_the_trainer_to_instead_of_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from xfer.electra.stage import CollapseWatch

    class Quiet:
        def log(self, step: int, split: str, metrics: dict) -> None:
            pass

    probed = iter([5e-4, 4e-4, 3e-4])
    watch = CollapseWatch(Quiet(), lambda: next(probed), stop=True)
    for step in (100, 150):
        watch.log(step, "train", {"loss": 1.0})
        assert watch.stop_requested() is None
    watch.log(200, "train", {"loss": 1.0})
    reason = watch.stop_requested()
    assert reason is not None and "(on_collapse: stop) at step 200: the encoder's representations collapsed" in reason
    assert "since step 100" in reason and "--force" in reason
    assert capsys.readouterr().err == ""  # the stop's error says it; no warning besides


def test_diverged_logits_still_sample_ids_inside_the_vocabulary() -> None:
    """NaN logits (a diverged run) must reach the trainer's non-finite-loss check, not an
    out-of-range embedding lookup: every id stays below the vocabulary size (not a multiple of
    the block)."""
    vocab = sampling.BLOCK + 3
    logits = torch.full((64, vocab), float("nan"))
    assert int(sampling.sample_softmax(logits).max()) < vocab
    step = sampling.generator_loss_and_sample(logits, torch.zeros(64, dtype=torch.long))
    assert int(step.sampled.max()) < vocab and not torch.isfinite(step.loss)


def test_fused_generator_loss_refuses_a_second_backward_instead_of_a_wrong_gradient() -> None:
    """Its backward reuses the saved buffer in place; autograd's version check must catch a retained
    graph run twice."""
    logits = torch.randn(5, 300, requires_grad=True)
    step = sampling.generator_loss_and_sample(logits, torch.randint(300, (5,)))
    step.loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        step.loss.backward()


def test_detection_metrics_match_sklearn_with_ties() -> None:
    """AUC with tied logits is sklearn's (average ranks): constant logits score 50 wherever the
    replaced tokens sit (first-come ranks gave anything from 0 to 100); bf16 logits tie often."""
    from sklearn.metrics import accuracy_score, precision_score, recall_score, roc_auc_score

    from xfer.electra.objective import detection_metrics

    labels = torch.zeros(200, dtype=torch.bool)
    labels[:30] = True
    for replaced in (labels, labels.flip(0)):
        assert detection_metrics(torch.zeros(200), replaced)["disc_auc"].item() == pytest.approx(50.0)
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        replaced = torch.rand(300, generator=generator) < 0.15
        logits = torch.randint(-3, 4, (300,), generator=generator).float() + replaced * 0.5  # many ties
        got = detection_metrics(logits, replaced)
        y, score = replaced.numpy(), logits.numpy()
        assert got["disc_auc"].item() == pytest.approx(100 * roc_auc_score(y, score), abs=1e-4)
        assert got["disc_accuracy"].item() == pytest.approx(100 * accuracy_score(y, score > 0), abs=1e-4)
        assert got["disc_precision"].item() == pytest.approx(100 * precision_score(y, score > 0), abs=1e-4)
        assert got["disc_recall"].item() == pytest.approx(100 * recall_score(y, score > 0), abs=1e-4)
    assert detection_metrics(torch.randn(50), torch.zeros(50, dtype=torch.bool))["disc_auc"].item() == 50.0

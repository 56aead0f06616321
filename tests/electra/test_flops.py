"""The analytic FLOP count (`xfer.electra.flops`) against torch's FlopCounterMode on real steps.

FlopCounterMode has no formula for the in-place `baddbmm_` the CPU attention kernel uses, so the
counter is given the same formula as `baddbmm` for it; then it sees every product the step does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

from xfer.electra.config import GeneratorConfig, MLMConfig, NCEConfig, RTDConfig
from xfer.electra.flops import Arch, training_flops
from xfer.electra.model import generator_encoder_config
from xfer.electra.objective import ElectricObjective, MLMObjective, RTDObjective, SpecialTokens
from xfer.transformer.presets import preset

from .test_objectives import TOKENS, packed_batch

IN_PLACE = {
    torch.ops.aten.baddbmm_: lambda self_shape, a, b, *args, out_shape=None, **kwargs: flop_counter.bmm_flop(a, b)
}

CASES = [
    ("electra.rtd", RTDObjective, RTDConfig()),
    ("electra.rtd", RTDObjective, RTDConfig(generator=GeneratorConfig(kind="two_tower"))),
    ("electra.rtd", RTDObjective, RTDConfig(variant="all_tokens_mlm")),
    ("electra.mlm", MLMObjective, MLMConfig()),
    ("electric.nce", ElectricObjective, NCEConfig()),
]


def measured_and_analytic(name, cls, settings, lengths):
    encoder = preset("tiny", vocab_size=500, embedding_size=64, num_layers=1, hidden_dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    objective = cls(encoder, SpecialTokens(**vars(TOKENS)), 128, settings)
    batch = packed_batch(list(lengths))
    batch["input_ids"] = batch["input_ids"] % 500
    with FlopCounterMode(display=False, custom_mapping=IN_PLACE) as counter:
        objective(batch).loss.backward()
    generator = getattr(settings, "generator", None)
    gen = Arch.of(generator_encoder_config(encoder, generator)) if generator and generator.kind != "uniform" else None
    parts = training_flops(settings, Arch.of(encoder), gen, np.asarray(lengths), 128)
    return counter.get_total_flops(), len(lengths) * sum(parts.values())


@pytest.mark.parametrize(("name", "cls", "settings"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_analytic_flops_match_the_counter_within_5_percent(name, cls, settings) -> None:
    measured, analytic = measured_and_analytic(name, cls, settings, [128] * 4)
    assert analytic == pytest.approx(measured, rel=0.01), "full-length batches: every product accounted for"
    # packed data: mostly full sequences, a few short ones (short_seq_prob). The attention kernel pads
    # the sequences of a length bucket, work the analytic count (real tokens only) leaves out.
    measured, analytic = measured_and_analytic(name, cls, settings, [128, 128, 77, 128, 128, 121, 128, 19])
    assert analytic == pytest.approx(measured, rel=0.05)


def test_xfer_flops_prints_each_pretraining_stage(tmp_path, capsys) -> None:
    from xfer.core import cli
    from xfer.core.plugins import set_default_host
    from xfer.testing import make_host, write_recipe

    recipe = write_recipe(
        tmp_path,
        """
stages:
  corpus: {kind: toy.corpus, sentences: 10}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 1000}
  electra: {kind: electra.pretrain, corpus: {files: corpus.text}, tokenizer: vocab.tokenizer, model: tiny,
            budget: {flops: 1e13}}
  mlm: {kind: electra.pretrain, corpus: {files: corpus.text}, tokenizer: vocab.tokenizer, model: tiny,
        objective: electra.mlm, budget: {flops: 1e13}}
""",
    )
    set_default_host(make_host(autoload=True))
    try:
        assert cli.main(["flops", str(recipe), "--json"]) == 0
    finally:
        set_default_host(None)
    electra, mlm = __import__("json").loads(capsys.readouterr().out)
    assert electra["vocab_size"] == mlm["vocab_size"] == 1000, "the vocab stage's size"
    assert electra["flops_total"] <= 1e13 < electra["flops_total"] + electra["flops_per_step"]
    assert mlm["steps"] > electra["steps"], "MLM is cheaper per step: more steps for the same compute"
    assert set(electra["per_step"]) == {
        "generator",
        "generator softmax (masked positions)",
        "discriminator",
        "discriminator head",
    }


def test_xfer_flops_with_epochs_says_the_steps_come_from_the_corpus(tmp_path, capsys) -> None:
    """`train.epochs` alone: the step count needs the packed corpus, so no made-up total (it was 0)."""
    from xfer.core import cli
    from xfer.core.plugins import set_default_host
    from xfer.testing import make_host, write_recipe

    recipe = write_recipe(
        tmp_path,
        """
stages:
  corpus: {kind: toy.corpus, sentences: 10}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 1000}
  mlm: {kind: electra.pretrain, corpus: {files: corpus.text}, tokenizer: vocab.tokenizer, model: tiny,
        objective: electra.mlm, train: {epochs: 3}}
""",
    )
    plain = write_recipe(tmp_path / "plain", "stages:\n  corpus: {kind: toy.corpus, sentences: 10}\n")
    set_default_host(make_host(autoload=True))
    try:
        assert cli.main(["flops", str(recipe), "--json"]) == 0
        (row,) = __import__("json").loads(capsys.readouterr().out)
        assert cli.main(["flops", str(recipe)]) == 0
        table = capsys.readouterr().out
        assert cli.main(["flops", str(plain), "--json"]) == 0
        assert __import__("json").loads(capsys.readouterr().out) == [], "JSON even without a pre-training stage"
    finally:
        set_default_host(None)
    assert row["steps"] is None and row["flops_total"] is None and row["epochs"] == 3
    assert row["steps_from"] == "train.epochs" and row["flops_per_step"] > 0
    assert "3 epochs (train.epochs): steps known once the corpus is packed" in table


@dataclass
class OwnConfig:
    """A plugin objective's config class of its own: no formula in xfer.electra.flops."""

    mask_prob: float = 0.15


@dataclass
class CountedConfig(OwnConfig):
    """The same, bringing its formula: 1 FLOP per token forward, as one component."""

    def training_flops(self, disc: Arch, gen: Arch | None, n: np.ndarray, max_length: int) -> dict:
        return {"everything": n * 1.0}


@dataclass
class WiderRTDConfig(RTDConfig):
    """A plugin's config built on RTD's."""

    note: str = ""


def test_the_formula_follows_the_config_class_so_plugin_objectives_are_costed() -> None:
    """The formula was chosen by the objective's registered name, so a plugin objective (another
    name) crashed the stage with `no FLOP formula` even when it trained to a number of steps."""
    from xfer.electra.flops import NoFlopFormula

    disc = Arch(hidden=64, layers=1, intermediate=128, embedding=32, vocab=500)
    gen = Arch(hidden=16, layers=1, intermediate=32, embedding=32, vocab=500)
    lengths = np.asarray([128, 64])
    assert training_flops(WiderRTDConfig(), disc, gen, lengths, 128) == training_flops(
        RTDConfig(), disc, gen, lengths, 128
    )
    assert training_flops(CountedConfig(), disc, None, lengths, 128) == {"everything": 3 * 96.0}  # x3: training
    with pytest.raises(NoFlopFormula, match="configured by OwnConfig"):
        training_flops(OwnConfig(), disc, None, lengths, 128)


def test_a_budget_of_exactly_k_steps_buys_k_steps() -> None:
    """`budget // per_step` floored a quotient of rounded floats: a budget of exactly k steps'
    worth (a `flops_total` copied from `xfer flops --json`, i.e. `per_step * k`) bought k - 1
    steps about half the time. A budget a little short of a step still buys one step fewer."""
    from xfer.electra.flops import steps_for_budget
    from xfer.electra.stage_config import Budget

    per_step, tokens_per_step = 1.0791823e10 + 0.37, 64 * 61.234375
    for k in range(1, 300):
        assert steps_for_budget(Budget(flops=per_step * k), per_step, tokens_per_step) == k
        assert steps_for_budget(Budget(tokens=tokens_per_step * k), None, tokens_per_step) == k
        assert steps_for_budget(Budget(flops=per_step * (k + 0.999)), per_step, tokens_per_step) == k
    with pytest.raises(ValueError, match="does not buy one training step"):
        steps_for_budget(Budget(flops=per_step * 0.999), per_step, tokens_per_step)


def test_masked_count_rounds_like_the_masking_it_costs() -> None:
    """The count rounded the float64 product where select() rounds a float32 one, so ties fell the
    other way (n = 190, 350, 390 at 0.15: one masked position fewer costed). Both now take
    `masking.target_count`; the masked positions select() draws are the reference here."""
    from xfer.electra.flops import masked_count
    from xfer.electra.masking import max_predictions, select

    lengths = np.arange(1, 513)
    for mask_prob in (0.15, 0.25, 0.1):
        for rounding in ("round", "ceil"):
            mask = (torch.arange(512)[None] < torch.tensor(lengths)[:, None]).long()
            drawn = select(mask * 7, mask, torch.tensor([1, 2, 3]), mask_prob, 512, rounding).count
            drawn = drawn.clamp(1, max_predictions(mask_prob, 512)).numpy()
            expected = np.minimum(drawn, np.maximum(lengths - 3, 0))
            got = masked_count(lengths.astype(np.float64), mask_prob, 512, rounding)
            assert got.tolist() == expected.tolist(), (mask_prob, rounding)

"""Hostile review of the FLOP count (`xfer.electra.flops`) and `xfer flops`: the count against
what the objectives actually do, and budgets/plugin formulas that gave wrong numbers or tracebacks."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec
from xfer.electra.config import GeneratorConfig, RTDConfig
from xfer.electra.flops import TRAIN_MULTIPLIER, Arch, training_flops
from xfer.electra.model import generator_encoder_config
from xfer.electra.objective import MLMObjective, RTDObjective, SpecialTokens
from xfer.transformer.presets import preset

from .test_flops import IN_PLACE
from .test_objectives import TOKENS, packed_batch


def _drawn(objective: RTDObjective, length: int) -> int:
    """Masked positions the objective draws in one full-length sequence ([CLS] ... [SEP] ... [SEP])."""
    ids = torch.arange(length)[None] % 400 + 10
    ids[0, 0], ids[0, length // 2], ids[0, -1] = TOKENS.cls, TOKENS.sep, TOKENS.sep
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    return int(objective.select(batch).count.item())


@pytest.mark.parametrize("variant", ["electra", "electra_15", "replace_mlm"])
def test_rtd_is_costed_at_the_masked_positions_its_objective_draws(variant: str) -> None:
    """The count costs the masked positions the objective draws, at every length: ELECTRA's cap
    int((p + 0.005) x max_length) (METHODS.md; 9 at 64), which bounds round(p x n) at 32, 50 and 64.
    (Stop 41 raised RTD's cap to ceil(p x max_length) by mistake, beside Electric's, and the count
    did not follow: 9 costed where 10 were drawn at 64.)"""
    encoder = preset("tiny", vocab_size=500)
    disc = Arch.of(encoder)
    gen = Arch.of(generator_encoder_config(encoder, GeneratorConfig()))
    for length in (32, 50, 64, 128, 512):
        for mask_prob in (0.15, 0.25):
            settings = RTDConfig(mask_prob=mask_prob, variant=variant)
            objective = RTDObjective(encoder, SpecialTokens(**vars(TOKENS)), length, settings)
            parts = training_flops(settings, disc, gen, np.full(1, length), length)
            per_position = TRAIN_MULTIPLIER * 2 * (gen.hidden * gen.embedding + gen.embedding * gen.vocab)
            costed = {"generator softmax (masked positions)": parts["generator softmax (masked positions)"]}
            if variant == "electra_15":
                costed["head"] = parts["discriminator head"] / (TRAIN_MULTIPLIER * 2 * (disc.hidden**2 + disc.hidden))
            elif variant == "replace_mlm":
                head = TRAIN_MULTIPLIER * 2 * (disc.hidden * disc.embedding + disc.embedding * disc.vocab)
                costed["head"] = parts["mlm softmax (masked positions)"] / head
            costed["generator softmax (masked positions)"] /= per_position
            drawn = _drawn(objective, length)
            assert costed == pytest.approx(dict.fromkeys(costed, drawn)), (length, mask_prob)


def test_a_short_max_length_rtd_step_is_costed_exactly() -> None:
    """The whole step against torch's counter at max_length 64 (where the cap bounds the count):
    every product is accounted for."""
    encoder = preset("tiny", vocab_size=500, embedding_size=64, num_layers=1, hidden_dropout=0.0, attention_dropout=0.0)
    settings = RTDConfig()
    torch.manual_seed(0)
    objective = RTDObjective(encoder, SpecialTokens(**vars(TOKENS)), 64, settings)
    batch = packed_batch([64] * 4)
    batch["input_ids"] = batch["input_ids"] % 500
    with FlopCounterMode(display=False, custom_mapping=IN_PLACE) as counter:
        objective(batch).loss.backward()
    gen = Arch.of(generator_encoder_config(encoder, settings.generator))
    analytic = 4 * sum(training_flops(settings, Arch.of(encoder), gen, np.full(4, 64), 64).values())
    assert analytic == pytest.approx(counter.get_total_flops(), rel=1e-9)


@dataclass
class OwnFormulaConfig:
    """A plugin objective's config class with its own FLOP formula: `per_token` FLOPs a token."""

    mask_prob: float = 0.15
    mask: float = 0.8
    random: float = 0.1
    per_token: float = 0.0

    def training_flops(self, disc: Arch, gen: Arch | None, n: np.ndarray, max_length: int) -> dict:
        return {"everything": n * self.per_token}


class OwnFormulaMLM(MLMObjective):
    """An MLM configured by `OwnFormulaConfig`."""


class OwnFormulaObjectives:
    @staticmethod
    @hookimpl
    def xfer_objectives():
        return [ComponentSpec("objective", "mine/own-formula", f"{__name__}:OwnFormulaMLM", "1", OwnFormulaConfig)]


@pytest.mark.parametrize(
    ("per_token", "message"),
    [
        ("0.0", "OwnFormulaConfig.training_flops gave 0 FLOPs \\('everything'\\)"),
        ("-1.0", "OwnFormulaConfig.training_flops gave -128 FLOPs for 'everything'.*finite and non-negative"),
    ],
)
def test_a_plugin_formula_without_a_usable_count_is_an_error_naming_it(
    tmp_path, capsys, per_token: str, message: str
) -> None:
    """A config class's own `training_flops` was used as given: all zero made `xfer flops` (and the
    stage) with a FLOP budget a bare ZeroDivisionError traceback, a NaN "cannot convert float NaN to
    integer", a negative count "the budget does not buy one training step (... < -12288 per step)"."""
    from xfer.core import cli
    from xfer.core.plugins import set_default_host
    from xfer.testing import make_host, write_recipe

    recipe = write_recipe(
        tmp_path,
        f"""
stages:
  corpus: {{kind: toy.corpus, sentences: 10}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 1000}}
  own: {{kind: electra.pretrain, corpus: {{files: corpus.text}}, tokenizer: vocab.tokenizer, model: tiny,
        objective: {{name: mine/own-formula, per_token: {per_token}}}, budget: {{flops: 1e13}}}}
""",
    )
    host = make_host(autoload=True)
    host.add_object(OwnFormulaObjectives, "mine")
    set_default_host(host)
    try:
        assert cli.main(["flops", str(recipe), "--json"]) == 2
        captured = capsys.readouterr()
        assert cli.main(["flops", str(recipe), "--json", "stages.own.objective.per_token=2.0"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
    finally:
        set_default_host(None)
    assert captured.out == "" and re.search(message, captured.err), captured.err
    assert row["flops_per_step"] == row["batch_size"] * row["max_length"] * 2.0 * TRAIN_MULTIPLIER


@pytest.mark.parametrize("per_token", [float("nan"), float("inf")])
def test_a_plugin_formula_giving_nan_or_inf_flops_is_an_error_naming_it(per_token: float) -> None:
    """A NaN count made a FLOP budget "cannot convert float NaN to integer", an infinite one "the
    budget does not buy one training step", and both went into report.md as the FLOPs per step."""
    from xfer.core.errors import UserError

    with pytest.raises(UserError, match=f"OwnFormulaConfig.training_flops gave {per_token:g} FLOPs for 'everything'"):
        training_flops(OwnFormulaConfig(per_token=per_token), Arch.of(preset("tiny")), None, np.full(2, 128.0), 128)


@pytest.mark.parametrize(
    ("filename", "text"), [("vocab.txt", ""), ("tokenizer.json", '{"model": {"type": "WordPiece", "vocab": {}}}')]
)
def test_xfer_flops_refuses_a_tokenizer_with_an_empty_vocabulary(tmp_path, capsys, filename: str, text: str) -> None:
    """`planned_encoder` reads a vocabulary size of 0 as "unknown": a tokenizer folder whose
    vocab.txt (or tokenizer.json) holds no token was costed as the preset's 30,522 tokens and
    printed as "vocabulary 30522 (tokenizer)", FLOPs and budget steps with it, exit 0."""
    from xfer.core import cli
    from xfer.core.plugins import set_default_host
    from xfer.testing import make_host, write_recipe

    folder = tmp_path / "tokenizer"
    folder.mkdir()
    (folder / filename).write_text(text)
    recipe = write_recipe(
        tmp_path,
        f"""
stages:
  corpus: {{kind: toy.corpus, sentences: 10}}
  electra: {{kind: electra.pretrain, corpus: {{files: corpus.text}}, tokenizer: {folder}, model: tiny,
            budget: {{flops: 1e13}}}}
""",
    )
    set_default_host(make_host(autoload=True))
    try:
        assert cli.main(["flops", str(recipe), "--json"]) == 2
    finally:
        set_default_host(None)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"stage 'electra': tokenizer: {folder} has an empty vocabulary" in captured.err


def test_xfer_flops_costs_init_from_a_generator_output_at_the_generator_s_size(tmp_path, capsys) -> None:
    """`init: first.generator` (an MLM continuing from an ELECTRA generator, which the stage
    accepts) was costed as `first`'s discriminator: 4x as wide, ~10x the FLOPs per step, so the
    budget's steps were a tenth of the stage's (or "does not buy one training step")."""
    from xfer.core import cli
    from xfer.core.plugins import set_default_host
    from xfer.testing import make_host, write_recipe

    common = "corpus: {files: corpus.text}, tokenizer: vocab.tokenizer, budget: {flops: 1e13}"
    recipe = write_recipe(
        tmp_path,
        f"""
stages:
  corpus: {{kind: toy.corpus, sentences: 10}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 1000}}
  first: {{kind: electra.pretrain, {common}, model: tiny}}
  baseline: {{kind: electra.pretrain, {common}, model: tiny, objective: electra.mlm}}
  from_gen: {{kind: electra.pretrain, corpus: {{files: corpus.text}}, init: first.generator, objective: electra.mlm,
             budget: {{flops: 1e13}}}}
  from_mlm: {{kind: electra.pretrain, corpus: {{files: corpus.text}}, init: baseline.generator,
             objective: electra.mlm, budget: {{flops: 1e13}}}}
  narrow: {{kind: electra.pretrain, {common}, model: tiny, objective: electra.mlm,
           encoder: {{hidden_size: 32, intermediate_size: 128, num_heads: 1}}}}
""",
    )
    set_default_host(make_host(autoload=True))
    try:
        assert cli.main(["flops", str(recipe), "--json"]) == 0
        rows = {row["stage"]: row for row in json.loads(capsys.readouterr().out)}
        uniform = "stages.first.objective={name: electra.rtd, generator: {kind: uniform}}"
        assert cli.main(["flops", str(recipe), "--json", uniform]) == 2
        err = capsys.readouterr().err
        assert cli.main(["flops", str(recipe), "--json", "stages.from_gen.objective=electra.rtd"]) == 2
        refused = capsys.readouterr().err
    finally:
        set_default_host(None)
    assert rows["from_gen"]["per_step"] == rows["narrow"]["per_step"], "the generator: 1/4 of tiny's widths"
    assert rows["from_gen"]["steps"] == rows["narrow"]["steps"] > 4 * rows["baseline"]["steps"]
    assert rows["from_mlm"]["per_step"] == rows["baseline"]["per_step"], "the MLM baseline's one model"
    assert "init: first.generator: stage 'first' trains a uniform generator, which is no model" in err
    # the stage refuses a generator as an ELECTRA discriminator's init (`check_role`): so does the count
    assert "init: first.generator is the generator of stage 'first', not a discriminator" in refused

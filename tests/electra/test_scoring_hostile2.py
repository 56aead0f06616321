"""Second hostile review of PLL scoring, `xfer score`, the `electra.score` stage and `xfer flops`.

Each test pins a defect found in that review and fails on the code before its fix.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .electra_recipes import scoring_config, spread_weights

pytestmark = pytest.mark.usefixtures("one_thread")


# --- xfer flops: where the vocabulary size comes from ----------------------------------------------


def test_xfer_flops_says_a_vocab_stage_size_is_only_a_target(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A `transformer.vocab` stage's `size` was reported as the vocabulary, without a word: the
    vocabulary it trains can be far smaller (116 tokens for `size: 1000` on 10 toy sentences), and
    the pre-training stage plans its FLOPs and budget with the real one, so `xfer flops` disagreed
    with the stage it previews. The row now says where the size comes from, and the table that it
    is a target."""
    from xfer.core import cli
    from xfer.core.plugins import set_default_host
    from xfer.testing import make_host, write_recipe
    from xfer.transformer.tokenization import WordPieceTokenizer

    tokenizer = tmp_path / "tok"
    WordPieceTokenizer.from_vocab(
        {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"])}
    ).save(tokenizer)
    recipe = write_recipe(
        tmp_path,
        f"""
stages:
  corpus: {{kind: toy.corpus, sentences: 10}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 1000}}
  electra: {{kind: electra.pretrain, corpus: {{files: corpus.text}}, tokenizer: vocab.tokenizer, model: tiny,
            budget: {{flops: 1e13}}}}
  own: {{kind: electra.pretrain, corpus: {{files: corpus.text}}, tokenizer: {tokenizer}, model: tiny,
        budget: {{flops: 1e13}}}}
""",
    )
    set_default_host(make_host(autoload=True))
    try:
        assert cli.main(["flops", str(recipe), "--json"]) == 0
        electra, own = json.loads(capsys.readouterr().out)
        assert cli.main(["flops", str(recipe)]) == 0
        table = capsys.readouterr().out
    finally:
        set_default_host(None)
    assert electra["vocab_size"] == 1000 and electra["vocab_from"] == "the target size of stage 'vocab'"
    assert own["vocab_size"] == 7 and own["vocab_from"] == "tokenizer"
    electra_part, own_part = table.split("stage own:")
    assert "vocabulary 1000 (the target size of stage 'vocab')" in electra_part
    assert "can be smaller or larger than its target size" in electra_part
    assert "vocabulary 7 (tokenizer)" in own_part and "target size" not in own_part


# --- ELECTRA-TT: the noise distribution the discriminator was trained against ----------------------

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "ran", "big", "red", "and"]
SENTENCES = ["the cat sat on the mat", "a big red dog ran", "the dog sat and the cat ran on a mat"]


def _tokenizer() -> Any:
    from xfer.transformer.tokenization import WordPieceTokenizer

    return WordPieceTokenizer.from_vocab(
        {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s"])}
    )


@pytest.fixture(scope="module")
def tt_pair(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[str, Any]], Path]:
    """ELECTRA-TT runs (discriminator + two-tower generator, random spread-out weights) whose
    objective config is the given generator settings; the same weights for every call."""
    import torch

    from xfer.electra.heads import DiscriminatorHead
    from xfer.electra.model import TwoTower
    from xfer.transformer.encoder import Encoder
    from xfer.transformer.modelio import save_model_dir

    tokenizer = _tokenizer()
    torch.manual_seed(3)
    config = scoring_config(tokenizer.vocab_size, 24)
    encoder, head, cloze = Encoder(config), DiscriminatorHead(16), TwoTower(config, None)
    spread_weights(encoder, head, cloze)
    root = tmp_path_factory.mktemp("tt")

    def make(generator: dict[str, Any]) -> Path:
        run = root / json.dumps(generator, sort_keys=True).translate(str.maketrans('{}":, ', "______"))
        meta = {"objective": "electra.rtd", "objective_config": {"mask_prob": 0.2, "generator": generator}}
        save_model_dir(run / "discriminator", {"encoder": encoder, "head": head}, meta)
        save_model_dir(run / "generator", {"ltr": cloze.ltr, "rtl": cloze.rtl, "head": cloze.head}, meta)
        for folder in ("discriminator", "generator"):
            tokenizer.save(run / folder)
        return run / "discriminator"

    return make


def _electra_tt_by_hand(loaded: Any, sentence: str, temperature: float) -> list[float]:
    """log softmax(cloze logits / T)[x_t] + log(0.2 / 0.8) - (detection logit)_t, one sentence per pass."""
    import torch

    tokenizer, scorer = loaded.tokenizer, loaded.scorer
    pieces = tokenizer.backend.encode(sentence, add_special_tokens=False).ids
    ids = torch.tensor([[tokenizer.cls_id, *pieces, tokenizer.sep_id]])
    ones, zeros, rows = torch.ones_like(ids), torch.zeros_like(ids), torch.arange(1, len(pieces) + 1)
    with torch.no_grad():
        logits = scorer.cloze.logits_at(ids, ones, zeros, rows).double()
        log_q = (logits / temperature).log_softmax(-1)[torch.arange(len(pieces)), torch.tensor(pieces)]
        replaced = scorer.head(scorer.encoder(ids, ones, zeros).last_hidden_state[0])[rows].double()
    return (log_q + math.log(0.2 / 0.8) - replaced).tolist()


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_electra_tt_inverts_with_the_noise_the_discriminator_saw(
    tt_pair: Callable[[dict[str, Any]], Path], temperature: float
) -> None:
    """The discriminator's prior is calibrated to the noise it was trained against: replacements
    drawn from softmax(logits / T) with the generator's sampling `temperature`. ELECTRA-TT inverted
    it with the cloze model's plain softmax whatever T the checkpoint records, so with T != 1
    every token score was off by log q_T - log q (here by nats per sentence)."""
    from xfer.electra import scoring

    loaded = scoring.load_scorer(tt_pair({"kind": "two_tower", "temperature": temperature}))
    assert loaded.method == "electra-tt"
    lines = [scoring.Line(s, "<test>", i + 1) for i, s in enumerate(SENTENCES)]
    for batch_size in (1, 3):
        for sentence, got in zip(SENTENCES, scoring.score_lines(loaded, lines, batch_size), strict=True):
            assert got.token_scores == pytest.approx(_electra_tt_by_hand(loaded, sentence, temperature), abs=1e-5)
    if temperature != 1.0:  # the checkpoint's T matters: T = 1 gives other numbers
        plain = _electra_tt_by_hand(loaded, SENTENCES[2], 1.0)
        assert abs(math.fsum(plain) - scoring.score_lines(loaded, lines[2:], 1)[0].pll) > 0.5


def test_electra_tt_without_a_recorded_temperature_uses_1_and_refuses_a_bad_one(
    tt_pair: Callable[[dict[str, Any]], Path],
) -> None:
    from xfer.core.errors import CheckpointError
    from xfer.electra import scoring

    loaded = scoring.load_scorer(tt_pair({"kind": "two_tower"}))  # checkpoints from before the knob
    got = scoring.score_lines(loaded, [scoring.Line(SENTENCES[0], "<test>", 1)], 1)[0]
    assert got.token_scores == pytest.approx(_electra_tt_by_hand(loaded, SENTENCES[0], 1.0), abs=1e-5)
    for bad in ("hot", 0, -1.0):
        with pytest.raises(
            CheckpointError, match=r"discriminator: objective_config\.generator\.temperature .*a number > 0"
        ):
            scoring.load_scorer(tt_pair({"kind": "two_tower", "temperature": bad}))


@pytest.mark.parametrize("kind,own", [("mlm", "with method mlm, from its masked-LM generator"), ("uniform", "none")])
def test_electra_tt_refuses_a_two_tower_model_the_discriminator_was_not_trained_against(
    tt_pair: Callable[[dict[str, Any]], Path], kind: str, own: str
) -> None:
    """`--method electra-tt --generator G` on the discriminator of an ELECTRA run with a masked-LM
    (or uniform) generator, G a two-tower model of another ELECTRA run: both record electra.rtd,
    so "not a pair" let it through and the inversion gave numbers calibrated to nothing."""
    from xfer.core.errors import UserError
    from xfer.electra import scoring

    other = tt_pair({"kind": "two_tower"}).parent / "generator"
    main = tt_pair({"kind": kind})
    with pytest.raises(
        UserError, match=rf"trained against a {kind} generator, not a two-tower one, .*\(its PLLs: {own}\)"
    ):
        scoring.load_scorer(main, other, method="electra-tt")
    assert scoring.load_scorer(tt_pair({"kind": "two_tower"}), other, method="electra-tt").method == "electra-tt"


# --- the electra.score stage ----------------------------------------------------------------------


def test_stage_refuses_a_generator_for_method_electric_before_anything_runs(tmp_path: Path) -> None:
    """`method: electric` with a `generator:` is refused by `xfer score` at once, but the stage let
    it through validation and `load_scorer` refused it when the stage started: after the
    pre-training stage it scores had run (hours, on a real corpus)."""
    from xfer.core.errors import RecipeError
    from xfer.core.recipes.recipe import load_recipe
    from xfer.testing import make_host, write_recipe

    stages = """
stages:
  corpus: {kind: toy.corpus, sentences: 10}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 100}
  pre: {kind: electra.pretrain, corpus: {files: corpus.text}, tokenizer: vocab.tokenizer, model: tiny,
        objective: electric.nce}
  score: {kind: electra.score, checkpoint: pre.discriminator, files: corpus.text, method: electric%s}
"""
    host = make_host(autoload=True)
    with pytest.raises(RecipeError, match=r"recipe\.yaml:\d+:\d+: stages\.score\.generator: method electric scores "):
        load_recipe(write_recipe(tmp_path / "a", stages % ", generator: pre.generator"), [], host)
    load_recipe(write_recipe(tmp_path / "b", stages % ""), [], host)  # without it: valid

"""PLL formulas of `xfer.electra.scoring` against slow reference implementations (hostile review).

Checkpoints are tiny random models (no training); every expected number is computed here from the
definitions, one sentence and one position at a time.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from xfer.core.errors import CheckpointError, UserError
from xfer.electra import scoring
from xfer.electra.heads import DiscriminatorHead
from xfer.electra.model import MaskedGenerator, TwoTower
from xfer.transformer.encoder import Encoder
from xfer.transformer.modelio import save_model_dir
from xfer.transformer.tokenization import WordPieceTokenizer

from .electra_recipes import scoring_config

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "ran", "fast"]
SENTENCES = ["the cat sat on the mat", "a dog ran", "cats", "the dogs ran fast on a mat the cat sat"]


def _tokenizer() -> WordPieceTokenizer:
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s"]
    return WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(tokens)})


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Random modules (weights spread out, so scores are far from 0) and a writer of run folders."""
    tokenizer = _tokenizer()
    torch.manual_seed(0)
    config = scoring_config(tokenizer.vocab_size, 24)
    encoder, head, cloze, mlm = (
        Encoder(config),
        DiscriminatorHead(16),
        TwoTower(config, None),
        MaskedGenerator(config, None),
    )
    for module in (encoder, head, cloze, mlm):
        for p in module.parameters():
            p.data.normal_(0, 0.5)
    root = tmp_path_factory.mktemp("runs")

    def run(name: str, meta: dict, generator: str) -> Path:
        """A run folder `name` (discriminator + generator of kind `generator`), as electra.pretrain writes it."""
        gen = (
            {"ltr": cloze.ltr, "rtl": cloze.rtl, "head": cloze.head}
            if generator == "two_tower"
            else {"encoder": mlm.encoder, "head": mlm.head}
        )
        for role, modules in (("discriminator", {"encoder": encoder, "head": head}), ("generator", gen)):
            save_model_dir(root / name / role, modules, {**meta, "role": role})
            tokenizer.save(root / name / role)
        return root / name / "discriminator"

    return {"run": run, "encoder": encoder, "head": head, "cloze": cloze, "mlm": mlm}


def _rtd(variant: str, kind: str) -> dict:
    return {
        "objective": "electra.rtd",
        "objective_family": "electra.rtd",
        "objective_config": {"mask_prob": 0.15, "variant": variant, "generator": {"kind": kind}},
    }


def test_electra_15_discriminators_are_not_inverted_as_electra_tt(models: dict) -> None:
    """An electra_15 discriminator (detection loss at the masked positions only: every token it was
    asked about was a generator sample) was scored by `auto` with the ELECTRA-TT inversion, whose
    k / (n - k) prior only holds for a detector trained at every position: numbers calibrated to nothing."""
    e15 = models["run"]("e15", _rtd("electra_15", "two_tower"), "two_tower")
    for method in ("auto", "electra-tt"):
        with pytest.raises(UserError, match=r"variant 'electra_15'.*masked positions only.*two-tower"):
            scoring.load_scorer(e15, method=method)
    # its generator alone still scores; an electra_15 run with an mlm generator still routes to it
    assert scoring.load_scorer(e15.parent / "generator").method == "two-tower"
    e15_mlm = models["run"]("e15_mlm", _rtd("electra_15", "mlm"), "mlm")
    assert scoring.load_scorer(e15_mlm).method == "mlm"
    # the every-position variant is unchanged
    assert scoring.load_scorer(models["run"]("tt", _rtd("electra", "two_tower"), "two_tower")).method == "electra-tt"


@pytest.mark.parametrize("mask_prob", [None, "0.15", True, 1.5, 0, float("nan")])
def test_a_bad_recorded_mask_prob_is_an_error_naming_the_checkpoint(models: dict, mask_prob: object) -> None:
    """ELECTRA-TT's prior log(k / (n - k)) comes from the recorded mask_prob: a null or a string
    crashed `float()` with a bare TypeError/ValueError, True scored with 1.0, and an out-of-range
    number was refused without saying which checkpoint or key (as the temperature already was)."""
    meta = _rtd("electra", "two_tower")
    meta["objective_config"]["mask_prob"] = mask_prob
    run = models["run"](f"mask_prob_{mask_prob!r}", meta, "two_tower")
    with pytest.raises(CheckpointError, match=rf"{re.escape(str(run))}: objective_config.mask_prob .*in \(0, 1\)"):
        scoring.load_scorer(run)


def _reference_tt(models: dict, tokenizer: WordPieceTokenizer, sentence: str, budget: int, mask_prob: float, t: float):
    """ELECTRA-TT token scores, one window and one sentence at a time, full-sequence passes:
    log softmax(cloze logits / T)[x_t] + log(p / (1 - p)) - (detection logit)_t."""
    encoder, head, cloze = models["encoder"], models["head"], models["cloze"]
    for module in (encoder, head, cloze):
        module.eval()
    pieces = tokenizer.backend.encode(sentence, add_special_tokens=False).ids
    out: list[float] = [float("nan")] * len(pieces)
    for lo, hi, own in scoring.windows(len(pieces), budget):
        ids = torch.tensor([[tokenizer.cls_id, *pieces[lo:hi], tokenizer.sep_id]])
        ones, zeros = torch.ones_like(ids), torch.zeros_like(ids)
        with torch.no_grad():
            logit = head(encoder(ids, ones, zeros).last_hidden_state[0])
            context = cloze.context(ids, ones, zeros)[0]
            log_q = (cloze.head(context, cloze.ltr.embeddings.word.weight).float() / t).log_softmax(-1)
        for p in own:
            i = 1 + p - lo
            out[p] = log_q[i, ids[0, i]].item() + math.log(mask_prob / (1 - mask_prob)) - logit[i].item()
    return out


@pytest.mark.parametrize("max_length", [24, 6, 3])
def test_electra_tt_matches_a_slow_reference_in_any_batching(models: dict, max_length: int) -> None:
    """The recorded mask_prob and temperature, windows, one-piece texts and mixed-length batches
    give exactly (to fp32 noise) the per-sentence, per-window reference."""
    meta = _rtd("electra", "two_tower")
    meta["objective_config"] |= {"mask_prob": 0.2, "generator": {"kind": "two_tower", "temperature": 2.0}}
    loaded = scoring.load_scorer(models["run"]("tt_t2", meta, "two_tower"), max_length=max_length)
    texts = [*SENTENCES, "the"]
    expected = [_reference_tt(models, loaded.tokenizer, s, max_length - 2, 0.2, 2.0) for s in texts]
    lines = [scoring.Line(s, "<test>", i + 1) for i, s in enumerate(texts)]
    for batch_size in (1, 2, 100):
        for want, got in zip(expected, scoring.score_lines(loaded, lines, batch_size), strict=True):
            assert got.token_scores == pytest.approx(want, abs=1e-5)
            assert got.pll == pytest.approx(math.fsum(want), abs=1e-4) and abs(got.pll) > 0.1


@pytest.mark.parametrize("length", [None, "64", 2, True])
def test_a_bad_recorded_max_length_is_an_error_naming_the_file(models: dict, tmp_path: Path, length: object) -> None:
    """The windows' default length comes from the checkpoint's recorded max_length: a null crashed
    `int()` with a bare TypeError, a string "64" was read as 64, and 2 or True were refused as if
    the user had passed them ("max_length 2 cannot hold ..."), naming no checkpoint."""
    folder = tmp_path / "discriminator"
    save_model_dir(
        folder,
        {"encoder": models["encoder"], "head": models["head"]},
        {"objective": "electric.nce", "max_length": length},
    )
    _tokenizer().save(folder)
    with pytest.raises(
        CheckpointError,
        match=rf"{re.escape(str(folder / 'xfer_model.json'))}: max_length {re.escape(repr(length))} is not",
    ):
        scoring.load_scorer(folder)


def test_hf_export_of_a_replace_mlm_runs_generator_is_scored_as_its_generator(models: dict, tmp_path: Path) -> None:
    """config.json records the objective and its variant but no role, so the HF export of a
    replace_mlm run's [MASK]-trained generator was refused as "the main model" of the run; the role
    is the one of the xfer directory the export sits in (as `electra.pretrain` lays them out)."""
    from xfer.transformer.hf import OBJECTIVE_CONFIG_KEY, OBJECTIVE_KEY, export_hf
    from xfer.transformer.initnotes import MAX_LENGTH_KEY

    mlm, tokenizer = models["mlm"], _tokenizer()
    meta = _rtd("replace_mlm", "mlm")
    for role in ("generator", "discriminator"):
        save_model_dir(tmp_path / role, {"encoder": mlm.encoder, "head": mlm.head}, {**meta, "role": role})
        hf = tmp_path / role / "hf"
        tokenizer.save_hf(hf, 24)
        extra = {OBJECTIVE_KEY: "electra.rtd", MAX_LENGTH_KEY: 24, OBJECTIVE_CONFIG_KEY: meta["objective_config"]}
        export_hf(hf, mlm.encoder, head=mlm.head, vocab_file=hf / "vocab.txt", extra_config=extra)
    assert scoring.load_scorer(tmp_path / "generator" / "hf").method == "mlm"
    with pytest.raises(UserError, match=r"main model of an electra.rtd run with variant 'replace_mlm'"):
        scoring.load_scorer(tmp_path / "discriminator" / "hf")  # the main model still is refused
    copied = tmp_path / "elsewhere" / "hf"  # moved out of its run: the role is unknown, refused as before
    copied.parent.mkdir()
    (tmp_path / "generator" / "hf").rename(copied)
    with pytest.raises(UserError, match=r"variant 'replace_mlm'"):
        scoring.load_scorer(copied)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_mlm_rows_batched_across_texts_and_windows_equal_one_text_at_a_time(models: dict, precision: str) -> None:
    """MLM's flat list of one-[MASK] rows, cut into batches across texts and windows, gives each
    text's per-piece scores as scoring it alone (same precision), and in fp32 the slow reference."""
    mlm = models["mlm"]
    mlm.eval()
    folder = models["run"]("mlm_rows", {"objective": "electra.mlm", "objective_config": {"mask_prob": 0.15}}, "mlm")
    loaded = scoring.load_scorer(folder.parent / "generator", max_length=7)
    lines = [scoring.Line(s, "<test>", i + 1) for i, s in enumerate(SENTENCES)]
    alone = [scoring.score_lines(loaded, [line], 1, precision=precision)[0].token_scores for line in lines]
    for batch_size in (3, 1000):
        got = scoring.score_lines(loaded, lines, batch_size, precision=precision)
        for want, score in zip(alone, got, strict=True):
            assert score.token_scores == pytest.approx(want, abs=1e-5 if precision == "fp32" else 0.05)
    if precision == "bf16":
        return
    tokenizer = loaded.tokenizer
    for sentence, want in zip(SENTENCES, alone, strict=True):
        pieces = tokenizer.backend.encode(sentence, add_special_tokens=False).ids
        for lo, hi, own in scoring.windows(len(pieces), 5):
            for p in own:
                ids = torch.tensor([[tokenizer.cls_id, *pieces[lo:hi], tokenizer.sep_id]])
                ids[0, 1 + p - lo] = tokenizer.mask_id
                with torch.no_grad():
                    hidden = mlm.encoder(ids, torch.ones_like(ids), torch.zeros_like(ids)).last_hidden_state[0]
                    log_p = mlm.head(hidden, mlm.encoder.embeddings.word.weight).log_softmax(-1)
                assert want[p] == pytest.approx(log_p[1 + p - lo, pieces[p]].item(), abs=1e-5)

"""PLL scoring and n-best re-ranking (`xfer.electra.scoring`, `rerank`, the `electra.score` stage, `xfer score`).

Every scorer is checked against a naive computation written here from the definitions (one
sentence and, for MLM, one masked position at a time, full-sequence forward passes); windows,
empty lines, bad files and re-ranking on n-best lists whose answer is known. Checkpoints are tiny
random models written with `save_model_dir` once per module (no training).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from xfer.core.errors import CheckpointError, DataError, UserError
from xfer.electra import rerank, scoring
from xfer.electra.heads import DiscriminatorHead
from xfer.electra.model import MaskedGenerator, TwoTower
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.encoder import Encoder
from xfer.transformer.modelio import save_model_dir
from xfer.transformer.tokenization import WordPieceTokenizer

from .electra_recipes import scoring_config

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "ran",
    "fast",
    "slow",
    "big",
    "small",
    "red",
    "blue",
    "and",
    "or",
    "is",
    "was",
]
SENTENCES = [
    "the cat sat on the mat",
    "a dog ran fast",
    "the big red dog sat on a small blue mat and the cat ran",
    "cats",
    "the dogs ran and the cat sat",
]
MAX_POSITIONS = 24


def _tokenizer() -> WordPieceTokenizer:
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s", "##ed"]
    return WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(tokens)})


def _save(folder: Path, modules: dict, meta: dict, tokenizer: WordPieceTokenizer) -> Path:
    save_model_dir(folder, modules, meta)
    tokenizer.save(folder)
    return folder


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Checkpoints laid out as electra.pretrain writes them (random weights, non-trivial biases)."""
    root = tmp_path_factory.mktemp("ckpt")
    tokenizer = _tokenizer()
    torch.manual_seed(0)
    config = scoring_config(tokenizer.vocab_size, MAX_POSITIONS)
    encoder, head, cloze, mlm = (
        Encoder(config),
        DiscriminatorHead(16),
        TwoTower(config, None),
        MaskedGenerator(config, None),
    )
    for module in (encoder, head, cloze, mlm):  # make scores spread out, not ~0
        for p in module.parameters():
            p.data.normal_(0, 0.5)
    detector = {"encoder": encoder, "head": head}
    towers = {"ltr": cloze.ltr, "rtl": cloze.rtl, "head": cloze.head}
    masked = {"encoder": mlm.encoder, "head": mlm.head}
    electric = {
        "objective": "electric.nce",
        "objective_config": {"mask_prob": 0.15, "generator": {"kind": "two_tower"}},
    }
    tt = {"objective": "electra.rtd", "objective_config": {"mask_prob": 0.25, "generator": {"kind": "two_tower"}}}
    rtd = {
        "objective": "electra.rtd",
        "objective_config": {"mask_prob": 0.15, "generator": {"kind": "mlm"}},
        "max_length": 20,  # the length it was trained on: the default window
    }
    base = {"objective": "electra.mlm", "objective_config": {"mask_prob": 0.15}}
    out = {
        "electric": _save(root / "electric" / "discriminator", detector, electric, tokenizer),
        "electric_gen": _save(root / "electric" / "generator", towers, electric, tokenizer),
        "tt": _save(root / "tt" / "discriminator", detector, tt, tokenizer),
        "tt_gen": _save(root / "tt" / "generator", towers, tt, tokenizer),
        "rtd": _save(root / "rtd" / "discriminator", detector, rtd, tokenizer),
        "rtd_gen": _save(root / "rtd" / "generator", masked, rtd, tokenizer),
        "mlm": _save(root / "mlm" / "discriminator", masked, base, tokenizer),
    }
    return out


@pytest.fixture(scope="module")
def nan_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Electric discriminator whose head gives NaN (as a diverged run's weights do)."""
    tokenizer = _tokenizer()
    torch.manual_seed(0)
    encoder, head = Encoder(scoring_config(tokenizer.vocab_size, MAX_POSITIONS)), DiscriminatorHead(16)
    for p in head.parameters():
        p.data.fill_(float("nan"))
    meta = {"objective": "electric.nce", "objective_config": {"mask_prob": 0.15, "generator": {"kind": "two_tower"}}}
    folder = tmp_path_factory.mktemp("nan") / "discriminator"
    return _save(folder, {"encoder": encoder, "head": head}, meta, tokenizer)


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("texts") / "sentences.txt"
    path.write_text("\n".join(SENTENCES) + "\n")
    return path


def _pll(loaded: scoring.LoadedScorer, sentences: list[str], batch_size: int = 64) -> list[scoring.TextScore]:
    lines = [scoring.Line(s, "<test>", i + 1) for i, s in enumerate(sentences)]
    return scoring.score_lines(loaded, lines, batch_size)


def _ids(loaded: scoring.LoadedScorer, sentence: str) -> torch.Tensor:
    t = loaded.tokenizer
    pieces = t.backend.encode(sentence, add_special_tokens=False).ids
    return torch.tensor([[t.cls_id, *pieces, t.sep_id]])


# --- the three methods against naive computations ---------------------------------------------------


def test_electric_is_minus_the_sum_of_energies_from_one_pass(ckpt: dict[str, Path]) -> None:
    loaded = scoring.load_scorer(ckpt["electric"])
    assert loaded.method == "electric" and loaded.max_length == MAX_POSITIONS
    scorer = loaded.scorer
    assert isinstance(scorer, scoring.ElectricScorer)
    for sentence, got in zip(SENTENCES, _pll(loaded, SENTENCES, batch_size=2), strict=True):
        ids = _ids(loaded, sentence)
        with torch.no_grad():
            hidden = scorer.encoder(ids, torch.ones_like(ids), torch.zeros_like(ids)).last_hidden_state[0]
            energies = scorer.head(hidden)[1:-1]  # [CLS] and [SEP] are never scored
        assert got.tokens == ids.shape[1] - 2
        assert got.token_scores == pytest.approx((-energies).tolist(), abs=1e-5)
        assert got.pll == pytest.approx(-energies.sum().item(), abs=1e-4)
        assert abs(got.pll) > 0.1  # the check above cannot pass by everything being ~0
    segments = scoring.make_segments([[5, 6, 7]] * 4, MAX_POSITIONS, 2, 3)
    assert scorer.encoder_passes(segments) == 4  # one pass per text


def test_mlm_equals_one_masked_position_at_a_time(ckpt: dict[str, Path]) -> None:
    loaded = scoring.load_scorer(ckpt["mlm"])
    assert loaded.method == "mlm"
    mlm = loaded.scorer.mlm
    mask_id = loaded.tokenizer.mask_id
    naive = []
    for sentence in SENTENCES:
        ids = _ids(loaded, sentence)
        total = []
        for t in range(1, ids.shape[1] - 1):
            masked = ids.clone()
            masked[0, t] = mask_id
            with torch.no_grad():  # every position's logits (not only the masked one's)
                hidden = mlm.encoder(masked, torch.ones_like(ids), torch.zeros_like(ids)).last_hidden_state[0]
                log_p = mlm.head(hidden, mlm.encoder.embeddings.word.weight).log_softmax(-1)[t, ids[0, t]]
            total.append(log_p.item())
        naive.append(total)
    for batch_size in (1, 7, 1000):  # rows of different sentences share batches, or not
        got = _pll(loaded, SENTENCES, batch_size)
        for expected, score in zip(naive, got, strict=True):
            assert score.token_scores == pytest.approx(expected, abs=1e-4)
            assert score.pll == pytest.approx(math.fsum(expected), abs=1e-3)
    pieces = [list(range(5, 5 + n)) for n in (3, 4)]
    assert loaded.scorer.encoder_passes(scoring.make_segments(pieces, MAX_POSITIONS, 2, 3)) == 7  # one per token


def test_electra_tt_inverts_the_discriminator_with_the_cloze_model(ckpt: dict[str, Path]) -> None:
    loaded = scoring.load_scorer(ckpt["tt"])
    assert loaded.method == "electra-tt" and loaded.generator == ckpt["tt_gen"]
    assert any("next to the checkpoint" in note for note in loaded.notes)
    scorer = loaded.scorer
    for sentence, got in zip(SENTENCES, _pll(loaded, SENTENCES), strict=True):
        ids = _ids(loaded, sentence)
        ones, zeros = torch.ones_like(ids), torch.zeros_like(ids)
        n = ids.shape[1]
        with torch.no_grad():
            log_q = scorer.cloze.logits_at(ids, ones, zeros, torch.arange(n)).log_softmax(-1)
            log_q = log_q[torch.arange(n), ids[0]][1:-1]
            replaced = scorer.head(scorer.encoder(ids, ones, zeros).last_hidden_state[0])[1:-1]
        # mask_prob 0.25 from the checkpoint's objective config: log(k / (n - k)) = log(0.25 / 0.75)
        expected = log_q + math.log(0.25 / 0.75) - replaced
        assert got.token_scores == pytest.approx(expected.tolist(), abs=1e-4)


def test_auto_picks_the_method_from_the_checkpoint_and_refuses_mismatches(ckpt: dict[str, Path]) -> None:
    rtd = scoring.load_scorer(ckpt["rtd"])
    assert rtd.method == "mlm" and rtd.max_length == 20  # ELECTRA + masked generator: the generator's MLM
    # only the generator scores: the description said "from DISC + generator GEN"
    assert f"from the generator {ckpt['rtd_gen']} alone" in rtd.describe() and "+ generator" not in rtd.describe()
    assert "+ generator" in scoring.load_scorer(ckpt["tt"]).describe()  # electra-tt does use both
    assert not any("position embeddings" in note for note in rtd.notes)
    assert any("position embeddings" in note for note in scoring.load_scorer(ckpt["electric"]).notes)
    assert scoring.load_scorer(ckpt["electric_gen"]).method == "two-tower"
    two_tower = scoring.load_scorer(ckpt["electric"], method="two-tower")
    assert isinstance(two_tower.scorer, scoring.TwoTowerScorer)
    ignored = scoring.load_scorer(ckpt["mlm"], generator=ckpt["tt_gen"])
    assert any("ignored" in note for note in ignored.notes)  # auto: noted; an explicit method: refused
    with pytest.raises(UserError, match="uses no generator"):
        scoring.load_scorer(ckpt["electric"], generator=ckpt["electric_gen"], method="electric")
    with pytest.raises(UserError, match=r"electric\.nce"):
        scoring.load_scorer(ckpt["tt"], method="electric")
    with pytest.raises(UserError, match="masked LM"):
        scoring.load_scorer(ckpt["mlm"], method="electra-tt")
    with pytest.raises(UserError, match="two tower generator"):
        scoring.load_scorer(ckpt["tt"], generator=ckpt["rtd_gen"])
    with pytest.raises(UserError, match="not a pair"):
        scoring.load_scorer(ckpt["tt"], generator=ckpt["electric_gen"])
    with pytest.raises(CheckpointError, match="did you mean"):
        scoring.load_scorer(ckpt["tt"].parent)
    with pytest.raises(UserError, match="exceeds"):
        scoring.load_scorer(ckpt["electric"], max_length=MAX_POSITIONS + 1)


def test_hf_exports_score_like_the_xfer_checkpoint(ckpt: dict[str, Path], tmp_path: Path) -> None:
    from xfer.transformer.hf import export_hf
    from xfer.transformer.modelio import load_model_dir

    for name, method in (("mlm", "auto"), ("electric", "electric")):  # HF ElectraForPreTraining has no objective
        folder = tmp_path / name
        model = load_model_dir(ckpt[name])
        scoring.load_scorer(ckpt[name]).tokenizer.save(folder)
        export_hf(folder, model.build("encoder"), head=model.build("head"), vocab_file=folder / "vocab.txt")
        hf = scoring.load_scorer(folder, method=method)
        assert hf.method == name
        expected = [s.pll for s in _pll(scoring.load_scorer(ckpt[name]), SENTENCES[:2])]
        assert [s.pll for s in _pll(hf, SENTENCES[:2])] == pytest.approx(expected, abs=1e-4)
    with pytest.raises(UserError, match="pass the method"):
        scoring.load_scorer(tmp_path / "electric")


def test_scores_do_not_depend_on_order_or_batching(ckpt: dict[str, Path]) -> None:
    loaded = scoring.load_scorer(ckpt["tt"])
    reference = {s: r.pll for s, r in zip(SENTENCES, _pll(loaded, SENTENCES, 64), strict=True)}
    shuffled = SENTENCES * 2
    random.Random(3).shuffle(shuffled)
    for batch_size in (1, 3):
        for sentence, got in zip(shuffled, _pll(loaded, shuffled, batch_size), strict=True):
            assert got.pll == pytest.approx(reference[sentence], abs=1e-4)


# --- windows, empty lines, input files ----------------------------------------------------------------


@pytest.mark.parametrize("n,budget", [(1, 1), (5, 5), (6, 5), (30, 6), (31, 7), (100, 10), (40, 2)])
def test_windows_score_every_piece_exactly_once_with_context(n: int, budget: int) -> None:
    found = scoring.windows(n, budget)
    owned = sorted(p for _, _, own in found for p in own)
    assert owned == list(range(n))
    for lo, hi, own in found:
        assert 0 <= lo < hi <= n and hi - lo <= budget and all(lo <= p < hi for p in own)
        if n > budget:
            assert hi - lo == budget  # every window is full, the last one included
    if n > budget >= 4:  # interior pieces are never scored at a window's edge
        for lo, hi, own in found:
            assert all(p in (0, n - 1) or lo < p < hi - 1 for p in own)


def test_long_lines_are_windowed_never_truncated(ckpt: dict[str, Path]) -> None:
    long = " ".join(SENTENCES[:3] * 2)
    loaded = scoring.load_scorer(ckpt["electric"], max_length=10)
    [got] = _pll(loaded, [long])
    pieces = loaded.tokenizer.backend.encode(long, add_special_tokens=False).ids
    assert got.tokens == len(pieces) > 8 and got.windows == len(scoring.windows(len(pieces), 8)) > 1
    # each piece's score is the one of the window that owns it
    scorer = loaded.scorer
    for lo, hi, own in scoring.windows(len(pieces), 8):
        ids = torch.tensor([[loaded.tokenizer.cls_id, *pieces[lo:hi], loaded.tokenizer.sep_id]])
        with torch.no_grad():
            energies = scorer.head(
                scorer.encoder(ids, torch.ones_like(ids), torch.zeros_like(ids)).last_hidden_state[0]
            )
        for p in own:
            assert got.token_scores[p] == pytest.approx(-energies[1 + p - lo].item(), abs=1e-5)
    whole = scoring.load_scorer(ckpt["electric"])  # max_length 24: 22 pieces fit in one window
    assert [g.windows for g in _pll(whole, [SENTENCES[2], long])] == [1, len(scoring.windows(len(pieces), 22))]
    assert _pll(loaded, [SENTENCES[2]])[0].windows == len(scoring.windows(14, 8)) == 3


def test_empty_lines_are_errors_naming_file_and_line_or_zero(ckpt: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "with_empty.txt"
    path.write_text("the cat sat\n\n   \na dog\n")
    loaded = scoring.load_scorer(ckpt["electric"])
    lines = scoring.read_texts(path)
    assert [line.line for line in lines] == [1, 2, 3, 4]
    with pytest.raises(DataError, match=rf"{path}:2: empty text"):
        scoring.score_lines(loaded, lines)
    got = scoring.score_lines(loaded, lines, empty="zero")
    assert [(g.pll, g.tokens, g.empty) for g in got[1:3]] == [(0.0, 0, True), (0.0, 0, True)]
    assert got[0].tokens == 3 and got[3].tokens == 2
    assert scoring.record(lines[1], got[1], "electric")["empty"] is True
    bad = tmp_path / "special.txt"
    bad.write_text("the cat\nthe [MASK] sat\n")
    with pytest.raises(DataError, match=rf"{bad}:2: .*\[MASK\]"):
        scoring.score_lines(loaded, scoring.read_texts(bad))


def test_a_file_of_blank_lines_follows_the_empty_policy_not_file_is_empty(
    ckpt: dict[str, Path], tmp_path: Path
) -> None:
    """A file holding only blank lines was "file is empty", even with empty: zero, though each line is a text."""
    blank = tmp_path / "blank.txt"
    blank.write_text("   \n\n")
    lines = scoring.read_texts(blank)
    assert [(line.text, line.line) for line in lines] == [("   ", 1), ("", 2)]
    loaded = scoring.load_scorer(ckpt["electric"])
    with pytest.raises(DataError, match=rf"{blank}:1: empty text"):
        scoring.score_lines(loaded, lines)
    assert [g.empty for g in scoring.score_lines(loaded, lines, empty="zero")] == [True, True]
    nothing = tmp_path / "nothing.txt"
    nothing.write_text("")
    with pytest.raises(DataError, match=rf"{nothing}:1: file is empty"):
        scoring.read_texts(nothing)


def test_jsonl_inputs_and_their_errors(tmp_path: Path) -> None:
    good = tmp_path / "in.jsonl"
    good.write_text('{"id": "a", "text": "the cat"}\n\n{"text": "a dog", "other": 1}\n')
    lines = scoring.read_texts(good)
    assert [(x.text, x.line, x.id) for x in lines] == [("the cat", 1, "a"), ("a dog", 3, None)]
    assert [x.text for x in scoring.read_texts(good, "jsonl", "text")] == ["the cat", "a dog"]
    cases = {
        '{"text": "ok"}\n{"text": "the cat"\n': r":2: not valid JSON",
        '{"text": "ok"}\n["the cat"]\n': r":2: expected a JSON object",
        '{"sentence": "the cat"}\n': r":1: no 'text' field \(keys: sentence\)",
        '{"text": 3}\n': r":1: text: must be a string",
    }
    for content, message in cases.items():
        bad = tmp_path / "bad.jsonl"
        bad.write_text(content)
        with pytest.raises(DataError, match=message):
            scoring.read_texts(bad)
    with pytest.raises(DataError, match="not valid UTF-8"):
        (tmp_path / "latin.txt").write_bytes(b"caf\xe9\n")
        scoring.read_texts(tmp_path / "latin.txt")


# --- n-best re-ranking ------------------------------------------------------------------------------


def _lists(rows: list[tuple[str, list[tuple[str, float]]]]) -> list[rerank.NBestList]:
    return [
        rerank.NBestList(i, tuple(rerank.Hypothesis(t, s) for t, s in hyps), ref, "<mem>", i + 1)
        for i, (ref, hyps) in enumerate(rows)
    ]


def test_word_errors_and_wer() -> None:
    assert rerank.word_errors("a b c", "a b c") == 0
    assert rerank.word_errors("a b c", "a x c") == 1
    assert rerank.word_errors("a b c", "b c") == 1
    assert rerank.word_errors("a b c", "a b c d e") == 2
    assert rerank.word_errors("", "a") == 1
    assert rerank.wer(["a b c d", "e f"], ["a b c d", "x"]) == pytest.approx(100 * 2 / 6)


@pytest.mark.parametrize("metric", ["wer", "bleu"])
def test_a_pll_that_prefers_the_reference_fixes_the_base_systems_mistakes(metric: str) -> None:
    refs = ["the cat sat on the mat today", "a dog ran very fast in the park", "the big red dog is here now"]
    rows = [(ref, [(ref.replace("the", "da", 1).replace("a ", "uh ", 1), -1.0), (ref, -1.5)]) for ref in refs]
    lists = _lists(rows)
    plls = [[-20.0, -10.0] for _ in lists]  # the reference is 10 nats more likely under the PLL
    lam, _ = rerank.choose_lambda(metric, lists, plls)
    # base + λ·PLL picks the reference once 10 λ > 0.5: λ = 0.1 is the smallest grid value that does
    assert lam == pytest.approx(0.1)
    result = rerank.rerank_nbest(metric, lists, plls, lists, plls)
    assert result.dev["after"] == (0.0 if metric == "wer" else pytest.approx(100.0))
    assert rerank.better(metric, result.dev["after"], result.dev["before"])
    assert result.test is not None and result.test["after"] == result.dev["after"]
    assert [r["best"] for r in result.dev_records] == refs
    assert result.dev_records[0]["hypotheses"][0]["rank_before"] == 1
    assert (result.signature is not None) == (metric == "bleu")
    assert "λ = 0.1" in result.markdown()
    # a PLL that prefers the wrong hypothesis: λ stays 0 (re-ranking never makes dev worse)
    assert rerank.choose_lambda(metric, lists, [[-10.0, -20.0] for _ in lists])[0] == 0.0
    if metric == "wer":
        assert result.dev["oracle"] == 0.0


def test_nbest_files_are_validated_with_file_and_line(tmp_path: Path) -> None:
    good = '{"id": 1, "hypotheses": [{"text": "a b", "score": -1, "am": 2}], "reference": "a b"}'
    cases = {
        '{"id": 3, "hypotheses": [], "reference": "x"}': r":2: hypotheses: must be a non-empty list",
        '{"id": 2, "hypotheses": [{"text": "x", "score": "high"}], "reference": "x"}': r":2: hypotheses\[0\]: 'score'",
        # a missing key said "'score' must be a finite number, got None"
        '{"id": 2, "hypotheses": [{"text": "x"}], "reference": "x"}': r":2: hypotheses\[0\]: missing 'score'$",
        '{"id": 2, "hypotheses": [{"score": 1}], "reference": "x"}': r":2: hypotheses\[0\]: missing 'text'$",
        '{"id": 2, "hypotheses": [{"text": "x", "score": NaN}], "reference": "x"}': r":2: hypotheses\[0\]: 'score'",
        # an integer too large for a float was an OverflowError traceback
        '{"id": 2, "hypotheses": [{"text": "x", "score": 1%s}], "reference": "x"}' % ("0" * 400): r":2: .*finite",
        '{"id": 1, "hypotheses": [{"text": "x", "score": 1}], "reference": "x"}': r":2: id: duplicate id 1",
        '{"id": 2, "hypotheses": [{"text": "x", "score": 1}]}': r":2: reference: missing",
        '{"id": 2, "hypothesis": [{"text": "x", "score": 1}], "reference": "x"}': r":2: unknown key\(s\) hypothesis",
        '{"id": 2, "hypotheses": [{"text": "x", "score": 1, "pll": 3}], "reference": "x"}': r":2: .*reserved",
        "not json": r":2: not valid JSON",
    }
    for content, message in cases.items():
        path = tmp_path / "nbest.jsonl"
        path.write_text(good + "\n" + content + "\n")
        with pytest.raises(DataError, match=message):
            rerank.read_nbest(path, need_reference=True)
    path.write_text(good + "\n")
    [nbest] = rerank.read_nbest(path)
    assert nbest.hypotheses[0].extra == {"am": 2}
    assert rerank.reranked([nbest], [[-3.0]], 0.5)[0]["hypotheses"][0]["am"] == 2
    with pytest.raises(UserError, match="not a number"):
        rerank.parse_grid("0,0.1,x")
    with pytest.raises(UserError, match=r"'-0\.1' is negative"):  # was accepted: it rewards unlikely hypotheses
        rerank.parse_grid("0,-0.1")
    assert rerank.parse_grid("0,0.5") == [0.0, 0.5]


def test_negative_lambdas_are_refused_in_recipes() -> None:
    from xfer.core.config import FieldError, Input
    from xfer.electra.score_config import ScoreConfig

    with pytest.raises(FieldError, match="must not be negative"):
        ScoreConfig(checkpoint=Input("x"), lambdas=[0.0, -0.5])


def test_partial_test_references_say_how_many_and_skip_the_metric() -> None:
    """With references on only some test lists the report said "no references"."""
    refs = ["the cat sat", "a dog ran", "the big dog"]
    lists = _lists([(ref, [(ref, -1.0), ("x y", -2.0)]) for ref in refs])
    plls = [[-1.0, -2.0] for _ in lists]
    partial = [lists[0], rerank.NBestList(1, lists[1].hypotheses, None, "<mem>", 2), lists[2]]
    result = rerank.rerank_nbest("wer", lists, plls, partial, plls)
    assert result.test is not None and "before" not in result.test and result.test["references"] == 2
    assert result.test["note"].startswith("only 2 of 3 lists have a reference: metric skipped")
    assert "test: only 2 of 3 lists have a reference" in result.markdown()
    none = [rerank.NBestList(n.id, n.hypotheses, None, n.path, n.line) for n in lists]
    assert rerank.rerank_nbest("wer", lists, plls, none, plls).test["note"] == "no references: metric not computed"  # type: ignore[index]
    assert rerank.rerank_nbest("wer", lists, plls, lists, plls).test["after"] == 0.0  # type: ignore[index]


def test_non_finite_plls_are_errors_naming_file_line_and_hypothesis(
    nan_ckpt: Path, texts: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """NaN PLLs were written as `"pll": NaN` (not JSON), and re-ranking with them reported a
    perfect WER: every total NaN, so the first hypothesis won every list at every λ."""
    from xfer.core.cli import main

    loaded = scoring.load_scorer(nan_ckpt)
    with pytest.raises(DataError, match=rf"{texts}:1: the PLL is nan \(6 of 6 piece scores are not finite\)"):
        scoring.score_lines(loaded, scoring.read_texts(texts))
    dev, _ = _nbest_files(tmp_path)
    lists = rerank.read_nbest(dev, need_reference=True)
    with pytest.raises(DataError, match=rf"{dev}:1: hypotheses\[0\]: list id 'u0', hypothesis 0 .*PLL is nan"):
        scoring.score_nbest(loaded, [lists])
    # torch-free too: re-ranking refuses NaN PLLs from any scorer, naming the list and hypothesis
    plls = [[-1.0, -2.0], [-1.0, float("nan")], [-1.0, -2.0]]
    with pytest.raises(DataError, match=rf"{dev}:2: hypotheses\[1\]: list id 'u1', hypothesis 1 .*PLL is nan"):
        rerank.rerank_nbest("wer", lists, plls)
    out = tmp_path / "plls.jsonl"
    assert main(["score", str(nan_ckpt), str(texts), "--out", str(out)]) == 2
    assert f"{texts}:1: the PLL is nan" in capsys.readouterr().err and not out.exists()
    rr = tmp_path / "rr"
    assert main(["score", str(nan_ckpt), "--nbest-dev", str(dev), "--metric", "wer", "--rerank-dir", str(rr)]) == 2
    assert "list id 'u0'" in capsys.readouterr().err and not (rr / "report.json").exists()


def test_score_stage_refuses_non_finite_plls(nan_ckpt: Path, texts: Path, tmp_path: Path) -> None:
    recipe = write_recipe(
        tmp_path, f"name: nan\nstages:\n  s: {{kind: electra.score, checkpoint: {nan_ckpt}, files: {texts}}}\n"
    )
    with pytest.raises(DataError, match=rf"{texts}:1: the PLL is nan"):
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    assert not (tmp_path / "run" / "s" / "outputs" / "scores" / "sentences.jsonl").exists()
    dev, _ = _nbest_files(tmp_path)
    recipe = write_recipe(
        tmp_path,
        f"name: nan2\nstages:\n  s: {{kind: electra.score, checkpoint: {nan_ckpt}, nbest_dev: {dev}, metric: wer}}\n",
    )
    with pytest.raises(DataError, match=rf"{dev}:1: .*list id 'u0', hypothesis 0"):
        run_recipe_file(recipe, tmp_path / "run2", make_host(autoload=True))


# --- the stage and the command --------------------------------------------------------------------


def _nbest_files(folder: Path) -> tuple[Path, Path]:
    """Lists where the base system prefers a scrambled hypothesis; PLL decides (any sign of λ·PLL gap)."""
    rows = []
    for i, sentence in enumerate(SENTENCES[:3]):
        scrambled = " ".join(reversed(sentence.split()))
        hyps = [{"text": scrambled, "score": -1.0}, {"text": sentence, "score": -1.2, "am": i}]
        rows.append({"id": f"u{i}", "hypotheses": hyps, "reference": sentence})
    dev, test = folder / "dev.jsonl", folder / "test.jsonl"
    dev.write_text("".join(json.dumps(r) + "\n" for r in rows))
    test.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "reference"}) + "\n" for r in rows))
    return dev, test


def test_score_stage_in_a_recipe(ckpt: dict[str, Path], texts: Path, tmp_path: Path) -> None:
    dev, test = _nbest_files(tmp_path)
    jsonl = tmp_path / "more.jsonl"
    jsonl.write_text('{"id": "x", "text": "the cat"}\n')
    recipe = write_recipe(
        tmp_path,
        f"""
name: score
stages:
  score:
    kind: electra.score
    checkpoint: {ckpt["tt"]}
    files: [{texts}, {jsonl}]
    nbest_dev: {dev}
    nbest_test: {test}
    metric: wer
    batch_size: 4
""",
    )
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    out = tmp_path / "run" / "score" / "outputs" / "scores"
    records = [json.loads(x) for x in (out / "sentences.jsonl").read_text().splitlines()]
    expected = _pll(scoring.load_scorer(ckpt["tt"]), SENTENCES)
    assert [r["line"] for r in records] == [1, 2, 3, 4, 5]
    assert [r["pll"] for r in records] == pytest.approx([e.pll for e in expected], abs=1e-4)
    assert {r["method"] for r in records} == {"electra-tt"}
    assert json.loads((out / "more.jsonl").read_text())["id"] == "x"
    report = json.loads((out / "rerank" / "report.json").read_text())
    assert report["metric"] == "wer" and report["lambda"] in rerank.DEFAULT_LAMBDAS
    assert report["dev"]["after"] <= report["dev"]["before"]
    assert len((out / "rerank" / "test.jsonl").read_text().splitlines()) == 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "electra-tt" and [f["lines"] for f in summary["files"]] == [5, 1]


def test_score_stage_reads_its_files_before_running(ckpt: dict[str, Path], tmp_path: Path) -> None:
    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.runs.preflight import preflight

    bad = tmp_path / "bad.txt"
    bad.write_text("the cat\n\n")
    nbest = tmp_path / "nbest.jsonl"
    nbest.write_text(
        '{"hypotheses": [{"text": "a", "score": 0}], "reference": "a"}\n{"hypotheses": [{"text": " ", "score": 0}]}\n'
    )
    recipe = write_recipe(
        tmp_path,
        f"name: s\nstages:\n  s: {{kind: electra.score, checkpoint: {ckpt['tt']}, files: {bad}, nbest_dev: {nbest}, metric: wer}}\n",
    )
    problems = preflight(load_recipe(recipe, [], make_host(autoload=True)), make_host(autoload=True))
    assert any(f"{bad}:2" in p and "empty text" in p for p in problems), problems
    assert any(f"{nbest}:2: reference: missing" in p for p in problems), problems
    nbest.write_text('{"hypotheses": [{"text": "a", "score": 0}, {"text": "", "score": 1}], "reference": "a"}\n')
    problems = preflight(load_recipe(recipe, [], make_host(autoload=True)), make_host(autoload=True))
    assert any(f"{nbest}:1: hypotheses[1]: a hypothesis is an empty text" in p for p in problems), problems


def test_xfer_score_command(ckpt: dict[str, Path], texts: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from xfer.core.cli import main

    out = tmp_path / "plls.jsonl"
    assert main(["score", str(ckpt["electric"]), str(texts), "--out", str(out), "--batch-size", "2"]) == 0
    records = [json.loads(x) for x in out.read_text().splitlines()]
    expected = _pll(scoring.load_scorer(ckpt["electric"]), SENTENCES)
    assert [r["pll"] for r in records] == pytest.approx([e.pll for e in expected], abs=1e-5)
    assert "electric (1 pass)" in capsys.readouterr().err

    assert main(["score", str(ckpt["mlm"]), str(texts), "--pieces", "--max-length", "5"]) == 0
    captured = capsys.readouterr()
    assert "longer than max_length 5, scored in windows" in captured.err  # says what it did with long lines
    printed = [json.loads(x) for x in captured.out.splitlines()]
    assert printed[2]["windows"] > 1 and len(printed[2]["pieces"]) == len(printed[2]["token_scores"]) == 14

    dev, test = _nbest_files(tmp_path)
    rr = tmp_path / "rr"
    assert main(["score", str(ckpt["tt"]), "--nbest-dev", str(dev), "--nbest-test", str(test), "--metric", "bleu",
                 "--lambdas", "0,0.5,1", "--rerank-dir", str(rr)]) == 0  # fmt: skip
    assert "n-best re-ranking" in capsys.readouterr().out
    assert json.loads((rr / "report.json").read_text())["signature"].startswith("nrefs:1")

    empty = tmp_path / "empty_line.txt"
    empty.write_text("the cat\n\n")
    for argv, message in [
        ([str(ckpt["electric"]), str(empty)], f"{empty}:2: empty text"),
        ([str(ckpt["electric"]), str(tmp_path / "missing.txt")], "missing.txt"),
        ([str(tmp_path), str(texts)], "not an xfer model directory|neither"),
        ([str(ckpt["electric"]), str(texts), "--out", str(texts)], "would be overwritten"),
        ([str(ckpt["electric"]), str(texts), "--out", str(texts / "x.jsonl")], "--out: cannot create"),
        ([str(ckpt["electric"]), "--nbest-dev", str(dev)], "--metric"),
        ([str(ckpt["electric"])], "nothing to do"),
        ([str(ckpt["tt"]), str(texts), "--method", "electric"], "electric.nce"),
    ]:
        assert main(["score", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert "Traceback" not in err and any(m in err for m in message.split("|")), (argv, err)
    assert main(["score", str(ckpt["electric"]), str(empty), "--empty", "zero"]) == 0
    assert '"empty": true' in capsys.readouterr().out

    unknown = tmp_path / "unknown.txt"
    unknown.write_text("the zebra sat\nthe cat\nqqq xx\n")  # zebra, qqq, xx: not in the vocabulary
    assert main(["score", str(ckpt["electric"]), str(unknown)]) == 0
    assert "; 3 [UNK] pieces" in capsys.readouterr().err  # they were scored silently
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"sentence": "the cat"}\n')
    assert main(["score", str(ckpt["electric"]), str(jsonl), "--text-field", "sentence"]) == 0
    assert '"tokens": 2' in capsys.readouterr().out
    for argv, message in [  # options that were silently ignored
        ([str(ckpt["electric"]), str(texts), "--text-field", "sentence"], "is read as plain text"),
        ([str(ckpt["electric"]), "--nbest-dev", str(dev), "--metric", "wer", "--text-field", "t"], "give a FILE"),
        ([str(ckpt["electric"]), str(texts), "--method", "electric", "--generator", str(ckpt["electric_gen"])],
         "--generator: method electric scores with the checkpoint alone"),
    ]:  # fmt: skip
        assert main(["score", *argv]) == 2, argv
        assert message in capsys.readouterr().err, argv


def test_precision_docs_do_not_promise_exact_sums() -> None:
    """fp32 PLLs depend on which texts share a batch (~1e-5): the docs said "exact sums"."""
    import dataclasses

    from xfer.electra import score_cli
    from xfer.electra.score_config import ScoreConfig

    doc = next(f.metadata["doc"] for f in dataclasses.fields(ScoreConfig) if f.name == "precision")
    assert "exact sums" not in doc and "not bit-exact" in doc
    assert "not bit-exact" in (scoring.__doc__ or "")
    parser = argparse.ArgumentParser()
    score_cli.configure(parser)
    assert "not bit-exact" in next(a.help or "" for a in parser._actions if "--precision" in a.option_strings)


def test_rerank_dir_never_overwrites_inputs_or_out(
    ckpt: dict[str, Path], texts: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """--rerank-dir DIR replaced DIR/dev.jsonl and DIR/test.jsonl even when they were the n-best
    inputs, and --out when it was one of DIR's outputs. Refused before the model loads: the
    checkpoint below does not exist, and the error is about the paths, not about it."""
    from xfer.core.cli import main

    dev, test = _nbest_files(tmp_path)
    before = {p: p.read_bytes() for p in (dev, test)}
    missing = str(tmp_path / "no-such-checkpoint")
    nbest = ["--nbest-dev", str(dev), "--nbest-test", str(test), "--metric", "wer"]
    for argv, message in [
        ([missing, *nbest, "--rerank-dir", str(tmp_path)], f"dev.jsonl would overwrite --nbest-dev {dev}"),
        ([missing, *nbest, "--rerank-dir", str(tmp_path / "x" / "..")], "would overwrite --nbest-dev"),
        ([missing, *nbest[2:], "--nbest-dev", str(texts), "--rerank-dir", str(tmp_path)], "test.jsonl would overwrite"),
        ([missing, str(texts), "--out", str(tmp_path / "rr" / "report.json"), *nbest, "--rerank-dir", str(tmp_path / "rr")],
         "its report.json would overwrite --out"),
        ([missing, str(texts), "--out", str(tmp_path / "rr" / "dev.jsonl"), *nbest, "--rerank-dir", str(tmp_path / "rr")],
         "its dev.jsonl would overwrite --out"),
    ]:  # fmt: skip
        assert main(["score", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "no-such-checkpoint" not in err, (argv, err)
    assert {p: p.read_bytes() for p in before} == before and not (tmp_path / "rr").exists()
    # test.jsonl is only written with --nbest-test, so DIR/test.jsonl as --out is fine without it
    rr = tmp_path / "rr2"
    argv = [str(ckpt["electric"]), str(texts), "--out", str(rr / "test.jsonl"), "--nbest-dev", str(dev)]
    assert main(["score", *argv, "--metric", "wer", "--rerank-dir", str(rr)]) == 0
    assert len((rr / "test.jsonl").read_text().splitlines()) == len(SENTENCES) and (rr / "dev.jsonl").exists()


def test_hf_export_records_the_objective_and_scoring_checks_it(
    ckpt: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """An HF ELECTRA discriminator scored with --method electric gave meaningless positive "PLLs"
    with no word, where its xfer layout is refused: ElectraForPreTraining holds either head."""
    import shutil

    from xfer.core.cli import main
    from xfer.transformer.hf import OBJECTIVE_KEY, export_hf
    from xfer.transformer.modelio import load_model_dir

    def export(name: str) -> Path:  # as electra.pretrain does: <output>/hf, naming the objective
        folder = shutil.copytree(ckpt[name], tmp_path / name)
        model = load_model_dir(folder)
        objective = json.loads((folder / "xfer_model.json").read_text())["objective"]
        export_hf(
            folder / "hf",
            model.build("encoder"),
            head=model.build("head"),
            vocab_file=folder / "vocab.txt",
            extra_config={OBJECTIVE_KEY: objective},
        )
        return folder / "hf"

    rtd, electric = export("rtd"), export("electric")
    assert json.loads((rtd / "config.json").read_text())[OBJECTIVE_KEY] == "electra.rtd"
    with pytest.raises(UserError, match=r"method electric needs an Electric \(electric\.nce\) checkpoint"):
        scoring.load_scorer(rtd, method="electric")
    with pytest.raises(UserError, match="does not say which generator"):
        scoring.load_scorer(rtd)
    auto = scoring.load_scorer(electric)  # the key makes `auto` work on an HF folder too
    assert auto.method == "electric" and not any("does not say how it was trained" in n for n in auto.notes)
    # a HF folder without the key (third-party, or exported before it existed): scored, with a note
    bare = tmp_path / "bare"
    shutil.copytree(rtd, bare)
    config = json.loads((bare / "config.json").read_text())
    del config[OBJECTIVE_KEY]
    (bare / "config.json").write_text(json.dumps(config))
    noted = scoring.load_scorer(bare, method="electric")
    assert any(
        "does not say how it was trained" in n and "only meaningful for an electric.nce model" in n for n in noted.notes
    )
    assert main(["score", str(bare), "--method", "electric", "--nbest-dev", str(_nbest_files(tmp_path)[0]),
                 "--metric", "wer"]) == 0  # fmt: skip
    assert "note: " in capsys.readouterr().err
    with pytest.raises(UserError, match=r"its config\.json has no 'xfer_objective'"):
        scoring.load_scorer(bare)


def test_max_length_beyond_the_trained_length_is_noted(ckpt: dict[str, Path]) -> None:
    """Positions past the trained length were never trained (scores moved by up to 14 nats per token)."""
    longer = scoring.load_scorer(ckpt["rtd"], max_length=22)  # rtd records max_length 20
    assert longer.max_length == 22
    assert any("longer than the 20 tokens the checkpoint was trained on" in n for n in longer.notes), longer.notes
    for max_length in (None, 20, 10):
        notes = scoring.load_scorer(ckpt["rtd"], max_length=max_length).notes
        assert not any("never trained" in n for n in notes), (max_length, notes)


def test_json_lines_are_never_scored_as_plain_text(tmp_path: Path) -> None:
    """A JSONL file named .json was scored as text: the raw `{"text": ...}` lines."""
    content = '{"id": 1, "text": "the cat"}\n{"text": "a dog"}\n'
    for suffix in (".json", ".ndjson", ".JSON"):
        path = tmp_path / f"in{suffix}"
        path.write_text(content)
        assert [x.text for x in scoring.read_texts(path)] == ["the cat", "a dog"]
    disguised = tmp_path / "in.txt"
    disguised.write_text("\n" + content)
    with pytest.raises(DataError, match=rf"{disguised}:2: looks like JSON lines.*--format jsonl.*--format text"):
        scoring.read_texts(disguised)
    assert [x.text for x in scoring.read_texts(disguised, "text")][1] == '{"id": 1, "text": "the cat"}'
    assert [x.text for x in scoring.read_texts(disguised, "jsonl")] == ["the cat", "a dog"]
    for text in ("[1, 2]\n", "{not json}\n", "the {cat}\n", '"a string"\n'):  # not an object: plain text
        (tmp_path / "plain.txt").write_text(text)
        assert len(scoring.read_texts(tmp_path / "plain.txt")) == 1


@pytest.mark.skipif(not Path(sys.executable).with_name("torchrun").exists(), reason="torchrun not installed")
def test_two_processes_write_what_one_process_writes(ckpt: dict[str, Path], texts: Path, tmp_path: Path) -> None:
    dev, _ = _nbest_files(tmp_path)
    recipe = write_recipe(
        tmp_path,
        f"name: ddp\nstages:\n  score: {{kind: electra.score, checkpoint: {ckpt['mlm']}, files: {texts}, "
        f"nbest_dev: {dev}, metric: wer, max_length: 8}}\n",
    )
    run_recipe_file(recipe, tmp_path / "one", make_host(autoload=True))
    command = [str(Path(sys.executable).with_name("torchrun")), "--standalone", "--nproc_per_node=2"]
    command += ["-m", "xfer.core.cli", "run", str(recipe), "--run-dir", str(tmp_path / "two")]
    result = subprocess.run(command, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    one, two = (tmp_path / run / "score" / "outputs" / "scores" for run in ("one", "two"))
    records = [[json.loads(x) for x in (d / "sentences.jsonl").read_text().splitlines()] for d in (one, two)]
    assert [r["pll"] for r in records[1]] == pytest.approx([r["pll"] for r in records[0]], abs=1e-4)
    assert [{**r, "pll": 0} for r in records[1]] == [{**r, "pll": 0} for r in records[0]]
    assert any(r.get("windows", 1) > 1 for r in records[0])  # windows are split across ranks too
    reports = [json.loads((d / "rerank" / "report.json").read_text()) for d in (one, two)]
    assert reports[1]["lambda"] == reports[0]["lambda"] and reports[1]["dev"] == reports[0]["dev"]


# --- line endings, argument order, MLM variants, several inputs, stale outputs, formats ----------------


def test_cr_only_line_endings_are_errors_not_one_text(ckpt: dict[str, Path], tmp_path: Path) -> None:
    """A file with CR-only (classic Mac) line endings was read as one text, silently."""
    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.runs.preflight import preflight

    mac = tmp_path / "mac.txt"
    mac.write_bytes(b"the cat sat .\rthe dog ran .\r")
    with pytest.raises(DataError, match=rf"{mac}:1: carriage return \(CR\) inside the line at column 14"):
        scoring.read_texts(mac)
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"the cat sat .\r\nthe dog ran .\r\n")  # CRLF is fine: its CR ends the line
    assert [x.text for x in scoring.read_texts(crlf)] == ["the cat sat .", "the dog ran ."]
    nbest = tmp_path / "mac.jsonl"
    nbest.write_bytes(b'{"hypotheses": [{"text": "a", "score": 0}]}\r{"hypotheses": [{"text": "b", "score": 0}]}\r')
    with pytest.raises(DataError, match=rf"{nbest}:1: carriage return"):
        rerank.read_nbest(nbest)
    recipe = write_recipe(
        tmp_path, f"name: s\nstages:\n  s: {{kind: electra.score, checkpoint: {ckpt['electric']}, files: {mac}}}\n"
    )
    problems = preflight(load_recipe(recipe, [], make_host(autoload=True)), make_host(autoload=True))
    assert any(f"{mac}:1: carriage return" in p for p in problems), problems
    with pytest.raises(DataError, match=rf"{mac}:1: carriage return"):  # the stage itself, past preflight
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True), preflight=False)


def test_file_may_come_after_the_options(
    ckpt: dict[str, Path], texts: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`xfer score CKPT --out o.jsonl a.txt` said "unrecognized arguments: a.txt"."""
    from xfer.core.cli import main

    for i, argv in enumerate(([str(texts)], ["--", str(texts)])):
        out = tmp_path / f"o{i}.jsonl"
        assert main(["score", str(ckpt["electric"]), "--out", str(out), "--batch-size", "2", *argv]) == 0, argv
        assert [json.loads(x)["line"] for x in out.read_text().splitlines()] == [1, 2, 3, 4, 5]
    capsys.readouterr()
    for argv in ([str(texts), "--out", str(tmp_path / "x.jsonl"), "b.txt"], ["--out", str(tmp_path / "x.jsonl"),
                 str(texts), "b.txt"]):  # fmt: skip
        with pytest.raises(SystemExit) as stopped:  # two stray positionals are still an error
            main(["score", str(ckpt["electric"]), *argv])
        assert stopped.value.code == 2 and "unrecognized arguments:" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


@pytest.fixture(scope="module")
def mlm_variants(ckpt: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Main models of electra.rtd runs with the replace_mlm (with its mlm generator next to it) and
    all_tokens_mlm (unigram generator: none exported) variants: masked-LM heads, as exported."""
    from xfer.transformer.modelio import load_model_dir

    root = tmp_path_factory.mktemp("variants")
    masked = load_model_dir(ckpt["mlm"])
    modules = {"encoder": masked.build("encoder"), "head": masked.build("head")}
    out = {}
    for variant, kind in (("replace_mlm", "mlm"), ("all_tokens_mlm", "unigram")):
        meta = {
            "objective": "electra.rtd",
            "objective_family": "electra.rtd",
            "objective_config": {"mask_prob": 0.15, "variant": variant, "generator": {"kind": kind}},
        }
        out[variant] = _save(root / variant / "discriminator", modules, {**meta, "role": "discriminator"}, _tokenizer())
        if kind == "mlm":
            out[f"{variant}_gen"] = _save(
                root / variant / "generator", modules, {**meta, "role": "generator"}, _tokenizer()
            )
    return out


def test_mlm_variants_of_electra_are_not_scored_as_mask_trained_mlms(
    mlm_variants: dict[str, Path], texts: Path, capsys: pytest.CaptureFixture
) -> None:
    """The main model of a replace_mlm / all_tokens_mlm run (never trained with [MASK] at the
    positions it predicts) was scored by `auto` as a [MASK]-trained MLM, with no word."""
    from xfer.core.cli import main

    replace, generator = mlm_variants["replace_mlm"], mlm_variants["replace_mlm_gen"]
    with pytest.raises(
        UserError,
        match=rf"variant 'replace_mlm'.*score the run's masked-LM generator instead \({generator}.*--method mlm",
    ):
        scoring.load_scorer(replace)
    with pytest.raises(UserError, match=r"variant 'all_tokens_mlm'.*copy head.*exported no generator.*unigram"):
        scoring.load_scorer(mlm_variants["all_tokens_mlm"])
    forced = scoring.load_scorer(replace, method="mlm")  # asked for explicitly: scored, and said what it is
    assert forced.method == "mlm" and any("variant 'replace_mlm'" in n and "as asked" in n for n in forced.notes)
    own = scoring.load_scorer(generator)  # the run's generator (same objective config, role generator) is fine
    assert own.method == "mlm" and not any("variant" in n for n in own.notes)
    assert main(["score", str(replace), str(texts)]) == 2
    err = capsys.readouterr().err
    assert "variant 'replace_mlm'" in err and "Traceback" not in err


def _stage_scores(tmp_path: Path, name: str, stage: str) -> Path:
    recipe = write_recipe(tmp_path, f"name: {name}\nstages:\n  s: {{kind: electra.score, {stage}}}\n")
    run_recipe_file(recipe, tmp_path / name, make_host(autoload=True), preflight=False)  # the stage's own checks
    return tmp_path / name / "s" / "outputs" / "scores"


def test_stage_nbest_ids_are_unique_across_files(ckpt: dict[str, Path], tmp_path: Path) -> None:
    """Lists of several n-best files without ids all got their line numbers: ids collided in rerank/dev.jsonl."""
    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.runs.preflight import preflight

    dev, _ = _nbest_files(tmp_path)
    rows = [json.loads(x) for x in dev.read_text().splitlines()]
    for folder in ("x", "y"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "dev.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "id"}) + "\n" for r in rows))  # fmt: skip
    files = f"[{tmp_path / 'x' / 'dev.jsonl'}, {tmp_path / 'y' / 'dev.jsonl'}]"
    out = _stage_scores(tmp_path, "ids", f"checkpoint: {ckpt['electric']}, nbest_dev: {files}, metric: wer")
    ids = [json.loads(x)["id"] for x in (out / "rerank" / "dev.jsonl").read_text().splitlines()]
    assert ids == [f"{d}/dev.jsonl:{n}" for d in "xy" for n in (1, 2, 3)]
    # explicit ids given in two files: refused, naming both (at preflight, and by the stage)
    (tmp_path / "y" / "dev.jsonl").write_text(dev.read_text())
    (tmp_path / "x" / "dev.jsonl").write_text(dev.read_text())
    stage = f"checkpoint: {ckpt['electric']}, nbest_dev: {files}, metric: wer"
    recipe = write_recipe(tmp_path, f"name: dup\nstages:\n  s: {{kind: electra.score, {stage}}}\n")
    message = rf"{tmp_path / 'y' / 'dev.jsonl'}:1: id: duplicate id 'u0': {tmp_path / 'x' / 'dev.jsonl'} line 1"
    problems = preflight(load_recipe(recipe, [], make_host(autoload=True)), make_host(autoload=True))
    assert any(re.search(message, p) for p in problems), problems
    with pytest.raises(DataError, match=message):
        run_recipe_file(recipe, tmp_path / "dup", make_host(autoload=True), preflight=False)


def test_stage_output_names_are_unique_by_construction(ckpt: dict[str, Path], tmp_path: Path) -> None:
    """x/a.txt, y/a.txt and z/00-a.txt were all written to 00-a.jsonl or 00-a.jsonl: one input's scores lost."""
    from xfer.electra.score_stage import output_names

    paths = [Path("x/a.txt"), Path("y/a.txt"), Path("z/00-a.txt")]
    assert output_names(paths) == ["00-a.jsonl", "01-a.jsonl", "02-00-a.jsonl"]
    assert output_names([Path("a.txt"), Path("b.jsonl")]) == ["a.jsonl", "b.jsonl"]  # distinct stems: unchanged
    assert len(set(output_names([Path("A.txt"), Path("a.txt")]))) == 2  # one file on a case-insensitive disk
    for folder, name, text in (("x", "a.txt", "the cat\n"), ("y", "a.txt", "a dog ran\n"), ("z", "00-a.txt", "the mat\nis red\n")):  # fmt: skip
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text(text)
    files = f"[{tmp_path / 'x' / 'a.txt'}, {tmp_path / 'y' / 'a.txt'}, {tmp_path / 'z' / '00-a.txt'}]"
    out = _stage_scores(tmp_path, "names", f"checkpoint: {ckpt['electric']}, files: {files}")
    summary = json.loads((out / "summary.json").read_text())
    tokens = {f["output"]: [json.loads(x)["tokens"] for x in (out / f["output"]).read_text().splitlines()] for f in summary["files"]}  # fmt: skip
    assert tokens == {"00-a.jsonl": [2], "01-a.jsonl": [3], "02-00-a.jsonl": [2, 2]}


def test_rerank_dir_holds_only_this_runs_files(
    ckpt: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A test.jsonl of an earlier run with --nbest-test stayed next to a report.json without a test set."""
    from xfer.core.cli import main

    dev, test = _nbest_files(tmp_path)
    rr = tmp_path / "rr"
    argv = ["score", str(ckpt["electric"]), "--nbest-dev", str(dev), "--metric", "wer", "--rerank-dir", str(rr)]
    assert main([*argv, "--nbest-test", str(test)]) == 0
    assert (rr / "test.jsonl").exists() and "test" in json.loads((rr / "report.json").read_text())
    assert main(argv) == 0
    assert sorted(p.name for p in rr.iterdir()) == ["dev.jsonl", "report.json"]
    assert "test" not in json.loads((rr / "report.json").read_text())
    capsys.readouterr()


def test_command_checks_nbest_lists_before_writing_anything(
    ckpt: dict[str, Path], texts: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A blank hypothesis exited 2 only after --out had been (over)written; so did a special token."""
    from xfer.core.cli import main

    out = tmp_path / "o.jsonl"
    out.write_text("old\n")
    nbest = tmp_path / "blank.jsonl"
    nbest.write_text(
        '{"hypotheses": [{"text": "the cat", "score": 0}, {"text": " ", "score": 1}], "reference": "the cat"}\n'
    )
    argv = ["score", str(ckpt["electric"]), str(texts), "--out", str(out), "--nbest-dev", str(nbest), "--metric", "wer"]
    assert main(argv) == 2
    assert out.read_text() == "old\n"
    err = capsys.readouterr().err
    assert f"{nbest}:1: hypotheses[1]: a hypothesis is an empty text" in err and "method:" not in err  # before loading
    nbest.write_text('{"hypotheses": [{"text": "the [MASK]", "score": 0}], "reference": "the cat"}\n')
    assert main(argv) == 2
    assert (
        "[MASK]" in capsys.readouterr().err and out.read_text() == "old\n"
    )  # found while scoring, still before writing
    assert main([*argv, "--empty", "zero"]) == 2  # --empty zero: blank allowed, the special token is not
    capsys.readouterr()


def test_stage_format_knob(ckpt: dict[str, Path], tmp_path: Path) -> None:
    """A .txt of JSON lines could not be scored by a recipe, and the error said to pass --format."""
    import dataclasses

    from xfer.core.config import UNSIGNED_AT
    from xfer.electra.score_config import ScoreConfig

    data = tmp_path / "data.txt"
    data.write_text('{"id": "a", "sentence": "the cat"}\n{"id": "b", "sentence": "a dog ran"}\n')
    stage = f"checkpoint: {ckpt['electric']}, files: {data}"
    with pytest.raises(DataError, match=r":1: looks like JSON lines.*set format: jsonl in the electra.score stage"):
        _stage_scores(tmp_path, "auto", stage)
    with pytest.raises(UserError, match=r"text_field: 'sentence', but every file of `files` is read as plain text"):
        _stage_scores(tmp_path, "field", f"{stage}, text_field: sentence")
    with pytest.raises(UserError, match=r"text_field"):
        _stage_scores(tmp_path, "text", f"{stage}, text_field: sentence, format: text")
    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.runs.preflight import preflight

    recipe = write_recipe(
        tmp_path, f"name: pre\nstages:\n  s: {{kind: electra.score, {stage}, text_field: sentence}}\n"
    )
    problems = preflight(load_recipe(recipe, [], make_host(autoload=True)), make_host(autoload=True))
    assert any("text_field: 'sentence'" in p for p in problems) and any("set format: jsonl" in p for p in problems)
    out = _stage_scores(tmp_path, "jsonl", f"{stage}, text_field: sentence, format: jsonl")
    records = [json.loads(x) for x in (out / "data.jsonl").read_text().splitlines()]
    assert [(r["id"], r["tokens"]) for r in records] == [("a", 2), ("b", 3)]
    field = next(f for f in dataclasses.fields(ScoreConfig) if f.name == "format")
    assert field.metadata[UNSIGNED_AT] == "auto"  # existing runs' fingerprints stay valid


def test_score_takes_a_hub_id_from_the_local_cache_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`xfer score google/electra-small-generator FILE`: the id is looked up in the local Hugging
    Face cache; when it is not there the error says so and how to fetch it (it was "does not exist")."""
    from xfer.core.cli import main

    texts = tmp_path / "t.txt"
    texts.write_text("a b\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    assert main(["score", "google/electra-small-generator", str(texts), "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert (
        "google/electra-small-generator: no such folder; as a Hugging Face Hub id it is not in the local cache" in err
    )
    assert "hf download google/electra-small-generator" in err

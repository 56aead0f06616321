"""PLL scoring and n-best re-ranking (`xfer.electra.scoring`, `rerank`, the `electra.score` stage, `xfer score`).

Every scorer is checked against a naive computation written here from the definitions (one
sentence and, for MLM, one masked position at a time, full-sequence forward passes); windows,
empty lines, bad files and re-ranking on n-best lists whose answer is known. Checkpoints are tiny
random models written with `save_model_dir` once per module (no training).
"""

from __future__ import annotations

import json
import math
import os
import random
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
from xfer.transformer.encoder import Encoder, EncoderConfig
from xfer.transformer.modelio import save_model_dir
from xfer.transformer.tokenization import WordPieceTokenizer

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


def _config(vocab: int) -> EncoderConfig:
    return EncoderConfig(
        vocab_size=vocab,
        embedding_size=16,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_position_embeddings=MAX_POSITIONS,
    )


def _save(folder: Path, modules: dict, meta: dict, tokenizer: WordPieceTokenizer) -> Path:
    save_model_dir(folder, modules, meta)
    tokenizer.save(folder)
    return folder


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> object:
    """Tiny models gain nothing from threads, and spinning threads on a loaded machine cost seconds."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Checkpoints laid out as electra.pretrain writes them (random weights, non-trivial biases)."""
    root = tmp_path_factory.mktemp("ckpt")
    tokenizer = _tokenizer()
    torch.manual_seed(0)
    config = _config(tokenizer.vocab_size)
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
    assert not any("position embeddings" in note for note in rtd.notes)
    assert any("position embeddings" in note for note in scoring.load_scorer(ckpt["electric"]).notes)
    assert scoring.load_scorer(ckpt["electric_gen"]).method == "two-tower"
    two_tower = scoring.load_scorer(ckpt["electric"], method="two-tower")
    assert isinstance(two_tower.scorer, scoring.TwoTowerScorer)
    ignored = scoring.load_scorer(ckpt["mlm"], generator=ckpt["tt_gen"])
    assert any("ignored" in note for note in ignored.notes)
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
    assert any(f"{nbest}:1: a hypothesis is an empty text" in p for p in problems), problems


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

"""Hostile review of PLL scoring and n-best re-ranking (`xfer.electra.scoring`, `rerank`, `xfer score`).

PLLs are recomputed here by hand from their definitions (MLM: one [MASK] at a time, one sentence
per forward pass, windows chosen here from the documented rule), with a 1e-5 tolerance; the
input readers are attacked with JSON that parses but cannot be scored or written back (NaN,
lone surrogates, keys given twice, 4300-digit integers, deep nesting) and with BOMs, CRLF and bad
bytes; `--out` must keep its old content when the write fails and never replace an input or a
model file; the stage must not score a file twice. Tiny random checkpoints, no training.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from xfer.core.errors import DataError
from xfer.electra import rerank, scoring
from xfer.electra.heads import DiscriminatorHead
from xfer.electra.model import MaskedGenerator, TwoTower
from xfer.transformer.encoder import Encoder
from xfer.transformer.modelio import save_model_dir
from xfer.transformer.tokenization import WordPieceTokenizer

from .electra_recipes import scoring_config, spread_weights

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "ran", "big", "red", "small", "blue", "and"]
SENTENCES = [
    "the cat sat on the mat",
    "cats",  # one word, two pieces: cat ##s
    "the dogs ran and the cats sat",
    "the big red dog sat on a small blue mat and the cat ran and the dogs sat on the mats",
    "a",
]
MAX_POSITIONS = 24


def _tokenizer() -> WordPieceTokenizer:
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s"]
    return WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(tokens)})


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An MLM, an Electric and an ELECTRA-TT checkpoint (random weights spread out, so scores are not ~0)."""
    root = tmp_path_factory.mktemp("hostile")
    tokenizer = _tokenizer()
    torch.manual_seed(1)
    config = scoring_config(tokenizer.vocab_size, MAX_POSITIONS)
    encoder, head, cloze, mlm = (
        Encoder(config),
        DiscriminatorHead(16),
        TwoTower(config, None),
        MaskedGenerator(config, None),
    )
    spread_weights(encoder, head, cloze, mlm)
    towers = {"ltr": cloze.ltr, "rtl": cloze.rtl, "head": cloze.head}
    metas = {
        "mlm": {"objective": "electra.mlm", "objective_config": {"mask_prob": 0.15}},
        "electric": {"objective": "electric.nce", "objective_config": {"generator": {"kind": "two_tower"}}},
        "tt": {"objective": "electra.rtd", "objective_config": {"mask_prob": 0.15, "generator": {"kind": "two_tower"}}},
    }
    out = {}
    for name, meta in metas.items():
        main = {"encoder": mlm.encoder, "head": mlm.head} if name == "mlm" else {"encoder": encoder, "head": head}
        save_model_dir(root / name / "discriminator", main, meta)
        tokenizer.save(root / name / "discriminator")
        if name != "mlm":
            save_model_dir(root / name / "generator", towers, meta)
            tokenizer.save(root / name / "generator")
        out[name] = root / name / "discriminator"
    return out


def _lines(sentences: list[str]) -> list[scoring.Line]:
    return [scoring.Line(s, "<test>", i + 1) for i, s in enumerate(sentences)]


# --- 1. MLM PLL by hand ------------------------------------------------------------------------------


def _owner_window(position: int, n: int, budget: int) -> int:
    """The start of the window that scores `position`, from the documented rule (written here, not
    taken from `scoring.windows`): windows of `budget` pieces every budget // 2, the last one
    ending at the text's end; a piece goes to the window giving it the most context on its
    nearer side, the earlier window on a tie."""
    if n <= budget:
        return 0
    starts = [*range(0, n - budget, budget // 2), n - budget]
    inside = [lo for lo in starts if lo <= position < lo + budget]
    return max(inside, key=lambda lo: (min(position - lo, lo + budget - 1 - position), -lo))


@pytest.mark.parametrize("max_length", [None, 8])
def test_mlm_pll_equals_a_hand_computation_one_mask_at_a_time(ckpt: dict[str, Path], max_length: int | None) -> None:
    loaded = scoring.load_scorer(ckpt["mlm"], max_length=max_length)
    tokenizer, mlm = loaded.tokenizer, loaded.scorer.mlm
    budget = loaded.max_length - 2
    hand = []
    for sentence in SENTENCES:
        pieces = tokenizer.backend.encode(sentence, add_special_tokens=False).ids
        scores = []
        for position in range(len(pieces)):
            lo = _owner_window(position, len(pieces), budget)
            ids = torch.tensor([[tokenizer.cls_id, *pieces[lo : lo + budget], tokenizer.sep_id]])
            masked = ids.clone()
            masked[0, 1 + position - lo] = tokenizer.mask_id
            with torch.no_grad():
                hidden = mlm.encoder(masked, torch.ones_like(ids), torch.zeros_like(ids)).last_hidden_state[0]
                log_p = mlm.head(hidden, mlm.encoder.embeddings.word.weight).log_softmax(-1)
            scores.append(log_p[1 + position - lo, pieces[position]].item())
        hand.append(scores)
    assert len(hand[1]) == 2  # "cats" is two pieces, both scored
    if max_length == 8:
        assert len(hand[3]) > 3 * budget  # the long sentence really needs several windows
    for batch_size in (1, 5, 1000):  # rows of sentences of different lengths share a padded batch, or not
        got = scoring.score_lines(loaded, _lines(SENTENCES), batch_size)
        for expected, score in zip(hand, got, strict=True):
            assert score.tokens == len(expected)
            assert score.token_scores == pytest.approx(expected, abs=1e-5)
            assert score.pll == pytest.approx(math.fsum(expected), abs=1e-5 * len(expected))
            assert abs(score.pll) > 0.1


# --- 2. one-pass methods: no dependence on batch composition or padding ---------------------------------


@pytest.mark.parametrize("name,method", [("electric", "electric"), ("tt", "electra-tt"), ("electric", "two-tower")])
def test_one_pass_scores_do_not_depend_on_the_batch(ckpt: dict[str, Path], name: str, method: str) -> None:
    loaded = scoring.load_scorer(ckpt[name], method=method)
    alone = [scoring.score_lines(loaded, [line], 1)[0] for line in _lines(SENTENCES)]
    for batch_size in (2, 64):  # padded to the longest sentence of the batch
        for got, single in zip(scoring.score_lines(loaded, _lines(SENTENCES), batch_size), alone, strict=True):
            assert got.token_scores == pytest.approx(single.token_scores, abs=1e-5)


def test_electra_tt_by_hand_in_windows(ckpt: dict[str, Path]) -> None:
    """log q(x_t | context) + log(0.15 / 0.85) - (detection logit)_t, each window read on its own."""
    loaded = scoring.load_scorer(ckpt["tt"], max_length=8)
    tokenizer, scorer = loaded.tokenizer, loaded.scorer
    assert isinstance(scorer, scoring.ElectraTTScorer)
    pieces = tokenizer.backend.encode(SENTENCES[3], add_special_tokens=False).ids
    budget = loaded.max_length - 2
    hand = []
    for position in range(len(pieces)):
        lo = _owner_window(position, len(pieces), budget)
        ids = torch.tensor([[tokenizer.cls_id, *pieces[lo : lo + budget], tokenizer.sep_id]])
        ones, zeros, t = torch.ones_like(ids), torch.zeros_like(ids), 1 + position - lo
        with torch.no_grad():
            log_q = scorer.cloze.logits_at(ids, ones, zeros, torch.tensor([t])).log_softmax(-1)[0, pieces[position]]
            replaced = scorer.head(scorer.encoder(ids, ones, zeros).last_hidden_state[0])[t]
        hand.append((log_q + math.log(0.15 / 0.85) - replaced).item())
    for batch_size in (1, 4):
        [got] = [s for s in scoring.score_lines(loaded, _lines(SENTENCES), batch_size) if s.tokens == len(pieces)]
        assert got.windows > 3 and got.token_scores == pytest.approx(hand, abs=1e-5)


def test_two_tower_context_never_sees_the_token_it_predicts(ckpt: dict[str, Path]) -> None:
    cloze = scoring.load_scorer(ckpt["electric"], method="two-tower").scorer.cloze
    ids = torch.tensor([[2, 5, 6, 7, 8, 9, 3]])
    ones, zeros = torch.ones_like(ids), torch.zeros_like(ids)
    with torch.no_grad():
        base = cloze.logits_at(ids, ones, zeros, torch.arange(7))
        for position in range(1, 6):
            changed = ids.clone()
            changed[0, position] = 10
            other = cloze.logits_at(changed, ones, zeros, torch.arange(7))
            assert torch.equal(other[position], base[position])
            assert not torch.allclose(other[position - 1], base[position - 1])  # the neighbours do see it


# --- 3. --out ----------------------------------------------------------------------------------------


def test_out_keeps_its_old_content_when_the_write_fails(
    ckpt: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from xfer.core import atomic
    from xfer.core.cli import main

    texts = tmp_path / "in.txt"
    texts.write_text("the cat\na dog\n")
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")

    def fail(path: Path) -> None:  # the data is in the temporary file, the rename has not happened
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic, "fsync_file", fail)
    assert main(["score", str(ckpt["electric"]), str(texts), "--out", str(out)]) == 2
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.jsonl"]


def test_out_naming_the_input_another_way_is_refused(ckpt: dict[str, Path], tmp_path: Path) -> None:
    from xfer.core.cli import main

    texts = tmp_path / "in.txt"
    texts.write_text("the cat\n")
    (tmp_path / "link.txt").symlink_to("in.txt")
    (tmp_path / "hard.txt").hardlink_to(texts)
    (tmp_path / "sub").mkdir()
    for out in ("link.txt", "hard.txt", "sub/../in.txt"):
        assert main(["score", str(ckpt["electric"]), str(texts), "--out", str(tmp_path / out)]) == 2
        assert texts.read_text() == "the cat\n"
    assert main(["score", str(ckpt["electric"]), str(tmp_path / "link.txt"), "--out", str(texts)]) == 2


def test_out_never_overwrites_a_file_of_the_model(
    ckpt: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`--out CKPT/vocab.txt` replaced the checkpoint's vocabulary with the scores (after loading it):
    the model could not be loaded again. The model's files are inputs too; scores kept next to it are not."""
    import shutil

    from xfer.core.cli import main

    model = tmp_path / "electric"
    shutil.copytree(ckpt["electric"].parent, model)
    texts = tmp_path / "in.txt"
    texts.write_text("the cat\n")
    before = {p: p.read_bytes() for p in model.rglob("*") if p.is_file()}
    (tmp_path / "link.txt").symlink_to(model / "generator" / "vocab.txt")
    for out in (
        model / "discriminator" / "vocab.txt",
        model / "discriminator" / ".." / "discriminator" / "xfer_model.json",
        model / "discriminator" / "model.safetensors",
        model / "discriminator" / "config.json",  # not there, but written it would make the folder look like HF's
        model / "generator" / "tokenizer.json",  # the generator next to the checkpoint
        tmp_path / "link.txt",
    ):
        assert main(["score", str(model / "discriminator"), str(texts), "--out", str(out)]) == 2, out
        assert "is a file of the model in" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in model.rglob("*") if p.is_file()} == before
    for _ in range(2):  # scores next to the model: allowed, and again
        assert main(["score", str(model / "discriminator"), str(texts), "--out", str(model / "plls.jsonl")]) == 0


# --- 4. JSON values that parse but cannot be scored or written back ----------------------------------


@pytest.mark.parametrize(
    "line,message",
    [
        ('{"id": NaN, "text": "the cat"}', r":2: id: nan is not a finite number"),
        ('{"id": {"n": Infinity}, "text": "the cat"}', r":2: id: inf is not a finite number"),
        ('{"id": 1e400, "text": "the cat"}', r":2: id: inf is not a finite number"),
        ('{"id": "u\\ud800", "text": "the cat"}', r":2: id: lone surrogate escape \\ud800"),
        ('{"text": "the \\udc00 cat"}', r":2: text: lone surrogate escape \\udc00 at character 4"),
        ('{"text": "the cat", "text": "a dog"}', r":2: key 'text' given twice"),
        ('{"text": "the cat", "meta": {"a": 1, "a": 2}}', r":2: key 'a' given twice"),
        ('{"text": "the cat", "id": ' + "9" * 5000 + "}", r":2: not valid JSON: Exceeds the limit"),  # a ValueError
        (
            '{"text": "the cat", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
            r":2: not valid JSON: .* nested too deeply",
        ),
    ],
)
def test_jsonl_values_that_would_crash_later_are_errors_naming_the_line(
    tmp_path: Path, line: str, message: str
) -> None:
    """They were read, scored, and then crashed the tokenizer (a bare TypeError on a lone surrogate)
    or the writer (ValueError: NaN is not JSON; UnicodeEncodeError), after all the scoring; a key
    given twice silently scored the last value."""
    path = tmp_path / "in.jsonl"
    path.write_text('{"text": "a dog"}\n' + line + "\n")
    with pytest.raises(DataError, match=rf"{path}{message}"):
        scoring.read_texts(path)


def test_xfer_score_refuses_them_before_writing_anything(
    ckpt: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from xfer.core.cli import main

    texts = tmp_path / "in.txt"
    texts.write_text("the cat\n")
    nbest = tmp_path / "dev.jsonl"
    nbest.write_text(
        '{"id": "u1", "hypotheses": [{"text": "the cat", "score": -1, "am": NaN}, {"text": "a dog", "score": -2}], '
        '"reference": "the cat"}\n'
    )
    out, folder = tmp_path / "out.jsonl", tmp_path / "rr"
    argv = ["score", str(ckpt["electric"]), str(texts), "--out", str(out), "--nbest-dev", str(nbest), "--metric", "wer"]
    assert main([*argv, "--rerank-dir", str(folder)]) == 2  # was a ValueError traceback after --out was written
    err = capsys.readouterr().err
    assert f"{nbest}:1: hypotheses[0].am: nan is not a finite number" in err and "method:" not in err
    assert not out.exists() and not (folder / "dev.jsonl").exists()
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text('{"id": NaN, "text": "the cat"}\n')
    assert main(["score", str(ckpt["electric"]), str(jsonl)]) == 2
    assert f"{jsonl}:1: id: nan" in capsys.readouterr().err


@pytest.mark.parametrize(
    "hypothesis,reference,message",
    [
        ('{"text": "the \\ud800", "score": 0}', '"x"', r"hypotheses\[0\]\.text: lone surrogate"),
        ('{"text": "the cat", "score": 0, "am": -Infinity}', '"x"', r"hypotheses\[0\]\.am: -inf is not"),
        ('{"text": "the cat", "score": 0, "nb": [1, NaN]}', '"x"', r"hypotheses\[0\]\.nb: nan is not"),
        ('{"text": "the cat", "score": 0}', '"the \\udc00"', r"reference: lone surrogate"),
        ('{"text": "the cat", "score": 0, "text": "a dog"}', '"x"', r"key 'text' given twice"),
    ],
)
def test_nbest_values_that_cannot_be_scored_or_written_are_errors(
    tmp_path: Path, hypothesis: str, reference: str, message: str
) -> None:
    path = tmp_path / "dev.jsonl"
    path.write_text(f'{{"hypotheses": [{hypothesis}], "reference": {reference}}}\n')
    with pytest.raises(DataError, match=rf"{path}:1: {message}"):
        rerank.read_nbest(path, need_reference=True)
    path.write_text('{"id": "\\ud800", "hypotheses": [{"text": "a", "score": 0}]}\n')
    with pytest.raises(DataError, match=rf"{path}:1: id: lone surrogate"):
        rerank.read_nbest(path)


def test_jsonl_encodings_and_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"text": "the cat"}\r\n\r\n{"text": "a dog", "id": 7}')  # BOM, CRLF, no final LF
    assert [(x.text, x.line, x.id) for x in scoring.read_texts(path)] == [("the cat", 1, None), ("a dog", 3, 7)]
    path.write_bytes(b'{"text": "the cat"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(DataError, match=rf"{path}:2: encoding: not valid UTF-8"):
        scoring.read_texts(path)
    path.write_bytes(b"")
    with pytest.raises(DataError, match=rf"{path}:1: file is empty"):
        scoring.read_texts(path)
    path.write_text("\n\n")
    with pytest.raises(DataError, match="no records to score"):
        scoring.read_texts(path)


# --- 5. re-ranking -------------------------------------------------------------------------------------


def _lists(rows: list[tuple[str, list[tuple[str, float]]]]) -> list[rerank.NBestList]:
    return [
        rerank.NBestList(i, tuple(rerank.Hypothesis(t, s) for t, s in hyps), ref, "<mem>", i + 1)
        for i, (ref, hyps) in enumerate(rows)
    ]


def test_wer_and_bleu_match_hand_and_sacrebleu() -> None:
    import sacrebleu

    references = ["the cat sat on the mat", "a dog ran", "hello world"]
    hypotheses = ["the cat sit on mat", "a big dog ran fast", "world hello"]
    # 1 substitution + 1 deletion; 2 insertions; "hello world" -> "world hello": 2 edits; 11 reference words
    assert [rerank.word_errors(r, h) for r, h in zip(references, hypotheses, strict=True)] == [2, 2, 2]
    assert rerank.wer(references, hypotheses) == pytest.approx(100 * 6 / 11)
    bleu = rerank.corpus_metric("bleu", references, hypotheses)[0]
    assert bleu == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)


def test_lambda_ties_and_one_hypothesis_lists() -> None:
    lists = _lists([("a b", [("a b", -1.0)]), ("c", [("c d", -2.0)])])
    result = rerank.rerank_nbest("wer", lists, [[-3.0], [-4.0]], grid=[0.5, 1.0, 0.2])
    assert result.lam == 0.2 and [lam for lam, _ in result.grid] == [0.2, 0.5, 1.0]  # every λ ties: the smallest
    assert [r["best"] for r in result.dev_records] == ["a b", "c d"]
    # a tie inside a list: the earlier hypothesis, whatever the λ
    tied = _lists([("x", [("y", -1.0), ("x", -1.0)])])
    assert rerank.best_indices(tied, [[-2.0, -2.0]], 0.7) == [0]


def test_a_duplicate_id_from_a_line_number_says_where_it_came_from(tmp_path: Path) -> None:
    """`{"id": 2}` on line 1 and a list without an id on line 2 was "duplicate id 2 (first on line 1)",
    about a line that gives no id at all."""
    path = tmp_path / "dev.jsonl"
    hypotheses = '"hypotheses": [{"text": "a", "score": 0}]'
    path.write_text(f'{{"id": 2, {hypotheses}}}\n{{{hypotheses}}}\n')
    with pytest.raises(DataError, match=rf"{path}:2: id: duplicate id 2: line 2 has no id, .* line 1 gives that id"):
        rerank.read_nbest(path)
    path.write_text(f'{{{hypotheses}}}\n{{"id": 1, {hypotheses}}}\n')
    with pytest.raises(DataError, match=rf"{path}:2: id: duplicate id 1: line 1 has no id, .* line 2 gives that id"):
        rerank.read_nbest(path)
    path.write_text(f'{{"id": "x", {hypotheses}}}\n{{"id": "x", {hypotheses}}}\n')
    with pytest.raises(DataError, match=r":2: id: duplicate id 'x' \(first on line 1\)"):
        rerank.read_nbest(path)


def test_deeply_nested_ids_are_checked_without_overflowing_the_stack(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"text": "the cat", "id": ' + "[" * 900 + "]" * 900 + "}\n")
    assert scoring.read_texts(path)[0].text == "the cat"
    path.write_text('{"text": "the cat", "id": ' + "[" * 900 + "NaN" + "]" * 900 + "}\n")
    with pytest.raises(DataError, match=":1: id: nan is not a finite number"):
        scoring.read_texts(path)


def test_stage_refuses_a_file_matched_by_two_patterns(ckpt: dict[str, Path], tmp_path: Path) -> None:
    """`files: [a.txt, *.txt]` scored a.txt twice, and the repeated stem renamed every output
    (b.txt's scores went to 02-b.jsonl instead of b.jsonl)."""
    from xfer.core.errors import UserError
    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.runs.preflight import preflight
    from xfer.testing import make_host, run_recipe_file, write_recipe

    (tmp_path / "a.txt").write_text("the cat\n")
    (tmp_path / "b.txt").write_text("a dog\n")
    stage = f"{{kind: electra.score, checkpoint: {ckpt['electric']}, files: [{tmp_path}/a.txt, {tmp_path}/*.txt]}}"
    recipe = write_recipe(tmp_path, f"name: s\nstages:\n  s: {stage}\n")
    problems = preflight(load_recipe(recipe, [], make_host(autoload=True)), make_host(autoload=True))
    assert any(f"{tmp_path}/a.txt: listed twice in files" in p for p in problems), problems
    with pytest.raises(UserError, match="listed twice in files"):
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    assert not (tmp_path / "run" / "s" / "outputs" / "scores" / "00-a.jsonl").exists()


def test_a_json_document_is_told_apart_from_broken_json_lines(tmp_path: Path) -> None:
    """A pretty-printed .json file (one list of records) said only "Expecting value (column 2)"."""
    document = tmp_path / "texts.json"
    document.write_text('[\n  {"text": "the cat"},\n  {"text": "a dog"}\n]\n')
    with pytest.raises(DataError, match=rf"{document}:1: not valid JSON: .*one JSON document over several lines"):
        scoring.read_texts(document)
    nbest = tmp_path / "dev.json"
    nbest.write_text('{\n  "hypotheses": [{"text": "a", "score": 0}]\n}\n')
    with pytest.raises(DataError, match=rf"{nbest}:1: not valid JSON: .*one JSON document"):
        rerank.read_nbest(nbest)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "the cat"}\n{"text": "a dog"\n')
    with pytest.raises(DataError, match=r":2: not valid JSON: Expecting ',' delimiter \(column 17\)$"):
        scoring.read_texts(broken)


def test_nbest_encodings_and_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "dev.jsonl"
    row = '{"id": "%s", "hypotheses": [{"text": "a", "score": 0}], "reference": "a"}'
    path.write_bytes(b"\xef\xbb\xbf" + (row % "u1").encode() + b"\r\n\r\n" + (row % "u2").encode())
    assert [(n.id, n.line) for n in rerank.read_nbest(path, need_reference=True)] == [("u1", 1), ("u2", 3)]
    path.write_bytes((row % "u1").encode() + b"\n" + (row % "caf\xe9").encode("latin-1") + b"\n")
    with pytest.raises(DataError, match=rf"{path}:2: encoding: not valid UTF-8"):
        rerank.read_nbest(path)
    path.write_bytes(b"")
    with pytest.raises(DataError, match=rf"{path}:1: file is empty"):
        rerank.read_nbest(path)

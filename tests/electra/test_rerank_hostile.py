"""Hostile review of n-best re-ranking (`xfer.electra.rerank`, `xfer score --lambdas`): ids of merged
n-best files, the λ grid (-0, typos, a λ so large that score + λ·PLL overflows) and dev files that
cannot choose λ. Torch-free except the one end-to-end test of `xfer score` (a tiny random model)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from xfer.core.errors import DataError, UserError
from xfer.electra import rerank

from .electra_recipes import scoring_config, spread_weights


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _row(text: str, **extra: object) -> dict:
    return {"hypotheses": [{"text": text, "score": 0.0}], "reference": text, **extra}


def _lists(rows: list[tuple[str, list[tuple[str, float]]]]) -> list[rerank.NBestList]:
    return [
        rerank.NBestList(i, tuple(rerank.Hypothesis(t, s) for t, s in hyps), ref, "<mem>", i + 1)
        for i, (ref, hyps) in enumerate(rows)
    ]


# --- lead: a default id "<file>:<line>" equal to another file's explicit id -----------------------


@pytest.mark.parametrize("explicit_first", [False, True])
def test_an_explicit_id_equal_to_another_files_default_id_names_both_and_says_which_is_default(
    tmp_path: Path, explicit_first: bool
) -> None:
    """Line 2 of a.jsonl gives no id, so in a set of two files its id is "a.jsonl:2"; b.jsonl gives
    that id explicitly. Refused (not merged), but the message said "a.jsonl line 2 has it too" of a
    line that has no id at all, whichever file came first."""
    a = _write(tmp_path / "a.jsonl", [_row("x"), _row("y")])
    b = _write(tmp_path / "b.jsonl", [_row("z", id="a.jsonl:2")])
    files = [b, a] if explicit_first else [a, b]
    with pytest.raises(DataError) as error:
        rerank.merge_nbest([rerank.read_nbest(f) for f in files])
    message = str(error.value)
    assert "duplicate id 'a.jsonl:2'" in message
    assert f"{a} line 2 gives no id, so its id is the default <file>:<line>" in message
    assert f"{b} line 1 gives that id explicitly" in message
    # unrelated ids still merge, defaults qualified
    c = _write(tmp_path / "c.jsonl", [_row("z", id="a.jsonl:3")])
    merged = rerank.merge_nbest([rerank.read_nbest(f) for f in (a, c)])
    assert [n.id for n in merged] == ["a.jsonl:1", "a.jsonl:2", "a.jsonl:3"]


def test_two_explicit_ids_in_two_files_still_name_the_first(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.jsonl", [_row("x", id="u1")])
    b = _write(tmp_path / "b.jsonl", [_row("y", id="u1")])
    with pytest.raises(DataError, match=rf"b\.jsonl:1: id: duplicate id 'u1': {a} line 1 has it too"):
        rerank.merge_nbest([rerank.read_nbest(a), rerank.read_nbest(b)])


# --- lead: the λ grid -----------------------------------------------------------------------------


DEV = [("a c", [("a b", -1.0), ("a c", -2.0)]), ("d", [("d", -1.0), ("e", -1.5)])]
PLLS = [[-3.0, -1.0], [-1.0, -4.0]]


def test_minus_zero_is_lambda_zero_in_the_grid_report_and_markdown() -> None:
    """`--lambdas -0` (and YAML `lambdas: [-0.0]`) is not negative, so it was accepted and reported
    as "λ = -0" and "lambda": -0.0; next to a 0 it was a second grid row of the same λ."""
    assert [math.copysign(1.0, v) for v in rerank.parse_grid("-0,0,-0.0")] == [1.0, 1.0, 1.0]
    result = rerank.rerank_nbest("wer", _lists(DEV), PLLS, grid=[-0.0])
    assert math.copysign(1.0, result.lam) == 1.0
    assert "λ = 0 chosen" in result.markdown() and "-0" not in result.markdown()
    assert json.dumps(result.report()).count("-0.0") == 0
    both = rerank.rerank_nbest("wer", _lists(DEV), PLLS, grid=[0.0, -0.0, 1.0, 1.0])
    assert [lam for lam, _ in both.grid] == [0.0, 1.0]  # each λ once


@pytest.mark.parametrize("text", ["0_5", "1_0", "\u0661", "0,\uff11", "0x1", "", "0,,1"])
def test_lambda_typos_are_not_read_as_other_numbers(text: str) -> None:
    """`float` reads "0_5" as 5.0, "1_0" as 10.0 and an Arabic or full-width digit as 1: a typo became
    another λ without a word."""
    with pytest.raises(UserError, match=r"--lambdas: .* is not a number"):
        rerank.parse_grid(text)


def test_plain_decimal_lambdas_are_read() -> None:
    assert rerank.parse_grid(" 0.5,.25,1e-1,+1,2.,1E0") == [0.5, 0.25, 0.1, 1.0, 2.0, 1.0]
    for text, message in (("nan", "not finite"), ("1e400", "not finite"), ("-0.1", "negative")):
        with pytest.raises(UserError, match=message):
            rerank.parse_grid(text)


def test_a_lambda_that_overflows_the_total_is_an_error_not_a_tie_of_minus_infinities() -> None:
    """λ = 1e308 is finite, but 1e308·PLL is -inf: every hypothesis tied at -inf, the first won (not
    the base system's best), that λ could be "chosen" on dev, and writing its records crashed with a
    bare ValueError (NaN/inf is not JSON) after the whole scoring."""
    lists = _lists(DEV)
    with pytest.raises(UserError, match=r"λ = 1e\+308: score \+ λ·PLL of hypothesis 0 of list 0 \(<mem>:1\) is -inf"):
        rerank.rerank_nbest("wer", lists, PLLS, grid=[0.0, 1e308])
    with pytest.raises(UserError, match="too large"):
        rerank.reranked(lists, PLLS, 1e308)
    assert rerank.rerank_nbest("wer", lists, PLLS, grid=[0.0, 1e300]).lam in (0.0, 1e300)  # finite: fine


# --- hostile dev files: each refused before any scoring, naming the file -------------------------


def test_dev_files_that_cannot_choose_lambda_are_refused_naming_the_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(DataError, match=r"empty\.jsonl"):
        rerank.read_nbest(empty, need_reference=True)
    no_reference = _write(tmp_path / "noref.jsonl", [_row("a"), {"hypotheses": [{"text": "b", "score": 0}]}])
    with pytest.raises(DataError, match=r"noref\.jsonl:2: reference: missing"):
        rerank.read_nbest(no_reference, need_reference=True)
    nan = tmp_path / "nan.jsonl"
    nan.write_text('{"hypotheses": [{"text": "a", "score": NaN}], "reference": "a"}\n')
    with pytest.raises(DataError, match=r"nan\.jsonl:1: hypotheses\[0\]: 'score' must be a finite number"):
        rerank.read_nbest(nan, need_reference=True)


def test_references_without_a_word_name_the_file_that_leaves_wer_undefined(tmp_path: Path) -> None:
    """Dev fine, test references all blank: "WER is undefined: the references have no words" did
    not say which file, and came after the whole scoring."""
    dev = rerank.read_nbest(_write(tmp_path / "dev.jsonl", [_row("a b")]), need_reference=True)
    test = rerank.read_nbest(_write(tmp_path / "test.jsonl", [_row(" "), _row("")]))
    with pytest.raises(DataError, match=rf"^{tmp_path / 'test.jsonl'}: reference: WER is undefined: none of the 2"):
        rerank.rerank_nbest("wer", dev, [[-1.0]], test, [[-1.0], [-1.0]])
    with pytest.raises(DataError, match=r"test\.jsonl: reference: WER is undefined"):
        rerank.check_references("wer", test)
    rerank.check_references("bleu", test)  # BLEU of blank references is 0, not undefined
    partial = rerank.read_nbest(
        _write(tmp_path / "partial.jsonl", [_row(""), {"hypotheses": [{"text": "a", "score": 0}]}])
    )
    rerank.check_references("wer", partial)  # the metric is skipped for it (`summary`): nothing to check


# --- end to end: `xfer score --lambdas` -----------------------------------------------------------


@pytest.fixture(scope="module")
def electric(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Electric checkpoint (one pass per text: fast)."""
    import torch

    from xfer.electra.heads import DiscriminatorHead
    from xfer.transformer.encoder import Encoder
    from xfer.transformer.modelio import save_model_dir
    from xfer.transformer.tokenization import WordPieceTokenizer

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "ran"]
    tokenizer = WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(tokens)})
    torch.manual_seed(1)
    config = scoring_config(tokenizer.vocab_size, 16)
    encoder, head = Encoder(config), DiscriminatorHead(16)
    spread_weights(encoder, head)
    folder = tmp_path_factory.mktemp("electric") / "discriminator"
    meta = {"objective": "electric.nce", "objective_config": {"generator": {"kind": "two_tower"}}}
    save_model_dir(folder, {"encoder": encoder, "head": head}, meta)
    tokenizer.save(folder)
    return folder


def test_xfer_score_lambdas(electric: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from xfer.core.cli import main

    rows = [
        {"id": "u1", "hypotheses": [{"text": "the cat sat", "score": -1.0}, {"text": "cat the sat", "score": -1.1}],
         "reference": "the cat sat"},
        {"id": "u2", "hypotheses": [{"text": "a dog ran", "score": -2.0}], "reference": "a dog ran"},
    ]  # fmt: skip
    dev = _write(tmp_path / "dev.jsonl", rows)
    rr = tmp_path / "rr"
    assert main(["score", str(electric), "--nbest-dev", str(dev), "--metric", "wer", "--lambdas", "-0",
                 "--rerank-dir", str(rr)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "λ = 0 chosen on dev from 1 values" in out
    report = json.loads((rr / "report.json").read_text())
    assert '"lambda": 0.0' in json.dumps(report) and "-0" not in json.dumps(report)

    before = {p.name: p.read_text() for p in rr.iterdir()}
    assert main(["score", str(electric), "--nbest-dev", str(dev), "--metric", "wer", "--lambdas", "0,1e308",
                 "--rerank-dir", str(rr)]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "Traceback" not in err and "λ = 1e+308" in err and "too large" in err
    assert {p.name: p.read_text() for p in rr.iterdir()} == before, "the previous run's files are kept"
    assert main(["score", str(electric), "--nbest-dev", str(dev), "--metric", "wer", "--lambdas", "0_5"]) == 2
    assert "--lambdas: '0_5' is not a number" in capsys.readouterr().err
    blank = _write(tmp_path / "blank.jsonl", [_row("")])
    assert main(["score", str(electric), "--nbest-dev", str(dev), "--nbest-test", str(blank), "--metric", "wer",
                 "--rerank-dir", str(tmp_path / "new")]) == 2  # fmt: skip
    assert f"{blank}: reference: WER is undefined" in capsys.readouterr().err
    assert not (tmp_path / "new").exists(), "refused before anything is scored or written"


def test_the_score_stage_pre_flight_names_references_that_leave_wer_undefined(electric: Path, tmp_path: Path) -> None:
    """`electra.score` with `metric: wer` found the test set's blank references only after the whole
    n-best scoring; `xfer score` checks before loading the model, the stage's pre-flight now too."""
    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.runs.preflight import preflight
    from xfer.testing import make_host, write_recipe

    dev = _write(tmp_path / "dev.jsonl", [_row("a b")])
    test = _write(tmp_path / "test.jsonl", [_row(" "), _row("")])
    stage = f"{{kind: electra.score, checkpoint: {electric}, nbest_dev: {dev}, nbest_test: {test}, metric: wer}}"
    recipe = write_recipe(tmp_path, f"name: s\nstages:\n  s: {stage}\n")
    host = make_host(autoload=True)
    problems = [str(p) for p in preflight(load_recipe(recipe, [], host), host)]
    assert any(p.startswith(f"{test}: reference: WER is undefined") for p in problems), problems
    recipe.write_text(recipe.read_text().replace("metric: wer", "metric: bleu"))
    assert not [p for p in preflight(load_recipe(recipe, [], host), host) if "WER" in str(p)]


def test_xfer_score_refuses_lists_lambda_cannot_be_chosen_on_before_scoring(
    electric: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The CLI lacked two of the stage's pre-flight checks: BLEU against dev references without a
    word (every λ ties, "λ = 0 chosen" reported) and a test file that is the dev file (the dev
    result reported as held out); both were accepted, after scoring everything."""
    from xfer.core.cli import main

    blank = _write(tmp_path / "blank.jsonl", [_row(""), _row(" ")])
    assert main(["score", str(electric), "--nbest-dev", str(blank), "--metric", "bleu",
                 "--rerank-dir", str(tmp_path / "a")]) == 2  # fmt: skip
    assert "none of the 2 references has a word" in capsys.readouterr().err
    dev = _write(tmp_path / "dev.jsonl", [_row("the cat sat")])
    assert main(["score", str(electric), "--nbest-dev", str(dev), "--nbest-test", str(dev), "--metric", "wer",
                 "--rerank-dir", str(tmp_path / "b")]) == 2  # fmt: skip
    assert f"{dev}: nbest_test: is a dev file too" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists(), "refused before anything is written"

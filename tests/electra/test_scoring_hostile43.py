"""Hostile review 43 of PLL scoring and n-best re-ranking (`xfer score`, `electra.score`, rerank).

Each test pins a defect found in that review and fails on the code before its fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.electra import rerank

from .electra_recipes import scoring_config

# --- a λ chosen at the edge of the grid --------------------------------------------------------------


def _lists(tmp_path: Path, *bases: tuple[float, float]) -> list[rerank.NBestList]:
    """Lists of two hypotheses with these base scores (three of (-1, -2) by default); the second is
    the reference."""
    rows = [
        {
            "id": i,
            "hypotheses": [{"text": "the cat sat down", "score": a}, {"text": "a cat sat down", "score": b}],
            "reference": "a cat sat down",
        }
        for i, (a, b) in enumerate(bases or [(-1.0, -2.0)] * 3)
    ]
    path = tmp_path / "dev.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return rerank.read_nbest(path, need_reference=True)


def test_a_lambda_at_the_largest_value_of_the_grid_is_noted(tmp_path: Path) -> None:
    """The reference wins when λ·8 (the PLL gap) > 1 (the base gap), λ > 0.125: on the grid 0, 0.1,
    0.2 the best dev WER is at 0.2, the grid's largest value, and the report said "λ = 0.2 chosen
    on dev" as if it were the optimum, when all it shows is that the metric was best at the edge
    (the optimum may be beyond it). The report and its markdown now say so."""
    result = rerank.rerank_nbest("wer", _lists(tmp_path), [[-9.0, -1.0]] * 3, grid=[0.0, 0.1, 0.2])
    assert result.lam == 0.2 and result.dev["after"] == 0.0 < result.dev["before"]
    note = result.report()["note"]
    assert note.startswith("λ = 0.2 is the largest value of the grid: dev WER was still improving there")
    assert "extend the grid (lambdas / --lambdas) beyond 0.2" in note
    assert f"dev: {note}" in result.markdown()


def test_a_lambda_at_the_smallest_value_of_a_grid_without_zero_is_noted(tmp_path: Path) -> None:
    """The thesis's grid starts at 0.05. Here the base system is right and the PLL prefers the wrong
    hypothesis by 0.3: it wins when λ·0.3 > 0.2, so of 0.5, 1, 2 only 0.5 keeps dev WER at 0; a
    smaller λ (0, the base system) is as good, and the report now says the grid may be too high."""
    result = rerank.rerank_nbest("wer", _lists(tmp_path, *[(-1.2, -1.0)] * 3), [[-1.0, -1.3]] * 3, grid=[2.0, 1.0, 0.5])
    assert result.lam == 0.5 and result.dev["after"] == 0.0
    note = result.report()["note"]
    assert note.startswith("λ = 0.5 is the smallest value of the grid: a smaller λ (0 is the base system)")
    assert f"dev: {note}" in result.markdown()


@pytest.mark.parametrize(
    ("grid", "bases", "plls"),
    [
        # the base system is wrong on the first list and right on the second; the PLL fixes the first
        # from λ > 0.125 and breaks the second from λ > 0.25: the best is 0.2, inside the grid
        ([0.0, 0.1, 0.2, 0.3], [(-1.0, -2.0), (-1.2, -1.0)], [[-9.0, -1.0], [-1.0, -1.8]]),
        ([0.0, 0.5, 1.0], [(-1.2, -1.0)] * 3, [[-1.0, -9.0]] * 3),  # the best is 0: a closed edge (λ >= 0)
        ([0.5], [(-1.0, -2.0)] * 3, [[-9.0, -1.0]] * 3),  # one value: no choice was made
    ],
)
def test_a_lambda_inside_the_grid_or_at_zero_is_not_noted(
    tmp_path: Path, grid: list[float], bases: list[tuple[float, float]], plls: list[list[float]]
) -> None:
    result = rerank.rerank_nbest("wer", _lists(tmp_path, *bases), plls, grid=grid)
    assert len(grid) == 1 or len({value for _, value in result.grid}) > 1  # a choice, not a tie
    assert result.edge_note() is None and "note" not in result.report()
    assert "value of the grid" not in result.markdown() and "largest λ" not in result.markdown()


# --- what scoring the n-best hypotheses did --------------------------------------------------------

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat"]


@pytest.fixture(scope="module")
def electric(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Electric checkpoint of 12 positions (texts of more than 10 pieces are windowed)."""
    import torch

    from xfer.electra.heads import DiscriminatorHead
    from xfer.transformer.encoder import Encoder
    from xfer.transformer.modelio import save_model_dir
    from xfer.transformer.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer.from_vocab(
        {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])}
    )
    torch.manual_seed(0)
    modules = {"encoder": Encoder(scoring_config(tokenizer.vocab_size, 12)), "head": DiscriminatorHead(16)}
    folder = tmp_path_factory.mktemp("electric") / "discriminator"
    save_model_dir(folder, modules, {"objective": "electric.nce", "role": "discriminator", "max_length": 12})
    tokenizer.save(folder)
    return folder


def test_windowed_and_unknown_hypotheses_are_reported_as_for_a_scored_file(
    electric: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A scored file's summary says how many texts were longer than max_length (scored in windows)
    and how many pieces were [UNK]; for n-best hypotheses nothing said either: a hypothesis of 14
    pieces was windowed, and one of emoji (two [UNK] pieces, ranked by the vocabulary's coverage)
    scored, without a word in the log, the report or summary.json. Now `xfer score` logs the
    counts, and the stage's report and summary.json (`rerank.scored`) hold them."""
    from xfer.core.cli import main
    from xfer.electra import scoring
    from xfer.testing import make_host, run_recipe_file, write_recipe

    long = "the cat sat on the mat a dog sat on the mat the cat"  # 14 pieces > 10
    rows = [
        {
            "id": "u1",
            "hypotheses": [{"text": long, "score": -1.0}, {"text": "a cat", "score": -2.0}],
            "reference": "a cat",
        },
        {
            "id": "u2",
            "hypotheses": [{"text": "\U0001f600 \u2603", "score": -1.0}, {"text": "a cat", "score": -3.0}],
            "reference": "the dog",
        },
    ]
    dev = tmp_path / "dev.jsonl"
    dev.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert main(["score", str(electric), "--nbest-dev", str(dev), "--metric", "wer"]) == 0
    err = capsys.readouterr().err
    assert (
        "n-best lists: scored 3 distinct hypotheses (18 pieces); 1 longer than max_length 12, scored in windows; "
        "2 [UNK] pieces (out of the vocabulary; each scored as [UNK])"
    ) in err

    recipe = write_recipe(
        tmp_path, f"stages:\n  score: {{kind: electra.score, checkpoint: {electric}, nbest_dev: {dev}, metric: wer}}\n"
    )
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    outputs = tmp_path / "run" / "score" / "outputs" / "scores"
    scored = json.loads((outputs / "summary.json").read_text(encoding="utf-8"))["rerank"]["scored"]
    assert scored == {"texts": 3, "pieces": 18, "windowed": 1, "empty": 0, "unk": 2}
    report = (tmp_path / "run" / "score" / "report.md").read_text(encoding="utf-8")
    assert "n-best lists: scored 3 distinct hypotheses (18 pieces); 1 longer than max_length 12" in report

    counts: dict[str, int] = {}
    lists = rerank.read_nbest(dev, need_reference=True)
    scoring.score_nbest(scoring.load_scorer(electric), [lists], counts=counts)
    assert counts == {"texts": 3, "pieces": 18, "windowed": 1, "empty": 0, "unk": 2}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("\u200b", "empty text: nothing to score"),  # zero-width space: not blank to str.strip, no piece
        ("the [MASK] sat", "contains the special token [MASK]"),
    ],
)
def test_a_hypothesis_that_cannot_be_scored_is_named_by_its_index(
    electric: Path, tmp_path: Path, capsys: pytest.CaptureFixture, text: str, message: str
) -> None:
    """A line of an n-best file holds a whole list: "dev.jsonl:1: empty text" (or "... special token")
    did not say which of its hypotheses, as the other n-best errors do (`hypotheses[5]`). A JSONL
    text to score names its field likewise."""
    from xfer.core.cli import main

    hypotheses = [{"text": f"the cat {word}", "score": -1.0} for word in WORDS[:5]] + [{"text": text, "score": -2.0}]
    dev = tmp_path / "dev.jsonl"
    dev.write_text(json.dumps({"id": "u1", "hypotheses": hypotheses, "reference": "the cat"}) + "\n", encoding="utf-8")
    assert main(["score", str(electric), "--nbest-dev", str(dev), "--metric", "wer"]) == 2
    assert f"{dev}:1: hypotheses[5]: {message}" in capsys.readouterr().err

    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"sentence": "a cat"}) + "\n" + json.dumps({"sentence": text}) + "\n", encoding="utf-8")
    assert main(["score", str(electric), str(texts), "--text-field", "sentence"]) == 2
    assert f"{texts}:2: sentence: {message}" in capsys.readouterr().err

"""Third hostile review of the `electra.score` stage and n-best re-ranking.

Each test pins a defect found in that review and fails on the code before its fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from .electra_recipes import scoring_config, spread_weights

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat"]


@pytest.fixture(scope="module")
def tt_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path, int], Path]:
    """`make(folder, seed)`: an ELECTRA-TT pre-training output under `folder` (discriminator and its
    two-tower generator side by side, as `electra.pretrain` writes them); the discriminator is
    written on the first call, the generator on every call, with weights from `seed`. Returns the
    discriminator folder."""
    import torch

    from xfer.electra.heads import DiscriminatorHead
    from xfer.electra.model import TwoTower
    from xfer.transformer.encoder import Encoder
    from xfer.transformer.modelio import save_model_dir
    from xfer.transformer.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer.from_vocab(
        {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])}
    )
    config = scoring_config(tokenizer.vocab_size, 24)
    meta = {"objective": "electra.rtd", "objective_config": {"mask_prob": 0.2, "generator": {"kind": "two_tower"}}}

    def make(folder: Path, seed: int) -> Path:
        torch.manual_seed(3)
        encoder, head = Encoder(config), DiscriminatorHead(16)
        torch.manual_seed(seed)
        cloze = TwoTower(config, None)
        spread_weights(encoder, head, cloze)
        if not (folder / "discriminator").exists():  # written once: only the generator is replaced
            save_model_dir(folder / "discriminator", {"encoder": encoder, "head": head}, meta)
            tokenizer.save(folder / "discriminator")
        save_model_dir(folder / "generator", {"ltr": cloze.ltr, "rtl": cloze.rtl, "head": cloze.head}, meta)
        tokenizer.save(folder / "generator")
        return folder / "discriminator"

    return make


def _run(recipe: Path, run_dir: Path) -> list[tuple[str, str]]:
    from xfer.testing import make_host, run_recipe_file

    return [(s.name, s.action) for s in run_recipe_file(recipe, run_dir, make_host(autoload=True)).stages]


# --- fingerprint: the generator read from beside a checkpoint given as a path ---------------------


@pytest.mark.parametrize("method", ["auto", "two-tower"])
def test_replacing_the_generator_next_to_a_path_checkpoint_re_scores(
    tmp_path: Path, tt_run: Callable[[Path, int], Path], method: str
) -> None:
    """With `checkpoint:` a folder path and no `generator:`, ELECTRA-TT scoring (auto) and the
    two-tower method on a discriminator read the `generator/` folder beside it, but the fingerprint
    signed only the checkpoint's own folder: a re-trained generator copied in kept the old scores
    "done" (the stage was skipped)."""
    from xfer.testing import write_recipe

    checkpoint = tt_run(tmp_path / "pre", 1)
    (tmp_path / "t.txt").write_text("the cat sat on the mat\na dog sat\n", encoding="utf-8")
    recipe = write_recipe(
        tmp_path,
        f"stages:\n  score: {{kind: electra.score, checkpoint: {checkpoint}, files: {tmp_path / 't.txt'}, "
        f"method: {method}}}\n",
    )
    output = tmp_path / "run" / "score" / "outputs" / "scores" / "t.jsonl"
    assert _run(recipe, tmp_path / "run") == [("score", "ran")]
    before = output.read_text(encoding="utf-8")
    assert _run(recipe, tmp_path / "run") == [("score", "skipped")]  # unchanged: still skipped

    tt_run(tmp_path / "pre", 2)  # another generator, the same discriminator
    assert _run(recipe, tmp_path / "run") == [("score", "ran")]
    after = output.read_text(encoding="utf-8")
    assert [json.loads(r)["pll"] for r in after.splitlines()] != [json.loads(r)["pll"] for r in before.splitlines()]


def test_status_of_a_run_whose_generator_was_removed_since_says_stale(
    tmp_path: Path, tt_run: Callable[[Path, int], Path]
) -> None:
    """The generator folder beside the checkpoint is one of the stage's inputs: removed since the
    run, `xfer status` names it as what changed."""
    import shutil

    from xfer.core.runs.runner import stale_reasons
    from xfer.testing import make_host, write_recipe

    checkpoint = tt_run(tmp_path / "pre", 1)
    (tmp_path / "t.txt").write_text("the cat sat\n", encoding="utf-8")
    recipe = write_recipe(
        tmp_path, f"stages:\n  score: {{kind: electra.score, checkpoint: {checkpoint}, files: {tmp_path / 't.txt'}}}\n"
    )
    assert _run(recipe, tmp_path / "run") == [("score", "ran")]
    assert stale_reasons(tmp_path / "run", make_host(autoload=True)) == {"score": []}
    shutil.rmtree(tmp_path / "pre" / "generator")
    reasons = stale_reasons(tmp_path / "run", make_host(autoload=True))["score"]
    assert any("stages.score.checkpoint.generator" in reason for reason in reasons), reasons


# --- BLEU against dev references without a word --------------------------------------------------


def _nbest_file(path: Path, references: list[str], prefix: str = "s") -> Path:
    rows = [
        {
            "id": f"{prefix}{i}",
            "hypotheses": [{"text": "a cat sat on the mat", "score": -1.0}, {"text": "a cat", "score": -2.0}],
        }
        | {"reference": reference}
        for i, reference in enumerate(references)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


BLANK_BLEU = "none of the 2 references has a word: BLEU against them is 0 whatever the hypotheses, so every λ ties"


def test_choosing_lambda_by_bleu_against_dev_references_without_a_word_is_refused(tmp_path: Path) -> None:
    """sacrebleu gives BLEU 0 against references without a word, whatever the hypotheses: every λ
    tied, and λ = 0 was reported as "chosen on dev" (BLEU 0.00 before and after) when nothing had
    been chosen. WER refused such a dev file as undefined; BLEU now does too, naming file and key."""
    from xfer.core.errors import DataError
    from xfer.electra.rerank import read_nbest, rerank_nbest

    plls = [[-30.0, -5.0], [-30.0, -5.0]]
    dev = read_nbest(_nbest_file(tmp_path / "dev.jsonl", ["", "  "]), need_reference=True)
    with pytest.raises(DataError, match=rf"^{tmp_path / 'dev.jsonl'}: reference: {BLANK_BLEU}"):
        rerank_nbest("bleu", dev, plls)
    # one dev reference with words is enough; a test set's blank references still give BLEU 0
    fine = read_nbest(_nbest_file(tmp_path / "fine.jsonl", ["", "a cat sat on the mat"]), need_reference=True)
    result = rerank_nbest("bleu", fine, plls, dev, plls)
    assert result.lam == 0.0 and result.test is not None and result.test["after"] == 0.0


def test_the_stage_pre_flight_refuses_bleu_dev_references_without_a_word(tmp_path: Path) -> None:
    """Found before anything runs (the pre-training stage a recipe scores with can take hours)."""
    from xfer.core.config import Files, Input
    from xfer.electra.score_config import ScoreConfig

    def problems(dev: Path, test: Path) -> list[str]:
        config = ScoreConfig(
            checkpoint=Input("pre", "discriminator"),
            nbest_dev=Files((str(dev),)),
            nbest_test=Files((str(test),)),
            metric="bleu",
        )
        return [str(p) for p in config.preflight()]

    words, blank = _nbest_file(tmp_path / "words.jsonl", ["a cat sat"]), _nbest_file(tmp_path / "blank.jsonl", ["", ""])
    assert [p.partition(" and none")[0] for p in problems(blank, words)] == [f"{blank}: reference: {BLANK_BLEU}"]
    assert problems(words, blank) == []  # the test set's BLEU is 0: reported, not refused


# --- errors that name the key ------------------------------------------------------------------------


def test_an_nbest_set_without_jsonl_files_names_its_key_and_inputs(
    tmp_path: Path, tt_run: Callable[[Path, int], Path]
) -> None:
    """A stage output with no .jsonl file as `nbest_test` failed with "no .jsonl n-best file
    found": not which of nbest_dev / nbest_test, nor what was searched."""
    from xfer.core.errors import UserError
    from xfer.testing import write_recipe

    checkpoint = tt_run(tmp_path / "pre", 1)
    dev = _nbest_file(tmp_path / "dev.jsonl", ["a cat sat"])
    recipe = write_recipe(
        tmp_path,
        f"""stages:
  corpus: {{kind: toy.corpus, sentences: 4}}
  score: {{kind: electra.score, checkpoint: {checkpoint}, nbest_dev: {dev}, nbest_test: corpus.text, metric: wer}}
""",
    )
    with pytest.raises(UserError, match=r"nbest_test: no \.jsonl n-best file found in corpus\.text"):
        _run(recipe, tmp_path / "run")


# --- a grid that cannot tell the λ values apart -----------------------------------------------------


def test_a_grid_where_every_lambda_ties_says_lambda_was_no_choice(tmp_path: Path) -> None:
    """Corpus BLEU is 0 whatever is picked when the segments have no 4-gram: every λ tied, and the
    report said "λ = 0 chosen on dev", BLEU 0.00 before and after, which reads as "re-ranking does
    not help", while on the same lists WER shows the PLL fixing every base-system mistake."""
    from xfer.electra.rerank import read_nbest, rerank_nbest

    row = {"hypotheses": [{"text": "the cat", "score": -1.0}, {"text": "a cat", "score": -2.0}], "reference": "a cat"}
    path = tmp_path / "short.jsonl"
    path.write_text("".join(json.dumps(row | {"id": i}) + "\n" for i in range(3)), encoding="utf-8")
    lists = read_nbest(path, need_reference=True)
    plls = [[-9.0, -1.0]] * 3  # the model prefers the reference

    bleu = rerank_nbest("bleu", lists, plls)
    assert bleu.lam == 0.0 and {value for _, value in bleu.grid} == {0.0}
    note = bleu.report()["note"]
    assert note.startswith(
        "every λ of the grid gave dev BLEU 0.00: λ = 0 is the tie-break (the smallest), not a choice"
    )
    assert "no 4-gram matches" in note and "metric wer" in note
    assert f"dev: {note}" in bleu.markdown()

    wer = rerank_nbest("wer", lists, plls)  # the same lists: λ is a real choice, and nothing is noted
    assert wer.lam > 0 and wer.dev["after"] == 0.0 < wer.dev["before"]
    assert "note" not in wer.report() and "tie-break" not in wer.markdown()


# --- settings with nothing to apply them to ---------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("files: {txt}, lambdas: [0.0, 0.5]", r"stages\.score\.lambdas: the λ grid is only used with nbest_dev"),
        (
            "nbest_dev: {dev}, metric: wer, format: jsonl",
            r"stages\.score\.format: format only says how to read `files`",
        ),
        ("nbest_dev: {dev}, metric: wer, text_field: sentence", r"stages\.score\.text_field: text_field only says how"),
    ],
)
def test_settings_that_nothing_would_use_are_refused(tmp_path: Path, setting: str, message: str) -> None:
    """`metric` without nbest_dev was refused, but a λ grid without it, and `format` / `text_field`
    without `files`, were accepted and silently did nothing (a forgotten nbest_dev re-ranked nothing)."""
    from xfer.core.errors import RecipeError
    from xfer.core.recipes.recipe import load_recipe
    from xfer.testing import make_host, write_recipe

    (tmp_path / "model").mkdir()
    (tmp_path / "t.txt").write_text("the cat\n", encoding="utf-8")
    dev = _nbest_file(tmp_path / "dev.jsonl", ["a cat sat"])
    stage = setting.format(txt=tmp_path / "t.txt", dev=dev)
    recipe = write_recipe(
        tmp_path, f"stages:\n  score: {{kind: electra.score, checkpoint: {tmp_path / 'model'}, {stage}}}\n"
    )
    with pytest.raises(RecipeError, match=message):
        load_recipe(recipe, [], make_host(autoload=True))
    default = setting.replace(
        "lambdas: [0.0, 0.5]",
        "lambdas: [0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, "
        "0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1]",
    )
    default = default.replace("format: jsonl", "format: auto").replace("text_field: sentence", "text_field: text")
    fine = write_recipe(
        tmp_path / "fine",
        f"stages:\n  score: {{kind: electra.score, checkpoint: {tmp_path / 'model'}, "
        f"{default.format(txt=tmp_path / 't.txt', dev=dev)}}}\n",
    )
    load_recipe(fine, [], make_host(autoload=True))  # the defaults, written out: valid


# --- a test set that is the dev set ------------------------------------------------------------------


def test_a_dev_file_given_as_a_test_file_is_refused(tmp_path: Path, tt_run: Callable[[Path, int], Path]) -> None:
    """λ is chosen on the dev lists; a test set holding a dev file (a glob matching both, or the
    same file named twice) was accepted, and its "test" metric was the tuned dev result again."""
    from xfer.core.config import Files, Input
    from xfer.core.errors import UserError
    from xfer.electra.score_config import ScoreConfig
    from xfer.testing import write_recipe

    folder = tmp_path / "nbest"
    folder.mkdir()
    dev = _nbest_file(folder / "dev.jsonl", ["a cat sat"])
    other = _nbest_file(folder / "other.jsonl", ["a cat sat"], prefix="t")
    config = ScoreConfig(
        checkpoint=Input("pre", "discriminator"),
        nbest_dev=Files((str(dev),)),
        nbest_test=Files((str(folder / "*.jsonl"),)),
        metric="wer",
    )
    assert [str(p) for p in config.preflight()] == [
        f"{dev}: nbest_test: is a dev file too: λ is chosen on the dev lists, so their test result would not be "
        "held out; give the test set lists of its own"
    ]
    config.nbest_test = Files((str(other),))
    assert config.preflight() == []

    checkpoint = tt_run(tmp_path / "pre", 1)
    (folder / "link.jsonl").symlink_to(dev)
    stage = f"{{kind: electra.score, checkpoint: {checkpoint}, nbest_dev: {dev}, nbest_test: {folder / 'link.jsonl'}"
    recipe = write_recipe(tmp_path, f"stages:\n  score: {stage}, metric: wer}}\n")
    with pytest.raises(UserError, match=rf"link\.jsonl: nbest_test: is a dev file too \(as {dev}\): λ is chosen"):
        _run(recipe, tmp_path / "run")


@pytest.mark.parametrize("metric", ["wer", "bleu"])
def test_pre_flight_judges_references_only_on_a_whole_set(tmp_path: Path, metric: str) -> None:
    """The pre-flight reads the n-best files given as paths, not stage outputs (known only when the
    stage runs). A set of both, whose path file alone had no reference with a word, was refused as
    "undefined", though the output's lists may hold the references with words; the stage judges the
    whole set when it runs."""
    from xfer.core.config import Files, Input
    from xfer.electra.score_config import ScoreConfig

    blank = _nbest_file(tmp_path / "blank.jsonl", ["", ""])
    whole = ScoreConfig(checkpoint=Input("pre", "discriminator"), nbest_dev=Files((str(blank),)), metric=metric)
    assert [str(p).partition(": reference: ")[0] for p in whole.preflight()] == [str(blank)]
    part = Files((str(blank),), (Input("lists", "nbest"),))
    assert ScoreConfig(checkpoint=Input("pre", "discriminator"), nbest_dev=part, metric=metric).preflight() == []

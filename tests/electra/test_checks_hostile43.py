"""The `electra.pretrain` pre-flight (`xfer.electra.checks`) against what the stage itself accepts
and refuses (review 43): a budget priced at full-length sequences while the stage counts the packed
corpus's real lengths, and the stage's `init:`/`init_generator:` checks that ran only once the stages
before it had trained and the corpus was packed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from xfer.core.errors import UserError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import preflight
from xfer.testing import make_host, run_recipe_file, write_recipe

from .electra_recipes import TINY, pretrain_recipe

pytestmark = pytest.mark.usefixtures("one_thread")

ONE_STEP = "{steps: 1, batch_size: 8, warmup_steps: 0}"
FULL_STEP_TOKENS = 8 * 32  # batch_size x max_length: the step the pre-flight priced


def host():
    return make_host(autoload=True)


def _pretrained(root: Path, objective: str) -> Path:
    run_recipe_file(write_recipe(root, pretrain_recipe(120, objective, ONE_STEP)), root / "run", host())
    return root / "run" / "fit" / "outputs"


@pytest.fixture(scope="module")
def electric(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The outputs of a one-step Electric pre-training (its generator: a tied two-tower noise model)."""
    return _pretrained(tmp_path_factory.mktemp("electric"), "{name: electric.nce}")


@pytest.fixture(scope="module")
def electra(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The outputs of a one-step ELECTRA pre-training (its generator: a masked LM, size 0.25)."""
    return _pretrained(tmp_path_factory.mktemp("electra"), "{name: electra.rtd}")


def _meta(outputs: Path) -> dict:
    return json.loads((outputs / "discriminator" / "xfer_model.json").read_text())


def _stage(outputs: Path, *lines: str, train: str = ONE_STEP) -> str:
    """A stage `more` on the fixture's corpus (files on disk, nothing for an earlier stage to make)."""
    corpus = outputs.parent.parent / "corpus/outputs/text/toy.txt"
    added = "".join(f"    {line}\n" for line in lines)
    return (
        f"seed: 2\nstages:\n  more:\n    kind: electra.pretrain\n    corpus: {{files: {corpus}}}\n{added}"
        f"    max_length: 32\n    train: {train}\n"
    )


def _budget_stage(outputs: Path, budget: str) -> str:
    return _stage(
        outputs,
        f"tokenizer: {outputs / 'tokenizer'}",
        "model: tiny",
        f"encoder: {TINY}",
        f"budget: {budget}",
        train="{steps: null, batch_size: 8, warmup_steps: 0, checkpoint_every: 100}",
    )


@pytest.mark.parametrize("unit", ["tokens", "flops"])
def test_a_budget_the_stage_accepts_passes_the_pre_flight(electra: Path, tmp_path: Path, unit: str) -> None:
    """The pre-flight priced a step at `batch_size x max_length` tokens (and those sequences' FLOPs),
    the stage at the packed corpus's real lengths: `budget: {tokens: 250}` was refused as "less than
    one step's 256 tokens" while the stage's step is fewer real tokens, and trains on it."""
    from xfer.electra.checks import _tokenizer_vocab_size
    from xfer.electra.stage import planned_step

    known = _meta(electra)  # the same corpus, tokenizer, model and lengths, packed by the fixture's stage
    config = (
        load_recipe(write_recipe(tmp_path, _budget_stage(electra, "{tokens: 1}")), host=host()).stages["more"].config
    )
    full_flops, full_tokens = planned_step(config, _tokenizer_vocab_size(config))  # the full-length step
    assert full_tokens == FULL_STEP_TOKENS
    real, full_cost = (
        (known["tokens_per_step"], full_tokens) if unit == "tokens" else (known["flops_per_step"], full_flops)
    )
    assert real < full_cost, "the toy corpus packs examples shorter than max_length"
    budget = (real + full_cost) / 2
    path = write_recipe(tmp_path, _budget_stage(electra, f"{{{unit}: {budget!r}}}"))
    problems = preflight(load_recipe(path, host=host()), host())
    assert not problems, problems  # was: "budget.tokens 251 is less than one step's 256 tokens"
    run_recipe_file(path, tmp_path / "run", host())
    meta = _meta(tmp_path / "run/more/outputs")
    assert meta["training_steps"] == 1
    assert meta[f"{unit}_per_step"] <= budget < full_cost


def test_a_budget_below_the_cheapest_step_is_still_refused_and_a_streams_at_full_length(
    electra: Path, tmp_path: Path
) -> None:
    """What no packing can buy a step with is still refused before the run; a stream's lengths are
    not known to the stage either, which costs its steps at full length, so the pre-flight does too."""
    path = write_recipe(tmp_path, _budget_stage(electra, "{tokens: 20}"))
    problems = preflight(load_recipe(path, host=host()), host())
    assert any("budget.tokens 20 is less than one step's 24 tokens" in p for p in problems), problems
    text = _budget_stage(electra, "{tokens: 250}").replace("corpus: {files:", "corpus: {streaming: true, files:")
    problems = preflight(load_recipe(write_recipe(tmp_path / "stream", text), host=host()), host())
    assert any("budget.tokens 250 is less than one step's 256 tokens" in p for p in problems), problems


def test_the_mlm_baseline_refuses_a_two_tower_init_before_any_stage_trains(electric: Path, tmp_path: Path) -> None:
    """`electra.mlm` given Electric's noise model as `init:` was refused by the stage only (after the
    stages before it had trained, and the corpus was packed): `xfer validate --data` said ok."""
    said = f"init: {electric / 'generator'} is a two-tower noise model (modules head, ltr, rtl), not a masked LM"
    text = _stage(electric, f"init: {electric / 'generator'}", "objective: electra.mlm")
    problems = preflight(load_recipe(write_recipe(tmp_path, text), host=host()), host())
    assert sum(said in p for p in problems) == 1, problems
    with pytest.raises(UserError) as caught:  # the stage, past the pre-flight: its own words
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "stage", host(), preflight=False)
    assert str(caught.value).startswith(said)
    assert any(p.endswith(f": {caught.value}") for p in problems), problems
    fine = _stage(electric, f"init: {electric / 'discriminator'}", "objective: electra.mlm")
    assert not preflight(load_recipe(write_recipe(tmp_path / "fine", fine), host=host()), host())


def test_an_init_from_an_earlier_stage_is_left_to_the_stage(tmp_path: Path) -> None:
    """An `init:` or `init_generator:` an earlier stage makes is not on disk before the run: nothing to
    read, nothing said (the stage checks it when it starts)."""
    stage = (
        "  {name}:\n    kind: electra.pretrain\n    corpus: {{files: corpus.text}}\n    init: {init}\n{more}"
        "    objective: {objective}\n    max_length: 32\n    train: {train}\n"
    )
    text = pretrain_recipe(50, "{name: electric.nce}", ONE_STEP)
    text += stage.format(name="mlm", init="fit.generator", more="", objective="electra.mlm", train=ONE_STEP)
    text += stage.format(
        name="nce",
        init="fit.discriminator",
        more="    init_generator: fit.generator\n",
        objective="{name: electric.nce, generator: {size: 0.5}}",
        train=ONE_STEP,
    )
    assert not preflight(load_recipe(write_recipe(tmp_path, text), host=host()), host())


@pytest.mark.parametrize(
    ("fixture", "objective", "has"),
    [
        ("electric", "{name: electric.nce, generator: {size: 0.5}}", "its towers each have hidden 16"),
        ("electric", "{name: electric.nce, generator: {tie_embeddings: false}}", "its towers each have hidden 16"),
        ("electra", "{name: electra.rtd, generator: {size: 0.5}}", "its encoder has hidden 16"),
    ],
    ids=["two_tower-size", "two_tower-tying", "mlm-size"],
)
def test_an_init_generator_of_another_shape_is_refused_before_any_stage_trains(
    request: pytest.FixtureRequest, tmp_path: Path, fixture: str, objective: str, has: str
) -> None:
    """The stage compares the `init_generator` checkpoint's shape with the generator the settings build
    (`generator_shape_mismatch`) once the corpus is packed; the pre-flight said ok. It now gives the
    stage's message (asserted by test_stage_hostile43 through the stage), and nothing for the settings
    that build the checkpoint's shape."""
    outputs: Path = request.getfixturevalue(fixture)
    generator = outputs / "generator"
    lines = (f"init: {outputs / 'discriminator'}", f"init_generator: {generator}")
    text = _stage(outputs, *lines, f"objective: {objective}")
    problems = preflight(load_recipe(write_recipe(tmp_path, text), host=host()), host())
    with pytest.raises(UserError) as caught:  # the stage, past the pre-flight: its own words
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "stage", host(), preflight=False)
    stage_said = str(caught.value)
    assert stage_said.startswith(f"init_generator: {generator}: {has}"), stage_said
    assert sum(p.endswith(f": {stage_said}") for p in problems) == 1, problems
    with pytest.raises(UserError, match=re.escape(stage_said)):  # `xfer run`: before any stage trains
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host())
    assert not (tmp_path / "run/more").exists()
    fits = objective.split(", generator:")[0] + "}"  # the default generator: the fixture's shape
    text = _stage(outputs, *lines, f"objective: {fits}")
    assert not preflight(load_recipe(write_recipe(tmp_path / "fits", text), host=host()), host())


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        (("init: {o}/generator",), "init: {o}/generator is the generator of an electra.rtd pre-training"),
        (
            ("init: {o}/discriminator", "init_generator: {o}/discriminator"),
            "init_generator: {o}/discriminator is the discriminator of an electra.rtd pre-training",
        ),
    ],
    ids=["init", "init_generator"],
)
def test_a_checkpoint_of_the_other_role_is_refused_before_any_stage_trains(
    electra: Path, tmp_path: Path, lines: tuple[str, ...], said: str
) -> None:
    """A generator as `init:` (or a discriminator as `init_generator:`) was refused by the stage's
    `check_role` only, once the stages before it had trained and the corpus was packed."""
    said = said.format(o=electra)
    text = _stage(electra, *(line.format(o=electra) for line in lines), "objective: electra.rtd")
    problems = preflight(load_recipe(write_recipe(tmp_path, text), host=host()), host())
    with pytest.raises(UserError) as caught:  # the stage, past the pre-flight: its own words
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "stage", host(), preflight=False)
    assert str(caught.value).startswith(said), caught.value
    assert len(problems) == 1 and problems[0].endswith(f": {caught.value}"), problems  # said once, nothing else

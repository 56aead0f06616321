"""Hostile review of `cvt.train` (round 8): what a user's recipe can ask that the stage got wrong."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from xfer.cvt.stage import MultiTaskEvaluator
from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
from xfer.tasks.conll.tasks import UdPosTask
from xfer.testing import make_host, run_recipe_file, write_recipe

CHUNK = "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}"
POS = "{name: conll/ud-pos, train_file: train.conllu, dev_file: dev.conllu}"


class FixedEvaluator:
    """A task's evaluator whose main metric takes the given values, one per call."""

    def __init__(self, metric: str, greater_is_better: bool, values: Sequence[float]):
        self.main_metric, self.greater_is_better, self.values = metric, greater_is_better, list(values)

    def __call__(self, model: Any) -> dict[str, float]:
        return {self.main_metric: self.values.pop(0)}


def test_a_lower_is_better_task_improving_raises_the_multitask_mean():
    """`mean` is what `select: best` maximises in a multi-task stage: averaged raw, an error rate
    falling from 30 to 10 (the other task unchanged) lowered it, so the best checkpoint was the
    one where that task was worst."""
    evaluator = MultiTaskEvaluator(
        {"tags": FixedEvaluator("f1", True, [80.0, 80.0]), "errors": FixedEvaluator("error", False, [30.0, 10.0])}
    )
    worse, better = evaluator(None), evaluator(None)
    assert (worse["errors/error"], better["errors/error"]) == (30.0, 10.0)
    assert better["mean"] > worse["mean"]
    assert better["mean"] == statistics.fmean([80.0, -10.0])


@pytest.fixture
def pos_error_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    """conll/ud-pos scored by its error rate (lower is better), as a plugin's tagging task may be."""
    accuracy = UdPosTask.evaluate

    def evaluate(self: UdPosTask, examples: Sequence[Any], predictions: Mapping[str, Any]) -> dict[str, float]:
        scores = accuracy(self, examples, predictions)
        return {**scores, "error": 100.0 - scores["accuracy"]}

    monkeypatch.setattr(UdPosTask, "evaluate", evaluate)
    monkeypatch.setattr(UdPosTask, "main_metric", "error")
    monkeypatch.setattr(UdPosTask, "greater_is_better", False)


def test_a_trials_multitask_mean_counts_a_lower_is_better_task_negated(tmp_path: Path, pos_error_rate: None):
    """The trial record's `mean` (which picks the median trial whose model is exported) is the
    score the evaluator maximised in training: the error rate counts negated in both."""
    write_tiny_data(tmp_path, train=16, dev=4)
    recipe = write_recipe(tmp_path, tiny_cvt_recipe(CHUNK, POS, mode="supervised", steps=1, checkpoint_every=1))
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    results = json.loads((tmp_path / "run" / "fit" / "outputs" / "results" / "results.json").read_text())
    f1 = results["conll/chunking"]["runs"][0]["f1"]
    error = results["conll/ud-pos"]["runs"][0]["error"]
    assert results["conll/ud-pos"]["greater_is_better"] is False
    assert results["all tasks"]["runs"][0]["mean"] == pytest.approx(statistics.fmean([f1, -error]))


def test_select_best_without_evaluations_is_a_recipe_error_at_its_line(tmp_path: Path):
    """With `train.eval_every: null` no dev evaluation runs, so `select: best` kept the last
    weights without a word (the trainer warns of that fallback only when evaluations ran), as
    `transformer.finetune` refuses."""
    from xfer.core.errors import RecipeError
    from xfer.core.recipes.recipe import load_recipe

    write_tiny_data(tmp_path)
    text = tiny_cvt_recipe(CHUNK, extra="    select: best").replace("eval_every: 4", "eval_every: null")
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "select: best" in row)
    assert f"recipe.yaml:{line}:" in str(caught.value)
    assert "train.eval_every is null" in str(caught.value)


def features_recipe(pretrain_length: int, features_length: int) -> str:
    """An `electra.pretrain` stage of preset `tiny` without `encoder:` overrides, and CVT on its features."""
    return f"""
stages:
  vocab: {{kind: transformer.vocab, files: [unlabeled.txt], size: 200}}
  pretrain:
    kind: electra.pretrain
    corpus: {{files: [unlabeled.txt]}}
    tokenizer: vocab.tokenizer
    model: tiny
    max_length: {pretrain_length}
    train: {{steps: 2, batch_size: 2, warmup_steps: 1}}
  fit:
    kind: cvt.train
    model: tiny
    mode: supervised
    tasks: [{CHUNK}]
    features:
      init: pretrain.discriminator
      max_length: {features_length}
    train: {{steps: 2, batch_size: 8, eval_every: 2}}
"""


def test_features_longer_than_the_positions_a_pretrain_stage_builds_are_refused_before_it_runs(tmp_path: Path):
    """`electra.pretrain` without an `encoder.max_position_embeddings` override builds its preset's
    512 positions (more when its own max_length is longer); only the override was compared, so
    `features.max_length: 600` passed validation and stopped `cvt.train` after pre-training."""
    from xfer.core.errors import RecipeError
    from xfer.core.recipes.recipe import load_recipe

    write_tiny_data(tmp_path)
    text = features_recipe(64, 600)
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "max_length: 600" in row)
    (problem,) = caught.value.diagnostics
    assert problem.location.line == line
    assert "600 is more than the 512 positions of the encoder of stage 'pretrain'" in problem.message
    # a pre-training stage with longer inputs builds as many positions: no false alarm
    load_recipe(write_recipe(tmp_path, features_recipe(600, 600)), host=make_host(autoload=True))


def test_an_unlabeled_batch_that_the_processes_do_not_divide_is_blamed_on_its_own_key(tmp_path: Path):
    """`unlabeled.batch_size: 30` on 4 processes (train.batch_size 32 divides evenly): the error
    said `train.batch_size 30 must be a multiple...`, a key with another value."""
    from xfer.core.errors import UserError
    from xfer.cvt.data import UnlabeledCorpus, UnlabeledStream

    text = tmp_path / "unlabeled.txt"
    text.write_text("the dog runs\n", encoding="utf-8")
    corpus = UnlabeledCorpus([text], chunk_lines=4, max_length=10, tokenizer="whitespace")
    with pytest.raises(
        UserError, match=r"^unlabeled\.batch_size 30 \(its default: train\.batch_size\) must be a multi"
    ):
        UnlabeledStream(corpus, 30, list, seed=0, rank=0, world_size=4)
    UnlabeledStream(corpus, 32, list, seed=0, rank=0, world_size=4)


def test_word_vectors_for_an_encoder_without_word_embeddings_are_refused_at_their_line(tmp_path: Path):
    """`features.combine: replace` builds no word embedding: `vocab.vectors` was read whole, checked
    against the labeled words, and then left unused without a word."""
    from xfer.core.errors import RecipeError
    from xfer.core.recipes.recipe import load_recipe

    write_tiny_data(tmp_path)
    text = features_recipe(64, 64).replace(
        "      max_length: 64\n", "      max_length: 64\n      combine: replace\n      joins: input\n"
    )
    text = text.replace("  fit:\n", "  vectors: {kind: cvt.vectors, files: [unlabeled.txt], dim: 16}\n  fit:\n")
    text = text.replace("    features:\n", "    vocab:\n      vectors: vectors.vectors\n    features:\n")
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "vectors: vectors.vectors" in row)
    (problem,) = caught.value.diagnostics
    assert problem.location.line == line
    assert "features.combine: replace gives the encoder no word embeddings" in problem.message
    load_recipe(
        write_recipe(
            tmp_path, text.replace("combine: replace", "combine: concat").replace("joins: input", "joins: layer2")
        ),
        host=make_host(autoload=True),
    )

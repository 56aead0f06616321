"""`corpus: {streaming: true, stream_sharding: shards}`: ranks read disjoint shards of a streamed corpus.

`PretrainBatches` had the mode (`stream_sharding="shards"`) and the trainer saved every rank's cursor
for it, but `electra.pretrain` never passed it and the corpus had no setting: under torchrun every rank
read and tokenized the whole stream. These tests reach it from a recipe: the key is refused where it
would be read by nothing, the stage's batch source gives each rank its own shards, too few shards
fail at stage start naming the key, and a two-process run trains and resumes after SIGKILL exactly
(the torchrun harness of test_ddp_streams43, imported).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from xfer.core.config import FieldError
from xfer.core.errors import RecipeError, UserError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.recipes.schema import to_plain
from xfer.electra import stage as electra_stage
from xfer.testing import make_host, write_recipe

from .electra_recipes import pretrain_recipe
from .test_data import build, corpus_of, kit, real_rows, write_corpus  # noqa: F401  (kit: the fixture)
from .test_ddp_streams43 import _calls, _last_cursor, _losses, _torchrun, needs_torchrun

ONE_STEP = "{steps: 1, batch_size: 8, warmup_steps: 0}"


def _recipe_with_corpus(corpus: str) -> str:
    """The shared tiny recipe with `corpus:` (line 9, column 5 of `fit`) replaced."""
    text = pretrain_recipe(50, "{name: electra.rtd}", ONE_STEP)
    return text.replace("corpus: {files: corpus.text}", f"corpus: {corpus}")


def _source(monkeypatch: pytest.MonkeyPatch, stream, corpus, rank: int, world_size: int):
    """The batch source `electra.pretrain` builds on `rank` of `world_size` (ranks faked in one process)."""
    monkeypatch.setattr(electra_stage.dist, "rank", lambda: rank)
    monkeypatch.setattr(electra_stage.dist, "world_size", lambda: world_size)
    ctx = SimpleNamespace(seed=5)
    train = SimpleNamespace(batch_size=4, grad_accum=1)
    return electra_stage._source(ctx, train, stream, SimpleNamespace(pad_id=0), corpus)


# --- the recipe key ---------------------------------------------------------------------------------


def test_stream_sharding_without_streaming_is_refused_at_the_key(tmp_path: Path) -> None:
    """A packed corpus is split among ranks by rows: `stream_sharding: shards` there would be read by nothing."""
    text = _recipe_with_corpus("{files: corpus.text, stream_sharding: shards}")
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))
    [problem] = caught.value.diagnostics
    assert problem.message.startswith("stages.fit.corpus.stream_sharding: "), problem
    assert "streaming: true" in problem.message, problem
    lines = text.splitlines()
    assert "stream_sharding" in lines[problem.location.line - 1], problem  # at the setting's line
    with pytest.raises(FieldError, match=r"^stream_sharding: shards is read only with `streaming: true`"):
        corpus_of([tmp_path / "a.txt"], stream_sharding="shards")


def test_an_unknown_stream_sharding_is_refused_at_the_key(tmp_path: Path) -> None:
    text = _recipe_with_corpus("{files: corpus.text, streaming: true, stream_sharding: rows}")
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(tmp_path, text), host=make_host(autoload=True))
    [problem] = caught.value.diagnostics
    assert "stream_sharding" in problem.message and "rows" in problem.message, problem
    with pytest.raises(FieldError, match="stream_sharding: must be examples or shards"):
        corpus_of([tmp_path / "a.txt"], streaming=True, stream_sharding="rows")


def test_stream_sharding_loads_with_streaming_and_defaults_to_examples(tmp_path: Path) -> None:
    """`examples` stays the default, so recipes without the key train (and are signed) as before."""
    for corpus, wanted in (
        ("{files: corpus.text, streaming: true, stream_sharding: shards}", "shards"),
        ("{files: corpus.text, streaming: true}", "examples"),
        ("{files: corpus.text, stream_sharding: examples}", "examples"),  # the default, said aloud
    ):
        recipe = load_recipe(write_recipe(tmp_path, _recipe_with_corpus(corpus)), host=make_host(autoload=True))
        settings = recipe.stages["fit"].config.corpus
        assert settings.stream_sharding == wanted
        # unsigned at its default: the runs of recipes without the key keep their fingerprints
        assert ("stream_sharding" in to_plain(settings, signing=True)) == (wanted == "shards")


# --- the stage's batch source -------------------------------------------------------------------------


def _shard_examples(stream, index: int) -> set[tuple[int, ...]]:
    shard = stream.shard(num_shards=stream.num_shards, index=index, contiguous=True)
    return {tuple(example["input_ids"]) for example in shard}


def test_the_stages_source_gives_each_rank_disjoint_shards(kit: dict, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Before, `_source` never passed the setting: every rank read every shard, keeping every 2nd example."""
    corpus = corpus_of(kit["files"], streaming=True, stream_sharding="shards", shuffle_buffer=10)
    stream = build(kit, kit["root"] / "cache-sharding43", corpus=corpus)
    assert stream.num_shards >= 4
    owned = []
    for rank in (0, 1):
        source = _source(monkeypatch, stream, corpus, rank, 2)
        assert source.state_dict()["sharding"] == "shards"
        mine = set().union(*(_shard_examples(stream, i) for i in range(rank, stream.num_shards, 2)))
        theirs = set().union(*(_shard_examples(stream, i) for i in range(1 - rank, stream.num_shards, 2)))
        read = {row for _ in range(15) for batch in source.next_step() for row in real_rows(batch)}
        assert len(read) > 20
        assert read <= mine, f"rank {rank} read examples of shards that are not its own"
        assert not read & (theirs - mine)
        owned.append(read)
    assert not owned[0] & owned[1] - (_shard_examples(stream, 0) & _shard_examples(stream, 1))
    # the default keeps what every existing recipe did: every rank reads the whole stream
    default = _source(monkeypatch, stream, corpus_of(kit["files"], streaming=True, shuffle_buffer=10), 0, 2)
    assert default.state_dict()["sharding"] == "examples"


def test_a_stream_with_fewer_shards_than_ranks_is_refused_at_stage_start_naming_the_key(
    tmp_path: Path,
    kit: dict,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    small = write_corpus(tmp_path / "one.txt", seed=3, docs=5)  # a few hundred bytes: one 1 MiB block, one shard
    corpus = corpus_of([small], streaming=True, stream_sharding="shards")
    stream = build(kit, tmp_path / "cache", corpus=corpus, files=[small], block_bytes=1 << 20)
    assert stream.num_shards == 1
    with pytest.raises(
        UserError, match=r"corpus\.stream_sharding: shards needs at least one shard per rank \(2\)"
    ) as e:
        _source(monkeypatch, stream, corpus, 0, 2)
    assert "1 shard " in str(e.value) and str(small) in str(e.value)
    assert _source(monkeypatch, stream, corpus, 0, 1).state_dict()["sharding"] == "examples"  # one process: all


# --- two processes ------------------------------------------------------------------------------------

RECIPE = """
name: pre
seed: 2
stages:
  left: {kind: toy.corpus, sentences: 60}
  right: {kind: toy.corpus, sentences: 60, seed: 8}
  vocab: {kind: transformer.vocab, files: [left.text, right.text], size: 200, min_frequency: 1}
  fit:
    kind: electra.pretrain
    corpus: {files: [left.text, right.text], streaming: true, stream_sharding: shards, shuffle_buffer: 6}
    tokenizer: vocab.tokenizer
    model: tiny
    encoder: {num_layers: 1, hidden_size: 32, embedding_size: 16, intermediate_size: 64, num_heads: 2}
    max_length: 32
    objective: {name: electra.rtd}
    train: {steps: 8, batch_size: 8, warmup_steps: 2, log_every: 1, checkpoint_every: 4}
"""
"""Two corpus files: a file end ends a block, so the stream has two shards, one per rank."""


@needs_torchrun
@pytest.mark.usefixtures("one_thread")
def test_sharded_streaming_in_two_processes_reads_disjoint_shards_and_resumes_after_sigkill(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path, RECIPE)
    whole = _torchrun(recipe, tmp_path / "whole", tmp_path / "whole.jsonl")
    assert whole.returncode == 0, whole.stderr[-3000:]
    ranks = [_calls(tmp_path / "whole.jsonl", r)[:8] for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == 8
    seen = [{tuple(x) for call in ranks[r] for x in call["rows"]} for r in (0, 1)]
    assert not seen[0] & seen[1], "the ranks read examples of one shard"
    for step in range(8):
        cursors = [ranks[r][step]["cursor"] for r in (0, 1)]
        assert [c["sharding"] for c in cursors] == ["shards", "shards"] and [c["rank"] for c in cursors] == [0, 1]
    saved = _last_cursor(tmp_path / "whole")
    assert isinstance(saved, list) and [s["rank"] for s in saved] == [0, 1]  # one cursor per rank

    killed = _torchrun(recipe, tmp_path / "run", tmp_path / "killed.jsonl", "--kill-at-step", "6")
    status = json.loads((tmp_path / "run/fit/stage.json").read_text())["status"]
    assert killed.returncode != 0 and status != "completed"
    resumed = _torchrun(recipe, tmp_path / "run", tmp_path / "resumed.jsonl")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming" in resumed.stdout + resumed.stderr
    for r in (0, 1):
        after = _calls(tmp_path / "resumed.jsonl", r)
        assert len(after) >= 4, after  # resumed from the checkpoint of step 4: steps 5 to 8
        assert after[:4] == ranks[r][4:8], f"rank {r}: the batches after the resume are not the uninterrupted run's"
    assert _last_cursor(tmp_path / "run") == saved
    assert _losses(tmp_path / "run") == _losses(tmp_path / "whole")

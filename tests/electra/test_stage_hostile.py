"""`electra.pretrain` as a careless or hostile user meets it: budgets next to the recipe's own
steps or epochs, budgets and `xfer flops` for stages whose model an earlier stage makes."""

from __future__ import annotations

import dataclasses

import pytest

from xfer.core.errors import DataError, RecipeError, UserError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import check_data
from xfer.electra.flops_cli import stage_flops
from xfer.testing import make_host, run_recipe_file, write_recipe

from .electra_recipes import TINY

# `fit` takes its tokenizer from `vocab`, `more` its model and `again` its tokenizer from `fit`: none
# exists before the run.
RECIPE = f"""
stages:
  corpus: {{kind: toy.corpus, sentences: 50}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200, min_frequency: 1}}
  fit:
    kind: electra.pretrain
    corpus: {{files: corpus.text}}
    tokenizer: vocab.tokenizer
    model: tiny
    encoder: {TINY}
    max_length: 32
    train: {{steps: 8, batch_size: 8, warmup_steps: 2}}
  more:
    kind: electra.pretrain
    corpus: {{files: corpus.text}}
    init: fit.discriminator
    max_length: 32
    train: {{steps: 8, batch_size: 8, warmup_steps: 2}}
  again:
    kind: electra.pretrain
    corpus: {{files: corpus.text}}
    tokenizer: fit.tokenizer
    model: tiny
    encoder: {TINY}
    max_length: 32
    train: {{steps: 8, batch_size: 8, warmup_steps: 2}}
"""


def host():
    return make_host(autoload=True)


def test_a_budget_next_to_the_recipes_own_steps_or_epochs_is_refused(tmp_path) -> None:
    """The budget decided the steps and `train.steps`/`train.epochs` were ignored without a word:
    `stages.electra.train.steps=100` on a budget recipe trained the whole budget."""
    path = write_recipe(tmp_path, RECIPE)
    budget = "stages.fit.budget={steps: 3}"
    with pytest.raises(RecipeError, match=r"fit\.budget: .*so train\.steps 8 would be ignored.*`train\.steps: null`"):
        load_recipe(path, [budget], host())
    with pytest.raises(RecipeError, match=r"so train\.epochs 2 would be ignored: .*remove train\.epochs"):
        load_recipe(path, [budget, "stages.fit.train={epochs: 2, batch_size: 8, warmup_steps: 2}"], host())
    # a budget alone (the default 1M steps, or steps set to null) is what it replaces
    assert load_recipe(path, [budget, "stages.fit.train.steps=null"], host()).stages["fit"].config.budget.steps == 3
    assert (
        load_recipe(path, [budget, "stages.fit.train={batch_size: 8, warmup_steps: 1}"], host())
        .stages["fit"]
        .config.budget
    )


def test_a_flops_budget_is_costed_with_the_model_an_earlier_stage_makes(tmp_path) -> None:
    """The pre-flight costed a step with the preset's 30,522-token vocabulary when the tokenizer
    comes from an earlier stage, and as electra-small when `init:` does: it refused budgets that
    buy steps ("less than one training step"). `xfer flops` costed the `init:` stage as
    electra-small too, ~200x the FLOPs of the tiny model it continues, and a `tokenizer:` from an
    electra.pretrain stage as 30,522 tokens."""
    path = write_recipe(tmp_path, RECIPE)
    recipe = load_recipe(path, host=host())
    fit, more, again = (stage_flops(recipe, name) for name in ("fit", "more", "again"))
    assert more["per_step"] == again["per_step"] == fit["per_step"]
    assert more["vocab_size"] == again["vocab_size"] == fit["vocab_size"] == 200
    budget = 2.5 * fit["flops_per_step"]  # two steps of the 200-token tiny model
    overrides = [
        f"stages.{s}.{k}" for s in ("fit", "more") for k in (f"budget={{flops: {budget}}}", "train.steps=null")
    ]
    recipe = load_recipe(path, overrides, host())
    check_data(recipe, host())  # raised RecipeError for both stages
    assert stage_flops(recipe, "more")["steps"] == stage_flops(recipe, "fit")["steps"] == 2


def test_xfer_flops_of_an_init_from_another_kind_of_stage_says_it_cannot_count(tmp_path) -> None:
    """An `init:` made by a stage of another kind (say a plugin's): its architecture is known only
    once it has run, so no count rather than the preset's."""
    recipe = load_recipe(write_recipe(tmp_path, RECIPE), host=host())
    recipe.stages["fit"] = dataclasses.replace(recipe.stages["fit"], kind="mine.pretrain")
    with pytest.raises(UserError, match=r"stage 'more': init: fit\.discriminator comes from stage 'fit' \(mine"):
        stage_flops(recipe, "more")


def test_a_data_cache_that_cannot_be_a_folder_is_an_error_naming_it(tmp_path) -> None:
    """A `data_cache` below a file (or a file where the default `data/` goes) was a bare
    NotADirectoryError / FileExistsError traceback from `mkdir`."""
    (tmp_path / "notes.txt").write_text("a file\n")
    path = write_recipe(tmp_path, RECIPE)
    cache = tmp_path / "notes.txt" / "cache"
    with pytest.raises(DataError, match=r"notes\.txt/cache: data_cache: cannot create the example cache folder"):
        run_recipe_file(path, tmp_path / "run", host(), [f"stages.fit.data_cache={cache}"], only={"fit"})


def test_xfer_flops_says_lengths_buy_steps_only_for_budgets_that_are_not_in_steps(tmp_path, capsys) -> None:
    """A budget of N steps trains N steps whatever the lengths: "shorter sequences buy it more
    steps" was printed for it too."""
    from xfer.core import cli
    from xfer.core.plugins import set_default_host

    path = str(write_recipe(tmp_path, RECIPE))
    printed = {}
    set_default_host(host())
    try:
        for budget in ("{steps: 3}", "{tokens: 1000}"):
            assert cli.main(["flops", path, f"stages.fit.budget={budget}", "stages.fit.train.steps=null"]) == 0
            printed[budget] = capsys.readouterr().out.split("stage more")[0]
    finally:
        set_default_host(None)
    assert "3 steps (budget)" in printed["{steps: 3}"] and "buy it more steps" not in printed["{steps: 3}"]
    assert "3 steps (budget)" in printed["{tokens: 1000}"] and "buy it more steps" in printed["{tokens: 1000}"]


def test_a_tokenizer_that_turns_the_corpus_into_unk_is_warned_about(tmp_path, capsys) -> None:
    """A vocabulary made for other text (here: English words, Cyrillic corpus) pre-trained on
    [UNK]s where the words were; the report gave only the token count."""
    from xfer.transformer.tokenization import WordPieceTokenizer

    (tmp_path / "en.txt").write_text("the dog saw a big cat near the river .\n" * 20)
    WordPieceTokenizer.train([tmp_path / "en.txt"], vocab_size=60).save(tmp_path / "vocab")
    (tmp_path / "ru.txt").write_text("собака видит большую кошку у реки .\nкошка бежит домой .\n\n" * 20)
    text = f"""
stages:
  fit:
    kind: electra.pretrain
    corpus: {{files: CORPUS}}
    tokenizer: vocab
    model: tiny
    encoder: {TINY}
    max_length: 32
    export_hf: false
    train: {{steps: 1, batch_size: 4, warmup_steps: 0, checkpoint_every: 100}}
"""
    for corpus, warned in (("ru.txt", True), ("en.txt", False)):
        run_recipe_file(write_recipe(tmp_path, text.replace("CORPUS", corpus)), tmp_path / f"run-{corpus}", host())
        report = (tmp_path / f"run-{corpus}" / "fit/report.md").read_text()
        assert ("are [UNK]: the tokenizer" in report) is warned
        assert ("are [UNK]: the tokenizer" in capsys.readouterr().err) is warned


def test_a_resume_onto_other_examples_is_refused_not_mixed(tmp_path) -> None:
    """A `corpus.dataset` file is not signed by the run's fingerprint: edited between a kill and the
    re-run, the checkpoint's cursor resumed onto the new text (two corpora in one model, without a
    word, when the example count stayed the same; a bare ValueError traceback when it did not)."""
    from xfer.core.config import Files
    from xfer.electra.corpus import CorpusConfig
    from xfer.electra.data import PretrainBatches, build_examples
    from xfer.transformer.tokenization import WordPieceTokenizer

    text = "the dog saw a big cat near the river .\nthe cat ran home .\n\n" * 30
    (tmp_path / "a.txt").write_text(text)
    WordPieceTokenizer.train([tmp_path / "a.txt"], vocab_size=60).save(tmp_path / "vocab")

    def batches(corpus: str) -> PretrainBatches:
        path = tmp_path / "corpus.txt"
        path.write_text(corpus)
        corpus = CorpusConfig(files=Files((str(path),)))  # a dataset file reads the same, a little slower
        examples = build_examples(corpus, [path], tmp_path / "vocab", 16, tmp_path / "cache", 1)
        return PretrainBatches(examples, 4, seed=1, pad_id=0)

    first = batches(text)
    first.next_step()
    cursor = first.state_dict()
    batches(text).load_state_dict(cursor)  # the same examples: resumes
    edited = batches(text.replace("dog", "cat"))
    assert edited.steps_per_epoch == first.steps_per_epoch, "as many examples: the cursor would fit them"
    with pytest.raises(UserError, match=r"pre-training examples changed since the checkpoint was saved \(examples"):
        edited.load_state_dict(cursor)
    legacy = {k: v for k, v in cursor.items() if k != "examples"}  # a checkpoint from before the key
    with pytest.raises(
        UserError, match=r"examples changed since the checkpoint was saved \(\d+ packed examples then, \d+ now"
    ):
        batches(text + text).load_state_dict(legacy)


@pytest.mark.parametrize("key", ["text_column: body", "split: validation", "dataset_config: wikitext-2-raw-v1"])
def test_dataset_only_keys_next_to_files_are_refused(tmp_path, key: str) -> None:
    """`corpus: {files: x.txt, text_column: body}` read every line of the files and ignored the key."""
    path = write_recipe(tmp_path, RECIPE)
    name = key.split(":")[0]
    with pytest.raises(RecipeError, match=rf"fit\.corpus\.{name}: is read only with `dataset:`"):
        load_recipe(path, [f"stages.fit.corpus={{files: corpus.text, {key}}}"], host())


def test_a_streamed_corpus_without_tokens_is_an_error_naming_it(tmp_path) -> None:
    """A `dataset:` (not pre-flighted) or a file of bytes with no tokens, streamed: the error said
    "the corpus stream yields no examples", without naming the corpus."""
    blank = tmp_path / "blank.txt"
    blank.write_text("\n \n\t\n")
    path = write_recipe(tmp_path, RECIPE)
    overrides = [f"stages.fit.corpus={{dataset: {blank}, streaming: true}}"]
    with pytest.raises(UserError, match=rf"^{blank}: the corpus yields no examples"):
        run_recipe_file(path, tmp_path / "run", host(), overrides, only={"fit"})


def test_a_random_init_model_records_the_tokenizers_padding_id(tmp_path) -> None:
    """The HF export's config.json named token 0 as padding whatever the vocabulary's [PAD] id."""
    import json

    words = sorted({w for line in ("the cat sat", "a dog ran", "the dog sat on a cat") for w in line.split()})
    tokens = ["[UNK]", "[CLS]", "[PAD]", "[SEP]", "[MASK]", *words, *"abcdefghijklmnopqrstuvwxyz"]
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "vocab.txt").write_text("\n".join(dict.fromkeys(tokens)) + "\n")
    (tmp_path / "corpus.txt").write_text("the cat sat\na dog ran\n\nthe dog sat on a cat\n" * 20)
    recipe = f"""
stages:
  fit:
    kind: electra.pretrain
    corpus: {{files: corpus.txt}}
    tokenizer: tok
    model: tiny
    encoder: {TINY}
    max_length: 16
    train: {{steps: 2, batch_size: 4, warmup_steps: 1}}
"""
    run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", host())
    discriminator = tmp_path / "run" / "fit" / "outputs" / "discriminator"
    assert json.loads((discriminator / "hf" / "config.json").read_text())["pad_token_id"] == 2


def test_a_file_list_reads_only_text_outputs(tmp_path) -> None:
    """`corpus: {files: fit.discriminator}` pre-trained on the model folder's vocab.txt (every .txt in
    an output): a file list's `takes=("text",)` refuses a stage output of another kind, as `Input`
    fields do; a stage output of the text kind and plain paths pass."""
    text = RECIPE + "  vocab2: {kind: transformer.vocab, files: [corpus.text, fit.discriminator], size: 200}\n"
    with pytest.raises(RecipeError, match=r"vocab2\.files: fit\.discriminator is a model; files takes text"):
        load_recipe(write_recipe(tmp_path, text), host=host())
    bad = RECIPE.replace("corpus: {files: corpus.text}", "corpus: {files: vocab.tokenizer}", 1)
    with pytest.raises(RecipeError, match=r"corpus\.files: vocab\.tokenizer is a tokenizer; corpus\.files takes text"):
        load_recipe(write_recipe(tmp_path, bad), host=host())
    assert load_recipe(write_recipe(tmp_path, RECIPE), host=host()).stages["fit"].config.corpus.files


def test_a_local_dataset_is_a_path_of_the_recipes_folder_and_is_signed(tmp_path, monkeypatch) -> None:
    """`corpus.dataset: corpus.jsonl` was a plain string: read from the working directory (not the
    recipe's folder, as every other path) and left out of the fingerprint, so editing it left a
    completed stage "up to date". Now a local file or folder is a Path the fingerprint signs; a
    name that is no local path (a Hub dataset) stays the string."""
    from pathlib import Path

    from xfer.core.runs.fingerprint import FileHasher, signed_inputs

    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text('{"text": "the cat sat"}\n')
    text = RECIPE.replace("corpus: {files: corpus.text}", "corpus: {dataset: corpus.jsonl}", 1)
    monkeypatch.chdir(tmp_path)  # not the recipe's folder
    recipe = load_recipe(write_recipe(folder, text), host=host())
    dataset = recipe.stages["fit"].config.corpus.dataset
    assert dataset == folder / "corpus.jsonl" and isinstance(dataset, Path)
    signed = signed_inputs(recipe.stages["fit"].config, FileHasher(), "fit")
    assert str(folder / "corpus.jsonl") in signed["fit.corpus.dataset"]
    hub = load_recipe(write_recipe(folder, text.replace("corpus.jsonl", "wikitext")), host=host())
    assert hub.stages["fit"].config.corpus.dataset == "wikitext"

"""Hostile recipes and overrides, third round: a check between keys reported where its cause is (several
overrides, an include), which layer's `steps` may win over `epochs` (command line, includes, `<<:`),
an override into a list the recipe does not write, and paths that expanded to nothing or crashed."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.plugins import set_default_host
from xfer.testing import make_host, write_recipe

from .recipes import BARE, testing_host  # noqa: F401 (autouse fixture)
from .recipes import validate_errors as _errors


def test_a_check_in_a_mapping_several_overrides_wrote_is_not_blamed_on_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train` absent from the file, created by `log_every=1`: `grad_accum=3` broke the check, and the
    error pointed at `<override 1: ...log_every=1>` without naming grad_accum's override at all."""
    path = write_recipe(tmp_path, BARE)
    err = _errors(path, capsys, "stages.fit.train.log_every=1", "stages.fit.train.grad_accum=3")
    assert (
        f"{path.resolve()}:3:3: stages.fit.train: batch_size 16 is not a multiple of grad_accum 3 (with "
        "command-line overrides stages.fit.train.log_every=1, stages.fit.train.grad_accum=3)" in err
    ), err
    assert "<override 1" not in err
    # one override alone: that override is the place, as before
    err = _errors(path, capsys, "stages.fit.train.grad_accum=3")
    assert "<override 1: stages.fit.train.grad_accum=3>:1:12: stages.fit.train: batch_size 16" in err, err
    # a section the file wrote as null, filled by two overrides: the file's `train:` line
    path.write_text(BARE + "    train: null\n")
    err = _errors(path, capsys, "stages.fit.train.log_every=1", "stages.fit.train.grad_accum=3")
    assert f"{path.resolve()}:6:5: stages.fit.train: batch_size 16 is not a multiple of grad_accum 3 (with" in err
    # a whole section given by override 1, a key in it by override 2: override 1, naming override 2
    path.write_text(BARE)
    err = _errors(path, capsys, "stages.fit.train={epochs: 2}", "stages.fit.train.grad_accum=3")
    assert (
        "<override 1: stages.fit.train={epochs: 2}>:1:18: stages.fit.train: batch_size 16 is not a multiple of "
        "grad_accum 3 (with command-line override stages.fit.train.grad_accum=3)" in err
    ), err


def test_a_key_left_at_its_default_is_not_blamed_on_the_first_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lead's case: electra.pretrain's default warmup_steps 10000 against `train.steps=100`, with
    `train` created by an earlier `train.log_every=1`, was reported at `<override 1: ...log_every=1>`."""
    set_default_host(make_host(autoload=True))
    path = write_recipe(
        tmp_path,
        "name: el\nstages:\n  corpus: {kind: toy.corpus, sentences: 200}\n"
        "  vocab: {kind: transformer.vocab, files: corpus.text, size: 600}\n"
        "  pretrain:\n    kind: electra.pretrain\n    corpus: {files: corpus.text}\n"
        "    tokenizer: vocab.tokenizer\n    model: tiny\n",
    )
    err = _errors(path, capsys, "stages.pretrain.train.log_every=1", "stages.pretrain.train.steps=100")
    assert f"{path.resolve()}:5:3: stages.pretrain.train.warmup_steps: 10000 is more than train.steps (100)" in err, err
    assert err.splitlines()[0].endswith(
        "(with command-line overrides stages.pretrain.train.log_every=1, stages.pretrain.train.steps=100)"
    ), err


def test_epochs_and_steps_both_given_on_the_command_line_are_one_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train.epochs=3 train.steps=5` was refused as "set in different places", with the advice to set
    steps to null (which a second override of steps then refused too), though one override
    `train={epochs: 3, steps: 5}` or one file may give both: steps wins, as documented."""
    from xfer.core.recipes.recipe import load_recipe

    path = write_recipe(tmp_path, BARE)
    recipe = load_recipe(path, ["stages.fit.train.epochs=3", "stages.fit.train.steps=5"])
    train = recipe.stages["fit"].config.train
    assert (train.epochs, train.steps) == (3.0, 5)
    recipe = load_recipe(path, ["stages.fit.train.warmup_fraction=0.5", "stages.fit.train.warmup_steps=1"])
    assert recipe.stages["fit"].config.train.warmup_steps == 1
    # the file's steps under an override's epochs is still a split, as documented
    path.write_text(BARE + "    train: {steps: 2}\n")
    err = _errors(path, capsys, "stages.fit.train.epochs=3")
    assert "<override 1: stages.fit.train.epochs=3>:1:18: stages.fit.train.epochs" in err
    assert "are set in different places, and steps overrides epochs" in err


def test_steps_set_above_the_files_epochs_wins_as_meant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`xfer run recipes/bam-glue-cpu.yaml stages.multi.train.steps=10` (a file writing `epochs: 6`) was
    refused as a split, advising `steps=null`: steps could not be given on the command line at all. The
    refusal is for the other direction only: `steps` from a layer *below* the one that set `epochs`."""
    from xfer.core.recipes.recipe import load_recipe

    path = write_recipe(tmp_path, BARE + "    train: {epochs: 3, warmup_fraction: 0.5}\n")
    recipe = load_recipe(path, ["stages.fit.train.steps=5", "stages.fit.train.warmup_steps=1"])
    train = recipe.stages["fit"].config.train
    assert (train.steps, train.warmup_steps) == (5, 1)
    # the including file's steps over the included file's epochs: the same, one layer down
    write_recipe(tmp_path, "stages:\n  fit:\n    train: {epochs: 3}\n", "low.yaml")
    path.write_text("include: low.yaml\n" + BARE + "    train: {steps: 4}\n")
    assert load_recipe(path).stages["fit"].config.train.steps == 4
    # and includes of includes, and two includes side by side, keep their order
    write_recipe(tmp_path, "include: low.yaml\nstages:\n  fit:\n    train: {steps: 6}\n", "mid.yaml")
    path.write_text("include: mid.yaml\n" + BARE)
    assert load_recipe(path).stages["fit"].config.train.steps == 6
    write_recipe(tmp_path, "stages:\n  fit:\n    train: {steps: 7}\n", "steps.yaml")
    path.write_text("include: [low.yaml, steps.yaml]\n" + BARE)
    assert load_recipe(path).stages["fit"].config.train.steps == 7
    # the other direction is still refused: the lower file's steps would silently win over epochs
    path.write_text("include: [steps.yaml, low.yaml]\n" + BARE)
    err = _errors(path, capsys)
    assert f"{tmp_path.resolve()}/low.yaml:3:13: stages.fit.train.epochs" in err and "steps overrides epochs" in err
    write_recipe(tmp_path, "include: steps.yaml\nstages:\n  fit:\n    train: {epochs: 3}\n", "mid.yaml")
    path.write_text("include: mid.yaml\n" + BARE)
    assert f"{tmp_path.resolve()}/mid.yaml:4:13: stages.fit.train.epochs" in _errors(path, capsys)


@pytest.mark.parametrize("train", ["", "    train: {no_decay: null}\n"])
def test_an_item_of_a_list_the_recipe_does_not_write_says_to_give_the_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], train: str
) -> None:
    """`train.no_decay.0=x` with the default list made a mapping {'0': 'x'}: "expected a list of strings,
    got a mapping", as if the user had written a mapping."""
    path = write_recipe(tmp_path, BARE + train)
    err = _errors(path, capsys, "stages.fit.train.no_decay.0=x")
    assert (
        "<override 1: stages.fit.train.no_decay.0=x>:1:18: stages.fit.train.no_decay: the recipe writes no list "
        "here, so an override cannot set an item of it (the default list cannot be indexed); give the whole list: "
        "stages.fit.train.no_decay=[...]" in err
    ), err
    # a list the recipe writes takes the item, as documented
    from xfer.core.recipes.recipe import load_recipe

    path.write_text(BARE + "    train: {no_decay: [bias, norm]}\n")
    assert load_recipe(path, ["stages.fit.train.no_decay.1=layernorm"]).stages["fit"].config.train.no_decay == [
        "bias",
        "layernorm",
    ]


def test_a_check_reported_at_the_recipes_mapping_names_the_included_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train: {lr: 1e-3}` over an include's `train: {batch_size: 8, grad_accum: 3}`: the error pointed
    at the recipe's `train` line, which holds neither key, and did not name the included file."""
    common = write_recipe(tmp_path, "stages:\n  fit:\n    train: {batch_size: 8, grad_accum: 3}\n", "common.yaml")
    path = write_recipe(tmp_path, "include: common.yaml\n" + BARE + "    train: {lr: 1e-3}\n")
    err = _errors(path, capsys)
    assert (
        f"{path.resolve()}:7:12: stages.fit.train: batch_size 8 is not a multiple of grad_accum 3 "
        f"(with batch_size, grad_accum from {common.resolve()})" in err
    ), err
    # the included file alone: its own line, and nothing to add
    path.write_text("include: common.yaml\n" + BARE)
    err = _errors(path, capsys)
    assert f"{common.resolve()}:3:12: stages.fit.train: batch_size 8 is not a multiple of grad_accum 3\n" in err, err


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("${XFER_H3_UNSET:-}", "'${XFER_H3_UNSET:-}' expands to an empty path"),
        ("${XFER_H3_EMPTY}", "'${XFER_H3_EMPTY}' expands to an empty path"),
        ("${XFER_H3_UNSET:-${HOME}}", "'${XFER_H3_UNSET:-${HOME}}': '${HOME}' is not expanded"),
        ("${XFER H3}", "'${XFER H3}': '${XFER H3}' is not expanded"),
    ],
)
def test_a_path_that_expands_to_nothing_or_keeps_a_variable_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    """`init: ${MODEL:-}` was the folder of the recipe itself, taken as the checkpoint to start from
    (a `Path` field the same: a cache folder among the recipes); `${A:-${B}}` looked for a folder
    literally named `${B}`."""
    monkeypatch.delenv("XFER_H3_UNSET", raising=False)
    monkeypatch.setenv("XFER_H3_EMPTY", "")
    second = f'  second:\n    kind: testing.fit\n    task: toy/agreement\n    init: "{value}"\n'
    path = write_recipe(tmp_path, BARE + second)
    assert f"{path.resolve()}:9:11: stages.second.init: {message}" in _errors(path, capsys)
    path.write_text(f'include: "{value}"\n' + BARE)
    assert f"{path.resolve()}:1:10: include: {message}" in _errors(path, capsys)


def test_an_override_of_a_merged_key_is_the_overrides_not_the_merges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train: {<<: *t, epochs: 3}` refuses the merged `steps` (documented), and `train.steps=9` on the
    command line replaces it, yet the key still counted as merged: refused as a split, with the advice
    to set steps to null."""
    from xfer.core.recipes.recipe import load_recipe

    merged = "  fit2:\n    kind: testing.fit\n    task: toy/agreement\n    train: {<<: *t, epochs: 3}\n"
    path = write_recipe(tmp_path, BARE + "    train: &t {steps: 2, batch_size: 8}\n" + merged)
    assert "stages.fit2.train.epochs" in _errors(path, capsys)  # the merged steps under epochs: as documented
    train = load_recipe(path, ["stages.fit2.train.steps=9"]).stages["fit2"].config.train
    assert (train.steps, train.epochs, train.batch_size) == (9, 3.0, 8)


def test_a_path_with_a_name_too_long_for_a_file_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Path.exists() raises OSError (ENAMETOOLONG) on a name of more than 255 bytes: `include:` and
    `init:` of such a name ended `xfer validate` with a bare traceback."""
    long = "é" * 150  # 300 bytes
    second = f"  second:\n    kind: testing.fit\n    task: toy/agreement\n    init: x/{long}/model\n"
    path = write_recipe(tmp_path, BARE + second)
    said = f"{'é' * 20}...: a file or folder name of 300 bytes (at most 255)"
    assert f"{path.resolve()}:9:11: stages.second.init: {said}" in _errors(path, capsys)
    path.write_text(f"include: {long}\n" + BARE)
    assert f"{path.resolve()}:1:10: include: {said}" in _errors(path, capsys)
    err = _errors(tmp_path / f"{long}.yaml", capsys)  # the recipe itself: unreadable, said in one line
    assert "cannot read file: File name too long" in err

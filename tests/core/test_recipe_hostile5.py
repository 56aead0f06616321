"""Hostile recipes, fifth round: what a `${VAR}` names in a stage input or a path-or-name field is read
like written text (a Hub id, a stage output, a dataset name), not only as a folder beside the recipe."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core import cli
from xfer.testing import write_recipe

from .recipes import BARE, testing_host  # noqa: F401 (autouse fixture)
from .recipes import validate_errors as _errors

SECOND = """\
  second:
    kind: testing.fit
    init: {init}
    task: toy/agreement
"""


def _hub_cache(root: Path, repo: str) -> Path:
    """A Hugging Face cache holding `repo`'s `main` revision (the layout huggingface_hub writes)."""
    folder = root / "hub" / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("0123abcd")
    return snapshot


def test_a_hub_id_or_stage_output_in_a_variable_is_read_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`init: ${MODEL}` with MODEL a cached Hub id, or `${INIT:-fit.model}`, was looked for as a folder
    beside the recipe: "path not found: recipes/someone/toy", and no word of the Hub cache."""
    from xfer.core.recipes.recipe import load_recipe

    snapshot = _hub_cache(tmp_path, "someone/toy")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("XFER_TEST_MODEL", "someone/toy")
    path = write_recipe(tmp_path, BARE + SECOND.format(init="${XFER_TEST_MODEL}"))
    assert load_recipe(path).stages["second"].config.init.path == snapshot
    # a Hub id that is not cached says how to fetch it, as when written out
    monkeypatch.setenv("XFER_TEST_MODEL", "someone/absent")
    err = _errors(path, capsys)
    assert "stages.second.init: path not found" in err and "hf download someone/absent" in err, err
    # a stage output, from the variable or from its default
    monkeypatch.delenv("XFER_TEST_MODEL")
    path.write_text(BARE + SECOND.format(init="${XFER_TEST_MODEL:-fit.model}"))
    recipe = load_recipe(path)
    assert str(recipe.stages["second"].config.init) == "fit.model"
    assert recipe.stages["second"].deps == ("fit",)
    # unset without a default: still the variable's error
    path.write_text(BARE + SECOND.format(init="${XFER_TEST_MODEL}"))
    err = _errors(path, capsys)
    assert "stages.second.init: environment variable XFER_TEST_MODEL is not set" in err, err
    assert cli.main(["validate", str(path), "stages.second.init=fit.model"]) == 0


def test_a_variable_in_a_path_or_name_field_is_expanded_in_a_name_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`dataset: ${DS}` (a `PathOrName`, e.g. the ELECTRA corpus) with DS=wikitext went to the loader as
    the name '${DS}', and with DS unset too: only an existing local path was expanded."""
    from xfer.core.config import PathOrName
    from xfer.core.recipes.schema import INVALID, Validator
    from xfer.core.recipes.yamlsrc import parse_text

    def read(text: str) -> tuple[object, list[str]]:
        validator = Validator()
        node = parse_text(f"dataset: {text}\n", str(tmp_path / "r.yaml")).value["dataset"]
        value = validator.value(node, PathOrName, "dataset")
        return value, [f"{d.location}: {d.message}" for d in validator.diagnostics]

    monkeypatch.setenv("XFER_TEST_DS", "wikitext")
    monkeypatch.delenv("XFER_TEST_UNSET", raising=False)
    assert read("${XFER_TEST_DS}") == ("wikitext", [])
    assert read("${XFER_TEST_UNSET:-user/corpus}") == ("user/corpus", [])
    assert read("wikitext") == ("wikitext", [])
    value, problems = read("${XFER_TEST_UNSET}")
    assert value is INVALID
    assert problems == [
        f"{tmp_path / 'r.yaml'}:1:10: dataset: environment variable XFER_TEST_UNSET is not set "
        "(write ${XFER_TEST_UNSET:-default} to give a default)"
    ]
    # an existing folder is still the folder, as a path
    (tmp_path / "wiki").mkdir()
    monkeypatch.setenv("XFER_TEST_DS", "wiki")
    assert read("${XFER_TEST_DS}") == (tmp_path / "wiki", [])


def test_an_override_key_path_deeper_than_the_nesting_limit_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`stages.fit.train.a.a...=1` with a thousand keys built mappings that deep, and validation died
    with a RecursionError traceback (a file nested so deep is refused at 50 levels)."""
    path = write_recipe(tmp_path, BARE)
    deep = "stages.fit.train." + ".".join(["a"] * 1200) + "=1"
    err = _errors(path, capsys, deep)
    assert f"<override 1: {deep}>:1:1: the key path has 1203 parts: nested more than 50 levels deep" in err, err
    # a path within the limit is read as before: an unknown key, at the key
    err = _errors(path, capsys, "stages.fit.train." + ".".join(["a"] * 40) + "=1")
    assert ":1:18: stages.fit.train.a: unknown key 'a'" in err, err


def test_a_boolean_is_no_choice_of_a_literal_of_numbers() -> None:
    """True == 1 in Python: a plugin's `Literal[1, 2]` field took `yes` (and `true`) silently as True, and
    `Literal[True, "auto"]` took `1`. An integral `1.0` is the choice 1, as an integer field reads it."""
    from typing import Literal

    from xfer.core.recipes.schema import INVALID, Validator
    from xfer.core.recipes.yamlsrc import parse_text

    def read(text: str, tp: object) -> tuple[object, list[str]]:
        validator = Validator()
        value = validator.value(parse_text(f"a: {text}\n", "r.yaml").value["a"], tp, "a")
        return value, [d.message for d in validator.diagnostics]

    assert read("yes", Literal[1, 2]) == (
        INVALID,
        ["a: bool True is not one of 1, 2 (YAML reads yes as true: write 'yes' in quotes if you mean the word)"],
    )
    assert read("1", Literal[True, "auto"]) == (INVALID, ["a: int 1 is not one of True, 'auto'"])
    one = read("1.0", Literal[1, 2])
    assert one == (1, []) and type(one[0]) is int
    assert read("2", Literal[1, 2]) == (2, [])
    assert read("true", Literal[True, "auto"]) == (True, [])
    assert read("adamw", Literal["adamw", "sgd"]) == ("adamw", [])


def test_variables_set_to_nothing_before_a_slash_are_an_error_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`${A}/tmp` with A set to "" is refused (it would be `/tmp`, at the root), but `${A}${B}/tmp` with
    both set to nothing was silently the root's `/tmp`."""
    monkeypatch.setenv("XFER_TEST_A", "")
    monkeypatch.setenv("XFER_TEST_B", "")
    (tmp_path / "tmp").mkdir()
    path = write_recipe(tmp_path, BARE + SECOND.format(init="${XFER_TEST_A}${XFER_TEST_B}/tmp"))
    err = _errors(path, capsys)
    assert (
        f"{path.resolve()}:8:11: stages.second.init: environment variables XFER_TEST_A and XFER_TEST_B are set "
        "to nothing, which makes '${XFER_TEST_A}${XFER_TEST_B}/tmp' the absolute path '/tmp'" in err
    ), err
    # one of them set: a path as written (relative to the recipe's folder); no slash after them: relative
    monkeypatch.setenv("XFER_TEST_B", ".")
    assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err
    monkeypatch.setenv("XFER_TEST_B", "")
    path.write_text(BARE + SECOND.format(init="${XFER_TEST_A}${XFER_TEST_B}tmp"))
    assert cli.main(["validate", str(path)]) == 0, capsys.readouterr().err


def test_a_stage_output_in_a_variable_of_a_file_list_is_read_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`files: ${CORPUS:-corpus.text}` was looked for as a file named `corpus.text` beside the recipe,
    while a stage input (`init:`) reads a stage output from a variable."""
    from xfer.core.recipes.recipe import load_recipe
    from xfer.testing import make_host

    host = make_host(autoload=True)  # transformer.vocab
    monkeypatch.delenv("XFER_TEST_CORPUS", raising=False)
    path = write_recipe(
        tmp_path,
        "name: r\nseed: 1\nstages:\n  corpus: {kind: toy.corpus, sentences: 20}\n"
        "  vocab: {kind: transformer.vocab, files: '${XFER_TEST_CORPUS:-corpus.text}', size: 60}\n",
    )
    recipe = load_recipe(path, host=host)
    assert recipe.stages["vocab"].deps == ("corpus",)
    assert [str(i) for i in recipe.stages["vocab"].config.files.inputs] == ["corpus.text"]
    (tmp_path / "mine.txt").write_text("the cat sat .\n")
    monkeypatch.setenv("XFER_TEST_CORPUS", str(tmp_path / "mine.txt"))
    recipe = load_recipe(path, host=host)
    assert recipe.stages["vocab"].deps == () and recipe.stages["vocab"].config.files.patterns == (
        str(tmp_path / "mine.txt"),
    )

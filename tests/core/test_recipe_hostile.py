"""Hostile recipes and overrides (YAML 1.1 surprises, odd tags and characters, deep nesting, long names,
odd paths, includes, override order and comments): refused with `file:line:col` (exit 2, no traceback)
or kept as written, never silently changed."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

import pytest

from xfer.core.config import Files
from xfer.core.errors import RecipeError
from xfer.core.plugins import set_default_host
from xfer.core.recipes.recipe import load_recipe
from xfer.core.recipes.schema import INVALID, Validator
from xfer.core.recipes.yamlsrc import apply_override, parse_text
from xfer.testing import make_host, write_recipe

from .recipes import validate_errors as _errors

FIT = """\
name: t
stages:
  fit:
    kind: testing.fit
    task: {name: toy/agreement, train_size: 64, dev_size: 16}
    train: {steps: 2, batch_size: 8}
"""


@dataclass
class WithFiles:
    files: Files


@dataclass
class WithFolder:
    cache: Path


@pytest.fixture(autouse=True)
def host():
    set_default_host(make_host(["xfer.testing.plugin"]))
    yield
    set_default_host(None)


@pytest.mark.parametrize("name", ["on", "no", "null", "yes", "off"])
def test_a_key_is_taken_as_written_not_as_a_yaml_1_1_value(tmp_path: Path, name: str) -> None:
    """`on:` was the stage 'True' (run folder True/), `null:` the stage 'None'; overrides name it as written."""
    path = write_recipe(tmp_path, FIT.replace("  fit:", f"  {name}:"))
    recipe = load_recipe(path, [f"stages.{name}.train.steps=3"])
    assert list(recipe.stages) == [name]
    assert recipe.stages[name].config.train.steps == 3


def test_a_non_decimal_key_is_not_renumbered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_recipe(tmp_path, FIT.replace("  fit:", "  010:"))
    assert "recipe.yaml:3:3: stage name '010' must start with a letter or '_'" in _errors(path, capsys)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "2020-13-01",
            "stage name '2020-13-01' must start with a letter or '_'",
        ),  # an impossible date crashed (ValueError)
        ("!!python/object:os.system x", "unsupported YAML tag 'tag:yaml.org,2002:python/object:os.system' on a key"),
        ("!!binary aGVsbG8=", "unsupported YAML tag 'tag:yaml.org,2002:binary' on a key"),
    ],
)
def test_odd_keys_are_errors_at_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, message: str
) -> None:
    path = write_recipe(tmp_path, FIT + f"  {key}: {{kind: toy.corpus}}\n")
    assert f"recipe.yaml:7:3: {message}" in _errors(path, capsys)


def test_a_date_like_value_keeps_its_text(tmp_path: Path) -> None:
    """A timestamp was built and printed back (`2001-12-14 21:59:43.100000-05:00`), or crashed when impossible;
    a plain `=` was "unsupported YAML tag 'tag:yaml.org,2002:value'"."""
    for text in ("2001-12-14t21:59:43.10-05:00", "2020-13-01", "2020-1-1 1:00:00", "="):
        path = write_recipe(tmp_path, f"description: {text}\n" + FIT)
        assert load_recipe(path).description == text


@pytest.mark.parametrize("value", ["!!int abc", "!!float .", "!!bool maybe", "!!map x", "!!int 0x"])
def test_an_explicit_tag_on_text_it_cannot_read_is_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    path = write_recipe(tmp_path, FIT)
    err = _errors(path, capsys, f"description={value}")
    raw = value.split(" ", 1)[1]
    assert f"<override 1: description={value}>:1:13: invalid value: {raw!r} cannot be read as !!" in err
    assert "1 problem found" in err


@pytest.mark.parametrize(
    ("value", "col", "message"),
    [
        ("{a: 1", 19, "YAML syntax error"),
        ("*a", 14, "YAML syntax error: found undefined alias 'a'"),
        ("{x: 1, x: 2}", 21, "duplicate key 'x'"),
        ("!!python/object:os.system x", 14, "unsupported YAML tag"),
    ],
)
def test_problems_in_an_override_value_point_into_the_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, col: int, message: str
) -> None:
    """They were reported at the column inside the value alone (`:1:1` for a tag 13 characters in)."""
    path = write_recipe(tmp_path, FIT)
    err = _errors(path, capsys, f"stages.fit.x={value}")
    assert f"<override 1: stages.fit.x={value}>:1:{col}: {message}" in err


def test_a_section_override_after_a_key_inside_it_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train.lr=0.1 train={steps: 3}` dropped lr=0.1 silently (the section replaced it)."""
    path = write_recipe(tmp_path, FIT)
    err = _errors(path, capsys, "stages.fit.train.lr=0.1", "stages.fit.train={steps: 3}")
    assert (
        "<override 2: stages.fit.train={steps: 3}>:1:1: stages.fit.train replaces what override 1 "
        "('stages.fit.train.lr=0.1') set inside it" in err
    )
    err = _errors(path, capsys, "stages.fit.task.train_size=32", "stages.fit={kind: testing.fit}")
    assert "stages.fit replaces what override 1 ('stages.fit.task.train_size=32') set inside it" in err
    # the section first, then keys inside it: both apply
    recipe = load_recipe(path, ["stages.fit.train={steps: 3, batch_size: 8}", "stages.fit.train.lr=0.1"])
    assert (recipe.stages["fit"].config.train.steps, recipe.stages["fit"].config.train.lr) == (3, 0.1)


def test_include_problems_are_errors_at_the_include_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unset `${VAR}` in `include:` was a ValueError traceback; a folder was reported without the line."""
    monkeypatch.delenv("XFER_TEST_UNSET", raising=False)
    (tmp_path / "folder.yaml").mkdir()
    path = write_recipe(tmp_path, "include:\n  - ${XFER_TEST_UNSET}/base.yaml\n  - folder.yaml\n" + FIT)
    err = _errors(path, capsys)
    assert "recipe.yaml:2:5: include: environment variable XFER_TEST_UNSET is not set" in err
    assert f"recipe.yaml:3:5: include: {tmp_path / 'folder.yaml'} is a folder; give a YAML file" in err


def test_an_include_cycle_through_a_symlink_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A symlink to the including file recursed until RecursionError."""
    path = write_recipe(tmp_path, "include: alias.yaml\n" + FIT)
    (tmp_path / "alias.yaml").symlink_to(path)
    assert f"recipe.yaml:1:10: include cycle: {path} includes itself" in _errors(path, capsys)


def test_deep_nesting_is_an_error_not_a_recursion_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A few hundred levels (brackets, indented keys, an override, aliases of aliases) crashed with RecursionError."""
    keys = "".join("  " * (i + 2) + "k:\n" for i in range(400))
    path = write_recipe(tmp_path, FIT + "    x:\n" + keys + "  " * 402 + "1\n")
    assert "recipe.yaml:56:101: nested more than 50 levels deep" in _errors(path, capsys)
    err = _errors(write_recipe(tmp_path, FIT), capsys, "stages.fit.x=" + "[" * 2000 + "]" * 2000)
    assert f"<override 1: stages.fit.x={'[' * 2000}{']' * 2000}>:1:64: nested more than 50 levels deep" in err
    chain = "".join(f"    a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 400))
    path = write_recipe(tmp_path, FIT + "    a0: &a0 [1]\n" + chain)
    assert "nested more than 50 levels deep (aliases inside aliases?)" in _errors(path, capsys)
    shallow = write_recipe(tmp_path, "description: " + "[" * 40 + "]" * 40 + "\n" + FIT)
    assert "description: expected a string, got a list" in _errors(shallow, capsys)


def test_names_longer_than_a_folder_name_are_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 300-character stage or run name validated, then crashed the run with ENAMETOOLONG at its folder."""
    path = write_recipe(tmp_path, FIT.replace("  fit:", "  " + "s" * 300 + ":"))
    assert f"recipe.yaml:3:3: stage name {'s' * 20}...: at most 255 characters, got 300" in _errors(path, capsys)
    path = write_recipe(tmp_path, FIT)
    assert "it must be one folder name" in _errors(path, capsys, "name=" + "é" * 128)  # 256 bytes
    assert load_recipe(path, ["name=" + "é" * 127]).name == "é" * 127
    assert "it must be one folder name" in _errors(path, capsys, 'name="\\ud800"')  # UnicodeEncodeError at mkdir


@pytest.mark.parametrize(("word", "meaning"), [("no", "false"), ("On", "true"), ("~", "null")])
def test_a_yaml_1_1_word_read_as_a_boolean_or_null_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], word: str, meaning: str
) -> None:
    """`description: no` said "got bool False": the Norway problem, with no hint at the word written."""
    path = write_recipe(tmp_path, f"description: {word}\n" + FIT)
    err = _errors(path, capsys)
    assert "recipe.yaml:1:14: description: expected a string, got " in err
    assert f"(YAML reads {word} as {meaning}: write '{word}' in quotes if you mean the word)" in err
    assert "YAML reads" not in _errors(path, capsys, "description=true")  # written as a boolean: no hint
    assert load_recipe(path, [f"description='{word}'"]).description == word


def test_epochs_next_to_a_merged_steps_is_refused_under_an_include_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train: {<<: *fast, epochs: 3}` is refused (the merged steps would win); when an included file also
    set `train`, the include merge forgot which keys were merged and steps: 6 won silently."""
    write_recipe(tmp_path, FIT.replace("name: t\n", ""), "base.yaml")
    text = (
        "include: base.yaml\nstages:\n  first:\n    kind: testing.fit\n    task: toy/agreement\n"
        "    train: &fast {steps: 6, batch_size: 8}\n  fit:\n    train:\n      <<: *fast\n      epochs: 3\n"
    )
    err = _errors(write_recipe(tmp_path, text), capsys)
    assert "recipe.yaml:10:7: stages.fit.train.epochs" in err and "steps overrides epochs" in err


def test_a_nul_character_in_a_path_is_an_error_at_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A NUL in a file pattern crashed glob with "ValueError: embedded null byte"; in a folder to create
    it passed validation; in `init:` or `include:` it was reported as a path with the NUL printed raw."""
    path = write_recipe(tmp_path, FIT)
    err = _errors(path, capsys, 'stages.fit.init="a\\0b"')
    assert (
        "<override 1: stages.fit.init=\"a\\0b\">:1:17: stages.fit.init: 'a\\x00b': a path cannot contain a NUL" in err
    )
    validator = Validator()
    assert validator.dataclass(parse_text('files: "/\\0/*"', "cfg.yaml"), WithFiles, "cfg") is INVALID
    assert [str(d) for d in validator.diagnostics] == [
        "cfg.yaml:1:8: cfg.files: '/\\x00/*': a path cannot contain a NUL character"
    ]
    err = _errors(write_recipe(tmp_path, 'include: "x\\0.yaml"\n' + FIT), capsys)
    assert "recipe.yaml:1:10: include: 'x\\x00.yaml': a path cannot contain a NUL character" in err


def test_a_second_yaml_document_says_what_was_expected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The message was "YAML syntax error: but found another document", without what was expected."""
    err = _errors(write_recipe(tmp_path, FIT + "---\nseed: 2\n"), capsys)
    assert "recipe.yaml:7:1: YAML syntax error: expected a single document in the stream, but found another" in err


def test_a_control_character_is_reported_at_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was a two-line message with an offset into "<unicode string>" and no line (`position 49`)."""
    err = _errors(write_recipe(tmp_path, FIT.replace("toy/agreement", "toy/\x01agreement")), capsys)
    assert "recipe.yaml:5:22: YAML error: character U+0001 is not allowed (a control or special character)\n" in err
    err = _errors(write_recipe(tmp_path, FIT), capsys, "description=a\x02")
    assert "<override 1: description=a\x02>:1:14: YAML error: character U+0002 is not allowed" in err


def test_a_tab_error_says_to_use_spaces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _errors(write_recipe(tmp_path, FIT.replace("kind: testing.fit", "kind:\ttesting.fit")), capsys)
    assert "recipe.yaml:4:10: YAML syntax error: found character '\\t' that cannot start any token (use spaces" in err


@pytest.mark.parametrize("index", ["²", "00", "01", "١"])
def test_a_list_index_is_plain_decimal(tmp_path: Path, capsys: pytest.CaptureFixture[str], index: str) -> None:
    """`²` passed str.isdigit() and crashed int(); `00` or `١` named item 0 again, so a second override
    of the same item won silently instead of being refused as a key given twice."""
    root = parse_text("tasks: [{train_size: 64}, {train_size: 64}]", "r.yaml")
    problems = apply_override(root, ["tasks", index, "train_size"], parse_text("32", "v"), "o", 1)
    assert [d.message for d in problems] == [f"'tasks.{index}': no list item {index!r} (list has 2 items)"]
    assert root.to_python() == {"tasks": [{"train_size": 64}, {"train_size": 64}]}


def test_huge_numbers_are_errors_at_the_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 400-digit integer for a float field raised OverflowError; a 5000-digit one (beyond Python's
    int-to-text limit) raised ValueError while parsing: both tracebacks."""
    path = write_recipe(tmp_path, FIT)
    err = _errors(path, capsys, "stages.fit.train.lr=" + "9" * 400)
    assert "<override 1: stages.fit.train.lr=" + "9" * 400 + ">:1:21: stages.fit.train.lr: 400-digit number" in err
    err = _errors(path, capsys, "stages.fit.train.steps=" + "9" * 5000)
    assert ">:1:24: invalid value: '" + "9" * 5000 + "' cannot be read as !!int" in err


def test_a_yaml_error_names_its_context(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A duplicate anchor was reported as "YAML syntax error: second occurrence", and nothing more."""
    text = (
        FIT.replace("task: {", "task: &t {") + "  again:\n    kind: testing.fit\n    task: &t {name: toy/agreement}\n"
    )
    err = _errors(write_recipe(tmp_path, text), capsys)
    expected = "recipe.yaml:9:11: YAML syntax error: second occurrence (found duplicate anchor 't'; first occurrence at line 5)"
    assert expected in err
    err = _errors(write_recipe(tmp_path, 'description: "open\n' + FIT), capsys)
    assert "found unexpected end of stream (while scanning a quoted scalar at line 1)" in err


def test_a_shell_style_variable_in_a_missing_path_gets_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`$HOME/model` is not expanded (only `${VAR}` is): the error showed a folder literally named `$HOME`."""
    text = "include: $XFER_BASE/base.yaml\n" + FIT.replace("kind: testing.fit", "kind: testing.fit\n    init: $HOME/m")
    err = _errors(write_recipe(tmp_path, text), capsys)
    hint = "(only ${VAR} is expanded: write ${XFER_BASE} for $XFER_BASE)"
    assert f"recipe.yaml:1:10: include: file not found: {tmp_path}/$XFER_BASE/base.yaml {hint}" in err
    err = _errors(
        write_recipe(tmp_path, FIT.replace("kind: testing.fit", "kind: testing.fit\n    init: $HOME/m")), capsys
    )
    assert f"stages.fit.init: path not found: {tmp_path}/$HOME/m (only ${{VAR}} is expanded: write ${{HOME}}" in err


def test_an_existing_file_named_like_a_stage_output_is_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fit.ckpt` next to a stage `fit` (no output `ckpt`) was refused as a misspelt output although the
    file exists; a declared output still wins, and a missing file is still the misspelt output."""
    text = FIT + "  second:\n    kind: testing.fit\n    init: fit.ckpt\n    task: toy/agreement\n"
    path = write_recipe(tmp_path, text)
    assert "stages.second.init: stage 'fit' has no output 'ckpt'" in _errors(path, capsys)
    (tmp_path / "fit.ckpt").mkdir()
    second = load_recipe(path).stages["second"]
    assert (second.config.init.path, second.deps) == (tmp_path / "fit.ckpt", ())
    (tmp_path / "fit.model").mkdir()
    second = load_recipe(path, ["stages.second.init=fit.model"]).stages["second"]
    assert (second.config.init.stage, second.deps) == ("fit", ("fit",))


def test_an_alias_to_an_anchor_of_an_included_file_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_recipe(tmp_path, "stages:\n  fit:\n    train: &fast {steps: 2}\n", "base.yaml")
    text = "include: base.yaml\n" + FIT.replace("train: {steps: 2, batch_size: 8}", "train: *fast")
    err = _errors(write_recipe(tmp_path, text), capsys)
    assert (
        "recipe.yaml:7:12: YAML syntax error: found undefined alias 'fast' (an anchor must come before its alias" in err
    )
    assert "anchors do not cross includes)" in err


def test_a_component_mapping_without_a_usable_name_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`{nme: toy/agreement}` and `{name: 5}` said "expected a task name or a mapping with 'name', got a mapping"."""
    path = write_recipe(tmp_path, FIT)
    err = _errors(path, capsys, "stages.fit.task={nme: toy/agreement, train_size: 8}")
    expected = (
        "stages.fit.task: missing 'name' (the task to use; keys given: 'nme', 'train_size'); is 'nme' meant to be"
    )
    assert expected in err
    err = _errors(path, capsys, "stages.fit.task={name: 5}")
    assert "<override 1: stages.fit.task={name: 5}>:1:24: stages.fit.task.name: expected a string, got int 5" in err


def test_a_file_whose_name_reads_as_a_glob_is_found(tmp_path: Path) -> None:
    """`part[1].txt` exists, but as a pattern it means `part1.txt`: "no file matches" named an existing file."""
    (tmp_path / "part[1].txt").write_text("a b\n")
    validator = Validator()
    value = validator.dataclass(parse_text("files: part[1].txt", str(tmp_path / "cfg.yaml")), WithFiles, "cfg")
    assert validator.diagnostics == []
    assert [Path(p) for p in glob.glob(value.files.patterns[0])] == [tmp_path / "part[1].txt"]
    # with `part1.txt` beside it, the glob read `part1.txt` instead of the file named as written: both
    # readings are refused, naming both files and how to write the file's name
    (tmp_path / "part1.txt").write_text("c d\n")
    validator = Validator()
    value = validator.dataclass(parse_text("files: part[1].txt", str(tmp_path / "cfg.yaml")), WithFiles, "cfg")
    assert value is INVALID
    [diagnostic] = validator.diagnostics
    assert diagnostic.message == (
        f"cfg.files: 'part[1].txt' names {tmp_path / 'part[1].txt'} as written, but as a glob it matches other "
        f"files ({tmp_path / 'part1.txt'}); write 'part[[]1].txt' to read what it names, or name the files the "
        "glob matches instead"
    )
    for written, read in [("part[[]1].txt", "part[1].txt"), ("part1.txt", "part1.txt")]:
        value = validator.dataclass(parse_text(f"files: {written}", str(tmp_path / "cfg.yaml")), WithFiles, "cfg")
        assert [Path(p) for p in glob.glob(value.files.patterns[0])] == [tmp_path / read]


def test_an_override_fills_in_a_section_written_as_null(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`stages.fit.train.lr=0.1` on `train: null` (or an empty `train:`) said "'stages.fit.train' is a
    single value, it has no key 'lr'", as if the file had set it to something."""
    path = write_recipe(tmp_path, FIT.replace("train: {steps: 2, batch_size: 8}", "train:"))
    recipe = load_recipe(path, ["stages.fit.train.steps=3", "stages.fit.train.batch_size=8"])
    assert (recipe.stages["fit"].config.train.steps, recipe.stages["fit"].config.train.batch_size) == (3, 8)
    err = _errors(write_recipe(tmp_path, FIT + "  second:\n"), capsys)
    assert "recipe.yaml:7:10: stages.second: expected a mapping with 'kind', got null\n" in err  # was "got NoneType"


def test_a_lone_surrogate_in_a_path_is_an_error_at_the_key() -> None:
    """`cache: "\\ud800"` passed validation; making the folder raised UnicodeEncodeError in the run."""
    validator = Validator()
    assert validator.dataclass(parse_text('cache: "\\ud800"', "cfg.yaml"), WithFolder, "cfg") is INVALID
    expected = "cfg.yaml:1:8: cfg.cache: '\\ud800': a path cannot contain a lone surrogate character"
    assert [str(d) for d in validator.diagnostics] == [expected]


@pytest.mark.parametrize(("value", "col"), [("baseline #2", 22), ("[bias] # no decay", 34), ("#x", 13)])
def test_a_comment_in_an_override_value_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, col: int
) -> None:
    """`description=baseline #2` set the description to "baseline": YAML dropped the rest as a comment."""
    key = "stages.fit.train.no_decay" if value.startswith("[") else "description"
    err = _errors(write_recipe(tmp_path, FIT), capsys, f"{key}={value}")
    assert f"<override 1: {key}={value}>:1:{col}: the value holds a YAML comment (from '#' on" in err
    assert load_recipe(write_recipe(tmp_path, FIT), ["description='baseline #2'"]).description == "baseline #2"


def test_a_misspelt_word_of_a_union_gets_a_suggestion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`eval_every: epcoh` (an integer, 'epoch' or null) had no did-you-mean, unlike a Literal field alone."""
    err = _errors(write_recipe(tmp_path, FIT), capsys, "stages.fit.train.eval_every=epcoh")
    assert (
        "stages.fit.train.eval_every: expected an integer or one of 'epoch' or null, got str 'epcoh'; did you mean"
        in err
    )


def test_a_file_pattern_matching_no_regular_file_says_what_it_found(tmp_path: Path) -> None:
    """A broken symlink or /dev/null in a file list was "matches only directories"."""
    import os

    os.symlink(tmp_path / "gone.txt", tmp_path / "link.txt")
    for written, said in (
        ("link.txt", "link.txt is a broken symbolic link"),
        ("/dev/null", "/dev/null is not a regular file"),
    ):
        recipe = write_recipe(tmp_path, f"stages:\n  v: {{kind: transformer.vocab, files: {written}, size: 100}}\n")
        with pytest.raises(RecipeError, match="matches no regular file") as caught:
            load_recipe(recipe, host=make_host(autoload=True))
        assert said in str(caught.value)


@pytest.mark.parametrize(
    ("key", "dotted", "col"),
    [
        ("stages.fit.task.name[0]", "stages.fit.task.name.0", 21),
        ("stages.fit.train.no_decay[ 1 ]", "stages.fit.train.no_decay.1", 26),
    ],
)
def test_a_bracketed_list_index_gets_the_dotted_spelling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, dotted: str, col: int
) -> None:
    """`tasks[0].name=...` (other tools' spelling) was "unknown key 'tasks[0]'; did you mean 'tasks'?"."""
    err = _errors(write_recipe(tmp_path, FIT), capsys, f"{key}=x")
    assert f"<override 1: {key}=x>:1:{col}: list items are addressed by a dotted index: {dotted!r}, not {key!r}" in err

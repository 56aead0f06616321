"""The user documentation says what the code does: the README's recipe example works when copied
(a user's first contact must not be an error), and documented tables, commands and overrides match
the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xfer.core.errors import UserError
from xfer.core.recipes.recipe import load_recipe
from xfer.testing import make_host

from .conftest import REPO, shared_data_dir


def readme_recipes() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return [block for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S) if "stages:" in block]


def test_readme_has_a_recipe_example() -> None:
    assert readme_recipes(), "README.md lost its ```yaml recipe example"


@pytest.mark.parametrize("index", range(len(readme_recipes())))
def test_readme_recipe_validates(index: int, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not shared_data_dir().is_dir():
        pytest.skip(f"the README example reads the datasets at {shared_data_dir()} (set XFER_DATA)")
    monkeypatch.setenv("XFER_DATA", str(shared_data_dir()))
    recipe = tmp_path / "my-experiment.yaml"
    recipe.write_text(readme_recipes()[index], encoding="utf-8")
    plan = load_recipe(recipe, host=make_host(autoload=True))
    assert list(plan.stages) == ["vocab", "finetune"]


# --- documented config tables match the code -------------------------------------------------
# A table row `| `field` | default | meaning |` that disagrees with the config class misleads every
# reader (found: task files documented with default `None` that are required; TrainConfig rows
# whose meaning lost half of the field's doc). The tables are checked against the classes here.


def _table_after(text: str, marker: str) -> list[list[str]]:
    """The cells of the first Markdown table after `marker` (header and rule rows dropped)."""
    lines = text[text.index(marker) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    columns = lines[start].count(" | ") + 1  # a meaning may itself hold " | " (`linear | constant`)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip()[1:-1].split(" | ", columns - 1)])
    return rows


_REQUIRED = object()


def _documented_default(cell: str) -> object:
    """A default as the READMEs write it: `None`, `required`, YAML (`true`, `-1`, `[accuracy]`, `"\\t"`)."""
    import yaml

    value = cell.strip().strip("`")
    if value == "required":
        return _REQUIRED
    if value == "None":
        return None
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError:  # `{split}.{lang}`: a plain string
        return value


# (file, text just before the table, task whose config class the table documents)
TASK_CONFIG_TABLES = [
    ("plugins/xfer-tasks-glue/README.md", "## Config: `GlueTaskConfig`", "glue/rte"),
    ("plugins/xfer-tasks-glue/README.md", "## `glue/tsv`: a task defined in the recipe", "glue/tsv"),
    ("plugins/xfer-tasks-conll/README.md", "Common fields (`FilesConfig`)", "conll/ner"),
    ("plugins/xfer-tasks-conll/README.md", "`conll/ner` (`SpanTaggingConfig`) adds", "conll/ner"),
    ("plugins/xfer-tasks-conll/README.md", "`conll/chunking` (`ChunkingConfig`)", "conll/chunking"),
    ("plugins/xfer-tasks-conll/README.md", "`conll/columns` (`ColumnsConfig`) adds", "conll/columns"),
    ("plugins/xfer-tasks-squad/README.md", "## Config: `SquadConfig`", "squad/v1"),
    ("plugins/xfer-tasks-mt/README.md", "## `mt/parallel`", "mt/parallel"),
]


@pytest.mark.parametrize(("path", "marker", "task"), TASK_CONFIG_TABLES)
def test_task_config_tables_give_the_code_defaults(path: str, marker: str, task: str) -> None:
    import dataclasses

    text = (REPO / path).read_text(encoding="utf-8")
    config = make_host(autoload=True).config_class("task", task, target=False)
    fields = {f.name: f for f in dataclasses.fields(config)}
    checked = 0
    for row in _table_after(text, marker):
        names = [n.strip().strip("`") for n in row[0].replace(" / ", ", ").split(", ")]
        defaults = row[1].replace(" / ", ", ").split(", ") if len(names) > 1 else [row[1]]
        defaults = defaults * len(names) if len(defaults) == 1 else defaults  # `dev`, `test` | `None`
        assert len(names) == len(defaults), f"{path}: row {row[0]!r}: one default, or one per field"
        for name, cell in zip(names, defaults, strict=True):
            assert name in fields, f"{path}: {name!r} is not a field of {task}'s config {config.__name__}"
            f = fields[name]
            required = f.metadata.get("required") or (
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            )
            if required:
                code: object = _REQUIRED
            else:
                code = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
            documented = _documented_default(cell)
            assert documented is code if code is _REQUIRED else documented == code, (
                f"{path}: {task} field {name!r} documented with default {cell}, the code has "
                f"{'required' if code is _REQUIRED else repr(code)}"
            )
            checked += 1
    assert checked, f"{path}: no table found after {marker!r}"


def test_recipe_reference_train_table_matches_train_config() -> None:
    """docs/recipes.md's `train:` table gives each TrainConfig field's type, default and doc as
    `xfer explain` prints them (test_cli checks only that every field has a row)."""
    import dataclasses
    import json
    import typing

    from xfer.core.recipes.schema import to_plain, type_name
    from xfer.core.train_config import TrainConfig

    text = (REPO / "docs" / "recipes.md").read_text(encoding="utf-8")
    rows = {row[0].strip("`"): row for row in _table_after(text, "### Shared training settings (`train:`)")}
    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        expected = [
            f"`{f.name}`",
            type_name(hints[f.name]),
            f"`{json.dumps(to_plain(default))}`",
            f.metadata.get("doc", ""),
        ]
        assert rows.get(f.name) == expected, f"docs/recipes.md row of train.{f.name}: {rows.get(f.name)} != {expected}"


def test_recipe_reference_command_line_lists_every_option() -> None:
    """docs/recipes.md's command-line block names every option of the commands it shows (it
    lacked `validate --data`)."""
    from xfer.core.cli import build_parser

    text = (REPO / "docs" / "recipes.md").read_text(encoding="utf-8")
    block = text[text.index("## Command line") :].split("```")[1].replace("\n         ", " ")  # `run` wraps
    parser = build_parser(make_host(autoload=True), [])
    commands = next(a for a in parser._actions if a.dest == "command").choices
    lines = [line for line in block.splitlines() if line.startswith("xfer ")]
    assert lines, "docs/recipes.md lost its command-line block"
    for line in lines:
        name = line.split()[1]
        options = {o for a in commands[name]._actions for o in a.option_strings if o.startswith("--")}
        missing = sorted(options - {"--help"} - set(line.replace("[", " ").replace("]", " ").split()))
        assert not missing, f"docs/recipes.md: `xfer {name}` lacks {missing}"


def test_readme_checkpoint_overrides_of_the_finetune_recipes_validate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's "from any checkpoint" overrides for finetune-glue/-conll are accepted as written
    (`stages.finetune.init=PATH` alone is refused: the recipes' `model: mini` is for random init)."""
    if not shared_data_dir().is_dir():
        pytest.skip(f"the recipes read the datasets at {shared_data_dir()} (set XFER_DATA)")
    monkeypatch.setenv("XFER_DATA", str(shared_data_dir()))
    row = next(
        line
        for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines()
        if "`finetune-glue.yaml`" in line and "stages.finetune.init=PATH" in line
    )
    overrides = next(code for code in re.findall(r"`([^`]*)`", row) if "init=PATH" in code)
    host = make_host(autoload=True)
    for recipe in ("finetune-glue.yaml", "finetune-conll.yaml"):
        plan = load_recipe(REPO / "recipes" / recipe, overrides.replace("PATH", str(tmp_path)).split(), host=host)
        assert plan.stages["finetune"].config.init is not None


def test_readme_lists_every_shipped_recipe() -> None:
    """Each recipes/*.yaml has a row in the README's table of shipped recipes, and each row names
    a recipe that exists."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = _table_after(text, "Shipped recipes (")
    listed = {name for row in table for name in re.findall(r"`([\w.-]+\.yaml)`", row[0])}
    shipped = {path.name for path in (REPO / "recipes").glob("*.yaml")}
    assert listed == shipped, f"missing from the README: {sorted(shipped - listed)}; gone: {sorted(listed - shipped)}"


# --- commands in the recipes' header comments still run ---------------------------------------
# Each recipe's header says how to run it and what to override (`xfer run recipes/x.yaml --only S
# stages.S.init=...`, `xfer compare ...`). The CLI and the recipe checks tighten over time (option
# abbreviations, a `budget:` next to `train.steps`, a section override after a key inside it): a
# header command that no longer parses or validates is the first thing a reader copies. Each is
# checked as `xfer run` would before training: its options parsed, its recipe and overrides
# loaded, its `--only` stages looked up. Nothing runs.

# Paths a reader replaces with their own (a checkpoint, a web corpus), here with what validates.
_PLACEHOLDERS = {
    "/work/artifacts/electra-cpu/discriminator": "{checkpoint}",
    "/data/owt/**/*.txt": "{data}/unlabeled/*/*.txt",
}


def recipe_comment_commands() -> list[tuple[str, str]]:
    """(`file:line`, command) of each `xfer ...` command in a recipe's comments: a comment line that
    is one (after an optional `From ...:` label and `XFER_DATA=...`; `\\`-continued lines joined,
    `&&`-chained commands apart) or a backquoted `xfer` span with arguments."""
    found = []
    for path in sorted((REPO / "recipes").glob("*.yaml")):
        lines = path.read_text(encoding="utf-8").splitlines()
        comments = [re.sub(r"^\s*#\s?", "", line) if line.lstrip().startswith("#") else "" for line in lines]
        for number, comment in enumerate(comments, start=1):
            commands = [span for span in re.findall(r"`(xfer [^`]*)`", comment) if len(span.split()) > 2]
            start = re.match(r"\s*(?:From [^:]*:\s+)?(?:XFER_DATA=\S+\s+)?(xfer\s.*)$", comment)
            if start:
                command, following = start.group(1), number
                while command.rstrip().endswith("\\"):
                    command = command.rstrip()[:-1] + " " + comments[following].strip()
                    following += 1
                commands += command.split("&&")
            found += [(f"recipes/{path.name}:{number}", command.strip()) for command in commands]
    return found


def _validate_command(where: str, command: str, tmp_path: Path, base: Path = REPO) -> None:
    """Parse `command` (`xfer ...`) as the CLI does and, for a recipe command, load its recipe (a
    path relative to `base`) with its overrides and look up its `--only` stages: what `xfer run`
    checks before the first stage trains."""
    import shlex

    from xfer.core.cli import _parse, build_parser

    argv = shlex.split(command, comments=True)[1:]
    host = make_host(autoload=True)
    try:
        args = _parse(build_parser(host, argv), argv)
    except SystemExit:
        pytest.fail(f"{where}: `{command}`: xfer refuses its command line")
    if not hasattr(args, "overrides"):  # compare, results, score: parsing is what can be checked here
        return
    overrides = []
    for override in args.overrides:
        for placeholder, value in _PLACEHOLDERS.items():
            override = override.replace(placeholder, value.format(checkpoint=tmp_path, data=shared_data_dir()))
        overrides.append(re.sub(r"=PATH$", f"={tmp_path}", override))
    plan = load_recipe(base / args.recipe, overrides, host=host)
    if getattr(args, "only", None):
        plan.needed_for(name.strip() for name in args.only.split(","))


@pytest.mark.parametrize(("where", "command"), recipe_comment_commands(), ids=[w for w, _ in recipe_comment_commands()])
def test_recipe_comment_command_validates(
    where: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not shared_data_dir().is_dir():
        pytest.skip(f"the recipes read the datasets at {shared_data_dir()} (set XFER_DATA)")
    monkeypatch.setenv("XFER_DATA", str(shared_data_dir()))
    _validate_command(where, command, tmp_path)


def test_readme_commands_on_its_recipe_example_validate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's `xfer run r.yaml ...` / `validate` / `show` examples work on its recipe example
    saved as r.yaml (`--only STAGE` with one of its stages)."""
    if not shared_data_dir().is_dir():
        pytest.skip(f"the README example reads the datasets at {shared_data_dir()} (set XFER_DATA)")
    monkeypatch.setenv("XFER_DATA", str(shared_data_dir()))
    (tmp_path / "r.yaml").write_text(readme_recipes()[0], encoding="utf-8")
    text = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    commands = re.findall(r"`(xfer (?:run|validate|show) r\.yaml[^`]*)`", text)
    assert len(commands) >= 4, f"the README's r.yaml examples are gone: {commands}"
    for command in commands:
        _validate_command("README.md", command.replace("STAGE", "finetune"), tmp_path, base=tmp_path)


def results_page_commands() -> list[tuple[str, str]]:
    """(`docs/results.md:line`, command) of each `xfer run recipes/...` in the page's code blocks
    (`\\`-continued lines joined) whose overrides need no earlier run's files or shell variable."""
    lines = (REPO / "docs" / "results.md").read_text(encoding="utf-8").splitlines()
    found = []
    for number, line in enumerate(lines, start=1):
        start = re.match(
            r"    (?:\S+=\S+ )*(?:(?:tools/)?cpu-slot (?:--all )?)?(?:\.venv/bin/)?(xfer run recipes/.*)$", line
        )
        if not start:
            continue
        command, following = start.group(1), number
        while command.rstrip().endswith("\\"):
            command = command.rstrip()[:-1] + " " + lines[following].strip()
            following += 1
        if not re.search(r"\$|=runs/|/work/derived", command):
            found.append((f"docs/results.md:{number}", command))
    return found


def test_command_extractors_find_the_documented_commands() -> None:
    """An empty parameter list would skip the checks above and below without a word."""
    assert len(recipe_comment_commands()) >= 20, "the recipe comment parser lost the documented commands"
    assert len(results_page_commands()) >= 30, "the docs/results.md parser lost the documented commands"


# Commands on docs/results.md that today's code refuses, each with a note on the page saying what
# reproduces its number today (the command itself stays as it ran): none so far.
RESULTS_PAGE_REFUSED_TODAY: set[str] = set()


@pytest.mark.parametrize(("where", "command"), results_page_commands(), ids=[w for w, _ in results_page_commands()])
def test_results_page_command_validates(
    where: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/results.md's commands are how its numbers were made, and re-running one is how a reader
    checks a number. One that today's code refuses stays as it ran: add a note next to it with what
    reproduces it today, and the command to RESULTS_PAGE_REFUSED_TODAY."""
    if not shared_data_dir().is_dir():
        pytest.skip(f"the recipes read the datasets at {shared_data_dir()} (set XFER_DATA)")
    monkeypatch.setenv("XFER_DATA", str(shared_data_dir()))
    if command in RESULTS_PAGE_REFUSED_TODAY:
        with pytest.raises((UserError, pytest.fail.Exception)):
            _validate_command(where, command, tmp_path)
        return
    _validate_command(where, command, tmp_path)

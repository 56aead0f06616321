"""What a reader copies from the user documentation works: each recipe snippet of the READMEs
validates, the plugin guide's code makes a plugin that loads, and the recipe reference's concrete
claims (stage names, the command that fills the Hub cache, what installs alone) hold.

Every snippet is read from its Markdown file, so a page that goes stale fails here. Nothing
trains: recipes are only validated, with empty placeholder files where a snippet names data
(validation checks that paths exist, `xfer validate --data` would read them).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import yaml

from xfer.core.errors import RecipeError
from xfer.core.recipes.recipe import load_recipe
from xfer.testing import make_host

from .conftest import REPO

# --- recipe snippets of the READMEs validate --------------------------------------------------

DOC_PAGES = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted(REPO.glob("packages/*/README.md")),
    *sorted(REPO.glob("plugins/*/README.md")),
]
DOC_PAGES = [page for page in DOC_PAGES if page.name != "results.md"]  # a measurement log, not a guide

# Paths a reader replaces with their own, here made relative so the placeholders land in tmp_path.
_PLACEHOLDER_PREFIXES = {"/path/to/": "path/to/"}


def yaml_blocks(page: Path) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)


def recipe_snippets() -> list[tuple[str, str]]:
    """(`page#n`, text) of each ```yaml block that is a whole recipe (has `stages:`)."""
    found = []
    for page in DOC_PAGES:
        for number, block in enumerate(yaml_blocks(page)):
            if re.search(r"^stages:", block, flags=re.M):
                found.append((f"{page.relative_to(REPO)}#{number}", block))
    return found


_MISSING = re.compile(r"path not found: (?P<path>[^;\s]+)|no file matches '[^']*' \(looked for (?P<pattern>[^)]*)\)")


def validate_with_placeholders(recipe: Path, tmp_path: Path, overrides: list[str] | None = None) -> None:
    """Load `recipe` as `xfer validate` does; each data path it names that does not exist is made
    (an empty folder, or a one-line file for a name with a suffix or a glob) and the recipe loaded
    again. Any other problem fails the test with xfer's own message."""
    host = make_host(autoload=True)
    for _ in range(4):
        try:
            load_recipe(recipe, overrides or [], host=host)
            return
        except RecipeError as exc:
            other = [str(d) for d in exc.diagnostics if not _MISSING.search(d.message)]
            assert not other, f"{recipe.name}: the documented snippet is refused:\n" + "\n".join(other)
            for diagnostic in exc.diagnostics:
                match = _MISSING.search(diagnostic.message)
                assert match
                name = match.group("path") or match.group("pattern").replace("**/", "").replace("*", "x")
                path = Path(name)
                assert path.is_relative_to(tmp_path), (
                    f"{recipe.name}: a documented path outside the recipe's folder: {path}"
                )
                if path.suffix or match.group("pattern"):
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text("a b c\n", encoding="utf-8")
                else:
                    path.mkdir(parents=True, exist_ok=True)
    pytest.fail(f"{recipe.name}: still missing paths after making placeholders")


def test_recipe_snippet_extractor_finds_the_documented_recipes() -> None:
    """An empty parameter list would skip the check below without a word."""
    pages = {where.split("#")[0] for where, _ in recipe_snippets()}
    assert {"README.md", "packages/xfer-electra/README.md", "packages/xfer-bam/README.md"} <= pages, pages


@pytest.mark.parametrize(("where", "text"), recipe_snippets(), ids=[w for w, _ in recipe_snippets()])
def test_documented_recipe_snippet_validates(
    where: str, text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recipe block copied from a README into a file validates once its data paths exist (the
    README's own example also runs against the real datasets in test_readme.py)."""
    monkeypatch.setenv("XFER_DATA", str(tmp_path / "data"))
    for prefix, replacement in _PLACEHOLDER_PREFIXES.items():
        text = text.replace(prefix, replacement)
    recipe = tmp_path / "my-experiment.yaml"
    recipe.write_text(text, encoding="utf-8")
    validate_with_placeholders(recipe, tmp_path)


def test_glue_tsv_task_snippet_validates(tmp_path: Path) -> None:
    """The `glue/tsv` example of the GLUE plugin's README is a task mapping: in a fine-tuning
    stage's `tasks:` it validates."""
    page = REPO / "plugins" / "xfer-tasks-glue" / "README.md"
    (block,) = [b for b in yaml_blocks(page) if "name: glue/tsv" in b]
    task = yaml.safe_load(block)["task"]
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"stages:\n  fit:\n    kind: transformer.finetune\n    tokenizer: tok\n    tasks: [{json.dumps(task)}]\n",
        encoding="utf-8",
    )
    validate_with_placeholders(recipe, tmp_path)


# --- docs/recipes.md's concrete claims ---------------------------------------------------------


def _one_line(page: Path) -> str:
    return " ".join(page.read_text(encoding="utf-8").split())


def _stage_name_recipe(tmp_path: Path, names: list[str]) -> Path:
    recipe = tmp_path / "names.yaml"
    lines = ["stages:"] + [f"  {name}: {{kind: toy.corpus, sentences: 10}}" for name in names]
    recipe.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return recipe


def test_recipe_reference_says_where_merge_anchors_go(tmp_path: Path) -> None:
    """docs/recipes.md shows `<<: [*a, *b]`; it now says where the anchors may be defined. Anchors on
    stages and on their values merge as documented; a top-level key that only holds an anchor is
    refused (the docs did not say so, and that is where docker-compose habits put them)."""
    text = _one_line(REPO / "docs" / "recipes.md")
    assert "Define anchors inside `stages:`" in text and "is an unknown top-level key" in text
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "stages:\n"
        "  a: &a {kind: toy.corpus, sentences: 10}\n"
        "  b:\n    kind: toy.corpus\n    seed: &s 3\n"
        "  c:\n    <<: [*a, {seed: *s}]\n",
        encoding="utf-8",
    )
    plan = load_recipe(recipe, host=make_host())
    assert (plan.stages["c"].config.sentences, plan.stages["c"].config.seed) == (10, 3)
    recipe.write_text("x-common: &c {kind: toy.corpus}\nstages:\n  a: {<<: *c}\n", encoding="utf-8")
    with pytest.raises(RecipeError, match="unknown top-level key 'x-common'"):
        load_recipe(recipe, host=make_host())


def test_recipe_reference_stage_names_are_accepted(tmp_path: Path) -> None:
    """docs/recipes.md names stages that YAML 1.1 would misread as accepted (it named `010`, which
    the stage-name rule refuses: a name starts with a letter or `_`)."""
    text = _one_line(REPO / "docs" / "recipes.md")
    match = re.search(r"a stage may be named ((?:`[^`]+`(?:, | or ))+`[^`]+`)", text)
    assert match, "docs/recipes.md lost its example of stage names taken as written"
    names = re.findall(r"`([^`]+)`", match.group(1))
    plan = load_recipe(_stage_name_recipe(tmp_path, names), host=make_host())
    assert list(plan.stages) == names


def test_recipe_reference_stage_name_rule_matches_the_validator(tmp_path: Path) -> None:
    """The `stages` row says what a stage name may be; names by that rule validate, others not."""
    text = _one_line(REPO / "docs" / "recipes.md")
    assert "a name is a letter or `_`, then letters, digits, `_`, `-`" in text, "docs/recipes.md: stage-name rule"
    load_recipe(_stage_name_recipe(tmp_path, ["_a", "b2", "c-d_e"]), host=make_host())
    for name in ("1a", "-a", "a.b"):
        with pytest.raises(RecipeError, match="stage name"):
            load_recipe(_stage_name_recipe(tmp_path, [f"'{name}'"]), host=make_host())


def test_recipe_reference_hub_fetch_command_is_installed() -> None:
    """docs/recipes.md tells how to put a Hub model in the local cache; the command it names must be
    one the pinned `huggingface_hub` installs (`huggingface-cli` is gone from 1.0 on: `hf`)."""
    text = _one_line(REPO / "docs" / "recipes.md")
    match = re.search(r"how to fetch it.{0,120}?`([\w.-]+) download ID`", text)
    assert match, "docs/recipes.md lost the command that fills the Hub cache"
    command = Path(sys.executable).parent / match.group(1)
    assert command.is_file(), f"docs/recipes.md says `{match.group(1)} download ID`, but {command} does not exist"


def test_recipe_reference_says_where_a_relative_variable_value_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative `XFER_DATA` is resolved against the recipe's folder, not the current directory, as
    docs/recipes.md says (it did not: `XFER_DATA=../shared/data` from the repository root, the
    folder the tests resolve it against, made the shipped recipes look in recipes/../shared/data)."""
    text = _one_line(REPO / "docs" / "recipes.md")
    assert "a relative value is relative to the YAML file too, not to the current directory" in text
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "data").mkdir()
    (tmp_path / "recipes" / "data" / "a.txt").write_text("a b c\n", encoding="utf-8")
    recipe = tmp_path / "recipes" / "r.yaml"
    recipe.write_text('stages:\n  v: {kind: transformer.vocab, files: "${XFER_DATA}/*.txt", size: 100}\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XFER_DATA", "data")
    plan = load_recipe(recipe, host=make_host(autoload=True))
    assert plan.stages["v"].config.files.patterns == (str(tmp_path / "recipes" / "data" / "*.txt"),)


def test_recipe_reference_says_what_validate_data_reports(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """docs/recipes.md says which malformed lines `xfer validate --data` reports (it said every one,
    while a reader stops at a file's first error: one problem per split)."""
    from xfer.core import cli

    text = _one_line(REPO / "docs" / "recipes.md")
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    (tmp_path / "train.tsv").write_text("text\tlabel\ngood\t1\nbad\t7\nok\t0\nworse\t9\n", encoding="utf-8")
    (tmp_path / "dev.tsv").write_text("text\tlabel\ngood\t1\nbad\t8\n", encoding="utf-8")
    recipe = tmp_path / "r.yaml"
    task = (
        '{name: glue/tsv, train: train.tsv, dev: dev.tsv, text_a_column: text, label_column: label, labels: ["0", "1"]}'
    )
    recipe.write_text(f"stages:\n  fit:\n    kind: transformer.finetune\n    tokenizer: tok\n    tasks: [{task}]\n")
    assert cli.main(["validate", str(recipe), "--data"]) == 2
    reported = sorted(re.findall(r"(\w+\.tsv):(\d+):", capsys.readouterr().err))
    if "reports every malformed line" in text:
        assert reported == [("dev.tsv", "3"), ("train.tsv", "3"), ("train.tsv", "5")], reported
    else:
        assert "reports, all at once, the first problem in each split of every task" in text
        assert reported == [("dev.tsv", "3"), ("train.tsv", "3")], reported


_GROW_RECIPE = """\
stages:
  corpus: {kind: toy.corpus, sentences: 50}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 100}
  ft:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    encoder: {num_layers: 1, hidden_size: 16, embedding_size: 16, intermediate_size: 32, num_heads: 1}
    tasks: [{name: toy/agreement, train_size: 16, dev_size: 8}]
    train: {steps: 2, batch_size: 8, precision: fp32}
"""


def test_recipe_reference_command_that_grows_trials_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/recipes.md says how a one-seed run becomes a three-seed run; its command keeps the
    finished trial (it gave no command, and more trials alone is refused as a changed recipe)."""
    import shlex

    from xfer.core import cli

    text = _one_line(REPO / "docs" / "recipes.md")
    match = re.search(r"a one-seed run can become a three-seed run later \(`(xfer run [^`]+)`", text)
    assert match, "docs/recipes.md: no command that raises `trials` of a finished run"
    argv = shlex.split(match.group(1).replace("stages.S.", "stages.ft."))[1:]
    assert argv[1] == "r.yaml" and "stages.ft.trials=3" in argv, argv
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    (tmp_path / "r.yaml").write_text(_GROW_RECIPE, encoding="utf-8")
    assert cli.main(["run", "r.yaml", "--run-dir", "run"]) == 0
    first = tmp_path / "run" / "ft" / "trials" / "toy-agreement" / "trial-0"
    before = sorted((p.relative_to(first), p.stat().st_mtime_ns) for p in first.rglob("*") if p.is_file())
    assert cli.main(["run", "r.yaml", "--run-dir", "run", "stages.ft.trials=3"]) == 2, "refused without --force"
    assert cli.main([*argv, "--run-dir", "run"]) == 0
    trials = sorted(p.name for p in first.parent.iterdir())
    assert trials == ["trial-0", "trial-1", "trial-2"], trials
    after = sorted((p.relative_to(first), p.stat().st_mtime_ns) for p in first.rglob("*") if p.is_file())
    assert after == before, "the finished trial was trained again"


# --- README: which distribution needs which ----------------------------------------------------


def _xfer_dependencies(pyproject: Path) -> set[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    names = {re.split(r"[<>=!~ \[;]", dep, maxsplit=1)[0] for dep in project.get("dependencies", [])}
    return {name for name in names if name.startswith("xfer")}


def test_readme_says_which_distributions_each_one_needs() -> None:
    """README.md says what `pip install packages/<dist>` needs besides itself (it said that every
    distribution installs alone, while the method packages need xfer-core and xfer-transformer)."""
    text = _one_line(REPO / "README.md")
    start = text.index("Every distribution installs")
    sentence = text[start : text.index("`transformers` is only", start)]
    assert "`pip install packages/xfer-core` needs none of the others" in sentence, sentence
    only_core, both = sentence.split("only xfer-core", 1)
    dependencies = {p.parent.name: _xfer_dependencies(p) for p in REPO.glob("*/xfer-*/pyproject.toml")}
    named = set()
    for part, expected in ((only_core, {"xfer-core"}), (both, {"xfer-core", "xfer-transformer"})):
        for name in re.findall(r"`(?:plugins/)?(xfer-[\w-]+?)(?:-\*)?`", part.split("needs none of the others")[-1]):
            group = [d for d in dependencies if d == name or (name == "xfer-tasks" and d.startswith("xfer-tasks-"))]
            assert group, f"README.md names {name!r}, which is no distribution"
            for dist in group:
                assert dependencies[dist] == expected, f"README.md: {dist} needs {sorted(dependencies[dist])}"
                named.add(dist)
    assert dependencies["xfer-core"] == set()
    assert named | {"xfer-core"} == set(dependencies), f"README.md does not say: {sorted(set(dependencies) - named)}"


# --- docs/plugins.md's code makes a plugin that loads ------------------------------------------


def _blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)


def test_plugin_guide_snippets_make_a_plugin_that_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guide's pyproject, plugin.py, config dataclass and `unsigned_at` knob, saved where their
    comments say, give a plugin whose task is registered in the entry point's namespace, documented,
    and usable in a recipe (the task class itself, not shown in the guide, is a stub here)."""
    page = REPO / "docs" / "plugins.md"
    (toml,) = _blocks(page, "toml")
    plugin_py, config_py, knob_line, _conformance = _blocks(page, "python")
    (namespace, module), *_ = tomllib.loads(toml)["project"]["entry-points"]["xfer"].items()
    path = re.match(r"# (src/\S+\.py)", plugin_py).group(1)
    assert path == "src/" + module.replace(".", "/") + ".py", f"the entry point {module} is not the file {path}"
    config_path = re.match(r"# (src/\S+\.py)", config_py).group(1)
    package = tmp_path / Path(path).parent
    package.mkdir(parents=True)
    (tmp_path / path).write_text(plugin_py, encoding="utf-8")
    config_module = config_path[len("src/") : -len(".py")].replace("/", ".")
    stub = textwrap.dedent(
        """
        from xfer.core.tasks import SentenceExample, Task

        class ReviewsTask(Task):
            type = "classification"
            main_metric = "accuracy"

            def examples(self, split):
                return [SentenceExample(f"{split}-0", "a good film", None, "pos")]

            def evaluate(self, examples, predictions):
                return {"accuracy": 100.0}
        """
    )
    (tmp_path / config_path).write_text(config_py.rstrip() + "\n" + knob_line + stub, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    try:
        host = make_host([module])
        (name,) = [n for n in host.names("task") if not n.startswith("toy/")]
        assert name.split("/")[0] == namespace, f"{name} is not in the entry point's namespace {namespace}"
        config = host.config_class("task", name)
        fields = {f.name: f for f in dataclasses.fields(config)}
        assert all(f.metadata.get("doc") for f in fields.values())
        assert "max_chars" in fields, "the `unsigned_at` example did not add its knob"
        (tmp_path / "train.tsv").write_text("a good film\tpos\n", encoding="utf-8")
        (tmp_path / "tok").mkdir()
        (tmp_path / "tok" / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
        recipe = tmp_path / "r.yaml"
        recipe.write_text(
            f"stages:\n  fit:\n    kind: transformer.finetune\n    tokenizer: tok\n"
            f"    tasks: [{{name: {name}, train_file: train.tsv, max_chars: 100}}]\n",
            encoding="utf-8",
        )
        plan = load_recipe(recipe, host=make_host([module], autoload=True))
        assert plan.stages["fit"].config.tasks[0].config.max_chars == 100
        assert config_module in sys.modules
    finally:
        for name in [m for m in sys.modules if m == f"xfer.{namespace}" or m.startswith(f"xfer.{namespace}.")]:
            del sys.modules[name]


def test_plugin_guide_conformance_attributes_exist() -> None:
    """The attributes docs/plugins.md tells a `ComponentConformance` subclass to set exist, with the
    documented default of `kill_at_step`, and its example class is valid Python."""
    from xfer.testing import ComponentConformance

    page = REPO / "docs" / "plugins.md"
    *_, conformance = _blocks(page, "python")
    namespace: dict[str, object] = {"ComponentConformance": ComponentConformance}
    exec(compile(conformance, "docs/plugins.md", "exec"), namespace)  # our own docs
    text = _one_line(page)
    section = text[text.index("## Testing with `xfer.testing`") : text.index("## Hook reference")]
    example = namespace["TestReviews"]
    for name in ("component", "config_path", "recipe", "prepare"):
        assert name in vars(example), f"docs/plugins.md's example class lost {name}"
    for name in ("resume_covered_by", "stage", "trains", "plugin_modules", "kill_at_step"):
        assert f"`{name}" in section, f"docs/plugins.md no longer documents ComponentConformance.{name}"
        assert hasattr(ComponentConformance, name), f"docs/plugins.md documents ComponentConformance.{name}"
    default = re.search(r"`kill_at_step` \(default (\d+)\)", section)
    assert default and int(default.group(1)) == ComponentConformance.kill_at_step

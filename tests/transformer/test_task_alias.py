"""`as:` names a task entry, so one loader can serve two datasets in one stage (two `glue/tsv`
files): results, trial folders, models, predictions and `task_epochs` are keyed by the alias."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.plugins import set_default_host
from xfer.core.recipes.recipe import load_recipe
from xfer.core.recipes.schema import to_plain
from xfer.testing import make_host, run_recipe_file, write_recipe

SMALL = "{num_layers: 1, hidden_size: 32, embedding_size: 32, intermediate_size: 64, num_heads: 2}"

RECIPE = f"""
name: alias
seed: 3
stages:
  corpus: {{kind: toy.corpus, sentences: 200}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200, min_frequency: 1}}
  finetune:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    encoder: {SMALL}
    max_length: 48
    tasks:
      - {{name: toy/agreement, as: small, train_size: 32, dev_size: 16}}
      - {{name: toy/agreement, as: other_seed, seed: 7, train_size: 48, dev_size: 24}}
    task_epochs: {{other_seed: 2}}
    predict: [dev]
    train: {{epochs: 1, batch_size: 16, lr: 1e-3, log_every: 2, precision: fp32}}
"""


@pytest.fixture(autouse=True)
def host():
    set_default_host(make_host(autoload=True))
    yield
    set_default_host(None)


def _problems(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[Path, list[str]]:
    path = write_recipe(tmp_path, text)
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return path.resolve(), err.splitlines()[:-1]


def test_two_datasets_of_one_loader_train_side_by_side_under_their_aliases(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_recipe_file(write_recipe(tmp_path, RECIPE), run, make_host(autoload=True))
    stage = run / "finetune"
    results = json.loads((stage / "outputs" / "results" / "results.json").read_text())
    assert sorted(results) == ["other_seed", "small"]
    assert sorted(p.name for p in (stage / "trials").iterdir()) == ["other_seed", "small"]
    assert sorted(p.name for p in (stage / "outputs" / "models").iterdir()) == ["other_seed", "small"]
    assert sorted(p.name for p in (stage / "outputs" / "predictions").iterdir()) == ["other_seed", "small"]
    small, other = results["small"]["runs"][0], results["other_seed"]["runs"][0]
    assert (small["steps"], other["steps"]) == (2, 6), "32/16 for one epoch; 48/16 for task_epochs' 2"
    assert any((stage / "outputs" / "predictions" / "other_seed" / "trial-0").iterdir())
    model = json.loads((stage / "outputs" / "models" / "other_seed" / "xfer_model.json").read_text())
    assert model["task"] == "other_seed"


def test_the_alias_is_part_of_the_resolved_recipe_and_the_fingerprint(tmp_path: Path) -> None:
    recipe = load_recipe(write_recipe(tmp_path, RECIPE))
    tasks = recipe.stages["finetune"].config.tasks
    assert [(t.name, t.alias, t.key, str(t)) for t in tasks] == [
        ("toy/agreement", "small", "small", "small"),
        ("toy/agreement", "other_seed", "other_seed", "other_seed"),
    ]
    plain = to_plain(tasks[0])
    assert plain["name"] == "toy/agreement" and plain["as"] == "small" and plain["train_size"] == 32
    renamed = load_recipe(write_recipe(tmp_path / "b", RECIPE.replace("as: small", "as: tiny_set")))
    assert to_plain(renamed.stages["finetune"].config) != to_plain(recipe.stages["finetune"].config)
    override = load_recipe(write_recipe(tmp_path / "c", RECIPE), ["stages.finetune.tasks.0.as=renamed"])
    assert override.stages["finetune"].config.tasks[0].key == "renamed"


@pytest.mark.parametrize(
    ("alias", "shown"),
    [
        ("glue/tsv", "'glue/tsv'"),
        ("my-set", "'my-set'"),
        ("2nd", "'2nd'"),
        ("''", "''"),
        ("3", "int 3"),
        ("null", "null"),
    ],
)
def test_an_alias_that_could_clash_with_a_task_name_or_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], alias: str, shown: str
) -> None:
    path, rows = _problems(tmp_path, RECIPE.replace("as: small", f"as: {alias}"), capsys)
    assert rows == [
        f"{path}:13:31: stages.finetune.tasks.0.as: {shown} is not a task alias: use a letter, then letters, "
        "digits or '_' (no '/' or '-': registered task names have them), e.g. `as: reviews`"
    ]


def test_aliases_must_differ_and_alias_is_a_task_key_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, rows = _problems(tmp_path, RECIPE.replace("as: other_seed", "as: small"), capsys)
    assert len(rows) == 1 and "stages.finetune.tasks: task 'small' is listed twice, with different settings" in rows[0]
    _, rows = _problems(
        tmp_path, RECIPE.replace("task_epochs: {other_seed: 2}", "task_epochs: {toy/agreement: 2}"), capsys
    )
    assert len(rows) == 1 and "stages.finetune.task_epochs" in rows[0] and "toy/agreement" in rows[0]
    objective = RECIPE + "    objective: {name: transformer.sequence, as: x}\n"
    _, rows = _problems(tmp_path, objective, capsys)
    assert len(rows) == 1 and "stages.finetune.objective.as" in rows[0] and "unknown" in rows[0]

"""Tests of the example plugin, using the xfer.testing kit a third party would use."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from xfer.core import DataError
from xfer.example.focal import FocalConfig, FocalObjective
from xfer.example.jsonl_task import JsonlConfig, JsonlTask
from xfer.testing import ComponentConformance

POSITIVE = ["good", "great", "fine", "lovely", "superb"]
NEGATIVE = ["bad", "awful", "poor", "dull", "terrible"]


def write_sentiment(path: Path, n: int, seed: int) -> Path:
    rng = random.Random(seed)
    with open(path, "w") as out:
        for _ in range(n):
            label = rng.choice(["neg", "pos"])
            word = rng.choice(POSITIVE if label == "pos" else NEGATIVE)
            out.write(json.dumps({"text": f"the film was {word} .", "label": label}) + "\n")
    return path


RECIPE = """
stages:
  corpus: {kind: toy.corpus, sentences: 200}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 300, min_frequency: 1}
  fit:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    model: tiny
    encoder: {num_layers: 1, hidden_size: 32, embedding_size: 32, intermediate_size: 64, num_heads: 2}
    max_length: 32
    tasks:
      - {name: example/jsonl, labels: [neg, pos], train_file: train.jsonl, dev_file: dev.jsonl}
    objective: {name: example.focal, gamma: 2.0}
    train: {steps: 8, batch_size: 8, lr: 1e-3, log_every: 1, checkpoint_every: 3, precision: fp32}
"""


class Data:
    def prepare(self, directory: Path) -> None:
        write_sentiment(directory / "train.jsonl", 64, seed=1)
        write_sentiment(directory / "dev.jsonl", 16, seed=2)


class TestJsonlTaskConformance(Data, ComponentConformance):
    component = ("task", "example/jsonl")
    config_path = "stages.fit.tasks.0"
    recipe = RECIPE


class TestFocalObjectiveConformance(Data, ComponentConformance):
    component = ("objective", "example.focal")
    config_path = "stages.fit.objective"
    recipe = RECIPE


def test_focal_loss_reduces_to_cross_entropy_at_gamma_zero() -> None:
    scores, labels = torch.randn(6, 3), torch.tensor([0, 1, 2, 2, 1, 0])
    objective = FocalObjective.__new__(FocalObjective)
    torch.nn.Module.__init__(objective)
    objective.config = FocalConfig(gamma=0.0)
    assert torch.allclose(objective.loss(scores, labels), torch.nn.functional.cross_entropy(scores, labels))
    objective.config = FocalConfig(gamma=2.0)
    p = torch.softmax(scores, -1)[torch.arange(6), labels]
    expected = (-((1 - p) ** 2) * torch.log(p)).mean()
    assert torch.allclose(objective.loss(scores, labels), expected)


def test_reader_and_metrics(tmp_path: Path) -> None:
    train = write_sentiment(tmp_path / "train.jsonl", 10, seed=3)
    task = JsonlTask("example/jsonl", JsonlConfig(labels=["neg", "pos"], train_file=train))
    examples = task.examples("train")
    assert len(examples) == 10 and examples[0].id == "train-1"
    gold = {e.id: e.label for e in examples}
    assert task.evaluate(examples, gold)["accuracy"] == 100.0
    with pytest.raises(ValueError, match="no prediction"):
        task.evaluate(examples, {})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            '{"text": "ok", "label": "pos"}\n{"text": "x", "label": "meh"}\n',
            r"train.jsonl:2: label: label 'meh' is not one of",
        ),
        ('{"text": "ok", "label": "pos"}\n{"text": "x", "label": "pos"\n', r"train.jsonl:2: invalid JSON"),
        ('{"label": "pos"}\n', r"train.jsonl:1: text: missing or empty"),
        ('{"text": "ok"}\n', r"train.jsonl:1: label: missing label"),
        ("\n\n", r"train.jsonl: file has no examples"),
        ('["text"]\n', r"train.jsonl:1: each line must be a JSON object"),
        ('{"text": "ok", "label": "pos"}\n{"text": "a\\ud800b", "label": "pos"}\n', r"train.jsonl:2: text: lone surr"),
        ('{"text": "ok", "label": "pos", "n": ' + "1" * 5000 + "}\n", r"train.jsonl:1: invalid JSON: ValueError"),
        ("[" * 100_000 + "]" * 100_000 + "\n", r"train.jsonl:1: invalid JSON: RecursionError"),
    ],
)
def test_bad_input_names_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        JsonlTask("example/jsonl", JsonlConfig(labels=["neg", "pos"], train_file=path)).examples("train")


def test_bad_encoding(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    path.write_bytes(b'{"text": "ok", "label": "pos"}\n{"text": "\xff", "label": "pos"}\n')
    with pytest.raises(DataError, match=r"train.jsonl:2: encoding: not valid UTF-8"):
        JsonlTask("example/jsonl", JsonlConfig(labels=["neg", "pos"], train_file=path)).examples("train")


@pytest.mark.parametrize(
    ("old", "new", "key", "message"),
    [
        (
            "objective: {name: example.focal, gamma: 2.0}",
            "objective:\n      name: example.focal\n      gamma: -1",
            "gamma",
            "must be at least 0",
        ),
        (
            "labels: [neg, pos], train_file",
            "labels: [pos],\n         train_file",
            "labels",
            "list at least two distinct labels",
        ),
    ],
)
def test_config_errors_point_at_their_key(tmp_path: Path, old: str, new: str, key: str, message: str) -> None:
    from xfer.core import RecipeError
    from xfer.core.recipes.recipe import load_recipe
    from xfer.testing import make_host, write_recipe

    Data().prepare(tmp_path)
    assert old in RECIPE
    text = RECIPE.replace(old, new)
    path = write_recipe(tmp_path, text)
    marker = {"gamma": "gamma: -1", "labels": "labels: [pos]"}[key]
    line = next(i for i, t in enumerate(text.splitlines(), start=1) if marker in t)
    with pytest.raises(RecipeError, match=message) as caught:
        load_recipe(path, [], make_host(autoload=True))
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.location.line == line, str(diagnostic)
    assert diagnostic.message.split(":")[0].endswith(f".{key}"), str(diagnostic)


@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0, 2.0])
def test_focal_gradient_is_finite_for_an_example_already_right(gamma: float) -> None:
    """p_t rounds to 1.0 in float32 beyond a logit margin of ~17: for 0 < gamma < 1 the gradient of
    (1 - p_t)**gamma there was inf * 0 = NaN, and the NaN reached every weight (a diverged run)."""
    objective = FocalObjective.__new__(FocalObjective)
    torch.nn.Module.__init__(objective)
    objective.config = FocalConfig(gamma=gamma)
    scores = torch.tensor([[30.0, -30.0], [0.1, 0.2]], requires_grad=True)
    loss = objective.loss(scores, torch.tensor([0, 1]))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(scores.grad).all(), scores.grad
    assert torch.allclose(scores.grad[0], torch.zeros(2))  # the true limit: nothing left to learn there
    assert scores.grad[1, 1] < 0  # the example still wrong is learned


def test_key_given_twice_in_one_line_is_an_error(tmp_path: Path) -> None:
    """JSON keeps the last of two equal keys without a word: a re-labelled line trained on one label."""
    path = tmp_path / "train.jsonl"
    path.write_text('{"text": "ok", "label": "pos"}\n{"text": "great", "label": "pos", "label": "neg"}\n')
    with pytest.raises(DataError, match=r"train.jsonl:2: label: given twice in one JSON object"):
        JsonlTask("example/jsonl", JsonlConfig(labels=["neg", "pos"], train_file=path)).examples("train")


def test_new_plugin_refuses_an_installed_namespace_the_host_did_not_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`xfer new-plugin` checked only the plugins its host loaded: under XFER_PLUGINS or
    XFER_DISABLE_PLUGIN_AUTOLOAD (an empty `taken`) it scaffolded an installed distribution's
    namespace, and installing the scaffold made both distributions' components unusable."""
    from xfer.core import UserError
    from xfer.core.scaffold import scaffold_plugin

    info = tmp_path / "site" / "xfer_fakens-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xfer-fakens\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[xfer]\nfakens = xfer.fakens_impl.plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(UserError, match=r"'fakens' is taken: an installed plugin \(xfer-fakens\)"):
        scaffold_plugin("fakens", tmp_path / "xfer-fakens", taken=())
    assert not (tmp_path / "xfer-fakens").exists()
    assert scaffold_plugin("fakens2", tmp_path / "xfer-fakens2", taken=()).is_dir()  # a free name still works


def test_new_plugin_refuses_a_name_pip_reads_as_an_installed_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip takes `-` and `_` in a distribution name as one: `xfer new-plugin tasks_glue` scaffolded
    `xfer-tasks_glue`, whose `pip install -e` replaced (uninstalled) xfer-tasks-glue."""
    from xfer.core import UserError
    from xfer.core.scaffold import scaffold_plugin

    info = tmp_path / "site" / "xfer_fake_dist-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xfer-fake-dist\nVersion: 0.1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(
        UserError, match=r"'fake_dist' is taken: its distribution xfer-fake_dist is the installed xfer-fake-dist"
    ):
        scaffold_plugin("fake_dist", tmp_path / "xfer-fake_dist", taken=())
    assert not (tmp_path / "xfer-fake_dist").exists()

"""Hostile review of transformer.finetune, second round: defects found and pinned (each test
failed before its fix)."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest

from xfer.core import cli
from xfer.core.errors import UserError
from xfer.core.plugins import set_default_host
from xfer.core.tasks import SentenceExample, TaggingExample, TaskInfo
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.encoder import Encoder
from xfer.transformer.objectives import SequenceObjective, TaggingObjective
from xfer.transformer.presets import preset
from xfer.transformer.tokenization import WordPieceTokenizer

TOY_FINETUNE = """\
name: ft
seed: 4
stages:
  corpus: {{kind: toy.corpus, sentences: 100}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 150, min_frequency: 1}}
  finetune:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    encoder: {{num_layers: 1, hidden_size: 16, embedding_size: 16, intermediate_size: 32, num_heads: 2}}
    max_length: 64
{extra}    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8{test_size}}}]
    train: {{epochs: 1, batch_size: 8, log_every: 1, precision: fp32}}
"""
"""A tiny toy fine-tuning run; `extra` adds stage keys (lines), `test_size` a test split."""


def _tokenizer(tmp_path: Path) -> WordPieceTokenizer:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat . a dog ran far away .\n" * 20)
    return WordPieceTokenizer.train([corpus], 120, min_frequency=1)


def _sequence(tmp_path: Path, max_length: int, info: TaskInfo | None = None) -> SequenceObjective:
    tokenizer = _tokenizer(tmp_path)
    info = info or TaskInfo("mine", "classification", ("neg", "pos"), "accuracy")
    encoder = Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1))
    return SequenceObjective(encoder, info, tokenizer, max_length, None)


def test_sentences_cut_to_max_length_are_counted_in_a_warning(tmp_path: Path) -> None:
    """A sentence (pair) longer than `max_length` lost its end silently: with max_length 16 on
    STS-B every example was cut and the report said nothing. Now a warning (report.md) counts them,
    and an example that fits exactly is not counted."""
    objective = _sequence(tmp_path, 8)
    examples = [
        SentenceExample("short", "the cat", None, "neg"),
        SentenceExample("exact", "the cat sat on the mat", None, "pos"),  # 6 tokens + [CLS] [SEP] = 8
        SentenceExample("long", "the cat sat on the mat . a dog ran far away", None, "neg"),
        SentenceExample("longer", "the cat sat on the mat . a dog ran far away . the cat sat", None, "pos"),
    ]
    with pytest.warns(UserWarning) as caught:
        features = objective.featurize(examples)
    assert [len(f["input_ids"]) for f in features] == [4, 8, 8, 8]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert "2 of 4 examples are longer than max_length=8" in messages[0]
    assert "'long'" in messages[0] and "18 tokens" in messages[0], messages[0]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        objective.featurize(examples[:2])  # nothing cut: no warning


def test_a_max_length_too_short_for_a_pairs_special_tokens_is_a_user_error(tmp_path: Path) -> None:
    """`max_length: 2` passes validation (a single text's [CLS] [SEP] fit); on a sentence-pair task
    the tokenizer's bare ValueError ended the stage with a traceback. Now a UserError names the knob."""
    objective = _sequence(tmp_path, 2)
    with pytest.raises(UserError, match=r"mine: max_length=2 cannot hold a sentence pair"):
        objective.featurize([SentenceExample("p", "the cat", "the mat", "pos")])
    with pytest.warns(UserWarning, match="1 of 1 examples"):  # a single text still featurises (cut, and said so)
        assert objective.featurize([SentenceExample("s", "the cat", None, "pos")])[0]["input_ids"][1:] == [
            objective.tokenizer.sep_id
        ]
    tagging = TaggingObjective(
        objective.encoder, TaskInfo("tags", "tagging", ("B", "I", "O"), "f1"), objective.tokenizer, 2, None
    )
    with pytest.raises(UserError, match=r"tags: max_length=2 cannot hold \[CLS\], a word's first piece"):
        tagging.featurize([TaggingExample("t", ("the", "cat"), ("B", "I"))])


def test_max_length_below_three_is_refused_at_its_key_by_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stage's `max_length: 2` validated, then pair and tagging tasks failed when the stage
    started (after every earlier stage had trained) on a bare ValueError: now `xfer validate`
    refuses it at its file, line and key."""
    set_default_host(make_host(autoload=True, allow=["transformer", "conll", "glue"]))
    try:
        recipe = """\
name: t
stages:
  corpus: {kind: toy.corpus, sentences: 50}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 100}
  finetune:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    max_length: 2
    tasks: [{name: toy/agreement}]
"""
        path = write_recipe(tmp_path, recipe)
        assert cli.main(["validate", str(path)]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert f"{path.resolve()}:8:" in err and "stages.finetune.max_length" in err, err
        assert (
            cli.main(["validate", str(write_recipe(tmp_path, recipe.replace("max_length: 2", "max_length: 3")))]) == 0
        )
    finally:
        set_default_host(None)


def test_a_nan_metric_is_written_to_the_saved_models_description_as_strict_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A saved model's xfer_model.json records its trial's metrics; a diverged trial's NaN went in
    as a bare `NaN` token, which jq, JavaScript and Go refuse (results.json spells it "NaN" for this
    reason), so a model whose run diverged had a description other tools could not read."""
    from xfer.core.toy.tasks import ToyAgreementTask

    evaluate = ToyAgreementTask.evaluate

    def diverged(self: ToyAgreementTask, examples: Any, predictions: Any) -> dict[str, float]:
        return {**evaluate(self, examples, predictions), "mcc": math.nan}

    monkeypatch.setattr(ToyAgreementTask, "evaluate", diverged)
    recipe = TOY_FINETUNE.format(extra="    save_models: all\n", test_size="")
    run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", make_host(autoload=True))
    description = tmp_path / "run/finetune/outputs/models/toy-agreement/trial-0/xfer_model.json"

    def refuse(token: str) -> None:
        raise ValueError(f"non-standard JSON token {token}")

    meta = json.loads(description.read_text(), parse_constant=refuse)
    assert meta["metrics"]["mcc"] == "NaN" and meta["metrics"]["accuracy"] >= 0


def test_test_examples_with_a_repeated_id_are_refused_not_given_one_prediction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Train and dev examples are checked against the task contract when the stage reads them;
    the test split was not, so two test examples sharing an id got one prediction between them
    (the later one's) in the submission file, silently. The pre-flight of `xfer run` checks it,
    but not for a task that skips its data check (hub downloads) or for a stage run in-process."""
    from xfer.core.errors import UserError as Refused
    from xfer.core.toy.tasks import ToyAgreementTask

    examples = ToyAgreementTask.examples

    def repeated(self: ToyAgreementTask, split: str) -> list[Any]:
        found = examples(self, split)
        if split == "test":
            found[1] = SentenceExample(found[0].id, found[1].text_a, None, found[1].label)
        return found

    monkeypatch.setattr(ToyAgreementTask, "examples", repeated)
    recipe = TOY_FINETUNE.format(extra="    predict: [dev, test]\n", test_size=", test_size: 8")
    with pytest.raises(Refused) as refused:
        run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", make_host(autoload=True))
    assert "(test)" in str(refused.value) and "the same id 'test-000000'" in str(refused.value), refused.value
    assert not (tmp_path / "run/finetune/trials").exists(), "refused before any trial trained"


def test_an_init_checkpoint_with_a_fine_tuned_head_says_the_head_is_not_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Starting from a fine-tuned model (this stage's own `models/<task>`, an HF
    *ForSequenceClassification folder) dropped its trained head silently: a run meant to continue
    fine-tuning it scored a random head. Now a warning (stderr and report.md) says so; an HF
    pre-training checkpoint (no task head) gets none."""
    recipe = TOY_FINETUNE.format(extra="", test_size="")
    run_recipe_file(write_recipe(tmp_path / "a", recipe), tmp_path / "a/run", make_host(autoload=True))
    model = tmp_path / "a/run/finetune/outputs/models/toy-agreement"
    again = f"""\
stages:
  again:
    kind: transformer.finetune
    init: {model}
    max_length: 64
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {{steps: 1, batch_size: 8, precision: fp32}}
"""
    capsys.readouterr()
    run_recipe_file(write_recipe(tmp_path / "b", again), tmp_path / "b/run", make_host(autoload=True))
    err = capsys.readouterr().err
    assert f"init: {model} is a model fine-tuned on toy/agreement" in err, err
    assert "its trained head is not loaded" in (tmp_path / "b/run/again/report.md").read_text()

    from xfer.transformer.finetune import task_head_message

    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"architectures": ["ElectraForSequenceClassification"]}))
    assert "a checkpoint of ElectraForSequenceClassification" in (task_head_message(hf) or "")
    (hf / "config.json").write_text(json.dumps({"architectures": ["ElectraForPreTraining"]}))
    assert task_head_message(hf) is None
    assert task_head_message(model.parent) is None  # no model description at all

"""Hostile review of transformer.finetune, third round (heads, objectives, evaluation): defects
found and pinned (each test failed before its fix)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from xfer.core.tasks import SentenceExample, TaggingExample, TaskInfo
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.encoder import Encoder
from xfer.transformer.objectives import SequenceConfig, SequenceObjective, TaggingObjective
from xfer.transformer.presets import preset
from xfer.transformer.testing import toy_finetune_recipe
from xfer.transformer.tokenization import WordPieceTokenizer


def _tokenizer(tmp_path: Path) -> WordPieceTokenizer:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat . a dog ran far away .\n" * 20)
    return WordPieceTokenizer.train([corpus], 120, min_frequency=1)


def _encoder(tokenizer: WordPieceTokenizer) -> Encoder:
    torch.manual_seed(0)
    return Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1))


class _ShiftedTagging(TaggingObjective):
    """A tagging objective with its own loss: the built-in one plus 7 (a visible offset)."""

    calls: list[tuple[tuple[int, ...], tuple[int, ...]]]

    def loss(self, scores: Tensor, labels: Tensor) -> Tensor:
        self.calls = [*getattr(self, "calls", []), (tuple(scores.shape), tuple(labels.shape))]
        return super().loss(scores, labels) + 7.0


def test_a_tagging_subclass_own_loss_is_what_fine_tuning_trains(tmp_path: Path) -> None:
    """`TaggingObjective.forward` (what the trainer of `transformer.finetune` calls) computed its
    cross-entropy inline: a subclass's `loss()` was ignored by fine-tuning, while BAM's teachers
    called it on the same padded [B, W, C] scores, so the two stages trained different losses.
    Now `forward` goes through `loss(scores, tags)`, with the shapes BAM passes."""
    tokenizer = _tokenizer(tmp_path)
    info = TaskInfo("conll/ner", "tagging", ("B", "I", "O"), "f1")
    plain = TaggingObjective(_encoder(tokenizer), info, tokenizer, 32, None).eval()
    own = _ShiftedTagging(_encoder(tokenizer), info, tokenizer, 32, None).eval()
    own.load_state_dict(plain.state_dict())
    examples = [
        TaggingExample("a", ("the", "cat", "sat"), ("B", "I", "O")),
        TaggingExample("b", ("a", "dog"), ("B", "O")),
    ]
    batch = plain.collate(plain.featurize(examples))
    expected = plain(batch).loss
    got = own(batch).loss
    assert got.item() == pytest.approx(expected.item() + 7.0, rel=1e-6)
    assert own.calls == [((2, 3, 3), (2, 3))]  # padded per-word scores and tags, as BAM passes them
    # the built-in loss is the plain token cross-entropy over real words (padding ignored)
    scores = plain.scores(batch)
    real = batch["tags"] != -100
    assert expected.item() == pytest.approx(F.cross_entropy(scores[real], batch["tags"][real]).item(), rel=1e-6)
    # one built-in `loss` for sentence and tagging objectives: BAM tells an overridden loss from
    # the built-in by identity with SequenceObjective.loss, so plain tagging is not "own loss"
    assert TaggingObjective.loss is SequenceObjective.loss
    assert _ShiftedTagging.loss is not SequenceObjective.loss


def test_export_hf_without_the_head_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`export_hf: true` with the default sentence objective (`pooler: none`, which has no HF
    class) wrote a bare ElectraModel to models/<task>/hf: the fine-tuned classifier was left out
    without a word. Now a warning (stderr and report.md) says so and how to export it; a head
    with an HF class (`pooler: gelu`) gets none."""
    recipe = toy_finetune_recipe(
        "{name: toy/agreement, train_size: 16, dev_size: 8}", max_length=64, export_hf=True, steps=1, batch_size=8
    )
    run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", make_host(autoload=True))
    hf = tmp_path / "run/finetune/outputs/models/toy-agreement/hf"
    assert json.loads((hf / "config.json").read_text())["architectures"] == ["ElectraModel"]
    err = capsys.readouterr().err
    assert "toy/agreement: `export_hf: true` writes only the encoder" in err, err
    report = (tmp_path / "run/finetune/report.md").read_text()
    assert "models/toy-agreement/hf" in report and "pooler: gelu" in report, report

    from xfer.transformer.finetune import _hf_encoder_only_message

    tokenizer = _tokenizer(tmp_path)
    info = TaskInfo("toy/agreement", "classification", ("neg", "pos"), "accuracy")
    gelu = SequenceObjective(_encoder(tokenizer), info, tokenizer, 16, SequenceConfig(pooler="gelu"))
    assert _hf_encoder_only_message("toy/agreement", gelu) is None


def _stsb(folder: Path, dev_scores: list[float]) -> Path:
    """A tiny STS-B folder (train.tsv, dev.tsv) in GLUE's layout."""
    folder.mkdir(parents=True)
    header = "index\tsentence1\tsentence2\tscore\n"
    pairs = [("the cat sat", "a cat sat"), ("a dog ran", "the dog ran far"), ("the mat", "a dog")]
    train = "".join(f"{i}\t{a}\t{b}\t{i % 6}.0\n" for i, (a, b) in enumerate(pairs * 4))
    (folder / "train.tsv").write_text(header + train)
    dev = "".join(f"{i}\t{a}\t{b}\t{s}\n" for i, ((a, b), s) in enumerate(zip(pairs, dev_scores, strict=False)))
    (folder / "dev.tsv").write_text(header + dev)
    return folder


def _run_stsb(tmp_path: Path, dev_scores: list[float]) -> str:
    data = _stsb(tmp_path / "STS-B", dev_scores)
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat . a dog ran far away .\n" * 20)
    recipe = toy_finetune_recipe(
        f"{{name: glue/stsb, data_dir: {data}}}",
        name="sts",
        sentences=None,  # the vocabulary is trained on `text`, no toy corpus
        vocab_files=f"[{text}]",
        vocab_size=120,
        max_length=32,
        steps=1,
        batch_size=4,
        log_every=None,
    )
    run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", make_host(autoload=True))
    return (tmp_path / "run/finetune/report.md").read_text()


def test_a_constant_regression_dev_set_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An STS-B dev set whose scores are all one value scored Pearson/Spearman 0 in every trial (the
    correlation is undefined there), reported as if fine-tuning had failed, without a word. Now a
    warning (stderr and report.md) says why; a varied dev set gets none."""
    report = _run_stsb(tmp_path / "a", [2.5, 2.5, 2.5])
    err = capsys.readouterr().err
    assert "glue/stsb: every labelled dev example has the score 2.5" in err, err
    assert "reported as 0 whatever the model predicts" in report, report
    results = json.loads((tmp_path / "a/run/finetune/outputs/results/results.json").read_text())
    assert results["glue/stsb"]["runs"][0]["spearman"] == 0.0  # the score the warning explains

    report = _run_stsb(tmp_path / "b", [2.5, 1.0, 4.0])
    assert "every labelled dev example" not in report, report


def test_a_micro_batch_of_sentences_without_words_does_not_stop_tagging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task contract accepts a training sentence without words (tags ()); a micro-batch made
    only of such sentences had no tag to average, its cross-entropy was NaN, and fine-tuning
    stopped at the first step as "diverged", blaming the objective. Now their loss is 0 (as BAM's
    tagging loss) with a gradient, and the loss of other batches is unchanged."""
    tokenizer = _tokenizer(tmp_path)
    info = TaskInfo("conll/ner", "tagging", ("B", "I", "O"), "f1")
    objective = TaggingObjective(_encoder(tokenizer), info, tokenizer, 32, None)
    empty = objective.collate(objective.featurize([TaggingExample("e", (), ())]))
    loss = objective(empty).loss
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()

    from xfer.core.toy.tasks import ToyPosTask

    examples = ToyPosTask.examples

    def with_empty_sentences(self: ToyPosTask, split: str) -> list[Any]:
        found = examples(self, split)
        return found + [TaggingExample(f"empty-{i}", (), ()) for i in range(8)] if split == "train" else found

    monkeypatch.setattr(ToyPosTask, "examples", with_empty_sentences)
    recipe = toy_finetune_recipe(
        "{name: toy/pos, train_size: 8, dev_size: 4}", max_length=32, steps=8, batch_size=4, grad_accum=4
    )
    run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", make_host(autoload=True))
    results = json.loads((tmp_path / "run/finetune/outputs/results/results.json").read_text())
    assert results["toy/pos"]["runs"][0]["steps"] == 8


def test_regression_scores_outside_the_declared_range_are_counted_in_a_warning(tmp_path: Path) -> None:
    """Targets are scaled by the task's `score_range` to [0, 1] (ELECTRA asserts every score lies
    in it); a score outside it (a plugin declaring (0, 5) for 0-100 ratings) trained on targets
    far past 1 without a word. Now a warning (report.md) counts them and names the first; scores
    within the range, unlabelled examples and tasks without a declared range get none."""
    tokenizer = _tokenizer(tmp_path)
    info = TaskInfo("my/sts", "regression", (), "spearman", extra={"score_range": (0.0, 5.0)})
    objective = SequenceObjective(_encoder(tokenizer), info, tokenizer, 16, None)
    examples = [
        SentenceExample("in", "the cat", "a dog", 5.0),
        SentenceExample("above", "the cat", "a mat", 80.0),
        SentenceExample("below", "a dog", "the mat", -1.0),
    ]
    with pytest.warns(UserWarning) as caught:
        features = objective.featurize(examples)
    assert [f["label"] for f in features] == pytest.approx([1.0, 16.0, -0.2])
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert "my/sts: 2 of 3 examples have a score outside the task's score_range (0, 5)" in messages[0]
    assert "first 'above' with 80.0" in messages[0], messages[0]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        objective.featurize([examples[0], SentenceExample("test", "a cat", "a dog", None)])
        undeclared = TaskInfo("my/score", "regression", (), "spearman")  # no range: targets are the scores
        SequenceObjective(objective.encoder, undeclared, tokenizer, 16, None).featurize(examples)

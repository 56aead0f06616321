"""A dev tag the training data never had (an entity type unseen in training) is legitimate:
`check_examples` warns of it, the tagging objective ignores it in the loss, and evaluation counts
it as a miss; transformer.finetune must train and score such data, not stop at featurisation."""

from __future__ import annotations

import json
from pathlib import Path

from xfer.core.tasks import TaggingExample, TaskInfo
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.encoder import Encoder
from xfer.transformer.objectives import TaggingObjective
from xfer.transformer.presets import preset
from xfer.transformer.tokenization import WordPieceTokenizer

WORDS = ("the", "cat", "sat", "on", "the", "mat")


def test_a_dev_tag_outside_the_tag_set_is_ignored_by_the_loss(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat .\n" * 20)
    tokenizer = WordPieceTokenizer.train([corpus], 80, min_frequency=1)
    info = TaskInfo("conll/ner", "tagging", ("B-PER", "I-PER", "O"), "f1")
    encoder = Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1))
    objective = TaggingObjective(encoder, info, tokenizer, 32, None)
    dev = TaggingExample("dev-1", WORDS, ("B-PER", "O", "O", "O", "B-MISC", "I-MISC"))
    [feature] = objective.featurize([dev])
    assert feature["tags"] == [0, 2, 2, 2, -100, -100]
    loss, _ = objective(objective.collate([feature]))
    assert loss.isfinite()


NER_TRAIN = """\
john NNP B-NP I-PER
lives VBZ B-VP O
in IN B-PP O
paris NNP B-NP I-LOC

mary NNP B-NP I-PER
sat VBD B-VP O
"""
NER_DEV = """\
john NNP B-NP I-PER
read VBD B-VP O
le NNP B-NP I-MISC
monde NNP B-NP I-MISC
"""

RECIPE = """
name: unseen
seed: 3
stages:
  vocab: {kind: transformer.vocab, files: [text.txt], size: 120, min_frequency: 1}
  ner:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    encoder: {num_layers: 1, hidden_size: 16, embedding_size: 16, intermediate_size: 32, num_heads: 2}
    max_length: 16
    tasks: [{name: conll/ner, train_file: train.txt, dev_file: dev.txt}]
    train: {steps: 2, batch_size: 2, lr: 1e-3, log_every: 1, precision: fp32}
"""


def test_finetune_trains_and_scores_a_dev_set_with_an_unseen_entity_type(tmp_path: Path) -> None:
    (tmp_path / "train.txt").write_text(NER_TRAIN)
    (tmp_path / "dev.txt").write_text(NER_DEV)
    (tmp_path / "text.txt").write_text("john lives in paris . mary sat . john read le monde .\n" * 10)
    run_recipe_file(write_recipe(tmp_path, RECIPE), tmp_path / "run", make_host(autoload=True))
    # said on stderr and kept in the stage's report (it was stderr only: gone once the terminal scrolled)
    report = (tmp_path / "run" / "ner" / "report.md").read_text()
    assert "## Warning" in report and "(dev): 2 gold tags not in the training tag set, first 'B-MISC'" in report
    results = json.loads((tmp_path / "run" / "ner" / "outputs/results/results.json").read_text())
    [run] = results["conll/ner"]["runs"]
    # the MISC entity cannot be predicted: a miss, so recall is at most 1/2 and F1 at most 2/3
    assert 0 <= run["f1"] <= 100 * 2 / 3 + 1e-6

"""The GLUE tasks pass the xfer.testing conformance checks inside a real fine-tuning recipe."""

from __future__ import annotations

import random
from pathlib import Path

from xfer.testing import ComponentConformance

WORDS = ["the", "a", "dog", "cat", "runs", "sleeps", "big", "small", "red", "near", "house"]


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) + " ."


class TestRteConformance(ComponentConformance):
    component = ("task", "glue/rte")
    config_path = "stages.fit.tasks.0"
    recipe = """
    stages:
      corpus: {kind: toy.corpus, sentences: 200}
      vocab: {kind: transformer.vocab, files: corpus.text, size: 300, min_frequency: 1}
      fit:
        kind: transformer.finetune
        tokenizer: vocab.tokenizer
        encoder: {num_layers: 1, hidden_size: 32, embedding_size: 32, intermediate_size: 64, num_heads: 2}
        max_length: 40
        tasks: [{name: glue/rte, data_dir: RTE}]
        train: {steps: 8, batch_size: 8, log_every: 1, checkpoint_every: 3, precision: fp32}
    """

    def prepare(self, directory: Path) -> None:
        rng = random.Random(0)
        folder = directory / "RTE"
        folder.mkdir(exist_ok=True)
        for split, n in (("train", 48), ("dev", 16)):
            rows = ["index\tsentence1\tsentence2\tlabel"]
            rows += [f"{i}\t{_sentence(rng)}\t{_sentence(rng)}\t{rng.choice(['entailment', 'not_entailment'])}" for i in range(n)]
            (folder / f"{split}.tsv").write_text("\n".join(rows) + "\n")


class TestTsvRegressionConformance(ComponentConformance):
    component = ("task", "glue/tsv")
    config_path = "stages.fit.tasks.0"
    recipe = """
    stages:
      corpus: {kind: toy.corpus, sentences: 200}
      vocab: {kind: transformer.vocab, files: corpus.text, size: 300, min_frequency: 1}
      fit:
        kind: transformer.finetune
        tokenizer: vocab.tokenizer
        encoder: {num_layers: 1, hidden_size: 32, embedding_size: 32, intermediate_size: 64, num_heads: 2}
        max_length: 40
        tasks:
          - {name: glue/tsv, train: train.tsv, dev: dev.tsv, type: regression, header: false,
             text_a_column: 0, label_column: 1, metrics: [pearson, spearman], main_metric: spearman}
        train: {steps: 8, batch_size: 8, log_every: 1, checkpoint_every: 3, precision: fp32}
    """

    def prepare(self, directory: Path) -> None:
        rng = random.Random(1)
        for split, n in (("train", 48), ("dev", 16)):
            rows = [f"{_sentence(rng)}\t{rng.uniform(0, 5):.2f}" for _ in range(n)]
            (directory / f"{split}.tsv").write_text("\n".join(rows) + "\n")

"""The CoNLL NER task passes the xfer.testing conformance checks inside a fine-tuning recipe."""

from __future__ import annotations

import random
from pathlib import Path

from xfer.testing import ComponentConformance

NAMES = ["bob", "mary", "paris", "london"]
OTHER = ["the", "dog", "runs", "near", "a", "house", "."]


class TestNerConformance(ComponentConformance):
    component = ("task", "conll/ner")
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
        tasks: [{name: conll/ner, train_file: train.txt, dev_file: dev.txt}]
        train: {steps: 8, batch_size: 8, log_every: 1, checkpoint_every: 3, precision: fp32}
    """

    def prepare(self, directory: Path) -> None:
        rng = random.Random(0)
        for split, n in (("train", 48), ("dev", 16)):
            lines = []
            for _ in range(n):
                for _ in range(rng.randint(3, 9)):
                    if rng.random() < 0.3:
                        word = rng.choice(NAMES)
                        lines.append(f"{word} NNP B-NP B-{'PER' if word in ('bob', 'mary') else 'LOC'}")
                    else:
                        lines.append(f"{rng.choice(OTHER)} NN B-NP O")
                lines.append("")
            (directory / f"{split}.txt").write_text("\n".join(lines) + "\n")

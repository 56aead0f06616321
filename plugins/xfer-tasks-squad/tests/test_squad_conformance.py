"""The SQuAD task passes the xfer.testing conformance checks inside a fine-tuning recipe."""

from __future__ import annotations

import json
import random
from pathlib import Path

from xfer.testing import ComponentConformance

ANIMALS = ["dog", "cat", "owl", "fox"]
PLACES = ["house", "garden", "forest", "river"]


def squad_file(path: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    paragraphs = []
    for i in range(n):
        animal, place = rng.choice(ANIMALS), rng.choice(PLACES)
        context = f"the {animal} sleeps near the {place} . the sun is warm ."
        answer = f"the {place}"
        paragraphs.append({
            "context": context,
            "qas": [{"id": f"q{i}", "question": f"where does the {animal} sleep ?",
                     "answers": [{"text": answer, "answer_start": context.index(answer)}]}],
        })
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}))


class TestSquadConformance(ComponentConformance):
    component = ("task", "squad/v1")
    config_path = "stages.fit.tasks.0"
    recipe = """
    stages:
      corpus: {kind: toy.corpus, sentences: 200}
      vocab: {kind: transformer.vocab, files: corpus.text, size: 300, min_frequency: 1}
      fit:
        kind: transformer.finetune
        tokenizer: vocab.tokenizer
        encoder: {num_layers: 1, hidden_size: 32, embedding_size: 32, intermediate_size: 64, num_heads: 2}
        max_length: 48
        tasks: [{name: squad/v1, train_file: train.json, dev_file: dev.json}]
        train: {steps: 8, batch_size: 8, log_every: 1, checkpoint_every: 3, precision: fp32}
    """

    def prepare(self, directory: Path) -> None:
        squad_file(directory / "train.json", 48, seed=0)
        squad_file(directory / "dev.json", 16, seed=1)

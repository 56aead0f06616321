"""The SQuAD task passes the xfer.testing conformance checks inside a fine-tuning recipe."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import ClassVar

from xfer.testing import ComponentConformance

ANIMALS = ["dog", "cat", "owl", "fox"]
PLACES = ["house", "garden", "forest", "river"]


def squad_file(path: Path, n: int, seed: int, version: str = "1.1") -> None:
    """SQuAD JSON; version 2.0 makes every third question unanswerable (asks about a bird)."""
    rng = random.Random(seed)
    paragraphs = []
    for i in range(n):
        animal, place = rng.choice(ANIMALS), rng.choice(PLACES)
        context = f"the {animal} sleeps near the {place} . the sun is warm ."
        answer = f"the {place}"
        qa = {"id": f"q{i}", "question": f"where does the {animal} sleep ?",
              "answers": [{"text": answer, "answer_start": context.index(answer)}]}
        if version == "2.0":
            qa["is_impossible"] = i % 3 == 0
            if qa["is_impossible"]:
                qa.update(question="where does the bird sleep ?", answers=[])
        paragraphs.append({"context": context, "qas": [qa]})
    path.write_text(json.dumps({"version": version, "data": [{"title": "t", "paragraphs": paragraphs}]}))


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

    version: ClassVar[str] = "1.1"

    def prepare(self, directory: Path) -> None:
        squad_file(directory / "train.json", 48, seed=0, version=self.version)
        squad_file(directory / "dev.json", 16, seed=1, version=self.version)


class TestSquadV2Conformance(TestSquadConformance):
    component = ("task", "squad/v2")
    recipe = TestSquadConformance.recipe.replace("squad/v1", "squad/v2")
    version = "2.0"

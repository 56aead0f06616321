"""The SQuAD task passes the xfer.testing conformance checks inside a fine-tuning recipe."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import ClassVar

from xfer.testing import ComponentConformance
from xfer.transformer.testing import tiny_finetune_recipe

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
        qa = {
            "id": f"q{i}",
            "question": f"where does the {animal} sleep ?",
            "answers": [{"text": answer, "answer_start": context.index(answer)}],
        }
        if version == "2.0":
            qa["is_impossible"] = i % 3 == 0
            if qa["is_impossible"]:
                qa.update(question="where does the bird sleep ?", answers=[])
        paragraphs.append({"context": context, "qas": [qa]})
    path.write_text(json.dumps({"version": version, "data": [{"title": "t", "paragraphs": paragraphs}]}))


class TestSquadConformance(ComponentConformance):
    component = ("task", "squad/v1")
    config_path = "stages.fit.tasks.0"
    recipe = tiny_finetune_recipe("{name: squad/v1, train_file: train.json, dev_file: dev.json}", max_length=48)

    version: ClassVar[str] = "1.1"

    def prepare(self, directory: Path) -> None:
        squad_file(directory / "train.json", 48, seed=0, version=self.version)
        squad_file(directory / "dev.json", 16, seed=1, version=self.version)


class TestSquadV2Conformance(TestSquadConformance):
    component = ("task", "squad/v2")
    recipe = tiny_finetune_recipe("{name: squad/v2, train_file: train.json, dev_file: dev.json}", max_length=48)
    version = "2.0"
    resume_covered_by = "TestSquadConformance"  # the same reader, windows and featurizer

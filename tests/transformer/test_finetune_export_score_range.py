"""`export_hf: true` on a regression task writes the head with the task's score range folded in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from xfer.core.tasks import TaskInfo
from xfer.transformer.encoder import Encoder
from xfer.transformer.finetune import _export_hf
from xfer.transformer.hf import SCORE_RANGE_KEY
from xfer.transformer.objectives import SequenceConfig, SequenceObjective
from xfer.transformer.presets import preset
from xfer.transformer.tokenization import WordPieceTokenizer


def _objective(tmp_path: Path, info: TaskInfo) -> tuple[SequenceObjective, WordPieceTokenizer]:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat . a dog ran far away .\n" * 20)
    tokenizer = WordPieceTokenizer.train([corpus], 120, min_frequency=1)
    torch.manual_seed(0)
    encoder = Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1))
    return SequenceObjective(encoder, info, tokenizer, 16, SequenceConfig(pooler="gelu")).eval(), tokenizer


def test_the_fine_tuning_export_of_a_regression_head_outputs_the_task_scores(tmp_path: Path) -> None:
    """The head predicts scores scaled to [0, 1] (the objective scales them back by `score_range`):
    the stage's HF export left them scaled, so `transformers` read STS-B's 0-5 scores as 0-1."""
    info = TaskInfo("my/sts", "regression", (), "spearman", extra={"score_range": (0.0, 5.0)})
    objective, tokenizer = _objective(tmp_path, info)
    _export_hf(tmp_path / "hf", objective, tokenizer, info)
    config = json.loads((tmp_path / "hf/config.json").read_text(encoding="utf-8"))
    assert config[SCORE_RANGE_KEY] == [0.0, 5.0]
    transformers = pytest.importorskip("transformers")
    model = transformers.ElectraForSequenceClassification.from_pretrained(tmp_path / "hf").eval()
    ids = torch.tensor([[2, 7, 9, 11, 3]])
    mask, types = torch.ones_like(ids), torch.zeros_like(ids)
    with torch.no_grad():
        scaled = objective.head(objective.encoder(ids, mask, types).last_hidden_state)
        assert torch.allclose(
            model(input_ids=ids, attention_mask=mask, token_type_ids=types).logits, scaled * 5.0, atol=1e-4
        )


def test_a_classification_export_records_no_score_range(tmp_path: Path) -> None:
    info = TaskInfo("my/nli", "classification", ("a", "b"), "accuracy", extra={"score_range": (0.0, 5.0)})
    objective, tokenizer = _objective(tmp_path, info)
    _export_hf(tmp_path / "hf", objective, tokenizer, info)
    assert SCORE_RANGE_KEY not in json.loads((tmp_path / "hf/config.json").read_text(encoding="utf-8"))

"""With EMA on, finetune exports the EMA weights: exactly the model that was evaluated and selected."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from xfer.core import checkpoint as ckpt
from xfer.testing import make_host, run_recipe_file, write_recipe

RECIPE = """
name: ftema
seed: 4
stages:
  corpus: {kind: toy.corpus, sentences: 200}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 200, min_frequency: 1}
  finetune:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    encoder: {num_layers: 1, hidden_size: 16, embedding_size: 16, intermediate_size: 32, num_heads: 2}
    max_length: 32
    trials: 1
    tasks: [{name: toy/agreement, train_size: 32, dev_size: 16}]
    train: {steps: 4, batch_size: 8, lr: 1e-2, precision: fp32, ema_decay: 0.5, eval_every: 2, checkpoint_every: 2}
"""


def test_exported_model_is_the_evaluated_ema_model(tmp_path: Path) -> None:
    from xfer.transformer.modelio import load_model_dir

    run_recipe_file(write_recipe(tmp_path, RECIPE), tmp_path / "run", make_host(autoload=True))
    stage = tmp_path / "run" / "finetune"
    record = json.loads((stage / "trials/toy-agreement/trial-0/done.json").read_text())
    checkpoint = stage / "trials/toy-agreement/trial-0/checkpoints" / record["checkpoint"]
    ema = ckpt.load_tensors(checkpoint, "ema")
    model_dir = load_model_dir(stage / "outputs/models/toy-agreement")
    encoder = model_dir.build("encoder").state_dict()
    live = ckpt.load_tensors(checkpoint, "model") if (checkpoint / "model.safetensors").exists() else {}
    compared = 0
    for name, tensor in encoder.items():
        key = f"encoder.{name}"
        if key in ema:
            assert torch.equal(tensor, ema[key]), f"{key}: exported weights are not the evaluated EMA weights"
            compared += 1
    assert compared > 5
    assert any(not torch.equal(ema[k], live[k]) for k in ema if k in live), "EMA equals live weights: test is vacuous"

"""A tiny fine-tuning recipe for testing task plugins with `xfer.testing.ComponentConformance`.

A task is only exercised for real inside a stage that trains on it; the smallest such stage is
`transformer.finetune` on a 1-layer, 32-wide encoder with a vocabulary trained from the toy
corpus (seconds on a CPU). Task plugins share this recipe instead of each pasting their own, so
a change to the finetune stage's keys is made once:

    class TestMyTaskConformance(ComponentConformance):
        component = ("task", "mine/task")
        config_path = "stages.fit.tasks.0"
        recipe = tiny_finetune_recipe("{name: mine/task, train_file: train.txt}")
"""

from __future__ import annotations

TINY_ENCODER = "{num_layers: 1, hidden_size: 32, embedding_size: 32, intermediate_size: 64, num_heads: 2}"


def tiny_finetune_recipe(
    task: str,
    *,
    max_length: int = 40,
    steps: int = 8,
    checkpoint_every: int = 3,
    batch_size: int = 8,
    objective: str | None = None,
) -> str:
    """A recipe whose stage `fit` fine-tunes on `task` (a YAML flow mapping) for `steps` steps,
    with the task type's default objective or `objective` (a YAML flow mapping or name).

    `log_every: 1` so a conformance kill lands on an exact step; fp32 so weights compare bitwise
    across processes on any machine.
    """
    objective_line = f"\n    objective: {objective}" if objective else ""
    return f"""
stages:
  corpus: {{kind: toy.corpus, sentences: 200}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 300, min_frequency: 1}}
  fit:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    encoder: {TINY_ENCODER}
    max_length: {max_length}
    tasks:
      - {task}{objective_line}
    train: {{steps: {steps}, batch_size: {batch_size}, log_every: 1, checkpoint_every: {checkpoint_every}, precision: fp32}}
"""

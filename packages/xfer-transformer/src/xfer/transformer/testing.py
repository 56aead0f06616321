"""A tiny fine-tuning recipe for testing task plugins with `xfer.testing.ComponentConformance`.

A task is only exercised for real inside a stage that trains on it; the smallest such stage is
`transformer.finetune` on a 1-layer, 32-wide encoder with a vocabulary trained from the toy
corpus (seconds on a CPU). Task plugins share this recipe instead of each pasting their own, so
a change to the finetune stage's keys is made once:

    class TestMyTaskConformance(ComponentConformance):
        component = ("task", "mine/task")
        config_path = "stages.fit.tasks.0"
        recipe = tiny_finetune_recipe("{name: mine/task, train_file: train.txt}")

The repository's own fine-tuning tests build their (smaller) recipes with `toy_finetune_recipe`,
each pinning only the stage settings it is about.
"""

from __future__ import annotations

from typing import Any


def tiny_encoder(hidden_size: int = 32) -> str:
    """A 1-layer, 2-head encoder `hidden_size` wide (its feed-forward twice that), as a YAML flow mapping."""
    return (
        f"{{num_layers: 1, hidden_size: {hidden_size}, embedding_size: {hidden_size}, "
        f"intermediate_size: {2 * hidden_size}, num_heads: 2}}"
    )


TINY_ENCODER = tiny_encoder()


def tiny_finetune_recipe(
    task: str,
    *,
    max_length: int = 40,
    steps: int | None = 8,
    checkpoint_every: int | None = 3,
    batch_size: int = 8,
    objective: str | None = None,
    name: str | None = None,
    seed: int | None = None,
    stage: str = "fit",
    hidden_size: int = 32,
    sentences: int | None = 200,
    vocab_size: int = 300,
    vocab_files: str = "corpus.text",
    predict: str | None = None,
    export_hf: bool = False,
    epochs: int | None = None,
    grad_accum: int | None = None,
    log_every: int | None = 1,
) -> str:
    """A recipe whose stage `fit` (or `stage`) fine-tunes on `task` (a YAML flow mapping) for `steps`
    steps, with the task type's default objective or `objective` (a YAML flow mapping or name).

    `log_every: 1` so a conformance kill lands on an exact step; fp32 so weights compare bitwise
    across processes on any machine. The other keywords serve the repository's own tests, which
    pin one stage setting each without pasting a recipe of their own: a train key given as None is
    left out (the stage's default applies); `sentences=None` drops the toy corpus stage (then
    `vocab_files` names the vocabulary's text, a YAML list); `predict` (a YAML list) and `export_hf`
    are the stage keys of the same names. The text starts with `name:`/`seed:` lines when given,
    else with a blank line (callers may prepend their own top-level keys).
    """
    header = "".join(f"{key}: {value}\n" for key, value in (("name", name), ("seed", seed)) if value is not None)
    header = header or "\n"
    corpus = f"\n  corpus: {{kind: toy.corpus, sentences: {sentences}}}" if sentences is not None else ""
    options = (f"\n    predict: {predict}" if predict else "") + ("\n    export_hf: true" if export_hf else "")
    objective_line = f"\n    objective: {objective}" if objective else ""
    train = {
        "epochs": epochs,
        "steps": steps,
        "batch_size": batch_size,
        "grad_accum": grad_accum,
        "log_every": log_every,
        "checkpoint_every": checkpoint_every,
        "precision": "fp32",
    }
    train_keys = ", ".join(f"{key}: {value}" for key, value in train.items() if value is not None)
    return f"""{header}stages:{corpus}
  vocab: {{kind: transformer.vocab, files: {vocab_files}, size: {vocab_size}, min_frequency: 1}}
  {stage}:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    encoder: {tiny_encoder(hidden_size)}
    max_length: {max_length}{options}
    tasks:
      - {task}{objective_line}
    train: {{{train_keys}}}
"""


# The smaller toy run of the repository's own fine-tuning tests (a 16-wide encoder on 100 toy sentences,
# stage `finetune`, the stage's default checkpointing): what they pin differs, this does not.
_TOY_DEFAULTS: dict[str, Any] = {
    "name": "ft",
    "seed": 4,
    "stage": "finetune",
    "sentences": 100,
    "vocab_size": 150,
    "hidden_size": 16,
    "checkpoint_every": None,
}


def toy_finetune_recipe(task: str, **options: Any) -> str:
    """`tiny_finetune_recipe` with the defaults of the repository's own fine-tuning tests (name `ft`,
    seed 4, stage `finetune`, 100 toy sentences, a 150-word vocabulary, a 16-wide encoder, no
    `checkpoint_every`); `options` are its keywords and override those."""
    return tiny_finetune_recipe(task, **{**_TOY_DEFAULTS, **options})

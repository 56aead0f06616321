"""Recipes of the BAM tests: toy classification + toy tagging + a generated regression TSV, tiny encoder."""

from __future__ import annotations

import random
from pathlib import Path

from xfer.testing import write_recipe

ENCODER = "{num_layers: 1, hidden_size: 32, embedding_size: 32, intermediate_size: 64, num_heads: 2}"
TRAIN = "{epochs: 2, batch_size: 16, lr: 2e-3, log_every: 2, checkpoint_every: 50, eval_every: null, precision: fp32}"
TRAIN_EVAL = "{epochs: 2, batch_size: 16, lr: 2e-3, log_every: 2, checkpoint_every: 50, precision: fp32}"  # + dev
TASKS = """
      - {name: toy/agreement, train_size: 64, dev_size: 40}
      - {name: toy/chunk, train_size: 48, dev_size: 24}
      - {name: glue/tsv, train: sts_train.tsv, dev: sts_dev.tsv, text_a_column: a, text_b_column: b,
         label_column: score, type: regression, metrics: [spearman, pearson]}"""


def recipe(students: str = "", *, teachers_extra: str = "", trials: int = 2, tasks: str = TASKS) -> str:
    """corpus -> vocab -> teachers (+ the given student stages, which may use {TASKS}/{TRAIN})."""
    return f"""
name: bam-test
seed: 3
stages:
  corpus: {{kind: toy.corpus, sentences: 200}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 300, min_frequency: 1}}
  teachers:
    kind: bam.teachers
    tokenizer: vocab.tokenizer
    encoder: {ENCODER}
    max_length: 40
    trials: {trials}
    tasks: {tasks}
    train: {TRAIN}{teachers_extra}
{students.format(TASKS=tasks, TRAIN=TRAIN, TRAIN_EVAL=TRAIN_EVAL)}
"""


STUDENTS = """
  student:
    kind: bam.student
    init: teachers.init
    teachers: teachers.predictions
    max_length: 40
    trials: 2
    tasks: {TASKS}
    train: {TRAIN_EVAL}
  multi:
    kind: bam.student
    init: teachers.init
    lambda_schedule: none
    max_length: 40
    trials: 1
    tasks: {TASKS}
    train: {TRAIN}
"""


def write_regression_data(directory: Path, train: int = 48, dev: int = 24) -> None:
    """A small STS-like TSV task: the score counts shared words, so a model can learn something."""
    rng = random.Random(0)
    words = ["the", "a", "cat", "dog", "runs", "sleeps", "big", "small", "red", "blue", "slowly", "house", "tree"]
    for split, n in (("train", train), ("dev", dev)):
        lines = ["a\tb\tscore"]
        for _ in range(n):
            a, b = rng.sample(words, 5), rng.sample(words, 5)
            lines.append(f"{' '.join(a)}\t{' '.join(b)}\t{len(set(a) & set(b)):.1f}")
        (directory / f"sts_{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def prepare(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    write_regression_data(directory)
    return write_recipe(directory, text)

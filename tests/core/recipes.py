"""Recipe texts shared by the core tests (all train `testing.fit` on the toy language)."""

FIT = """\
name: fit
seed: 3
stages:
  fit:
    kind: testing.fit
    task: {name: toy/agreement, train_size: 320, dev_size: 64}
    train: {steps: 24, batch_size: 16, log_every: 1, checkpoint_every: 5}
"""

CHAIN = """\
name: chain
seed: 3
stages:
  corpus:
    kind: toy.corpus
    sentences: 50
  first:
    kind: testing.fit
    task: {name: toy/agreement, train_size: 160, dev_size: 32}
    train: {steps: 6, batch_size: 16, log_every: 2, checkpoint_every: 3}
  second:
    kind: testing.fit
    init: first.model
    task: {name: toy/agreement, train_size: 160, dev_size: 32}
    train: {steps: 4, batch_size: 16, log_every: 2, checkpoint_every: 2}
"""


ALIAS = """\
name: alias
stages:
  fit:
    kind: testing.fit
    task: {name: lines/cls, as: reviews, train_file: reviews/train.tsv}
    train: {steps: 2, batch_size: 8}
"""

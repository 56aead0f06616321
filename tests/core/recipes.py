"""Recipe texts shared by the core tests (all train `testing.fit` on the toy language), and
`validate_errors`, the recipe-error tests' way to run `xfer validate`."""

from pathlib import Path

import pytest

BARE = """\
name: t
stages:
  fit:
    kind: testing.fit
    task: {name: toy/agreement, train_size: 64, dev_size: 16}
"""
"""The smallest recipe of the recipe-error tests, to which each appends what it tries."""


@pytest.fixture(autouse=True, name="host")
def testing_host():
    """The testing plugin as the default host (autouse where a test module imports it)."""
    from xfer.core.plugins import set_default_host
    from xfer.testing import make_host

    set_default_host(make_host(["xfer.testing.plugin"]))
    yield
    set_default_host(None)


def validate_errors(path: Path, capsys: pytest.CaptureFixture[str], *overrides: str) -> str:
    """`xfer validate PATH OVERRIDES...`'s error output, which must be an exit 2 without a traceback."""
    from xfer.core import cli

    assert cli.main(["validate", str(path), *overrides]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


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

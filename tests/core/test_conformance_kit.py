"""The conformance kit on a stage that does not train (`trains = False`): `toy.corpus` writes text."""

from __future__ import annotations

import pytest

from xfer.testing import ComponentConformance
from xfer.testing.helpers import output_files


class TestToyCorpusStage(ComponentConformance):
    component = ("stage", "toy.corpus")
    config_path = "stages.fit"
    trains = False
    recipe = """
    stages:
      fit: {kind: toy.corpus, sentences: 40, sentences_per_document: 4}
    """


def test_output_files_name_every_file_and_refuse_an_empty_stage(tmp_path):
    outputs = tmp_path / "fit" / "outputs"
    (outputs / "text").mkdir(parents=True)
    with pytest.raises(AssertionError, match="no files under"):
        output_files(tmp_path, "fit")
    (outputs / "text" / "a.txt").write_text("a\n")
    (outputs / "b.txt").write_text("b\n")
    assert sorted(output_files(tmp_path, "fit")) == ["b.txt", "text/a.txt"]

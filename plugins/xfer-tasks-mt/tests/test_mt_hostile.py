"""Hostile-review regressions for mt/parallel reading."""

from __future__ import annotations

import pytest

from xfer.core.errors import DataError
from xfer.tasks.mt.config import ParallelConfig
from xfer.tasks.mt.tasks import ParallelTextTask


def test_a_bom_inside_a_parallel_file_is_an_error_not_part_of_a_sentence(tmp_path):
    """`cat` of two files saved with a BOM left U+FEFF glued to the first word of a reference,
    a word no hypothesis has (BLEU silently lower). The file's own first BOM is dropped as before."""
    (tmp_path / "dev.en").write_text("\ufeffA dog\n\ufeffA cat\n", encoding="utf-8")
    (tmp_path / "dev.de").write_text(
        "\ufeffEin Hund läuft im Park\n\ufeffEine Katze schläft auf dem Sofa\n", encoding="utf-8"
    )
    task = ParallelTextTask("mt/parallel", ParallelConfig(data_dir=str(tmp_path)))
    with pytest.raises(DataError, match=r"dev\.en:2: byte-order mark"):
        task.examples("dev")
    (tmp_path / "dev.en").write_text("\ufeffA dog\nA cat\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"dev\.de:2: byte-order mark"):
        task.examples("dev")
    (tmp_path / "dev.de").write_text(
        "\ufeffEin Hund läuft im Park\nEine Katze schläft auf dem Sofa\n", encoding="utf-8"
    )
    examples = task.examples("dev")
    assert [(e.source, e.target) for e in examples] == [
        ("A dog", "Ein Hund läuft im Park"),
        ("A cat", "Eine Katze schläft auf dem Sofa"),
    ]
    assert task.evaluate(examples, {e.id: e.target for e in examples})["bleu"] == pytest.approx(100.0)

"""conll/chunking refuses a tag column of named-entity types (CoNLL-2003's NER column)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.tasks.conll.config import ChunkingConfig
from xfer.tasks.conll.tasks import ChunkingTask

CONLL2003 = """EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

BRUSSELS NNP B-NP B-LOC
"""


def _task(path: Path, **config: object) -> ChunkingTask:
    return ChunkingTask("conll/chunking", ChunkingConfig(train_file=path, dev_from_train=1, **config))


def test_chunking_on_the_ner_column_of_a_conll_2003_file_is_refused(tmp_path: Path) -> None:
    """The default tag_column -1 is the chunk column of CoNLL-2000 files but the NER column of
    CoNLL-2003's: a chunking run on them trained and scored entities as chunks, without a word."""
    path = tmp_path / "train.txt"
    path.write_text(CONLL2003, encoding="utf-8")
    with pytest.raises(DataError, match=r"named-entity types \(LOC, MISC, ORG, PER\).*set tag_column: 2") as caught:
        _task(path).examples("train")
    assert caught.value.key == "tag_column"
    chunks = _task(path, tag_column=2).examples("train")
    assert list(chunks[0].tags[:2]) == ["S-NP", "S-VP"]


@pytest.mark.skipif(
    not (Path(os.environ.get("XFER_DATA", "")) / "conll2003" / "train.txt").is_file(),
    reason="needs XFER_DATA with conll2003/train.txt (../shared/data)",
)
def test_the_shared_conll_2003_file_is_chunked_on_its_chunk_column_only() -> None:
    path = Path(os.environ["XFER_DATA"]) / "conll2003" / "train.txt"
    with pytest.raises(DataError, match="named-entity types"):
        _task(path).examples("train")
    assert {t.split("-", 1)[-1] for e in _task(path, tag_column=2).examples("train") for t in e.tags} >= {"NP", "VP"}


def test_a_tag_column_chosen_on_purpose_may_hold_entities(tmp_path: Path) -> None:
    """conll/chunking as a loader of entity spans (its dev carve), with the column given: not refused."""
    path = tmp_path / "train.txt"
    path.write_text(CONLL2003, encoding="utf-8")
    assert "S-ORG" in _task(path, tag_column=3).examples("train")[0].tags

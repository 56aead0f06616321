"""Where ELECTRA's pre-training text comes from: the `corpus:` block of a pre-training stage.

Torch-free and `datasets`-free on purpose: `xfer validate` imports every config class and must
stay fast. The pipeline that reads a corpus lives in `xfer.electra.data`.

Two kinds of source, exactly one per corpus:

* `files`: plain-text files, one sentence (or paragraph) per line, a blank line between
  documents (the format of ELECTRA's `build_pretraining_dataset.py` and of /work/shared/data's
  unlabeled corpora). The end of a file also ends a document.
* `dataset`: anything `datasets` can load without code of ours: a folder written by
  `Dataset.save_to_disk`, a local `.json`/`.jsonl`/`.csv`/`.tsv`/`.parquet`/`.txt` file, or a
  dataset name / local dataset folder for `datasets.load_dataset`. Each row of `text_column` is
  one line; an empty (or whitespace-only) row is a document boundary. A .csv/.tsv cell is the text
  it holds ("NA", "null" or "007" included; a blank line is an empty row), and a .tsv has no quoting.
  A JSON-lines row without the `text_column` key is an error naming its line, as a CSV row missing
  its cell is (a null is an empty row); a streamed local file is parsed once before training starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xfer.core.config import FieldError, Files, PathOrName, knob


@dataclass
class CorpusConfig:
    """The text an ELECTRA/Electric/MLM model is pre-trained on (recipe key `corpus:`)."""

    files: Files | None = knob(
        None,
        "Plain-text corpus: paths, globs or earlier stages' outputs (every .txt inside). One sentence per "
        "line, a blank line between documents; each file also ends a document. Files are read pattern by "
        "pattern in the order given, each pattern's matches in sorted order; a file matched twice is an error.",
        takes=("text",),
    )
    dataset: PathOrName | None = knob(
        None,
        "Instead of files: a Dataset.save_to_disk folder, a local .json/.jsonl/.csv/.tsv/.parquet/.txt file "
        "(relative to the recipe's folder; signed by the run's fingerprint like files), "
        "or a datasets.load_dataset name or folder (a Hub name is read through your datasets cache, "
        "HF_DATASETS_CACHE; offline, with HF_DATASETS_OFFLINE=1, it must be there already). "
        "Each row of text_column is one line; an empty row ends a document (a JSON-lines row without the key "
        "is an error naming its line); in a folder of .txt or JSON-lines files, each file's end ends a document too. "
        "A streamed local file is parsed once before training starts.",
    )
    dataset_config: str | None = knob(
        None, "Configuration name passed to datasets.load_dataset (e.g. wikitext-2-raw-v1)."
    )
    split: str = knob("train", "Split of the dataset to read.")
    text_column: str = knob("text", "Column of the dataset holding the lines of text.")
    streaming: bool = knob(
        False,
        "Corpora larger than memory or disk: no Arrow build; lines are read, tokenized and packed on the fly "
        "while training (steps_per_epoch is then unknown, so the stage needs a fixed number of steps).",
    )
    num_proc: int = knob(
        1,
        "Processes for tokenizing and packing (datasets.map). The examples do not depend on it: changing it "
        "re-runs nothing.",
        ge=1,
        signed_as=1,
    )
    max_lines: int | None = knob(
        None,
        "Read only the first N lines of the corpus (files in order; blank lines count). A deterministic prefix "
        "for quick CPU experiments; None reads everything.",
        ge=1,
    )
    shuffle_buffer: int = knob(
        10000,
        "Streaming only: examples shuffled together (a seeded window, restored exactly on resume). The order "
        "of the corpus' 1 MiB blocks is also shuffled every pass.",
        ge=1,
    )
    stream_sharding: Literal["examples", "shards"] = knob(
        "examples",
        "Streaming only: how ranks (torchrun processes) split the stream. `examples`: every rank reads and "
        "tokenizes the whole stream and keeps every world_size-th example (redundant work, the one-process "
        "run's examples). `shards`: ranks read disjoint shards (shard i to rank i % world_size), no redundant "
        "tokenization, but each rank's data order differs from a one-process run's and the stream needs at "
        "least one shard per rank (checked at stage start). A shard is a block of about 1 MiB of `files:` "
        "text (cut at a blank line; each file ends one), of 10,000 rows of a save_to_disk folder, or one file "
        "of a streamed local data file, load_dataset folder or Hub dataset; with max_lines a local data file "
        "or dataset stream is one shard. One process reads the same either way.",
        unsigned_at="examples",
    )

    def __post_init__(self) -> None:
        if self.files is not None and self.dataset is not None:
            raise FieldError("dataset", "give either files or dataset, not both")
        if not self.text_column.strip():
            raise FieldError("text_column", "must name a column")
        if self.dataset is not None and not str(self.dataset).strip():
            raise FieldError("dataset", "must not be empty")
        if self.files is not None:  # `files: x.txt, text_column: body` trained on every line, the key unread
            for name, default in (("text_column", "text"), ("split", "train"), ("dataset_config", None)):
                if getattr(self, name) != default:
                    raise FieldError(
                        name,
                        f"is read only with `dataset:` (its rows); `files:` are plain text, one sentence per line, "
                        f"read whole: remove {name}, or give the file as `dataset:` (.json/.jsonl/.csv/.tsv/.parquet)",
                    )

        if self.stream_sharding not in ("examples", "shards"):
            raise FieldError("stream_sharding", f"must be examples or shards, got {self.stream_sharding!r}")
        if self.stream_sharding != "examples" and not self.streaming:
            # a packed (map-style) corpus is split by rows whatever this says: the key would be read by nothing
            raise FieldError(
                "stream_sharding",
                f"{self.stream_sharding} is read only with `streaming: true` (a packed corpus is split among "
                "ranks by rows): set streaming: true, or remove stream_sharding",
            )

    def check_recipe(self) -> None:
        """A recipe must say where the text is (Python callers may fill it in later)."""
        if self.files is None and self.dataset is None:
            raise FieldError("files", "the corpus needs either files (text files / globs) or dataset")

    @property
    def source_kind(self) -> str:
        """`files` or `dataset`: which of the two sources this corpus reads."""
        return "dataset" if self.dataset is not None else "files"

"""Checks of `features.init` (a Transformer checkpoint, e.g. an ELECTRA discriminator) and
`features.tokenizer` against each other and the `features:` knobs, before any weights are read.

They run in the pre-flight (`xfer run`, `xfer validate --data`) for folders that exist before the
run, and again when the stage starts for folders that earlier stages write (an `electra.pretrain`
stage's `discriminator`). Torch-free. Without them:

- a `features.tokenizer` trained apart from the checkpoint, of the same size or smaller, was
  accepted: every word piece id then meant another piece for every pre-trained embedding, and CVT
  trained on features of the wrong words without a word;
- a folder that is no checkpoint, a `features.max_length` beyond the checkpoint's positions, or a
  `features.layer` it does not have, were found only when the stage read the weights, after the
  stages before it had trained.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

from xfer.core.config import Files
from xfer.core.errors import DataError, UserError


def checkpoint_sizes(folder: Path) -> dict[str, Any]:
    """num_layers, max_position_embeddings and vocab_size a checkpoint folder records (xfer model
    dir or HF config.json, whose layer count is `num_hidden_layers`); {} when unreadable."""
    from xfer.transformer.finetune_config import checkpoint_encoder

    sizes = dict(checkpoint_encoder(folder) or {})
    if "num_layers" not in sizes and "num_hidden_layers" in sizes:
        sizes["num_layers"] = sizes["num_hidden_layers"]
    return sizes


def features_problems(init: Path, tokenizer: Path | None, max_length: int, layer: int) -> list[UserError]:
    """Every problem of the `features.init` folder with its tokenizer folder (None: the
    checkpoint's own), `features.max_length` and `features.layer`."""
    from xfer.transformer.finetune_config import checkpoint_format_problem, read_vocabulary, vocabulary_mismatch
    from xfer.transformer.modelio import encoder_weights_problem

    unusable = checkpoint_format_problem(init, "features.init")
    if unusable is not None:
        return [unusable]
    # missing or extra encoder tensors of an xfer model dir passed the pre-flight and were found only when
    # the stage loaded them, after earlier stages ran (`transformer.finetune`'s pre-flight refuses them too)
    if (tensors := encoder_weights_problem(init)) is not None:
        return [tensors]
    sizes = checkpoint_sizes(init)
    problems: list[UserError] = []
    ours = read_vocabulary(tokenizer if tokenizer is not None else init)
    if tokenizer is not None and ours is not None and tokenizer.resolve() != init.resolve():
        mismatch = vocabulary_mismatch(
            ours,
            read_vocabulary(init),
            "the features.init checkpoint",
            "use the checkpoint's own tokenizer (leave out features.tokenizer)",
        )
        if mismatch is not None:
            problems.append(mismatch)
    embeddings = sizes.get("vocab_size")
    if ours is not None and isinstance(embeddings, int) and embeddings < len(ours[1]):
        problems.append(
            DataError(
                str(init),
                0,
                f"the features.init checkpoint has {embeddings} token embeddings but the tokenizer ({ours[0]}) has "
                f"{len(ours[1])} tokens: use the checkpoint's own vocabulary",
            )
        )
    positions = sizes.get("max_position_embeddings")
    if isinstance(positions, int) and positions < max_length:
        problems.append(
            DataError(
                str(init),
                0,
                f"the checkpoint covers {positions} positions but features.max_length is {max_length}: lower "
                f"features.max_length to at most {positions} (longer sentences are split into windows)",
            )
        )
    layers = sizes.get("num_layers")
    if isinstance(layers, int) and not -layers - 1 <= layer <= layers:
        problems.append(
            DataError(
                str(init),
                0,
                f"features.layer {layer}: the checkpoint has layers 0 (embeddings) to {layers} (or -1 to -{layers + 1})",
            )
        )
    return problems


def unlabeled_problems(files: Files, task_sentences: bool, key: str = "unlabeled.files") -> list[UserError]:
    """The unlabeled files the patterns of `key` match (stage outputs are not there yet): a broken
    symbolic link among them, a file matched twice, bytes that are not UTF-8, a NUL, CR-only line
    endings, and text without a word when nothing else (stage outputs, `task_sentences`) adds any.
    The stage reads every line when it starts anyway (vocabulary counts), so reading them here
    costs no more than that."""
    from xfer.core.textfile import check_distinct
    from xfer.cvt.text import index_file

    paths = [Path(p) for pattern in files.patterns for p in sorted(glob.glob(pattern, recursive=True))]
    broken = next((p for p in paths if p.is_symlink() and not p.exists()), None)
    if broken is not None:  # the stage reads the files the patterns match: it was left out without a word
        return [UserError(f"{key}: {broken} is a broken symbolic link: its text would be left out")]
    paths = [p for p in paths if p.is_file()]
    try:
        check_distinct(paths, key)
        has_words = False
        for path in paths:
            has_words = index_file(path, chunk_lines=10000)[1] or has_words
    except UserError as problem:
        return [problem]
    if paths and not has_words and not files.inputs and not task_sentences:
        return [
            DataError(
                paths[0], 0, f"the text of {key} contains no words ({len(paths)} file(s), all empty or blank lines)"
            )
        ]
    return []


def vectors_problems(path: Path, word_dim: int) -> list[UserError]:
    """The `vocab.vectors` file's first vector against `word_dim` (a wrong dimension, a folder that is
    no cvt.vectors output, a file without vectors). Only the first lines: a GloVe file runs to
    gigabytes; the stage reads the rest when it starts."""
    from xfer.cvt.vectors import vectors_file
    from xfer.cvt.vocab import read_vectors

    try:
        read_vectors(vectors_file(path), word_dim, limit=1)
    except UserError as problem:
        return [problem]
    return []

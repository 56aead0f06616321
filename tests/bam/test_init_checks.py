"""BAM stages composed with a pre-trained checkpoint (an ELECTRA discriminator): what the `init`
folder, the `tokenizer` and `max_length` must agree on, checked before training, in the
pre-flight for folders that exist and by the stage for folders earlier stages write."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from xfer.core.errors import DataError, RecipeError, UserError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import preflight
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.encoder import Encoder, EncoderConfig
from xfer.transformer.modelio import save_model_dir
from xfer.transformer.tokenization import WordPieceTokenizer

from .bam_recipes import write_regression_data

PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "cat", "sees", "a", "big", ".", "##s"]
TRAIN = "{epochs: 1, batch_size: 8, lr: 1e-3, log_every: 1, checkpoint_every: 50, eval_every: null, precision: fp32}"


def save_checkpoint(
    folder: Path, pieces: list[str] = PIECES, positions: int = 64, types: int = 2, **meta: object
) -> Path:
    """A tiny xfer model dir with its tokenizer; `meta` as an `electra.pretrain` output records it."""
    torch.manual_seed(0)
    config = EncoderConfig(
        vocab_size=len(pieces), embedding_size=16, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
        max_position_embeddings=positions, type_vocab_size=types,
    )  # fmt: skip
    save_model_dir(folder, {"encoder": Encoder(config)}, dict(meta))
    WordPieceTokenizer.from_vocab({p: i for i, p in enumerate(pieces)}).save(folder)
    return folder


PAIRS = (
    "{name: glue/tsv, train: sts_train.tsv, dev: sts_dev.tsv, text_a_column: a, text_b_column: b, "
    "label_column: score, type: regression, metrics: [spearman, pearson]}"
)


def teachers_recipe(
    directory: Path,
    init: str,
    *,
    max_length: int = 32,
    tokenizer: str | None = None,
    task: str = "{name: toy/agreement, train_size: 16, dev_size: 8}",
) -> Path:
    extra = f"\n    tokenizer: {tokenizer}" if tokenizer else ""
    return write_recipe(
        directory,
        f"""
stages:
  teachers:
    kind: bam.teachers
    init: {init}{extra}
    max_length: {max_length}
    tasks: [{task}]
    train: {TRAIN}
""",
    )


def test_a_tokenizer_of_another_vocabulary_is_refused(tmp_path: Path) -> None:
    """Same size, two ids swapped: every pre-trained embedding would have stood for another token."""
    save_checkpoint(tmp_path / "electra")
    swapped = [*PIECES[:6], PIECES[7], PIECES[6], *PIECES[8:]]
    WordPieceTokenizer.from_vocab({p: i for i, p in enumerate(swapped)}).save(tmp_path / "other")
    recipe = teachers_recipe(tmp_path, "electra", tokenizer="other")
    with pytest.raises(DataError, match="trained with another vocabulary") as caught:
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True), preflight=False)
    assert caught.value.path.endswith("vocab.txt") and caught.value.line == 7
    host = make_host(autoload=True)
    assert any("another vocabulary" in p for p in preflight(load_recipe(recipe, host=host), host))


def test_max_length_beyond_the_checkpoints_positions_is_a_clear_error(tmp_path: Path) -> None:
    """Was a ValueError traceback from the encoder in the first training step."""
    save_checkpoint(tmp_path / "electra", positions=16)
    recipe = teachers_recipe(tmp_path, "electra", max_length=32)
    with pytest.raises(UserError, match="covers 16 positions but max_length is 32"):
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))


def test_preflight_refuses_a_folder_that_is_no_checkpoint_or_a_damaged_one(tmp_path: Path) -> None:
    """Found before the stages ahead of it train, not when the BAM stage reads it."""
    (tmp_path / "empty").mkdir()
    host = make_host(autoload=True)
    problems = preflight(load_recipe(teachers_recipe(tmp_path, "empty"), host=host), host)
    assert len(problems) == 1 and "neither an xfer model directory" in problems[0]
    meta = save_checkpoint(tmp_path / "damaged") / "xfer_model.json"
    meta.write_bytes(meta.read_bytes()[:100])  # cut short
    problems = preflight(load_recipe(teachers_recipe(tmp_path, "damaged"), host=host), host)
    assert len(problems) == 1 and f"{meta} does not describe an encoder" in problems[0]


def test_a_generator_init_and_untrained_positions_are_said(tmp_path: Path) -> None:
    """The ELECTRA generator fine-tunes as asked (as in transformer.finetune), but not silently; nor
    a max_length past the length the checkpoint was pre-trained on."""
    folder = tmp_path / "pretrain" / "generator"
    save_checkpoint(folder, role="generator", objective="electra.rtd", max_length=16)
    save_checkpoint(tmp_path / "pretrain" / "discriminator", role="discriminator", objective="electra.rtd")
    recipe = teachers_recipe(tmp_path, "pretrain/generator", max_length=24)
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    report = (tmp_path / "run" / "teachers" / "report.md").read_text(encoding="utf-8")
    assert f"{folder} is the generator of an electra.rtd pre-training" in report
    assert f"max_length 24 is more than the 16 tokens per example {folder} was pre-trained on" in report


def test_max_length_beyond_an_upstream_stages_positions_is_a_recipe_error(tmp_path: Path) -> None:
    """Checked against the pre-training stage's config, before it trains (an hour, on real data)."""
    pytest.importorskip("xfer.electra")
    recipe = write_recipe(
        tmp_path,
        f"""
stages:
  corpus: {{kind: toy.corpus, sentences: 50}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200}}
  pretrain:
    kind: electra.pretrain
    corpus: {{files: corpus.text}}
    tokenizer: vocab.tokenizer
    model: tiny
    encoder: {{max_position_embeddings: 32}}
    max_length: 32
    train: {{steps: 2, batch_size: 2, warmup_steps: 1}}
  teachers:
    kind: bam.teachers
    init: pretrain.discriminator
    max_length: 64
    tasks: [{{name: toy/agreement}}]
    train: {TRAIN}
""",
    )
    with pytest.raises(RecipeError) as caught:
        load_recipe(recipe, host=make_host(autoload=True))
    (problem,) = caught.value.diagnostics
    assert problem.location.line == 16
    assert "64 is more than the 32 positions of the encoder of stage 'pretrain'" in problem.message


def test_a_pair_task_on_a_single_segment_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    """An ELECTRA pre-trained with one token type (single segments only) and a pair task: was an
    IndexError traceback from the token-type embedding in the first training step."""
    write_regression_data(tmp_path)
    save_checkpoint(tmp_path / "electra", types=1)
    recipe = teachers_recipe(tmp_path, "electra", task=PAIRS)
    with pytest.raises(UserError, match=r"glue/tsv: its inputs use token type 1 .* has 1 token type"):
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))


CHAIN = """
stages:
  corpus: {{kind: toy.corpus, sentences: 100}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200, min_frequency: 1}}
  teachers:
    kind: bam.teachers
    tokenizer: vocab.tokenizer
    encoder: {{num_layers: 1, hidden_size: 16, embedding_size: 16, intermediate_size: 32, num_heads: 2}}
    max_length: 32
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {TRAIN}
  student:
    kind: bam.student
    init: teachers.init
    lambda_schedule: none
    max_length: 32
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {TRAIN}
  again:  # single-task fine-tuning after multi-task: its `init` output maps tasks to student models
    kind: bam.teachers
    init: student.models
    max_length: 32
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {TRAIN}
  last:
    kind: bam.student
    init: again.init
    lambda_schedule: none
    max_length: 32
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {TRAIN}
"""


def test_a_moved_or_forked_run_reads_its_own_models_through_an_init_map(tmp_path: Path) -> None:
    """`again/outputs/init/models.json` named the student's models by absolute path: a copy of the
    run directory (`--fork`, or a move) kept reading the original run's models — gone once it was
    deleted (here: moved), other weights once it re-ran."""
    recipe = write_recipe(tmp_path, CHAIN.format(TRAIN=TRAIN))
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True), only={"again"})
    (tmp_path / "run").rename(tmp_path / "moved")
    run_recipe_file(recipe, tmp_path / "moved", make_host(autoload=True))
    assert (tmp_path / "moved" / "last" / "outputs" / "models" / "multitask" / "model.safetensors").is_file()

"""Hostile review of checkpoint paths and the pre-flight of stages that start from one (h163): each
test failed before its fix (see the docstrings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from xfer.core import cli
from xfer.core.errors import CheckpointError, DataError
from xfer.core.plugins import set_default_host
from xfer.testing import make_host, write_recipe
from xfer.transformer import modelio
from xfer.transformer.encoder import Encoder, EncoderConfig
from xfer.transformer.finetune_config import checkpoint_format_problem, checkpoint_problems, weights_problem
from xfer.transformer.hf import export_hf, load_hf, read_hf_tensors

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat"]


@pytest.fixture(autouse=True)
def host():
    set_default_host(make_host(autoload=True, allow=["transformer", "electra", "toy"]))
    yield
    set_default_host(None)


def _checkpoint(folder: Path, hidden_size: int = 16) -> Path:
    """A tiny HF ELECTRA checkpoint with its vocab.txt (config.json, model.safetensors)."""
    config = EncoderConfig(
        vocab_size=len(TOKENS),
        embedding_size=16,
        hidden_size=hidden_size,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("".join(f"{token}\n" for token in TOKENS))
    export_hf(folder, Encoder(config), vocab_file=folder / "vocab.txt")
    return folder


def _validate(tmp_path: Path, stage: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """(exit code, error lines) of `xfer validate --data` on a one-stage recipe."""
    capsys.readouterr()
    code = cli.main(["validate", "--data", str(write_recipe(tmp_path, "stages:\n  s:\n" + stage))])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, [line for line in err.splitlines() if "problem" not in line]


FINETUNE = (
    "    kind: transformer.finetune\n"
    "    init: {init}\n"
    "    max_length: 16\n"
    "    tasks: [{{name: toy/agreement, train_size: 40, dev_size: 10}}]\n"
)


# --- a file inside a checkpoint given as the checkpoint -------------------------------------------


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_file_inside_a_checkpoint_names_the_folder_to_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """`init: ckpt/model.safetensors` was "does not exist" from the loaders (`hf._read_config`,
    `modelio.detect_format`) and from `checkpoint_format_problem`, naming a file that is there; and
    `transformer.finetune`'s pre-flight did not check the path at all: `xfer validate --data` said
    ok, and the stage refused it once the stages before it had run."""
    folder = _checkpoint(tmp_path / "ckpt")
    file = folder / name
    said = f"{file}: is a file; give the folder that holds it ({folder})"
    with pytest.raises(CheckpointError) as loaded:
        load_hf(file)
    assert str(loaded.value) == said
    with pytest.raises(CheckpointError) as detected:
        modelio.detect_format(file)
    assert str(detected.value) == said
    with pytest.raises(CheckpointError) as read:
        modelio.read_encoder(file)
    assert str(read.value) == said
    assert str(checkpoint_format_problem(file, "init")) == f"init: {said}"
    # the tokenizer defaults to the checkpoint's own folder: one error for the one wrong path
    assert [str(p) for p in checkpoint_problems(file, file, {}, 16, random_init=False)] == [f"init: {said}"]
    code, rows = _validate(tmp_path, FINETUNE.format(init=f"ckpt/{name}"), capsys)
    assert code == 2 and len(rows) == 1 and rows[0].endswith(f"stage 's': init: {said}"), rows
    assert _validate(tmp_path, FINETUNE.format(init="ckpt"), capsys)[0] == 0
    missing = tmp_path / "gone"
    with pytest.raises(CheckpointError, match="does not exist"):  # a missing folder still says so
        modelio.detect_format(missing)
    assert str(checkpoint_format_problem(missing, "init")) == f"init: {missing} does not exist"


# --- sharded pytorch_model-*.bin weights ----------------------------------------------------------


def test_the_pre_flight_names_sharded_bin_weights_as_the_loader_does(tmp_path: Path) -> None:
    """A folder of sharded `pytorch_model-*.bin` weights with their index passed to the pre-flight as
    "no weights file (...)", sending the user to look for a missing download, while the loader says
    they are not read and to convert them to safetensors; the pre-flight now says the same."""
    folder = _checkpoint(tmp_path / "ckpt")
    tensors = read_hf_tensors(folder)
    (folder / "model.safetensors").unlink()
    torch.save(tensors, folder / "pytorch_model-00001-of-00001.bin")
    (folder / "pytorch_model.bin.index.json").write_text(
        json.dumps({"weight_map": dict.fromkeys(tensors, "pytorch_model-00001-of-00001.bin")})
    )
    with pytest.raises(CheckpointError) as loaded:
        read_hf_tensors(folder)
    problem = weights_problem(folder)
    assert isinstance(problem, CheckpointError)
    assert str(problem) == str(loaded.value)
    assert "sharded pytorch_model-*.bin weights are not read" in str(problem) and "no weights file" not in str(problem)
    assert [str(p) for p in checkpoint_problems(None, folder, {}, 16, random_init=False)] == [str(problem)]


# --- encoder: overrides of architecture fields against the init checkpoint ------------------------


def test_finetune_pre_flight_refuses_an_architecture_override_the_checkpoint_contradicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`encoder: {hidden_size: 32}` on a 16-wide checkpoint passed `xfer validate --data` for
    `transformer.finetune` (only electra's pre-flight ran `with_overrides`), and the stage refused it
    once the stages before it had run. The check is now shared (`checkpoint_problems`)."""
    folder = _checkpoint(tmp_path / "ckpt")
    said = (
        f"encoder.hidden_size: 32 differs from the init checkpoint's 16 ({folder}); pre-trained weights fix the "
        "architecture: remove encoder.hidden_size, or set init: null to train that architecture from random weights"
    )
    assert [str(p) for p in checkpoint_problems(folder, folder, {"hidden_size": 32}, 16, random_init=False)] == [said]
    # the same value, and fields that are not architecture ones, pass
    assert checkpoint_problems(folder, folder, {"hidden_size": 16, "hidden_dropout": 0.0}, 16, random_init=False) == []
    stage = FINETUNE.format(init="ckpt") + "    encoder: {hidden_size: 32}\n"
    code, rows = _validate(tmp_path, stage, capsys)
    assert code == 2 and len(rows) == 1 and rows[0].endswith(said), rows
    with pytest.raises(CheckpointError) as read:  # what the stage says when it reads the checkpoint
        modelio.with_overrides(modelio.read_encoder(folder)[0], {"hidden_size": 32}, folder)
    assert str(read.value) == said


ELECTRA = (
    "    kind: electra.pretrain\n"
    "    {source}\n"
    "    corpus: {{files: corpus.txt}}\n"
    "    max_length: 16\n"
    "    budget: {{steps: 4}}\n"
    "    train: {{warmup_steps: 1}}\n"
)


def test_electra_reports_an_architecture_override_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """electra's pre-flight now runs the shared check (its own copy moved to xfer-transformer): the
    contradiction is said once, not by both."""
    _checkpoint(tmp_path / "ckpt")
    (tmp_path / "corpus.txt").write_text("the cat\na cat\n")
    code, rows = _validate(tmp_path, ELECTRA.format(source="init: ckpt\n    encoder: {num_layers: 3}"), capsys)
    assert code == 2 and len(rows) == 1 and "encoder.num_layers: 3 differs from the init checkpoint's 1" in rows[0]
    assert _validate(tmp_path, ELECTRA.format(source="init: ckpt"), capsys)[0] == 0


# --- a tokenizer folder without tokenizer files ---------------------------------------------------


def test_a_tokenizer_folder_without_vocabulary_files_is_refused_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`electra.pretrain`'s `tokenizer:` (and transformer.finetune's) given as a folder with neither
    vocab.txt nor tokenizer.json passed `xfer validate --data`: the pre-flight's tokenizer check
    skipped such a folder, and the stage failed loading it once the stages before it had run. The
    tokenizer loader's own error is given now."""
    empty = tmp_path / "tok"
    empty.mkdir()
    (empty / "README.md").write_text("not a tokenizer\n")
    said = f"{empty}: no tokenizer.json or vocab.txt in this directory"
    assert [str(p) for p in checkpoint_problems(empty, None, {}, 16, random_init=True)] == [said]
    assert all(isinstance(p, DataError) for p in checkpoint_problems(empty, None, {}, 16, random_init=True))
    (tmp_path / "corpus.txt").write_text("the cat\na cat\n")
    code, rows = _validate(tmp_path, ELECTRA.format(source="tokenizer: tok"), capsys)
    assert code == 2 and rows == [f"{said} (stage 's')"], rows
    (empty / "vocab.txt").write_text("".join(f"{token}\n" for token in TOKENS))
    assert _validate(tmp_path, ELECTRA.format(source="tokenizer: tok"), capsys)[0] == 0


def test_a_folder_above_the_checkpoint_names_the_checkpoints_in_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stage's folder given for the checkpoint it wrote (`init: runs/r/pretrain` for
    `runs/r/pretrain/outputs/discriminator`) was "neither an xfer model directory nor a Hugging Face
    checkpoint", from the pre-flight and from the loader, which did not say the one meant was there."""
    stage = tmp_path / "pretrain"
    wanted = _checkpoint(stage / "outputs" / "discriminator")
    (stage / "stage.json").write_text("{}")
    hint = f"; it holds checkpoints in sub-folders: give one of them ({wanted})"
    assert str(checkpoint_format_problem(stage, "init")) == (
        f"init: {stage} is neither an xfer model directory (xfer_model.json) nor a Hugging Face checkpoint "
        f"(config.json){hint}"
    )
    with pytest.raises(CheckpointError) as detected:
        modelio.detect_format(stage)
    assert str(detected.value).endswith(hint)
    code, rows = _validate(tmp_path, FINETUNE.format(init="pretrain"), capsys)
    assert code == 2 and len(rows) == 1 and rows[0].endswith(hint), rows
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    assert str(checkpoint_format_problem(empty, "init")).endswith("nor a Hugging Face checkpoint (config.json)")


def test_loading_a_file_inside_an_xfer_model_directory_names_the_folder(tmp_path: Path) -> None:
    """`load_model_dir(models/rte/model.safetensors)` said "not an xfer model directory (no
    xfer_model.json)", naming a file as if it were a folder that lost its description."""
    folder = modelio.save_model_dir(
        tmp_path / "m",
        {
            "encoder": Encoder(
                EncoderConfig(
                    vocab_size=8, hidden_size=16, embedding_size=16, num_layers=1, num_heads=2, intermediate_size=32
                )
            )
        },
    )
    file = folder / "model.safetensors"
    with pytest.raises(CheckpointError) as loaded:
        modelio.load_model_dir(file)
    assert str(loaded.value) == f"{file}: is a file; give the folder that holds it ({folder})"
    assert set(modelio.load_model_dir(folder).modules) == {"encoder"}

"""Hostile review of model directories, tokenizer files, HF export and Hub ids: each test failed
before its fix (see the docstrings)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from torch import nn

from xfer.core import cli, hub
from xfer.core.errors import CheckpointError
from xfer.core.plugins import set_default_host
from xfer.testing import make_host, write_recipe
from xfer.transformer import modelio
from xfer.transformer.modelio import load_model_dir, save_model_dir


@pytest.fixture(autouse=True)
def host():
    set_default_host(make_host(autoload=True, allow=["transformer"]))
    yield
    set_default_host(None)


# --- save_model_dir: replacing a model directory -------------------------------------------------


def _killed_while_saving(target: Path, dies_after: tuple[Any, str]) -> int:
    """Save version 2 over `target` in a forked child that dies as under SIGKILL (no handler, no
    `finally` runs) right after the first call to `dies_after` (module, function name) returns;
    the child's exit code. The module is built before the fork: the child runs no torch kernel."""
    import signal
    import time

    module = nn.Linear(2, 2)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
        try:
            owner, name = dies_after
            real = getattr(owner, name)

            def then_die(*args: Any, **kwargs: Any) -> Any:
                real(*args, **kwargs)
                os._exit(9)

            setattr(owner, name, then_die)
            save_model_dir(target, {"lin": module}, {"version": 2})
        finally:
            os._exit(0)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked writer hung")
        time.sleep(0.01)
    return os.waitstatus_to_exitcode(done[1])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork to kill a writer mid-save")
@pytest.mark.parametrize("dies_after", ["replace", "rmtree"])
def test_a_writer_killed_while_replacing_a_model_dir_leaves_a_model_dir(tmp_path: Path, dies_after: str) -> None:
    """save_model_dir moved the existing directory aside, then renamed the new one in: a writer killed
    between the two renames left nothing under the name (readers failed, naming the copy aside). The
    two are now exchanged in one atomic step, so a reader finds the old or the new version."""
    import shutil

    target = tmp_path / "m"
    save_model_dir(target, {"lin": nn.Linear(2, 2)}, {"version": 1})
    module = os if dies_after == "replace" else shutil
    _killed_while_saving(target, (module, dies_after))
    assert load_model_dir(target).meta["version"] in (1, 2)
    save_model_dir(target, {"lin": nn.Linear(2, 2)}, {"version": 3})  # and the next save replaces it
    assert load_model_dir(target).meta == {"version": 3}


def test_replacing_without_an_atomic_exchange_still_replaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where renameat2 cannot exchange (another OS, a filesystem that refuses it), the two renames remain."""
    target = tmp_path / "m"
    save_model_dir(target, {"lin": nn.Linear(2, 2)}, {"version": 1})
    monkeypatch.setattr(modelio, "_exchange", lambda a, b: False)
    save_model_dir(target, {"lin": nn.Linear(2, 2)}, {"version": 2})
    assert load_model_dir(target).meta == {"version": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_saving_over_a_symlink_replaces_the_link_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """The exchange leaves the previous entry under the temporary name; a link or file there is
    removed too (rmtree refuses both), and the folder a link pointed to is not touched."""
    elsewhere = tmp_path / "elsewhere"
    save_model_dir(elsewhere, {"lin": nn.Linear(2, 2)}, {"version": 1})
    parent = tmp_path / "models"
    parent.mkdir()
    (parent / "m").symlink_to(elsewhere)
    (parent / "f").write_text("not a model")
    save_model_dir(parent / "m", {"lin": nn.Linear(2, 2)}, {"version": 2})
    save_model_dir(parent / "f", {"lin": nn.Linear(2, 2)}, {"version": 3})
    assert not (parent / "m").is_symlink() and load_model_dir(parent / "m").meta == {"version": 2}
    assert load_model_dir(parent / "f").meta == {"version": 3}
    assert load_model_dir(elsewhere).meta == {"version": 1}
    assert sorted(p.name for p in parent.iterdir()) == ["f", "m"]


def test_a_saved_model_dir_is_flushed_to_disk_before_it_is_renamed_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpoints fsync every file before their rename and the folder after (xfer.core.atomic);
    save_model_dir, which writes every stage's exported model, fsynced nothing: after a power cut its
    folder could hold an empty model.safetensors beside a stage.json that says it is complete."""
    import xfer.core.atomic

    synced: list[tuple[str, str]] = []
    real_file, real_dir = xfer.core.atomic.fsync_file, xfer.core.atomic.fsync_dir

    def file(path: Path) -> None:
        synced.append(("file", Path(path).name))
        real_file(path)

    def folder(path: Path) -> None:
        synced.append(("dir", Path(path).name))
        real_dir(path)

    monkeypatch.setattr(modelio, "fsync_file", file, raising=False)
    monkeypatch.setattr(modelio, "fsync_dir", folder, raising=False)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n")
    renamed: list[int] = []
    real_swap = modelio._swap_into_place
    monkeypatch.setattr(modelio, "_swap_into_place", lambda a, b: (renamed.append(len(synced)), real_swap(a, b)))
    save_model_dir(tmp_path / "out" / "m", {"lin": nn.Linear(2, 2)}, {"v": 1}, files=[vocab])
    before = synced[: renamed[0]]
    assert {("file", "model.safetensors"), ("file", "xfer_model.json"), ("file", "vocab.txt")} <= set(before)
    assert ("dir", "out") in synced[renamed[0] :], "the rename itself must be made durable"


# --- Hub ids ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["runs/exp--2", "data/très", "models/électra", "a/model.git", "owner-/name", "a/" + "x" * 97, "a/b\n"]
)
def test_paths_the_hub_refuses_as_ids_are_not_taken_for_hub_ids(text: str) -> None:
    """`looks_like_hub_id` took `\\w` for ASCII (it matches any Unicode letter) and let `--` and
    `.git` through, all refused by the Hub (`huggingface_hub.utils.validate_repo_id`): a missing
    local folder such as `runs/exp--2` was reported as a Hub id to `hf download`."""
    assert not hub.looks_like_hub_id(text)


@pytest.mark.parametrize(
    "text", ["google/electra-small-discriminator", "bert-base-uncased/x", "A1/B.2", "org_1/m_", "a/" + "x" * 96]
)
def test_real_hub_ids_still_look_like_hub_ids(text: str) -> None:
    assert hub.looks_like_hub_id(text)


def test_a_missing_folder_that_cannot_be_a_hub_id_gets_no_download_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    recipe = write_recipe(
        tmp_path,
        """
stages:
  tune:
    kind: transformer.finetune
    init: runs/exp--2
    max_length: 32
    tasks: [{name: toy/agreement, train_size: 16, dev_size: 8}]
    train: {steps: 1, batch_size: 8}
""",
    )
    assert cli.main(["validate", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "stages.tune.init: path not found" in err and "runs/exp--2" in err
    assert "hf download" not in err and "Hugging Face Hub id" not in err


# --- HF import: config.json values --------------------------------------------------------------


@pytest.mark.parametrize("value", ["0.1x", [0.1], True, -0.5, 1.5])
def test_a_classifier_dropout_hf_would_refuse_is_a_checkpoint_error_naming_config_json(
    tmp_path: Path, value: Any
) -> None:
    """`float(config["classifier_dropout"])` was a bare ValueError/TypeError out of `load_hf` (so out
    of `read_encoder`, for any stage with such an `init:`) for "0.1x" or a list, and took `true` as
    1.0 and -0.5 or 1.5 as they were, which transformers' `nn.Dropout` refuses."""
    import json

    import torch

    from xfer.transformer.encoder import Encoder
    from xfer.transformer.heads import SequenceHead
    from xfer.transformer.hf import export_hf, load_hf
    from xfer.transformer.modelio import read_encoder
    from xfer.transformer.presets import preset

    torch.manual_seed(0)
    encoder = Encoder(preset("tiny", vocab_size=50, max_position_embeddings=16))
    folder = export_hf(tmp_path / "hf", encoder, head=SequenceHead(encoder.config.hidden_size, 2, pooler="gelu"))
    config = json.loads((folder / "config.json").read_text())
    assert load_hf(folder)[2].config["dropout"] == config["classifier_dropout"]
    config["classifier_dropout"] = value
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"config\.json: classifier_dropout must be null or a number in \[0, 1\)"):
        load_hf(folder)
    with pytest.raises(CheckpointError, match="classifier_dropout"):
        read_encoder(folder)


@pytest.mark.parametrize("variable", ["HF_HOME", "HF_HUB_CACHE"])
def test_the_hub_cache_location_expands_home_and_variables_as_huggingface_hub_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """huggingface_hub expands `~` and `$VAR` in HF_HOME / HF_HUB_CACHE; xfer took them literally,
    so with `HF_HOME=~/hf` (from a .env file or a service unit, where no shell expands it) every
    cached model was reported missing and `hf download` advised, which put it where xfer never looked."""
    for name in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XFER_TEST_ROOT", str(tmp_path / "root"))
    monkeypatch.setenv(variable, "~/hf" if variable == "HF_HOME" else "$XFER_TEST_ROOT/cache")
    expected = tmp_path / "hf" / "hub" if variable == "HF_HOME" else tmp_path / "root" / "cache"
    assert Path(hub.hub_cache()) == expected


# --- tokenizer folders ---------------------------------------------------------------------------


def _snapshot_of(folder: Path, root: Path) -> Path:
    """`folder`'s files moved into `root/blobs` and linked from `root/snapshots/abc` (the layout of
    a Hugging Face cache snapshot)."""
    import shutil

    blobs, snapshot = root / "blobs", root / "snapshots" / "abc"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for file in sorted(folder.iterdir()):
        shutil.move(str(file), blobs / file.name)
        (snapshot / file.name).symlink_to(Path("../../blobs") / file.name)
    return snapshot


@pytest.mark.parametrize("gone", [("tokenizer.json", "tokenizer_config.json"), ("tokenizer_config.json",)])
def test_a_tokenizer_file_that_is_a_dangling_link_is_an_error_not_a_silent_fallback(
    tmp_path: Path, gone: tuple[str, ...]
) -> None:
    """A snapshot whose tokenizer.json / tokenizer_config.json blobs are gone loaded from vocab.txt
    alone with the casing guessed: an uncased vocabulary that keeps accents (`strip_accents: false`)
    then stripped them, and "café" became [UNK], without a word."""
    from xfer.core.errors import DataError
    from xfer.transformer.tokenization import WordPieceTokenizer

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "café", "the", "##s"]
    tokenizer = WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(tokens)}, lowercase=True)
    tokenizer.save_hf(tmp_path / "tok", 16)
    (tmp_path / "tok" / "tokenizer_config.json").write_text('{"do_lower_case": true, "strip_accents": false}\n')
    snapshot = _snapshot_of(tmp_path / "tok", tmp_path / "cache")
    assert WordPieceTokenizer.from_dir(snapshot).tokenize("Café") == ["café"]
    for name in gone:
        (tmp_path / "cache" / "blobs" / name).unlink()
    with pytest.raises(DataError, match=rf"{gone[0]}: dangling symlink .*fetch the tokenizer again"):
        WordPieceTokenizer.from_dir(snapshot)


def test_a_tokenizer_folder_whose_every_file_is_a_dangling_link_says_so(tmp_path: Path) -> None:
    """It said "no tokenizer.json or vocab.txt in this directory", though both are listed there.
    Saving a tokenizer into the folder writes every file again, tokenizer_config.json's included."""
    from xfer.core.errors import DataError
    from xfer.transformer.tokenization import WordPieceTokenizer

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the"]
    tokenizer = WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(tokens)})
    tokenizer.save_hf(tmp_path / "tok", 16)
    snapshot = _snapshot_of(tmp_path / "tok", tmp_path / "cache")
    for blob in (tmp_path / "cache" / "blobs").iterdir():
        blob.unlink()
    with pytest.raises(DataError, match="dangling symlink"):
        WordPieceTokenizer.from_dir(snapshot)
    tokenizer.save(snapshot)
    assert all(p.exists() for p in snapshot.iterdir())
    assert WordPieceTokenizer.from_dir(snapshot).tokenize("The") == ["the"]

"""`electra.pretrain`'s pre-flight and diagnostics, as a careless or hostile user meets them, continued:
an `init_generator:` that is a file inside a checkpoint, or a folder that holds no checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import PreflightError, check_data
from xfer.testing import make_host, write_recipe

from .test_stage_hostile2 import LINES, checkpoint, vocab  # noqa: F401  (vocab: a fixture)


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def host():
    return make_host(autoload=True)


def generator_checkpoint(vocab: Path, folder: Path) -> Path:  # noqa: F811
    """A random xfer-layout generator for `checkpoint`'s 64-wide discriminator at the default size 1/4:
    hidden 16, 1 head, FFN 32, the same embeddings (the pre-flight checks its shape as the stage does)."""
    from xfer.transformer.encoder import Encoder, EncoderConfig
    from xfer.transformer.modelio import save_model_dir
    from xfer.transformer.tokenization import WordPieceTokenizer

    config = EncoderConfig(
        vocab_size=80, embedding_size=32, hidden_size=16, num_layers=1, num_heads=1, intermediate_size=32
    )
    save_model_dir(folder, {"encoder": Encoder(config)})
    WordPieceTokenizer.from_dir(vocab).save(folder)
    return folder


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("weights-file", r"init_generator: .*model\.safetensors"),
        ("empty-folder", r"init_generator: .*nothing is neither an xfer model directory"),
    ],
)
def test_validate_data_reports_an_init_generator_that_is_no_checkpoint(
    vocab: Path,  # noqa: F811
    tmp_path: Path,
    given: str,
    message: str,
) -> None:
    """`init_generator: gen/model.safetensors` (a file inside the checkpoint), a folder with no checkpoint
    in it, or a path that does not exist: `xfer validate --data` said ok (the form check skipped anything
    but a folder, the vocabulary and size checks read nothing there), and the stage refused it only when it
    read it, after the stages before it had trained. The pre-flight runs `init:`'s format check on it."""
    init = checkpoint(vocab, tmp_path / "init", "xfer")
    generator = generator_checkpoint(vocab, tmp_path / "generator")
    (tmp_path / "nothing").mkdir()
    path = {
        "weights-file": generator / "model.safetensors",
        "empty-folder": tmp_path / "nothing",
    }[given]
    text = f"""
stages:
  fit:
    kind: electra.pretrain
    corpus: {{files: {tmp_path / "corpus.txt"}}}
    init: {init}
    init_generator: {path}
    max_length: 32
    train: {{steps: 8, batch_size: 8, warmup_steps: 2}}
"""
    (tmp_path / "corpus.txt").write_text("\n".join(LINES) + "\n")
    recipe = load_recipe(write_recipe(tmp_path, text), host=host())
    with pytest.raises(PreflightError, match=message) as caught:
        check_data(recipe, host())
    assert len(caught.value.diagnostics) == 1, caught.value
    good = load_recipe(write_recipe(tmp_path, text.replace(str(path), str(generator))), host=host())
    check_data(good, host())


def test_validate_data_reports_an_init_generator_with_damaged_weights(vocab: Path, tmp_path: Path) -> None:  # noqa: F811
    """An `init_generator:` checkpoint whose model.safetensors was cut short (a copy interrupted, a full
    disk): `init:`'s weights are opened by the pre-flight (headers only), the generator's were not, and the
    stage stopped on them once the stages before it had run. Both are checked alike now."""
    init = checkpoint(vocab, tmp_path / "init", "xfer")
    generator = generator_checkpoint(vocab, tmp_path / "generator")
    text = f"""
stages:
  fit:
    kind: electra.pretrain
    corpus: {{files: {tmp_path / "corpus.txt"}}}
    init: {init}
    init_generator: {generator}
    max_length: 32
    train: {{steps: 8, batch_size: 8, warmup_steps: 2}}
"""
    (tmp_path / "corpus.txt").write_text("\n".join(LINES) + "\n")
    recipe = load_recipe(write_recipe(tmp_path, text), host=host())
    check_data(recipe, host())  # intact
    weights = generator / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(PreflightError, match=r"generator/model\.safetensors: cannot read") as caught:
        check_data(recipe, host())
    assert len(caught.value.diagnostics) == 1, caught.value

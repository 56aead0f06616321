"""The pre-flight of an `init:` checkpoint and its tokenizer sees what the stage will load: the
tokenizer's added tokens (tokenizer.json), and a folder without any weights file. Both were found
only when the stage loaded them, after every earlier stage of the recipe had run."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import CheckpointError, DataError
from xfer.transformer.encoder import Encoder, EncoderConfig
from xfer.transformer.finetune_config import checkpoint_problems, read_vocabulary, weights_problem
from xfer.transformer.hf import export_hf
from xfer.transformer.tokenization import WordPieceTokenizer

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat"]


def _tokenizer_with_added_tokens(folder: Path, *, vocab_txt: bool) -> Path:
    """A tokenizer of 8 WordPiece tokens and 2 added ones (entity markers, as users add them)."""
    tokenizer = WordPieceTokenizer.from_vocab({token: i for i, token in enumerate(TOKENS)})
    tokenizer._tokenizer.add_tokens(["<e1>", "<e2>"])
    tokenizer.save(folder)
    if not vocab_txt:  # as transformers 5 saves a fast tokenizer
        (folder / "vocab.txt").unlink()
    return folder


@pytest.mark.parametrize("vocab_txt", [False, True], ids=["tokenizer.json only", "with vocab.txt"])
def test_added_tokens_count_as_the_tokenizer_loads_them(tmp_path: Path, vocab_txt: bool) -> None:
    folder = _tokenizer_with_added_tokens(tmp_path / "tok", vocab_txt=vocab_txt)
    loaded = WordPieceTokenizer.from_dir(folder)
    file, tokens = read_vocabulary(folder)
    assert len(tokens) == loaded.vocab_size == 10
    assert tokens[-2:] == ["<e1>", "<e2>"] and tokens[:8] == TOKENS
    assert file.name == ("vocab.txt" if vocab_txt else "tokenizer.json")


def _checkpoint(folder: Path, vocab_size: int) -> Path:
    config = EncoderConfig(
        vocab_size=vocab_size,
        embedding_size=16,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("".join(f"{token}\n" for token in TOKENS))
    export_hf(folder, Encoder(config), vocab_file=folder / "vocab.txt")
    return folder


def test_a_tokenizer_with_more_ids_than_embeddings_is_refused_before_training(tmp_path: Path) -> None:
    """8 embeddings, a tokenizer of 8 + 2 added tokens: ids 8 and 9 have no embedding."""
    init = _checkpoint(tmp_path / "ckpt", vocab_size=8)
    tokenizer = _tokenizer_with_added_tokens(tmp_path / "tok", vocab_txt=False)
    problems = checkpoint_problems(tokenizer, init, {}, 32, random_init=False)
    assert any("8 token embeddings but the tokenizer" in str(p) and "has 10 tokens" in str(p) for p in problems), [
        str(p) for p in problems
    ]
    assert (
        checkpoint_problems(tokenizer, _checkpoint(tmp_path / "wide", vocab_size=10), {}, 32, random_init=False) == []
    )


def test_a_checkpoint_without_weights_is_refused_before_training(tmp_path: Path) -> None:
    """A Hub snapshot with config and tokenizer only (the weights never downloaded), or a copy that
    left them behind."""
    init = _checkpoint(tmp_path / "ckpt", vocab_size=8)
    assert weights_problem(init) is None
    (init / "model.safetensors").unlink()
    problem = weights_problem(init)
    assert isinstance(problem, CheckpointError)
    assert (
        str(problem)
        == f"{init}: no weights file (model.safetensors, model.safetensors.index.json or pytorch_model.bin)"
    )
    assert any(str(p) == str(problem) for p in checkpoint_problems(None, init, {}, 32, random_init=False))
    (init / "pytorch_model.bin").write_bytes(
        b""
    )  # a legacy .bin is not read by the pre-flight (reading it = loading it)
    assert weights_problem(init) is None


def test_a_damaged_tokenizer_json_beside_a_good_vocab_txt_is_refused_before_training(tmp_path: Path) -> None:
    """The checks read vocab.txt, the tokenizer prefers tokenizer.json: a damaged one passed the
    pre-flight and stopped the stage (h102's lead)."""
    folder = _tokenizer_with_added_tokens(tmp_path / "tok", vocab_txt=True)
    assert checkpoint_problems(folder, None, {}, 32, random_init=True) == []
    (folder / "tokenizer.json").write_text("{not json")
    file, tokens = read_vocabulary(folder)  # the checks still read what they can
    assert file.name == "vocab.txt" and tokens == TOKENS
    problems = checkpoint_problems(folder, None, {}, 32, random_init=True)
    assert [str(p) for p in problems] == [
        f"{folder / 'tokenizer.json'}: not a valid tokenizer.json: key must be a string at line 1 column 2"
    ]
    with pytest.raises(DataError, match=r"not a valid tokenizer\.json"):
        WordPieceTokenizer.from_dir(folder)

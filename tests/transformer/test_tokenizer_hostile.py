"""Hostile tokenizer files and `vocab` settings: each must fail at once with a one-line error
naming the file (and line), not load into a tokenizer that breaks later or silently maps words
to `[UNK]`."""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from xfer.core.errors import DataError, RecipeError, UserError
from xfer.testing import write_recipe
from xfer.transformer import vocab_cli
from xfer.transformer.tokenization import SPECIAL_TOKENS, WordPieceTokenizer, train_wordpiece

VOCAB = {t: i for i, t in enumerate([*SPECIAL_TOKENS, "hello", "world", "##s"])}


def _vocab_txt(path: Path, tokens: list[str]) -> Path:
    path.write_text("\n".join([*SPECIAL_TOKENS, *tokens]) + "\n", encoding="utf-8")
    return path


def _wordpiece(vocab: dict[str, int], **options: str) -> Tokenizer:
    """A WordPiece tokenizer.json pipeline that is fine but for what `options` change."""
    tokenizer = Tokenizer(models.WordPiece(vocab, **{"unk_token": "[UNK]", **options}))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


def _tokenizer_json(path: Path, tokenizer: Tokenizer) -> Path:
    path.write_text(tokenizer.to_str(), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("token", "line"),
    [("hello ", 6), (" world", 7), ("hello\t17", 6), ("a b", 7)],
)
def test_vocab_txt_token_with_whitespace_is_an_error(tmp_path: Path, token: str, line: int) -> None:
    """A token with a space or tab can never come out of the BERT pre-tokenizer: "hello " (an
    editor's trailing space) made every "hello" in the text [UNK] without a word of warning."""
    tokens = ["hello", "world"]
    tokens[line - 6] = token
    path = _vocab_txt(tmp_path / "vocab.txt", tokens)
    with pytest.raises(DataError, match=rf"vocab\.txt:{line}: token {re.escape(repr(token))} contains whitespace"):
        WordPieceTokenizer.from_file(path)


def test_vocab_txt_empty_line_and_crlf_still_load(tmp_path: Path) -> None:
    """Not whitespace damage: CRLF endings are line ends, and an empty line is an (unused) token
    at its id, as in Google's BERT and HF, so later ids do not shift."""
    path = tmp_path / "vocab.txt"
    path.write_bytes("\r\n".join([*SPECIAL_TOKENS, "hello", "", "world"]).encode() + b"\r\n")
    tokenizer = WordPieceTokenizer.from_file(path)
    assert tokenizer.vocab["world"] == 7 and tokenizer.tokenize("Hello world") == ["hello", "world"]


def test_tokenizer_json_with_another_unknown_token_is_an_error(tmp_path: Path) -> None:
    """`unk_token: "<unk>"` loaded, then `tokenizers` raised a bare Exception ("Missing [UNK]
    token") at the first unknown word, in the middle of a run."""
    path = _tokenizer_json(tmp_path / "tokenizer.json", _wordpiece(VOCAB, unk_token="<unk>"))
    with pytest.raises(DataError, match=r"tokenizer\.json: WordPiece unknown token is '<unk>', expected '\[UNK\]'"):
        WordPieceTokenizer.from_file(path)


def test_tokenizer_json_that_cannot_be_saved_fails_when_loaded(tmp_path: Path) -> None:
    """Every stage saves its tokenizer (vocab.txt included) when it exports, after training: a
    vocabulary with an id gap loaded fine and then failed with a bare ValueError at the very end."""
    gap = _wordpiece({**VOCAB, "far": 100})
    with pytest.raises(DataError, match=r"gap\.json: vocabulary ids are not contiguous from 0 \(no token has id 8\)"):
        WordPieceTokenizer.from_file(_tokenizer_json(tmp_path / "gap.json", gap))
    # [MASK] added on top of a vocabulary without it: tokenizers gives it the id "##s" already has
    shared = _wordpiece({t: i for t, i in VOCAB.items() if t != "[MASK]"})
    shared.add_special_tokens(["[MASK]"])
    with pytest.raises(DataError, match=r"shared\.json: .*\(two tokens have id 7\)"):
        WordPieceTokenizer.from_file(_tokenizer_json(tmp_path / "shared.json", shared))
    with pytest.raises(DataError, match=r"<vocab>: .*\(no token has id 5\)"):
        WordPieceTokenizer.from_vocab({**{t: i for i, t in enumerate(SPECIAL_TOKENS)}, "late": 6})


def test_absurd_vocab_size_is_an_error(tmp_path: Path) -> None:
    """`--size 1000000000` (a typo) aborted the process: tokenizers' trainer reserved 70 GB up front
    and the Rust allocator killed Python; `--size 1e22`-sized values raised a bare OverflowError."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello world\n", encoding="utf-8")
    with pytest.raises(ValueError, match="vocab_size=1000000000 is more than 4000000"):
        train_wordpiece([corpus], 1_000_000_000)
    args = argparse.Namespace(
        vocab_command="train", files=[str(corpus)], size=10**22, out=tmp_path / "out", cased=False, min_frequency=2
    )
    with pytest.raises(UserError, match="is more than 4000000"):
        vocab_cli.run(args)


def test_absurd_vocab_size_is_a_recipe_error(tmp_path: Path) -> None:
    from xfer.core.recipes.recipe import load_recipe

    (tmp_path / "a.txt").write_text("hello world\n", encoding="utf-8")
    text = "name: t\nstages:\n  vocab: {kind: transformer.vocab, files: a.txt, size: 1000000000}\n"
    with pytest.raises(RecipeError, match=r"stages\.vocab\.size: must be at most 4,000,000, got"):
        load_recipe(write_recipe(tmp_path, text))


def test_cli_out_that_cannot_be_a_directory(tmp_path: Path) -> None:
    """`--out` naming a file: a FileExistsError traceback, and only after the whole training."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello world\n", encoding="utf-8")
    for out, message in ((corpus, "is a file, not a directory"), (corpus / "sub", "cannot be created")):
        args = argparse.Namespace(
            vocab_command="train", files=[str(corpus)], size=50, out=out, cased=False, min_frequency=2
        )
        with pytest.raises(UserError, match=rf"--out .*{message}"):
            vocab_cli.run(args)


def test_tokenizer_config_normalisation_options_apply_as_in_transformers(tmp_path: Path) -> None:
    """Only `do_lower_case` was read: `{"do_lower_case": true, "strip_accents": false}` (models
    for languages whose accents matter) still stripped accents, so "café" became [UNK]-prone
    "cafe"; and `do_lower_case: false` over an uncased tokenizer.json kept stripping accents."""
    accented = tmp_path / "accented"
    accented.mkdir()
    _vocab_txt(accented / "vocab.txt", ["café", "naïve", "cafe", "##東京"])
    config = accented / "tokenizer_config.json"
    config.write_text('{"do_lower_case": true, "strip_accents": false}', encoding="utf-8")
    assert WordPieceTokenizer.from_dir(accented).tokenize("Café NAÏVE") == ["café", "naïve"]
    config.write_text('{"do_lower_case": true, "tokenize_chinese_chars": false}', encoding="utf-8")
    assert WordPieceTokenizer.from_dir(accented).tokenize("café東京") == ["cafe", "##東京"]

    uncased = tmp_path / "uncased"
    tokens = [*SPECIAL_TOKENS, "Café", "café", "Cafe", "cafe"]
    WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(tokens)}, lowercase=True).save(uncased)
    (uncased / "tokenizer_config.json").write_text('{"do_lower_case": false}', encoding="utf-8")
    assert WordPieceTokenizer.from_dir(uncased).tokenize("Café") == ["Café"]


def test_save_hf_records_accent_stripping(tmp_path: Path) -> None:
    """transformers resets `strip_accents` to "follow the casing" unless tokenizer_config.json names it."""
    keeps_accents = WordPieceTokenizer.from_vocab({t: i for i, t in enumerate([*SPECIAL_TOKENS, "café"])})
    keeps_accents.backend.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=False)
    keeps_accents.save_hf(tmp_path, model_max_length=16)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["do_lower_case"] is True and config["strip_accents"] is False
    assert config["tokenize_chinese_chars"] is True
    assert WordPieceTokenizer.from_dir(tmp_path).tokenize("CAFÉ") == ["café"]


def test_tokenizer_json_without_pre_tokenizer_is_an_error(tmp_path: Path) -> None:
    """WordPiece over whole texts: "hello world" came out as one [UNK], for every input, silently."""
    bare = Tokenizer(models.WordPiece(VOCAB, unk_token="[UNK]"))
    with pytest.raises(DataError, match=r"bare\.json: no pre-tokenizer"):
        WordPieceTokenizer.from_file(_tokenizer_json(tmp_path / "bare.json", bare))


def test_tokenizer_folder_given_as_a_file(tmp_path: Path) -> None:
    """`tokenizer: tok/vocab.txt` said "tok/vocab.txt: no tokenizer.json or vocab.txt in this directory"."""
    vocab = _vocab_txt(tmp_path / "vocab.txt", ["hello"])
    with pytest.raises(
        DataError, match=rf"vocab\.txt: is a file; give the folder that holds it \({re.escape(str(tmp_path))}\)"
    ):
        WordPieceTokenizer.from_dir(vocab)


def test_cli_refuses_to_train_on_its_own_output(tmp_path: Path) -> None:
    """`xfer vocab train 'corpus/*' --out corpus` run again trained on the last run's vocab.txt
    and tokenizer.json as well: the same command gave a different vocabulary every time."""
    (tmp_path / "a.txt").write_text("hello world\nthe worlds\n", encoding="utf-8")
    args = argparse.Namespace(
        vocab_command="train", files=[str(tmp_path / "*")], size=50, out=tmp_path, cased=False, min_frequency=1
    )
    assert vocab_cli.run(args) == 0
    with pytest.raises(UserError, match=r"tokenizer\.json is what --out .* writes"):
        vocab_cli.run(args)
    args.files = [str(tmp_path / "*.txt")]
    with pytest.raises(UserError, match=r"vocab\.txt is what --out .* writes"):
        vocab_cli.run(args)


def test_compressed_training_file_says_so(tmp_path: Path) -> None:
    """A `corpus.txt.gz` got "not valid UTF-8 (invalid start byte)", where every other text reader
    names the byte, its column and the compression."""
    packed = tmp_path / "corpus.txt.gz"
    packed.write_bytes(gzip.compress(b"hello world\n"))
    with pytest.raises(DataError, match=r"corpus\.txt\.gz:1: not valid UTF-8 \(byte 0x8b at column 2\): .*gzip"):
        train_wordpiece([packed], 50)


def test_tokenizer_config_with_a_non_boolean_option_is_an_error(tmp_path: Path) -> None:
    """`"do_lower_case": "false"` was ignored without a word (and is truthy in Python)."""
    _vocab_txt(tmp_path / "vocab.txt", ["hello"])
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": "false"}', encoding="utf-8")
    with pytest.raises(
        DataError, match=r"tokenizer_config\.json: do_lower_case: must be true, false or null, got 'false'"
    ):
        WordPieceTokenizer.from_dir(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": false, "strip_accents": null}', encoding="utf-8")
    assert not WordPieceTokenizer.from_dir(tmp_path).lowercase


def test_folder_whose_vocab_txt_and_tokenizer_json_disagree(tmp_path: Path) -> None:
    """A domain word written over an `[unusedN]` line of vocab.txt: tokenizer.json, loaded first,
    still had the old token, so the edit was ignored without a word (while the recipe pre-flight
    compared the checkpoint against the edited vocab.txt)."""
    tokens = [*SPECIAL_TOKENS, "[unused0]", "hello", "world"]
    WordPieceTokenizer.from_vocab({t: i for i, t in enumerate(tokens)}).save(tmp_path)
    edited = (tmp_path / "vocab.txt").read_text(encoding="utf-8").replace("[unused0]", "covid")
    (tmp_path / "vocab.txt").write_text(edited, encoding="utf-8")
    with pytest.raises(DataError, match=r"vocab\.txt:6: token 'covid', but tokenizer\.json has '\[unused0\]' at id 5"):
        WordPieceTokenizer.from_dir(tmp_path)
    # HF's added tokens come after vocab.txt's in tokenizer.json only: that folder is fine
    (tmp_path / "vocab.txt").write_text("\n".join(tokens[:-1]) + "\n", encoding="utf-8")
    assert WordPieceTokenizer.from_dir(tmp_path).vocab["world"] == 7

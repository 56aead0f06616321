"""More hostile inputs for WordPiece vocabulary training and tokenization: each must give the right
vocabulary or ids, or fail at once with a one-line error naming the file (and line), never train
on silently altered data or lose tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xfer.core.errors import DataError, RecipeError, UserError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import check_data
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer import vocab_cli
from xfer.transformer.tokenization import SPECIAL_TOKENS, WordPieceTokenizer, train_wordpiece


def _host():
    return make_host(autoload=True)


def test_vocab_stage_refuses_a_file_listed_twice(tmp_path: Path) -> None:
    """`files: [data/*.txt, data/a.txt]` counted a.txt twice in the vocabulary statistics without a
    word; the stage (and the pre-flight of `xfer run` / `xfer validate --data`) now refuses it, as
    the pre-training and scoring stages do."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("alpha beta gamma\nalpha beta\n", encoding="utf-8")
    (tmp_path / "data" / "b.txt").write_text("delta epsilon\n", encoding="utf-8")
    recipe = write_recipe(
        tmp_path,
        'stages:\n  vocab: {kind: transformer.vocab, files: ["data/*.txt", "data/a.txt"], size: 60, min_frequency: 1}\n',
    )
    with pytest.raises(RecipeError, match=r"a\.txt: listed twice in files"):
        check_data(load_recipe(recipe, host=_host()), _host())
    with pytest.raises(DataError, match=r"a\.txt: listed twice in files"):
        run_recipe_file(recipe, tmp_path / "run", _host(), preflight=False)
    assert not (tmp_path / "run" / "vocab" / "outputs" / "tokenizer" / "vocab.txt").exists()
    fine = write_recipe(
        tmp_path, 'stages:\n  vocab: {kind: transformer.vocab, files: ["data/*.txt"], size: 60, min_frequency: 1}\n'
    )
    check_data(load_recipe(fine, host=_host()), _host())
    run_recipe_file(fine, tmp_path / "run2", _host())
    assert (tmp_path / "run2" / "vocab" / "outputs" / "tokenizer" / "vocab.txt").is_file()


def test_training_file_with_a_nul_byte_is_an_error(tmp_path: Path) -> None:
    """A NUL byte was deleted by the BERT normaliser without a space: "Re\\x00eve" was counted and
    learned as "reeve", and the stage completed on a corpus that `electra.pretrain` then refused."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"Reeve walks home\nRe\x00eve walks\n")
    with pytest.raises(DataError, match=r"corpus\.txt:2: NUL byte at column 3"):
        train_wordpiece([corpus], 60, min_frequency=1)
    corpus.write_bytes(b"Reeve walks home\nRe eve walks\n")
    assert "reeve" in train_wordpiece([corpus], 60, min_frequency=1).get_vocab()


def test_save_over_a_stale_tokenizer_config_loads_back_the_same(tmp_path: Path) -> None:
    """`save` promises that `from_dir` loads back the same tokenizer, but a `tokenizer_config.json`
    left in the folder by an earlier `save_hf` (an uncased export, `xfer vocab train --cased --out`
    into that folder) kept `do_lower_case: true`, which `from_dir` applies: the cased vocabulary
    then lower-cased its input and "Paris" became "paris" (or `[UNK]`) without a word."""
    tokens = [*SPECIAL_TOKENS, "Paris", "paris", "Café", "cafe", "##s"]
    vocab = {t: i for i, t in enumerate(tokens)}
    folder = tmp_path / "model"
    WordPieceTokenizer.from_vocab(vocab, lowercase=True).save_hf(folder, 128)
    cased = WordPieceTokenizer.from_vocab(vocab, lowercase=False)
    cased.save(folder)
    back = WordPieceTokenizer.from_dir(folder)
    assert back.tokenize("Paris Café") == cased.tokenize("Paris Café") == ["Paris", "Café"]
    assert back.lowercase is False
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["do_lower_case"] is False and config["model_max_length"] == 128  # other keys kept
    # a damaged config is replaced rather than left to break `from_dir`
    (folder / "tokenizer_config.json").write_text("{not json", encoding="utf-8")
    cased.save(folder)
    assert WordPieceTokenizer.from_dir(folder).tokenize("Paris Café") == ["Paris", "Café"]
    # a folder without one gets none (tokenizer.json says how to normalise)
    cased.save(tmp_path / "plain")
    assert not (tmp_path / "plain" / "tokenizer_config.json").exists()


def test_vocab_stage_refuses_a_broken_link_among_its_files(tmp_path: Path) -> None:
    """A glob matching a dangling symbolic link (a corpus shard moved away) trained on the other files
    only: the stage keeps only regular files, so that text was left out without a word."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("alpha beta gamma\nalpha beta\n", encoding="utf-8")
    (tmp_path / "data" / "b.txt").symlink_to(tmp_path / "moved" / "b.txt")
    recipe = write_recipe(
        tmp_path, 'stages:\n  vocab: {kind: transformer.vocab, files: ["data/*.txt"], size: 60, min_frequency: 1}\n'
    )
    with pytest.raises(RecipeError, match=r"b\.txt: broken symbolic link matched by files"):
        check_data(load_recipe(recipe, host=_host()), _host())
    with pytest.raises(DataError, match=r"b\.txt: broken symbolic link matched by files"):
        run_recipe_file(recipe, tmp_path / "run", _host(), preflight=False)


def test_cli_refuses_a_broken_link_among_its_files(tmp_path: Path) -> None:
    """`xfer vocab train 'data/*.txt'` left a dangling symbolic link out as "not a file": the
    vocabulary was trained on less text than the glob names, without a word."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("alpha beta\n", encoding="utf-8")
    (tmp_path / "data" / "b.txt").symlink_to(tmp_path / "moved" / "b.txt")
    with pytest.raises(UserError, match=r"data/\*\.txt: matches .*b\.txt, a broken symbolic link"):
        vocab_cli.expand_files([str(tmp_path / "data" / "*.txt")])
    (tmp_path / "data" / "b.txt").unlink()
    assert vocab_cli.expand_files([str(tmp_path / "data" / "*.txt")]) == [tmp_path / "data" / "a.txt"]


def test_saved_folder_with_an_added_token_holding_a_space_loads_back(tmp_path: Path) -> None:
    """A tokenizer.json with an added token such as "new york" (matched before pre-tokenization, so
    text does produce it) loaded and saved, but the saved folder then failed to load: its vocab.txt
    was checked against tokenizer.json with the stand-alone vocab.txt reader, which refuses tokens
    with whitespace ("no text can ever produce it"). Every stage saves its tokenizer for the next
    one, so the run failed after the training."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    backend = Tokenizer(models.WordPiece({t: i for i, t in enumerate([*SPECIAL_TOKENS, "hello"])}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.add_tokens(["new york"])
    (tmp_path / "tokenizer.json").write_text(backend.to_str(), encoding="utf-8")
    tokenizer = WordPieceTokenizer.from_file(tmp_path / "tokenizer.json")
    assert tokenizer.tokenize("hello new york") == ["hello", "new york"]
    back = WordPieceTokenizer.from_dir(tokenizer.save(tmp_path / "saved"))
    assert back.vocab == tokenizer.vocab and back.tokenize("hello new york") == ["hello", "new york"]
    # the two files must still agree line by line: trailing-space damage in vocab.txt is found
    lines = (tmp_path / "saved" / "vocab.txt").read_text(encoding="utf-8").split("\n")
    lines[5] += " "
    (tmp_path / "saved" / "vocab.txt").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(DataError, match=r"vocab\.txt:6: token 'hello ', but tokenizer\.json has 'hello' at id 5"):
        WordPieceTokenizer.from_dir(tmp_path / "saved")


def test_tokenizer_json_whose_unk_is_only_an_added_token_is_an_error(tmp_path: Path) -> None:
    """`[UNK]` among `added_tokens` but not in the WordPiece model's own vocabulary loaded (every
    special token has an id), then `tokenizers` raised a bare Exception ("Missing [UNK] token from
    the vocabulary") at the first unknown word, in the middle of a run."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokens = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]
    backend = Tokenizer(models.WordPiece({t: i for i, t in enumerate(tokens)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.add_special_tokens(["[UNK]"])
    path = tmp_path / "tokenizer.json"
    path.write_text(backend.to_str(), encoding="utf-8")
    with pytest.raises(DataError, match=r"tokenizer\.json: '\[UNK\]' is not in the WordPiece model's vocabulary"):
        WordPieceTokenizer.from_file(path)


def test_vocabulary_is_deterministic_for_characters_python_and_tokenizers_class_apart(tmp_path: Path) -> None:
    """The `##` forms of the alphabet are registered in code-point order before training, because
    `tokenizers`' trainer would add them in hash-map order. Python's tables decided which characters
    can continue a word, and they disagree with the Rust library: CJK Extension E (U+2B820..U+2B91F,
    not padded with spaces by the library) and punctuation newer than its Unicode tables (U+061D).
    Their `##` forms were then left to the trainer: another vocabulary in every process."""
    import random

    rng = random.Random(1)
    odd = [chr(0x2B820 + i) for i in range(30)] + ["\u061d"]
    lines = [
        " ".join("x" + rng.choice(odd) + rng.choice("abcdefg") + rng.choice(odd) for _ in range(10)) for _ in range(200)
    ]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    vocab = train_wordpiece([corpus], 400, min_frequency=2).get_vocab()
    continuation_ids = [vocab.get("##" + c) for c in sorted(odd)]
    assert None not in continuation_ids
    # pre-registered: one block in code-point order, right after the alphabet, before any merge
    assert continuation_ids == sorted(continuation_ids)
    assert max(continuation_ids) < min(i for t, i in vocab.items() if len(t.removeprefix("##")) > 1 and t[0] != "[")

"""Third round of hostile inputs for WordPiece vocabulary training and tokenization: each must give
the right vocabulary or ids, or fail at once with an error that names the real problem."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.testing import make_host, run_recipe_file, write_recipe
from xfer.transformer.tokenization import SPECIAL_TOKENS, WordPieceTokenizer, train_wordpiece


def test_extra_special_tokens_are_matched_whole_in_text(tmp_path: Path) -> None:
    """Extra special tokens got their ids but, the trained tokenizer being rebuilt with the five BERT
    ones only, "[E1]" in text became "[", "e", "##1", "]" (here four [UNK]s): no input could ever
    produce its id, unlike `tokenizers`' own training. They now survive save and load too."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog\n" * 20, encoding="utf-8")
    trained = WordPieceTokenizer(train_wordpiece([corpus], 200, special_tokens=(*SPECIAL_TOKENS, "[E1]", "<ent>")))
    assert trained.vocab["[E1]"] == 5 and trained.vocab["<ent>"] == 6
    assert trained.tokenize("the [E1] fox <ent> [MASK]") == ["the", "[E1]", "fox", "<ent>", "[MASK]"]
    ids = trained.encode_pair("the [E1] fox").input_ids
    assert ids == [trained.cls_id, trained.vocab["the"], 5, trained.vocab["fox"], trained.sep_id]
    back = WordPieceTokenizer.from_dir(trained.save(tmp_path / "tok"))
    assert back.tokenize("[E1] fox <ent>") == ["[E1]", "fox", "<ent>"]
    assert "[E1]" not in WordPieceTokenizer.train([corpus], 200).vocab  # the default adds nothing


def _vocab_recipe(tmp_path: Path, options: str) -> Path:
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "a.txt").write_text("alpha beta gamma\nalpha beta\ndelta\n", encoding="utf-8")
    return write_recipe(tmp_path, f'stages:\n  vocab: {{kind: transformer.vocab, files: ["data/*.txt"], {options}}}\n')


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("size: 5000, min_frequency: 2", r"fewer than size=5000: .*min_frequency=2"),
        ("size: 5000, min_frequency: 1", r"fewer than size=5000: every word of the files is already one token"),
        ("size: 6, min_frequency: 1", r"more than size=6: .*lower limit_alphabet"),
    ],
)
def test_vocab_stage_says_when_the_vocabulary_is_not_the_size_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture, options: str, message: str
) -> None:
    """The model's embedding table follows the trained vocabulary, not `size`; a vocabulary of a few
    dozen tokens for `size: 5000` (a small corpus, or `min_frequency` no pair reaches) or above a tiny
    `size` (the alphabet is always kept) was only a count in report.md, with no word that it was
    not the size asked for."""
    run = tmp_path / "run"
    run_recipe_file(_vocab_recipe(tmp_path, options), run, make_host(autoload=True))
    trained = WordPieceTokenizer.from_dir(run / "vocab" / "outputs" / "tokenizer")
    assert str(trained.vocab_size) in (run / "vocab" / "report.md").read_text(encoding="utf-8")
    err = capsys.readouterr().err
    assert f"the vocabulary has {trained.vocab_size} tokens" in err
    assert re.search(message, err), err
    assert "## Warning" in (run / "vocab" / "report.md").read_text(encoding="utf-8")


def test_vocab_stage_is_quiet_when_the_size_is_reached(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = tmp_path / "run"
    run_recipe_file(_vocab_recipe(tmp_path, "size: 30"), run, make_host(autoload=True))
    assert WordPieceTokenizer.from_dir(run / "vocab" / "outputs" / "tokenizer").vocab_size == 30
    assert "## Warning" not in (run / "vocab" / "report.md").read_text(encoding="utf-8")
    assert "the vocabulary has" not in capsys.readouterr().err


def test_missing_tokenizer_folder_is_named_as_missing(tmp_path: Path) -> None:
    """A mistyped folder said "no tokenizer.json or vocab.txt in this directory", as if it existed
    and had lost its files."""
    with pytest.raises(DataError, match=r"tokenizr: no such directory"):
        WordPieceTokenizer.from_dir(tmp_path / "tokenizr")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"empty: no tokenizer\.json or vocab\.txt in this directory"):
        WordPieceTokenizer.from_dir(tmp_path / "empty")

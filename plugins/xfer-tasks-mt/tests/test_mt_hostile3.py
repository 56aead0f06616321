"""Hostile-review regressions (3) for mt/parallel: BLEU tokenizers for unspaced scripts, files that are folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.tasks.mt.config import ParallelConfig
from xfer.tasks.mt.tasks import ParallelTextTask


@pytest.mark.parametrize(
    ("target_lang", "tokenize", "language"),
    [
        ("th", "13a", "Thai"),
        ("th-TH", "intl", "Thai"),
        ("lo", "none", "Lao"),
        ("km", "13a", "Khmer"),
        ("my", "13a", "Burmese"),
        ("tha", "13a", "Thai"),
        ("cmn", "13a", "Chinese"),
        ("yue", "intl", "Chinese"),
        ("jpn", "13a", "Japanese"),
    ],
)
def test_a_space_splitting_bleu_tokenizer_is_refused_for_every_unspaced_script(target_lang, tokenize, language):
    """Thai, Lao, Khmer and Burmese are written without spaces between words, like Chinese and
    Japanese, but only `zh`/`ja` were checked: a Thai target with the default 13a scored a
    translation one word off its reference 0.0 BLEU (char: 86.5) without a word. ISO 639-3 codes
    (`cmn`, `jpn`, `tha`, as Tatoeba names them) slipped past the check too."""
    with pytest.raises(ValueError, match=rf"bleu_tokenize '{tokenize}' splits words at spaces, and {language} "):
        ParallelConfig(target_lang=target_lang, bleu_tokenize=tokenize)
    ParallelConfig(target_lang=target_lang, bleu_tokenize="char")
    ParallelConfig(source_lang=target_lang, target_lang="en")  # an unspaced source is no problem


@pytest.mark.parametrize(("target_lang", "use"), [("ja", "'char'"), ("th", "'char'")])
def test_the_zh_tokenizer_is_refused_for_kana_and_thai(target_lang, use):
    """sacrebleu's `zh` splits Chinese characters only: a Japanese sentence in kana or a Thai one
    stayed one "word" (a kana translation one word off: 0.0 BLEU with zh, 79.3 with char)."""
    with pytest.raises(
        ValueError, match=rf"bleu_tokenize 'zh' splits only Chinese characters.*set bleu_tokenize to {use}"
    ):
        ParallelConfig(target_lang=target_lang, bleu_tokenize="zh")
    ParallelConfig(target_lang="zh", bleu_tokenize="zh")
    ParallelConfig(target_lang="zh-TW", bleu_tokenize="char")


def test_thai_bleu_with_char_is_sacrebleus_char_bleu(tmp_path):
    from sacrebleu.metrics import BLEU

    refs = ["สุนัขวิ่งในสวนสาธารณะ", "แมวสองตัวนอนอยู่บนโซฟา"]
    hyps = ["สุนัขเดินในสวนสาธารณะ", "แมวสองตัวนอนอยู่บนโซฟา"]
    (tmp_path / "dev.en").write_text("A dog runs in the park.\nTwo cats sleep on the sofa.\n", encoding="utf-8")
    (tmp_path / "dev.th").write_text("\n".join(refs) + "\n", encoding="utf-8")
    task = ParallelTextTask("mt/parallel", ParallelConfig(data_dir=tmp_path, target_lang="th", bleu_tokenize="char"))
    examples = task.examples("dev")
    score = task.evaluate(examples, {e.id: h for e, h in zip(examples, hyps, strict=True)})["bleu"]
    assert score == pytest.approx(BLEU(tokenize="char").corpus_score(hyps, [refs]).score) and score > 80
    assert BLEU(tokenize="13a").corpus_score(hyps, [refs]).score == 0.0  # what the default gave


def _task(folder: Path) -> ParallelTextTask:
    return ParallelTextTask("mt/parallel", ParallelConfig(data_dir=folder))


def test_a_split_file_that_is_a_folder_is_named_as_a_folder(tmp_path):
    """`dev.en` a folder (a corpus unpacked into folders of its files' names) was reported as
    "no dev file (looked for dev.en in ...)": the user was sent looking for a file that is there."""
    (tmp_path / "dev.en").mkdir()
    (tmp_path / "dev.de").write_text("Ein Hund\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"dev\.en: is a directory, expected a file \(the dev sentences") as caught:
        _task(tmp_path).examples("dev")
    assert caught.value.path == str(tmp_path / "dev.en")
    (tmp_path / "dev.en").rmdir()
    with pytest.raises(DataError, match=r"dev\.en: no dev file \(looked for dev\.en in "):  # missing: as before
        _task(tmp_path).examples("dev")


def test_a_data_dir_that_is_a_file_is_named(tmp_path):
    """`data_dir: mt/train.en` (the file instead of its folder) said "no dev file (looked for dev.en
    in mt/train.en)", not that data_dir is a file."""
    (tmp_path / "train.en").write_text("A dog\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.en: is a file, expected the folder of the parallel files"):
        _task(tmp_path / "train.en").examples("dev")


def test_evaluate_refuses_predictions_for_sentences_the_split_has_not(tmp_path):
    """Outputs for an older copy of the dev file, one line longer (a line deleted since): every
    pair after the deleted line is shifted by one, and `evaluate` scored the file's first lines
    against them without a word, while `write_predictions` refused the same predictions."""
    (tmp_path / "dev.en").write_text("A dog runs in the park\nA cat sleeps on the sofa\n", encoding="utf-8")
    (tmp_path / "dev.de").write_text("Ein Hund läuft im Park\nEine Katze schläft auf dem Sofa\n", encoding="utf-8")
    task = _task(tmp_path)
    examples = task.examples("dev")
    old_outputs = {"dev-1": "Ein Vogel", "dev-2": "Ein Hund läuft im Park", "dev-3": "Eine Katze schläft auf dem Sofa"}
    with pytest.raises(
        ValueError, match=r"1 prediction\(s\) for ids that are not sentences of this split, e\.g\. 'dev-3'"
    ):
        task.evaluate(examples, old_outputs)
    with pytest.raises(ValueError, match=r"no prediction for sentence 'dev-2' \(1 missing\)"):
        task.evaluate(examples, {"dev-1": "Ein Hund läuft im Park"})
    aligned = {"dev-1": old_outputs["dev-2"], "dev-2": old_outputs["dev-3"]}  # the outputs, realigned
    assert task.evaluate(examples, aligned)["bleu"] == pytest.approx(100.0)

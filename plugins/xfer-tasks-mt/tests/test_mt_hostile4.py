"""Hostile-review regressions (4) for mt/parallel: a target file that is a copy of its source, BLEU
tokenizers for Tibetan-script targets."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from xfer.tasks.mt.config import ParallelConfig
from xfer.tasks.mt.tasks import ParallelTextTask

EN = "A dog runs .\nTwo men talk .\nA child sleeps .\n"


def task(folder: Path) -> ParallelTextTask:
    return ParallelTextTask("mt/parallel", ParallelConfig(data_dir=str(folder)))


@pytest.mark.parametrize("de", [EN, EN.replace("\n", "\r\n"), EN.replace(" .", " .  ")])
def test_a_target_file_copied_from_its_source_is_read_with_a_warning(tmp_path: Path, de: str) -> None:
    """`cp dev.en dev.de` gave a split on which copying the input scores BLEU 100, read without a
    word. A copy task is legitimate, so it is a warning (naming both files and the count), not an
    error; line endings or trailing spaces do not hide the copy."""
    (tmp_path / "dev.en").write_text(EN, encoding="utf-8")
    (tmp_path / "dev.de").write_bytes(de.encode("utf-8"))
    with pytest.warns(UserWarning) as record:
        examples = task(tmp_path).examples("dev")
    assert [(e.source, e.target) for e in examples] == [(s, s) for s in EN.splitlines()]
    (message,) = [str(w.message) for w in record]
    assert message.startswith(f"{tmp_path / 'dev.de'}: each of its 3 sentences is the same as in {tmp_path / 'dev.en'}")
    assert "BLEU 100" in message


def test_a_real_translation_gives_no_warning_even_with_some_identical_pairs(tmp_path: Path) -> None:
    """Names and numbers are often their own translation: one identical pair is no copy."""
    (tmp_path / "dev.en").write_text("Berlin\nA dog runs .\n", encoding="utf-8")
    (tmp_path / "dev.de").write_text("Berlin\nEin Hund rennt .\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(task(tmp_path).examples("dev")) == 2


TIBETAN_REF = "ང་ཚོས་ཁྱེད་རང་ལ་རོགས་རམ་བྱེད་ཐུབ། ང་ཚོ་སང་ཉིན་ལྷ་སར་འགྲོ་གི་ཡིན།"
TIBETAN_HYP = TIBETAN_REF.replace("སང་ཉིན", "དེ་རིང")  # "tomorrow" -> "today": one word of many off


@pytest.mark.parametrize(
    ("target_lang", "tokenize", "language"),
    [("bo", "13a", "Tibetan"), ("bod", "none", "Tibetan"), ("bo-CN", "zh", "Tibetan"), ("dzo_Tibt", "13a", "Dzongkha")],
)
def test_a_bleu_tokenizer_blind_to_the_tsheg_is_refused_for_tibetan_script(target_lang, tokenize, language) -> None:
    """Tibetan and Dzongkha separate syllables with the tsheg (U+0F0B), not spaces: with the default
    13a a translation one word off its reference scored 0.0 BLEU, and the config took it silently."""
    with pytest.raises(ValueError, match=rf"bleu_tokenize '{tokenize}' splits .* and {language} .* not written with"):
        ParallelConfig(data_dir=".", target_lang=target_lang, bleu_tokenize=tokenize)


@pytest.mark.parametrize("tokenize", ["intl", "char"])
def test_tibetan_bleu_with_intl_or_char_scores_the_near_miss(tmp_path: Path, tokenize: str) -> None:
    (tmp_path / "dev.en").write_text("We can help you. We are going to Lhasa tomorrow.\n", encoding="utf-8")
    (tmp_path / "dev.bo").write_text(TIBETAN_REF + "\n", encoding="utf-8")
    mt = ParallelTextTask(
        "mt/parallel", ParallelConfig(data_dir=str(tmp_path), target_lang="bo", bleu_tokenize=tokenize)
    )
    examples = mt.examples("dev")
    bleu = mt.evaluate(examples, {"dev-1": TIBETAN_HYP})["bleu"]
    assert 80 < bleu < 100
    assert mt.evaluate(examples, {"dev-1": TIBETAN_REF})["bleu"] == pytest.approx(100)

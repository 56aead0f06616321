"""Hostile-review regressions (6) for mt/parallel: lines of invisible characters only are empty
lines, a prediction `write_predictions` refuses is not scored either, and references not in
Unicode NFC are named with a warning (BLEU itself stays sacrebleu's, on the raw references)."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
import warnings
from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.tasks.mt.config import ParallelConfig
from xfer.tasks.mt.tasks import ParallelTextTask

EN = ["A girl sits on a bench .", "Two men talk in the street .", "A dog jumps over the fence ."]
DE = ["Ein Mädchen sitzt auf einer Bank .", "Zwei Männer reden auf der Straße .", "Ein Hund springt über den Zaun ."]


def task(folder: Path, en: list[str], de: list[str], split: str = "dev") -> ParallelTextTask:
    (folder / f"{split}.en").write_text("".join(line + "\n" for line in en), encoding="utf-8")
    (folder / f"{split}.de").write_text("".join(line + "\n" for line in de), encoding="utf-8")
    return ParallelTextTask("mt/parallel", ParallelConfig(data_dir=str(folder)))


@pytest.mark.parametrize("invisible", ["\u200b", "\u2060", " \u200b\u00ad "])
def test_a_line_of_invisible_characters_only_is_an_empty_line(tmp_path: Path, invisible: str) -> None:
    """A reference of one zero-width space shows empty in an editor but passed `str.strip`: read
    as a sentence (a one-"word" reference no output has) where an empty line is refused as what
    shifts every later pair."""
    t = task(tmp_path, EN, [DE[0], invisible, DE[2]])
    with pytest.raises(DataError) as err:
        t.examples("dev")
    assert err.value.path == str(tmp_path / "dev.de") and err.value.line == 2
    assert "empty line (only invisible characters, such as U+" in str(err.value)


def test_a_blind_test_source_line_of_invisible_characters_is_an_empty_line(tmp_path: Path) -> None:
    (tmp_path / "test.en").write_text(f"{EN[0]}\n\u200b\n{EN[2]}\n", encoding="utf-8")
    t = ParallelTextTask("mt/parallel", ParallelConfig(data_dir=str(tmp_path)))
    with pytest.raises(DataError, match=r"empty line .*U\+200B.*no sentence to translate") as err:
        t.examples("test")
    assert err.value.path == str(tmp_path / "test.en") and err.value.line == 2


def test_visible_text_with_a_zero_width_character_is_a_sentence(tmp_path: Path) -> None:
    """Only lines of nothing but invisible characters are refused: a joiner inside a word is text."""
    de = [DE[0], "Zwei\u200bMänner reden .", DE[2]]
    assert [e.target for e in task(tmp_path, EN, de).examples("dev")] == de


def test_evaluate_refuses_the_prediction_write_predictions_refuses(tmp_path: Path) -> None:
    """A lone surrogate (a byte-level decoder's surrogateescape) was scored by `evaluate` (BLEU
    99.99 on Multi30k dev) while `write_predictions` refused it: a score for a file that cannot
    exist, whose BLEU `evaluate` claims to be."""
    t = task(tmp_path, EN, DE)
    examples = t.examples("dev")
    predictions = {e.id: e.target for e in examples}
    predictions["dev-2"] = "Zwei Männer \udcc3 reden ."
    with pytest.raises(ValueError, match="'dev-2': lone surrogate") as written:
        t.write_predictions(tmp_path / "out", "dev", examples, predictions)
    with pytest.raises(ValueError, match="'dev-2': lone surrogate") as scored:
        t.evaluate(examples, predictions)
    assert str(scored.value) == str(written.value)


def test_references_not_in_nfc_are_named_with_a_warning(tmp_path: Path) -> None:
    """sacrebleu compares code points: a perfect NFC output scored far below 100 against NFD
    references, without a word."""
    nfd = [DE[0], unicodedata.normalize("NFD", DE[1]), unicodedata.normalize("NFD", DE[2])]
    t = task(tmp_path, EN, nfd)
    with pytest.warns(UserWarning, match=r"dev\.de:2: 2 of its 3 sentences are not in Unicode NFC"):
        examples = t.examples("dev")
    # BLEU is still sacrebleu's on the references as written (nothing is normalised behind its back)
    assert [e.target for e in examples] == nfd
    assert t.evaluate(examples, {e.id: unicodedata.normalize("NFC", e.target) for e in examples})["bleu"] < 75


def test_nfc_references_give_no_warning(tmp_path: Path) -> None:
    t = task(tmp_path, EN, DE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(t.examples("dev")) == 3


def test_bleu_equals_the_sacrebleu_cli_on_the_written_file(tmp_path: Path) -> None:
    """The BLEU `evaluate` reports is `sacrebleu REF -i OUT` on the raw reference file (CRLF, a
    leading BOM and surrounding whitespace in it) and the file `write_predictions` writes (outputs
    with line breaks, surrounding whitespace and a hyphen before a line break)."""
    pytest.importorskip("sacrebleu")
    en = [f"{sentence} number {i}" for i, sentence in enumerate(EN * 4)]
    de = [f"{sentence} Nummer {i} heute" for i, sentence in enumerate(DE * 4)]
    (tmp_path / "dev.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    raw = "\ufeff" + "".join(f"  {line}\u00a0\r\n" for line in de)
    (tmp_path / "dev.de").write_bytes(raw.encode("utf-8"))
    t = ParallelTextTask("mt/parallel", ParallelConfig(data_dir=str(tmp_path)))
    examples = t.examples("dev")
    outputs = ["Ein Mädchen-\nsitzt auf\r\nder Bank .", " Zwei Männer reden  ", "Ein Hund springt\n"]
    predictions = {e.id: outputs[i % 3] + f" Nummer {i} heute" for i, e in enumerate(examples)}
    bleu = t.evaluate(examples, predictions)["bleu"]
    out = t.write_predictions(tmp_path / "out", "dev", examples, predictions)
    # the reference file without its BOM: sacrebleu's CLI reads UTF-8 without dropping one
    reference = tmp_path / "ref.de"
    reference.write_bytes(raw.removeprefix("\ufeff").encode("utf-8"))
    cli = [sys.executable, "-m", "sacrebleu", str(reference), "-i", str(out), "-b", "-w", "6"]
    assert float(subprocess.run(cli, capture_output=True, text=True, check=True).stdout) == pytest.approx(
        bleu, abs=1e-5
    )
    assert (
        t.last_signature
        == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" + __import__("sacrebleu").__version__
    )

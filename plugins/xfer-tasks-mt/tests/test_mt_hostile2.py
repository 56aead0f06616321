"""Hostile-review regressions (2) for mt/parallel: BLEU as sacrebleu scores the written file, reader edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import DataError
from xfer.tasks.mt.config import ParallelConfig
from xfer.tasks.mt.tasks import ParallelTextTask


def data(folder: Path, en: str, de: str, split: str = "dev", **config: object) -> ParallelTextTask:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.en").write_text(en, encoding="utf-8")
    (folder / f"{split}.de").write_text(de, encoding="utf-8")
    return ParallelTextTask("mt/parallel", ParallelConfig(data_dir=folder, **config))


@pytest.mark.parametrize("tokenize", ["13a", "intl", "char", "zh", "none"])
def test_bleu_is_the_bleu_of_the_written_predictions_file(tmp_path, tokenize):
    """The recorded BLEU must be what `sacrebleu dev.de -i <predictions>` prints: sacrebleu's 13a
    deletes a hyphen before a LF, so "Hund-\\nKatze" was scored as "HundKatze" (80.5) while the
    file said "Hund- Katze" (72.8)."""
    from sacrebleu.metrics import BLEU

    refs = ["Ein Hund-Katze läuft im Park.", "Zwei Katzen schlafen auf dem Sofa."]
    hyps = ["Ein Hund-\nKatze läuft im Park.", "Zwei Katzen\r\nschlafen auf dem Sofa."]
    task = data(tmp_path, "a\nb\n", "\n".join(refs) + "\n", bleu_tokenize=tokenize)
    examples = task.examples("dev")
    predictions = {e.id: h for e, h in zip(examples, hyps, strict=True)}
    score = task.evaluate(examples, predictions)["bleu"]
    out = task.write_predictions(tmp_path / "out", "dev", examples, predictions)
    with open(out, encoding="utf-8", newline="\n") as handle:  # as sacrebleu's CLI reads a system file
        written = [line.rstrip() for line in handle]
    assert score == pytest.approx(BLEU(tokenize=tokenize).corpus_score(written, [refs]).score)
    assert written[0] == "Ein Hund- Katze läuft im Park."


def test_a_bom_inside_a_line_is_an_error_not_two_glued_sentences(tmp_path):
    """`cat a.en b.en` with a.en lacking its final newline and b.en saved with a BOM: the last
    sentence of one and the first of the other were read as one pair (in both files alike, so the
    line counts still matched), with U+FEFF inside a reference word."""
    task = data(tmp_path, "A dog\ufeffA cat\nA bird\n", "Ein Hund\ufeffEine Katze\nEin Vogel\n")
    with pytest.raises(DataError, match=r"dev\.en:1: byte-order mark \(U\+FEFF\) inside the line at column 6"):
        task.examples("dev")
    (tmp_path / "dev.en").write_text("A dog\nA cat\nA bird\n", encoding="utf-8")
    (tmp_path / "dev.de").write_text("Ein Hund\nEine Katze\nEin Vogel\u200b\ufeff\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"dev\.de:3: byte-order mark .* column 11"):
        task.examples("dev")
    (tmp_path / "dev.de").write_text(
        "\ufeffEin Hund\nEine Katze\nEin Vogel\n", encoding="utf-8"
    )  # the file's own: fine
    assert [e.target for e in task.examples("dev")] == ["Ein Hund", "Eine Katze", "Ein Vogel"]


def test_one_file_read_as_both_languages_is_an_error(tmp_path):
    """`train.de` a symlink to `train.en` (or `en`/`EN` on a case-insensitive file system): every
    sentence was its own translation, trained on and scored (BLEU near 100) without a word."""
    task = data(tmp_path, "A dog\nA cat\n", "unused\n")
    (tmp_path / "dev.de").unlink()
    (tmp_path / "dev.de").symlink_to(tmp_path / "dev.en")
    with pytest.raises(DataError, match=r"dev\.de: is the same file as .*dev\.en: every sentence would be its own"):
        task.examples("dev")


@pytest.mark.parametrize(
    ("target_lang", "tokenize", "use"),
    [("zh", "13a", "'zh'"), ("zh-TW", "intl", "'zh'"), ("ZH", "none", "'zh'"), ("ja", "13a", "'char'")],
)
def test_a_space_splitting_bleu_tokenizer_is_refused_for_chinese_and_japanese(target_lang, tokenize, use):
    """With the default 13a, a Chinese translation one character off its reference scored 0.0 BLEU
    (each clause one "word"; sacrebleu's zh tokenizer: 88.5), and nothing said so."""
    with pytest.raises(
        ValueError, match=rf"bleu_tokenize '{tokenize}' splits words at spaces.*set bleu_tokenize to {use}"
    ):
        ParallelConfig(source_lang="en", target_lang=target_lang, bleu_tokenize=tokenize)
    ParallelConfig(target_lang="zh", bleu_tokenize="zh")
    ParallelConfig(target_lang="ja", bleu_tokenize="char")
    ParallelConfig(target_lang="ko")  # Korean is written with spaces: 13a is word BLEU
    ParallelConfig(source_lang="zh", target_lang="en")


def test_a_chinese_target_scores_with_sacrebleus_zh_tokenizer(tmp_path):
    from sacrebleu.metrics import BLEU

    refs, hyps = ["一只狗在公园里跑。", "两只猫在沙发上睡觉。"], ["一只狗在公园里走。", "两只猫在沙发上睡觉。"]
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "dev.en").write_text("A dog runs in the park.\nTwo cats sleep on the sofa.\n", encoding="utf-8")
    (folder / "dev.zh").write_text("\n".join(refs) + "\n", encoding="utf-8")
    task = ParallelTextTask("mt/parallel", ParallelConfig(data_dir=folder, target_lang="zh", bleu_tokenize="zh"))
    examples = task.examples("dev")
    score = task.evaluate(examples, {e.id: h for e, h in zip(examples, hyps, strict=True)})["bleu"]
    assert score == pytest.approx(BLEU(tokenize="zh").corpus_score(hyps, [refs]).score) and score > 80
    assert BLEU(tokenize="13a").corpus_score(hyps, [refs]).score == 0.0  # what the default gave
    assert "tok:zh" in task.last_signature


def test_the_tokenizer_check_is_a_recipe_error_at_its_line(tmp_path):
    """Reported by `xfer validate` with the recipe's file and line, not when the stage scores."""
    cvt_testing = pytest.importorskip("xfer.cvt.testing")
    from xfer.core.errors import RecipeError
    from xfer.core.recipes.recipe import load_recipe
    from xfer.testing import write_recipe

    cvt_testing.write_tiny_data(tmp_path)
    path = write_recipe(
        tmp_path, cvt_testing.tiny_cvt_recipe("{name: mt/parallel, data_dir: mt, target_lang: zh}", mode="supervised")
    )
    with pytest.raises(RecipeError, match=r"recipe\.yaml:\d+:\d+: .*bleu_tokenize '13a' splits words at spaces"):
        load_recipe(path)

"""Hostile review of SQuAD fidelity and reporting (squad/v1, squad/v2 inside `transformer.finetune`):
each test failed before its fix."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from xfer.core.tasks import Answer, SpanQAExample
from xfer.tasks.squad.tasks import SquadV1Task, SquadV2Task

CONTEXT = "the dog sleeps near the house . the sun \u200b is warm ."


def _qa(qid: str, question: str, answer: str, context: str = CONTEXT) -> dict[str, Any]:
    return {"id": qid, "question": question, "answers": [{"text": answer, "answer_start": context.index(answer)}]}


def _squad(path: Path, qas: list[dict[str, Any]], context: str = CONTEXT) -> Path:
    path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}))
    return path


def _run_finetune(directory: Path, task: str) -> Path:
    """Run the tiny fine-tuning recipe (2 steps) in this process; returns the stage's folder."""
    pytest.importorskip("xfer.transformer.objectives")
    from xfer.testing import make_host, run_recipe_file, write_recipe
    from xfer.transformer.testing import tiny_finetune_recipe

    text = "name: r\n" + tiny_finetune_recipe(task, max_length=48, steps=2, checkpoint_every=2)
    run_recipe_file(write_recipe(directory, text), directory / "run", make_host(autoload=True))
    return directory / "run" / "fit"


@pytest.fixture(scope="module")
def zero_width_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A squad/v1 fine-tuning stage `fit` whose training file has an answer covering no token
    ("\u200b", which the tokenizer drops): (stage folder, what the run wrote on stderr)."""
    directory = tmp_path_factory.mktemp("zero-width")
    qas = [_qa("q0", "where does the dog sleep ?", "the house"), _qa("zw", "what ?", "\u200b")]
    _squad(directory / "train.json", qas)
    _squad(directory / "dev.json", qas[:1])
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        stage = _run_finetune(directory, "{name: squad/v1, train_file: train.json, dev_file: dev.json}")
    return stage, stderr.getvalue()


# --- (1) what the stage tells the user is in its report ------------------------------------------


def test_an_answer_covering_no_token_is_reported_in_report_md(zero_width_run: tuple[Path, str]) -> None:
    """An answer made only of characters the tokenizer drops is left out of the training loss with
    a warning; it went to stderr only (`warnings.warn`), not to the stage's report.md that users
    read after the run: a training set silently smaller than the file."""
    stage, stderr = zero_width_run
    report = (stage / "report.md").read_text()
    assert "## Warning" in report
    assert "squad/v1: 1 question(s) have an answer that covers no token" in report and "first 'zw'" in report
    assert "covers no token" in stderr  # still on stderr as it happens


def test_the_report_table_names_the_stage(zero_width_run: tuple[Path, str]) -> None:
    """The table of report.md named every transformer.finetune stage "finetune" (the kind), not
    the recipe's stage `fit` that `xfer results` names: two such stages reported alike."""
    stage, _ = zero_width_run
    report = (stage / "report.md").read_text()
    assert "| fit | squad/v1 | f1 |" in report and "| finetune |" not in report


# --- (2) evaluate: predictions must be those of the evaluated questions ------------------------


def _dev() -> list[SpanQAExample]:
    return [
        SpanQAExample("q1", "where ?", CONTEXT, (Answer("the house", CONTEXT.index("the house")),)),
        SpanQAExample("q2", "what ?", CONTEXT, (Answer("the sun", CONTEXT.index("the sun")),)),
    ]


@pytest.mark.parametrize("task", [SquadV1Task("squad/v1"), SquadV2Task("squad/v2")], ids=["v1", "v2"])
def test_evaluate_refuses_predictions_for_unknown_question_ids(task: SquadV1Task) -> None:
    """Predictions for ids that are no question of the split (another split's, another file's)
    were ignored without a word, as the official scripts do, and the scores of the questions that
    happened to match were reported as the split's. `write_predictions` already refused them."""
    golds = {"q1": "the house", "q2": "the sun"}
    assert task.evaluate(_dev(), golds)["f1"] == 100.0
    with pytest.raises(
        ValueError, match=r"squad/v\d: 1 prediction\(s\) for ids that are not questions of this split, e\.g\. 'x9'"
    ):
        task.evaluate(_dev(), {**golds, "x9": "the dog"})
    with pytest.raises(ValueError, match=r"no prediction for question 'q2' \(1 missing\)"):
        task.evaluate(_dev(), {"q1": "the house", "x9": "the dog"})


# --- (3) the SQuAD 2.0 prediction files stay a consistent set ---------------------------------


class _Predictions(dict):
    """Predictions with the extras, as `transformer.span_qa` returns them (without importing it)."""

    def __init__(self, answers: dict, best_non_null: dict, null_odds: dict):
        super().__init__(answers)
        self.best_non_null, self.null_odds = best_non_null, null_odds


@pytest.mark.parametrize("failing", ["dev-predictions.json", "dev-non-null-predictions.json", "dev-null-odds.json"])
def test_an_interrupted_write_never_pairs_new_answers_with_old_null_odds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """Each file was atomic but the set was not: the extras were replaced one by one before the
    predictions, so a run stopped after the new best non-null answers (killed, disk full) left
    them beside the previous call's null odds, which `evaluate-v2.0.py --na-prob-file` scores
    together without a word. Now a file of the pair is missing instead, never stale."""
    from xfer.tasks.squad import tasks as tasks_module

    task, examples = SquadV2Task("squad/v2"), _dev()
    old = _Predictions({"q1": "", "q2": ""}, {"q1": "the dog", "q2": "the dog"}, {"q1": 5.0, "q2": 5.0})
    new = _Predictions({"q1": "the house", "q2": ""}, {"q1": "the house", "q2": "the sun"}, {"q1": -1.0, "q2": 2.0})
    task.write_predictions(tmp_path, "dev", examples, old)
    write = tasks_module.atomic_write_text

    def interrupted(path: Path, text: str) -> None:
        if Path(path).name == failing:
            raise OSError(28, "No space left on device")
        write(path, text)

    monkeypatch.setattr(tasks_module, "atomic_write_text", interrupted)
    with pytest.raises(OSError, match="No space left"):
        task.write_predictions(tmp_path, "dev", examples, new)
    files = {p.name: json.loads(p.read_text()) for p in tmp_path.iterdir()}
    non_null, odds = files.get("dev-non-null-predictions.json"), files.get("dev-null-odds.json")
    if non_null is not None and odds is not None:  # a complete pair must be one call's
        assert (non_null, odds) in [(old.best_non_null, old.null_odds), (new.best_non_null, new.null_odds)]
    if "dev-predictions.json" in files and non_null is not None:
        assert (files["dev-predictions.json"], non_null) in [(old, old.best_non_null), (new, new.best_non_null)]
    monkeypatch.setattr(tasks_module, "atomic_write_text", write)
    task.write_predictions(tmp_path, "dev", examples, new)  # the next (resumed) call writes the set
    assert json.loads((tmp_path / "dev-null-odds.json").read_text()) == new.null_odds


# --- (4) ELECTRA's SQuAD head with `export_hf: true` ----------------------------------------------


def test_export_hf_of_electras_squad_head_is_refused_before_training(tmp_path: Path) -> None:
    """`joint_end` and `answerable` (ELECTRA's SQuAD setup) have no Hugging Face form. With
    `export_hf: true` the stage trained every trial of every task, then stopped on the export's
    bare ValueError (and again on every re-run, the trials being done): now a UserError naming
    the task and the knob, before any training."""
    pytest.importorskip("xfer.transformer.objectives")
    from xfer.core.errors import UserError
    from xfer.testing import make_host, run_recipe_file, write_recipe
    from xfer.transformer.testing import tiny_finetune_recipe

    _squad(tmp_path / "train.json", [_qa("q0", "where does the dog sleep ?", "the house")])
    text = "name: r\n" + tiny_finetune_recipe(
        "{name: squad/v2, train_file: train.json, dev_file: train.json}",
        max_length=48,
        steps=2,
        checkpoint_every=2,
        objective="{name: transformer.span_qa, joint_end: true, answerable: true}",
    ).replace("    tasks:", "    export_hf: true\n    tasks:")
    with pytest.raises(UserError, match=r"squad/v2: `export_hf: true` cannot write .* joint_end or answerable"):
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", make_host(autoload=True))
    assert not (tmp_path / "run" / "fit" / "trials").exists()  # nothing was trained
    # without a saved model nothing is exported: the same recipe runs
    unsaved = text.replace("    export_hf: true\n", "    export_hf: true\n    save_models: none\n")
    run_recipe_file(write_recipe(tmp_path, unsaved), tmp_path / "run2", make_host(autoload=True))
    assert (tmp_path / "run2" / "fit" / "outputs" / "results" / "results.json").exists()


# --- guard (not a fix): what real SQuAD files hold is read as it is ------------------------------


def test_answer_start_counts_characters_of_the_raw_context(tmp_path: Path) -> None:
    """Lead checked: `answer_start` counts the characters (code points) of the context as the file
    has it. Official contexts may start with whitespace (the Hugging Face loader once stripped it
    and misaligned every answer after it, datasets#2585); an astral character counts one. Such a
    file must be read, and an answer_start counted in UTF-16 units or after stripping refused."""
    from xfer.core.errors import DataError
    from xfer.tasks.squad.readers import read_squad

    context = " \n the 😀 cat sat on\u00a0the mat ."
    path = _squad(tmp_path / "ok.json", [_qa("q", "who sat ?", "the mat", context)], context)
    [example] = read_squad(path, version=1)
    assert example.context == context and example.answers == (Answer("the mat", context.index("the mat")),)
    for wrong in (context.strip().index("the mat"), context.index("the mat") + 1):  # stripped / UTF-16 count
        qa = {"id": "q", "question": "who sat ?", "answers": [{"text": "the mat", "answer_start": wrong}]}
        with pytest.raises(DataError, match=f"answer_start {wrong} does not match the answer text 'the mat'"):
            read_squad(_squad(tmp_path / "bad.json", [qa], context), version=1)

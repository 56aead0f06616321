"""Exact resume: a run SIGKILLed inside the teachers stage, then again inside the student, and
resumed, ends with bitwise the same teachers, cached predictions and student as a run never killed."""

from __future__ import annotations

from pathlib import Path

from xfer.testing import assert_same_weights, make_host, output_tensors, run_cli, run_recipe_file

from .bam_recipes import ENCODER, write_regression_data

RECIPE = f"""
name: bam-resume
seed: 5
stages:
  corpus: {{kind: toy.corpus, sentences: 100}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200, min_frequency: 1}}
  teachers:
    kind: bam.teachers
    tokenizer: vocab.tokenizer
    encoder: {ENCODER}
    max_length: 40
    tasks: &tasks
      - {{name: toy/pos, train_size: 48, dev_size: 16}}
      - {{name: glue/tsv, train: sts_train.tsv, dev: sts_dev.tsv, text_a_column: a, text_b_column: b,
         label_column: score, type: regression, metrics: [spearman]}}
    train: {{steps: 4, batch_size: 16, lr: 2e-3, log_every: 1, checkpoint_every: 2, eval_every: null, precision: fp32}}
  student:
    kind: bam.student
    init: teachers.init
    teachers: teachers.predictions
    max_length: 40
    tasks: *tasks
    train: {{steps: 6, batch_size: 16, lr: 2e-3, log_every: 1, checkpoint_every: 2, eval_every: null, precision: fp32}}
"""


def test_killed_in_teachers_and_in_student_then_resumed_is_exact(tmp_path: Path) -> None:
    write_regression_data(tmp_path)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE, encoding="utf-8")
    run_recipe_file(recipe, tmp_path / "reference", make_host(autoload=True))

    args = ["run", str(recipe), "--run-dir", str(tmp_path / "killed")]
    first = run_cli(args, kill_at_step=3)  # inside the first teacher (4 steps each)
    assert first.returncode == -9, first.stderr[-2000:]
    assert not (tmp_path / "killed/student").exists()
    second = run_cli(args, kill_at_step=5)  # the teachers finish; killed in the student (6 steps)
    assert second.returncode == -9, second.stderr[-2000:]
    assert "[teachers] resuming" in second.stdout
    third = run_recipe_file(recipe, tmp_path / "killed", make_host(autoload=True))
    assert [s.action for s in third.stages][-2:] == ["skipped", "resumed"]

    for stage in ("teachers", "student"):  # models, init and the cached predictions
        expected = output_tensors(tmp_path / "reference", stage)
        assert any(name.startswith("predictions/") for name in expected)
        assert_same_weights(expected, output_tensors(tmp_path / "killed", stage))
    reference = (tmp_path / "reference/student/outputs/results/results.json").read_text()
    assert (tmp_path / "killed/student/outputs/results/results.json").read_text() == reference

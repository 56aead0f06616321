"""BAM, round 44: a student composed with an ELECTRA checkpoint through its teachers, checked before
anything trains."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core.errors import RecipeError
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import preflight
from xfer.testing import make_host, write_recipe

from .bam_recipes import write_regression_data
from .test_init_checks import save_checkpoint

TRAIN = "{epochs: 1, batch_size: 8, lr: 1e-3, eval_every: null, precision: fp32}"


def _electra_chain(directory: Path, *, student_length: int = 64) -> Path:
    """pretrain (32 positions) -> teachers (init: pretrain.discriminator) -> student (init: teachers.init),
    the chain of recipes/bam-on-electra.yaml."""
    teachers = f"""
  teachers:
    kind: bam.teachers
    init: pretrain.discriminator
    max_length: 32
    tasks: [{{name: toy/agreement}}]
    train: {TRAIN}"""
    student = f"""
  student:
    kind: bam.student
    init: teachers.init
    teachers: teachers.predictions
    max_length: {student_length}
    tasks: [{{name: toy/agreement}}]
    train: {TRAIN}"""
    return write_recipe(
        directory,
        f"""
stages:
  corpus: {{kind: toy.corpus, sentences: 50}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200}}
  pretrain:
    kind: electra.pretrain
    corpus: {{files: corpus.text}}
    tokenizer: vocab.tokenizer
    model: tiny
    encoder: {{max_position_embeddings: 32}}
    max_length: 32
    train: {{steps: 2, batch_size: 2, warmup_steps: 1}}{teachers}{student}
""",
    )


def test_max_length_beyond_the_positions_of_the_teachers_init_is_a_recipe_error(tmp_path: Path) -> None:
    """`init: teachers.init` is the encoder the teachers started from, ELECTRA's discriminator of 32
    positions: only the teachers' own max_length was checked against it, and the student's 64 was a
    "checkpoint covers 32 positions" error when the student started, after pre-training and the teachers."""
    pytest.importorskip("xfer.electra")
    with pytest.raises(RecipeError) as caught:
        load_recipe(_electra_chain(tmp_path), host=make_host(autoload=True))
    (problem,) = caught.value.diagnostics
    assert problem.location.line == 23  # the student's max_length
    assert problem.message.startswith("stages.student.max_length: 64 is more than the 32 positions of the encoder")
    assert "of stage 'pretrain'" in problem.message and "through stage 'teachers'" in problem.message
    assert "lower max_length to at most 32" in problem.message


def test_a_student_within_the_positions_of_the_teachers_init_validates(tmp_path: Path) -> None:
    pytest.importorskip("xfer.electra")
    plan = load_recipe(_electra_chain(tmp_path, student_length=32), host=make_host(autoload=True))
    assert list(plan.stages)[-2:] == ["teachers", "student"]


def _folder_chain(directory: Path, student_length: int) -> Path:
    """teachers (init: a checkpoint folder of 16 positions) -> student (init: teachers.init)."""
    save_checkpoint(directory / "electra", positions=16)
    return write_recipe(
        directory,
        f"""
stages:
  teachers:
    kind: bam.teachers
    init: electra
    max_length: 16
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {TRAIN}
  student:
    kind: bam.student
    init: teachers.init
    teachers: teachers.predictions
    max_length: {student_length}
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {TRAIN}
""",
    )


def test_preflight_checks_max_length_against_the_folder_the_teachers_start_from(tmp_path: Path) -> None:
    """The same chain from a checkpoint folder (the package README's `init: /path/to/electra/discriminator`):
    the pre-flight checked the teachers' max_length against it, the student's not (its `init` is a stage
    output), and the student failed on "covers 16 positions" once the teachers had trained."""
    host = make_host(autoload=True)
    problems = preflight(load_recipe(_folder_chain(tmp_path, 32), host=host), host=host)
    assert len(problems) == 1, problems
    assert "stage 'student'" in problems[0]
    assert (
        f"max_length: 32 is more than the 16 positions of the checkpoint {tmp_path / 'electra'}, which `init` "
        "(teachers.init) comes from through stage 'teachers': lower max_length to at most 16"
    ) in problems[0]


def test_preflight_passes_a_student_within_the_positions_of_the_teachers_folder(tmp_path: Path) -> None:
    host = make_host(autoload=True)
    assert preflight(load_recipe(_folder_chain(tmp_path, 16), host=host), host) == []


def _regression_pair(directory: Path, student_range: str) -> Path:
    """teachers and a student of one glue/tsv regression task; the teachers' scores range over [0, 5]."""
    write_regression_data(directory)
    task = (
        "{{name: glue/tsv, train: sts_train.tsv, dev: sts_dev.tsv, text_a_column: a, text_b_column: b, "
        "label_column: score, type: regression{}}}"
    )
    return write_recipe(
        directory,
        f"""
stages:
  vocab: {{kind: transformer.vocab, files: [sts_train.tsv], size: 100}}
  teachers:
    kind: bam.teachers
    tokenizer: vocab.tokenizer
    tasks: [{task.format(", score_range: [0, 5]")}]
    train: {TRAIN}
  student:
    kind: bam.student
    init: teachers.init
    teachers: teachers.predictions
    tasks: [{task.format(student_range)}]
    train: {TRAIN}
""",
    )


@pytest.mark.parametrize("student_range", ["", ", score_range: [1, 5]"])
def test_a_student_scaling_scores_from_another_range_than_its_teachers_is_a_recipe_error(
    tmp_path: Path, student_range: str
) -> None:
    """glue/tsv's `score_range` scales regression targets to [0, 1]: a student without it (or with another)
    was refused by `check_compatible` when it started, after the teachers had trained."""
    with pytest.raises(RecipeError) as caught:
        load_recipe(_regression_pair(tmp_path, student_range), host=make_host(autoload=True))
    (problem,) = caught.value.diagnostics
    ours = "[1.0, 5.0]" if student_range else "[0.0, 1.0]"
    assert problem.message.startswith(f"stages.student.tasks.0.score_range: {ours} here"), problem.message
    assert "trains the teacher of 'glue/tsv' with score_range [0.0, 5.0]" in problem.message


def test_a_student_with_its_teachers_score_range_validates(tmp_path: Path) -> None:
    load_recipe(_regression_pair(tmp_path, ", score_range: [0, 5]"), host=make_host(autoload=True))


CONLL = "John B-PER\nSmith I-PER\nsees O\nParis B-LOC\n. O\n\nMary B-PER\nruns O\n. O\n"


def _tagging_pair(directory: Path, student_task: str) -> Path:
    """teachers of conll/ner in BIO, and a student whose entry of the task is `student_task`."""
    for split in ("train", "dev"):
        (directory / f"{split}.txt").write_text(CONLL, encoding="utf-8")
    (directory / "corpus.txt").write_text(CONLL.replace("\n\n", "\n"), encoding="utf-8")
    return write_recipe(
        directory,
        f"""
stages:
  vocab: {{kind: transformer.vocab, files: [corpus.txt], size: 60, min_frequency: 1}}
  teachers:
    kind: bam.teachers
    tokenizer: vocab.tokenizer
    tasks: [{{name: conll/ner, train_file: train.txt, dev_file: dev.txt, tag_scheme: BIO}}]
    train: {TRAIN}
  student:
    kind: bam.student
    init: teachers.init
    teachers: teachers.predictions
    tasks: [{student_task}]
    train: {TRAIN}
""",
    )


def test_preflight_refuses_a_student_whose_task_entry_reads_other_labels_than_its_teachers(tmp_path: Path) -> None:
    """The student's entry of conll/ner without the teachers' `tag_scheme: BIO` reads BIOES tags: validation
    compares only `type`/`labels` fields, and `check_compatible` refused it when the student started,
    after the teachers had trained."""
    host = make_host(autoload=True)
    recipe = load_recipe(
        _tagging_pair(tmp_path, "{name: conll/ner, train_file: train.txt, dev_file: dev.txt}"), host=host
    )
    problems = preflight(recipe, host=host)
    assert len(problems) == 1, problems
    assert "stage 'student'" in problems[0] and "tasks.0: 'conll/ner' is a tagging task with labels" in problems[0]
    assert "'S-LOC'" in problems[0]  # BIOES here
    assert "but stage 'teachers' trains its teacher on a tagging task with labels ['B-LOC'" in problems[0]


def test_preflight_passes_a_student_whose_entry_differs_only_in_what_dev_reads(tmp_path: Path) -> None:
    host = make_host(autoload=True)
    student = "{name: conll/ner, train_file: train.txt, dev_file: train.txt, tag_scheme: BIO}"
    assert preflight(load_recipe(_tagging_pair(tmp_path, student), host=host), host) == []

"""`torchrun --nproc_per_node=2`: a bam.student run (teacher annealing, mixed classification +
regression batches) matches the single-process run with the same global batch, and only rank 0 writes.

Both ranks draw the same global batch and each takes its half; every example's loss is summed and
divided by the local batch size, so DDP's gradient average is the single-process mean. Dropout is
off (each rank would draw its own masks) and precision is fp32. Tagging is left out: its loss is a
mean over words per task part, and splitting a part between ranks re-weights words.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from xfer.testing import assert_same_weights, make_host, output_tensors, run_recipe_file

from .bam_recipes import prepare

ENCODER = (
    "{num_layers: 1, hidden_size: 32, embedding_size: 32, intermediate_size: 64, num_heads: 2, "
    "hidden_dropout: 0.0, attention_dropout: 0.0}"
)
TASKS = """
      - {name: glue/rte, data_dir: RTE}
      - {name: glue/tsv, train: sts_train.tsv, dev: sts_dev.tsv, text_a_column: a, text_b_column: b,
         label_column: score, type: regression, metrics: [spearman]}"""
RECIPE = f"""
name: bam-ddp
seed: 11
stages:
  corpus: {{kind: toy.corpus, sentences: 100}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200, min_frequency: 1}}
  teachers:
    kind: bam.teachers
    tokenizer: vocab.tokenizer
    encoder: {ENCODER}
    objective: {{name: transformer.sequence, dropout: 0.0}}
    max_length: 40
    tasks: {TASKS}
    train: {{steps: 2, batch_size: 16, lr: 2e-3, eval_every: null, precision: fp32}}
  student:
    kind: bam.student
    init: teachers.init
    teachers: teachers.predictions
    objective: {{name: transformer.sequence, dropout: 0.0}}
    max_length: 40
    tasks: {TASKS}
    train: {{steps: 8, batch_size: 16, lr: 2e-3, log_every: 4, checkpoint_every: 4, eval_every: null, precision: fp32}}
"""


def write_rte_data(directory: Path, train: int = 48, dev: int = 16) -> None:
    """An RTE-format folder (accuracy only: no scikit-learn import in the workers, unlike toy MCC)."""
    rng = random.Random(1)
    words = ["the", "a", "cat", "dog", "runs", "sleeps", "big", "small", "red", "blue", "slowly", "house", "tree"]
    (directory / "RTE").mkdir()
    for split, n in (("train", train), ("dev", dev)):
        lines = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(n):
            a, b = rng.sample(words, 5), rng.sample(words, 4)
            label = "entailment" if len(set(a) & set(b)) >= 2 else "not_entailment"
            lines.append(f"{i}\t{' '.join(a)}\t{' '.join(b)}\t{label}")
        (directory / "RTE" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _torchrun() -> str | None:
    found = shutil.which("torchrun")
    local = Path(sys.executable).with_name("torchrun")
    return found or (str(local) if local.exists() else None)


@pytest.mark.skipif(_torchrun() is None, reason="torchrun not installed")
def test_two_process_student_matches_single_process(tmp_path: Path) -> None:
    recipe = prepare(tmp_path, RECIPE)
    write_rte_data(tmp_path)
    run_recipe_file(recipe, tmp_path / "single", make_host(autoload=True))
    # the DDP run starts from the same teachers (copied): only the student trains under torchrun
    shutil.copytree(tmp_path / "single", tmp_path / "ddp", ignore=shutil.ignore_patterns("student"))
    command = [
        str(_torchrun()),
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "xfer.core.cli",
        "run",
        str(recipe),
        "--run-dir",
        str(tmp_path / "ddp"),
    ]
    env = dict(os.environ)
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]

    single, ddp = tmp_path / "single/student", tmp_path / "ddp/student"
    models = [
        {k: v for k, v in output_tensors(tmp_path / run, "student").items() if not k.startswith("predictions/")}
        for run in ("single", "ddp")
    ]
    assert_same_weights(*models, rtol=1e-4)
    # the student's own training-set predictions (keyed by its weights' hash, so the files differ by name)
    for task in ("glue/rte", "glue/tsv"):
        values = []
        for stage in (single, ddp):
            entry = json.loads((stage / "outputs/predictions/index.json").read_text())["tasks"][task]
            values.append(load_file(str(stage / "outputs/predictions" / entry["file"]))["values"])
        torch.testing.assert_close(values[1], values[0], rtol=1e-3, atol=1e-4)
    assert json.loads((tmp_path / "ddp/environment.json").read_text())["world_size"] == 2
    records = [json.loads(line) for line in (ddp / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["split"] == "train"] == [4, 8], "each step logged once (rank 0)"
    lambdas = [r["gold_weight"] for r in records if r["split"] == "train"]
    reference = [json.loads(line) for line in (single / "metrics.jsonl").read_text().splitlines()]
    assert lambdas == pytest.approx([r["gold_weight"] for r in reference if r["split"] == "train"])
    # dev metrics from predictions gathered over both ranks equal the single process's
    results = [json.loads((d / "outputs/results/results.json").read_text()) for d in (single, ddp)]
    for task in ("glue/rte", "glue/tsv"):
        a, b = (r[task]["runs"][0] for r in results)
        assert {k: v for k, v in b.items() if k != "checkpoint"} == pytest.approx(
            {k: v for k, v in a.items() if k != "checkpoint"}, rel=1e-3, abs=1e-3
        )
        gold = json.loads((ddp / "outputs/results/dev" / task.replace("/", "-") / "gold.json").read_text())
        predictions = json.loads((ddp / "outputs/results/dev" / task.replace("/", "-") / "trial-0.json").read_text())
        assert len(predictions["predictions"]) == len(gold["ids"]) == {"glue/rte": 16, "glue/tsv": 24}[task]

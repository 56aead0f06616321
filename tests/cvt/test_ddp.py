"""`torchrun --nproc_per_node=2` matches one process on the same global batches (CVT mode, labeled
and unlabeled steps, dropout off: with dropout each rank draws its own masks), and dev metrics
come from predictions gathered over both ranks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
from xfer.testing import assert_same_weights, make_host, output_tensors, run_recipe_file, write_recipe

TORCHRUN = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
CHUNK = "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}"
PARSE = "{name: conll/ud-parse, train_file: train.conllu, dev_file: dev.conllu}"


@pytest.mark.skipif(not Path(TORCHRUN).exists(), reason="torchrun not installed")
def test_two_processes_match_one(tmp_path):
    write_tiny_data(tmp_path)
    extra = "    dropout: 0.0\n    unlabeled_dropout: 0.0\n    lstm: packed"
    recipe = write_recipe(tmp_path, tiny_cvt_recipe(CHUNK, PARSE, steps=6, checkpoint_every=6, extra=extra))
    run_recipe_file(recipe, tmp_path / "single", make_host(autoload=True))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [TORCHRUN, "--standalone", "--nproc_per_node=2", "-m", "xfer.core.cli", "run", str(recipe)]
    result = subprocess.run(
        [*command, "--run-dir", str(tmp_path / "ddp")], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "ddp" / "environment.json").read_text())["world_size"] == 2
    assert_same_weights(output_tensors(tmp_path / "single", "fit"), output_tensors(tmp_path / "ddp", "fit"), rtol=1e-4)

    def dev(run: str) -> dict[int, float]:
        lines = (tmp_path / run / "fit" / "metrics.jsonl").read_text().splitlines()
        return {r["step"]: r["mean"] for r in map(json.loads, lines) if r["split"] == "dev"}

    assert dev("ddp") and dev("ddp") == pytest.approx(dev("single"), abs=1e-6)

"""`xfer run` twice: the second run (its stage complete) parses no JSON-lines dataset again — the pre-flight
finds the stage's record in its folder (`stage_dir`) — and a bad line added since is named with its line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from xfer.electra import data as electra_data

TINY = "{num_layers: 1, hidden_size: 64, embedding_size: 32, intermediate_size: 128, num_heads: 2}"
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "big", "red", "hello", "said"]
LINES = [" ".join(WORDS[i : i + 3 + i % 4]) for i in range(9)]
RECIPE = f"""
name: pf
seed: 1
stages:
  corpus: {{kind: toy.corpus, sentences: 50}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200, min_frequency: 1}}
  fit:
    kind: electra.pretrain
    corpus: {{dataset: corpus.jsonl, streaming: STREAMING}}
    tokenizer: vocab.tokenizer
    model: tiny
    encoder: {TINY}
    max_length: 32
    train: {{steps: 2, batch_size: 4, warmup_steps: 0}}
"""


@pytest.mark.parametrize("streaming", ["true", "false"])
def test_second_xfer_run_parses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streaming: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from xfer.core.cli import main

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(electra_data, "_PASSED_HERE", set())
    data = tmp_path / "corpus.jsonl"
    data.write_text("".join(json.dumps({"text": line}) + "\n" for line in LINES * 20))
    os.utime(data, (1_000_000_000, 1_000_000_000))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.replace("STREAMING", streaming))
    calls: list[Path] = []
    real = electra_data._json_lines_problem
    monkeypatch.setattr(electra_data, "_json_lines_problem", lambda p, *a: calls.append(p) or real(p, *a))
    assert main(["run", str(recipe), "--run-dir", str(tmp_path / "run")]) == 0
    assert calls == [data]
    monkeypatch.setattr(electra_data, "_PASSED_HERE", set())  # a new process
    assert main(["run", str(recipe), "--run-dir", str(tmp_path / "run")]) == 0
    assert calls == [data]
    with data.open("a") as handle:
        handle.write('{"body": "x"}\n')
    assert main(["run", str(recipe), "--run-dir", str(tmp_path / "run")]) == 2
    assert "corpus.jsonl:181: text: no 'text' key" in capsys.readouterr().err

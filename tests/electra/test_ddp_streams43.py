"""Streamed ELECTRA pre-training (`corpus: {streaming: true}`) under `torchrun --nproc_per_node=2`
(gloo, CPU), after the shard-order / shuffle-window seeds got tags of their own (`SHARD_ORDER`,
`WINDOW_ORDER` in xfer.electra.data): the two ranks' examples are disjoint, together they are what
one process reads over the same span of the stream, and a SIGKILL mid-run resumes with exactly the
batches, data cursor and losses of the uninterrupted two-process run.

How one process and two differ (by design, `PretrainBatches`): a shuffle window holds
`shuffle_buffer` examples *per rank*, so two ranks shuffle 2 * shuffle_buffer consecutive examples
of the stream together where one process shuffles shuffle_buffer. A step's 8 examples are then not
the single process's 8 of that step, but every span of whole windows holds the same examples.

Then `xfer.core.distributed` given a hostile environment: a MASTER_PORT that is no port or is taken,
a negative LOCAL_RANK on a CUDA machine.

This file is also the plugin module of its subprocesses (`XFER_PLUGIN_MODULES=test_ddp_streams43`,
this folder on PYTHONPATH): with $XFER_TEST_BATCH_LOG set it records, per rank, every batch
`PretrainBatches.next_step` hands out and the data cursor it started from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

XFER_NAMESPACE = "ddpstreams43"
LOG_VARIABLE = "XFER_TEST_BATCH_LOG"
TORCHRUN = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))

SHUFFLE_BUFFER = 6
"""Per-rank window: a rank takes 4 examples a step, so steps cut windows in the middle (the cursor
then has an offset inside a window) and 3 steps are 2 whole windows per rank (4 for one process)."""

RECIPE = f"""
name: pre
seed: 2
stages:
  corpus: {{kind: toy.corpus, sentences: 100}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 200, min_frequency: 1}}
  fit:
    kind: electra.pretrain
    corpus: {{files: corpus.text, streaming: true, shuffle_buffer: {SHUFFLE_BUFFER}}}
    tokenizer: vocab.tokenizer
    model: tiny
    encoder: {{num_layers: 1, hidden_size: 32, embedding_size: 16, intermediate_size: 64, num_heads: 2}}
    max_length: 32
    objective: {{name: electra.rtd}}
    train: {{steps: 8, batch_size: 8, warmup_steps: 2, log_every: 1, checkpoint_every: 4}}
"""


def _rows(batch: dict[str, Any]) -> list[list[int]]:
    """Each example of a padded micro-batch as its real token ids."""
    ids, mask = batch["input_ids"].tolist(), batch["attention_mask"].tolist()
    return [[t for t, m in zip(row, keep, strict=True) if m] for row, keep in zip(ids, mask, strict=True)]


def record_batches(log: Path) -> None:
    """Have every `PretrainBatches.next_step` append {cursor, rows} to `log`.RANK (one JSON line a call)."""
    from xfer.electra.data import PretrainBatches

    original = PretrainBatches.next_step
    if getattr(original, "recording", False):
        return

    def next_step(self: PretrainBatches) -> list[dict[str, Any]]:
        cursor = self.state_dict()
        micro_batches = original(self)
        record = {"cursor": cursor, "rows": [row for batch in micro_batches for row in _rows(batch)]}
        with open(f"{log}.{os.environ.get('RANK', '0')}", "a") as out:
            out.write(json.dumps(record) + "\n")
        return micro_batches

    next_step.recording = True  # type: ignore[attr-defined]
    PretrainBatches.next_step = next_step  # type: ignore[method-assign]


if os.environ.get(LOG_VARIABLE):  # imported as a plugin module by a torchrun worker
    record_batches(Path(os.environ[LOG_VARIABLE]))


# --- the tests --------------------------------------------------------------------------------------

needs_torchrun = pytest.mark.skipif(not Path(TORCHRUN).exists(), reason="torchrun not installed")


def _torchrun(recipe: Path, run: Path, log: Path, *fault: str) -> subprocess.CompletedProcess[str]:
    """`xfer run` (through xfer.testing.faults when `fault` names one) in 2 processes, batches logged to `log`."""
    env = {
        **os.environ,
        "XFER_PLUGIN_MODULES": "test_ddp_streams43",
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
        LOG_VARIABLE: str(log),
        "OMP_NUM_THREADS": "1",
    }
    module = "xfer.testing.faults" if fault else "xfer.core.cli"
    command = [TORCHRUN, "--standalone", "--nproc_per_node=2", "-m", module, *fault, "run", str(recipe)]
    return subprocess.run([*command, "--run-dir", str(run)], env=env, capture_output=True, text=True, timeout=240)


def _calls(log: Path, rank: int) -> list[dict[str, Any]]:
    path = Path(f"{log}.{rank}")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _losses(run: Path) -> dict[int, float]:
    lines = (run / "fit/metrics.jsonl").read_text().splitlines()
    return {m["step"]: m["loss"] for m in map(json.loads, lines) if m["split"] == "train"}


def _last_cursor(run: Path) -> Any:
    newest = sorted((run / "fit/checkpoints").glob("step-*"))[-1]
    return json.loads((newest / "state.json").read_text())["data"]


@needs_torchrun
@pytest.mark.usefixtures("one_thread")
def test_streamed_pretraining_in_two_processes_splits_the_stream_and_resumes_after_sigkill(tmp_path: Path) -> None:
    from xfer.testing import make_host, run_recipe_file, write_recipe

    recipe = write_recipe(tmp_path, RECIPE)
    single_log = tmp_path / "single.jsonl"
    record_batches(single_log)  # this process: the single-process run
    run_recipe_file(recipe, tmp_path / "single", make_host(autoload=True))
    single = [call["rows"] for call in _calls(single_log, 0)][:8]

    whole = _torchrun(recipe, tmp_path / "whole", tmp_path / "whole.jsonl")
    assert whole.returncode == 0, whole.stderr[-3000:]
    ranks = [_calls(tmp_path / "whole.jsonl", r)[:8] for r in (0, 1)]
    assert len(single) == len(ranks[0]) == len(ranks[1]) == 8
    for step in range(8):
        rank0, rank1 = (ranks[r][step]["rows"] for r in (0, 1))
        assert len(rank0) == len(rank1) == 4  # batch 8 = 2 ranks x 4
        assert not {tuple(x) for x in rank0} & {tuple(x) for x in rank1}, f"step {step + 1}: ranks share examples"
        # "examples" sharding: every rank reads the whole stream, so every rank's cursor is the same
        assert ranks[0][step]["cursor"] == ranks[1][step]["cursor"]
    for span in (3, 6):  # whole windows: 2 ranks x 2 windows of 6 = 4 single windows of 6 (x2 for 6 steps)
        two = Counter(tuple(x) for r in (0, 1) for call in ranks[r][:span] for x in call["rows"])
        one = Counter(tuple(x) for rows in single[:span] for x in rows)
        assert two == one, f"the first {span} steps of 2 processes read other examples than 1 process"

    killed = _torchrun(recipe, tmp_path / "run", tmp_path / "killed.jsonl", "--kill-at-step", "6")
    assert killed.returncode != 0 and json.loads((tmp_path / "run/fit/stage.json").read_text())["status"] != "completed"
    resumed = _torchrun(recipe, tmp_path / "run", tmp_path / "resumed.jsonl")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming" in resumed.stdout + resumed.stderr
    for r in (0, 1):
        after = _calls(tmp_path / "resumed.jsonl", r)
        assert len(after) >= 4, after  # resumed from the checkpoint of step 4: steps 5 to 8
        assert after[:4] == ranks[r][4:8], f"rank {r}: the batches after the resume are not the uninterrupted run's"
    assert _last_cursor(tmp_path / "run") == _last_cursor(tmp_path / "whole")
    assert _losses(tmp_path / "run") == _losses(tmp_path / "whole")


# --- distributed.py in a hostile environment ------------------------------------------------------


def _rendezvous_environment(monkeypatch: pytest.MonkeyPatch, port: str) -> None:
    """Rank 0 of 2 at 127.0.0.1:`port`, outside torchrun, waiting at most 1 s for its peer."""
    for name in ("TORCHELASTIC_RUN_ID", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (("WORLD_SIZE", "2"), ("RANK", "0"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", port)):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XFER_DIST_INIT_TIMEOUT", "1")


@pytest.mark.parametrize(
    ("port", "message"),
    [
        ("abc", "environment variable MASTER_PORT='abc' is not a whole number"),
        ("99999", "environment variable MASTER_PORT='99999' is not a TCP port (1 to 65535)"),
        ("0", "environment variable MASTER_PORT='0' is not a TCP port (1 to 65535)"),
    ],
)
def test_a_master_port_that_is_no_port_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, port: str, message: str
) -> None:
    """It failed inside torch's rendezvous and was reported as "could not join ...: ValueError: invalid
    literal for int()" with the advice for absent peers ("set XFER_DIST_INIT_TIMEOUT=SECONDS to wait
    longer"); port 0 had rank 0 listen on a random port and wait for peers that could not find it."""
    from xfer.core import distributed
    from xfer.core.errors import UserError

    _rendezvous_environment(monkeypatch, port)
    with pytest.raises(UserError) as caught:
        distributed.init_from_env("cpu")
    assert str(caught.value) == message
    assert not distributed.is_distributed()


def test_a_master_port_another_program_holds_is_said_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 cannot listen on a port in use (EADDRINUSE, at once): it was reported as peers that did not
    join, with "set XFER_DIST_INIT_TIMEOUT=SECONDS to wait longer", which no wait fixes."""
    import socket

    from xfer.core import distributed
    from xfer.core.errors import UserError

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        _rendezvous_environment(monkeypatch, str(port))
        with pytest.raises(UserError) as caught:
            distributed.init_from_env("cpu")
    said = str(caught.value)
    assert said.startswith(f"rank 0 could not listen on MASTER_ADDR:MASTER_PORT 127.0.0.1:{port}: another program")
    assert "--master_port=PORT" in said and "wait longer" not in said, said
    assert not distributed.is_distributed()


def test_a_negative_local_rank_on_a_cuda_machine_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """`LOCAL_RANK=-1` (left exported; some launchers' "not distributed") made `--device auto` or `cuda`
    on a GPU machine fail with torch's RuntimeError "Device index must not be negative", a traceback."""
    import torch

    from xfer.core import distributed
    from xfer.core.errors import UserError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setenv("LOCAL_RANK", "-1")
    for device in ("auto", "cuda"):
        with pytest.raises(UserError, match=rf"--device '{device}': this process is LOCAL_RANK=-1, but a node's"):
            distributed.select_device(device)
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert distributed.select_device("auto") == torch.device("cuda", 1)

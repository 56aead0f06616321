"""Checkpoint files: round trip, pointer ordering and fallback, temp-dir cleanup, weights-only
refusal of pickled objects, shape mismatches; RNG capture/restore through the stored formats."""

from __future__ import annotations

import collections
import json
import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from xfer.core import checkpoint as ckpt
from xfer.core import rng
from xfer.core.errors import CheckpointError


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(6, 3)
        self.proj = nn.Linear(3, 3)
        self.out = nn.Linear(3, 6, bias=False)
        self.out.weight = self.embed.weight  # tied input/output embeddings
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.proj(self.embed(ids))))


def trained(seed: int) -> tuple[Tied, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = Tied()
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.tensor([1, 2, 3])).sum().backward()
    opt.step()
    model.count += 3
    return model, opt


def payload(step: int, model: nn.Module | None = None, **state) -> ckpt.CheckpointPayload:
    model = model if model is not None else nn.Linear(2, 2)
    return ckpt.CheckpointPayload(
        step, {"model": model}, {}, {"optimizer": {"state": {}, "param_groups": []}}, {"step": step, **state}
    )


def steps(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("step-"))


def test_round_trip(tmp_path: Path) -> None:
    model, opt = trained(0)
    extra = {"shadow.a": torch.arange(6.0).reshape(2, 3), "shadow.b": torch.tensor([1, 2], dtype=torch.int32)}
    state = {"step": 12, "data": {"epoch": 1, "offset": 3}, "best_metric": 0.5, "names": ["a", "b"]}
    path = ckpt.save_checkpoint(
        tmp_path / "ck",
        ckpt.CheckpointPayload(12, {"model": model}, {"ema": extra}, {"optimizer": opt.state_dict()}, state),
    )
    assert path == tmp_path / "ck" / "step-0000012"
    assert sorted(p.name for p in path.iterdir()) == [
        "ema.safetensors",
        "manifest.json",
        "model.safetensors",
        "optimizer.pt",
        "state.json",
    ]
    assert (tmp_path / "ck" / "latest").read_text().strip() == "step-0000012"
    assert not list((tmp_path / "ck").glob(".*")), "no temp dirs or pointer temp files left behind"

    fresh, fresh_opt = trained(1)
    assert not torch.equal(fresh.proj.weight, model.proj.weight)
    ckpt.load_module(path, "model", fresh)
    for name, tensor in model.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], tensor), name
    assert fresh.out.weight is fresh.embed.weight, "tying survives loading"
    assert int(fresh.count) == 3, "buffers are saved too"

    loaded = ckpt.load_tensors(path, "ema")
    assert loaded.keys() == extra.keys() and all(torch.equal(loaded[k], extra[k]) for k in extra)
    assert loaded["shadow.b"].dtype == torch.int32

    fresh_opt.load_state_dict(ckpt.load_torch_state(path, "optimizer"))
    for p_old, p_new in zip(opt.param_groups[0]["params"], fresh_opt.param_groups[0]["params"], strict=True):
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(opt.state[p_old][key], fresh_opt.state[p_new][key])
    assert ckpt.load_state(path) == state


def test_latest_pointer_is_written_after_the_complete_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "ck"
    calls: list[tuple[str, list[str]]] = []
    original = ckpt.write_pointer

    def spy(path: Path, target: str) -> None:
        calls.append((path.name, sorted(p.name for p in (directory / target).iterdir())))
        assert not list(directory.glob(".tmp-*")), "the checkpoint must be renamed into place before the pointer moves"
        original(path, target)

    monkeypatch.setattr(ckpt, "write_pointer", spy)
    ckpt.save_checkpoint(directory, payload(1), best=True)
    complete = ["manifest.json", "model.safetensors", "optimizer.pt", "state.json"]
    assert calls == [("latest", complete), ("best", complete)]


def test_crash_before_pointer_keeps_previous_latest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "ck"
    ckpt.save_checkpoint(directory, payload(1))

    def dies(path: Path, target: str) -> None:
        raise KeyboardInterrupt("killed while updating the pointer")

    monkeypatch.setattr(ckpt, "write_pointer", dies)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save_checkpoint(directory, payload(2))
    monkeypatch.undo()
    assert ckpt.latest_checkpoint(directory) == directory / "step-0000001"
    # the next save overwrites the orphaned step dir and moves on
    ckpt.save_checkpoint(directory, payload(2, marker="second try"))
    assert ckpt.load_state(ckpt.latest_checkpoint(directory))["marker"] == "second try"


def test_latest_checkpoint_fallback(tmp_path: Path) -> None:
    directory = tmp_path / "ck"
    assert ckpt.latest_checkpoint(directory) is None, "no directory yet"
    for step in (3, 20, 100):
        ckpt.save_checkpoint(directory, payload(step), keep=5)
    assert ckpt.latest_checkpoint(directory) == directory / "step-0000100"
    (directory / "latest").unlink()
    assert ckpt.latest_checkpoint(directory) == directory / "step-0000100"
    # an incomplete step dir (no state.json) and a temp dir are not checkpoints
    (directory / "step-0000200").mkdir()
    (directory / "step-0000200" / "model.safetensors").write_bytes(b"")
    tmp = directory / ".tmp-step-0000300-999999"
    tmp.mkdir()
    (tmp / "state.json").write_text('{"step": 300}')
    backup = directory / "step-0000100.bak"  # a copy someone made by hand is not a step dir either
    backup.mkdir()
    (backup / "state.json").write_text('{"step": 100}')
    assert ckpt.latest_checkpoint(directory) == directory / "step-0000100"
    # a pointer naming a vanished checkpoint falls back too
    ckpt.write_pointer(directory / "latest", "step-0000500")
    assert ckpt.latest_checkpoint(directory) == directory / "step-0000100"
    ckpt.write_pointer(directory / "latest", "step-0000020")
    assert ckpt.latest_checkpoint(directory) == directory / "step-0000020", "the pointer wins over directory order"


@pytest.mark.parametrize(
    "pointer",
    [b"\x80\x02garbage\xff", b"", b"../../other/checkpoints/step-0000020", b"step-0000020/../step-0000003", None],
)
def test_a_damaged_latest_pointer_falls_back_to_the_newest_complete_checkpoint(
    tmp_path: Path, pointer: bytes | None
) -> None:
    """Garbage bytes in `latest` were a UnicodeDecodeError traceback at every resume, a folder in
    its place an IsADirectoryError, and a path out of the folder was followed: another run's
    checkpoint (with a state.json) would have been resumed."""
    directory = tmp_path / "run" / "checkpoints"
    other = tmp_path / "other" / "checkpoints"
    for step in (3, 20):
        ckpt.save_checkpoint(directory, payload(step), keep=5)
    ckpt.save_checkpoint(other, payload(20), keep=5)
    (directory / "latest").unlink()
    if pointer is None:
        (directory / "latest").mkdir()
    else:
        (directory / "latest").write_bytes(pointer)
    assert ckpt.read_pointer(directory / "latest") is None
    assert ckpt.latest_checkpoint(directory) == directory / "step-0000020"
    assert ckpt.load_latest_intact(directory) == directory / "step-0000020"


def test_stale_temp_dir_is_pruned(tmp_path: Path) -> None:
    directory = tmp_path / "ck"
    ckpt.save_checkpoint(directory, payload(1))
    stale = directory / ".tmp-step-0000002-424242"  # left by a process that died mid-write
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"partial")
    assert ckpt.latest_checkpoint(directory) == directory / "step-0000001"
    ckpt.save_checkpoint(directory, payload(2))
    assert not stale.exists()
    assert steps(directory) == ["step-0000002"]


@pytest.mark.parametrize("disk_full", [True, False])
def test_a_failed_save_leaves_no_partial_copy_and_names_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disk_full: bool
) -> None:
    """A half-written checkpoint must not keep the space whose lack made it fail; torch.save's
    RuntimeError on a full disk becomes the OSError (ENOSPC) the CLI reports in one line."""
    import errno
    import shutil

    directory = tmp_path / "ck"
    ckpt.save_checkpoint(directory, payload(1))

    def failing_save(*args: object, **kwargs: object) -> None:
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1072448 vs 1072340")

    monkeypatch.setattr(ckpt.torch, "save", failing_save)
    free = 0 if disk_full else 1 << 30
    monkeypatch.setattr(ckpt.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(1 << 30, 1 << 30, free))
    expected = OSError if disk_full else RuntimeError
    with pytest.raises(expected) as raised:
        ckpt.save_checkpoint(directory, payload(2))
    if disk_full:
        assert raised.value.errno == errno.ENOSPC
    assert not list(directory.glob(".tmp-*"))
    assert ckpt.latest_checkpoint(directory) == directory / "step-0000001"


def test_prune_keeps_recent_and_best(tmp_path: Path) -> None:
    directory = tmp_path / "ck"
    for step in range(1, 6):
        ckpt.save_checkpoint(directory, payload(step), keep=2, best=step == 2)
    assert steps(directory) == ["step-0000002", "step-0000004", "step-0000005"]
    assert ckpt.read_pointer(directory / "best") == directory / "step-0000002"
    ckpt.save_checkpoint(directory, payload(6), keep=1, best=True)
    assert steps(directory) == ["step-0000006"]


class Exploit:
    """Unpickling this runs os.mkdir(marker): what a malicious optimizer.pt could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (str(self.marker),))


class PlainObject:
    def __init__(self) -> None:
        self.value = 1


class SneakyDict(collections.OrderedDict):
    pass


@pytest.mark.parametrize("kind", ["reduce", "instance", "dict-subclass"])
def test_pickled_objects_are_refused(tmp_path: Path, kind: str) -> None:
    path = ckpt.save_checkpoint(tmp_path / "ck", payload(1))
    marker = tmp_path / "exploited"
    evil = {"reduce": Exploit(marker), "instance": PlainObject(), "dict-subclass": SneakyDict(a=torch.ones(1))}[kind]
    torch.save({"state": {}, "param_groups": [], "extra": evil}, path / "optimizer.pt")
    (path / "manifest.json").unlink()  # a crafted checkpoint brings a matching manifest, or none: no defence
    with pytest.raises(CheckpointError, match="weights-only") as info:
        ckpt.load_torch_state(path, "optimizer")
    assert str(path / "optimizer.pt") in str(info.value)
    assert not marker.exists(), "the pickled payload must not run"
    if kind == "reduce":  # the payload is live: an unsafe load would have run it
        torch.load(path / "optimizer.pt", weights_only=False)
        assert marker.is_dir()


def test_plain_containers_and_tensors_load(tmp_path: Path) -> None:
    path = ckpt.save_checkpoint(tmp_path / "ck", payload(1))
    torch.save(collections.OrderedDict(a=torch.ones(2), b=[1, 2.5, "x", None], c={"d": (True,)}), path / "optimizer.pt")
    (path / "manifest.json").unlink()
    loaded = ckpt.load_torch_state(path, "optimizer")
    assert (
        torch.equal(loaded["a"], torch.ones(2)) and loaded["b"] == [1, 2.5, "x", None] and loaded["c"] == {"d": (True,)}
    )


def test_mismatched_model_is_refused(tmp_path: Path) -> None:
    path = ckpt.save_checkpoint(tmp_path / "ck", payload(1, nn.Linear(4, 3)))
    file = str(path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"does not match the model") as info:
        ckpt.load_module(path, "model", nn.Linear(4, 5))
    assert file in str(info.value) and "weight" in str(info.value)
    with pytest.raises(
        CheckpointError, match=r"does not match the model \(missing: \['1\.bias', '1\.weight'\]"
    ) as info:
        ckpt.load_module(path, "model", nn.Sequential(nn.Identity(), nn.Linear(4, 3)))
    assert file in str(info.value)


def test_missing_files_and_bad_state(tmp_path: Path) -> None:
    path = ckpt.save_checkpoint(tmp_path / "ck", payload(1))
    for call in (
        lambda: ckpt.load_module(path, "ema", nn.Linear(2, 2)),
        lambda: ckpt.load_tensors(path, "rng"),
        lambda: ckpt.load_torch_state(path, "scheduler"),
    ):
        with pytest.raises(CheckpointError, match="missing from checkpoint"):
            call()
    (path / "state.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"state\.json: unreadable checkpoint state"):
        ckpt.load_state(path)


def test_rng_capture_restore_through_stored_formats(tmp_path: Path) -> None:
    rng.seed_everything(11)
    random.gauss(0, 1)  # leaves a cached gaussian in Python's generator
    np.random.randn()  # ... and in NumPy's legacy generator
    torch.rand(3)
    json_state, tensors = rng.capture()
    text = json.dumps(json_state)  # what state.json stores
    save_file(tensors, str(tmp_path / "rng.safetensors"))

    def draw() -> tuple:
        return random.gauss(0, 1), random.random(), np.random.randn(), np.random.rand(), torch.rand(4), torch.randn(2)

    expected = draw()
    draw()
    rng.restore(json.loads(text), load_file(str(tmp_path / "rng.safetensors")))
    got = draw()
    assert got[:4] == expected[:4]
    assert torch.equal(got[4], expected[4]) and torch.equal(got[5], expected[5])


# --- damaged checkpoints: detection, moving aside, falling back ----------------------------------


def damage(file: Path, how: str) -> None:
    data = file.read_bytes()
    if how == "truncate":
        file.write_bytes(data[: len(data) // 2])
    elif how == "flip":  # one byte inside the tensor data, same size: only the hash can tell
        file.write_bytes(data[:-3] + bytes([data[-3] ^ 0xFF]) + data[-2:])
    else:
        file.write_text(how)


def test_manifest_records_every_file(tmp_path: Path) -> None:
    path = ckpt.save_checkpoint(tmp_path / "ck", payload(1))
    manifest = json.loads((path / "manifest.json").read_text())
    assert sorted(manifest["files"]) == ["model.safetensors", "optimizer.pt", "state.json"]
    entry = manifest["files"]["model.safetensors"]
    assert entry["size"] == (path / "model.safetensors").stat().st_size and len(entry["sha256"]) == 64
    ckpt.verify_checkpoint(path)


@pytest.mark.parametrize(
    ("file", "how", "message"),
    [
        ("model.safetensors", "truncate", "truncated or altered"),
        ("model.safetensors", "flip", "corrupted"),
        ("optimizer.pt", "truncate", "truncated or altered"),
        ("state.json", "{not json", "truncated or altered"),
        ("manifest.json", "{not json", "unreadable checkpoint manifest"),
    ],
)
def test_damage_is_detected_naming_the_file(tmp_path: Path, file: str, how: str, message: str) -> None:
    path = ckpt.save_checkpoint(tmp_path / "ck", payload(1, nn.Linear(8, 8)))
    damage(path / file, how)
    with pytest.raises(CheckpointError, match=message) as info:
        ckpt.verify_checkpoint(path)
    assert str(path / file) in str(info.value)


def test_missing_file_is_detected(tmp_path: Path) -> None:
    path = ckpt.save_checkpoint(tmp_path / "ck", payload(1))
    (path / "optimizer.pt").unlink()
    with pytest.raises(CheckpointError, match=r"optimizer\.pt: missing from checkpoint"):
        ckpt.verify_checkpoint(path)


@pytest.mark.parametrize(("file", "how"), [("model.safetensors", "truncate"), ("optimizer.pt", "truncate")])
def test_checkpoints_without_manifest_are_checked_structurally(tmp_path: Path, file: str, how: str) -> None:
    path = ckpt.save_checkpoint(tmp_path / "ck", payload(1, nn.Linear(8, 8)))
    (path / "manifest.json").unlink()  # as written before manifests existed
    ckpt.verify_checkpoint(path)
    damage(path / file, how)
    with pytest.raises(CheckpointError, match="truncated") as info:
        ckpt.verify_checkpoint(path)
    assert str(path / file) in str(info.value)


def test_loading_a_truncated_file_names_it_instead_of_a_safetensors_traceback(tmp_path: Path) -> None:
    path = ckpt.save_checkpoint(
        tmp_path / "ck", ckpt.CheckpointPayload(1, {"model": nn.Linear(8, 8)}, {"rng": {"a": torch.ones(64)}}, {}, {})
    )
    damage(path / "model.safetensors", "truncate")
    damage(path / "rng.safetensors", "truncate")
    # the manifest catches it first when present ...
    with pytest.raises(CheckpointError, match=r"model\.safetensors: truncated or altered"):
        ckpt.load_module(path, "model", nn.Linear(8, 8))
    with pytest.raises(CheckpointError, match=r"rng\.safetensors: truncated or altered"):
        ckpt.load_tensors(path, "rng")
    # ... and the loaders name the file without one
    (path / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match=r"model\.safetensors: truncated or corrupted"):
        ckpt.load_module(path, "model", nn.Linear(8, 8))
    with pytest.raises(CheckpointError, match=r"rng\.safetensors: truncated or corrupted"):
        ckpt.load_tensors(path, "rng")


def test_every_load_checks_the_file_against_the_manifest(tmp_path: Path) -> None:
    model = nn.Linear(8, 8)
    path = ckpt.save_checkpoint(tmp_path / "ck", payload(1, model))
    ckpt.load_module(path, "model", nn.Linear(8, 8))
    damage(path / "model.safetensors", "flip")  # still a valid safetensors file, other weights
    with pytest.raises(CheckpointError, match=r"model\.safetensors: corrupted \(sha256"):
        ckpt.load_module(path, "model", nn.Linear(8, 8))


def test_damaged_latest_is_moved_aside_and_the_previous_one_is_used(tmp_path: Path) -> None:
    directory = tmp_path / "ck"
    for step in (5, 10):
        ckpt.save_checkpoint(directory, payload(step, nn.Linear(8, 8)), keep=2)
    damage(directory / "step-0000010" / "model.safetensors", "truncate")
    warnings: list[str] = []
    assert ckpt.load_latest_intact(directory, warnings.append) == directory / "step-0000005"
    (moved,) = directory.glob("corrupt-step-0000010-*")
    (message,) = warnings
    assert message.startswith("checkpoint step 10 is damaged (")
    assert "model.safetensors: truncated or altered" in message
    assert f"moved to {moved}" in message and message.endswith(f"resuming from step 5 ({directory / 'step-0000005'})")
    assert ckpt.latest_checkpoint(directory) == directory / "step-0000005"
    assert (directory / "latest").read_text().strip() == "step-0000005", "the pointer names the fallback"
    assert steps(directory) == ["step-0000005"]
    # an intact latest: no warning, nothing moved
    assert ckpt.load_latest_intact(directory, warnings.append) == directory / "step-0000005"
    assert len(warnings) == 1
    # the next save and prune leave the damaged copy alone for inspection
    ckpt.save_checkpoint(directory, payload(15, nn.Linear(8, 8)), keep=1)
    assert steps(directory) == ["step-0000015"] and moved.exists()


def test_no_intact_checkpoint_left_starts_fresh(tmp_path: Path) -> None:
    directory = tmp_path / "ck"
    ckpt.save_checkpoint(directory, payload(5), keep=1)
    damage(directory / "step-0000005" / "state.json", "")
    warnings: list[str] = []
    assert ckpt.load_latest_intact(directory, warnings.append) is None
    assert len(warnings) == 1 and "starting this run from step 0" in warnings[0]
    assert not (directory / "latest").exists() and steps(directory) == []
    assert ckpt.load_latest_intact(tmp_path / "never-written") is None


def test_damaged_best_is_moved_aside_too(tmp_path: Path) -> None:
    directory = tmp_path / "ck"
    ckpt.save_checkpoint(directory, payload(5), keep=1, best=True)
    ckpt.save_checkpoint(directory, payload(10), keep=2)
    ckpt.save_checkpoint(directory, payload(15), keep=2)
    assert steps(directory) == ["step-0000005", "step-0000010", "step-0000015"]
    damage(directory / "step-0000015" / "optimizer.pt", "truncate")
    damage(directory / "step-0000005" / "model.safetensors", "flip")
    warnings: list[str] = []
    assert ckpt.load_latest_intact(directory, warnings.append) == directory / "step-0000010"
    assert [w.split(" is damaged")[0] for w in warnings] == ["checkpoint step 15", "checkpoint step 5"]
    assert steps(directory) == ["step-0000010"]

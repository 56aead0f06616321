"""Crash-safe checkpoints: safetensors weights, JSON state, weights-only optimizer state.

Layout of `checkpoints/`:

    step-0000400/         one complete checkpoint
      model.safetensors   module weights (shared/tied tensors handled by safetensors)
      ema.safetensors     EMA weights, when EMA is on
      optimizer.pt        optimizer state, read back with torch.load(weights_only=True)
      rng.safetensors     torch CPU/CUDA generator states
      metric_sums.safetensors  training metrics summed since the last log (resume logs the same averages)
      state.json          step, data cursor, Python/NumPy RNG, best metric, ...
      manifest.json       size and sha256 of every file above, written last; its `format` (FORMAT)
                          above this xfer's is refused (NewerCheckpointError), never taken for damage
    corrupt-step-0000400-20261124T120000/   a damaged checkpoint moved aside on resume
    latest                text file naming the newest complete checkpoint
    best                  text file naming the best checkpoint (by the evaluator's metric)

A checkpoint is written into `.tmp-step-0000400-<pid>/`, every file fsynced, then renamed into
place; only after that is `latest` replaced (atomically). A crash at any moment leaves the
previous checkpoint and pointer intact. A re-save at a step already written (the final save at
a periodic one's step) first renames the old copy aside to `.old-step-0000400-<pid>/`, deleted
once the new one is in place; the next save or resume puts it back if the process died before.
Nothing is ever unpickled: a pickled object inside `optimizer.pt` makes loading fail with a
CheckpointError.

Damage after the fact (a truncated copy, a flipped byte, a filesystem that lied about fsync)
is caught by `manifest.json`: `verify_checkpoint` re-hashes every file before a resume.
`load_latest_intact` (what the trainer resumes through) moves a damaged checkpoint aside to
`corrupt-step-...`, says so naming the file and the step it falls back to, and resumes from the
newest intact one, or starts fresh; the checkpoint `best` names is checked (and moved aside) too.
How far back it can fall depends on `keep_checkpoints` (the default 1 keeps only the latest plus
the best): the previous checkpoint is pruned as soon
as the new one is complete, so keeping a spare costs disk and is the user's choice. Checkpoints
written before manifests existed are checked structurally (safetensors headers against file
sizes, the optimizer zip's CRCs, state.json parsing).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import pickle
import re
import shutil
import struct
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from xfer.core import distributed as dist
from xfer.core.atomic import as_created, atomic_write_text, fsync_dir, fsync_file
from xfer.core.errors import CheckpointError

_STEP_DIR = re.compile(r"^step-(\d+)$")
MANIFEST = "manifest.json"
FORMAT = 1
"""The checkpoint layout this xfer writes (`format` in manifest.json) and the newest it can read."""


class NewerCheckpointError(CheckpointError):
    """A checkpoint written in a newer layout than this xfer reads (its manifest's `format`): not damage,
    so resume must not move it aside and start over, and loading it as this layout could misread it."""


def write_pointer(path: Path, target: str) -> None:
    """Atomically point `path` (e.g. checkpoints/latest) at `target`.

    A symbolic link at `path` is replaced, not written through: `atomic_write_text` follows links (for
    a user's `--out link.jsonl`), so a `latest` linked to another run's (a run folder copied as links,
    which `--fork` keeps below the top level) repointed that run at this run's step, and its resume
    then fell back to whatever step folder it had. Killed between the two, `latest` is missing, which
    `latest_checkpoint` falls back from (and `best` is repaired from the resumed checkpoint's state)."""
    if path.is_symlink():
        path.unlink()
    atomic_write_text(path, target + "\n")


def read_pointer(path: Path) -> Path | None:
    """The complete checkpoint the pointer file `path` names, or None (then `latest_checkpoint`
    falls back to the newest complete step folder): when it is missing, unreadable (garbage
    bytes, a folder), or names anything but a step folder next to it — a hand-edited
    `../../trial-1/checkpoints/step-...` would resume another run's weights."""
    try:
        name = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not _STEP_DIR.match(name):
        return None
    target = path.parent / name
    return target if (target / "state.json").exists() else None


def evaluated_checkpoint(checkpoints: Path, name: str, what: str) -> Path:
    """The checkpoint `name` in `checkpoints` that a finished trial (`what`, e.g. "trial 2 of
    glue/rte (accuracy 71.5)") was evaluated with, for exporting its model. Missing, it is a
    CheckpointError: exporting another one (the latest) would pair its weights with the metrics
    that the trial's record reports."""
    path = checkpoints / name
    if not path.is_dir():
        raise CheckpointError(
            f"{path}: the checkpoint that {what} was evaluated with is missing, so its model cannot be "
            f"exported; delete {checkpoints.parent} to train that trial again"
        )
    return path


def step_dir_name(step: int) -> str:
    return f"step-{step:07d}"


@dataclass
class CheckpointPayload:
    """What the trainer stores; `modules` are saved with safetensors, `torch_state` weights-only."""

    step: int
    modules: dict[str, nn.Module]
    tensors: dict[str, dict[str, torch.Tensor]]
    torch_state: dict[str, Any]
    state: dict[str, Any]


def save_checkpoint(directory: Path, payload: CheckpointPayload, keep: int = 1, best: bool = False) -> Path:
    """Write a complete checkpoint, update `latest` (and `best`), prune old ones. Returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    _restore_replaced(directory)  # a save killed while replacing a checkpoint: finish or undo it first
    _remove_partial_writes(directory, keep_own=False)  # a killed or failed save's leftovers first
    name = step_dir_name(payload.step)
    tmp = directory / f".tmp-{name}-{os.getpid()}"
    tmp.mkdir()
    try:
        _write_checkpoint_files(tmp, payload)
    except BaseException as exc:  # a full disk, Ctrl-C: leave no half-written copy taking the space
        full = shutil.disk_usage(directory).free < _FULL_DISK_BYTES
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) or not isinstance(exc, Exception):
            raise
        reported = _OS_ERROR.search(str(exc))  # safetensors: "I/O error: Disk quota exceeded (os error 122)"
        if reported:
            number = int(reported.group(1))
            raise OSError(number, os.strerror(number), str(tmp)) from exc
        if full:  # torch.save reports ENOSPC as a RuntimeError without the number
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp)) from exc
        raise
    final = directory / name
    if final.exists():  # a re-save at this step (a final save after a periodic one), or a leftover
        _replace(final, tmp)
    else:
        os.rename(tmp, final)
        fsync_dir(directory)
    write_pointer(directory / "latest", name)
    if best:
        write_pointer(directory / "best", name)
    prune(directory, keep)
    return final


_OS_ERROR = re.compile(r"\(os error (\d+)\)")
"""How safetensors (Rust) names the OS error under its SafetensorError: a quota or a file-size
limit (EDQUOT, EFBIG) on a disk with free space ended the run in a traceback."""

_FULL_DISK_BYTES = 1 << 20
"""Less free space than this when a save fails: the disk is taken to be full."""


def _write_checkpoint_files(tmp: Path, payload: CheckpointPayload) -> None:
    """Every file of the checkpoint into `tmp`, each fsynced, the manifest last."""
    for key, module in payload.modules.items():
        save_model(module, str(tmp / f"{key}.safetensors"), force_contiguous=True)
    for key, tensors in payload.tensors.items():
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp / f"{key}.safetensors"))
    for key, obj in payload.torch_state.items():
        torch.save(obj, tmp / f"{key}.pt")
    (tmp / "state.json").write_text(json.dumps(payload.state, indent=1, sort_keys=True), encoding="utf-8")
    files = sorted(tmp.iterdir())
    for file in files:
        as_created(file)  # safetensors writes its files 0600
        fsync_file(file)
    manifest = {"format": FORMAT, "files": {f.name: _describe(f) for f in files}}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    fsync_file(tmp / MANIFEST)


_REPLACED = re.compile(r"^\.old-(step-\d+)-\d+$")
"""A checkpoint being replaced by a re-save at its step (`.old-step-0000400-<pid>`), until the new one is in."""


def _replace(final: Path, tmp: Path) -> None:
    """Put the complete checkpoint `tmp` in place of the one at `final`, losing neither at any moment.

    Why: the old copy was deleted before the new one was renamed in, so a kill in between (or during the
    delete) left `latest` naming a missing or half-deleted folder, and with `keep_checkpoints: 1` the run's
    only good checkpoint was gone: resume started over from step 0. A folder cannot be renamed over a
    non-empty one, so the old copy is renamed aside first, kept until the new one is in place;
    `_restore_replaced` puts it back if the process dies before that."""
    aside = final.with_name(f".old-{final.name}-{os.getpid()}")  # none left: `_restore_replaced` ran first
    os.rename(final, aside)
    os.rename(tmp, final)
    fsync_dir(final.parent)
    shutil.rmtree(aside, ignore_errors=True)


def _replaced_copies(directory: Path) -> list[tuple[Path, Path, bool]]:
    """(copy renamed aside, its step folder, whether it is to be put back) for each `.old-step-...` left in
    `directory`: put back when its step folder is missing (the new copy never arrived) and it is whole."""
    found = []
    for aside in sorted(directory.glob(".old-step-*")):
        match = _REPLACED.match(aside.name)
        if match is not None:
            final = directory / match.group(1)
            found.append((aside, final, not final.exists() and (aside / "state.json").exists()))
    return found


def _restore_replaced(directory: Path) -> None:
    """Finish or undo a replacement (`_replace`) that a killed process left half-done: the copy renamed
    aside goes back in place when the new one never arrived, else (replaced, or half-deleted) it is deleted."""
    for aside, final, put_back in _replaced_copies(directory):
        if not put_back:
            shutil.rmtree(aside, ignore_errors=True)
            continue
        try:
            os.rename(aside, final)
        except FileNotFoundError:  # another process put it back first
            continue
        fsync_dir(directory)


def _remove_partial_writes(directory: Path, keep_own: bool) -> None:
    """Delete `.tmp-*` folders of saves that never completed (only one process writes a
    checkpoint folder: the run directory is locked); `keep_own` spares this process's."""
    for stale in directory.glob(".tmp-*"):
        if not (keep_own and stale.name.endswith(f"-{os.getpid()}")):
            shutil.rmtree(stale, ignore_errors=True)


def prune(directory: Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints, never the one `best` or `latest` names."""
    protected = {p.name for p in (read_pointer(directory / "best"), read_pointer(directory / "latest")) if p}
    # by step number, not name: past 9,999,999 steps `step-10000000` sorts before `step-9999999`
    steps = sorted((p for p in directory.iterdir() if _STEP_DIR.match(p.name)), key=_step_of)
    for old in steps[: max(0, len(steps) - keep)]:
        if old.name not in protected:
            shutil.rmtree(old, ignore_errors=True)
    _remove_partial_writes(directory, keep_own=True)


def latest_checkpoint(directory: Path) -> Path | None:
    """The checkpoint `latest` names; if the pointer is missing, the newest complete step dir.

    A copy that a killed re-save left renamed aside (`.old-step-...`, its step folder missing) counts as
    its step's: resume puts it back (`_restore_replaced`), and this read-only look-up (`xfer status`, run
    while the trainer may be mid-save) must neither rename it nor report an older checkpoint instead."""
    pointed = read_pointer(directory / "latest")
    if pointed is not None:
        return pointed
    if not directory.exists():
        return None
    complete = sorted(
        (
            *(p for p in directory.iterdir() if _STEP_DIR.match(p.name) and (p / "state.json").exists()),
            *(aside for aside, _, put_back in _replaced_copies(directory) if put_back),
        ),
        key=_step_of,
    )
    return complete[-1] if complete else None


def _describe(file: Path) -> dict[str, Any]:
    """Size and sha256 of `file`, read in 1 MiB blocks (the manifest entry)."""
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return {"size": file.stat().st_size, "sha256": digest.hexdigest()}


def verify_checkpoint(path: Path) -> None:
    """Raise CheckpointError naming the first damaged file of the checkpoint at `path`.

    With a manifest every listed file must exist with its recorded size and sha256; without
    one (older checkpoints) each file is checked for internal consistency.
    """
    entries = _manifest(path)
    if entries is None:
        _verify_structure(path)
        return
    for name in sorted(entries):
        _verify_file(path, name, entries)
    for file in sorted([*path.glob("*.safetensors"), *path.glob("*.pt")]):
        _verify_file(path, file.name, entries)  # one the save did not write: refused, as when it is loaded
    load_state(path)  # also a JSON object the trainer can use


def _manifest(path: Path) -> dict[str, Any] | None:
    """The manifest's file entries, or None for a checkpoint written before manifests."""
    manifest_file = path / MANIFEST
    if not manifest_file.exists():
        return None
    try:
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        entries = dict(manifest["files"])
        version = manifest.get("format", FORMAT)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"{manifest_file}: unreadable checkpoint manifest: {exc}") from None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(f"{manifest_file}: unreadable checkpoint manifest: format {version!r}")
    for name, entry in entries.items():
        # Checked here, where a CheckpointError moves the checkpoint aside: a damaged entry (`"model.safetensors":
        # null`) ended resume in an AttributeError traceback, and a name like `../x` would hash a file outside it.
        if not isinstance(entry, dict) or not isinstance(name, str) or Path(name).name != name or name in {".", ".."}:
            raise CheckpointError(f"{manifest_file}: unreadable checkpoint manifest: bad entry {name!r}: {entry!r}")
    if version > FORMAT:
        # A newer xfer's checkpoint (a run directory shared with a newer install) was read as this layout,
        # or, if anything in it failed to load, moved aside as damaged and the stage started over.
        raise NewerCheckpointError(
            f"{path}: written by a newer xfer (checkpoint format {version}; this one reads format {FORMAT} "
            f"and older): resume it with that xfer (upgrade this one), or delete {path.parent} to train "
            "from the start"
        )
    return entries


_verified: set[tuple[str, int, int]] = set()  # (file, size, mtime) already hashed: resume hashes once


def _verify_file(path: Path, name: str, entries: dict[str, Any] | None = None) -> None:
    """Check one file against the manifest (if the checkpoint has one) before it is loaded."""
    entries = _manifest(path) if entries is None else entries
    if entries is None:
        return
    file = path / name
    if name not in entries:
        # Not written by the save (a stray `ema.safetensors` copied in): unchecked, it was loaded as this
        # checkpoint's, and an export applied such EMA weights over the model's, silently.
        if file.exists():
            raise CheckpointError(f"{file}: not part of the checkpoint (not in its {MANIFEST}); remove it")
        return
    expected = entries[name]
    if not file.is_file():
        raise CheckpointError(f"{file}: missing from checkpoint")
    stat = file.stat()
    key = (str(file), stat.st_size, stat.st_mtime_ns)
    if key in _verified:
        return
    if stat.st_size != expected.get("size"):
        raise CheckpointError(f"{file}: truncated or altered ({stat.st_size} bytes, {expected.get('size')} written)")
    if _describe(file)["sha256"] != expected.get("sha256"):
        raise CheckpointError(f"{file}: corrupted (sha256 differs from the one recorded at save time)")
    _verified.add(key)


def _verify_structure(path: Path) -> None:
    """Best-effort checks for a checkpoint without a manifest: every file must parse and be complete."""
    load_state(path)
    for file in sorted(path.glob("*.safetensors")):
        _check_safetensors(file)
    for file in sorted(path.glob("*.pt")):
        try:
            with zipfile.ZipFile(file) as archive:
                bad = archive.testzip()
        except (OSError, zipfile.BadZipFile) as exc:
            raise CheckpointError(f"{file}: truncated or corrupted ({exc})") from None
        if bad is not None:
            raise CheckpointError(f"{file}: corrupted (member {bad} fails its CRC check)")


def _check_safetensors(file: Path) -> None:
    """A safetensors file is 8 bytes of header length, a JSON header, then exactly the data it lists."""
    size = file.stat().st_size
    try:
        with open(file, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > size - 8:
                raise ValueError(f"header of {length} bytes in a {size}-byte file")
            header = json.loads(handle.read(length))
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
        if not isinstance(end, int) or isinstance(end, bool):  # a tampered header: `"data_offsets": ["0", "4"]`
            raise ValueError(f"data offset {end!r} is not a number")
    except (OSError, struct.error, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        # AttributeError: a header that is a JSON array, not an object (it ended resume in a traceback)
        raise CheckpointError(f"{file}: truncated or corrupted ({exc})") from None
    if 8 + length + end != size:
        raise CheckpointError(f"{file}: truncated or altered ({size} bytes, header describes {8 + length + end})")


def _step_of(path: Path) -> int:
    """The step of a step folder, or of a copy renamed aside from one (`.old-step-...`); -1 for others."""
    replaced = _REPLACED.match(path.name)
    match = _STEP_DIR.match(replaced.group(1) if replaced else path.name)
    return int(match.group(1)) if match else -1


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def move_aside(path: Path) -> Path:
    """Rename a damaged checkpoint to `corrupt-<name>-<time>` (kept for inspection, ignored by resume)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"corrupt-{path.name}-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"corrupt-{path.name}-{stamp}-{n}")
    os.rename(path, target)
    fsync_dir(path.parent)
    return target


def _select_intact(directory: Path, warn: Callable[[str], None]) -> Path | None:
    """Newest checkpoint that verifies, and the best one checked too; damaged ones are moved aside. Rank 0 only."""
    _restore_replaced(directory)  # a re-save killed half-way: its step's checkpoint is back in place
    damaged: list[tuple[Path, Path, str]] = []

    def intact(path: Path) -> bool:
        try:
            verify_checkpoint(path)
        except NewerCheckpointError:
            raise  # not damage: never moved aside, and no older checkpoint taken in its place
        except CheckpointError as exc:
            damaged.append((path, move_aside(path), str(exc)))
            return False
        return True

    chosen = None
    while (candidate := latest_checkpoint(directory)) is not None:
        if intact(candidate):
            chosen = candidate
            break
    # The best checkpoint too, even behind an intact latest one: `select: best` loads it when training
    # ends, and a damaged one failed the stage there on every re-run, after the resume had found nothing
    # wrong. Moved aside, the trainer chooses the best one again (`Trainer._reconcile_best`).
    best = read_pointer(directory / "best")
    if best is not None and best != chosen:
        intact(best)
    if not damaged:
        return chosen
    if chosen is not None:
        write_pointer(directory / "latest", chosen.name)
    else:
        (directory / "latest").unlink(missing_ok=True)
    fallback = (
        f"resuming from step {_step_of(chosen)} ({chosen})"
        if chosen
        else "no intact checkpoint is left: starting this run from step 0"
    )
    for original, moved, reason in damaged:
        warn(f"checkpoint step {_step_of(original)} is damaged ({reason}); moved to {moved}; {fallback}")
    return chosen


def load_latest_intact(directory: Path, warn: Callable[[str], None] = _warn) -> Path | None:
    """The newest intact checkpoint to resume from, or None to start fresh.

    Rank 0 verifies candidates newest first (manifest sizes and hashes), moves damaged ones aside
    with a warning that names the file and the step resumed from, and repoints `latest`; every
    rank then gets the same answer. Every process of a distributed run must call it.

    A CheckpointError of rank 0's (a checkpoint from a newer xfer) is raised on every rank, as each
    rank's own error: the others waited for rank 0's answer until its exit closed the connection, and
    ended in gloo's "Connection closed by peer", said as a process lost "without an error of its own".
    Other errors (an OSError) are not passed on: raised on the other ranks too, the runner could name
    one of them as the rank that failed ("rank 1 failed: rank 0 failed: ...").
    """
    chosen, failure, error = None, None, None
    if dist.is_main() and directory.exists():
        try:
            chosen = _select_intact(directory, warn)
        except CheckpointError as exc:  # raised below, after the other ranks have heard of it
            failure, error = exc, (isinstance(exc, NewerCheckpointError), str(exc))
    name, error = dist.broadcast_object((None if chosen is None else chosen.name, error))
    if failure is not None:
        raise failure
    if error is not None:
        newer, message = error
        raise NewerCheckpointError(message) if newer else CheckpointError(message)
    return None if name is None else directory / name


def load_state(path: Path) -> dict[str, Any]:
    try:
        state = json.loads((path / "state.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{path / 'state.json'}: unreadable checkpoint state: {exc}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path / 'state.json'}: unreadable checkpoint state: not a JSON object")
    return state


def load_module(path: Path, key: str, module: nn.Module) -> None:
    file = path / f"{key}.safetensors"
    if not file.exists():
        raise CheckpointError(f"{file}: missing from checkpoint")
    _verify_file(path, file.name)
    try:
        missing, unexpected = load_model(module, str(file), strict=False)
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"{file}: truncated or corrupted ({exc})") from None
    except RuntimeError as exc:  # load_state_dict: size mismatch (raised even with strict=False)
        details = "; ".join(line.strip() for line in str(exc).splitlines()[1:4]) or str(exc)
        raise CheckpointError(f"{file}: does not match the model ({details})") from None
    if missing or unexpected:
        raise CheckpointError(
            f"{file}: does not match the model (missing: {sorted(missing)[:5]}, unexpected: {sorted(unexpected)[:5]})"
        )


def load_tensors(path: Path, key: str) -> dict[str, torch.Tensor]:
    file = path / f"{key}.safetensors"
    if not file.exists():
        raise CheckpointError(f"{file}: missing from checkpoint")
    _verify_file(path, file.name)
    try:
        return load_file(str(file))
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"{file}: truncated or corrupted ({exc})") from None


def load_torch_state(path: Path, key: str, map_location: str | torch.device = "cpu") -> Any:
    """Load `key.pt` with `weights_only=True`: tensors and plain containers only, never code."""
    file = path / f"{key}.pt"
    if not file.exists():
        raise CheckpointError(f"{file}: missing from checkpoint")
    _verify_file(path, file.name)
    if not zipfile.is_zipfile(file):
        raise CheckpointError(f"{file}: truncated or corrupted (not a complete torch zip archive)")
    try:
        return torch.load(file, map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, AttributeError, TypeError) as exc:
        raise CheckpointError(
            f"{file}: refused to load: it is not a weights-only file (it would unpickle arbitrary objects): "
            f"{str(exc).splitlines()[0]}"
        ) from None
    except (EOFError, ValueError) as exc:
        # A complete zip whose records are not torch's (an empty data.pkl, a `byteorder` of garbage, a
        # string that is not UTF-8): a bare EOFError/ValueError traceback naming no file, even behind a
        # manifest that matches it (the manifest is the checkpoint's own, no defence against crafting).
        raise CheckpointError(f"{file}: truncated or corrupted ({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type when it has none (a bare EOFError)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

"""Hostile review of fingerprints, file lists and model directories (what a stage is said to read
must be what it reads; what is written must not silently replace something else)."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

import pytest

from xfer.core.config import Files
from xfer.core.recipes.recipe import load_recipe
from xfer.core.recipes.schema import INVALID, Validator
from xfer.core.recipes.yamlsrc import parse_text
from xfer.core.runs import fingerprint
from xfer.core.runs.fingerprint import FileHasher
from xfer.testing import make_host, write_recipe


def _signed(config: object, hasher: FileHasher | None = None) -> dict[str, dict[str, str]]:
    return fingerprint.signed_inputs(config, hasher or FileHasher(), "stages.v.files")


def test_a_folder_matched_by_a_glob_is_not_signed_since_the_stage_does_not_read_it(tmp_path: Path) -> None:
    """`data/*` next to `data/sub/` signed every file under `data/sub/`, which the stage skips
    (`StageContext.resolve_files` keeps files only): editing an unrelated file there re-ran it."""
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text("one two\n")
    (data / "sub" / "notes.bin").write_text("x\n")
    recipe = load_recipe(
        write_recipe(tmp_path, "stages:\n  v: {kind: transformer.vocab, files: ['data/*'], size: 50}\n"),
        host=make_host(autoload=True),
    )
    config = recipe.stages["v"].config.files
    hasher = FileHasher()
    before = _signed(config, hasher)
    assert list(before["stages.v.files"]) == [str(data / "a.txt")]
    (data / "sub" / "notes.bin").write_text("changed\n")
    (data / "sub" / "more.txt").write_text("new\n")
    assert _signed(config, hasher) == before
    (data / "a.txt").write_text("one three\n")  # what the stage reads still counts
    after = _signed(config, hasher)
    assert fingerprint.explain_change({"inputs": before}, {"inputs": after}) == ["input stages.v.files: a.txt changed"]


def test_a_folder_written_without_a_glob_still_signs_its_files(tmp_path: Path) -> None:
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "b.txt").write_text("b\n")
    files = Files((str(folder),), ())
    signed = _signed(files)
    assert list(signed["stages.v.files"]) == [str(folder / "sub" / "b.txt")]


def test_globs_that_match_no_folder_keep_their_fingerprint(tmp_path: Path) -> None:
    """Only stages whose glob matched a folder holding files the glob does not match get a new
    fingerprint: `**/*.txt`, `*.txt` and `data/**` over a tree without hidden files sign as before."""
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text("a\n")
    (data / "sub" / "b.txt").write_text("b\n")
    for pattern, expected in [
        (f"{data}/**/*.txt", [data / "a.txt", data / "sub" / "b.txt"]),
        (f"{data}/*.txt", [data / "a.txt"]),
        (f"{data}/**", [data / "a.txt", data / "sub" / "b.txt"]),
    ]:
        signed = _signed(Files((pattern,), ()))["stages.v.files"]
        assert sorted(signed) == [str(p) for p in expected], pattern


def test_model_dir_files_that_share_a_name_are_refused(tmp_path: Path) -> None:
    """`files` are copied by base name: the second `vocab.json` replaced the first, and a file named
    `model.safetensors` replaced the weights (the directory then failed to load), without a word."""
    import torch

    from xfer.transformer.modelio import load_model_dir, save_model_dir

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "vocab.json").write_text("A\n")
    (tmp_path / "b" / "vocab.json").write_text("B\n")
    (tmp_path / "model.safetensors").write_text("not weights\n")
    (tmp_path / "xfer_model.json").write_text("{}\n")
    module = {"lin": torch.nn.Linear(2, 2)}
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"a/vocab.json and .*b/vocab.json into a model directory: both are named"):
        save_model_dir(out, module, files=[tmp_path / "a" / "vocab.json", tmp_path / "b" / "vocab.json"])
    for own in ("model.safetensors", "xfer_model.json"):
        with pytest.raises(ValueError, match=f"{own} is the directory's own file"):
            save_model_dir(out, module, files=[tmp_path / own])
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    save_model_dir(out, module, files=[tmp_path / "a" / "vocab.json"])
    assert (out / "vocab.json").read_text() == "A\n"
    assert set(load_model_dir(out).state_dicts["lin"]) == {"weight", "bias"}


def test_a_killed_write_left_in_outputs_is_no_output(tmp_path: Path) -> None:
    """`.model.tmp-k3j2x/` (a `save_model_dir` killed before its rename) and `.vocab.txt.tmp-4242`
    (an atomic write killed before its rename) were recorded as outputs of the stage: hashed at its
    completion, and reported deleted once cleaned up."""
    out = tmp_path / "outputs"
    (out / "model").mkdir(parents=True)
    (out / "model" / "model.safetensors").write_bytes(b"w")
    (out / ".model.tmp-k3j2x").mkdir()
    (out / ".model.tmp-k3j2x" / "model.safetensors").write_bytes(b"partial")
    (out / ".model.old-ab_12").mkdir()
    (out / ".model.old-ab_12" / "d").write_bytes(b"previous")
    (out / "tok").mkdir()
    (out / "tok" / ".vocab.txt.tmp-4242").write_text("[PAD]\n")
    (out / "tok" / ".hidden.txt").write_text("a stage's own hidden file is an output\n")
    hasher = FileHasher()
    assert sorted(fingerprint.output_digests(out, hasher)) == ["model/model.safetensors", "tok/.hidden.txt"]
    signed = fingerprint.signed_inputs([out], hasher, "init")  # an `init:` folder of another run
    assert sorted(signed["init.0"]) == [str(out / "model" / "model.safetensors"), str(out / "tok" / ".hidden.txt")]


def test_saving_a_model_dir_removes_what_a_killed_save_into_it_left(tmp_path: Path) -> None:
    import torch

    from xfer.transformer.modelio import load_model_dir, save_model_dir

    stale = tmp_path / ".model.tmp-k3j2x"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"partial")
    kept = [tmp_path / ".model.old-ab_12", tmp_path / ".model2.tmp-zz", tmp_path / ".modelx.tmp-yy"]
    for folder in kept:  # a swap's previous version (readers name it), other models' saves
        folder.mkdir()
    save_model_dir(tmp_path / "model", {"lin": torch.nn.Linear(2, 2)})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["model", *(p.name for p in kept)])
    assert set(load_model_dir(tmp_path / "model").state_dicts["lin"]) == {"weight", "bias"}


@dataclass
class WithFiles:
    files: Files


def _files(tmp_path: Path, written: str) -> tuple[object, list[str]]:
    validator = Validator()
    value = validator.dataclass(parse_text(f"files: {written}", str(tmp_path / "cfg.yaml")), WithFiles, "cfg")
    return value, [d.message for d in validator.diagnostics]


def test_a_folder_whose_name_reads_as_a_glob_is_that_folder_or_refused_when_ambiguous(tmp_path: Path) -> None:
    """`wiki[en]/*.txt` with a folder `wiki[en]`: said "no file matches" (the glob looks in `wikie`
    or `wikin`); with a `wikie/` beside it, the stage read `wikie/*.txt` without a word."""
    (tmp_path / "wiki[en]").mkdir()
    (tmp_path / "wiki[en]" / "a.txt").write_text("mine\n")
    value, errors = _files(tmp_path, "wiki[en]/*.txt")
    assert errors == []
    assert [Path(p) for p in glob.glob(value.files.patterns[0])] == [tmp_path / "wiki[en]" / "a.txt"]
    (tmp_path / "wikie").mkdir()
    (tmp_path / "wikie" / "b.txt").write_text("other\n")
    value, errors = _files(tmp_path, "wiki[en]/*.txt")
    assert value is INVALID
    assert errors == [
        f"cfg.files: 'wiki[en]/*.txt' names {tmp_path / 'wiki[en]' / 'a.txt'} as written, but as a glob it matches "
        f"other files ({tmp_path / 'wikie' / 'b.txt'}); write 'wiki[[]en]/*.txt' to read what it names, or name "
        "the files the glob matches instead"
    ]
    for written, read in [("wiki[[]en]/*.txt", "wiki[en]/a.txt"), ("wik[i]e/*.txt", "wikie/b.txt")]:
        value, errors = _files(tmp_path, written)
        assert errors == [] and [Path(p) for p in glob.glob(value.files.patterns[0])] == [tmp_path / read]


def test_a_glob_that_also_matches_the_file_it_names_stays_a_glob(tmp_path: Path) -> None:
    """A file named `a*.txt` is among what the glob `a*.txt` reads: nothing named is left out."""
    (tmp_path / "a*.txt").write_text("star\n")
    (tmp_path / "ab.txt").write_text("b\n")
    value, errors = _files(tmp_path, "'a*.txt'")
    assert errors == [] and sorted(glob.glob(value.files.patterns[0])) == [
        str(tmp_path / "a*.txt"),
        str(tmp_path / "ab.txt"),
    ]


def test_a_fork_leaves_out_what_killed_writes_left(tmp_path: Path) -> None:
    """`--fork` copied a killed save's `.model.tmp-*` folder (up to a whole model) into the new run."""
    from xfer.core.runs.runner import _not_copied

    source = str(tmp_path / "run")
    names = [".model.tmp-k2j4", ".metrics.jsonl.tmp-123", ".model.old-ab_1", "model", "metrics.jsonl", ".lock"]
    assert _not_copied(source, f"{source}/stage/outputs", names) == [
        ".model.tmp-k2j4",
        ".metrics.jsonl.tmp-123",
        ".model.old-ab_1",
        ".lock",
    ]
    assert _not_copied(source, source, ["recipe.resolved.yaml", "stage"]) == ["recipe.resolved.yaml"]

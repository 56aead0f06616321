"""`transformer.finetune` recipes are fully checked before anything runs: typed `encoder:`
overrides, `task_epochs` keys, required task settings, and (with --data) every task file."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from xfer.core import cli
from xfer.core.config import TaskRef
from xfer.core.plugins import set_default_host
from xfer.testing import make_host, write_recipe
from xfer.transformer.encoder import EncoderConfig
from xfer.transformer.finetune_config import ENCODER_FIELDS, FinetuneConfig

HEAD = """\
name: t
stages:
  corpus: {kind: toy.corpus, sentences: 50}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 100}
"""


@pytest.fixture(autouse=True)
def host():
    set_default_host(make_host(autoload=True, allow=["transformer", "conll", "glue"]))
    yield
    set_default_host(None)


def _problems(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[Path, list[str]]:
    path = write_recipe(tmp_path, text)
    assert cli.main(["validate", str(path), *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return path.resolve(), err.splitlines()[:-1]


def test_encoder_fields_mirror_encoder_config() -> None:
    hints = typing.get_type_hints(EncoderConfig)
    assert {f.name: hints[f.name] for f in dataclasses.fields(EncoderConfig)} == ENCODER_FIELDS


def test_encoder_overrides_and_task_epochs_are_typed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + (
        "  finetune:\n"
        "    kind: transformer.finetune\n"
        "    tokenizer: vocab.tokenizer\n"
        "    tasks: [{name: toy/agreement, train_size: 40, dev_size: 10}]\n"
        "    encoder: {num_layer: 2, hidden_dropout: '0.1', unpad: maybe}\n"
    )
    path, rows = _problems(tmp_path, text, capsys)
    assert rows == [
        f"{path}:9:15: stages.finetune.encoder.num_layer: unknown encoder field 'num_layer'; did you mean "
        f"'num_layers'? (valid: {', '.join(sorted(ENCODER_FIELDS))})",
        f"{path}:9:45: stages.finetune.encoder.hidden_dropout: expected a number, got the quoted string '0.1' "
        "(remove the quotes)",
        f"{path}:9:59: stages.finetune.encoder.unpad: expected true or false, got str 'maybe'",
    ]
    text = text.replace("num_layer: 2, hidden_dropout: '0.1', unpad: maybe", "num_heads: 0") + (
        "    task_epochs: {toy/agreemnt: 3}\n"
    )
    path, rows = _problems(tmp_path, text, capsys)
    assert rows == [
        f"{path}:10:19: stages.finetune.task_epochs.toy/agreemnt: 'toy/agreemnt' is not one of this stage's tasks "
        "(toy/agreement); did you mean 'toy/agreement'?"
    ]
    path, rows = _problems(tmp_path, text.replace("toy/agreemnt", "toy/agreement"), capsys)
    assert rows == [f"{path}:9:15: stages.finetune.encoder.num_heads: must be positive, got 0"]


def test_required_task_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + (
        "  finetune:\n"
        "    kind: transformer.finetune\n"
        "    tokenizer: vocab.tokenizer\n"
        "    tasks:\n"
        "      - conll/ner\n"
        "      - {name: glue/rte}\n"
    )
    path, rows = _problems(tmp_path, text, capsys)
    assert rows == [
        f"{path}:9:9: stages.finetune.tasks.0: missing required key 'train_file': Training file; also defines "
        "the tag set (`labels`)",
        f"{path}:10:9: stages.finetune.tasks.1.data_dir: required when source is 'local': the task's GLUE folder "
        "(or set source: hub)",
    ]


def test_finetune_declares_the_splits_it_reads() -> None:
    ref = TaskRef("toy/agreement", None)
    assert FinetuneConfig(tasks=[ref]).data_splits() == [(ref, ("train", "dev"))]
    assert FinetuneConfig(tasks=[ref], predict=["dev", "test"]).data_splits() == [(ref, ("train", "dev", "test"))]


def test_validate_data_lists_bad_files_of_two_stages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ner.txt").write_text("EU NNP B-ORG\nrejects VBZ O\n\nPeter NNP B-PER\nsays VBZ X-BAD\n")
    (tmp_path / "chunk.txt").write_text("He PRP B-NP\nsaid VBD\n\nit PRP B-NP\n")
    text = HEAD + (
        "  ner:\n"
        "    kind: transformer.finetune\n"
        "    tokenizer: vocab.tokenizer\n"
        "    tasks: [{name: conll/ner, train_file: ner.txt, dev_file: ner.txt}]\n"
        "  chunk:\n"
        "    kind: transformer.finetune\n"
        "    tokenizer: vocab.tokenizer\n"
        "    tasks: [{name: conll/chunking, train_file: chunk.txt, dev_from_train: 1}]\n"
    )
    path = write_recipe(tmp_path, text)
    assert cli.main(["validate", str(path)]) == 0
    capsys.readouterr()
    _, rows = _problems(tmp_path, text, capsys, "--data")
    assert rows == [
        f"{tmp_path / 'chunk.txt'}:2: expected 3 columns (as on line 1), found 2 (stage 'chunk', task 'conll/chunking')",
        f"{tmp_path / 'ner.txt'}:5: tag: bad tag 'X-BAD' for scheme IOB1 (expected O or B/I-TYPE) "
        "(stage 'ner', task 'conll/ner')",
    ]


@pytest.mark.parametrize("split", ["train", "dev"])
def test_an_empty_split_from_a_task_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, split: str
) -> None:
    """A task plugin whose reader yields nothing gets one line naming task and split, not a
    ValueError from deep in the batching or the metrics after training; and from the pre-flight,
    not after every upstream stage has run."""
    from xfer.core.toy.tasks import ToyAgreementTask

    original = ToyAgreementTask.examples
    monkeypatch.setattr(ToyAgreementTask, "examples", lambda self, s: [] if s == split else original(self, s))
    text = HEAD + (
        "  finetune:\n"
        "    kind: transformer.finetune\n"
        "    tokenizer: vocab.tokenizer\n"
        "    model: tiny\n"
        "    encoder: {num_layers: 1, hidden_size: 16, embedding_size: 16, intermediate_size: 32, num_heads: 2}\n"
        "    tasks: [{name: toy/agreement, train_size: 40, dev_size: 10}]\n"
        "    train: {steps: 2, batch_size: 8}\n"
    )
    assert cli.main(["run", str(write_recipe(tmp_path, text)), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert (
        f"stage 'finetune', task 'toy/agreement': the {'training' if split == 'train' else 'dev'} set is empty" in err
    )
    assert "Traceback" not in err
    assert not (tmp_path / "run/corpus/outputs").exists(), "found by the pre-flight, before any stage ran"


def test_a_preset_next_to_init_is_an_error_not_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "checkpoint").mkdir()
    text = HEAD + (
        "  finetune:\n"
        "    kind: transformer.finetune\n"
        "    init: checkpoint\n"
        "    model: mini\n"
        "    tasks: [{name: toy/agreement, train_size: 40, dev_size: 10}]\n"
    )
    path, rows = _problems(tmp_path, text, capsys)
    assert rows[0].startswith(f"{path}:8:5: stages.finetune.model: 'mini' would be ignored: with `init:`"), rows
    assert "from the command line, set it to the default 'tiny'" in rows[0], "how to drop a recipe's preset"
    assert cli.main(["validate", str(path), "stages.finetune.model=tiny"]) == 0, "what the message says works"
    path = write_recipe(tmp_path, text.replace("    init: checkpoint", "    tokenizer: vocab.tokenizer"))
    assert cli.main(["validate", str(path)]) == 0, "the same preset without init is valid"


def test_encoder_overrides_of_a_checkpoint_keep_its_architecture(tmp_path: Path) -> None:
    """Dropout and runtime fields can change; a field the weights fix is an error naming both values
    (it was a traceback of size mismatches, or for num_heads a silently different model)."""
    from xfer.core.errors import CheckpointError
    from xfer.transformer.encoder import ARCHITECTURE_FIELDS
    from xfer.transformer.modelio import with_overrides
    from xfer.transformer.presets import preset

    checkpoint = preset("tiny", vocab_size=100)
    changed = with_overrides(checkpoint, {"hidden_dropout": 0.0, "num_layers": checkpoint.num_layers}, tmp_path)
    assert changed.hidden_dropout == 0.0 and changed.num_layers == checkpoint.num_layers
    for name in ARCHITECTURE_FIELDS:
        wrong = getattr(checkpoint, name) * 2
        with pytest.raises(CheckpointError, match=rf"encoder\.{name}: {wrong} differs from the init checkpoint's"):
            with_overrides(checkpoint, {name: wrong}, tmp_path)
    assert set(ARCHITECTURE_FIELDS) <= set(ENCODER_FIELDS)


def test_a_misspelt_stage_output_in_files_gets_a_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`files: corpuss.text` said only "no file matches", unlike the same typo in a single input."""
    path, problems = _problems(tmp_path, HEAD.replace("files: corpus.text", "files: [corpuss.text]"), capsys)
    assert problems == [
        f"{path}:4:44: stages.vocab.files.0: no file matches 'corpuss.text' (looked for {path.parent / 'corpuss.text'}); "
        "nor is it a stage output (no stage 'corpuss'; did you mean 'corpus'?)"
    ]
    _, problems = _problems(tmp_path, HEAD.replace("files: corpus.text", "files: notes.txt"), capsys)
    assert problems[0].endswith(f"no file matches 'notes.txt' (looked for {path.parent / 'notes.txt'})")


def test_a_glob_reaching_into_the_run_directory_is_refused(tmp_path: Path) -> None:
    """`files: "**/*.txt"` next to `runs/`: each run's vocab.txt matched the next run's glob, so
    the vocabulary trained on the last one's and the stages were never up to date."""
    from xfer.core.errors import RunDirError
    from xfer.core.recipes.recipe import load_recipe
    from xfer.core.runs.runner import run_recipe

    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "a.txt").write_text("the dog runs .\nthe cat sleeps .\n" * 20)
    text = "name: t\nstages:\n  vocab: {kind: transformer.vocab, files: '**/*.txt', size: 60, min_frequency: 1}\n"
    recipe = load_recipe(write_recipe(project, text))
    with pytest.raises(RunDirError, match=r"stages\.vocab\.files: '.*/project/\*\*/\*\.txt' reaches into the run"):
        run_recipe(recipe, project / "runs" / "t", log=lambda *a: None)
    assert not (project / "runs").exists(), "refused before anything is written, on the first run too"
    outside = tmp_path / "run"
    for expected in ("ran", "skipped"):  # elsewhere it runs, then is up to date
        assert [s.action for s in run_recipe(recipe, outside, log=lambda *a: None).stages] == [expected]


def test_a_task_listed_twice_and_select_best_without_evaluations_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both entries of a twice-listed task shared one trial folder: the second silently reused the first's result."""
    text = HEAD + (
        "  finetune:\n"
        "    kind: transformer.finetune\n"
        "    tokenizer: vocab.tokenizer\n"
        "    tasks: [{name: toy/agreement, train_size: 40, dev_size: 10}, {name: toy/agreement, train_size: 20, dev_size: 10}]\n"
    )
    path, rows = _problems(tmp_path, text, capsys)
    assert rows == [
        f"{path}:8:5: stages.finetune.tasks: task 'toy/agreement' is listed twice, with different settings: a stage "
        "keys its results and models by task name, so give each dataset its own name with `as:`, e.g. "
        "{name: toy/agreement, as: agreement_2, ...}"
    ], "two datasets of one loader (two glue/tsv files) were told only 'listed twice'"
    same = text.replace("train_size: 20", "train_size: 40")
    path, rows = _problems(tmp_path, same, capsys)
    assert rows == [f"{path}:8:5: stages.finetune.tasks: task 'toy/agreement' is listed twice; give each task once"]
    text = text.replace(", {name: toy/agreement, train_size: 20, dev_size: 10}", "") + (
        "    select: best\n    train: {eval_every: null}\n"
    )
    path, rows = _problems(tmp_path, text, capsys)
    assert len(rows) == 1 and "stages.finetune.select: 'best' picks the best dev evaluation" in rows[0]
    path, rows = _problems(tmp_path, text.replace("select: best", "task_epochs: {toy/agreement: .inf}"), capsys)
    assert len(rows) == 1 and "epochs must be a positive finite number, got inf" in rows[0]


FINETUNE = HEAD + (
    "  finetune:\n"
    "    kind: transformer.finetune\n"
    "    tokenizer: vocab.tokenizer\n"
    "    max_length: 32\n"
    "    tasks: [{name: toy/agreement, train_size: 40, dev_size: 10}]\n"
    "    encoder: {}\n"
)


@pytest.mark.parametrize(
    ("encoder", "wanted"),
    [
        ("{hidden_size: 101}", "encoder.hidden_size: must be a multiple of num_heads (2), got 101"),
        ("{num_heads: 3}", "encoder.num_heads: must divide hidden_size (128), got 3"),
        ("{max_position_embeddings: 16}", "encoder.max_position_embeddings: 16 positions do not cover max_length 32"),
        ("{type_vocab_size: 1}", "encoder.type_vocab_size: must be at least 2 (sentence-pair tasks give the second"),
        ("{pad_token_id: -1}", "encoder.pad_token_id: must be a token id (at least 0), got -1"),
        ("{pad_token_id: 4, vocab_size: 4}", "encoder.pad_token_id: must be less than vocab_size (4), got 4"),
        ("{layer_norm_eps: 0.0}", "encoder.layer_norm_eps: must be a positive finite number, got 0.0"),
        ("{initializer_range: -0.02}", "encoder.initializer_range: must be a finite number, at least 0, got -0.02"),
        # `.inf` passed: every activation NaN at the first step
        ("{layer_norm_eps: .inf}", "encoder.layer_norm_eps: must be a positive finite number, got inf"),
        ("{initializer_range: .inf}", "encoder.initializer_range: must be a finite number, at least 0, got inf"),
    ],
)
def test_encoder_overrides_the_encoder_would_refuse_are_errors_at_their_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], encoder: str, wanted: str
) -> None:
    """They passed `xfer validate` and failed `xfer run` with a traceback when the model was built
    (or an IndexError at the first step)."""
    path, rows = _problems(tmp_path, FINETUNE.replace("encoder: {}", f"encoder: {encoder}"), capsys)
    assert len(rows) == 1 and rows[0].startswith(f"{path}:10:15: stages.finetune.{wanted}"), rows


def test_max_length_beyond_the_presets_positions_is_an_error_at_max_length(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, rows = _problems(tmp_path, FINETUNE.replace("max_length: 32", "max_length: 600"), capsys)
    assert rows == [
        f"{path}:8:5: stages.finetune.max_length: 600 is more than the 512 positions of preset 'tiny': lower it, "
        "or set encoder.max_position_embeddings to at least 600"
    ]
    text = FINETUNE.replace("max_length: 32", "max_length: 600").replace("{}", "{max_position_embeddings: 600}")
    assert cli.main(["validate", str(write_recipe(tmp_path, text))]) == 0


def test_with_init_only_each_overrides_own_range_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The checkpoint fixes the architecture: a lone hidden_size is compared with it when it is read."""
    (tmp_path / "checkpoint").mkdir()  # a folder, read only when the stage starts
    text = FINETUNE.replace("tokenizer: vocab.tokenizer", "init: checkpoint")
    assert cli.main(["validate", str(write_recipe(tmp_path, text.replace("{}", "{hidden_size: 101}")))]) == 0
    path, rows = _problems(tmp_path, text.replace("{}", "{num_heads: 0}"), capsys)
    assert rows == [f"{path}:10:15: stages.finetune.encoder.num_heads: must be positive, got 0"]


def test_encoder_config_and_recipes_share_one_set_of_rules() -> None:
    """`presets.encoder_problems` is what EncoderConfig enforces; recipes check it without torch."""
    import subprocess
    import sys

    from xfer.transformer.encoder import ARCHITECTURE_FIELDS
    from xfer.transformer.presets import PRESETS, encoder_problems, preset, preset_values

    for name in PRESETS:  # what recipes are checked against is what the stages build
        assert preset_values(name) == {
            k: v for k, v in dataclasses.asdict(preset(name)).items() if k in preset_values(name)
        }
        assert set(ARCHITECTURE_FIELDS) <= set(preset_values(name))
    with pytest.raises(ValueError, match=r"EncoderConfig\.hidden_size must be a multiple of num_heads \(2\), got 101"):
        EncoderConfig(hidden_size=101, num_heads=2)
    with pytest.raises(ValueError, match=r"EncoderConfig\.pad_token_id must be less than vocab_size \(8\), got 9"):
        EncoderConfig(vocab_size=8, pad_token_id=9)
    assert encoder_problems({"num_heads": 0, "hidden_size": 128}) == [("num_heads", "must be positive, got 0")]
    code = (
        "import sys, xfer.transformer.finetune_config, xfer.transformer.presets, xfer.electra.stage_config\n"
        "assert 'torch' not in sys.modules, 'validation imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _folder(path: Path, tokens: list[str], config: dict | None = None) -> Path:
    path.mkdir(parents=True)
    (path / "vocab.txt").write_text("\n".join(tokens) + "\n")
    if config is not None:  # a checkpoint: its config and a weights file the pre-flight reads headers of
        (path / "config.json").write_text(json.dumps({"model_type": "electra", **config}))
        save_file({"electra.embeddings.word_embeddings.weight": torch.zeros(1)}, path / "model.safetensors")
    return path


SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_a_tokenizer_that_does_not_fit_the_init_checkpoint_is_refused_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another vocabulary of the same size was accepted: every pre-trained embedding then stood for
    another word. The error names both vocabularies and the first line where they differ."""
    words = [f"w{i}" for i in range(95)]
    checkpoint = _folder(tmp_path / "ckpt", SPECIALS + words, {"vocab_size": 100, "max_position_embeddings": 64})
    _folder(tmp_path / "other", SPECIALS + words[:10] + ["zz"] + words[11:])
    _folder(tmp_path / "prefix", SPECIALS + words[:50])
    text = (
        "stages:\n"
        "  finetune:\n"
        "    kind: transformer.finetune\n"
        "    init: ckpt\n"
        "    tokenizer: other\n"
        "    max_length: 32\n"
        "    tasks: [{name: toy/agreement, train_size: 40, dev_size: 10}]\n"
    )
    _, rows = _problems(tmp_path, text, capsys, "--data")
    assert rows == [
        f"{tmp_path / 'other/vocab.txt'}:16: token id 15 is 'zz' here but 'w10' in the init checkpoint's vocabulary "
        f"({checkpoint / 'vocab.txt'}:16): the checkpoint was trained with another vocabulary, so its embeddings "
        "would stand for other words; use the checkpoint's own tokenizer (leave out `tokenizer:`) (stage 'finetune')"
    ]
    for fits in ("tokenizer: prefix", "tokenizer: ckpt"):  # the same ids for the same words
        assert (
            cli.main(["validate", "--data", str(write_recipe(tmp_path, text.replace("tokenizer: other", fits)))]) == 0
        )
    (checkpoint / "vocab.txt").unlink()  # nothing to compare with: only the sizes are checked
    assert cli.main(["validate", "--data", str(write_recipe(tmp_path, text))]) == 0
    capsys.readouterr()
    _, rows = _problems(tmp_path, text.replace("max_length: 32", "max_length: 128"), capsys, "--data")
    assert rows == [
        f"{checkpoint}: the checkpoint covers 64 positions but max_length is 128: lower max_length to at most 64 "
        "(stage 'finetune')"
    ]


def test_overrides_the_tokenizer_contradicts_are_refused_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`vocab_size` below the tokenizer's size failed at the first step; a `pad_token_id` that is not
    the tokenizer's [PAD] was exported silently into the HF config."""
    _folder(tmp_path / "tok", SPECIALS + [f"w{i}" for i in range(95)])
    text = (
        "stages:\n"
        "  finetune:\n"
        "    kind: transformer.finetune\n"
        "    tokenizer: tok\n"
        "    encoder: {vocab_size: 10, pad_token_id: 5}\n"
        "    tasks: [{name: toy/agreement, train_size: 40, dev_size: 10}]\n"
    )
    path, rows = _problems(tmp_path, text, capsys, "--data")
    vocab = tmp_path / "tok/vocab.txt"
    assert rows == [
        f"{path}:3:11: stage 'finetune': encoder.pad_token_id 5 is not the tokenizer's [PAD] id, 0 ({vocab}): the "
        "exported config would name another token as padding; remove it (the default is 0)",
        f"{path}:3:11: stage 'finetune': encoder.vocab_size 10 is less than the 100 tokens of the tokenizer ({vocab}): "
        "ids from 10 on would have no embedding; remove encoder.vocab_size (it defaults to the tokenizer's size)",
    ]
    fine = text.replace("vocab_size: 10, pad_token_id: 5", "vocab_size: 128, pad_token_id: 0")
    assert cli.main(["validate", "--data", str(write_recipe(tmp_path, fine))]) == 0


def test_an_objective_that_does_not_handle_a_task_type_is_a_preflight_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It failed only when the stage started, after every stage before it had trained."""
    (tmp_path / "chunk.txt").write_text("He PRP B-NP\nsaid VBD B-VP\n\nit PRP B-NP\n")
    text = HEAD + (
        "  chunk:\n"
        "    kind: transformer.finetune\n"
        "    tokenizer: vocab.tokenizer\n"
        "    objective: transformer.sequence\n"
        "    tasks: [{name: conll/chunking, train_file: chunk.txt, dev_from_train: 1}]\n"
    )
    _, rows = _problems(tmp_path, text, capsys, "--data")
    assert len(rows) == 1 and rows[0].endswith(
        "stage 'chunk': objective 'transformer.sequence' handles classification, regression tasks; "
        "conll/chunking is a tagging task"
    ), rows


@pytest.mark.parametrize("damage", ["truncated", "missing-shard", "bad-index"])
def test_damaged_init_weights_are_refused_before_any_stage_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """A model.safetensors cut short (a copy interrupted, a full disk) or a shard its index lists but
    the folder lacks was found only when the stage loaded it, after every earlier stage had run."""
    import numpy as np
    from safetensors.numpy import save_file

    words = [f"w{i}" for i in range(95)]
    checkpoint = _folder(tmp_path / "ckpt", SPECIALS + words, {"vocab_size": 100, "max_position_embeddings": 64})
    weights = checkpoint / "model.safetensors"
    save_file({"embeddings.word_embeddings.weight": np.zeros((100, 16), dtype=np.float32)}, str(weights))
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[:-100])
        bad, said = weights, "cannot read safetensors weights (truncated or damaged?)"
    else:
        weights.unlink()
        index = checkpoint / "model.safetensors.index.json"
        shard = checkpoint / "model-00002-of-00002.safetensors"
        index.write_text(json.dumps({"weight_map": {"a": shard.name}}) if damage == "missing-shard" else "{}")
        bad, said = (
            (index, f"names the weights file {shard.name}, which is missing")
            if damage == "missing-shard"
            else (index, "not a safetensors")
        )
    text = (
        HEAD + "  finetune:\n"
        "    kind: transformer.finetune\n"
        f"    init: {checkpoint}\n"
        "    max_length: 32\n"
        "    tasks: [{name: toy/agreement, train_size: 40, dev_size: 10}]\n"
    )
    _, rows = _problems(tmp_path, text, capsys, "--data")
    assert len(rows) == 1 and rows[0].startswith(f"{bad}: {said}"), rows
    assert cli.main(["run", str(write_recipe(tmp_path, text)), "--run-dir", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run/corpus/outputs").exists(), "refused before the first stage ran"


def test_a_vocab_txt_with_a_byte_order_mark_reads_as_the_tokenizer_reads_it(tmp_path: Path) -> None:
    """The pre-flight's vocabulary comparison strips a UTF-8 BOM as the tokenizer does: the same
    vocabulary saved by a Windows editor was refused ("token id 0 is '\\ufeff[PAD]' here")."""
    from xfer.transformer.finetune_config import read_vocabulary, vocabulary_mismatch

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]
    plain, marked = tmp_path / "plain", tmp_path / "marked"
    for folder, prefix in ((plain, ""), (marked, "\ufeff")):
        folder.mkdir()
        (folder / "vocab.txt").write_text(prefix + "\n".join(tokens) + "\n", encoding="utf-8")
    read = read_vocabulary(marked)
    assert read is not None and read[1] == tokens
    assert vocabulary_mismatch(read, read_vocabulary(plain)) is None


def test_the_mnli_diagnostic_set_without_test_predictions_is_refused_at_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """AX.tsv is written with the test-set predictions: `diagnostic: true` under the default
    `predict: [dev]` was accepted and wrote nothing."""
    text = HEAD + (
        "  tune:\n    kind: transformer.finetune\n    tokenizer: vocab.tokenizer\n    model: tiny\n"
        f"    tasks:\n      - {{name: glue/mnli, data_dir: {tmp_path}, diagnostic: true}}\n"
    )
    path, problems = _problems(tmp_path, text, capsys)
    line = text.splitlines()[9]
    assert problems == [
        f"{path}:10:{line.rindex('diagnostic') + 1}: stages.tune.tasks.0.diagnostic: the diagnostic set (AX.tsv) is predicted with the test set, "
        "which this stage does not predict: add `predict: [dev, test]`, or remove `diagnostic: true`"
    ]
    fixed = text.replace("    tasks:\n", "    predict: [dev, test]\n    tasks:\n")
    assert cli.main(["validate", str(write_recipe(tmp_path, fixed))]) == 0

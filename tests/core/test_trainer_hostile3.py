"""Hostile checks of the end of training and of saving fine-tuned models (third round): a saved
model folder that appears without its tokenizer, `select: best` when no checkpoint holds a best
score, the world-size refusal on resume, and metric sums promoted to float64. Complements
test_trainer.py, test_trainer_hostile.py and test_trainer_hostile2.py."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from xfer.core import checkpoint as ckpt
from xfer.core import trainer as trainer_module
from xfer.core.trainer import StepOutput

from .test_trainer import Events, Regression, ScriptedEvaluator, make


def test_a_fine_tuned_model_folder_never_appears_without_its_tokenizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tokenizer was saved after the atomic `save_model_dir`: a kill between the two left a
    complete-looking model folder (its xfer_model.json written) with no vocab.txt or tokenizer.json.
    Now the folder appears whole or not at all, and a whole one holds the tokenizer."""
    pytest.importorskip("xfer.transformer")
    from xfer.testing import make_host, run_recipe_file, write_recipe
    from xfer.transformer.testing import toy_finetune_recipe
    from xfer.transformer.tokenization import WordPieceTokenizer

    save = WordPieceTokenizer.save

    def killed_outside_the_vocab_stage(self: Any, directory: Any) -> Path:
        if "vocab" not in Path(directory).parts:
            raise KeyboardInterrupt("killed while saving the fine-tuned model's tokenizer")
        return save(self, directory)

    monkeypatch.setattr(WordPieceTokenizer, "save", killed_outside_the_vocab_stage)
    toy = "{name: toy/agreement, train_size: 16, dev_size: 8}"
    recipe = write_recipe(tmp_path, toy_finetune_recipe(toy, max_length=64, epochs=1, steps=None, batch_size=8))
    with pytest.raises(KeyboardInterrupt):
        run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    model = tmp_path / "run/finetune/outputs/models/toy-agreement"
    assert not (model / "xfer_model.json").exists(), sorted(p.name for p in model.iterdir())

    monkeypatch.undo()
    run_recipe_file(recipe, tmp_path / "run", make_host(autoload=True))
    assert {"xfer_model.json", "model.safetensors", "vocab.txt", "tokenizer.json"} <= {p.name for p in model.iterdir()}
    vocab = tmp_path / "run/vocab/outputs/tokenizer"
    assert (model / "vocab.txt").read_text() == (vocab / "vocab.txt").read_text()
    assert WordPieceTokenizer.from_dir(model).vocab_size == WordPieceTokenizer.from_dir(vocab).vocab_size


NAN = float("nan")


def test_select_best_says_when_every_dev_score_was_nan(tmp_path: Path) -> None:
    """No NaN score is ever the best, so a run whose every evaluation was NaN has no best checkpoint:
    `load_weights("best")` took the last one without a word, and the stage reported it as chosen."""
    settings = {"eval_every": 1, "checkpoint_every": 1}
    trainer = make(tmp_path, evaluator=ScriptedEvaluator([NAN, NAN, NAN]), steps=3, **settings)
    result = trainer.fit()
    assert result.best_checkpoint is None
    with pytest.warns(UserWarning, match=r"no best checkpoint to load \(no dev evaluation gave a number as score"):
        chosen = trainer.load_weights("best")
    assert chosen.name == "step-0000003"


def test_select_best_says_when_the_best_checkpoint_was_moved_aside_after_training_ended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged best checkpoint found on the re-run of a finished training (killed before its stage
    ended) is moved aside, and no evaluation is left to choose another: the last weights were loaded
    for `select: best` silently."""
    settings = {"eval_every": 1, "checkpoint_every": 1}
    make(tmp_path, evaluator=ScriptedEvaluator([1.0, 5.0, 3.0]), steps=3, **settings).fit()
    checkpoints = tmp_path / "checkpoints"
    best = checkpoints / "step-0000002"
    (best / "model.safetensors").write_bytes(b"damaged")

    again = make(tmp_path, evaluator=ScriptedEvaluator([]), steps=3, **settings)
    result = again.fit()
    assert (result.resumed_from, result.best_metric, result.best_checkpoint) == (3, None, None)
    with pytest.warns(
        UserWarning, match=r"its best checkpoint step-0000002 is gone .*: using the last one, step-0000003"
    ):
        assert again.load_weights("best").name == "step-0000003"
    err = capsys.readouterr().err
    assert "checkpoint step 2 is damaged" in err
    assert "is gone; training is complete, so no evaluation is left to choose another" in err
    assert "chosen again among the evaluations from here on" not in err


def test_select_best_with_a_best_checkpoint_loads_it_without_a_warning(tmp_path: Path) -> None:
    settings = {"eval_every": 1, "checkpoint_every": 1}
    trainer = make(tmp_path, evaluator=ScriptedEvaluator([1.0, 5.0, NAN]), steps=3, **settings)
    trainer.fit()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert trainer.load_weights("best").name == "step-0000002"
        assert trainer.load_weights("last").name == "step-0000003"


@pytest.mark.parametrize("field", [True, False])
def test_a_world_size_mismatch_on_resume_names_the_count_and_the_remedy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: bool
) -> None:
    """A checkpoint without the `world_size` field (compared as 1) was reported as "written with None
    processes", and neither message said how to go on."""
    make(tmp_path, steps=2, checkpoint_every=1).fit()
    if not field:
        load_state = ckpt.load_state

        def without_world_size(path: Path) -> dict[str, Any]:
            state = load_state(path)
            state.pop("world_size")
            return state

        monkeypatch.setattr(ckpt, "load_state", without_world_size)
    resumed = make(tmp_path, steps=4, checkpoint_every=1)
    monkeypatch.setattr(trainer_module.dist, "world_size", lambda: 2)
    with pytest.raises(ckpt.CheckpointError) as caught:
        resumed.fit()
    message = str(caught.value)
    assert "None" not in message
    assert "written by 1 process(es), resuming with 2" in message
    assert "relaunch with a single process (without torchrun)" in message
    assert f"or delete {tmp_path / 'checkpoints'}" in message


class Float64Metric(Regression):
    """Logs a float64 metric tensor (as numpy-derived or double-precision statistics are)."""

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> StepOutput:
        out = super().forward(batch)
        return StepOutput(out.loss, {**out.metrics, "ratio": torch.tensor(0.25, dtype=torch.float64)})


def test_metric_sums_stay_float32_with_a_float64_metric(tmp_path: Path) -> None:
    """The first value started the sum as float32, the next (float64) promoted it to float64: the
    checkpoint stored a float64 sum, which a resume's `.to(device)` refuses on a device without float64
    (MPS). The sums stay float32, and the logged average is unchanged."""
    events = Events()
    torch.manual_seed(0)
    make(tmp_path, Float64Metric(), events=events, steps=3, checkpoint_every=2, log_every=3, keep_checkpoints=3).fit()
    sums = ckpt.load_tensors(tmp_path / "checkpoints" / "step-0000002", "metric_sums")
    assert sums and {name: t.dtype for name, t in sums.items()} == dict.fromkeys(sums, torch.float32)
    assert events.split("train")[3]["ratio"] == 0.25


def test_data_changed_under_a_checkpoint_is_a_checkpoint_error_with_the_way_on(tmp_path: Path) -> None:
    """BatchStream refuses a cursor saved over another dataset ("data changed since the checkpoint"), as
    every source does, with a ValueError: the stage ended in a bare traceback naming no checkpoint."""
    make(tmp_path, steps=2, checkpoint_every=1, schedule="constant").fit()  # constant: resumed with more steps
    with pytest.raises(ckpt.CheckpointError) as caught:
        make(tmp_path, n=48, steps=4, checkpoint_every=1, schedule="constant").fit()
    message = str(caught.value)
    assert f"{tmp_path / 'checkpoints' / 'step-0000002'}: its data cursor does not fit" in message
    assert "data changed since the checkpoint (size 40 -> 48" in message
    assert f"delete {tmp_path / 'checkpoints'} to train this run again from step 0" in message

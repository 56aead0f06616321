"""Config of the `transformer.finetune` stage (torch-free, so validation stays fast)."""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from xfer.core.config import FieldError, Input, KeysOf, ObjectiveRef, TaskRef, knob
from xfer.core.train_config import TrainConfig

# Must list exactly `presets.PRESETS` (a test checks); kept literal so recipes are checked
# with did-you-mean before anything imports torch.
PresetName = Literal[
    "bert-base", "bert-large", "bert-small", "electra-base", "electra-large", "electra-small", "mini", "tiny"
]

# Must match the fields and types of `encoder.EncoderConfig` (a test checks); kept here so that
# `encoder:` overrides are type-checked with did-you-mean before anything imports torch.
ENCODER_FIELDS: dict[str, Any] = {
    "vocab_size": int,
    "embedding_size": int,
    "hidden_size": int,
    "num_layers": int,
    "num_heads": int,
    "intermediate_size": int,
    "max_position_embeddings": int,
    "type_vocab_size": int,
    "hidden_dropout": float,
    "attention_dropout": float,
    "layer_norm_eps": float,
    "initializer_range": float,
    "pad_token_id": int,
    "unpad": bool,
}
_POSITIVE = {name for name, tp in ENCODER_FIELDS.items() if tp is int and name != "pad_token_id"}
_PROBABILITIES = ("hidden_dropout", "attention_dropout")

DEFAULT_TRAIN = TrainConfig(
    epochs=3.0,
    batch_size=32,
    lr=3e-4,
    weight_decay=0.0,
    warmup_fraction=0.1,
    layer_decay=0.8,
    eval_every="epoch",
    checkpoint_every="epoch",
    log_every=50,
)


@dataclass
class FinetuneConfig:
    tasks: list[TaskRef] = knob(doc="Tasks to fine-tune on, one model per task (e.g. [glue/rte, glue/mrpc]).")
    init: Input | None = knob(
        None,
        "Pre-trained checkpoint: an earlier stage's output or a folder (xfer model dir or HF ELECTRA/BERT). Null: random init.",
    )
    tokenizer: Input | None = knob(None, "Folder with vocab.txt / tokenizer.json; default: the one in `init`.")
    model: PresetName = knob(
        "tiny",
        "Encoder preset for random init; with `init`, the checkpoint's architecture (another preset is an error).",
    )
    encoder: Annotated[dict[str, Any], KeysOf.of(ENCODER_FIELDS, "encoder field")] = knob(
        {}, "Overrides of preset fields, e.g. {num_layers: 2, hidden_dropout: 0.0}."
    )
    objective: ObjectiveRef | None = knob(
        None, "Objective for every task; default by task type (transformer.sequence/tagging/span_qa)."
    )
    max_length: int = knob(128, "Maximum tokens per input (longer tagging sentences are split, never cut).", ge=2)
    trials: int = knob(
        1, "Fine-tuning runs per task with seeds seed, seed+1, ...; the report gives their median.", ge=1
    )
    train: TrainConfig = knob(
        DEFAULT_TRAIN, "Optimisation (ELECTRA-Small defaults: lr 3e-4, layer decay 0.8, 3 epochs)."
    )
    task_epochs: dict[str, float] = knob({}, "Per-task epochs, e.g. {glue/rte: 10, glue/stsb: 10} as in ELECTRA.")
    select: Literal["last", "best"] = knob(
        "last", "Weights to evaluate and keep: after the last step (paper protocol) or the best dev evaluation."
    )
    predict: list[Literal["dev", "test"]] = knob(
        ["dev"], "Splits to write prediction files for (test: the task's submission format)."
    )
    save_models: Literal["median", "all", "none"] = knob(
        "median", "Which runs' models to write to the `models` output."
    )
    export_hf: bool = knob(False, "Also write each saved model in Hugging Face layout (models/<task>/hf).")
    eval_batch_size: int = knob(128, "Batch size for evaluation and prediction.", ge=1)

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError("give at least one task")
        if self.trials < 1:
            raise ValueError("trials must be >= 1")
        names = [ref.name for ref in self.tasks]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:  # both entries would share one trial folder: the second silently reused the first's result
            raise FieldError("tasks", f"task {duplicated[0]!r} is listed twice; give each task once")
        if self.select == "best" and self.train.eval_every is None:
            raise FieldError("select", "'best' picks the best dev evaluation, but train.eval_every is null (none run)")
        check_task_epochs(self.task_epochs, [ref.name for ref in self.tasks])
        check_preset_with_init(self.init, self.model, "tiny")
        for name, value in self.encoder.items():
            if name in _POSITIVE and value <= 0:
                raise FieldError(("encoder", name), f"must be positive, got {value!r}")
            if name in _PROBABILITIES and not 0.0 <= value < 1.0:
                raise FieldError(("encoder", name), f"must be in [0, 1), got {value!r}")

    def data_splits(self) -> list[tuple[TaskRef, tuple[str, ...]]]:
        """For the pre-flight data check: every task with the splits this stage reads
        (train and dev always, test when predictions for it are asked for)."""
        splits = ("train", "dev", *(s for s in self.predict if s != "dev"))
        return [(ref, splits) for ref in self.tasks]


def check_preset_with_init(init: Any, model: str, default: str) -> None:
    """`model:` names a preset for random init; with `init:` the checkpoint fixes the architecture,
    so a preset other than the default would be silently ignored: an error at its key instead (an
    explicit `model:` equal to the default cannot be told apart from no key, and passes)."""
    if init is not None and model != default:
        raise FieldError(
            ("model",),
            f"{model!r} would be ignored: with `init:` the architecture is the checkpoint's "
            "(remove `model:`, or set `init: null` to train this preset from random weights)",
        )


def check_task_epochs(task_epochs: dict[str, float], names: list[str]) -> None:
    """Per-task epoch overrides name tasks of the stage (a typo gets the closest name) and are positive."""
    for name, epochs in task_epochs.items():
        if name not in names:
            hint = difflib.get_close_matches(name, names, n=1)
            suggestion = f"; did you mean {hint[0]!r}?" if hint else ""
            raise FieldError(
                ("task_epochs", name), f"{name!r} is not one of this stage's tasks ({', '.join(names)}){suggestion}"
            )
        if not math.isfinite(epochs) or epochs <= 0:
            raise FieldError(("task_epochs", name), f"epochs must be a positive finite number, got {epochs!r}")

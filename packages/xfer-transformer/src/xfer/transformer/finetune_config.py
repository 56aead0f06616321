"""Config of the `transformer.finetune` stage (torch-free, so validation stays fast)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xfer.core.config import Input, ObjectiveRef, TaskRef, knob
from xfer.core.train_config import TrainConfig

# Must list exactly `presets.PRESETS` (a test checks); kept literal so recipes are checked
# with did-you-mean before anything imports torch.
PresetName = Literal[
    "bert-base", "bert-large", "bert-small", "electra-base", "electra-large", "electra-small", "mini", "tiny"
]

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
    model: PresetName = knob("tiny", "Encoder preset for random init (ignored when `init` is given).")
    encoder: dict[str, bool | int | float] = knob(
        {}, "Overrides of preset fields, e.g. {num_layers: 2, hidden_dropout: 0.0}."
    )
    objective: ObjectiveRef | None = knob(
        None, "Objective for every task; default by task type (transformer.sequence/tagging/span_qa)."
    )
    max_length: int = knob(128, "Maximum tokens per input (longer tagging sentences are split, never cut).")
    trials: int = knob(1, "Fine-tuning runs per task with seeds seed, seed+1, ...; the report gives their median.")
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
    eval_batch_size: int = knob(128, "Batch size for evaluation and prediction.")

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError("give at least one task")
        if self.trials < 1:
            raise ValueError("trials must be >= 1")

"""Config of the `transformer.finetune` stage (torch-free, so validation stays fast).

Also the checks of a stage's `encoder:` overrides, tokenizer and init checkpoint that
`electra.pretrain` shares: the arithmetic ones at validation (`check_encoder_overrides`), the
ones that read the tokenizer's and the checkpoint's files in the pre-flight (`checkpoint_problems`).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from xfer.core.config import FieldError, Input, KeysOf, ObjectiveRef, TaskRef, check_distinct_tasks, knob
from xfer.core.errors import CheckpointError, DataError, UserError
from xfer.core.train_config import TrainConfig
from xfer.transformer.presets import encoder_problems, preset_values

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
        takes=("model",),
    )
    tokenizer: Input | None = knob(
        None,
        "Folder with vocab.txt / tokenizer.json; default: the one in `init`.",
        takes=("tokenizer", "model"),  # a model dir holds its tokenizer's files
    )
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
    # ge=3: [CLS] [SEP] alone (2) hold no text, and a sentence pair's [CLS] [SEP] [SEP] or a tagged
    # word's [CLS] piece [SEP] did not fit: the tokenizer's bare ValueError, after earlier stages ran
    max_length: int = knob(128, "Maximum tokens per input (longer tagging sentences are split, never cut).", ge=3)
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
        "median",
        "Which runs' models to write to the `models` output. `median`: the run at the median of the task's "
        "main metric; with an even number of trials the lower of the middle two, while the report's median is "
        "their mean (the saved run's own metrics are in its xfer_model.json).",
    )
    export_hf: bool = knob(False, "Also write each saved model in Hugging Face layout (models/<task>/hf).")
    eval_batch_size: int = knob(128, "Batch size for evaluation and prediction.", ge=1)

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError("give at least one task")
        if self.trials < 1:
            raise ValueError("trials must be >= 1")
        check_distinct_tasks(
            self.tasks
        )  # both entries would share one trial folder: the second reused the first's result
        if self.select == "best" and self.train.eval_every is None:
            raise FieldError("select", "'best' picks the best dev evaluation, but train.eval_every is null (none run)")
        check_task_epochs(self.task_epochs, [ref.key for ref in self.tasks])
        check_preset_with_init(self.init, self.model, "tiny")
        check_task_model_encoder(self)
        self._check_diagnostic_predicted()

    def _check_diagnostic_predicted(self) -> None:
        """glue/mnli's `diagnostic: true` asks for AX.tsv, which is written with the test-set
        predictions: without `test` in `predict` it was accepted and wrote nothing."""
        if "test" in self.predict:
            return
        for position, ref in enumerate(self.tasks):
            if getattr(ref.config, "diagnostic", False) is True:
                raise FieldError(
                    ("tasks", str(position), "diagnostic"),
                    "the diagnostic set (AX.tsv) is predicted with the test set, which this stage does not "
                    f"predict: add `predict: {[*self.predict, 'test']}`, or remove `diagnostic: true`".replace("'", ""),
                )

    def preflight(self) -> list[UserError]:
        """Checks that read the tokenizer's and the init checkpoint's files, before any stage trains."""
        tokenizer = self.tokenizer if self.tokenizer is not None else self.init
        return checkpoint_problems(
            _path_of(tokenizer), _path_of(self.init), self.encoder, self.max_length, random_init=self.init is None
        )

    def check_task_infos(self, infos: Mapping[str, Any]) -> list[UserError]:
        return [
            *objective_problems(self.objective, infos),
            *span_qa_length_problems(self.objective, infos, self.max_length),
            *single_label_problems(self.objective, infos),
        ]

    def data_splits(self) -> list[tuple[TaskRef, tuple[str, ...]]]:
        """For the pre-flight data check: every task with the splits this stage reads
        (train and dev always, test when predictions for it are asked for)."""
        splits = ("train", "dev", *(s for s in self.predict if s != "dev"))
        return [(ref, splits) for ref in self.tasks]


def objective_problems(objective: ObjectiveRef | None, infos: Mapping[str, Any]) -> list[UserError]:
    """Pre-flight (`check_task_infos`): every task has an objective that handles its type. Without
    it, an objective named for a task type it does not handle (or a task type with no default
    objective) failed only when the stage started, after the stages before it had trained."""
    from xfer.core.errors import PluginError
    from xfer.core.plugins import default_host
    from xfer.transformer.objectives import DEFAULT_OBJECTIVES

    problems: list[UserError] = []
    for name, info in infos.items():
        if objective is None:
            if info.type not in DEFAULT_OBJECTIVES:
                problems.append(
                    UserError(
                        f"{name} is a {info.type} task and has no default objective (defaults exist for "
                        f"{', '.join(DEFAULT_OBJECTIVES)} tasks): set `objective:` or use another stage"
                    )
                )
            continue
        try:
            handles = getattr(default_host().load("objective", objective.name), "task_types", ())
        except PluginError:
            continue  # recipe validation reports an objective it cannot load
        if handles and info.type not in handles:
            problems.append(
                UserError(
                    f"objective {objective.name!r} handles {', '.join(handles)} tasks; {name} is a {info.type} task"
                )
            )
    return problems


def _objective_is(objective: ObjectiveRef | None, task_type: str, base: str) -> bool:
    """Whether the objective a `task_type` task gets (`objective`, else the type's default) is the
    built-in objective class `base` of `xfer.transformer.objectives` or a subclass of it; a third
    party's own objective makes its own rules, and one that does not load is reported elsewhere."""
    from xfer.core.errors import PluginError
    from xfer.core.plugins import default_host
    from xfer.transformer import objectives

    name = objective.name if objective is not None else objectives.DEFAULT_OBJECTIVES.get(task_type)
    if name is None:
        return False
    try:
        objective_cls = default_host().load("objective", name)
    except PluginError:
        return False
    return isinstance(objective_cls, type) and issubclass(objective_cls, getattr(objectives, base))


def span_qa_length_problems(
    objective: ObjectiveRef | None, infos: Mapping[str, Any], max_length: int
) -> list[UserError]:
    """Pre-flight (`check_task_infos`): a span-QA task trained by the span-QA objective needs a
    `max_length` of at least [CLS] [SEP] one context token [SEP]. `max_length: 3` passed validation
    (its bound is the sentence and tagging tasks'), and the stage stopped on it only when it reached
    that task, after the stages and tasks before it had trained."""
    from xfer.transformer.objectives import SPAN_QA_MIN_LENGTH

    if max_length >= SPAN_QA_MIN_LENGTH or not _objective_is(objective, "span_qa", "SpanQAObjective"):
        return []
    tasks = [task for task, info in infos.items() if info.type == "span_qa"]
    if not tasks:
        return []
    return [
        UserError(
            f"max_length {max_length} cannot hold a question window of {', '.join(tasks)} (span QA): [CLS], [SEP], "
            f"a context token and [SEP] need max_length {SPAN_QA_MIN_LENGTH} or more (384 is SQuAD's usual)"
        )
    ]


def single_label_problems(objective: ObjectiveRef | None, infos: Mapping[str, Any]) -> list[UserError]:
    """Pre-flight (`check_task_infos`): a classification task trained by the sentence objective has at
    least two labels. With one (glue/tsv's `labels: [pos]`) the cross-entropy over a single class is
    0 whatever the model says: every step had a zero gradient, nothing trained, and the report gave
    100% accuracy; the stage refused it only when it reached the task."""
    if not _objective_is(objective, "classification", "SequenceObjective"):
        return []
    return [
        UserError(single_label_message(task, tuple(info.labels)))
        for task, info in infos.items()
        if info.type == "classification" and len(info.labels) < 2
    ]


def single_label_message(task: str, labels: tuple[str, ...]) -> str:
    """Why a classification task with fewer than two labels cannot be fine-tuned (shared by the
    pre-flight and the objective)."""
    return (
        f"{task}: a classification task needs at least two labels to learn to tell apart, got {list(labels)}: the "
        "loss over a single class is 0 whatever the model predicts (nothing trains, and accuracy is 100%); list "
        "every label of the data in the task's `labels`"
    )


def check_preset_with_init(init: Any, model: str, default: str) -> None:
    """`model:` names a preset for random init; with `init:` the checkpoint fixes the architecture,
    so a preset other than the default would be silently ignored: an error at its key instead (an
    explicit `model:` equal to the default cannot be told apart from no key, and passes)."""
    if init is not None and model != default:
        raise FieldError(
            ("model",),
            f"{model!r} would be ignored: with `init:` the architecture is the checkpoint's "
            f"(remove `model:` or, from the command line, set it to the default {default!r}; or set `init: null` "
            "to train this preset from random weights)",
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


def check_task_model_encoder(config: Any) -> None:
    """`encoder:` checks of a stage that trains task models (transformer.finetune, bam.*): its
    `encoder`, `model`, `init` and `max_length`; sentence-pair tasks need two token types."""
    check_encoder_overrides(
        config.encoder,
        config.model,
        config.init,
        config.max_length,
        segments=2,
        segments_why="sentence-pair tasks give the second text token type 1",
    )


def check_encoder_overrides(
    encoder: Mapping[str, Any],
    model: str,
    init: Any,
    max_length: int,
    *,
    segments: int,
    segments_why: str,
    default_positions: int | None = None,
) -> None:
    """Refuse, at its key, an `encoder:` override that the encoder would refuse when built.

    These were tracebacks at model construction or IndexErrors at the first step (hidden_size not
    a multiple of num_heads, fewer positions than `max_length`, one token type for two-segment
    input). Without `init:` the overrides are checked merged into the preset (with the stage's
    `default_positions`, if it sets one); with it only each override's own range is, since the
    checkpoint fixes the rest (an override that differs from it is refused when it is read).
    `segments` token types are needed, for the reason `segments_why`.
    """
    values = dict(encoder)
    if init is None:
        default = {"max_position_embeddings": default_positions} if default_positions else {}
        values = {**preset_values(model), **default, **values}
    problems = encoder_problems(values, given=encoder)
    if problems:
        name, message = problems[0]
        raise FieldError(("encoder", name), message)
    positions = values.get("max_position_embeddings")
    if positions is not None and positions < max_length:
        if "max_position_embeddings" in encoder:
            raise FieldError(
                ("encoder", "max_position_embeddings"),
                f"{positions} positions do not cover max_length {max_length}: give at least {max_length}",
            )
        raise FieldError(
            "max_length",
            f"{max_length} is more than the {positions} positions of preset {model!r}: lower it, or set "
            f"encoder.max_position_embeddings to at least {max_length}",
        )
    types = values.get("type_vocab_size")
    if types is not None and types < segments:
        raise FieldError(("encoder", "type_vocab_size"), f"must be at least {segments} ({segments_why}), got {types}")


# --- pre-flight: the tokenizer's and the init checkpoint's files (torch- and tokenizers-free) --------


def _path_of(source: Input | None) -> Path | None:
    """An `Input`'s folder when it exists before the run (not an earlier stage's output)."""
    return source.path if source is not None and not source.is_reference else None


def read_vocabulary(folder: Path) -> tuple[Path, list[str | None]] | None:
    """(file, token of each id) of a WordPiece folder: `vocab.txt` (a token a line, as the
    tokenizer reads it), else `tokenizer.json`'s WordPiece vocabulary; None when neither reads.
    Ids that `tokenizer.json` leaves out are None.

    Tokens that `tokenizer.json` adds (`added_tokens`, past its WordPiece vocabulary) count as the
    tokenizer loads them (`WordPieceTokenizer.from_dir` prefers tokenizer.json): vocab.txt stops
    before them, and transformers 5 saves no vocab.txt at all. Without them the checks saw fewer
    tokens than the tokenizer has ids, and a checkpoint with fewer embeddings than that passed the
    pre-flight, to fail in the stage after earlier stages had run."""
    added = _tokenizer_json_tokens(folder / "tokenizer.json")
    vocab = folder / "vocab.txt"
    if vocab.is_file():
        text = vocab.read_text(encoding="utf-8", errors="replace").removeprefix("\ufeff")  # as the tokenizer
        lines: list[str | None] = list(re.split(r"\r\n|\r|\n", text))
        if lines and lines[-1] == "":
            lines.pop()
        return vocab, lines + (added[len(lines) :] if added is not None else [])
    return (folder / "tokenizer.json", added) if added is not None else None


def _tokenizer_json_tokens(document: Path) -> list[str | None] | None:
    """Token of each id of a `tokenizer.json` (WordPiece vocabulary, then added tokens at ids it
    leaves free), or None when it is absent or does not read."""
    if not document.is_file():
        return None
    try:
        data = json.loads(document.read_text(encoding="utf-8"))
        ids = {int(index): token for token, index in data["model"]["vocab"].items()}
        for token in data.get("added_tokens") or []:
            ids.setdefault(int(token["id"]), token["content"])
        if min(ids, default=0) < 0:
            return None
        tokens: list[str | None] = [None] * (max(ids, default=-1) + 1)
        for index, token in ids.items():
            tokens[index] = token
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None
    return tokens


def checkpoint_encoder(folder: Path) -> dict[str, Any] | None:
    """The encoder config an xfer model dir (`xfer_model.json`) or an HF folder (`config.json`)
    records, in EncoderConfig's names for the sizes read here; None when unreadable. The same
    choice of file and module as `modelio.read_encoder`, without loading any weights."""
    try:
        meta = folder / "xfer_model.json"
        if meta.is_file():
            modules = json.loads(meta.read_text(encoding="utf-8"))["modules"]
            name = (
                "encoder" if "encoder" in modules else next(n for n, d in modules.items() if d.get("type") == "encoder")
            )
            return dict(modules[name]["config"])
        config = folder / "config.json"
        if config.is_file():
            return dict(json.loads(config.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError, AttributeError, StopIteration):
        return None
    return None


def checkpoint_format_problem(folder: Path, key: str) -> UserError | None:
    """Why `folder` (given at `key`) is no checkpoint to start from, or None: missing, neither an xfer
    model directory nor an HF checkpoint, or a description file that is damaged. For stages whose
    `init` was found only when they read it, after the stages before them had trained."""
    if folder.is_file():  # a file inside a checkpoint (its model.safetensors, config.json): name the folder
        from xfer.transformer.hf import not_a_folder

        return CheckpointError(f"{key}: {not_a_folder(folder)}")
    if not folder.is_dir():
        return CheckpointError(f"{key}: {folder} does not exist")
    for name in ("xfer_model.json", "config.json"):  # the file read_encoder reads, in its order
        if (folder / name).is_file():
            if not checkpoint_encoder(folder):  # truncated, empty, or not a checkpoint's description
                return CheckpointError(f"{key}: {folder / name} does not describe an encoder (damaged?)")
            return None
    from xfer.transformer.hf import checkpoints_below, incomplete_download

    if (interrupted := incomplete_download(folder, ("xfer_model.json", "config.json"))) is not None:
        return CheckpointError(f"{key}: {interrupted}")
    return CheckpointError(
        f"{key}: {folder} is neither an xfer model directory (xfer_model.json) nor a Hugging Face checkpoint "
        f"(config.json){checkpoints_below(folder)}"
    )


def weights_problem(folder: Path) -> UserError | None:
    """Why the weights of the checkpoint `folder` cannot be read, or None; headers only, no tensor
    is loaded. A truncated or damaged model.safetensors (a copy cut short, a full disk) or a missing
    shard was found only when the stage loaded it, after every earlier stage of the recipe had run.
    safetensors checks that the header's offsets cover the file. A weights-only `pytorch_model.bin`
    is not read here (reading it means loading it)."""
    if not folder.is_dir():
        return None  # said by the checks that read its config
    from safetensors import safe_open

    from xfer.transformer.hf import NO_WEIGHTS, check_weight_map, incomplete_download, sharded_bin_problem

    if (interrupted := incomplete_download(folder)) is not None:  # a Hub snapshot whose blobs are gone
        return CheckpointError(interrupted)
    single, index = folder / "model.safetensors", folder / "model.safetensors.index.json"
    if single.is_file():
        files = [single]
    elif index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
            check_weight_map(index, weight_map)  # names only: a `../x` shard was opened here
        except CheckpointError as error:
            return error
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            return DataError(index, 0, f"not a safetensors index (a weight_map of tensor -> shard file): {error}")
        files = [folder / shard for shard in sorted(set(weight_map.values()))]
    elif (folder / "pytorch_model.bin").is_file():
        return None  # a weights-only .bin: not read here (reading it means loading it)
    elif (sharded_bin := sharded_bin_problem(folder)) is not None:  # the loader's refusal, not "no weights file"
        return CheckpointError(sharded_bin)
    else:  # a Hub snapshot of config and tokenizer only, a copy without its weights: found after earlier stages ran
        return CheckpointError(f"{folder}: {NO_WEIGHTS}")
    for file in files:
        if not file.is_file():
            return DataError(index, 0, f"names the weights file {file.name}, which is missing")
        try:
            with safe_open(str(file), framework="numpy"):
                pass
        except Exception as error:  # SafetensorError (header, coverage), OSError
            return DataError(file, 0, f"cannot read safetensors weights (truncated or damaged?): {error}")
    return None


def tokenizer_problem(folder: Path) -> UserError | None:
    """Why the stage could not load the tokenizer files in `folder`, or None. The pre-flight read
    vocab.txt for its checks, so a damaged tokenizer.json next to it (the file the tokenizer
    prefers) passed, and the stage stopped on it after every earlier stage had run. A folder with
    neither vocab.txt nor tokenizer.json (a tokenizer: given as another folder, a Hugging Face
    checkpoint copied without its tokenizer) passed too: every stage that runs these checks loads
    its tokenizer from this folder, so the loader's own error is given here."""
    from xfer.transformer.tokenization import WordPieceTokenizer

    try:
        WordPieceTokenizer.from_dir(folder)
    except UserError as error:
        return error
    return None


def checkpoint_problems(
    tokenizer: Path | None, init: Path | None, encoder: Mapping[str, Any], max_length: int, *, random_init: bool
) -> list[UserError]:
    """What a stage's tokenizer folder (by default the init checkpoint's own), init checkpoint and
    `encoder:` overrides disagree on, each error naming the files; also an init path that is no
    checkpoint (`checkpoint_format_problem`), architecture overrides it contradicts
    (`encoder_override_problems`) and a tokenizer folder the loader refuses. Empty when they fit; folders
    that are earlier stages' outputs (None here) are not there yet and are checked by the stage.

    A vocabulary that differs from the one the checkpoint was trained with was accepted when it
    was not larger: its ids then meant other words for every pre-trained embedding, silently.
    """
    problems: list[UserError] = []
    # a file, a missing folder or no checkpoint: transformer.finetune's pre-flight passed
    # `init: ckpt/model.safetensors`, and the stage refused it once the stages before it had run
    unusable = checkpoint_format_problem(init, "init") if init is not None else None
    if unusable is not None:
        problems.append(unusable)
    elif init is not None and (unreadable := weights_problem(init)) is not None:
        problems.append(unreadable)
    elif init is not None:  # missing or extra encoder tensors: a bare RuntimeError of load_state_dict, after training
        from xfer.transformer.modelio import encoder_weights_problem

        if (tensors := encoder_weights_problem(init)) is not None:
            problems.append(tensors)
    if init is not None and unusable is None:
        problems += encoder_override_problems(init, encoder)
    same_folder = tokenizer is not None and init is not None and tokenizer.absolute() == init.absolute()
    if unusable is not None and same_folder:
        return problems  # the tokenizer is the checkpoint's own: one error for one wrong path
    if tokenizer is not None and (unloadable := tokenizer_problem(tokenizer)) is not None:
        problems.append(unloadable)
    vocabulary = read_vocabulary(tokenizer) if tokenizer is not None else None
    sizes = checkpoint_encoder(init) if init is not None else None
    if vocabulary is not None and init is not None and tokenizer is not None and tokenizer.resolve() != init.resolve():
        mismatch = vocabulary_mismatch(vocabulary, read_vocabulary(init))
        if mismatch is not None:
            problems.append(mismatch)
    if vocabulary is not None:
        file, tokens = vocabulary
        embeddings = encoder.get("vocab_size") if random_init else (sizes or {}).get("vocab_size")
        if isinstance(embeddings, int) and embeddings < len(tokens):
            if not random_init:
                problems.append(
                    DataError(
                        str(init),
                        0,
                        f"the checkpoint has {embeddings} token embeddings but the tokenizer ({tokenizer}) "
                        f"has {len(tokens)} tokens: use the checkpoint's own vocabulary",
                    )
                )
            else:
                problems.append(
                    UserError(
                        f"encoder.vocab_size {embeddings} is less than the {len(tokens)} tokens of the tokenizer "
                        f"({file}): ids from {embeddings} on would have no embedding; remove encoder.vocab_size "
                        "(it defaults to the tokenizer's size)"
                    )
                )
        pad = encoder.get("pad_token_id")
        if pad is not None and "[PAD]" in tokens and tokens.index("[PAD]") != pad:
            actual = tokens.index("[PAD]")
            fix = f"set it to {actual}" if actual else "remove it (the default is 0)"
            problems.append(
                UserError(
                    f"encoder.pad_token_id {pad} is not the tokenizer's [PAD] id, {actual} ({file}): the exported "
                    f"config would name another token as padding; {fix}"
                )
            )
    positions = (sizes or {}).get("max_position_embeddings")
    if isinstance(positions, int) and positions < max_length:
        problems.append(
            DataError(
                str(init),
                0,
                f"the checkpoint covers {positions} positions but max_length is {max_length}: "
                f"lower max_length to at most {positions}",
            )
        )
    return problems


def checkpoint_encoder_config(folder: Path) -> Any | None:
    """The EncoderConfig an xfer model dir (`xfer_model.json`) or an HF folder (`config.json`) describes,
    as `modelio.read_encoder` reads it but without loading the weights; None when the description does
    not read (the checks that read it, and the stage, say why). Imports torch (EncoderConfig's module)."""
    from xfer.transformer.encoder import EncoderConfig
    from xfer.transformer.hf import encoder_config_from_hf

    values = checkpoint_encoder(folder)
    if values is None:
        return None
    try:
        if (folder / "xfer_model.json").is_file():  # the file `checkpoint_encoder` read, as `read_encoder` chooses
            return EncoderConfig.from_dict(values)
        return encoder_config_from_hf(values, str(folder / "config.json"))
    except (UserError, KeyError, TypeError, ValueError):
        return None


def encoder_override_problems(init: Path, encoder: Mapping[str, Any]) -> list[UserError]:
    """`encoder:` overrides of architecture fields against the `init` checkpoint folder, with the check
    the stages run when they read it (`modelio.with_overrides`): `xfer validate --data` said ok to
    `encoder: {hidden_size: 32}` on a 64-wide checkpoint, and the stage refused it only once the stages
    before it had run. Its description only is read; an unreadable one is reported by the other checks."""
    from xfer.transformer.presets import ARCHITECTURE_FIELDS

    if not any(name in ARCHITECTURE_FIELDS for name in encoder):
        return []
    config = checkpoint_encoder_config(init)
    if config is None:
        return []
    from xfer.transformer.modelio import with_overrides

    try:
        with_overrides(config, dict(encoder), init)
    except CheckpointError as problem:
        return [problem]
    except (TypeError, ValueError):
        return []  # a value EncoderConfig refuses: recipe validation reports it at its key
    return []


def vocabulary_mismatch(
    tokenizer: tuple[Path, list[str | None]],
    init: tuple[Path, list[str | None]] | None,
    checkpoint: str = "the init checkpoint",
    remedy: str = "use the checkpoint's own tokenizer (leave out `tokenizer:`)",
) -> DataError | None:
    """An error at the first line where the tokenizer's vocabulary differs from the init
    checkpoint's. A tokenizer that is a prefix of the checkpoint's vocabulary fits (its ids mean
    the same words). A checkpoint without a vocabulary file cannot be compared and passes: its
    embedding count is still checked against the tokenizer's size."""
    if init is None:
        return None
    (ours, our_tokens), (theirs, their_tokens) = tokenizer, init
    for index, (mine, other) in enumerate(zip(our_tokens, their_tokens, strict=False)):
        if mine != other:
            return DataError(
                str(ours),
                index + 1,
                f"token id {index} is {mine!r} here but {other!r} in {checkpoint}'s vocabulary "
                f"({theirs}:{index + 1}): the checkpoint was trained with another vocabulary, so its embeddings "
                f"would stand for other words; {remedy}",
            )
    return None

"""Configs of the `bam.teachers` and `bam.student` stages (torch-free, so `xfer validate` stays fast).

Both stages build models the same way as `transformer.finetune` (an `init` checkpoint or a
preset, a tokenizer, a fine-tuning objective per task type), so they share those fields; the
defaults of `train:` differ: teachers use single-task fine-tuning settings (ELECTRA's, as
`transformer.finetune`), the student the multi-task settings of the BAM paper (6 epochs, batch
128, lr 1e-4, layer-wise LR decay 0.9, 10% warmup, weight decay 0.01).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from xfer.core.config import FieldError, Input, KeysOf, ObjectiveRef, TaskRef, check_distinct_tasks, knob
from xfer.core.errors import UserError
from xfer.core.train_config import TrainConfig
from xfer.transformer.finetune_config import (
    DEFAULT_TRAIN,
    ENCODER_FIELDS,
    PresetName,
    check_preset_with_init,
    check_task_epochs,
    check_task_model_encoder,
    objective_problems,
)

COMPARE_AVERAGE = "average"
"""`xfer compare`'s name for the average over tasks (`compare.AVERAGE`, which imports numpy: this module
stays light). Registered task names are namespaced (`glue/rte`), an alias is a plain word: `as: average` put
compare's average into that task's column, and its tests of the task and of the average shared one name."""

TEACHER_TRAIN = DEFAULT_TRAIN
"""Single-task fine-tuning, as `transformer.finetune` (ELECTRA-Small: lr 3e-4, layer decay 0.8, 3 epochs)."""

STUDENT_TRAIN = dataclasses.replace(
    DEFAULT_TRAIN, epochs=6.0, batch_size=128, lr=1e-4, weight_decay=0.01, layer_decay=0.9
)
"""BAM's multi-task settings (thesis 3.3 and the original code): longer, larger batches, lr 1e-4, decay 0.9."""

TASK_TYPES = ("classification", "regression", "tagging")
"""The task types BAM distils: the keys of `objective.TASK_KINDS` (this module stays torch-free)."""

LambdaSchedule = Literal["linear", "constant", "none"]
Sampling = Literal["power", "proportional", "uniform", "temperature"]
Mixing = Literal["example", "batch"]
Pick = Literal["median", "first"]


@dataclass
class ModelSource:
    """Fields shared by both stages: which tasks, which initial weights, how inputs are built."""

    # not fields: where `init`'s encoder comes from when it is an earlier stage's output, for this stage's
    # checks and those of the stages that start from it (`check_init_stage`, `_encoder_positions`, `_init_folder`)
    _init_positions = None  # (stage whose `encoder:` sets the positions, positions, stages between)
    _init_folder = None  # (checkpoint folder an earlier stage of the chain starts from, stages between)

    tasks: list[TaskRef] = knob(
        doc="Tasks, e.g. [{name: glue/rte, data_dir: ...}, ...]; classification, regression or tagging."
    )
    init: Input | None = knob(
        None,
        "Initial weights: an earlier stage's output or a folder (xfer model dir, e.g. an ELECTRA discriminator, "
        "or a HF ELECTRA/BERT folder). Null: random init of `model`.",
        takes=("model", "bam-models"),  # a BAM `models` output: each task starts from its model (weights.py)
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
        {}, "Overrides of encoder fields, e.g. {hidden_dropout: 0.1}."
    )
    objective: ObjectiveRef | None = knob(
        None,
        "Fine-tuning objective for every task; default by task type (transformer.sequence / transformer.tagging). "
        "BAM needs an objective with `scores(batch)` (those two and their subclasses).",
    )
    # ge=3, as transformer.finetune: a sentence pair's [CLS] and two [SEP]s (2 passed, then the tokenizer failed)
    max_length: int = knob(128, "Maximum tokens per input (longer tagging sentences are split, never cut).", ge=3)
    trials: int = knob(1, "Runs with seeds seed, seed+1, ...; results report median/mean/std over them.", ge=1)
    eval_batch_size: int = knob(128, "Batch size for evaluation and for computing teacher predictions.", ge=1)
    cache_dir: Path | None = knob(
        None,
        "Shared content-addressed store of teacher predictions (<key>.safetensors), reused across runs. "
        "Default: only this stage's outputs/predictions.",
        not_an_input=True,  # the stage writes there: signing its contents re-ran the teachers at every run
    )

    def _check_sources(self) -> None:
        if not self.tasks:
            raise FieldError("tasks", "give at least one task")
        check_distinct_tasks(self.tasks)
        for position, ref in enumerate(self.tasks):
            if ref.key == COMPARE_AVERAGE:
                raise FieldError(
                    ("tasks", str(position), "as"),
                    f"{ref.key!r} is the name of `xfer compare`'s column of the task average: choose another alias",
                )
            # glue/mnli's AX predictions are test-split predictions, which BAM stages never write:
            # the setting was accepted and did nothing (and signed the AX file into the fingerprint)
            if getattr(ref.config, "diagnostic", False) is True:
                raise FieldError(
                    ("tasks", str(position), "diagnostic"),
                    "BAM stages write no test-set predictions, so the diagnostic set (AX.tsv) would never be "
                    "predicted: remove `diagnostic: true` here (transformer.finetune with `predict: [dev, test]` "
                    "writes AX.tsv)",
                )
        if self.trials < 1:
            raise FieldError("trials", "must be >= 1")
        check_preset_with_init(self.init, self.model, "tiny")
        check_task_model_encoder(self)

    def check_init_stage(self, stages: Mapping[str, Any]) -> None:
        """`init` against the config of the stage it comes from (`check_upstream`): a `max_length`
        beyond the positions that stage's `encoder:` gives the network is a recipe error at the key,
        not a ValueError traceback in the first training step after that stage has trained."""
        ref = self.init
        upstream = stages.get(ref.stage) if ref is not None and ref.stage else None
        found = self._init_positions = _encoder_positions(ref, stages)  # for the stages that start from this one
        self._init_folder = _init_folder(ref, stages)
        if found is not None and found[1] < self.max_length:
            origin, positions, through = found
            chain = f", which `init` comes from through stage {' and '.join(map(repr, through))}" if through else ""
            raise FieldError(
                "max_length",
                f"{self.max_length} is more than the {positions} positions of the encoder of stage {origin!r} "
                f"(its encoder.max_position_embeddings){chain}: lower max_length to at most {positions}",
            )
        if ref is not None and ref.output == "models" and isinstance(upstream, ModelSource):
            self._check_models_init(ref, upstream)

    def _check_models_init(self, ref: Input, upstream: ModelSource) -> None:
        """`init: <stage>.models` is a task -> model map (`weights.InitialWeights`): it must have a model
        for every task here. A task it lacks was refused only when this stage started, after stage
        `ref.stage` had trained."""
        theirs = [task.key for task in upstream.tasks]
        missing = next((task.key for task in self.tasks if task.key not in theirs), None)
        one_model = isinstance(upstream, StudentConfig) and upstream.multitask
        if missing is None and getattr(self, "multitask", False) and len(self.tasks) > 1 and not one_model:
            # a multi-task student starts from one model: it stopped on "init gives tasks ... different
            # models" when it started, after the teachers had trained
            raise FieldError(
                "init",
                f"{ref} holds one model per task (stage {ref.stage!r} trains each task on its own), and a "
                f"multi-task student starts from one model: use {ref.stage}.init (the encoder it started from), "
                "a multi-task student's models, or multitask: false",
            )
        if missing is None:
            return
        # an encoder to start from instead: the teachers' `init` output, or what that student started from
        encoder = f"{ref.stage}.init" if isinstance(upstream, TeachersConfig) else upstream.init
        raise FieldError(
            "init",
            f"{ref} has no model for task {missing!r}: stage {ref.stage!r} trains {', '.join(theirs)} (start this "
            f"stage from an encoder{f', e.g. {encoder}' if encoder is not None else ''}, or drop the task)",
        )

    def preflight(self) -> list[UserError]:
        """The `init` checkpoint and tokenizer folders that exist before the run (`xfer.bam.checks`),
        so that a wrong folder fails before the stages ahead of this one train; folders that earlier
        stages write are checked when the stage starts."""
        from xfer.bam.checks import source_problems

        if self.init is not None and self.init.is_reference:
            return self._chain_positions_problems()
        init = self.init.path if self.init is not None else None
        # a tokenizer an earlier stage writes: the checkpoint's own files are still checked
        tokenizer = self.tokenizer.path if self.tokenizer is not None and not self.tokenizer.is_reference else None
        return source_problems(init, tokenizer, self.encoder, self.max_length)

    def _chain_positions_problems(self) -> list[UserError]:
        """`max_length` against the checkpoint folder that `init`, an earlier stage's output, started
        from (`init: teachers.init` of teachers with `init: /path/to/electra`): only the teachers'
        own max_length was checked against that folder, and this stage's was refused when it
        started, after the teachers had trained. The folder's other problems are the teachers'."""
        from xfer.bam.checks import init_folders
        from xfer.transformer.finetune_config import checkpoint_encoder

        if self._init_folder is None:
            return []
        origin, through = self._init_folder
        try:
            folders = init_folders(origin)
        except UserError:
            return []  # reported by the pre-flight of the stage that reads the folder
        for folder in folders:
            positions = (checkpoint_encoder(folder) or {}).get("max_position_embeddings")
            if isinstance(positions, int) and positions < self.max_length:
                stages = " and ".join(map(repr, through))
                return [
                    UserError(
                        f"max_length: {self.max_length} is more than the {positions} positions of the checkpoint "
                        f"{folder}, which `init` ({self.init}) comes from through stage {stages}: lower max_length "
                        f"to at most {positions}"
                    )
                ]
        return []

    def check_task_infos(self, infos: Mapping[str, Any]) -> list[UserError]:
        """Every task is of a type BAM distils (`objective.TASK_KINDS`): a span-QA, parsing or
        translation task has a default fine-tuning objective, so it passed the pre-flight and was
        refused only when the stage started, after the stages before it (ELECTRA pre-training) had
        trained. Then every task has an objective that handles its type."""
        problems = []
        for position, ref in enumerate(self.tasks):
            info = infos.get(ref.key)
            if info is not None and info.type not in TASK_TYPES:
                problems.append(
                    UserError(
                        f"tasks.{position}: {ref.key} is a {info.type} task; BAM distils {', '.join(TASK_TYPES)} "
                        "tasks (fine-tune it on its own with transformer.finetune)"
                    )
                )
        handled = {name: info for name, info in infos.items() if info.type in TASK_TYPES}
        return problems + objective_problems(self.objective, handled)

    def data_splits(self) -> list[tuple[TaskRef, tuple[str, ...]]]:
        """Pre-flight: both stages read the train and dev split of every task."""
        return [(ref, ("train", "dev")) for ref in self.tasks]


@dataclass
class TeachersConfig(ModelSource):
    """`bam.teachers`: one single-task model per task (and seed), and its predictions on its training set."""

    train: TrainConfig = knob(
        TEACHER_TRAIN, "Optimisation (ELECTRA-Small fine-tuning: lr 3e-4, layer decay 0.8, 3 epochs)."
    )
    task_epochs: dict[str, float] = knob({}, "Per-task epochs, e.g. {glue/rte: 10, glue/stsb: 10} as in ELECTRA.")
    teacher: Pick = knob(
        "median",
        "Which trial teaches (its training-set predictions are cached): the one with the median dev score, or the "
        "first (the original BAM code used trial 1).",
    )

    def __post_init__(self) -> None:
        self._check_sources()
        check_task_epochs(self.task_epochs, [ref.key for ref in self.tasks])

    def check_upstream(self, stages: Mapping[str, Any]) -> None:
        self.check_init_stage(stages)


@dataclass
class StudentConfig(ModelSource):
    """`bam.student`: one shared encoder with a head per task, distilled from cached teacher predictions."""

    _teacher_tasks = None  # not a field: task key -> the teachers stage's entry of it (`check_upstream`)

    teachers: Input | None = knob(
        None,
        "Teacher predictions: the `predictions` output of a bam.teachers or bam.student stage (or such a folder). "
        "Required unless lambda_schedule is none.",
        takes=("teacher-predictions",),
    )
    lambda_schedule: LambdaSchedule = knob(
        "linear",
        "Weight λ of the gold label in the target λ·gold + (1-λ)·teacher: linear 0→1 over training (teacher "
        "annealing), constant (lambda_value; 0 = pure distillation), none (no teachers: plain multi-task).",
    )
    lambda_value: float = knob(
        0.0, "λ of the constant schedule (0 = pure distillation, 0.5 = half and half).", ge=0, le=1
    )
    multitask: bool = knob(
        True, "One student for all tasks (Single→Multi, Multi→Multi); false: one student per task (Single→Single)."
    )
    sampling: Sampling = knob(
        "power",
        "Task sampling: power (∝ |D|^alpha, BAM), proportional (∝ |D|), uniform, temperature (∝ |D|^(1/temperature)).",
    )
    alpha: float = knob(0.75, "Exponent of the power sampling (BAM: 0.75).", ge=0)
    temperature: float = knob(2.0, "Temperature of the temperature sampling.", gt=0)
    mixing: Mixing = knob(
        "example",
        "example: every example of a batch draws its task (tasks mixed within batches, as BAM); "
        "batch: every batch draws one task.",
    )
    train: TrainConfig = knob(STUDENT_TRAIN, "Optimisation (BAM: 6 epochs, batch 128, lr 1e-4, layer decay 0.9).")
    teacher: Pick = knob(
        "median",
        "Which trial's model becomes this stage's `model` and `predictions` outputs (to teach a later stage): "
        "median of the average dev score, or the first.",
    )

    def __post_init__(self) -> None:
        self._check_sources()
        if self.lambda_schedule == "none" and self.teachers is not None:
            raise FieldError(
                "teachers", "lambda_schedule is none (plain multi-task training), so teachers would be ignored"
            )
        if self.lambda_schedule != "none" and self.teachers is None:
            raise FieldError(
                "teachers",
                f"lambda_schedule {self.lambda_schedule!r} distils from teachers: give teachers "
                "(e.g. teachers.predictions), or set lambda_schedule: none for plain multi-task training",
            )
        if self.lambda_schedule != "constant" and self.lambda_value != 0.0:
            raise FieldError("lambda_value", f"only used by lambda_schedule: constant (it is {self.lambda_schedule!r})")
        if self.lambda_schedule == "constant" and self.lambda_value == 1.0:
            # λ = 1 weighs the teacher by 0 at every step: the teachers were required (and had to be
            # trained first), read and listed in the report, yet taught nothing, as with `none` above
            raise FieldError(
                "lambda_value",
                "1 gives the teachers no weight at any step (the target is the gold label alone), so teachers "
                "would be ignored: use lambda_schedule: none without teachers for plain multi-task training, "
                "or a lambda_value below 1",
            )
        # like lambda_value: a knob of another scheme would be silently ignored (a value equal to the
        # default cannot be told from no key, and passes)
        for knob_name, scheme, default in (("alpha", "power", 0.75), ("temperature", "temperature", 2.0)):
            if self.sampling != scheme and getattr(self, knob_name) != default:
                raise FieldError(knob_name, f"only used by sampling: {scheme} (it is {self.sampling!r})")

    def preflight(self) -> list[UserError]:
        """Also a `teachers:` folder that exists before the run (not an earlier stage's output, which
        `check_upstream` covers): a task it has no predictions for was found only when this stage
        started, after every stage before it had trained."""
        problems = super().preflight()
        index = self._teachers_index(problems)
        for position, ref in enumerate(self.tasks):
            if index is not None and ref.key not in index:
                problems.append(
                    UserError(
                        f"tasks.{position}: {ref.key!r} has no teacher: teachers {self.teachers} has predictions for "
                        f"{', '.join(index) or 'no task'} (re-run the teachers with this task, or train it without "
                        "teachers in a lambda_schedule: none stage)"
                    )
                )
            elif index is not None and (missing := _missing_predictions(Path(str(self.teachers.path)), ref.key, index)):
                problems.append(UserError(f"tasks.{position}: {ref.key!r}: {missing}"))
        return problems

    def check_task_infos(self, infos: Mapping[str, Any]) -> list[UserError]:
        """Also the type and label order of a `teachers:` folder's predictions against each task's: a
        label order that differs (the same labels permuted) is refused when the stage starts
        (`stage.check_compatible`), so say it before the stages ahead of this one train."""
        problems = super().check_task_infos(infos) + self._own_loss_problems()
        index = self._teachers_index([])
        for position, ref in enumerate(self.tasks):
            entry, info = (index or {}).get(ref.key), infos.get(ref.key)
            if not isinstance(entry, Mapping) or info is None:
                continue
            if entry.get("type") != info.type or list(entry.get("labels", [])) != list(info.labels):
                problems.append(
                    UserError(
                        f"tasks.{position}: the teachers' predictions in {self.teachers} for {ref.key!r} are for a "
                        f"{entry.get('type')} task with labels {entry.get('labels')}, this task is {info.type} with "
                        f"labels {list(info.labels)} (label order must match: re-run the teachers on this task config)"
                    )
                )
        return problems + self._teacher_stage_problems(infos)

    def _teacher_stage_problems(self, infos: Mapping[str, Any]) -> list[UserError]:
        """The type, labels and score range of each task as the `teachers` stage of this recipe reads it
        (its own task entry), against this stage's: entries that differ in a field that changes them
        (conll's `tag_scheme`, a `max_examples` that drops the only example of a tag, from which the
        tag set is read) passed validation, which compares only the `type`/`labels` fields, and the
        student was refused when it started (`stage.check_compatible`), after the teachers had trained."""
        from xfer.core.plugins import default_host

        problems: list[UserError] = []
        for position, ref in enumerate(self.tasks):
            teacher, info = (self._teacher_tasks or {}).get(ref.key), infos.get(ref.key)
            if teacher is None or info is None or teacher == ref:
                continue
            try:
                theirs = default_host().load("task", teacher.name)(teacher.key, teacher.config).info()
            except Exception:  # the teachers stage's own pre-flight reports its data
                continue
            ours_said = (info.type, list(info.labels), _info_score_range(info.extra))
            theirs_said = (theirs.type, list(theirs.labels), _info_score_range(theirs.extra))
            if ours_said != theirs_said:
                problems.append(
                    UserError(
                        f"tasks.{position}: {ref.key!r} is a {info.type} task with labels {ours_said[1]}"
                        f"{f' and score range {ours_said[2]}' if info.type == 'regression' else ''} here, but stage "
                        f"{self.teachers.stage!r} trains its teacher on a {theirs.type} task with labels "
                        f"{theirs_said[1]}{f' and score range {theirs_said[2]}' if theirs.type == 'regression' else ''}"
                        ": the teacher's outputs would mean other labels (use the teachers' task entry here)"
                    )
                )
        return problems

    def _own_loss_problems(self) -> list[UserError]:
        """An `objective` that overrides `loss()` (a focal loss) or `forward()` (an auxiliary penalty) has
        no form for the mixed target a student distils (`objective.DistillationObjective` refuses it):
        say so before the teachers train."""
        if self.objective is None or self.lambda_schedule == "none":
            return []
        from xfer.bam.objective import own_loss_method
        from xfer.core.errors import PluginError
        from xfer.core.plugins import default_host

        try:
            objective_class = default_host().load("objective", self.objective.name)
        except PluginError:
            return []  # recipe validation reports an objective it cannot load
        method = own_loss_method(objective_class)
        if method is None:
            return []
        return [
            UserError(
                f"objective: {self.objective.name} overrides {method}, which has no form for the mixed target "
                f"λ·gold + (1−λ)·teacher of lambda_schedule {self.lambda_schedule!r}: distil with the built-in "
                "objective (remove `objective:`), or train without teachers (lambda_schedule: none)"
            )
        ]

    def _teachers_index(self, problems: list[UserError]) -> dict[str, Any] | None:
        """The task entries of a `teachers:` folder's index.json (None for a stage output or no
        teachers); an unreadable or missing index is added to `problems`."""
        if self.teachers is None or self.teachers.is_reference or self.teachers.path is None:
            return None
        from xfer.bam.cache import read_index

        try:
            return read_index(Path(self.teachers.path))
        except UserError as exc:
            problems.append(UserError(f"teachers: {exc}"))
            return None

    def check_upstream(self, stages: Mapping[str, Any]) -> None:
        """Every task needs the teachers' predictions: a task the `teachers` stage of this recipe does
        not train was found only once that stage had trained (hours, on real data), and so was a
        teacher found by alias that the teachers load with another task loader. The task configs are
        not compared, but for their `labels` (the order of a head's outputs): they may differ in what
        only dev or test reads, and the stage checks the training examples themselves by digest. Also `init` against its stage (`check_init_stage`)."""
        self.check_init_stage(stages)
        source = stages.get(self.teachers.stage) if self.teachers is not None and self.teachers.stage else None
        covered = {ref.key: ref for ref in getattr(source, "tasks", None) or []}
        self._teacher_tasks = covered or None  # what the teachers' task infos say is checked in the pre-flight
        if not covered:
            return
        for index, ref in enumerate(self.tasks):
            teacher = covered.get(ref.key)
            if teacher is None:
                raise FieldError(
                    ("tasks", str(index)),
                    f"{ref.key!r} has no teacher: stage {self.teachers.stage!r} predicts {', '.join(covered)} "
                    "(add the task there, or train it without teachers in a lambda_schedule: none stage)",
                )
            # matched by alias: `{name: glue/tsv, as: reviews}` here against the teachers'
            # `{name: glue/rte, as: reviews}` passed, and failed only when this stage started
            if teacher.name != ref.name:
                raise FieldError(
                    ("tasks", str(index)),
                    f"{ref.key!r} is a {ref.name} task here, but stage {self.teachers.stage!r} trains the teacher of "
                    f"{ref.key!r} on {teacher.name}: its predictions are for another task (use the teachers' "
                    "task entry here, or give this one another alias and a teacher of its own)",
                )
            # the config fields that say what a head's outputs mean (glue/tsv's `type` and `labels`):
            # a classification teacher of a regression task, or the same labels in another order, were
            # refused only when this stage started (check_compatible), after the teachers had trained
            ours, theirs = getattr(ref.config, "type", None), getattr(teacher.config, "type", None)
            if isinstance(ours, str) and isinstance(theirs, str) and ours != theirs:
                raise FieldError(
                    ("tasks", str(index), "type"),
                    f"{ours} here, but stage {self.teachers.stage!r} trains the teacher of {ref.key!r} as a {theirs} "
                    "task: its outputs are not this task's (use the teachers' task entry here)",
                )
            ours, theirs = getattr(ref.config, "labels", None), getattr(teacher.config, "labels", None)
            if ours is not None and theirs is not None and list(ours) != list(theirs):
                raise FieldError(
                    ("tasks", str(index), "labels"),
                    f"{list(ours)} here, but stage {self.teachers.stage!r} trains the teacher of {ref.key!r} with "
                    f"labels {list(theirs)}: its outputs are in that order (use the teachers' labels here)",
                )
            # glue/tsv's `score_range` (regression targets are scaled by it to [0, 1]): a teacher trained
            # on [0, 5] scores was refused only when this stage started (check_compatible), after it trained
            ours, theirs = _config_score_range(ref.config), _config_score_range(teacher.config)
            if ours is not None and theirs is not None and ours != theirs:
                raise FieldError(
                    ("tasks", str(index), "score_range"),
                    f"{ours} here (targets scaled from it to [0, 1]), but stage {self.teachers.stage!r} trains the "
                    f"teacher of {ref.key!r} with score_range {theirs}: its outputs are scaled from that range "
                    "(use the teachers' score_range here)",
                )


def _encoder_positions(ref: Input | None, stages: Mapping[str, Any]) -> tuple[str, int, list[str]] | None:
    """(stage, positions, stages between) when the network `ref` names has the positions of an earlier
    stage's own `encoder: {max_position_embeddings}`: the stage `ref` reads, when it starts from no
    checkpoint, else what that stage found up its own `init` chain (`ModelSource._init_positions`,
    set by its `check_init_stage`; a recipe's stages are checked in their order in the file).

    `init: teachers.init` of teachers that start from `pretrain.discriminator` is the pre-trained
    encoder: only the teachers' own positions were checked, so a student's `max_length` beyond the
    pre-training stage's positions was refused when the student started, after the teachers had
    trained (the chain of recipes/bam-on-electra.yaml)."""
    upstream = stages.get(ref.stage) if ref is not None and ref.stage else None
    if upstream is None:
        return None
    if getattr(upstream, "init", None) is None:
        overrides = getattr(upstream, "encoder", None)
        positions = overrides.get("max_position_embeddings") if isinstance(overrides, Mapping) else None
        return (ref.stage, positions, []) if isinstance(positions, int) else None
    found = getattr(upstream, "_init_positions", None)
    return (found[0], found[1], [ref.stage, *found[2]]) if found is not None else None


def _info_score_range(extra: Mapping[str, Any]) -> list[float]:
    """A task info's `score_range` as `weights.score_range` reads it (none: [0, 1]); torch-free here."""
    return [float(v) for v in extra.get("score_range", (0.0, 1.0))]


def _config_score_range(config: Any) -> list[float] | None:
    """A task config's `score_range` field as the objective scales by it (None there: [0, 1], as
    `weights.score_range`); None for a config without the field."""
    if not hasattr(config, "score_range"):
        return None
    value = config.score_range
    return [float(v) for v in (value if value is not None else (0.0, 1.0))]


def _init_folder(ref: Input | None, stages: Mapping[str, Any]) -> tuple[Path, list[str]] | None:
    """(checkpoint folder, stages between) when the network `ref` names comes, through earlier stages'
    `init`, from a folder that exists before the run; None otherwise (see `_encoder_positions`)."""
    upstream = stages.get(ref.stage) if ref is not None and ref.stage else None
    parent = getattr(upstream, "init", None)
    if not isinstance(parent, Input):
        return None
    if not parent.is_reference and parent.path is not None:
        return Path(parent.path), [ref.stage]
    found = getattr(upstream, "_init_folder", None)
    return (found[0], [ref.stage, *found[1]]) if found is not None else None


def _missing_predictions(folder: Path, task: str, index: Mapping[str, Any]) -> str | None:
    """What is wrong with the predictions file index.json names for `task`, when it is not there
    (an index copied without its .safetensors files): found only when the stage started, after
    every stage before it had trained. The file's contents are checked when it is read."""
    from xfer.bam.cache import CacheError, entry_file

    try:
        file = entry_file(folder, task, index[task])
    except CacheError as error:
        return str(error)
    if not file.is_file():
        return f"{folder / 'index.json'} names the predictions file {file.name}, which is missing (copied without it?)"
    return None

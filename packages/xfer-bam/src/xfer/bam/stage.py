"""The `bam.teachers` and `bam.student` stages.

Both train *groups* of tasks, each group one model (shared encoder + a head per task), `trials`
seeds per group, each seed an ordinary resumable `Trainer` run in `trials/<group>/trial-N`:

- `bam.teachers`: one group per task, trained on gold labels only (single-task fine-tuning).
- `bam.student`: one group holding every task (`multitask: true`) or one per task, trained on
  λ·gold + (1−λ)·teacher with the teachers' outputs read from their prediction cache.

After its trials, every group's *teaching* trial (median dev score, or the first) is exported:

    outputs/models/<group>/        xfer model dir (encoder + one head per task + tokenizer);
    outputs/models/models.json     task -> model dir (so `init: <stage>.models` restarts each task from it)
    outputs/predictions/           its outputs on every training set (content-addressed cache
                                   entries + index.json): what a later `bam.student` distils from
    outputs/results/results.json   per task: every run's dev metrics and their median/mean/std
    outputs/results/dev/<task>/    gold.json and trial-N.json: per-example dev predictions (for `xfer compare`)
    outputs/init/                  (teachers only) the initial encoder every teacher started from;
                                   students use `init: teachers.init` to start from the same weights

So Multi→Multi, Single→Single, Single→Multi→Single→Multi and single-task fine-tuning after
multi-task training are chains of these two stages in a recipe (see the package README).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from xfer.bam import cache
from xfer.bam.config import ModelSource, StudentConfig, TeachersConfig
from xfer.bam.data import MixedCollate, MixedTaskSource, attach_teacher_outputs, batch_mixing_source
from xfer.bam.evaluation import GroupEvaluator, TaskData, gold_value, teacher_rows
from xfer.bam.model import HiddenStates, MultiTaskModel, module_name
from xfer.bam.objective import DistillationObjective, task_kind
from xfer.bam.sampling import task_probabilities
from xfer.bam.weights import (
    InitialWeights,
    resolve_init,
    save_bam_model,
    save_init,
    score_range,
    settle,
    write_models_index,
)
from xfer.core import distributed as dist
from xfer.core import rng
from xfer.core.atomic import write_json
from xfer.core.checkpoint import evaluated_checkpoint
from xfer.core.config import ObjectiveRef, TaskRef
from xfer.core.errors import UserError
from xfer.core.evaluation import oriented_mean
from xfer.core.results import markdown_cell, score_order
from xfer.core.stage import StageContext, finished_trial
from xfer.core.tasks import nonempty_examples
from xfer.core.train_config import TrainConfig
from xfer.core.trainer import Trainer, load_evaluated_weights, resolve_precision
from xfer.transformer.collapse import warn_if_collapsed

BOOKKEEPING = ("trial", "seed", "steps", "checkpoint")


@dataclass
class Setup:
    """What every model of a stage shares: tokenizer, initial weights, featurisation, precision."""

    config: ModelSource
    tokenizer: Any
    weights: InitialWeights
    amp: torch.dtype | None

    @classmethod
    def prepare(cls, ctx: StageContext, config: ModelSource) -> Setup:
        from xfer.transformer.finetune import load_tokenizer

        check_sources(ctx, config)
        weights = resolve_init(config, ctx)
        tokenizer = load_tokenizer(config, ctx, weights.tokenizer_folder)
        settle(weights, tokenizer, config, ctx.seed)
        if config.init is not None and weights.encoder_state is not None:
            source = weights.tokenizer_folder  # the init folder `resolve_init` read the weights from
            warn_if_collapsed(ctx, weights.encoder_config, weights.encoder_state, tokenizer, source)
        return cls(config, tokenizer, weights, resolve_precision(config.train.precision, ctx.device))

    def autocast(self, device: torch.device) -> Any:
        import contextlib

        return torch.autocast(device.type, dtype=self.amp) if self.amp is not None else contextlib.nullcontext()


def check_sources(ctx: StageContext, config: ModelSource) -> None:
    """The pre-flight's checks of `init` and `tokenizer` (`xfer.bam.checks`), again now that
    earlier stages' outputs exist: an `init: pretrain.discriminator` and a `tokenizer:` from
    another vocabulary stage were not there to compare before the run. Says (stderr and report,
    as `transformer.finetune` does) when `init` is an ELECTRA generator, and when `max_length`
    reaches past the length the checkpoint was pre-trained on: position embeddings
    beyond it were never trained (ELECTRA packs examples of exactly its max_length)."""
    from xfer.bam.checks import init_folders, source_problems
    from xfer.transformer.initnotes import generator_init_message, untrained_positions_message

    init = ctx.resolve(config.init) if config.init is not None else None
    tokenizer = ctx.resolve(config.tokenizer) if config.tokenizer is not None else None
    problems = source_problems(init, tokenizer, config.encoder, config.max_length)
    if problems:
        raise problems[0]
    for folder in init_folders(init) if init is not None else []:
        for message in (generator_init_message(folder), untrained_positions_message(folder, config.max_length)):
            if message:
                ctx.warn(message)


@dataclass
class Group:
    """Tasks trained together by one model; `name` tags its logs, `slug` names its folders."""

    name: str
    tasks: list[TaskData]

    @property
    def slug(self) -> str:
        return module_name(self.name)

    @property
    def task_names(self) -> list[str]:
        return [t.name for t in self.tasks]


# --- tasks -----------------------------------------------------------------------------------


def load_task(ctx: StageContext, setup: Setup, ref: TaskRef) -> TaskData:
    """Read and featurise one task (train and dev) with its fine-tuning objective."""
    from xfer.transformer.objectives import DEFAULT_OBJECTIVES

    task = ctx.host.load("task", ref.name)(ref.key, ref.config)
    info = task.info()
    kind = task_kind(ref.key, info.type)
    objective_ref = setup.config.objective or ObjectiveRef(DEFAULT_OBJECTIVES[info.type])
    objective_class = ctx.host.load("objective", objective_ref.name)
    train, dev = nonempty_examples(task, "train"), nonempty_examples(task, "dev")
    unlabelled = next((e for e in train if gold_value(e) in (None, [])), None)
    if unlabelled is not None and getattr(unlabelled, "words", None) in ((), []):  # tagging/parsing: no words
        raise UserError(
            f"{ref.key}: training example {unlabelled.id!r} has no words (an empty sentence): BAM distils per word, "
            "and there is nothing to predict; remove it from the training data"
        )
    if unlabelled is not None:
        raise UserError(f"{ref.key}: training example {unlabelled.id!r} has no label; BAM trains on labelled data")
    featurizer = objective_class(
        HiddenStates(setup.weights.encoder_config), info, setup.tokenizer, setup.config.max_length, objective_ref.config
    )
    train_features, dev_features = featurizer.featurize(train), featurizer.featurize(dev)
    check_segments(ref.key, [*train_features, *dev_features], setup)
    return TaskData(
        name=ref.key,
        task=task,
        info=info,
        kind=kind,
        objective_name=objective_ref.name,
        objective_class=objective_class,
        objective_config=objective_ref.config,
        config=ref.config,
        train_examples=train,
        dev_examples=dev,
        train_features=train_features,
        dev_features=dev_features,
    )


def check_segments(task: str, features: list[dict[str, Any]], setup: Setup) -> None:
    """A pair task's second segment needs a checkpoint with two token types (`initnotes.token_type_problem`)."""
    from xfer.transformer.initnotes import token_type_problem

    source = (
        f"the init checkpoint ({setup.weights.tokenizer_folder})" if setup.config.init is not None else "the encoder"
    )
    problem = token_type_problem(task, features, setup.weights.encoder_config.type_vocab_size, source)
    if problem is not None:
        raise problem


def build_model(setup: Setup, group: Group, seed: int) -> MultiTaskModel:
    """A fresh model for `group` whose random parts (heads without init) depend only on `seed`."""
    from xfer.transformer.encoder import Encoder

    encoder_state, heads = setup.weights.for_tasks(group.task_names, {d.name: d.info for d in group.tasks})
    rng.seed_everything(seed)
    encoder = Encoder(setup.weights.encoder_config)
    encoder.load_state_dict(encoder_state)
    objectives = {}
    for data in group.tasks:
        objective = data.objective_class(
            HiddenStates(encoder.config), data.info, setup.tokenizer, setup.config.max_length, data.objective_config
        )
        if data.name in heads:
            try:
                objective.head.load_state_dict(heads[data.name])
            except RuntimeError as exc:
                raise UserError(
                    f"{data.name}: the head in `init` does not fit this task (labels changed?): {exc}"
                ) from exc
        objectives[data.name] = objective
    return MultiTaskModel(encoder, objectives, {d.name: d.info for d in group.tasks})


def check_one_pass(model: MultiTaskModel, group: Group) -> None:
    """Every task objective's predict() on one dev example, before training: one that runs the encoder
    twice per batch (`model.one_encoder_pass`) was found at the first dev evaluation, after an epoch of
    training or, with `eval_every: null`, after all of it. No weight changes and the RNG is restored,
    so training is as without the check."""
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        model.eval()
        try:
            for data in group.tasks:
                features = (data.dev_features or data.train_features)[:1]  # a dev set of empty sentences has none
                if features:
                    model.predict(data.name, model.objective(data.name).collate(features))
        finally:
            model.train()


def check_init_heads(setup: Setup, groups: list[Group]) -> None:
    """Every head `init` gives must predict what its task asks (`InitialWeights.check_tasks`, which
    reads no weights), checked for every group before the first trains: found in `build_model`, a
    later group's wrong head stopped the stage only after the groups before it had trained."""
    for group in groups:
        setup.weights.check_tasks(group.task_names, {d.name: d.info for d in group.tasks})


# --- training --------------------------------------------------------------------------------


def train_group(
    ctx: StageContext,
    setup: Setup,
    group: Group,
    train: TrainConfig,
    *,
    schedule: str,
    value: float,
    probabilities: dict[str, float],
    mixing: str,
) -> list[dict[str, Any]]:
    """Every trial of `group` (finished ones are read back, an interrupted one resumes)."""
    config = setup.config
    runs = []
    for trial in range(config.trials):
        workdir = ctx.dir / "trials" / group.slug / f"trial-{trial}"
        done = workdir / "done.json"
        finished = finished_trial(done)
        if finished is not None:
            runs.append(finished)
            continue
        seed = ctx.seed + trial
        model = build_model(setup, group, seed)
        check_one_pass(model, group)
        objective = DistillationObjective(model, schedule, value)
        collate = MixedCollate(
            {t: model.objective(t) for t in group.task_names},
            {d.name: d.kind for d in group.tasks},
            setup.tokenizer.pad_id,
        )
        features = {d.name: d.train_features for d in group.tasks}
        source_args = dict(
            global_batch=train.batch_size,
            collate=collate,
            seed=seed,
            rank=dist.rank(),
            world_size=dist.world_size(),
            accumulation=train.grad_accum,
        )
        if mixing == "batch" and len(features) > 1:
            source = batch_mixing_source(features, probabilities, **source_args)
        else:
            source = MixedTaskSource(features, probabilities, **source_args)
        evaluator = GroupEvaluator(model, group.tasks, ctx.device, config.eval_batch_size)
        trainer = Trainer(
            train,
            objective,
            source,
            workdir,
            device=ctx.device,
            evaluator=evaluator,
            events=ctx.events(task=group.name, trial=trial),
            description=f"{group.name} #{trial}",
        )
        fit = trainer.fit()
        chosen = trainer.load_weights("last")  # the paper protocol: the model after the last step
        objective.eval()
        with torch.no_grad(), trainer.autocast():
            metrics, predictions = evaluator.evaluate(objective)
        if ctx.is_main:
            for data in group.tasks:
                write_dev_predictions(ctx, data, trial, seed, predictions[data.name])
        record = {"trial": trial, "seed": seed, "steps": fit.step, "checkpoint": chosen.name, "metrics": metrics}
        if ctx.is_main:
            write_json(done, record, indent=None)
        runs.append(record)
    return runs


def write_dev_predictions(ctx: StageContext, data: TaskData, trial: int, seed: int, predictions: Any) -> None:
    """Per-example dev predictions of one run (JSON, in the gold file's id order)."""
    folder = ctx.output_dir("results") / "dev" / module_name(data.name)
    folder.mkdir(parents=True, exist_ok=True)
    ids = [e.id for e in data.dev_examples]
    gold = {
        "task": data.name,
        "type": data.info.type,
        "labels": list(data.info.labels),
        "main_metric": data.info.main_metric,
        "positive_label": positive_label(data),
        "extra": {k: v for k, v in data.info.extra.items() if k in ("score_range", "tag_scheme")},
        "ids": ids,
        "gold": [gold_value(e) for e in data.dev_examples],
    }
    write_json(folder / "gold.json", gold, indent=None)
    write_json(
        folder / f"trial-{trial}.json",
        {"task": data.name, "trial": trial, "seed": seed, "predictions": [predictions[i] for i in ids]},
        indent=None,
    )


def positive_label(data: TaskData) -> str | None:
    """The class whose F1 a classification task reports, for `xfer compare` to recompute the same F1:
    the task info's `positive_label`, else its config's (glue/tsv), else the last label (the default
    of every task that reports F1: GLUE's "1" of "0"/"1", glue/tsv); None for other task types."""
    if data.info.type != "classification" or not data.info.labels:
        return None
    named = data.info.extra.get("positive_label") or getattr(data.config, "positive_label", None)
    return str(named) if named is not None else data.info.labels[-1]


def group_score(run: dict[str, Any], group: Group) -> float:
    """The average main metric of a run over the group's tasks, greater better: a lower-is-better
    metric (an MSE) counts negated, so a NaN is the worst of either direction."""
    return oriented_mean((run["metrics"][d.name][d.info.main_metric], greater_is_better(d)) for d in group.tasks)


def greater_is_better(data: Any) -> bool:
    """The direction of a task's main metric (`TaskInfo.greater_is_better`; an info without it, as
    hand-made ones in tests, is greater-is-better, TaskInfo's default)."""
    return getattr(data.info, "greater_is_better", True) is not False


def teaching_run(runs: list[dict[str, Any]], group: Group, how: str) -> dict[str, Any]:
    if how == "first":
        return runs[0]
    # NaN lowest (`score_order`): a NaN compares false with everything, so a trial whose dev score
    # was NaN (a non-finite prediction) landed wherever it stood and could be picked as the median.
    # `group_score` is greater-better: the median of a lower-is-better task's raw scores put its
    # NaN trial at the best end, so [1, 2, NaN] taught with the best trial instead of the median
    ordered = sorted(runs, key=lambda r: (score_order(group_score(r, group)), r["trial"]))
    return ordered[(len(ordered) - 1) // 2]


# --- exports ---------------------------------------------------------------------------------


def export_group(
    ctx: StageContext, setup: Setup, group: Group, runs: list[dict[str, Any]], store: cache.PredictionStore
) -> dict[str, dict[str, Any]]:
    """Load the teaching trial's weights, write its model dir and its training-set predictions.

    Returns the prediction index entries of the group's tasks. Predictions whose key is already
    in the store (same weights, data, featurisation) are reused, not recomputed.
    """
    run = teaching_run(runs, group, setup.config.teacher)
    model = build_model(setup, group, run["seed"])
    objective = DistillationObjective(model)
    checkpoints = ctx.dir / "trials" / group.slug / f"trial-{run['trial']}" / "checkpoints"
    path = evaluated_checkpoint(checkpoints, run["checkpoint"], f"trial {run['trial']} of {group.name}")
    load_evaluated_weights(path, objective)
    objective.to(ctx.device).eval()
    weights = cache.weights_digest(model.state_dict())
    entries = {}
    for data in group.tasks:
        key = teacher_key(setup, data, weights)
        found = dist.broadcast_object(store.lookup(key) is not None if ctx.is_main else None)
        if not found:
            with torch.no_grad(), setup.autocast(ctx.device):
                rows = teacher_rows(model, data, ctx.device, setup.config.eval_batch_size)
            if ctx.is_main:
                predictions = cache.assemble(
                    key,
                    data.name,
                    data.info.type,
                    data.info.labels,
                    data.train_examples,
                    [f["id"] for f in data.train_features],
                    rows,
                    extra={k: v for k, v in data.info.extra.items() if k == "score_range"},
                )
                store.save(predictions)
        if ctx.is_main:
            output = ctx.output_dir("predictions")
            cache.publish(store.path(key), output)
            entries[data.name] = {
                "file": f"{key}.safetensors",
                "key": key,
                "type": data.info.type,
                "labels": list(data.info.labels),
                "examples": len(data.train_examples),
                "reused": found,
                "teacher": {
                    "stage": ctx.name,
                    "model": group.slug,
                    "trial": run["trial"],
                    "seed": run["seed"],
                    "dev": run["metrics"][data.name],
                },
            }
    if ctx.is_main:
        meta = {"stage": ctx.name, "kind": ctx.kind, "trial": run["trial"], "seed": run["seed"], "dev": run["metrics"]}
        save_bam_model(
            ctx.output_dir("models") / group.slug,
            model,
            setup.tokenizer,
            meta,
            {d.name: d.objective_name for d in group.tasks},
        )
    return entries


def teacher_key(setup: Setup, data: TaskData, weights: str) -> str:
    """Everything a teacher's training-set outputs depend on (see `cache.prediction_key`)."""
    import hashlib

    return cache.prediction_key(
        teacher_weights=weights,
        task=data.name,
        task_config=data.config,
        train_data=cache.data_digest(data.train_examples),
        objective=data.objective_name,
        objective_config=data.objective_config,
        max_length=setup.config.max_length,
        tokenizer=hashlib.sha256(setup.tokenizer.backend.to_str().encode("utf-8")).hexdigest(),
        precision=str(setup.amp),
    )


def write_results(ctx: StageContext, groups: list[Group], runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """`results/results.json` in `transformer.finetune`'s layout (`xfer results` reads it)."""
    from xfer.core.results import strict_json, summarize

    results = {}
    for group in groups:
        for data in group.tasks:
            task_runs = [{**r["metrics"][data.name], **{k: r[k] for k in BOOKKEEPING}} for r in runs[group.name]]
            greater = greater_is_better(data)
            main = data.info.main_metric
            results[data.name] = {
                "main_metric": main,
                "model": group.slug,
                "runs": task_runs,
                # every run's metrics (the first run's alone could miss one); the main metric's direction
                # as `task_result`: a diverged (NaN) run of a lower-is-better metric is its worst, and
                # `xfer results` and pools read `greater_is_better: false` from the entry
                "summary": summarize(task_runs, lower_is_better=() if greater else (main,)),
            }
            if not greater:  # absent: greater is better (as `xfer.core.results.task_result` writes it)
                results[data.name]["greater_is_better"] = False
    if ctx.is_main:
        # strict JSON as every results.json (a diverged run's NaN as "NaN"); `report` formats the floats
        write_json(ctx.output_dir("results") / "results.json", strict_json(results))
    return results


def report(results: dict[str, Any], entries: dict[str, dict[str, Any]]) -> str:
    """report.md's tables: each task's dev results and where its teacher predictions came from. Task and
    metric names go through `markdown_cell`: a `|` or a line break in one split its row or ended it."""
    lines = [
        "## Results (dev, model after the last step)",
        "",
        "| task | metric | median | mean | std | runs |",
        "|---|---|---|---|---|---|",
    ]
    medians = []
    for task, result in results.items():
        main = result["main_metric"]
        s = result["summary"][main]
        medians.append(s["median"])
        lines.append(
            f"| {markdown_cell(task)} | {markdown_cell(main)} | {s['median']:.2f} | {s['mean']:.2f} | {s['std']:.2f} | {len(result['runs'])} |"
        )
    if len(medians) > 1:
        lines.append(f"| **average** | main metrics | {statistics.fmean(medians):.2f} | | | |")
    lines += [
        "",
        "## Teacher predictions (outputs/predictions)",
        "",
        "| task | from trial | key | |",
        "|---|---|---|---|",
    ]
    for task, entry in entries.items():
        lines.append(
            f"| {markdown_cell(task)} | {entry['teacher']['trial']} (seed {entry['teacher']['seed']}) | `{entry['key'][:16]}` | "
            f"{'reused from the cache' if entry['reused'] else 'computed'} |"
        )
    return "\n".join(lines)


def _finish(ctx: StageContext, setup: Setup, groups: list[Group], runs: dict[str, list[dict[str, Any]]]) -> None:
    config = setup.config
    output = ctx.output_dir("predictions")
    store = cache.PredictionStore(Path(config.cache_dir) if config.cache_dir is not None else output)
    entries: dict[str, dict[str, Any]] = {}
    for group in groups:
        entries.update(export_group(ctx, setup, group, runs[group.name], store))
    results = write_results(ctx, groups, runs)
    if ctx.is_main:
        cache.write_index(output, entries)
        write_models_index(ctx.output_dir("models"), {t.name: g.slug for g in groups for t in g.tasks})
        ctx.report(report(results, entries))
    ctx.output_dir("results")


# --- the stages ------------------------------------------------------------------------------


def run_teachers(ctx: StageContext) -> None:
    """One single-task model per task and seed; the teaching trial's training-set outputs are cached."""
    config: TeachersConfig = ctx.config
    setup = Setup.prepare(ctx, config)
    write_init(ctx, setup)
    groups = [Group(ref.key, [load_task(ctx, setup, ref)]) for ref in config.tasks]
    check_init_heads(setup, groups)
    runs = {}
    for group in groups:
        train = config.train
        if group.name in config.task_epochs:
            train = replace(train, epochs=config.task_epochs[group.name], steps=None)
        runs[group.name] = train_group(
            ctx, setup, group, train, schedule="none", value=0.0, probabilities={group.name: 1.0}, mixing="example"
        )
    _finish(ctx, setup, groups, runs)


def write_init(ctx: StageContext, setup: Setup) -> None:
    """The `init` output: the encoder every teacher started from (a model dir), or, when `init`
    was a BAM `models` output, its task -> model dir map.

    A model dir inside this run directory (an earlier stage's `models` output) is written relative
    to the map: `--fork` and moving the run directory copy the map, and an absolute path kept the
    copy reading the original run's models (gone once it is deleted, other weights once it re-runs)."""
    import os

    target = ctx.output_dir("init")
    if not ctx.is_main:
        return
    if setup.weights.per_task:
        run_dir = ctx.dir.parent.resolve()
        tasks = {}
        for task, path in setup.weights.per_task.items():
            path = path.resolve()
            inside = path.is_relative_to(run_dir)
            tasks[task] = os.path.relpath(path, target.resolve()) if inside else str(path)
        write_models_index(target, tasks)
        return
    from xfer.transformer.encoder import Encoder

    encoder = Encoder(setup.weights.encoder_config)
    assert setup.weights.encoder_state is not None
    encoder.load_state_dict(setup.weights.encoder_state)
    save_init(target, encoder, setup.tokenizer)


def run_student(ctx: StageContext) -> None:
    """One multi-task model (or one per task) distilled from cached teacher outputs, `trials` seeds."""
    config: StudentConfig = ctx.config
    setup = Setup.prepare(ctx, config)
    tasks = [load_task(ctx, setup, ref) for ref in config.tasks]
    if config.teachers is not None:
        folder = ctx.resolve(config.teachers)
        for data in tasks:
            predictions = cache.load_teacher_predictions(folder, data.name)
            check_compatible(data, predictions)
            attach_teacher_outputs(data.name, data.train_examples, data.train_features, predictions, data.kind)
    groups = [Group("multitask", tasks)] if config.multitask else [Group(t.name, [t]) for t in tasks]
    check_init_heads(setup, groups)
    runs = {}
    for group in groups:
        sizes = {d.name: len(d.train_examples) for d in group.tasks}
        probabilities = task_probabilities(sizes, config.sampling, config.alpha, config.temperature)
        runs[group.name] = train_group(
            ctx,
            setup,
            group,
            config.train,
            schedule=config.lambda_schedule,
            value=config.lambda_value,
            probabilities=probabilities,
            mixing=config.mixing,
        )
    _finish(ctx, setup, groups, runs)


def check_compatible(data: TaskData, predictions: cache.TeacherPredictions) -> None:
    """The teacher's outputs must mean what the student's head predicts (type, label order, score range)."""
    where = f"{data.name}: teacher predictions {predictions.source}"
    if predictions.type != data.info.type:
        raise UserError(f"{where} are for a {predictions.type} task, this is a {data.info.type} task")
    if tuple(predictions.labels) != tuple(data.info.labels):
        raise UserError(f"{where} use labels {list(predictions.labels)}, this task {list(data.info.labels)}")
    if data.info.type != "regression":
        return
    # no score_range is the objective's default (0, 1), not "any range": a teacher of raw 0..5 scores
    # otherwise taught a student whose targets are scaled to [0, 1] five times too high
    teacher_range, student_range = score_range(predictions.extra), score_range(data.info.extra)
    if teacher_range != student_range:
        raise UserError(f"{where} scale scores from {teacher_range}, this task from {student_range}")

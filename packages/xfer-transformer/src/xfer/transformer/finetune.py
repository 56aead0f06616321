"""The `transformer.finetune` stage: fine-tune an encoder on each task, N seeds per task.

For every task, `trials` runs start from the same initial weights (a pre-trained checkpoint —
xfer or Hugging Face format — or a random init of a preset) with seeds `seed, seed+1, ...`;
each run is kept (its metrics, prediction files, optionally its model) and the report gives
the median, mean and standard deviation over runs — the GLUE protocol of the ELECTRA paper
(median of several fine-tuning runs from one checkpoint). Each run is an ordinary `Trainer`
run with its own checkpoints, so an interrupted stage resumes mid-run and skips finished runs.

Outputs:
  models/<task>/        the model of the median run (xfer model directory + tokenizer;
                        `hf/` too with `export_hf: true`), or every run's with `save_models: all`
  predictions/<task>/   per-run prediction files for the `predict` splits (test: submission format)
  results/results.json  per task: every run's metrics, and median/mean/std of each metric
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from xfer.core import distributed as dist
from xfer.core import rng
from xfer.core.atomic import write_json
from xfer.core.checkpoint import evaluated_checkpoint
from xfer.core.config import ObjectiveRef, TaskRef
from xfer.core.data import BatchStream
from xfer.core.errors import UserError
from xfer.core.evaluation import TaskEvaluator
from xfer.core.results import HEADER, markdown_rows, score_order, strict_json, task_result
from xfer.core.stage import StageContext, finished_trial
from xfer.core.tasks import Task, nonempty_examples, task_slug
from xfer.core.trainer import Trainer
from xfer.transformer.collapse import warn_if_collapsed
from xfer.transformer.finetune_config import FinetuneConfig, checkpoint_problems
from xfer.transformer.initnotes import generator_init_message, token_type_problem, untrained_positions_message
from xfer.transformer.modelio import fitted_to_tokenizer


def load_initial(config: FinetuneConfig, ctx: StageContext) -> tuple[Any, dict[str, torch.Tensor] | None, Path | None]:
    """(encoder config, encoder weights or None for random init, folder holding the tokenizer)."""
    from xfer.transformer.modelio import read_encoder, with_overrides
    from xfer.transformer.presets import preset

    if config.init is None:
        return preset(config.model, **config.encoder), None, None
    folder = ctx.resolve(config.init)
    encoder_config, state, _ = read_encoder(folder)
    return with_overrides(encoder_config, config.encoder, folder), state, folder


TASK_HEAD_ARCHITECTURES = (
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForQuestionAnswering",
    "ForMultipleChoice",
)
"""Endings of HF `architectures` whose checkpoint holds a fine-tuned task head."""


def task_head_message(folder: Path, key: str = "init") -> str | None:
    """A warning when the checkpoint `folder` holds a fine-tuned task head, which this stage does
    not use (every task gets a new, randomly initialised head), else None.

    Why: starting from a model fine-tuned on a task (this stage's own `models/<task>`, or an HF
    `*ForSequenceClassification` folder) dropped its trained head without a word, so continuing
    to fine-tune it, or "evaluating" it with a few steps, silently scored a random head. A new
    head is the fine-tuning protocol (and intermediate-task transfer is legitimate), so this says
    so rather than refuses. Pre-training heads (ELECTRA's discriminator) are not task heads."""
    try:
        meta = folder / "xfer_model.json"
        if meta.is_file():
            document = json.loads(meta.read_text(encoding="utf-8"))
            task = document.get("task")
            if task is None or "head" not in document.get("modules", {}):
                return None
            what = f"a model fine-tuned on {task} ({meta})"
        else:
            config = folder / "config.json"
            if not config.is_file():
                return None
            architectures = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
            heads = [a for a in architectures if isinstance(a, str) and a.endswith(TASK_HEAD_ARCHITECTURES)]
            if not heads:
                return None
            what = f"a checkpoint of {heads[0]} ({config})"
    except (OSError, ValueError, AttributeError):
        return None  # an unreadable description is refused by the checks that read it
    return (
        f"{key}: {folder} is {what}: only its encoder is used, and each task here gets a new, randomly "
        "initialised head; its trained head is not loaded"
    )


def load_tokenizer(config: FinetuneConfig, ctx: StageContext, init_folder: Path | None) -> Any:
    from xfer.transformer.tokenization import WordPieceTokenizer

    folder = ctx.resolve(config.tokenizer) if config.tokenizer is not None else init_folder
    if folder is None:
        raise UserError(
            "transformer.finetune needs a tokenizer: set `tokenizer:` (e.g. a transformer.vocab stage's output) or `init:`"
        )
    return WordPieceTokenizer.from_dir(folder)


def run_finetune(ctx: StageContext) -> None:
    """Fine-tune one model per task and seed from the same initial weights, then report medians.

    Each (task, seed) is an ordinary resumable Trainer run; the median run's model is exported
    to `models/<task>/`, predictions to `predictions/<task>/`, every run's metrics and their
    median/mean/std to `results/results.json`."""
    config: FinetuneConfig = ctx.config
    encoder_config, init_state, init_folder = load_initial(config, ctx)
    tokenizer = load_tokenizer(config, ctx, init_folder)
    if config.tokenizer is not None or init_folder is not None:  # pre-flight's check, on earlier stages' outputs
        problems = checkpoint_problems(
            ctx.resolve(config.tokenizer) if config.tokenizer is not None else init_folder,
            init_folder,
            config.encoder,
            config.max_length,
            random_init=init_folder is None,
        )
        if problems:
            raise problems[0]
    if init_state is None:  # random init takes the tokenizer's size and [PAD] id, unless `encoder:` sets them
        encoder_config = fitted_to_tokenizer(encoder_config, tokenizer, config.encoder)
    if tokenizer.vocab_size > encoder_config.vocab_size:
        raise UserError(
            f"tokenizer has {tokenizer.vocab_size} tokens but the encoder only {encoder_config.vocab_size} embeddings"
        )
    if init_state is not None:
        warn_if_collapsed(ctx, encoder_config, init_state, tokenizer, init_folder)
    if init_folder is not None:
        for message in (
            generator_init_message(init_folder),
            untrained_positions_message(init_folder, config.max_length),
            task_head_message(init_folder),
        ):
            if message:
                ctx.warn(message)
    pooler = _init_pooler(ctx, init_folder)
    results = {
        ref.key: _finetune_task(ctx, config, ref, encoder_config, init_state, tokenizer, pooler) for ref in config.tasks
    }
    if ctx.is_main:
        out = ctx.output_dir("results")
        write_json(out / "results.json", results)
        ctx.report(_results_table(ctx.name, results))
    ctx.output_dir("models")
    ctx.output_dir("predictions")


def _finetune_task(
    ctx: StageContext,
    config: FinetuneConfig,
    ref: TaskRef,
    encoder_config: Any,
    init_state: dict[str, torch.Tensor] | None,
    tokenizer: Any,
    pooler: dict[str, torch.Tensor] | None = None,
) -> dict[str, Any]:
    """All trials of one task; returns {"main_metric", "runs", "summary"}."""
    from xfer.transformer.encoder import Encoder

    task: Task = ctx.host.load("task", ref.name)(ref.key, ref.config)
    info = task.info()
    objective_ref = config.objective or ObjectiveRef(_default_objective(ref.name, info.type))
    objective_cls = ctx.host.load("objective", objective_ref.name)

    def build(seed: int) -> Any:
        """A fresh objective whose random init depends only on `seed`."""
        rng.seed_everything(seed)
        encoder = Encoder(encoder_config)
        if init_state is not None:
            encoder.load_state_dict(init_state)
        objective = objective_cls(encoder, info, tokenizer, config.max_length, objective_ref.config)
        _start_pooler(objective.head, pooler)
        return objective

    train_examples, dev_examples = nonempty_examples(task, "train"), nonempty_examples(task, "dev")
    if (constant := _constant_gold_message(ref.key, info.type, dev_examples)) is not None:
        ctx.warn(constant)
    featurizer = build(ctx.seed)  # featurisation does not depend on weights: do it once per task
    if (note := _pooler_message(ref.key, featurizer.head, pooler, config.init)) is not None:
        ctx.report(note)
    if config.export_hf and config.save_models != "none":  # no model saved, nothing exported
        problem = _hf_export_problem(ref.key, featurizer)
        if problem is not None:
            raise problem
        if (note := _hf_encoder_only_message(ref.key, featurizer)) is not None:
            ctx.warn(note)
    train_features = featurizer.featurize(train_examples)  # its warnings reach report.md (the runner)
    dev_features = featurizer.featurize(dev_examples)
    # the other splits to predict, read and featurised before training: a test file that only this
    # step would find wrong (pairs where train has single texts) failed after every trial had trained
    splits = {"dev": (dev_examples, dev_features)}
    for split in config.predict:
        if split not in splits:
            # the task contract, as train and dev get it: a repeated id collapsed into one
            # prediction, and the submission file gave both rows the last one's label, silently
            # (the pre-flight checks this too, but not for tasks that skip it, e.g. hub downloads)
            examples = nonempty_examples(task, split)  # (an empty one: a header-only prediction file)
            splits[split] = (examples, featurizer.featurize(examples))
    del featurizer
    source = f"the init checkpoint ({ctx.resolve(config.init)})" if config.init is not None else "the encoder"
    features_read = [f for _, features in splits.values() for f in features]
    wrong_types = token_type_problem(ref.key, [*train_features, *features_read], encoder_config.type_vocab_size, source)
    if wrong_types is not None:
        raise wrong_types
    train_config = config.train
    if ref.key in config.task_epochs:
        train_config = replace(train_config, epochs=config.task_epochs[ref.key], steps=None)
    runs = []
    for trial in range(config.trials):
        workdir = ctx.dir / "trials" / task_slug(ref.key) / f"trial-{trial}"
        done = workdir / "done.json"
        finished = finished_trial(done)
        if finished is not None:  # finished before an interruption
            runs.append(finished)
            continue
        seed = ctx.seed + trial
        objective = build(seed)
        stream = BatchStream(
            train_features,
            train_config.batch_size,
            objective.collate,
            seed=seed,
            rank=dist.rank(),
            world_size=dist.world_size(),
            accumulation=train_config.grad_accum,
        )
        evaluator = _evaluator(task, objective, dev_examples, dev_features, ctx, config)
        trainer = Trainer(
            train_config,
            objective,
            stream,
            workdir,
            device=ctx.device,
            evaluator=evaluator,
            events=ctx.events(task=ref.key, trial=trial),
            description=f"{ref.key} #{trial}",
        )
        fit = trainer.fit()
        chosen = trainer.load_weights(config.select)
        objective.eval()
        with torch.no_grad(), trainer.autocast():
            metrics = evaluator(objective)
            for split in config.predict:
                examples, features = splits[split]
                predictions = _evaluator(task, objective, examples, features, ctx, config).predictions(objective)
                if ctx.is_main:
                    folder = ctx.output_dir("predictions") / task_slug(ref.key) / f"trial-{trial}"
                    # a copy: the split's list is the next trial's too (its evaluator and postprocess)
                    task.write_predictions(folder, split, list(examples), predictions)
        record = {**metrics, **_bookkeeping(trial, seed, fit.step, chosen.name)}
        if ctx.is_main:
            write_json(done, record, indent=None)
        runs.append(record)
    _save_models(ctx, config, ref.key, runs, build, tokenizer, info, info.main_metric)
    return task_result(info.main_metric, runs, info.greater_is_better)


def _constant_gold_message(task: str, task_type: str, examples: list) -> str | None:
    """A warning when a regression task's labelled dev examples all have one score, else None.

    Why: Pearson and Spearman are undefined on a constant gold column; the metrics score it 0 (not
    NaN), so every trial reported 0 whatever it predicted, and the report read as a failed
    fine-tuning rather than a dev set that cannot be scored this way."""
    if task_type != "regression":
        return None
    golds = {float(e.label) for e in examples if getattr(e, "label", None) is not None}
    if len(golds) != 1:
        return None
    return (
        f"{task}: every labelled dev example has the score {golds.pop():g}: correlations (Pearson, Spearman) are "
        "undefined on a constant gold column and are reported as 0 whatever the model predicts; use a dev set "
        "with varied scores"
    )


BOOKKEEPING = ("trial", "seed", "steps", "checkpoint")
"""Keys of a run record that are not metrics (never summarised, never tabulated)."""


def _bookkeeping(trial: int, seed: int, steps: int, checkpoint: str) -> dict[str, Any]:
    return dict(zip(BOOKKEEPING, (trial, seed, steps, checkpoint), strict=True))


def _evaluator(
    task: Task, objective: Any, examples: list, features: list, ctx: StageContext, config: FinetuneConfig
) -> TaskEvaluator:
    return TaskEvaluator(
        task,
        examples,
        features,
        objective.collate,
        lambda model, batch: model.predict(batch),
        ctx.device,
        batch_size=config.eval_batch_size,
        postprocess=lambda outputs: objective.postprocess(examples, features, outputs),
    )


def _default_objective(task: str, task_type: str) -> str:
    """The objective a task of `task_type` gets when the recipe names none; a type with no
    default (conll/ud-parse's parsing, mt/parallel's seq2seq) is a UserError, not a KeyError."""
    from xfer.transformer.objectives import DEFAULT_OBJECTIVES

    if task_type not in DEFAULT_OBJECTIVES:
        raise UserError(
            f"{task}: transformer.finetune has no objective for {task_type} tasks "
            f"(it fine-tunes {', '.join(DEFAULT_OBJECTIVES)} tasks); set `objective:` or use another stage"
        )
    return DEFAULT_OBJECTIVES[task_type]


def _median_trial(runs: list[dict[str, Any]], metric: str, greater_is_better: bool = True) -> int:
    """The trial whose model is exported: the (lower) median by `metric`, a NaN score the worst (lowest
    where greater is better, highest where lower is better, as `xfer.core.results.summarize` orders)."""
    ordered = sorted(runs, key=lambda r: (score_order(r[metric], greater_is_better), r["trial"]))
    return ordered[(len(ordered) - 1) // 2]["trial"]


def _save_models(
    ctx: StageContext,
    config: FinetuneConfig,
    name: str,
    runs: list[dict[str, Any]],
    build: Any,
    tokenizer: Any,
    info: Any,
    metric: str,
) -> None:
    from xfer.core.trainer import load_evaluated_weights
    from xfer.transformer.modelio import save_model_dir

    if config.save_models == "none" or not ctx.is_main:
        return
    trials = (
        [r["trial"] for r in runs]
        if config.save_models == "all"
        else [_median_trial(runs, metric, info.greater_is_better)]
    )
    for trial in trials:
        checkpoints = ctx.dir / "trials" / task_slug(name) / f"trial-{trial}" / "checkpoints"
        record = next(r for r in runs if r["trial"] == trial)
        path = evaluated_checkpoint(
            checkpoints, record["checkpoint"], f"trial {trial} of {name} ({metric} {record.get(metric)})"
        )
        objective = build(ctx.seed + trial)
        load_evaluated_weights(path, objective)  # EMA weights when EMA was on: what was evaluated
        target = ctx.output_dir("models") / task_slug(name)
        if config.save_models == "all":
            target = target / f"trial-{trial}"
        meta = {
            "task": name,
            "task_type": info.type,
            "labels": list(info.labels),
            "objective": type(objective).__name__,
            "trial": trial,
            # strict JSON, as results.json: a diverged trial's bare NaN token made the description
            # unreadable to jq, JavaScript and Go
            "metrics": strict_json({k: v for k, v in record.items() if k not in BOOKKEEPING}),
        }
        # The tokenizer goes in with the weights (`files`), so the folder appears whole or not at all: saved
        # after the atomic save_model_dir, a crash between the two left a complete-looking model (its
        # xfer_model.json written) without vocab.txt and tokenizer.json, which nothing could load.
        with tempfile.TemporaryDirectory(prefix="xfer-tokenizer-") as staged:
            tokenizer.save(staged)
            files = sorted(Path(staged).iterdir())
            save_model_dir(target, {"encoder": objective.encoder, "head": objective.head}, meta, files=files)
        if config.export_hf:
            _export_hf(target / "hf", objective, tokenizer, info)


def _init_pooler(ctx: StageContext, init_folder: Path | None) -> dict[str, torch.Tensor] | None:
    """The pre-trained BERT pooler of the `init:` checkpoint (a tanh head's `dense.*`), or None."""
    from xfer.transformer.hf import checkpoint_pooler

    return checkpoint_pooler(init_folder, ctx.host) if init_folder is not None else None


def _start_pooler(head: Any, pooler: dict[str, torch.Tensor] | None) -> None:
    """Start a `pooler: tanh` head's `dense` from the checkpoint's pre-trained pooler, as BERT's
    fine-tuning does ([CLS] -> pooler -> tanh -> classifier); other heads are left as built."""
    if pooler is None or getattr(head, "pooler", None) != "tanh":
        return
    with torch.no_grad():
        head.dense.weight.copy_(pooler["dense.weight"])
        head.dense.bias.copy_(pooler["dense.bias"])


def _pooler_message(task: str, head: Any, pooler: dict[str, torch.Tensor] | None, init: Any) -> str | None:
    """The report's note on where a `pooler: tanh` head's pooler starts from, else None."""
    if getattr(head, "pooler", None) != "tanh":
        return None
    if pooler is not None:
        return (
            f"## Pooler\n\n{task}: `pooler: tanh` starts from the init checkpoint's pre-trained pooler "
            "(bert.pooler.dense).\n"
        )
    why = "the init checkpoint has no pooler (bert.pooler.dense)" if init is not None else "random init"
    return f"## Pooler\n\n{task}: `pooler: tanh` starts from a randomly initialised pooler ({why}).\n"


def _export_model_type(head: Any) -> str:
    """The HF model type a head exports onto: BERT for the BERT pooler (`tanh`,
    BertForSequenceClassification), else ELECTRA."""
    return "bert" if getattr(head, "pooler", None) == "tanh" else "electra"


def _exported_head(objective: Any) -> Any:
    """The head `export_hf: true` writes with the encoder, or None for the encoder alone."""
    head = objective.head
    if getattr(head, "pooler", None) == "none":
        return None  # the original ELECTRA head has no HF class: export the encoder alone
    return head


def _hf_encoder_only_message(task: str, objective: Any) -> str | None:
    """A warning when `export_hf: true` will write this objective's encoder without its head, else None.

    Why: the default sentence head (`pooler: none`, the original ELECTRA [CLS] head) has no Hugging
    Face class, so `hf/` held a bare `ElectraModel` and the fine-tuned classifier was left out
    without a word; loading it as `ElectraForSequenceClassification` gave a random head."""
    if _exported_head(objective) is not None:
        return None
    return (
        f"{task}: `export_hf: true` writes only the encoder (ElectraModel) to models/{task_slug(task)}/hf: the "
        "objective's head (pooler: none, the original ELECTRA [CLS] head) has no Hugging Face class, so the "
        "fine-tuned classifier is only in the xfer model directory; set the objective's `pooler: gelu` "
        "(ElectraForSequenceClassification) to export it"
    )


def _hf_export_problem(task: str, objective: Any) -> UserError | None:
    """The UserError `export_hf: true` will meet with this objective's head, found before training.

    Why: ELECTRA's SQuAD head (`joint_end`, `answerable`) and heads without an HF mapping have no
    Hugging Face form; the export's ValueError came after every trial of every task had trained,
    as a bare traceback, and came back on every re-run of the stage."""
    from xfer.transformer.hf import _head_to_hf

    head = _exported_head(objective)
    if head is None:
        return None
    try:
        kind = getattr(head, "kind", None)
        if kind is None:
            raise ValueError(f"{type(head).__name__} has no registered head kind")
        model_type = _export_model_type(head)
        config = objective.encoder.config
        if model_type == "bert" and config.embedding_size != config.hidden_size:
            raise ValueError(
                f"BERT (BertForSequenceClassification, for pooler: tanh) has no embedding projection, and this "
                f"encoder's embedding_size {config.embedding_size} differs from its hidden_size {config.hidden_size}"
            )
        _head_to_hf(head, kind, model_type, None)
    except ValueError as error:
        return UserError(
            f"{task}: `export_hf: true` cannot write this task's model in Hugging Face layout: {error} "
            "(set `export_hf: false`, or change the objective's head)"
        )
    return None


def _export_hf(target: Path, objective: Any, tokenizer: Any, info: Any) -> None:
    from xfer.transformer.hf import export_hf

    head = _exported_head(objective)
    labels = list(info.labels)
    extra = (
        {"id2label": dict(enumerate(labels)), "label2id": {v: i for i, v in enumerate(labels)}}
        if labels and head is not None
        else None
    )
    tokenizer.save_hf(target, objective.encoder.config.max_position_embeddings)
    # a regression head's outputs are the task's scores scaled to [0, 1] (xfer scales them back when it
    # predicts): the range is folded into the exported head, else transformers gave STS-B's 3.07 as 0.61
    score_range = info.extra.get("score_range") if info.type == "regression" and head is not None else None
    export_hf(
        target,
        objective.encoder,
        head=head,
        vocab_file=target / "vocab.txt",
        extra_config=extra,
        score_range=tuple(score_range) if score_range is not None else None,
        model_type=_export_model_type(head),
    )


def _results_table(stage: str, results: dict[str, Any]) -> str:
    """The report's table, its rows named by the stage as `xfer results` names them (the kind's
    "finetune" named no stage of a recipe whose stage is `fit`, and both stages of an
    ELECTRA-vs-random recipe alike)."""
    return "\n".join(["## Results (dev)", "", HEADER, *markdown_rows(stage, results)])

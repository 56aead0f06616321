"""Where a BAM model's weights come from (`init:`) and how trained models are written out.

`init` may name:
- a pre-trained checkpoint (an xfer model dir such as an ELECTRA discriminator, or a HF
  ELECTRA/BERT folder): every model starts from its encoder (`transformer.finetune`'s loader);
- a BAM model dir (a teacher's or student's): its encoder, and the heads of the tasks it has;
- a BAM `models` output (`models.json`: task -> model dir): each task's model starts from the
  model trained on that task, head included — single-task fine-tuning after multi-task training
  (thesis Table 3.3) is `bam.teachers` with `init: student.models`;
- nothing: a random encoder of the `model` preset, drawn ONCE per stage from the recipe seed,
  so every trial (and, through the teachers' `init` output, every student) starts alike, as
  they would from one pre-trained checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from xfer.bam.checks import MODELS_INDEX, read_models_index
from xfer.bam.model import MultiTaskModel, module_name
from xfer.core import rng
from xfer.core.atomic import write_json
from xfer.core.config import Input
from xfer.core.errors import CheckpointError, UserError
from xfer.core.stage import StageContext

META_KEY = "bam"


def head_module(task: str) -> str:
    return f"head-{module_name(task)}"


@dataclass
class InitialWeights:
    """The initial encoder (and heads) of every model a stage trains."""

    encoder_config: Any
    encoder_state: dict[str, torch.Tensor] | None = None  # one checkpoint (or the random draw) for all tasks
    heads: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)  # task -> head state
    per_task: dict[str, Path] = field(default_factory=dict)  # a BAM models output: task -> model dir
    tokenizer_folder: Path | None = None
    head_records: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> what its head predicts

    def for_tasks(
        self, tasks: list[str], infos: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, torch.Tensor], dict[str, dict[str, torch.Tensor]]]:
        """(encoder state, head states by task) for a model of `tasks`, after `check_tasks`."""
        self.check_tasks(tasks, infos or {})
        if not self.per_task:
            assert self.encoder_state is not None, "random init is drawn in resolve_init"
            return self.encoder_state, {t: s for t, s in self.heads.items() if t in tasks}
        state, heads = read_bam_model(self._folder(tasks))
        return state, {t: s for t, s in heads.items() if t in tasks}

    def check_tasks(self, tasks: list[str], infos: Mapping[str, Any]) -> None:
        """What `for_tasks` refuses, without reading any weights (so every group is checked before
        the first trains): a task `init` has no model for, tasks split over models, and a head that
        predicts another type, label order or score range than its task (`check_heads`)."""
        if not self.per_task:
            check_heads(set(self.heads), self.head_records, infos, self.tokenizer_folder)
            return
        folder = self._folder(tasks)
        records = head_records(folder)
        check_heads(set(records), records, infos, folder)

    def _folder(self, tasks: list[str]) -> Path:
        """The one model dir of a BAM models output that `tasks` start from."""
        missing = [t for t in tasks if t not in self.per_task]
        if missing:
            raise UserError(f"init has no model for task {missing[0]!r} (it has: {', '.join(self.per_task)})")
        folders = {self.per_task[t] for t in tasks}
        if len(folders) > 1:
            raise UserError(
                f"init gives tasks {', '.join(tasks)} different models ({', '.join(sorted(map(str, folders)))}); "
                "a multi-task model starts from one"
            )
        return folders.pop()


def head_records(folder: Path) -> dict[str, dict[str, Any]]:
    """task -> {"type", "labels", "extra"} of each head of a BAM model dir (its meta; {} for others)."""
    from xfer.transformer.modelio import META_FILE

    try:
        document = json.loads((Path(folder) / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    tasks = (document.get(META_KEY) or {}).get("tasks") if isinstance(document, dict) else None
    return {t: r for t, r in tasks.items() if isinstance(r, dict)} if isinstance(tasks, dict) else {}


def check_heads(
    heads: Collection[str], records: Mapping[str, Mapping[str, Any]], infos: Mapping[str, Any], folder: Any
) -> None:
    """A head loaded from `init` must predict what the task asks: `load_state_dict` checks shapes only,
    so a head trained on the same labels in another order (or scores in another range) loaded
    silently and started every prediction on the wrong label."""
    for task, info in infos.items():
        record = records.get(task)
        if task not in heads or not record:
            continue
        theirs = (record.get("type"), list(record.get("labels") or []), score_range(record.get("extra") or {}))
        ours = (info.type, list(info.labels), score_range(info.extra))
        if theirs != ours:
            raise UserError(
                f"{task}: the head in init {folder} was trained as a {theirs[0]} task with labels {theirs[1]}"
                f"{f' and score range {theirs[2]}' if theirs[0] == 'regression' else ''}, this task is {ours[0]} "
                f"with labels {ours[1]}{f' and score range {ours[2]}' if ours[0] == 'regression' else ''}: "
                "its outputs would mean other labels (start from an encoder-only checkpoint, e.g. teachers.init)"
            )


def score_range(extra: Mapping[str, Any]) -> list[float]:
    """A regression task's `score_range` (TaskInfo.extra); none means (0, 1), the range
    `transformer.sequence` scales to, not "any range"."""
    return [float(v) for v in extra.get("score_range", (0.0, 1.0))]


def _finetune_view(config: Any, folder: Path | None) -> Any:
    """The three fields `transformer.finetune.load_initial` reads, pointing `init` at `folder`."""
    return SimpleNamespace(
        init=None if folder is None else Input(path=folder), model=config.model, encoder=config.encoder
    )


def read_bam_model(folder: Path) -> tuple[dict[str, torch.Tensor], dict[str, dict[str, torch.Tensor]]]:
    """(encoder state, {task: head state}) of an xfer model dir; no heads unless BAM wrote it."""
    from xfer.transformer.modelio import load_model_dir

    model_dir = load_model_dir(folder)
    if "encoder" not in model_dir.state_dicts:
        raise CheckpointError(f"{folder}: no module 'encoder'")
    tasks = (model_dir.meta.get(META_KEY) or {}).get("tasks", {})
    heads = {
        task: model_dir.state_dicts[entry["module"]]
        for task, entry in tasks.items()
        if entry.get("module") in model_dir.state_dicts
    }
    return model_dir.state_dicts["encoder"], heads


def resolve_init(config: Any, ctx: StageContext) -> InitialWeights:
    """Read `config.init` (see the module docstring); a random init is drawn later by `settle`."""
    from xfer.transformer.finetune import load_initial
    from xfer.transformer.modelio import detect_format

    if config.init is None:
        encoder_config, _, _ = load_initial(_finetune_view(config, None), ctx)
        return InitialWeights(encoder_config)
    folder = ctx.resolve(config.init)
    index = folder / MODELS_INDEX
    if index.is_file():
        per_task = {task: folder / sub for task, sub in read_models_index(index).items()}
        first = next(iter(per_task.values()))
        encoder_config, _, _ = load_initial(_finetune_view(config, first), ctx)
        return InitialWeights(encoder_config, per_task=per_task, tokenizer_folder=first)
    encoder_config, state, _ = load_initial(_finetune_view(config, folder), ctx)
    heads = read_bam_model(folder)[1] if detect_format(folder) == "xfer" else {}
    return InitialWeights(
        encoder_config, encoder_state=state, heads=heads, tokenizer_folder=folder, head_records=head_records(folder)
    )


def settle(weights: InitialWeights, tokenizer: Any, config: Any, seed: int) -> None:
    """Fit the vocabulary and draw a random init once.

    A checkpoint must cover the tokenizer's vocabulary; a random-init encoder takes the
    tokenizer's size (unless `encoder: {vocab_size}` says otherwise) and is drawn from `seed`.
    """
    from xfer.transformer.encoder import Encoder
    from xfer.transformer.modelio import fitted_to_tokenizer

    if config.init is None:
        weights.encoder_config = fitted_to_tokenizer(weights.encoder_config, tokenizer, config.encoder)
    vocab = weights.encoder_config.vocab_size
    if tokenizer.vocab_size > vocab:  # a checkpoint's, or an `encoder: {vocab_size}` below the tokenizer's
        raise UserError(f"tokenizer has {tokenizer.vocab_size} tokens but the encoder only {vocab} embeddings")
    if config.init is None:
        rng.seed_everything(seed)
        encoder = Encoder(weights.encoder_config)
        weights.encoder_state = {k: v.detach().clone() for k, v in encoder.state_dict().items()}


def save_bam_model(
    target: Path, model: MultiTaskModel, tokenizer: Any, meta: dict[str, Any], task_objectives: dict[str, str]
) -> None:
    """An xfer model dir: module `encoder` + one registered head per task, the tokenizer, and
    `meta["bam"]["tasks"]` saying which head serves which task (how `read_bam_model` finds them)."""
    from xfer.transformer.modelio import save_model_dir

    modules: dict[str, torch.nn.Module] = {"encoder": model.encoder}
    tasks = {}
    for task in model.task_names:
        objective = model.objective(task)
        extra = [name for name in objective.state_dict() if not name.startswith("head.")]
        if extra:
            raise UserError(
                f"{task}: objective {type(objective).__name__} has parameters outside its head ({extra[0]}, ...); "
                "BAM model directories store the encoder and one head per task"
            )
        modules[head_module(task)] = objective.head
        info = model.infos[task]
        tasks[task] = {
            "module": head_module(task),
            "type": info.type,
            "labels": list(info.labels),
            "objective": task_objectives[task],
            "extra": {k: v for k, v in info.extra.items() if k == "score_range"},
        }
    save_model_dir(target, modules, {META_KEY: {**meta, "tasks": tasks}})
    tokenizer.save(target)


def save_init(target: Path, encoder: torch.nn.Module, tokenizer: Any) -> None:
    from xfer.transformer.modelio import save_model_dir

    save_model_dir(target, {"encoder": encoder}, {META_KEY: {"initial": True, "tasks": {}}})
    tokenizer.save(target)


def write_models_index(folder: Path, tasks: dict[str, str]) -> None:
    write_json(folder / MODELS_INDEX, {"format": 1, "tasks": tasks})

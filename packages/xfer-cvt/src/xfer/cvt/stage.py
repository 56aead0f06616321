"""The `cvt.train` stage: CVT (or its supervised / word-dropout baselines) on one or more tasks.

For each trial (seeds seed, seed+1, ...): build the vocabulary from the data the mode learns
from, the encoder and one prediction module per task, the labeled streams (task drawn per
labeled minibatch with probability ∝ sqrt|D|) alternating with the unlabeled stream, and hand
them to the shared `Trainer` (SGD momentum, lr 0.5/(1+0.005 sqrt t), clipping, EMA weights for
evaluation, checkpoints with the data cursors, exact resume, DDP). An interrupted stage resumes
inside the running trial and skips finished ones.

Outputs:
  model/                 the median trial's weights (EMA weights when EMA is on: what was scored)
                         as an xfer model dir, with vocab.json and targets-<task>.json
  predictions/<task>/    per-trial prediction files for the `predict` splits
  results/results.json   per task: every trial's metrics and their median/mean/std, in the
                         layout of `xfer.core.results` (`xfer results RUN` prints it)
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from xfer.core import distributed as dist
from xfer.core import rng
from xfer.core.atomic import atomic_write_text, write_json
from xfer.core.data import AlternatingSource, MultiTaskSource
from xfer.core.errors import UserError
from xfer.core.evaluation import TaskEvaluator, oriented_mean
from xfer.core.results import BOOKKEEPING, HEADER, markdown_rows, score_order, strict_json, task_result
from xfer.core.stage import StageContext, finished_trial
from xfer.core.tasks import Task, TaskInfo, nonempty_examples, task_slug
from xfer.core.trainer import Trainer
from xfer.cvt.config import CvtConfig, FeaturesConfig
from xfer.cvt.data import Featurizer, Item, PooledStream, UnlabeledCorpus, UnlabeledStream, pad_rows, subsample
from xfer.cvt.objective import CvtObjective, Settings
from xfer.cvt.seq2seq import BOS, EOS, T_PAD, T_UNK, TARGET_SPECIALS
from xfer.cvt.text import tokenize, tokenize_joined
from xfer.cvt.vocab import Vocab, build_vocab, check_limits, check_vector_coverage, embedding_key, read_vectors


@dataclass
class TaskData:
    """A task with its examples read once per stage."""

    name: str
    task: Task
    info: TaskInfo
    train: list[Any]
    dev: list[Any]

    @property
    def kind(self) -> str:
        return self.info.type


@dataclass
class Prepared:
    """What one trial trains on (depends on the trial only through the labeled subset)."""

    vocab: Vocab
    items: dict[str, list[Item]]
    dev_items: dict[str, list[Item]]
    targets: dict[str, list[str]] = field(default_factory=dict)  # seq2seq target vocabularies
    root_relations: dict[str, list[str]] = field(default_factory=dict)


def source_words(data: TaskData, example: Any) -> tuple[str, ...]:
    if data.kind == "seq2seq":
        return tuple(tokenize(example.source))
    return tuple(example.words)


def load_tasks(ctx: StageContext, config: CvtConfig) -> list[TaskData]:
    out = []
    for ref in config.tasks:
        # keyed by `ref.key` (its `as:` alias, else its name), as the pre-flight does: two entries of
        # one loader (`{name: conll/chunking, as: chunks}`, `{..., as: entities}`) share `ref.name`,
        # and every per-task dict (subsets, streams, modules, results) would mix their data
        name = ref.key
        task: Task = ctx.host.load("task", ref.name)(name, ref.config)
        info = task.info()
        problems = config.check_task_infos({name: info})  # pre-flight's checks: a stage can run without it
        if problems:
            raise problems[0]
        # the Task contract (example classes, unique ids, tags/relations within labels, ...) at
        # stage time too: pre-flight checks it, but a stage can be run without it
        train, dev = nonempty_examples(task, "train"), nonempty_examples(task, "dev")
        for split, examples in (("train", train), ("dev", dev)):  # words: not part of the contract
            empty = next((e.id for e in examples if not source_words(TaskData(name, task, info, [], []), e)), None)
            if empty is not None:
                raise UserError(f"{name}: {split} sentence {empty!r} has no words")
        if info.type == "parsing":
            check_no_self_heads(name, train)
        out.append(TaskData(name, task, info, train, dev))
    return out


def check_no_self_heads(name: str, train: list[Any]) -> None:
    """Refuse a training word that is its own head. The Task contract allows any head in 0..n, but
    the parser's arcs join distinct words (a self-loop scores -inf): such a sentence made the loss
    infinite whenever its batch came up, and training stopped with "lower the learning rate"."""
    for example in train:
        word = next((i for i, head in enumerate(example.heads or (), start=1) if head == i), None)
        if word is not None:
            raise UserError(
                f"{name}: training sentence {example.id!r}: word {word} ({example.words[word - 1]!r}) is its own "
                "head; cvt.train's parser only scores arcs between two different words (or from ROOT)"
            )


TASK_SENTENCES_FILE = "unlabeled-task-sentences.txt"


def read_unlabeled(
    ctx: StageContext, config: CvtConfig, tasks: list[TaskData]
) -> tuple[UnlabeledCorpus | None, Counter[str] | None]:
    if config.mode == "supervised":
        return None, None
    u = config.unlabeled  # CvtConfig has checked that cvt/word_dropout get files or task sentences
    files = ctx.resolve_files(u.files) if u.files is not None else []
    task_files = [write_task_sentences(ctx.dir / TASK_SENTENCES_FILE, tasks)] if u.task_sentences else []
    corpus = UnlabeledCorpus(files + task_files, u.chunk_lines, u.max_length, u.tokenize, pretokenized=task_files)
    counts = Counter(corpus.words(u.vocab_lines))
    if not corpus.has_words:  # not `counts`: the first vocab_lines lines may all be blank
        named = ", ".join(str(p) for p in corpus.files[:3]) + (
            f" and {len(corpus.files) - 3} more" if len(corpus.files) > 3 else ""
        )
        raise UserError(f"the unlabeled text contains no words (only blank lines): {named}")
    return corpus, counts


def write_task_sentences(path: Path, tasks: list[TaskData]) -> Path:
    """Every training sentence of every task, one per line (a blank line between tasks), as a file.

    A file, not a list in memory, so the task sentences go through the unlabeled stream's chunked
    reading and exact resume cursor like any corpus. Its content depends only on the tasks' data,
    which the stage fingerprint covers, so a resumed run rewrites it byte for byte; every rank
    writes the same bytes through its own temporary file. A sentence is written as many times as
    the task that has it most often has it: tasks reading one treebank (UD POS and parsing) gave
    every sentence twice.
    """
    blocks, written = [], Counter[tuple[str, ...]]()
    for data in tasks:
        lines, seen = [], Counter[tuple[str, ...]]()
        for example in data.train:
            words = source_words(data, example)
            spaced = next((w for w in words if len(w.split()) != 1), None)
            if spaced is not None:
                raise UserError(
                    f"{data.name}: training sentence {example.id!r} has a word with whitespace in it ({spaced!r}); "
                    "unlabeled.task_sentences needs whitespace-free words"
                )
            seen[words] += 1
            if seen[words] > written[words]:
                written[words] += 1
                lines.append(" ".join(words) + "\n")
        blocks.append("".join(lines))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "\n".join(blocks))
    return path


def vocabulary_words(config: CvtConfig, tasks: list[TaskData], unlabeled_counts: Counter[str] | None) -> set[str]:
    """The word keys a trial's vocabulary can hold without the vectors file: those of every task's
    whole training set (each trial's labeled subset is part of it) and the unlabeled text. Their
    vectors are read wherever they are in the file, not only among its first `vectors_limit`."""
    v = config.vocab
    words = [w for t in tasks for e in t.train for w in source_words(t, e)]
    vocab = build_vocab(
        words,
        unlabeled_counts,
        lowercase=v.lowercase,
        min_count=1,
        unlabeled_words=v.unlabeled_words,
        char_min_count=v.char_min_count,
    )
    return set(vocab.words)


def prepare(
    config: CvtConfig, tasks: list[TaskData], unlabeled_counts: Counter[str] | None, seed: int, vectors: dict | None
) -> Prepared:
    """The trial's labeled subset, vocabularies and labeled items."""
    subset_seed = config.subset_seed if config.subset_seed is not None else seed
    subsets = {
        t.name: [t.train[i] for i in subsample(len(t.train), config.labeled_fraction, subset_seed)] for t in tasks
    }
    words = [w for t in tasks for e in subsets[t.name] for w in source_words(t, e)]
    v = config.vocab
    vocab = build_vocab(
        words,
        unlabeled_counts,
        lowercase=v.lowercase,
        min_count=v.min_count,
        unlabeled_words=v.unlabeled_words,
        char_min_count=v.char_min_count,
        vector_words=list(vectors)[: v.vectors_limit] if vectors else (),  # the rest are words it has anyway
    )
    if config.features.init is None or config.features.combine == "concat":  # else no word or char input
        check_limits(vocab, words, v.min_count, v.char_min_count)
    prepared = Prepared(vocab, {}, {})
    for t in tasks:
        train, dev = subsets[t.name], t.dev
        if t.kind == "tagging":
            index = {tag: i for i, tag in enumerate(t.info.labels)}
            prepared.items[t.name] = [Item(e.id, tuple(e.words), tuple(index[g] for g in e.tags)) for e in train]
        elif t.kind == "parsing":
            index = {rel: i for i, rel in enumerate(t.info.labels)}
            prepared.items[t.name] = [
                Item(e.id, tuple(e.words), tuple(index[r] for r in e.relations), tuple(e.heads)) for e in train
            ]
            prepared.root_relations[t.name] = sorted(
                {r for e in train for h, r in zip(e.heads, e.relations, strict=True) if h == 0}
            )
        else:
            counts = Counter(tok for e in train for tok in tokenize_joined(e.target))
            vocab_t = list(TARGET_SPECIALS) + [
                w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c >= config.target_min_count
            ]
            if len(vocab_t) == len(TARGET_SPECIALS):  # every output was <unk>, and BLEU 0 was reported
                raise UserError(
                    f"target_min_count {config.target_min_count} leaves {t.name} no target word (the most frequent "
                    f"target token is seen {max(counts.values(), default=0)} times): every output would be <unk>; "
                    "lower target_min_count"
                )
            prepared.targets[t.name] = vocab_t
            index = {w: i for i, w in enumerate(vocab_t)}
            prepared.items[t.name] = [
                Item(e.id, source_words(t, e), tuple(index.get(tok, T_UNK) for tok in tokenize_joined(e.target)))
                for e in train
            ]
        prepared.dev_items[t.name] = [Item(e.id, source_words(t, e)) for e in dev]
    return prepared


def untrained_label_warnings(config: CvtConfig, tasks: list[TaskData], prepared: Prepared) -> list[str]:
    """What to say of dev gold tags (relations) that are in a task's tag (relation) set but that no
    labeled sentence of the trial shows: the model never learns to predict them, so each is a miss.

    The Task contract's `UnseenTagsWarning` compares the dev set with the task's `labels`, the tag
    set of its whole training file; the sentences a trial trains on are fewer: `labeled_fraction`
    (at 1% of CoNLL-2000, 40 dev chunk tags, among them every B-SBAR), a dev set carved out of the
    training file, `max_examples`. Those tags counted as misses without a word."""
    messages = []
    for t in tasks:
        if t.kind not in ("tagging", "parsing"):
            continue
        trained = {label for item in prepared.items[t.name] for label in item.labels}
        index = {label: i for i, label in enumerate(t.info.labels)}
        missed = [
            (gold, example.id)
            for example in t.dev
            for gold in (example.tags if t.kind == "tagging" else example.relations) or ()
            if gold in index and index[gold] not in trained
        ]
        if missed:
            what = "tag" if t.kind == "tagging" else "relation"
            kinds = len({gold for gold, _ in missed})
            messages.append(
                f"{t.name}: {len(missed)} dev gold {what}{'s' if len(missed) != 1 else ''} ({kinds} of the task's "
                f"{what}s, first {missed[0][0]!r} in example {missed[0][1]!r}) never occur in the "
                f"{len(prepared.items[t.name])} labeled training sentences (labeled_fraction "
                f"{config.labeled_fraction}): the model cannot learn them, so they count as misses"
            )
    return messages


def unreachable_target_warnings(config: CvtConfig, tasks: list[TaskData]) -> list[str]:
    """What to say of dev references longer than beam search may output: `max_target_length`
    tokens, and 2 x the source's words + 10 (`Seq2SeqModule.beam_search`). No translation can
    match them in full, and BLEU fell through its brevity penalty without a word of why."""
    messages = []
    for t in tasks:
        if t.kind != "seq2seq":
            continue
        longer = [
            e.id
            for e in t.dev
            if e.target is not None
            and len(tokenize_joined(e.target)) > min(config.max_target_length, 2 * len(source_words(t, e)) + 10)
        ]
        if longer:
            messages.append(
                f"{t.name}: {len(longer)} of {len(t.dev)} dev references (first {longer[0]!r}) are longer than beam "
                f"search may output (max_target_length {config.max_target_length} tokens, and 2 x the source's "
                "words + 10): their translations are cut there, and BLEU counts the missing words"
            )
    return messages


def make_collate(featurizer: Featurizer, kind: str) -> Any:
    """Collate for labeled items of a task kind, for `inputs` (items, no labels: evaluation), or
    for `unlabeled` sentences (lists of words)."""
    if kind == "unlabeled":
        return featurizer.inputs

    def collate(items: list[Item]) -> dict[str, torch.Tensor]:
        batch = featurizer.inputs([i.words for i in items])
        width = batch["words"].shape[1]
        if kind in ("tagging", "parsing"):
            batch["labels"] = pad_rows([i.labels for i in items], width)
            if kind == "parsing":
                batch["heads"] = pad_rows([i.heads for i in items], width)
        elif kind == "seq2seq":
            batch["dec_in"] = pad_rows(
                [(BOS, *i.labels) for i in items], max(len(i.labels) for i in items) + 1, 0, T_PAD
            )
            batch["dec_out"] = pad_rows(
                [(*i.labels, EOS) for i in items], max(len(i.labels) for i in items) + 1, 0, T_PAD
            )
        return batch

    return collate


def load_transformer(ctx: StageContext, config: CvtConfig) -> tuple[Any, dict[str, torch.Tensor], Any] | None:
    """(encoder config, weights, tokenizer) of the `features.init` checkpoint, or None."""
    f = config.features
    if f.init is None:
        return None
    folder = ctx.resolve(f.init)
    tokenizer = ctx.resolve(f.tokenizer) if f.tokenizer is not None else None
    for message in features_warnings(folder, f):
        ctx.warn(message)
    return read_transformer(folder, tokenizer, f)


def features_warnings(folder: Path, f: FeaturesConfig) -> list[str]:
    """What the stage goes on with as asked but the user should know about `features.init`: an
    ELECTRA generator (the small network that makes replacements, not the discriminator the
    recipes mean), and a `features.max_length` past the length it was pre-trained on (position
    embeddings beyond it were never trained; windows make a lower max_length cheap)."""
    from xfer.transformer.initnotes import generator_init_message, untrained_positions_message

    if not folder.is_dir():
        return []  # read_transformer says so
    messages = [
        generator_init_message(folder, "features.init", "CVT goes on with its features as asked."),
        untrained_positions_message(folder, f.max_length, "features.max_length"),
    ]
    return [m for m in messages if m]


def read_transformer(
    folder: Path, tokenizer_folder: Path | None, f: FeaturesConfig
) -> tuple[Any, dict[str, torch.Tensor], Any]:
    """(encoder config, weights, tokenizer) of a Transformer folder, checked against the features
    config `f` (tokenizer: `tokenizer_folder`, default the one in `folder`)."""
    from xfer.cvt.checks import features_problems
    from xfer.transformer.modelio import read_encoder
    from xfer.transformer.tokenization import WordPieceTokenizer

    problems = features_problems(folder, tokenizer_folder, f.max_length, f.layer)  # the pre-flight's, again
    if problems:
        raise problems[0]
    encoder_config, state, _ = read_encoder(folder)
    tokenizer = WordPieceTokenizer.from_dir(tokenizer_folder if tokenizer_folder is not None else folder)
    if f.max_length > encoder_config.max_position_embeddings:
        raise UserError(
            f"features.max_length {f.max_length} exceeds the Transformer's max_position_embeddings "
            f"({encoder_config.max_position_embeddings}, {folder})"
        )
    if not -encoder_config.num_layers - 1 <= f.layer <= encoder_config.num_layers:
        raise UserError(
            f"features.layer {f.layer}: the Transformer has layers 0 (embeddings) to {encoder_config.num_layers}"
        )
    if tokenizer.vocab_size > encoder_config.vocab_size:
        raise UserError(
            f"features: the tokenizer has {tokenizer.vocab_size} tokens but the encoder only {encoder_config.vocab_size}"
        )
    return encoder_config, state, tokenizer


def build_objective(
    config: CvtConfig,
    tasks: list[TaskData],
    prepared: Prepared,
    transformer: tuple[Any, dict, Any] | None,
    vectors: dict | None,
    seed: int,
    device: torch.device,
) -> CvtObjective:
    from xfer.cvt.model import TransformerFeatures, WordEncoder
    from xfer.cvt.parsing import ParsingModule
    from xfer.cvt.seq2seq import Seq2seqModule
    from xfer.cvt.tagging import TaggingModule

    rng.seed_everything(seed)
    sizes = config.resolved_sizes()
    features = None
    if transformer is not None:
        from xfer.transformer.encoder import Encoder

        encoder_config, state, _ = transformer
        model = Encoder(encoder_config)
        model.load_state_dict(state)
        f = config.features
        features = TransformerFeatures(model, f.layer, f.finetune, f.lr_scale)
    packed = config.lstm == "packed" or (config.lstm == "auto" and device.type == "cuda")
    encoder = WordEncoder(
        sizes,
        len(prepared.vocab.words),
        len(prepared.vocab.chars),
        features=features,
        features_only=features is not None and config.features.combine == "replace",
        features_join=config.features.joins,
        packed=packed,
        train_unk=config.vocab.train_unk,
    )
    if vectors and encoder.word_embedding is not None:
        with torch.no_grad():
            weight = encoder.word_embedding.weight
            by_key = {embedding_key(w, prepared.vocab.lowercase): vec for w, vec in reversed(list(vectors.items()))}
            for i, key in enumerate(prepared.vocab.words[5:], start=5):
                if key in by_key:
                    weight[i] = torch.from_numpy(by_key[key])
    modules: dict[str, torch.nn.Module] = {}
    for t in tasks:
        if t.kind == "tagging":
            modules[t.name] = TaggingModule(
                encoder.full_size, encoder.uni_size, sizes["hidden"], t.info.labels, config.tagging_views
            )
        elif t.kind == "parsing":
            modules[t.name] = ParsingModule(
                encoder.full_size,
                encoder.uni_size,
                sizes["hidden"],
                sizes["parse_dim"],
                t.info.labels,
                prepared.root_relations[t.name],
                config.parsing_views,
            )
        else:
            summary = 2 * encoder.layer2.output_size
            modules[t.name] = Seq2seqModule(
                encoder.full_size, summary, prepared.targets[t.name], sizes, config.seq2seq_views
            )
    settings = Settings(
        dropout=config.dropout,
        unlabeled_dropout=config.unlabeled_dropout,
        word_dropout=config.word_dropout,
        label_smoothing=config.label_smoothing,
        parse_label_smoothing=config.parse_label_smoothing,
        teacher_label_smoothing=config.teacher_label_smoothing,
        attention_dropout=config.attention_dropout,
        parse_decoding=config.parse_decoding,
        beam_size=config.beam_size,
        teacher_beam_size=config.teacher_beam_size or config.beam_size,
        length_penalty=config.length_penalty,
        max_target_length=config.max_target_length,
    )
    return CvtObjective(
        encoder,
        modules,
        settings,
        mode=config.mode,
        teacher=config.teacher,
        cvt_tasks=config.cvt_tasks,
        task_weights=task_weights(config, prepared),
        seed=seed,
    )


def task_weights(config: CvtConfig, prepared: Prepared) -> dict[str, float]:
    sizes = {name: len(items) for name, items in prepared.items.items()}
    if config.task_weights == "uniform":
        return {name: 1.0 for name in sizes}
    if config.task_weights == "size":
        return {name: float(n) for name, n in sizes.items()}
    return {name: math.sqrt(n) for name, n in sizes.items()}


@dataclass(frozen=True)
class SourceSeeds:
    """The seeds of a trial's training sources (see `source_seeds`)."""

    tasks: tuple[int, ...]  # each task's PooledStream, in task order
    draws: int  # the MultiTaskSource's per-step task draws
    unlabeled: int  # the UnlabeledStream


def source_seeds(seed: int, tasks: int) -> SourceSeeds:
    """Task streams `seed*1000 + index` (as before), task draws the next number, unlabeled the one after.

    Each of these sources draws from `numpy.random.default_rng([its seed, k, ...])` (k an epoch, a step
    or a pool), and numpy's SeedSequence ignores trailing zeros, so two sources given one seed share
    streams: with the task draws and the unlabeled stream both at `seed`, step k's task choice came
    from the stream of the unlabeled epoch k's chunk order, and at seed 0 task 0 (`0*1000 + 0`) drew
    its epoch orders from it too and its pool orders from the unlabeled pools'. Now every source has a
    seed of its own. The task streams keep theirs, so a single-task supervised trial trains on the
    same batches as before. The objective's `cvt_tasks: one` draws (`[seed, step, 3]`) are three words
    ending in 3, which no source's entropy is. (Left: with `labeled_fraction` < 1 and the default
    `subset_seed`, seed 0's subset `[0, 7919]` is the stream of task 0's epoch-7919 order.)"""
    base = seed * 1000
    return SourceSeeds(tuple(base + index for index in range(tasks)), base + tasks, base + tasks + 1)


class MultiTaskEvaluator:
    """Every task's official metrics as `<task>/<metric>`, and `mean`: the mean of their main
    metrics, a lower-is-better one negated (`xfer.core.evaluation.oriented_mean`)."""

    main_metric = "mean"
    greater_is_better = True

    def __init__(self, evaluators: dict[str, TaskEvaluator]):
        self.evaluators = evaluators

    def __call__(self, model: torch.nn.Module) -> dict[str, float]:
        out: dict[str, float] = {}
        mains = []
        for name, evaluator in self.evaluators.items():
            results = evaluator(model)
            out.update({f"{name}/{k}": v for k, v in results.items()})
            mains.append((results[evaluator.main_metric], evaluator.greater_is_better))
        out["mean"] = oriented_mean(mains)
        return out


def make_evaluators(
    tasks: list[TaskData], prepared: Prepared, featurizer: Featurizer, device: torch.device, batch_size: int
) -> dict[str, TaskEvaluator]:
    evaluators = {}
    for t in tasks:
        items = sorted(prepared.dev_items[t.name], key=lambda i: i.length)  # less padding; ids keep the mapping
        evaluators[t.name] = TaskEvaluator(
            t.task,
            t.dev,
            items,
            make_collate(featurizer, "inputs"),
            lambda model, batch, name=t.name: model.predict(name, batch),
            device,
            batch_size=batch_size,
            feature_ids=[i.id for i in items],
        )
    return evaluators


def run_train(ctx: StageContext) -> None:
    config: CvtConfig = ctx.config
    if config.train.steps is None:
        raise UserError(
            "cvt.train counts training in steps, not epochs (its tasks, and in mode cvt the unlabeled text, are "
            "sampled without epochs): set train.steps"
        )
    if config.mode == "word_dropout" and config.features.init is not None:
        raise UserError("mode word_dropout cannot hide words from Transformer features (they attend to every word)")
    tasks = load_tasks(ctx, config)
    corpus, unlabeled_counts = read_unlabeled(ctx, config, tasks)
    vectors = None
    if config.vocab.vectors is not None:
        from xfer.cvt.vectors import vectors_file

        path = vectors_file(ctx.resolve(config.vocab.vectors))  # a file, or a cvt.vectors output
        wanted = vocabulary_words(config, tasks, unlabeled_counts)
        lowercase = config.vocab.lowercase
        vectors = read_vectors(
            path,
            config.resolved_sizes()["word_dim"],
            config.vocab.vectors_limit,
            keep=lambda word: embedding_key(word, lowercase) in wanted,
        )
        check_vector_coverage(path, vectors, (w for t in tasks for e in t.train for w in source_words(t, e)), lowercase)
    transformer = load_transformer(ctx, config)
    train_config = config.train
    if dist.world_size() > 1 and not train_config.find_unused_parameters:
        train_config = replace(train_config, find_unused_parameters=True)  # modules idle on some steps

    runs: list[dict[str, Any]] = []
    warned: set[str] = set()  # trials of one labeled subset (the default subset_seed) say it once
    for message in unreachable_target_warnings(config, tasks):
        ctx.warn(message)
    for trial in range(config.trials):
        seed = ctx.seed + trial
        workdir = ctx.dir / "trials" / f"trial-{trial}"
        prepared = prepare(config, tasks, unlabeled_counts, seed, vectors)
        done = workdir / "done.json"
        finished = finished_trial(done)
        if finished is not None:
            runs.append(finished)
            continue
        for message in untrained_label_warnings(config, tasks, prepared):
            if message not in warned:
                warned.add(message)
                ctx.warn(message)
        record = run_trial(ctx, config, train_config, tasks, prepared, corpus, transformer, vectors, trial, seed)
        runs.append(record)
        if ctx.is_main:
            workdir.mkdir(parents=True, exist_ok=True)
            write_json(done, record, indent=None)
    finish(ctx, config, tasks, runs, transformer, vectors, unlabeled_counts)


def run_trial(
    ctx: StageContext,
    config: CvtConfig,
    train_config: Any,
    tasks: list[TaskData],
    prepared: Prepared,
    corpus: UnlabeledCorpus | None,
    transformer: Any,
    vectors: dict | None,
    trial: int,
    seed: int,
) -> dict[str, Any]:
    import time

    workdir = ctx.dir / "trials" / f"trial-{trial}"
    sizes = config.resolved_sizes()
    featurizer = Featurizer(
        prepared.vocab, sizes["max_word_chars"], transformer[2] if transformer else None, config.features.max_length
    )
    objective = build_objective(config, tasks, prepared, transformer, vectors, seed, ctx.device)
    rank, world, accumulation = dist.rank(), dist.world_size(), train_config.grad_accum
    pool = config.unlabeled.pool_batches
    seeds = source_seeds(seed, len(tasks))
    streams = {
        t.name: PooledStream(
            prepared.items[t.name],
            [i.length for i in prepared.items[t.name]],
            train_config.batch_size,
            make_collate(featurizer, t.kind),
            seed=seeds.tasks[index],
            rank=rank,
            world_size=world,
            accumulation=accumulation,
            pool_batches=pool,
        )
        for index, t in enumerate(tasks)
    }
    labeled = MultiTaskSource(streams, task_weights(config, prepared), seed=seeds.draws)
    if config.mode == "supervised":
        source = AlternatingSource({"labeled": labeled}, ["labeled"])
    else:
        assert corpus is not None
        unlabeled = UnlabeledStream(
            corpus,
            config.unlabeled.batch_size or train_config.batch_size,
            make_collate(featurizer, "unlabeled"),
            seed=seeds.unlabeled,
            rank=rank,
            world_size=world,
            accumulation=accumulation,
            pool_batches=pool,
        )
        source = AlternatingSource({"labeled": labeled, "unlabeled": unlabeled}, ["labeled", "unlabeled"])
    evaluators = make_evaluators(tasks, prepared, featurizer, ctx.device, config.eval_batch_size)
    evaluator: Any = next(iter(evaluators.values())) if len(evaluators) == 1 else MultiTaskEvaluator(evaluators)
    trainer = Trainer(
        train_config,
        objective,
        source,
        workdir,
        device=ctx.device,
        evaluator=evaluator,
        events=ctx.events(trial=trial),
        description=f"{ctx.name} #{trial}",
    )
    if config.ema_warmup and trainer.ema is not None:  # adapter: the shared trainer keeps a constant decay
        objective.ema, objective.ema_decay = trainer.ema, trainer.ema.decay
    fit = trainer.fit()
    evaluation_started = time.time()
    chosen = trainer.load_weights(config.select)
    objective.eval()
    record: dict[str, Any] = {}
    with torch.no_grad(), trainer.autocast():
        for t in tasks:
            evaluator_t = evaluators[t.name]
            predictions = evaluator_t.predictions(objective)
            # a copy, as `TaskEvaluator` hands it; numbers and the main metric checked as it returns them
            # (np.float32 scores were written to done.json as strings, a missing main metric a bare KeyError)
            metrics = evaluator_t.checked(t.task.evaluate(list(t.dev), predictions))
            prefix = "" if len(tasks) == 1 else f"{t.name}/"
            record.update({prefix + k: v for k, v in metrics.items()})
            if ctx.is_main and "dev" in config.predict:
                folder = ctx.output_dir("predictions") / task_slug(t.name) / f"trial-{trial}"
                t.task.write_predictions(folder, "dev", list(t.dev), predictions)
            if "test" in config.predict:
                examples = nonempty_examples(t.task, "test")  # (an empty one: a header-only prediction file)
                items = [Item(e.id, source_words(t, e)) for e in examples]
                test_eval = TaskEvaluator(
                    t.task, examples, items, make_collate(featurizer, "inputs"),
                    lambda model, batch, name=t.name: model.predict(name, batch), ctx.device,
                    batch_size=config.eval_batch_size, feature_ids=[i.id for i in items],
                )  # fmt: skip
                test_predictions = test_eval.predictions(objective)
                if ctx.is_main:
                    folder = ctx.output_dir("predictions") / task_slug(t.name) / f"trial-{trial}"
                    t.task.write_predictions(folder, "test", examples, test_predictions)
            signature = getattr(t.task, "last_signature", None)
            if signature:
                record[f"{prefix}bleu_signature"] = signature
        if len(tasks) > 1:
            record["mean"] = oriented_mean(
                [(record[f"{t.name}/{t.info.main_metric}"], getattr(t.info, "greater_is_better", True)) for t in tasks]
            )
    record.update(
        trial=trial,
        seed=seed,
        steps=fit.step,
        checkpoint=chosen.name,
        seconds=round(fit.seconds + time.time() - evaluation_started, 1),  # training across resumes + final eval
    )
    return record


def main_metric(config: CvtConfig, tasks: list[TaskData]) -> str:
    return tasks[0].info.main_metric if len(tasks) == 1 else "mean"


def finish(
    ctx: StageContext,
    config: CvtConfig,
    tasks: list[TaskData],
    runs: list[dict[str, Any]],
    transformer: Any,
    vectors: dict | None,
    unlabeled_counts: Counter[str] | None,
) -> None:
    """Results, report, and the median trial's model."""
    from xfer.core.checkpoint import evaluated_checkpoint
    from xfer.core.trainer import load_evaluated_weights
    from xfer.transformer.modelio import save_model_dir

    metric = main_metric(config, tasks)
    # A NaN score as the worst, as results.json's summary sorts it (`score_order`): sorted raw, NaN compares
    # false with everything, so it stayed where it stood and its trial could be exported as the median one.
    greater = getattr(tasks[0].info, "greater_is_better", True) if len(tasks) == 1 else True
    ranked = sorted(runs, key=lambda r: (score_order(r[metric], greater), r["trial"]))
    median = ranked[(len(ranked) - 1) // 2]
    results = results_layout(tasks, runs)
    ctx.output_dir("predictions")
    model_dir = ctx.output_dir("model")
    if not ctx.is_main:
        return
    write_json(ctx.output_dir("results") / "results.json", results)
    ctx.report(results_report(config.mode, results))
    trial = median["trial"]
    prepared = prepare(config, tasks, unlabeled_counts, ctx.seed + trial, vectors)
    objective = build_objective(config, tasks, prepared, transformer, vectors, ctx.seed + trial, torch.device("cpu"))
    checkpoints = ctx.dir / "trials" / f"trial-{trial}" / "checkpoints"
    what = f"trial {trial} ({metric} {median[metric]})"
    load_evaluated_weights(evaluated_checkpoint(checkpoints, median["checkpoint"], what), objective)
    scratch = ctx.dir / "trials" / f"trial-{trial}"
    files = [scratch / "vocab.json"]
    prepared.vocab.save(files[0])
    for name, vocab_t in prepared.targets.items():
        path = scratch / f"targets-{task_slug(name)}.json"
        path.write_text(json.dumps(vocab_t, ensure_ascii=False) + "\n", encoding="utf-8")
        files.append(path)
    meta = {
        "cvt": {
            "mode": config.mode,
            "sizes": config.resolved_sizes(),
            "trial": trial,
            "tasks": {
                t.name: {
                    "type": t.kind,
                    "labels": list(t.info.labels),
                    **({"root_relations": prepared.root_relations[t.name]} if t.kind == "parsing" else {}),
                }
                for t in tasks
            },
            # strict JSON, as `transformer.finetune`'s: a NaN score was Python's bare NaN token, refused by jq/JS/Go
            "metrics": strict_json({k: v for k, v in median.items() if k not in BOOKKEEPING}),
        }
    }
    save_model_dir(model_dir, {"cvt": objective}, meta, files=files)


def results_layout(tasks: list[TaskData], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """results.json in the shared layout of `xfer.core.results` (task -> main_metric/summary/runs).

    A trial's record carries every task's metrics as `<task>/<metric>` (plus `mean`) when several
    tasks train together; here each task gets its own entry with its own metrics under their plain
    names, and a multi-task stage adds `all tasks` (main metric `mean`, what picks the median trial)."""
    multitask = len(tasks) > 1
    results: dict[str, Any] = {}
    for t in tasks:
        prefix = f"{t.name}/" if multitask else ""
        task_runs = [
            {k: v for k, v in r.items() if k in BOOKKEEPING}
            | {
                k[len(prefix) :]: v
                for k, v in r.items()
                if k not in BOOKKEEPING and (not multitask or metric_owner(k, tasks) == t.name)
            }
            for r in runs
        ]
        results[t.name] = task_result(t.info.main_metric, task_runs, getattr(t.info, "greater_is_better", True))
    if multitask:
        results["all tasks"] = task_result("mean", [{k: r[k] for k in (*BOOKKEEPING, "mean") if k in r} for r in runs])
    return results


def metric_owner(key: str, tasks: list[TaskData]) -> str | None:
    """The task whose `<task>/<metric>` key `key` is: the longest task name it starts with, so that
    an alias `conll` does not take `conll/chunking/f1` of the task `conll/chunking` as a metric of its own."""
    owners = [t.name for t in tasks if key.startswith(f"{t.name}/")]
    return max(owners, key=len, default=None)


def results_report(mode: str, results: dict[str, Any]) -> str:
    """report.md's results: the table `xfer results` prints, and any BLEU signature."""
    lines = [
        f"## Results (dev, mode {mode}; every score in percent)",
        "",
        HEADER,
        *markdown_rows("this stage", results),
    ]
    signatures = sorted(
        {v for result in results.values() for r in result["runs"] for k, v in r.items() if k.endswith("bleu_signature")}
    )
    for signature in signatures:
        lines.append(f"\nBLEU signature: `{signature}`")
    return "\n".join(lines)

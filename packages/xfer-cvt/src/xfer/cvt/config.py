"""Config of the `cvt.train` stage (torch-free: `xfer validate` imports it).

Defaults follow the thesis (Table 4.1) and the released code (tensorflow/models research/cvt_text)
except where a CPU budget forces smaller sizes: `model: cpu` (the default) is a CPU-sized
network, `model: thesis` the paper's (LSTM 1024/512 with 512 projections, 300-d words,
char-CNN 3 x 100 filters). Every choice the thesis leaves open is a knob whose doc says what the
original code does.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from xfer.core.config import FieldError, Files, Input, KeysOf, TaskRef, check_distinct_tasks, knob
from xfer.core.errors import UserError
from xfer.core.tasks import task_slug
from xfer.core.train_config import TrainConfig

PresetName = Literal["tiny", "cpu", "thesis"]

# Sizes of the network. Must list exactly the keys of every preset (a test checks); kept literal
# so that `sizes:` overrides are type-checked with did-you-mean without importing torch.
SIZE_FIELDS: dict[str, Any] = {
    "word_dim": int,
    "char_dim": int,
    "char_filters": int,
    "char_widths": list[int],
    "max_word_chars": int,
    "char_combine": Literal["sum", "concat"],
    "lstm1": int,
    "lstm2": int,
    "projection": int | None,
    "hidden": int,
    "parse_dim": int,
    "target_dim": int,
    "decoder": int,
}

PRESETS: dict[str, dict[str, Any]] = {
    # tests: seconds on a CPU
    "tiny": {
        "word_dim": 16,
        "char_dim": 8,
        "char_filters": 8,
        "char_widths": [2, 3, 4],
        "max_word_chars": 20,
        "char_combine": "concat",
        "lstm1": 16,
        "lstm2": 12,
        "projection": None,
        "hidden": 16,
        "parse_dim": 8,
        "target_dim": 16,
        "decoder": 24,
    },
    # one thread of a laptop-class CPU; chosen by timing (see the package README)
    "cpu": {
        "word_dim": 120,
        "char_dim": 30,
        "char_filters": 40,
        "char_widths": [2, 3, 4],
        "max_word_chars": 20,
        "char_combine": "sum",
        "lstm1": 200,
        "lstm2": 100,
        "projection": None,
        "hidden": 100,
        "parse_dim": 32,
        "target_dim": 128,
        "decoder": 256,
    },
    # Table 4.1 (GPU): LSTMP cells 1024 / 512 with 512 projections, prediction-module hidden 512
    "thesis": {
        "word_dim": 300,
        "char_dim": 50,
        "char_filters": 100,
        "char_widths": [2, 3, 4],
        "max_word_chars": 20,
        "char_combine": "sum",
        "lstm1": 1024,
        "lstm2": 512,
        "projection": 512,
        "hidden": 512,
        "parse_dim": 128,
        "target_dim": 300,
        "decoder": 1024,
    },
}


def module_key(task: str) -> str:
    """A task name as an nn.Module attribute name (the key of its module in the model's weights)."""
    return re.sub(r"\W", "_", task)


def check_task_keys(names: list[str]) -> None:
    """Distinct task names that one of those spellings would merge (the task `conll/chunking` and
    an entry `as: conll_chunking`): the second task's module replaced the first's in the model, so
    both trained and predicted with one module and one label set (or their prediction files
    overwrote each other)."""
    for spell, what in ((module_key, "module name in the model"), (task_slug, "prediction folder")):
        seen: dict[str, str] = {}
        for name in names:
            other = seen.setdefault(spell(name), name)
            if other != name:
                raise FieldError(
                    "tasks",
                    f"tasks {other!r} and {name!r} get the same {what} ({spell(name)!r}): give one of them "
                    "another name with `as:`",
                )


TaggingView = Literal["fwd", "bwd", "future", "past", "full"]
ParsingView = Literal["fwd-fwd", "fwd-bwd", "bwd-fwd", "bwd-bwd", "full"]
Seq2seqView = Literal["attention_dropout", "future", "full"]


@dataclass
class UnlabeledConfig:
    """Where the unlabeled sentences come from and how they are cut and batched."""

    files: Files | None = knob(
        None,
        "Unlabeled text, one sentence per line (globs; blank lines are document breaks). Needed by cvt/word_dropout.",
        takes=("text",),
    )
    task_sentences: bool = knob(
        False,
        "Also read the tasks' own training sentences as unlabeled text: every one, labels dropped (translation: "
        "the source side), whatever labeled_fraction keeps; a sentence two tasks share (UD POS and parsing on one "
        "treebank) is read once. In-domain text where no in-domain corpus exists; "
        "the usual semi-supervised protocol for the labeled_fraction rows. With files, both are read.",
    )
    max_length: int = knob(
        100,
        "Longer lines are cut into pieces of at most this many words (never dropped; the original "
        "code skipped sentences of 100+ words).",
        ge=1,
    )
    tokenize: Literal["whitespace", "punct"] = knob(
        "whitespace",
        "whitespace: lines are already tokenized (as ../shared/data/unlabeled is, but for its raw state_union "
        "part); punct: also split punctuation off "
        "words (the same tokenizer translation tasks use for raw text).",
    )
    chunk_lines: int = knob(
        10000,
        "Lines read and shuffled together (the original code read 10,000 lines at a time); memory is O(chunk). "
        "Each epoch visits the chunks of every file in a seeded random order.",
        ge=1,
    )
    pool_batches: int = knob(
        50, "Batches whose sentences are sorted by length together (less padding), then shuffled.", ge=1
    )
    batch_size: int | None = knob(None, "Sentences per unlabeled batch; default: train.batch_size.", ge=1)
    vocab_lines: int | None = knob(
        None, "Only the first N lines are counted for the word/char vocabulary (None: every line).", ge=1
    )


@dataclass
class VocabConfig:
    """Word and character vocabularies (built from the data; see the package README)."""

    lowercase: bool = knob(
        True,
        "Word embeddings are looked up by the lower-cased word with digits mapped to 0 (original code); "
        "the char-CNN always sees the word as written, so case still reaches the model.",
    )
    min_count: int = knob(1, "Labeled training words need this many occurrences to get their own embedding.", ge=1)
    unlabeled_words: int = knob(
        50000,
        "The most frequent unlabeled-data words added to the vocabulary (modes that train on unlabeled data only: "
        "in supervised mode these embeddings would never be trained).",
        ge=0,
    )
    vectors: Input | None = knob(
        None,
        "Pre-trained word vectors to initialise embeddings, dim = word_dim: a GloVe or word2vec text file, or a "
        "cvt.vectors stage's output (e.g. vectors.vectors).",
        takes=("vectors",),
    )
    vectors_limit: int | None = knob(
        100000,
        "Also add the first N words of the vectors file to the vocabulary (None: all). Words the vocabulary "
        "has anyway (from the tasks and the unlabeled text) get their vectors wherever they are in the file.",
        ge=0,
    )
    char_min_count: int = knob(1, "Characters seen fewer times are <unk> for the char-CNN.", ge=1)
    train_unk: bool = knob(
        False,
        "Train the <unk> word embedding (true: the original code, whose GloVe vocabulary makes <unk> rare). False "
        "(default): it stays zero, so a word outside the vocabulary contributes only its characters, in every mode "
        "alike. Labeled words are all in the vocabulary, so a trained <unk> learns only from unlabeled text in the "
        "cvt/word_dropout modes, i.e. from another domain's rare words: measured on 10%-label "
        "CoNLL-2003, the CVT model then tagged unknown dev words as entities (docs/results.md, section CVT).",
    )


@dataclass
class FeaturesConfig:
    """Word features from an xfer Transformer checkpoint (e.g. an ELECTRA discriminator)."""

    init: Input | None = knob(
        None,
        "Transformer to read features from: an earlier stage's output or a folder (xfer model dir or HF "
        "ELECTRA/BERT). Null: word embeddings + char-CNN only.",
        takes=("model",),
    )
    tokenizer: Input | None = knob(
        None,
        "WordPiece folder (vocab.txt / tokenizer.json); default: the one in `init`.",
        takes=("tokenizer", "model"),  # a model dir holds its tokenizer's files
    )
    layer: int = knob(-1, "Hidden layer to read (-1 = last, 0 = embeddings).")
    finetune: bool = knob(False, "Train the Transformer too (else frozen: eval mode, no gradient).")
    lr_scale: float = knob(
        0.01, "With finetune: the Transformer's gradients are scaled by this (SGD lr 0.5 is for the LSTM).", gt=0
    )
    combine: Literal["concat", "replace"] = knob(
        "concat", "concat: [word + char ; transformer] as BiLSTM input; replace: the transformer features alone."
    )
    joins: Literal["layer2", "input"] = knob(
        "layer2",
        "Where the features enter the BiLSTM. layer2: next to layer 1's outputs, as layer 2's input, so the "
        "auxiliary views (which read layer 1 only) keep their restricted view: a Transformer state attends to "
        "every word, so at the input even the 'future' view would see the word it predicts. input: next to "
        "the word + char input of layer 1 (every view sees the whole sentence); combine: replace needs it.",
    )
    max_length: int = knob(128, "Word pieces per Transformer input; longer sentences are split into windows.", ge=4)


DEFAULT_TRAIN = TrainConfig(
    steps=4000,
    batch_size=64,
    optimizer="sgd",
    lr=0.5,
    momentum=0.9,
    weight_decay=0.0,
    schedule="inverse_sqrt_t",
    clip_norm=1.0,
    ema_decay=0.998,
    eval_every=1000,
    checkpoint_every=500,
    log_every=50,
)


@dataclass
class CvtConfig:
    tasks: list[TaskRef] = knob(
        doc="Tasks sharing one encoder: tagging (conll/chunking, conll/ner, conll/ud-pos, ...), parsing "
        "(conll/ud-parse) and seq2seq (mt/parallel). More than one = multi-task."
    )
    mode: Literal["cvt", "supervised", "word_dropout"] = knob(
        "cvt",
        "cvt: alternate labeled and unlabeled minibatches, auxiliary views learn from the primary modules; "
        "supervised: labeled data only; word_dropout: the thesis baseline (the primary module learns from itself "
        "with 10% of the input words removed).",
    )
    unlabeled: UnlabeledConfig = knob(UnlabeledConfig(), "Unlabeled data (modes cvt and word_dropout).")
    labeled_fraction: float = knob(
        1.0, "Train on this fraction of each task's training set (random subset, see subset_seed).", gt=0, le=1
    )
    subset_seed: int | None = knob(
        0,
        "Seed of the labeled_fraction subset; fixed by default so all modes and trials see the same subset. "
        "Null: the trial's seed.",
        ge=0,  # numpy's generators take no negative seed: -1 was a bare ValueError when the stage started
    )
    task_weights: Literal["sqrt", "size", "uniform"] = knob(
        "sqrt", "Probability of a task for a labeled minibatch: proportional to sqrt(|D|) (thesis), |D|, or equal."
    )
    cvt_tasks: Literal["all", "one"] = knob(
        "all",
        "all: each unlabeled minibatch is labeled by the teacher for every task at once (thesis); one: for one "
        "task drawn like the labeled ones (the 'w/out all-labeled' ablation of Table 4.3).",
    )
    model: PresetName = knob("cpu", "Network size preset: tiny (tests), cpu, thesis (Table 4.1).")
    sizes: Annotated[dict[str, Any], KeysOf.of(SIZE_FIELDS, "size")] = knob(
        {}, "Overrides of preset sizes, e.g. {lstm1: 300, hidden: 150}."
    )
    lstm: Literal["auto", "packed", "padded"] = knob(
        "auto",
        "packed: PackedSequence LSTMs (cuDNN); padded: each direction runs on right-padded input, the backward "
        "one on sequences reversed within their lengths (the same result, 2-3x faster on CPU with oneDNN); "
        "auto: packed on CUDA, padded elsewhere.",
    )
    vocab: VocabConfig = knob(VocabConfig(), "Word and character vocabularies.")
    features: FeaturesConfig = knob(FeaturesConfig(), "Optional Transformer features as (extra) encoder input.")
    dropout: float = knob(0.5, "Dropout on labeled minibatches (thesis: keep 0.5).", ge=0, lt=1)
    unlabeled_dropout: float = knob(
        0.2, "Dropout of the students on unlabeled minibatches (thesis: keep 0.8).", ge=0, lt=1
    )
    word_dropout: float = knob(0.1, "mode word_dropout: probability of replacing a word by <removed>.", ge=0, lt=1)
    label_smoothing: float = knob(0.1, "Label smoothing on labeled tagging and translation targets.", ge=0, lt=1)
    parse_label_smoothing: float = knob(
        0.0, "Label smoothing on labeled parsing targets (original code: none).", ge=0, lt=1
    )
    teacher_label_smoothing: float = knob(
        0.1, "Label smoothing on the teacher's hard (beam search) targets for translation (thesis: 0.1).", ge=0, lt=1
    )
    teacher: Literal["separate", "shared"] = knob(
        "separate",
        "separate: the teacher runs its own encoder pass without dropout (no gradient) and the students one with "
        "dropout, as the original code; shared: one encoder pass without dropout serves the teacher and, with "
        "dropout applied to their inputs only, the students (cheaper; the embeddings see no dropout).",
    )
    tagging_views: list[TaggingView] = knob(
        ["fwd", "bwd", "future", "past", "full"], "Auxiliary modules of tagging tasks (ablations: drop some)."
    )
    parsing_views: list[ParsingView] = knob(
        ["fwd-fwd", "fwd-bwd", "bwd-fwd", "bwd-bwd", "full"], "Auxiliary modules of parsing tasks (head-dependent)."
    )
    seq2seq_views: list[Seq2seqView] = knob(
        ["attention_dropout", "future"],
        "Auxiliary decoders of seq2seq tasks (METHODS.md's two; `full`, opt-in: the whole source with the "
        "students' dropout, as thesis 4.3.1 gives every task).",
    )
    parse_decoding: Literal["argmax", "mst"] = knob(
        "argmax",
        "argmax: best (head, relation) per word, as the original code; mst: a well-formed tree with one root "
        "(Chu-Liu-Edmonds on the head marginals), then the best relation for each chosen arc.",
    )
    attention_dropout: float = knob(
        0.5,
        "Attention-dropout auxiliary decoder: dropout rate on its attention weights (not given in the thesis).",
        ge=0,
        lt=1,
    )
    beam_size: int = knob(4, "Beam search width for translation outputs (thesis: 10; smaller on CPU).", ge=1)
    teacher_beam_size: int | None = knob(
        None,
        "Beam width of the translation teacher on unlabeled sentences (default: beam_size). Its search runs on "
        "every unlabeled minibatch, so on CPU it dominates a CVT step.",
        ge=1,
    )
    length_penalty: float = knob(
        1.0, "Beam hypotheses are ranked by log-probability / length**this (0 = raw log-probability).", ge=0
    )
    max_target_length: int = knob(100, "Longest output of beam search (tokens).", ge=1)
    target_min_count: int = knob(
        6, "Target words seen fewer times in training become <unk> (thesis: 5 or fewer occurrences).", ge=1
    )
    ema_warmup: bool = knob(
        True,
        "EMA decay min(train.ema_decay, (1+t)/(10+t)) at step t, as tf.train.ExponentialMovingAverage(num_updates=t): "
        "the average is not dominated by the initial weights in short runs. The original code keeps the decay "
        "constant (its runs are 100x longer); false does the same.",
    )
    trials: int = knob(1, "Independent runs with seeds seed, seed+1, ...; the report gives mean/std/median.", ge=1)
    train: TrainConfig = knob(
        DEFAULT_TRAIN,
        "Optimisation (thesis: SGD momentum 0.9, lr 0.5/(1+0.005*sqrt(t)), clip 1.0, EMA 0.998, batch 64). "
        "steps counts labeled and unlabeled minibatches together.",
    )
    select: Literal["last", "best"] = knob(
        "last", "Weights to evaluate and keep: after the last step, or at the best dev evaluation."
    )
    predict: list[Literal["dev", "test"]] = knob(["dev"], "Splits to write prediction files for.")
    eval_batch_size: int = knob(128, "Sentences per batch for evaluation and prediction.", ge=1)

    def __post_init__(self) -> None:
        if not self.tasks:
            raise FieldError("tasks", "give at least one task")
        check_distinct_tasks(self.tasks, "one encoder, one module per task")
        check_task_keys([ref.key for ref in self.tasks])
        for name, value in self.sizes.items():
            if name in ("char_widths",):
                if not value or any(w < 1 for w in value):
                    raise FieldError(("sizes", name), f"must be a non-empty list of positive widths, got {value!r}")
            elif name == "projection":
                if value is not None and value < 1:
                    raise FieldError(("sizes", name), f"must be positive or null, got {value!r}")
            elif isinstance(value, int) and value < 1:
                raise FieldError(("sizes", name), f"must be positive, got {value!r}")
        sizes = {**PRESETS[self.model], **self.sizes}
        uses_words = self.features.init is None or self.features.combine == "concat"
        char_size = sizes["char_filters"] * len(sizes["char_widths"])
        if uses_words and sizes["char_combine"] == "sum" and sizes["word_dim"] != char_size:
            raise FieldError(
                "sizes",
                f"char_combine 'sum' adds word and char-CNN vectors: word_dim ({sizes['word_dim']}) must equal "
                f"char_filters x len(char_widths) ({sizes['char_filters']} x {len(sizes['char_widths'])}); "
                "change the sizes or use char_combine: concat",
            )
        if self.train.steps is None:
            raise FieldError(
                ("train", "steps"),
                "cvt.train counts training in steps, not epochs (its tasks, and in mode cvt the unlabeled text, are "
                "sampled without epochs): set train.steps",
            )
        for knob_name in ("eval_every", "checkpoint_every"):
            if getattr(self.train, knob_name) == "epoch":
                raise FieldError(("train", knob_name), "cvt.train has no epochs: give a number of steps")
        if self.select == "best" and self.train.eval_every is None:  # the last weights were kept without a word
            raise FieldError("select", "'best' picks the best dev evaluation, but train.eval_every is null (none run)")
        unlabeled_batch = self.unlabeled.batch_size
        if unlabeled_batch is not None and unlabeled_batch % self.train.grad_accum:  # was found by the stage
            raise FieldError(
                ("unlabeled", "batch_size"),
                f"{unlabeled_batch} is not a multiple of train.grad_accum {self.train.grad_accum} (each unlabeled "
                "minibatch is split into grad_accum micro-batches as the labeled ones are)",
            )
        for key in ("tagging_views", "parsing_views", "seq2seq_views"):
            views = getattr(self, key)
            if len(set(views)) != len(views):
                raise FieldError(key, f"a view is listed twice: {views}")

    def check_recipe(self) -> None:
        if self.features.init is None:  # the other features knobs would be silently ignored (as lambda_value)
            defaults = FeaturesConfig()
            given = [
                f.name
                for f in dataclasses.fields(FeaturesConfig)
                if getattr(self.features, f.name) != getattr(defaults, f.name)
            ]
            if given:
                raise FieldError(
                    ("features", given[0]),
                    "only used with features.init (the Transformer to read features from), which is null",
                )
        if self.features.init is not None and self.mode == "word_dropout":  # was found by the stage, after upstream
            raise FieldError(
                "mode",
                "word_dropout hides words from the input, but Transformer features (features.init) attend to every "
                "word: use mode cvt or supervised with features, or set features.init: null",
            )
        if self.features.init is not None and self.features.combine == "replace" and self.features.joins != "input":
            raise FieldError(
                ("features", "joins"),
                "combine: replace leaves layer 1 no word + char input: set joins: input (every view, the "
                "auxiliary ones included, then sees the Transformer's whole-sentence features)",
            )
        if self.features.init is not None and self.features.combine == "replace" and self.vocab.vectors is not None:
            # the stage read (and checked) the whole vectors file, then built no word embedding to put them in
            raise FieldError(
                ("vocab", "vectors"),
                "features.combine: replace gives the encoder no word embeddings, so the vectors would be read and "
                "never used: set vocab.vectors: null, or features.combine: concat",
            )
        if self.mode != "supervised" and self.unlabeled.files is None and not self.unlabeled.task_sentences:
            raise FieldError(
                ("unlabeled", "files"),
                f"mode {self.mode!r} trains on unlabeled data: set unlabeled.files or unlabeled.task_sentences "
                "(or mode: supervised)",
            )

    def check_task_infos(self, infos: Mapping[str, Any]) -> list[UserError]:
        """Before any stage runs: every task is one cvt.train trains, a parsing task states its
        relation set, and, in mode cvt, each task has auxiliary views of its type (an empty
        `tagging_views` crashed in the first step)."""
        problems = []
        for name, info in infos.items():
            views = {"tagging": "tagging_views", "parsing": "parsing_views", "seq2seq": "seq2seq_views"}.get(info.type)
            if views is None:
                problems.append(
                    UserError(f"cvt.train trains tagging, parsing and seq2seq tasks; {name} is a {info.type} task")
                )
                continue
            if info.type == "parsing" and not info.labels:  # allowed by the Task contract; was a KeyError in training
                problems.append(
                    UserError(
                        f"{name} is a parsing task without a relation set (its labels is empty): cvt.train's parser "
                        "predicts every arc's relation from the task's relation set, so it cannot train unlabelled "
                        "parsing; use a task that lists its relations in labels"
                    )
                )
            if self.mode == "cvt" and not getattr(self, views):
                problems.append(
                    UserError(
                        f"{name} is a {info.type} task and {views} is empty: mode 'cvt' needs at least one "
                        "auxiliary view of it (list some, or use mode: supervised)"
                    )
                )
        return problems

    def check_upstream(self, stages: Mapping[str, Any]) -> None:
        """Vectors from a cvt.vectors stage of this recipe must have word_dim components: a mismatch
        was found only once that stage had run and this one read its file. Likewise the features'
        Transformer (`check_features_stage`)."""
        self.check_features_stage(stages)
        ref = self.vocab.vectors
        upstream = stages.get(ref.stage) if ref is not None and ref.stage else None
        dim = getattr(upstream, "dim", None)
        word_dim = self.resolved_sizes()["word_dim"]
        if isinstance(dim, int) and dim != word_dim:
            raise FieldError(
                ("vocab", "vectors"),
                f"stage {ref.stage!r} writes {dim}-dimensional vectors, the word embeddings have word_dim "
                f"{word_dim} (model {self.model!r}, sizes): make them equal",
            )
        lowercase = getattr(upstream, "lowercase", None)
        if lowercase is True and not self.vocab.lowercase:  # cased keys never meet lower-cased vectors
            raise FieldError(
                ("vocab", "lowercase"),
                f"stage {ref.stage!r} writes vectors of lower-cased words, and vocab.lowercase is false: every "
                "capitalised word would start without its vector; make them equal",
            )

    def check_features_stage(self, stages: Mapping[str, Any]) -> None:
        """`features.layer` and `features.max_length` against the stage that pre-trains the
        features' Transformer (its preset with `encoder:` overrides; a stage that starts from its
        own `init:` is checked when this one starts): a layer it does not have, or more positions
        than it has, were found only after it had trained."""
        from xfer.transformer.presets import PRESETS as ENCODER_PRESETS
        from xfer.transformer.presets import preset_values

        ref = self.features.init
        upstream = stages.get(ref.stage) if ref is not None and ref.stage else None
        preset, overrides = getattr(upstream, "model", None), getattr(upstream, "encoder", None)
        if getattr(upstream, "init", None) is not None or preset not in ENCODER_PRESETS:
            return
        sizes = {**preset_values(preset), **(overrides if isinstance(overrides, Mapping) else {})}
        layers, positions = sizes.get("num_layers"), upstream_positions(upstream, sizes)
        if isinstance(layers, int) and not -layers - 1 <= self.features.layer <= layers:
            raise FieldError(
                ("features", "layer"),
                f"stage {ref.stage!r} trains a {layers}-layer Transformer: give a layer from 0 (embeddings) to "
                f"{layers} (or -1 to -{layers + 1})",
            )
        if isinstance(positions, int) and positions < self.features.max_length:
            raise FieldError(
                ("features", "max_length"),
                f"{self.features.max_length} is more than the {positions} positions of the encoder of stage "
                f"{ref.stage!r} (its encoder.max_position_embeddings, else its preset's and at least its max_length): "
                f"give at most {positions} (longer sentences are split into windows)",
            )

    def preflight(self) -> list[UserError]:
        """Files that exist before the run, so that their problems stop `xfer run` before an earlier
        stage trains (they were found when this stage started): the `features.init` and
        `features.tokenizer` folders, the unlabeled files and the `vocab.vectors` file
        (`xfer.cvt.checks`). What earlier stages write is checked when the stage starts."""
        from xfer.cvt.checks import features_problems, unlabeled_problems, vectors_problems

        problems = []
        if self.mode != "supervised" and self.unlabeled.files is not None:
            problems += unlabeled_problems(self.unlabeled.files, self.unlabeled.task_sentences)
        v = self.vocab.vectors
        if v is not None and not v.is_reference and v.path is not None:
            problems += vectors_problems(v.path, self.resolved_sizes()["word_dim"])
        f = self.features
        if f.init is not None and not f.init.is_reference and f.init.path is not None:
            tokenizer = f.tokenizer.path if f.tokenizer is not None and not f.tokenizer.is_reference else None
            problems += features_problems(f.init.path, tokenizer, f.max_length, f.layer)
        return problems

    def resolved_sizes(self) -> dict[str, Any]:
        """The preset's sizes with `sizes:` overrides applied."""
        return {**PRESETS[self.model], **self.sizes}

    def data_splits(self) -> list[tuple[TaskRef, tuple[str, ...]]]:
        """For the pre-flight data check: train and dev always, test when predictions for it are asked for."""
        splits = ("train", "dev", *(s for s in self.predict if s != "dev"))
        return [(ref, splits) for ref in self.tasks]


def upstream_positions(upstream: Any, sizes: Mapping[str, Any]) -> int | None:
    """The positions of the Transformer an upstream stage builds from a preset (`sizes`: the preset
    with its `encoder:` overrides): an `encoder.max_position_embeddings` override, else the preset's
    but at least the stage's `max_length` (what `electra.pretrain` builds). Only the override was
    read, so `features.max_length: 1024` on a default `electra.pretrain` (512 positions) passed
    validation and stopped this stage only after the pre-training had run."""
    overrides = getattr(upstream, "encoder", None)
    if isinstance(overrides, Mapping) and isinstance(overrides.get("max_position_embeddings"), int):
        return overrides["max_position_embeddings"]
    preset, length = sizes.get("max_position_embeddings"), getattr(upstream, "max_length", None)
    if not isinstance(preset, int):
        return None
    return max(preset, length) if isinstance(length, int) else preset

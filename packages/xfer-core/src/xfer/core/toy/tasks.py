"""The labelled toy tasks `toy/pos`, `toy/chunk` and `toy/agreement` (registered by `toy_plugin`).

Each split is drawn from its own random stream and a sentence may only land in the split its
text hashes to (`split_of`), so train/dev/test stay disjoint without the streams coordinating.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from xfer.core import metrics
from xfer.core.config import FieldError, knob
from xfer.core.errors import DataError
from xfer.core.tasks import Example, SentenceExample, Split, TaggingExample, Task, missing_predictions
from xfer.core.toy.grammar import CHUNK_TAGS, POS_TAGS, ToyGrammar, ToyGrammarConfig, ToySentence
from xfer.core.toy.rng import derive_rng

SPLITS: tuple[Split, ...] = ("train", "dev", "test")

_MAX_MISSES = 20_000
"""Draws in a row without a new sentence after which a split counts as exhausted (`_sources`)."""

_MIN_YIELD = 0.05
"""Fewest new sentences per draw, measured over windows of `_MAX_MISSES` draws, below which a
split counts as exhausted too (`_sources`). A streak alone is not enough: near exhaustion a rare
new sentence keeps resetting it, so a size just above what the grammar holds ran for hours."""

_SHARED_SENTENCES = 50_000
"""Most generated sentences kept for the whole process (`_generated`), oldest split dropped first
(the quickstart's tasks hold 8,000; a sentence takes about 1 KB)."""

# ---------------------------------------------------------------------------------------------
# Labelled tasks.
# ---------------------------------------------------------------------------------------------


@dataclass
class ToyTaskConfig:
    """Config shared by the toy tasks: one seed and the split sizes."""

    seed: int = knob(13, "Seed of the data; each split uses its own stream derived from it.")
    train_size: int = knob(2000, "Number of training examples.", ge=1)
    dev_size: int = knob(500, "Number of development examples.", ge=1)
    test_size: int = knob(500, "Number of test examples.", ge=0)
    max_words: int = knob(25, "Longest sentence in tokens, punctuation included.", ge=3)

    def __post_init__(self) -> None:
        # Built in Python a size may be 0 (a split left unused); the recipe's `ge` bounds are stricter.
        # A FieldError, like every config's own check, so the key is named wherever it is built.
        for name in ("train_size", "dev_size", "test_size"):
            if getattr(self, name) < 0:
                raise FieldError(name, f"must be at least 0, got {getattr(self, name)}")


def split_of(text: str) -> Split:
    """The one split a sentence may appear in, from a hash of its text (source text for the
    agreement task). This is what keeps train/dev/test disjoint without coordinating streams."""
    return SPLITS[hashlib.sha256(text.encode("utf-8")).digest()[0] % len(SPLITS)]


def _require_predictions(examples: Sequence[Example], predictions: Mapping[str, Any]) -> None:
    missing = missing_predictions(examples, predictions)
    if missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise ValueError(f"{len(missing)} example(s) have no prediction: {shown}")


class _ToyTask(Task):
    """Shared plumbing: config defaulting, split sizes, process-wide caching of generated splits."""

    _stream: ClassVar[str]

    def __init__(self, name: str, config: ToyTaskConfig | None = None):
        super().__init__(name, config if config is not None else ToyTaskConfig())
        self.grammar = ToyGrammar(ToyGrammarConfig(seed=self.config.seed, max_words=self.config.max_words))

    def toy_sentences(self, split: Split) -> list[ToySentence]:
        """The generated sentences behind `examples(split)`, in the same order (with metadata)."""
        if split not in SPLITS:
            raise DataError(f"<toy task {self.name}>", 0, f"no split {split!r}; expected one of {', '.join(SPLITS)}")
        return list(_generated(self, split))

    def _sources(self, split: Split) -> Iterator[ToySentence]:
        """Distinct grammatical sentences that belong to `split`, from the split's own stream.

        A small grammar (a low `max_words`) has only so many distinct sentences per split; asking
        for more would loop forever, so `_MAX_MISSES` draws in a row without a new sentence end
        the stream with an error naming the size. (About 3 in 10 draws are new while the grammar
        is far from exhausted, so valid sizes never get near the limit, and their output is the same.)
        The stream also ends when fewer than `_MIN_YIELD` of the last `_MAX_MISSES` draws were new:
        close to exhaustion the few sentences left are so rare that each resets the streak, and the
        error came only after hours (max_words=4 and train_size=100000).
        """
        rng = derive_rng(self.config.seed, self._stream, split)
        seen: set[str] = set()
        misses = 0
        window_draws = window_new = 0
        while True:
            sentence = self.grammar.sentence(rng)
            text = sentence.text
            window_draws += 1
            if text not in seen and split_of(text) == split and self._usable(sentence):
                seen.add(text)
                misses = 0
                window_new += 1
                yield sentence
            else:
                misses += 1
            if misses >= _MAX_MISSES or (window_draws >= _MAX_MISSES and window_new < _MIN_YIELD * window_draws):
                key = f"{split}_size"
                found = (
                    f"no new one after {len(seen)} in {_MAX_MISSES} draws"
                    if misses >= _MAX_MISSES
                    else f"only {window_new} new ones in its last {window_draws} draws ({len(seen)} in all)"
                )
                raise DataError(
                    f"<toy task {self.name}>",
                    0,
                    f"asks for {getattr(self.config, key)} distinct {split} sentences, but the grammar "
                    f"(max_words={self.config.max_words}) gave {found}; lower {key} or raise max_words",
                    key=key,
                )
            if window_draws >= _MAX_MISSES:
                window_draws = window_new = 0

    def _usable(self, sentence: ToySentence) -> bool:
        return True

    def _generate(self, split: Split, size: int) -> list[ToySentence]:
        sources = self._sources(split)
        return [next(sources) for _ in range(size)]

    @staticmethod
    def _id(split: str, index: int) -> str:
        return f"{split}-{index:06d}"


_cache: OrderedDict[tuple[Any, ...], tuple[ToySentence, ...]] = OrderedDict()
_cache_lock = threading.Lock()


def _generated(task: _ToyTask, split: Split) -> tuple[ToySentence, ...]:
    """`task`'s sentences of `split`, generated once per process. A recipe builds each task afresh
    in the preflight check and again in every stage that uses it (the quickstart: three times, ~1.7 s
    each), and generation is a pure function of the task's class, name, config and split, so later
    builds reuse the first one's sentences. A failed generation (an exhausted grammar) is not kept."""
    key: tuple[Any, ...] | None = (type(task), task.name, dataclasses.astuple(task.config), split)
    try:
        hash(key)
    except TypeError:  # a plugin's config subclass with a list field: generated, not shared
        key = None
    if key is not None:
        with _cache_lock:
            if key in _cache:
                _cache.move_to_end(key)
                return _cache[key]
    sentences = tuple(task._generate(split, getattr(task.config, f"{split}_size")))
    if key is not None:
        with _cache_lock:
            _cache[key] = sentences
            while sum(len(kept) for kept in _cache.values()) > _SHARED_SENTENCES and len(_cache) > 1:
                _cache.popitem(last=False)
    return sentences


class _ToyTaggingTask(_ToyTask):
    type = "tagging"
    _stream = "tagging"  # POS and chunking share sentences, like CoNLL-2000's WSJ sections

    def _tags(self, sentence: ToySentence) -> tuple[str, ...]:
        raise NotImplementedError

    def examples(self, split: Split) -> list[Example]:
        return [
            TaggingExample(self._id(split, i), s.words, self._tags(s)) for i, s in enumerate(self.toy_sentences(split))
        ]

    def _gold_and_predicted(
        self, examples: Sequence[Example], predictions: Mapping[str, Any]
    ) -> tuple[list[list[str]], list[list[str]]]:
        _require_predictions(examples, predictions)
        golds, preds = [], []
        for example in examples:
            if not isinstance(example, TaggingExample) or example.tags is None:
                raise ValueError(f"example {example.id} is not a labelled tagging example")
            predicted = [str(tag) for tag in predictions[example.id]]
            if len(predicted) != len(example.tags):
                raise ValueError(f"example {example.id}: {len(example.tags)} words but {len(predicted)} predicted tags")
            golds.append(list(example.tags))
            preds.append(predicted)
        return golds, preds


class ToyPosTask(_ToyTaggingTask):
    """Part-of-speech tagging of toy sentences; main metric: token accuracy (%)."""

    main_metric = "accuracy"

    @property
    def labels(self) -> tuple[str, ...]:
        return POS_TAGS

    def _tags(self, sentence: ToySentence) -> tuple[str, ...]:
        return sentence.pos

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        golds, preds = self._gold_and_predicted(examples, predictions)
        flat_gold = [tag for tags in golds for tag in tags]
        flat_pred = [tag for tags in preds for tag in tags]
        return {"accuracy": metrics.accuracy(flat_gold, flat_pred)}


class ToyChunkTask(_ToyTaggingTask):
    """Base-phrase chunking (BIO) of toy sentences; main metric: span F1 (%), conlleval-style."""

    main_metric = "f1"

    @property
    def labels(self) -> tuple[str, ...]:
        return CHUNK_TAGS

    def _tags(self, sentence: ToySentence) -> tuple[str, ...]:
        return sentence.chunks

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        golds, preds = self._gold_and_predicted(examples, predictions)
        scores = metrics.span_f1(golds, preds, scheme="BIO")
        flat = metrics.accuracy([t for g in golds for t in g], [t for p in preds for t in p])
        return {"f1": scores.f1, "precision": scores.precision, "recall": scores.recall, "accuracy": flat}


class ToyAgreementTask(_ToyTask):
    """Grammaticality of toy sentences: "1" grammatical, "0" one verb's agreement flipped.

    Classes are balanced exactly (shuffled). Every example comes from a distinct source sentence:
    a corrupted example's grammatical original is discarded, never used as a positive, so no
    minimal pair exists within or across splits (a model cannot solve the task by spotting the
    twin). Only sentences with at least one present-tense verb are drawn, for both classes;
    otherwise "only past-tense verbs" would give the label away.
    """

    type = "classification"
    main_metric = "accuracy"
    _stream = "agreement"

    @property
    def labels(self) -> tuple[str, ...]:
        return ("0", "1")

    def _usable(self, sentence: ToySentence) -> bool:
        return bool(sentence.agreements)

    def _generate(self, split: Split, size: int) -> list[ToySentence]:
        rng = derive_rng(self.config.seed, self._stream, split, "labels")
        grammatical = [True] * (size - size // 2) + [False] * (size // 2)
        rng.shuffle(grammatical)
        sources = self._sources(split)
        out = []
        for keep in grammatical:
            source = next(sources)
            corrupted = None if keep else self.grammar.corrupt(source, rng)
            out.append(source if corrupted is None else corrupted)
        return out

    def examples(self, split: Split) -> list[Example]:
        return [
            SentenceExample(self._id(split, i), s.text, label="1" if s.grammatical else "0")
            for i, s in enumerate(self.toy_sentences(split))
        ]

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        _require_predictions(examples, predictions)
        golds = [str(example.label) for example in examples if isinstance(example, SentenceExample)]
        if len(golds) != len(examples):
            raise ValueError("ToyAgreementTask.evaluate expects SentenceExample instances")
        preds = [str(predictions[example.id]) for example in examples]
        return {"accuracy": metrics.accuracy(golds, preds), "mcc": metrics.mcc(golds, preds)}

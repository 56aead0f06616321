"""Fine-tuning objectives: encoder + task head + loss, and the featurisation that feeds them.

A fine-tuning objective is a registered component (kind "objective") that the
`transformer.finetune` stage instantiates per task as

    objective = ObjectiveClass(encoder, task_info, tokenizer, max_length, config)

and uses through this small protocol (see `FinetuneObjective`):

    features = objective.featurize(examples)          # model inputs, >= 1 per example
    batch = objective.collate(features[:32])          # tensors
    loss, metrics = objective(batch)                  # training (StepOutput)
    outputs = objective.predict(batch)                # one output per feature
    predictions = objective.postprocess(examples, features, outputs)  # {example id: prediction}

Built-ins: `transformer.sequence` (classification and regression from [CLS]),
`transformer.tagging` (first sub-token of each word) and `transformer.span_qa` (start/end,
optional joint end and answerability). Third parties subclass one of them (e.g. to change the
loss: the sentence and tagging objectives' `loss(scores, gold)`, see `ScoredObjective`) or
`FinetuneObjective` itself, and register it with `xfer_objectives`.
"""

from __future__ import annotations

import unicodedata
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xfer.core.config import knob
from xfer.core.data import pad
from xfer.core.errors import PluginError, UserError
from xfer.core.tasks import Example, SpanQAExample, TaggingExample, TaskInfo
from xfer.core.trainer import StepOutput
from xfer.transformer.encoder import Encoder
from xfer.transformer.heads import (
    SequenceHead,
    SpanQAHead,
    SpanQAOutput,
    TokenHead,
    gather_first_subtokens,
    span_qa_loss,
)
from xfer.transformer.tokenization import WordPieceTokenizer


class FinetuneObjective(nn.Module):
    """Base class: holds `encoder` and `head`; subclasses implement the protocol methods."""

    task_types: ClassVar[tuple[str, ...]] = ()

    def __init__(self, encoder: Encoder, info: TaskInfo, tokenizer: WordPieceTokenizer, max_length: int, config: Any):
        super().__init__()
        if info.type not in self.task_types:
            raise UserError(
                f"objective {type(self).__name__} handles {', '.join(self.task_types)} tasks; {info.name} is a {info.type} task"
            )
        self.encoder, self.info, self.tokenizer, self.max_length, self.config = (
            encoder,
            info,
            tokenizer,
            max_length,
            config,
        )
        self.head: nn.Module

    def featurize(self, examples: Sequence[Example]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def collate(self, features: list[dict[str, Any]]) -> dict[str, Tensor]:
        raise NotImplementedError

    def predict(self, batch: dict[str, Tensor]) -> list[Any]:
        raise NotImplementedError

    def postprocess(
        self, examples: Sequence[Example], features: Sequence[dict[str, Any]], outputs: Sequence[Any]
    ) -> dict[str, Any]:
        """Default: one feature per example, in order."""
        return {f["id"]: out for f, out in zip(features, outputs, strict=True)}

    def hidden(self, batch: dict[str, Tensor]) -> Tensor:
        return self.encoder(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids")).last_hidden_state


class ScoredObjective(FinetuneObjective):
    """An objective whose training loss is `loss(scores(batch), gold)`: sentence and tagging tasks.

    `forward` goes through `loss`, so a subclass overriding `loss` (focal loss, class weights)
    changes what `transformer.finetune` trains, and BAM, which calls the same `loss` on the same
    scores, trains what fine-tuning trains. One `loss` for both: BAM tells an overridden loss
    from the built-in one by identity with `SequenceObjective.loss`."""

    def scores(self, batch: dict[str, Tensor]) -> Tensor:
        raise NotImplementedError

    def loss(self, scores: Tensor, labels: Tensor) -> Tensor:
        """The training loss of `scores` against the collated gold `labels`. Override to change it
        (see the xfer-example plugin's focal loss). Shapes, as `forward` and BAM pass them:

        - classification: logits [B, C] and label ids [B];
        - regression: outputs [B, 1] and targets [B] scaled to [0, 1] (mean squared error);
        - tagging: padded per-word logits [B, W, C] (W = the batch's most words in a window) and
          tag ids [B, W], -100 at padding words and at dev/test tags outside the training set
          (ignored, as `F.cross_entropy`'s `ignore_index`).

        The mean is over the positions that have a label, 0 when none has: a micro-batch of
        sentences without words (the task contract allows them) was a NaN loss, and the run
        stopped as "diverged" at its first step (BAM's loss is 0 there too).
        """
        if self.info.type == "regression":
            return F.mse_loss(scores.squeeze(-1), labels)
        gold = labels.flatten()
        total = F.cross_entropy(scores.flatten(0, -2), gold, ignore_index=-100, reduction="sum")
        return total / (gold != -100).sum().clamp_min(1)


def head_init_std(encoder: Encoder) -> float:
    """The std a task head's weights are drawn with: the encoder's `initializer_range`, as ELECTRA's
    task layers (`create_initializer(config.initializer_range)`) and HF's `_init_weights` use.

    Why: the heads took their own default 0.02 whatever the encoder said, so `encoder:
    {initializer_range: ...}` (or a checkpoint whose config has another) reached every encoder
    weight but not the new classifier, while the head's saved config and HF export named 0.02."""
    return float(encoder.config.initializer_range)


def in_fp32(head: Any, hidden: Tensor, *args: Any, **kwargs: Any) -> Any:
    """`head(hidden, *args, **kwargs)` in fp32, outside the trainer's bf16 autocast (`precision: auto`).

    bf16 rounds a [0, 1] regression output to steps of up to 1/256 (0.02 on STS-B's 0-5 scale),
    enough to make a little-trained model's predictions one constant and its Pearson/Spearman 0;
    close logits (tags, span starts and ends, labels) tie the same way. Task heads are a small
    matrix next to the encoder, so fp32 costs nothing measurable; every built-in head runs here."""
    with torch.autocast(hidden.device.type, enabled=False):
        return head(hidden.float(), *args, **kwargs)


def head_name(head: Any) -> str:
    """How messages name a task head: its class, and its registered kind when it has one."""
    kind = getattr(head, "kind", None)
    return f"{type(head).__name__} ({kind})" if isinstance(kind, str) else type(head).__name__


def check_head_output(
    objective: FinetuneObjective, got: Any, expected: tuple[int, ...], what: str, output: str = "output"
) -> None:
    """A PluginError naming the head, the task and both shapes when the head's `output` is not a
    tensor of shape `expected` (`what` says what the shape holds), else nothing.

    Why: a head (a plugin objective's own, or one from the head registry) with too few classes made
    the loss fail with torch's bare "IndexError: Target 3 is out of bounds", and one with too many
    trained silently: the extra logits were never supervised and predictions could name a class
    index with no label. The check is a shape comparison, so it runs on every batch at no
    measurable cost (a head assigned after construction, or one whose shape varies, is caught too)."""
    shape = tuple(got.shape) if isinstance(got, Tensor) else None
    if shape == expected:
        return
    shown = f"a tensor of shape {shape}" if shape is not None else f"a {type(got).__name__}"
    raise PluginError(
        f"{objective.info.name}: the head {head_name(objective.head)} of objective {type(objective).__name__} "
        f"returned {shown} as its {output}, but this {objective.info.type} task needs shape {expected} "
        f"({what}): build the head for the task's {_task_size(objective.info)}"
    )


def _task_size(info: TaskInfo) -> str:
    """The task dimension a head must match, for `check_head_output`'s advice."""
    if info.type == "regression":
        return "one regression output"
    if info.type == "span_qa":
        return "start and end logits (2 per token)"
    what = "tags" if info.type == "tagging" else "labels"
    return f"{len(info.labels)} {what} {list(info.labels)[:8]}{' ...' if len(info.labels) > 8 else ''}"


def _padded_inputs(features: list[dict[str, Any]], pad_id: int) -> dict[str, Tensor]:
    ids = pad([f["input_ids"] for f in features], pad_id)
    lengths = torch.tensor([len(f["input_ids"]) for f in features])
    mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()
    batch = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in features[0]:
        batch["token_type_ids"] = pad([f["token_type_ids"] for f in features], 0)
    return batch


# --- sentence classification and regression ----------------------------------------------------


@dataclass
class SequenceConfig:
    pooler: Literal["none", "tanh", "gelu"] = knob(
        "none", "none: original ELECTRA ([CLS] -> dropout -> linear); tanh: BERT pooler; gelu: HF ELECTRA head."
    )
    dropout: float = knob(0.1, "Dropout before the output layer.", ge=0, lt=1)


class SequenceObjective(ScoredObjective):
    """[CLS] -> head; cross-entropy for classification, MSE on targets scaled to [0, 1] for regression.

    Regression targets are scaled by the task's `score_range` (TaskInfo.extra, e.g. (0, 5) for
    STS-B) as in ELECTRA, and predictions are scaled back before evaluation.
    """

    task_types = ("classification", "regression")

    def __init__(
        self,
        encoder: Encoder,
        info: TaskInfo,
        tokenizer: WordPieceTokenizer,
        max_length: int,
        config: SequenceConfig | None,
    ):
        super().__init__(encoder, info, tokenizer, max_length, config or SequenceConfig())
        self.regression = info.type == "regression"
        if not self.regression and len(info.labels) < 2:  # the pre-flight says so too; stages may skip it
            from xfer.transformer.finetune_config import single_label_message

            raise UserError(single_label_message(info.name, tuple(info.labels)))
        outputs = 1 if self.regression else len(info.labels)
        self.head = SequenceHead(
            encoder.config.hidden_size,
            outputs,
            self.config.dropout,
            self.config.pooler,
            initializer_range=head_init_std(encoder),
        )
        low, high = info.extra.get("score_range", (0.0, 1.0)) if self.regression else (0.0, 1.0)
        self.low, self.span = float(low), float(high) - float(low)
        self.label_index = {label: i for i, label in enumerate(info.labels)}
        # pair or single texts, fixed by the first examples featurised (the training split; see _check_pairs)
        self.text_pairs: bool | None = None

    def _target(self, label: Any) -> float | int:
        if label is None:
            return -1
        if self.regression:
            return (float(label) - self.low) / self.span
        return self.label_index[label]

    def featurize(self, examples: Sequence[Example]) -> list[dict[str, Any]]:
        texts_a = [e.text_a for e in examples]  # type: ignore[union-attr]
        pairs = any(e.text_b is not None for e in examples)  # type: ignore[union-attr]
        self._check_pairs(examples, pairs)
        texts_b = [e.text_b or "" for e in examples] if pairs else None  # type: ignore[union-attr]
        if pairs and self.max_length < 3:  # the tokenizer's bare ValueError ended the stage on a traceback
            raise UserError(
                f"{self.info.name}: max_length={self.max_length} cannot hold a sentence pair's [CLS] and two [SEP] "
                "tokens, let alone its texts: set max_length to at least 3 (128 is the usual)"
            )
        encodings = self.tokenizer.encode_pairs(texts_a, texts_b, max_length=self.max_length)
        self._warn_truncated(examples, texts_a, texts_b, encodings)
        self._warn_out_of_range(examples)
        features = [
            {
                "id": e.id,
                "input_ids": enc.input_ids,
                "token_type_ids": enc.token_type_ids,
                "label": self._target(e.label),
            }  # type: ignore[union-attr]
            for e, enc in zip(examples, encodings, strict=True)
        ]
        if examples and self.text_pairs is None:  # an empty split decides nothing
            self.text_pairs = pairs
        return features

    def _check_pairs(self, examples: Sequence[Example], pairs: bool) -> None:
        """A UserError when `examples` are single texts and the examples first featurised without
        error (the training split: `transformer.finetune` and BAM featurise it first; `featurize`
        records it in `text_pairs`) were pairs, or the reverse.

        Why: pair or single is decided per call, from whether any example has a `text_b`; a
        dev/test split of a pair task whose reader left out the second text (text_b None), under a
        model trained on pairs, was encoded as single sentences (no [SEP] between the texts, token
        type 0 throughout), and predicted or scored without a word; a pair split under a model
        trained on single texts fed it a second segment it never saw. The task contract lets an
        example be either, but one task's model reads one of the two."""
        if not examples or self.text_pairs is None or pairs == self.text_pairs:
            return
        first = examples[0].id
        if self.text_pairs:
            raise UserError(
                f"{self.info.name}: the split whose first example is {first!r} ({len(examples)} examples) has no "
                "second text (text_b is None in every example), but the task's training examples are sentence "
                "pairs: the model would read them as single sentences. Give that split's file its second text "
                "column (or fix the task's reader), so it is encoded as the model was trained"
            )
        paired = next(e.id for e in examples if e.text_b is not None)  # type: ignore[union-attr]
        raise UserError(
            f"{self.info.name}: the split whose first example is {first!r} ({len(examples)} examples) has sentence "
            f"pairs (text_b given, first in {paired!r}), but the task's training examples are single texts: the "
            "model never saw a second segment. Use the same columns in every split of the task"
        )

    def _warn_out_of_range(self, examples: Sequence[Example]) -> None:
        """Warn (the stage's report shows it) how many regression scores lie outside the task's
        declared `score_range`.

        Why: targets are scaled by that range to [0, 1] (ELECTRA asserts every score is within it);
        a score outside it (a plugin declaring (0, 5) for 0-100 ratings) trained on targets far
        past 1 without a word, and predictions were scaled back by a range the data did not have."""
        if not self.regression or "score_range" not in self.info.extra:
            return
        low, high = (float(v) for v in self.info.extra["score_range"])
        scores = [(e.id, e.label) for e in examples if e.label is not None]  # type: ignore[union-attr]
        outside = [(ident, score) for ident, score in scores if not low <= float(score) <= high]
        if outside:
            warnings.warn(
                f"{self.info.name}: {len(outside)} of {len(examples)} examples have a score outside the task's "
                f"score_range ({low:g}, {high:g}), first {outside[0][0]!r} with {outside[0][1]!r} "
                "(targets are scaled by that range to [0, 1]): check the data or the task's score_range",
                stacklevel=3,
            )

    def _warn_truncated(
        self,
        examples: Sequence[Example],
        texts_a: list[str],
        texts_b: list[str] | None,
        encodings: Sequence[Any],
    ) -> None:
        """Warn (the stage's report shows it) how many examples were cut to `max_length` tokens.

        Why: a sentence (pair) longer than `max_length` lost its end without a word, so a
        `max_length` far below the data's lengths (32 on RTE, say) silently scored on a fraction
        of each text. Only encodings that fill `max_length` can have been cut; those alone are
        encoded again without a limit to tell a cut one from one that fits exactly."""
        full = [i for i, enc in enumerate(encodings) if len(enc.input_ids) >= self.max_length]
        if not full:
            return
        again = self.tokenizer.encode_pairs(
            [texts_a[i] for i in full],
            None if texts_b is None else [texts_b[i] for i in full],
            max_length=1 << 30,
        )
        lengths = {i: len(enc.input_ids) for i, enc in zip(full, again, strict=True)}
        cut = [i for i in full if lengths[i] > self.max_length]
        if cut:
            warnings.warn(
                f"{self.info.name}: {len(cut)} of {len(examples)} examples are longer than "
                f"max_length={self.max_length} tokens and were cut to it (the longest has "
                f"{max(lengths[i] for i in cut)} tokens; first {examples[cut[0]].id!r}); raise max_length "
                "to keep their whole text",
                stacklevel=2,
            )

    def collate(self, features: list[dict[str, Any]]) -> dict[str, Tensor]:
        batch = _padded_inputs(features, self.tokenizer.pad_id)
        dtype = torch.float32 if self.regression else torch.long
        batch["labels"] = torch.tensor([f["label"] for f in features], dtype=dtype)
        return batch

    def scores(self, batch: dict[str, Tensor]) -> Tensor:
        scores = in_fp32(self.head, self.hidden(batch))
        outputs = 1 if self.regression else len(self.info.labels)
        what = "one output per example" if self.regression else "one logit per label for each example"
        check_head_output(self, scores, (batch["input_ids"].shape[0], outputs), what)
        return scores.float()

    def forward(self, batch: dict[str, Tensor]) -> StepOutput:
        scores = self.scores(batch)
        loss = self.loss(scores, batch["labels"])
        if self.regression:
            return StepOutput(loss, {})
        return StepOutput(loss, {"accuracy": 100.0 * (scores.argmax(-1) == batch["labels"]).float().mean()})

    def predict(self, batch: dict[str, Tensor]) -> list[Any]:
        scores = self.scores(batch)
        if self.regression:
            return (scores.squeeze(-1) * self.span + self.low).tolist()
        return [self.info.labels[i] for i in scores.argmax(-1).tolist()]


# --- tagging ----------------------------------------------------------------------------------


@dataclass
class TaggingConfig:
    dropout: float = knob(0.1, "Dropout before the tag classifier.", ge=0, lt=1)


class TaggingObjective(ScoredObjective):
    """Tags each word from its first sub-token (BERT/ELECTRA). Sentences longer than
    `max_length` are split into windows of whole words; no word is dropped."""

    task_types = ("tagging",)

    def __init__(
        self,
        encoder: Encoder,
        info: TaskInfo,
        tokenizer: WordPieceTokenizer,
        max_length: int,
        config: TaggingConfig | None,
    ):
        super().__init__(encoder, info, tokenizer, max_length, config or TaggingConfig())
        self.head = TokenHead(
            encoder.config.hidden_size, len(info.labels), self.config.dropout, initializer_range=head_init_std(encoder)
        )
        self.tag_index = {tag: i for i, tag in enumerate(info.labels)}

    def featurize(self, examples: Sequence[Example]) -> list[dict[str, Any]]:
        if self.max_length < 3:  # the tokenizer's bare ValueError ended the stage on a traceback
            raise UserError(
                f"{self.info.name}: max_length={self.max_length} cannot hold [CLS], a word's first piece and "
                "[SEP]: set max_length to at least 3 (128 is the usual)"
            )
        features = []
        for position, example in enumerate(examples):
            assert isinstance(example, TaggingExample)
            for window in self.tokenizer.encode_words_windows(list(example.words), max_length=self.max_length):
                words = slice(window.first_word, window.first_word + window.num_words)
                # a dev/test tag outside the training tag set (check_examples warns of it; training
                # tags are checked to be within it) is ignored by the loss: evaluation, from the
                # examples' own gold tags, counts it as a miss
                tags = (
                    [self.tag_index.get(t, -100) for t in example.tags[words]]
                    if example.tags
                    else [-100] * window.num_words
                )
                features.append(
                    {
                        "id": example.id,
                        "example": position,
                        "input_ids": window.input_ids,
                        "word_starts": window.word_starts,
                        "tags": tags,
                    }
                )
        return features

    def collate(self, features: list[dict[str, Any]]) -> dict[str, Tensor]:
        batch = _padded_inputs(features, self.tokenizer.pad_id)
        batch["word_starts"] = pad([f["word_starts"] for f in features], 0)
        batch["word_mask"] = pad([[1] * len(f["word_starts"]) for f in features], 0)
        batch["tags"] = pad([f["tags"] for f in features], -100)
        return batch

    def scores(self, batch: dict[str, Tensor]) -> Tensor:
        words = gather_first_subtokens(self.hidden(batch), batch["word_starts"], batch["word_mask"])
        scores = in_fp32(self.head, words)
        expected = (*batch["word_starts"].shape, len(self.info.labels))
        check_head_output(self, scores, expected, "[sentences, words, tags]: one logit per tag for each word")
        return scores

    def forward(self, batch: dict[str, Tensor]) -> StepOutput:
        scores = self.scores(batch)
        loss = self.loss(scores, batch["tags"])  # a subclass's own loss, as BAM uses it
        real = batch["tags"] != -100
        accuracy = 100.0 * ((scores.argmax(-1) == batch["tags"]) & real).sum() / real.sum().clamp_min(1)
        return StepOutput(loss, {"accuracy": accuracy})

    def predict(self, batch: dict[str, Tensor]) -> list[Any]:
        best = self.scores(batch).argmax(-1).tolist()
        counts = batch["word_mask"].sum(-1).tolist()
        return [[self.info.labels[i] for i in row[:n]] for row, n in zip(best, counts, strict=True)]

    def postprocess(
        self, examples: Sequence[Example], features: Sequence[dict[str, Any]], outputs: Sequence[Any]
    ) -> dict[str, Any]:
        """Windows of one sentence are consecutive features: concatenate their tags."""
        tags: dict[str, list[str]] = defaultdict(list)
        for feature, out in zip(features, outputs, strict=True):
            tags[feature["id"]].extend(out)
        return dict(tags)


# --- extractive question answering -----------------------------------------------------------


@dataclass
class SpanQAConfig:
    # Bounds checked by `xfer validate`: a doc_stride < 1 failed with a bare ValueError only at
    # featurisation, after the stages before had run; a max_answer_length < 1 allowed no span,
    # so every prediction was "" and scored 0 without a word.
    doc_stride: int = knob(128, "Step between the starts of context windows (tokens).", ge=1)
    max_query_length: int = knob(64, "Questions are cut to this many tokens.", ge=0)
    max_answer_length: int = knob(30, "Longest answer span in tokens.", ge=1)
    joint_end: bool = knob(False, "Predict the end conditioned on the start (original ELECTRA SQuAD head).")
    answerable: bool = knob(
        False, "Answerability classifier on [CLS] for SQuAD 2.0 (else the null span score decides)."
    )
    answerable_weight: float = knob(0.5, "Weight of the answerability loss.", ge=0)
    null_threshold: float = knob(
        0.0,
        "Predict no answer when null score - best span score (with `answerable`: the answerability logit) exceeds "
        "this (SQuAD 2.0). 0 is run_squad's; ELECTRA's SQuAD 2.0 setup (joint_end, answerable) used -2.75.",
    )


def _past_marks(context: str, end: int) -> int:
    """`end` moved past the combining marks (Unicode Mn, Me) that follow it in `context`.

    An uncased tokenizer strips accents, and a stripped mark belongs to no token's offsets: a span
    ending on "भगवान्" (final virama), NFD "maté" or a Thai word with a final tone mark was cut to
    "भगवान", "mate", ..., a different word for the official EM/F1 (BERT's run_squad answers with
    the whole original word there). A mark never starts a word, so it always belongs to the span.
    Format characters (Cf: soft hyphen, ZWSP, ZWJ, LRM) are dropped by the tokenizer the same way,
    so "mat" + soft hyphen came back as "mat"; they are skipped too, as run_squad keeps them."""
    while end < len(context) and unicodedata.category(context[end]) in ("Mn", "Me", "Cf"):
        end += 1
    return end


class SpanQAPredictions(dict[str, str]):
    """Span-QA predictions `{question id: answer text}` ("" = no answer), as `Task.evaluate` and
    `write_predictions` take them, plus what the official SQuAD 2.0 script needs to search the
    no-answer threshold itself (`--na-prob-file`), as ELECTRA's qa_metrics.py writes them:

    - `best_non_null`: every question's best span text, never replaced by "" (it is "" only when
      no window has a context token, e.g. an empty context);
    - `null_odds`: the score compared with `null_threshold` (null score - best span score, or the
      answerability logit), so `answer == ""` exactly when `null_odds > null_threshold` or there
      is no span at all (odds +inf).

    Both are None when the task has no unanswerable questions. A dict subclass, so consumers that
    know nothing of the extras (metrics, other tasks) see the plain mapping; the SQuAD task reads
    them by name. Why: the prediction file alone holds our threshold's "" answers, on which the
    official best-threshold search gives wrong numbers."""

    def __init__(
        self,
        answers: Mapping[str, str],
        best_non_null: Mapping[str, str] | None = None,
        null_odds: Mapping[str, float] | None = None,
    ):
        super().__init__(answers)
        self.best_non_null = None if best_non_null is None else dict(best_non_null)
        self.null_odds = None if null_odds is None else dict(null_odds)


SPAN_QA_MIN_LENGTH = 4
"""The shortest `max_length` a span-QA window fits in: [CLS] [SEP] one context token [SEP] (an empty question)."""


class SpanQAObjective(FinetuneObjective):
    """Start/end span prediction over context windows; answers are mapped back through offsets."""

    task_types = ("span_qa",)

    def __init__(
        self,
        encoder: Encoder,
        info: TaskInfo,
        tokenizer: WordPieceTokenizer,
        max_length: int,
        config: SpanQAConfig | None,
    ):
        super().__init__(encoder, info, tokenizer, max_length, config or SpanQAConfig())
        self.head = SpanQAHead(
            encoder.config.hidden_size,
            joint_end=self.config.joint_end,
            answerable=self.config.answerable,
            initializer_range=head_init_std(encoder),
        )
        # "" answers only for tasks with unanswerable questions (SQuAD 2.0), as ELECTRA's qa_metrics:
        # with `answerable` on SQuAD 1.1 (ELECTRA trains its classifier there too) the classifier's
        # logit also said "no answer", and every such "" scored 0 on a question that has an answer.
        self.with_null = bool(info.extra.get("unanswerable", False))

    def featurize(self, examples: Sequence[Example]) -> list[dict[str, Any]]:
        self._check_question_lengths(examples)
        features = []
        unmapped: list[str] = []
        for position, example in enumerate(examples):
            assert isinstance(example, SpanQAExample)
            answer = None
            if example.answers and not example.is_impossible:
                first = example.answers[0]
                answer = (first.start, first.start + len(first.text))
            windows = self.tokenizer.encode_qa(
                example.question,
                example.context,
                answer=answer,
                example_index=position,
                max_length=self.max_length,
                doc_stride=self.config.doc_stride,
                max_query_length=self.config.max_query_length,
            )
            # An answer made only of characters the tokenizer drops ("\u200b") covers no token:
            # it was trained as "no answer" without a word. run_squad skips such a question
            # ("Could not find answer"); here its windows stay (dev/test predict it) but are left
            # out of the training loss (`labelled` 0), with a warning that counts them.
            labelled = answer is None or any(
                o is not None and o[0] < answer[1] and o[1] > answer[0] for w in windows for o in w.offsets
            )
            if not labelled:
                unmapped.append(example.id)
            for f in windows:
                # Context tokens, plus [CLS] always: windows without the answer (SQuAD 1.1 too, as in
                # ELECTRA's code) and unanswerable questions point start and end at [CLS] (index 0),
                # so it must never be masked, or their loss is ~1e4. Decoding uses `start_ok`, which
                # excludes [CLS]: a SQuAD 1.1 prediction is always a context span.
                allowed = [1 if (o is not None) else 0 for o in f.offsets]
                allowed[0] = 1
                start_ok = [
                    1 if (o is not None and m) else 0 for o, m in zip(f.offsets, f.token_is_max_context, strict=True)
                ]
                features.append(
                    {
                        "id": example.id,
                        "example": position,
                        "input_ids": f.input_ids,
                        "token_type_ids": f.token_type_ids,
                        "offsets": f.offsets,
                        "allowed": allowed,
                        "start_ok": start_ok,
                        "start": f.start_position if f.start_position is not None else 0,
                        "end": f.end_position if f.end_position is not None else 0,
                        # the question's own label in every window, as ELECTRA's qa_tasks.py
                        # (`_is_impossible` = example.is_impossible): a window that merely misses
                        # the answer was trained to say "unanswerable" (on SQuAD 1.1 too), so the
                        # classifier learnt window coverage, not answerability
                        "impossible": int(example.is_impossible),
                        "labelled": int(labelled),
                    }
                )
        if unmapped:
            warnings.warn(
                f"{self.info.name}: {len(unmapped)} question(s) have an answer that covers no token (only "
                f"characters the tokenizer drops), first {unmapped[0]!r}; they are left out of the training loss "
                "(run_squad skips them) and still predicted and scored on dev/test",
                stacklevel=2,
            )
        return features

    def _check_question_lengths(self, examples: Sequence[Example]) -> None:
        """A UserError naming the question and the knobs when a question (cut to
        `max_query_length` tokens) leaves no room for a context token in `max_length`: the
        tokenizer's bare ValueError ended the stage with a traceback. Questions are tokenised
        here only when `max_query_length` allows such a question at all (not with the defaults)."""
        longest = self.max_length - SPAN_QA_MIN_LENGTH  # [CLS] question [SEP] context (>= 1 token) [SEP]
        if longest < 0:  # no question fits, not even an empty one: "max_query_length to at most -1" was the advice
            raise UserError(
                f"{self.info.name}: max_length={self.max_length} cannot hold a question window's [CLS], [SEP], a "
                f"context token and [SEP]: set max_length to at least {SPAN_QA_MIN_LENGTH} (384 is SQuAD's usual)"
            )
        if self.config.max_query_length <= longest:
            return
        for example in examples:
            assert isinstance(example, SpanQAExample)
            tokens = min(len(self.tokenizer.tokenize(example.question)), self.config.max_query_length)
            if tokens > longest:
                raise UserError(
                    f"{self.info.name}: question {example.id!r} has {tokens} tokens (after the cut to "
                    f"max_query_length={self.config.max_query_length}), which leaves no room for its context "
                    f"in max_length={self.max_length}: set the objective's max_query_length to at most {longest} "
                    "or raise max_length"
                )

    def collate(self, features: list[dict[str, Any]]) -> dict[str, Tensor]:
        batch = _padded_inputs(features, self.tokenizer.pad_id)
        batch["allowed"] = pad([f["allowed"] for f in features], 0).bool()
        batch["start_ok"] = pad([f["start_ok"] for f in features], 0).bool()
        for key in ("start", "end", "impossible"):
            batch[key] = torch.tensor([f[key] for f in features])
        batch["labelled"] = torch.tensor([f.get("labelled", 1) for f in features]).bool()
        return batch

    def forward(self, batch: dict[str, Tensor]) -> StepOutput:
        keep = batch.get("labelled")
        if keep is not None and not bool(keep.all()):  # questions whose answer covers no token
            if not bool(keep.any()):
                return StepOutput(sum(p.sum() for p in self.head.parameters()) * 0.0, {})
            batch = {key: value[keep] for key, value in batch.items()}
        out = self._checked(in_fp32(self.head, self.hidden(batch), batch["allowed"], batch["start"]), batch)
        impossible = batch["impossible"] if self.config.answerable else None
        loss = span_qa_loss(
            out, batch["start"], batch["end"], batch["allowed"], impossible, self.config.answerable_weight
        )
        return StepOutput(loss, {})

    def _checked(self, out: Any, batch: dict[str, Tensor]) -> SpanQAOutput:
        """The head's output `out`, after checking it is a `SpanQAOutput` with start and end logits
        [windows, tokens] and, when present (required with `answerable`), no-answer logits [windows]
        (see `check_head_output`: a head of another shape failed deep in the loss or decoding)."""
        if not all(hasattr(out, name) for name in ("start_logits", "end_logits", "na_logit")):
            raise PluginError(
                f"{self.info.name}: the head {head_name(self.head)} of objective {type(self).__name__} returned "
                f"a {type(out).__name__}, but this span_qa task needs a SpanQAOutput (start_logits and end_logits of "
                f"shape {tuple(batch['input_ids'].shape)}: 2 logits per token, and na_logit or None)"
            )
        tokens = "one logit per token of each window"
        check_head_output(self, out.start_logits, tuple(batch["input_ids"].shape), tokens, output="start_logits")
        check_head_output(self, out.end_logits, tuple(batch["input_ids"].shape), tokens, output="end_logits")
        if out.na_logit is not None or self.config.answerable:
            check_head_output(self, out.na_logit, (batch["input_ids"].shape[0],), "one per window", output="na_logit")
        return out

    def predict(self, batch: dict[str, Tensor]) -> list[Any]:
        """Per window: best (start, end) among context tokens, its score (comparable across
        windows, as in Google's run_squad: the raw start + end logits; with `joint_end`, as in
        ELECTRA's code, log p(start) + log p(end | start) from the beam search) and, with null
        answers, the null score: the answerability logit, or the window's null-span score, its
        ([CLS], [CLS]) logits (with `joint_end`, the [CLS] start logit alone: ELECTRA's end logits
        are zero at prediction time). The latter is compared with the best span of all windows in
        `postprocess`, not with this window's own.

        With `joint_end` the head's own end logits are conditioned on the argmax start, often
        [CLS]; scoring the decoded span with them compared windows by an end that was not the
        decoded span's (a wrong window could win)."""
        hidden = self.hidden(batch)
        out = self._checked(in_fp32(self.head, hidden, batch["allowed"]), batch)  # before decode, which uses it
        start, end, joint_score = in_fp32(
            self.head.decode, hidden, batch["allowed"], self.config.max_answer_length, starts=batch["start_ok"]
        )
        for name, value in (("start", start), ("end", end), ("score", joint_score)):
            check_head_output(self, value, (hidden.shape[0],), "one per window", output=f"decode() {name}")
        rows = torch.arange(start.shape[0], device=start.device)
        if self.config.joint_end:
            span = joint_score.float()
        else:
            span = (out.start_logits[rows, start] + out.end_logits[rows, end]).float()
        # A window without a context token (empty context) has no span: its positions are [CLS]'s.
        # The joint beam's argmax over nothing but -inf scores named a padding position of the
        # batch, past the window's offsets, and `postprocess` crashed (IndexError) after training.
        valid = batch["start_ok"].any(-1) & span.isfinite()
        span = span.masked_fill(~valid, float("-inf"))
        start, end = start.masked_fill(~valid, 0), end.masked_fill(~valid, 0)
        null: Tensor | None = None
        if out.na_logit is not None:
            null = out.na_logit.float()
        elif self.with_null:
            null = out.start_logits[:, 0].float()
            if not self.config.joint_end:
                null = null + out.end_logits[:, 0].float()
        return [
            (int(start[i]), int(end[i]), float(span[i]), None if null is None else float(null[i]))
            for i in range(start.shape[0])
        ]

    def postprocess(
        self, examples: Sequence[Example], features: Sequence[dict[str, Any]], outputs: Sequence[Any]
    ) -> dict[str, Any]:
        """Best span over an example's windows (by score); SQuAD 2.0: "" when the null score wins.

        Without an answerability head the null score is run_squad's: the lowest null-span score of
        the example's windows minus the best span score of all its windows. The minimum of each
        window's own difference said "no answer" when a window whose spans all scored low had a
        null score far below another window's answer.

        Returns a `SpanQAPredictions`: with null answers it also holds every question's best
        non-null answer and its null odds (the SQuAD task writes them for the official script)."""
        best: dict[str, tuple[float, str]] = {}
        null: dict[str, float] = {}
        for feature, (start, end, score, null_score) in zip(features, outputs, strict=True):
            example = examples[feature["example"]]
            assert isinstance(example, SpanQAExample)
            offsets = feature["offsets"]
            if score > float("-inf") and offsets[start] is not None and offsets[end] is not None:
                text = example.context[offsets[start][0] : _past_marks(example.context, offsets[end][1])]
                if feature["id"] not in best or score > best[feature["id"]][0]:
                    best[feature["id"]] = (score, text)
            if null_score is not None and self.with_null:
                null[feature["id"]] = min(null.get(feature["id"], float("inf")), null_score)
        predictions: dict[str, str] = {}
        non_null: dict[str, str] = {}
        odds: dict[str, float] = {}
        for example in examples:
            score, text = best.get(example.id, (float("-inf"), ""))
            non_null[example.id] = text
            null_score = null.get(example.id)
            if null_score is not None:
                if not self.config.answerable:
                    null_score -= score  # +inf without any valid span: "" either way
                elif score == float("-inf"):
                    null_score = float("inf")  # no span to answer with, whatever the classifier says
                odds[example.id] = null_score
            if null_score is not None and null_score > self.config.null_threshold:
                text = ""
            predictions[example.id] = text
        if not odds:
            return SpanQAPredictions(predictions)
        return SpanQAPredictions(predictions, non_null, odds)


DEFAULT_OBJECTIVES: Mapping[str, str] = {
    "classification": "transformer.sequence",
    "regression": "transformer.sequence",
    "tagging": "transformer.tagging",
    "span_qa": "transformer.span_qa",
}

"""GLUE task components (glue/cola ... glue/wnli) and the recipe-defined glue/tsv task.

Metric conventions (see README): every metric is x100; main metrics follow the ELECTRA paper
(MCC for CoLA, Spearman for STS-B, accuracy for every other task, MRPC and QQP included;
their F1 and the accuracy/F1 mean are reported next to it). STS-B examples keep the raw 0-5
score; correlations are scale-invariant, so a consumer may train on score/5.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from xfer.core.atomic import atomic_write_text, fsync_dir
from xfer.core.errors import DataError, UserError
from xfer.core.tasks import Example, SentenceExample, Split, Task, TaskInfo, check_prediction_ids
from xfer.tasks.glue import scoring
from xfer.tasks.glue.benchmark import AX_SPEC, GLUE_SPECS, GlueSpec
from xfer.tasks.glue.config import GlueTaskConfig, MnliTaskConfig, TsvTaskConfig
from xfer.tasks.glue.readers import TableLayout, keep_examples, read_sentence_examples

SPLITS = ("train", "dev", "test")


def _check_split(task: str, split: str) -> None:
    if split not in SPLITS:
        raise UserError(f"{task}: unknown split {split!r} (expected one of {', '.join(SPLITS)})")


def _index_of(example_id: str) -> str:
    """Ids are `<split>-<index>`; the GLUE submission wants the index part."""
    return example_id.split("-", 1)[1]


class GlueTask(Task):
    """A GLUE task read from GLUE's own .tsv files (or the Hub copy when asked)."""

    spec: ClassVar[GlueSpec]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each subclass only names its spec; type and main metric follow from it."""
        super().__init_subclass__(**kwargs)
        cls.type = cls.spec.type
        cls.main_metric = cls.spec.main_metric

    def __init__(self, name: str, config: GlueTaskConfig | None = None):
        super().__init__(name, config if config is not None else GlueTaskConfig())
        self._cache: dict[str, list[SentenceExample]] = {}
        self._rows: dict[str, int] = {}  # examples of each split before `max_examples`

    @property
    def labels(self) -> tuple[str, ...]:
        return self.spec.labels

    def info(self) -> TaskInfo:
        info = super().info()
        info.extra.update(submission_file=self.spec.submission)
        if self.spec.score_range is not None:
            info.extra["score_range"] = self.spec.score_range
        return info

    def split_path(self, split: Split) -> Path:
        """The local file of `split` (it may not exist: GLUE test files are optional)."""
        cfg: GlueTaskConfig = self.config
        if cfg.data_dir is None:
            raise UserError(
                f"{self.name}: data_dir is not set; point it at the task's GLUE folder "
                f"(e.g. glue/{self.spec.folder}) or use source: hub"
            )
        return Path(cfg.data_dir) / self.spec.files[split]

    def examples(self, split: Split) -> list[Example]:
        _check_split(self.name, split)
        if split not in self._cache:
            self._cache[split] = self._load(split)
        return list(self._cache[split])

    def check_data(self, splits: Sequence[Split]) -> list[UserError]:
        """Pre-flight: local files are read; a hub task reads the `datasets` cache only (never the
        network), so a cached copy without a split, with another layout or class order, or with
        duplicate ids is reported before earlier stages train, as a bad TSV file is. A split that is
        not cached is left to the run's download, unless the user is offline (then it never will be).
        What was read stays in the task's cache: the stage does not read it again."""
        if self.config.source != "hub":
            return super().check_data(splits)
        try:
            from xfer.tasks.glue.hub import HubNotAvailableError, cache_only

            with cache_only() as was_offline:
                problems = super().check_data(splits)
        except ImportError:
            return super().check_data(splits)  # no `datasets`: the reader's own "needs datasets" error
        return [p for p in problems if was_offline or not isinstance(p, HubNotAvailableError)]

    def _load(self, split: Split) -> list[SentenceExample]:
        cfg: GlueTaskConfig = self.config
        examples = self._read(split)  # every row, validated; `max_examples` cuts below
        self._rows[split] = len(examples)
        return keep_examples(examples, cfg.max_examples, cfg.subsample, cfg.subsample_seed)

    def _read(self, split: Split) -> list[SentenceExample]:
        if self.config.source == "hub":
            from xfer.tasks.glue.hub import load_hub_split

            return load_hub_split(self.spec, split, self.name)
        path = self.split_path(split)
        if not path.is_file():
            raise DataError(
                path, 0, f"the {split} split of {self.name} is missing (no such file){self._root_hint(split)}"
            )
        return self._read_file(path, split, self.spec)

    def _root_hint(self, split: Split) -> str:
        """What to set when `data_dir` is the GLUE root (`glue_data/`, holding `RTE/`, `MNLI/`, ...)
        rather than the task's folder: the commonest slip, which "no such file" alone does not name."""
        folder = Path(self.config.data_dir) / self.spec.folder
        if (folder / self.spec.files[split]).is_file():
            return f"; data_dir looks like the GLUE root: set data_dir to the task's folder, {folder}"
        return ""

    def _read_file(self, path: Path, split: str, spec: GlueSpec) -> list[SentenceExample]:
        return read_sentence_examples(
            path,
            split,
            spec.test_layout if split in ("test", AX_SPEC.key) else spec.layout,
            labels=spec.labels,
            regression=spec.type == "regression",
            regression_bounds=spec.score_range,
        )

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        labels = None if self.spec.type == "regression" else self.spec.labels
        golds, preds = scoring.gather(self.name, examples, predictions, labels=labels)
        return scoring.compute(self.spec.metrics, golds, preds, positive="1")

    def write_predictions(
        self, directory: Path, split: Split, examples: Sequence[Example], predictions: Mapping[str, Any]
    ) -> Path:
        """Write GLUE's submission format: header `index<TAB>prediction`, one row per example.

        The test file is `directory/<CoLA.tsv|MNLI-m.tsv|...>`, the name the GLUE server expects
        in the submission zip (only for the whole test split: one cut by `max_examples` goes to
        `directory/test.tsv`); other splits go to `directory/<split>.tsv`. Rows follow `examples`
        (file order); the index is the one of the example id: the file's index column (`id` for
        QQP), or the 0-based row number for files without one (CoLA and MRPC train/dev).
        Classification predictions are the label strings; STS-B scores are clipped to [0, 5] and
        written with 3 decimals.

        Why so strict: the server expects every test example exactly once with a valid label,
        so a missing prediction, one for an id that is not among `examples` (another split's),
        or a value the scorer refuses (`nan`, a class id) is a ValueError and nothing is
        written. The file is replaced atomically: an interrupted write never leaves half a
        submission in place of a good one.
        """
        # A test split cut by `max_examples` is no submission (the server wants every row): it goes
        # to `test.tsv`, so a quick run never leaves a `CoLA.tsv` that looks like one.
        whole = split == "test" and len(examples) >= self._rows.get("test", 0)
        check_prediction_ids(self.name, examples, predictions)
        path = directory / (self.spec.submission if whole else f"{split}.tsv")
        return _write(path, self._submission_text(examples, predictions))

    def _submission_text(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> str:
        """`index<TAB>prediction` rows for `examples`; a value the scorer refuses is a ValueError."""
        labels = None if self.spec.type == "regression" else self.spec.labels
        low, high = self.spec.score_range or (float("-inf"), float("inf"))
        lines = ["index\tprediction"]
        for example in examples:
            value = scoring.checked_prediction(self.name, example.id, predictions[example.id], labels)
            text = value if labels is not None else f"{min(max(value, low), high):.3f}"
            lines.append(f"{_index_of(example.id)}\t{text}")
        return "\n".join(lines) + "\n"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return path


class CoLATask(GlueTask):
    """GLUE CoLA: grammatical acceptability ("1" = acceptable); main metric MCC (x100)."""

    spec = GLUE_SPECS["cola"]


class SST2Task(GlueTask):
    """GLUE SST-2: binary sentiment ("1" = positive); accuracy."""

    spec = GLUE_SPECS["sst2"]


class MRPCTask(GlueTask):
    """GLUE MRPC: paraphrase ("1" = equivalent); accuracy, F1 of "1" and their mean."""

    spec = GLUE_SPECS["mrpc"]


class STSBTask(GlueTask):
    """GLUE STS-B: similarity score in [0, 5] (regression); Spearman, Pearson and their mean."""

    spec = GLUE_SPECS["stsb"]


class QQPTask(GlueTask):
    """GLUE QQP: duplicate questions ("1" = duplicate); accuracy, F1 of "1" and their mean."""

    spec = GLUE_SPECS["qqp"]


class MNLITask(GlueTask):
    """GLUE MNLI, matched dev/test (dev_matched.tsv, test_matched.tsv); accuracy.

    With `diagnostic: true` the test split also holds GLUE's diagnostic set (AX, ids `ax-<index>`),
    which a GLUE submission predicts with the MNLI model: one fine-tuning, both files.
    """

    spec = GLUE_SPECS["mnli"]

    def __init__(self, name: str, config: MnliTaskConfig | None = None):
        super().__init__(name, config if config is not None else MnliTaskConfig())

    def diagnostic_path(self) -> Path:
        cfg: MnliTaskConfig = self.config
        if cfg.diagnostic_file is not None:
            return Path(cfg.diagnostic_file)
        return self.split_path("test").parent.parent / "diagnostic" / AX_SPEC.files["test"]

    def _load(self, split: Split) -> list[SentenceExample]:
        """As every GLUE task's, plus AX in the test split with `diagnostic: true`: `max_examples`
        keeps N of MNLI's and N of AX's (cut together, AX, after MNLI's rows, was left out of every
        quick run, so its file was never tried before the full one)."""
        cfg: MnliTaskConfig = self.config
        if split != "test" or not getattr(cfg, "diagnostic", False):
            return super()._load(split)
        mnli, diagnostic = self._read(split), self._read_diagnostic()
        self._rows[split] = len(mnli) + len(diagnostic)
        return [
            *keep_examples(mnli, cfg.max_examples, cfg.subsample, cfg.subsample_seed),
            *keep_examples(diagnostic, cfg.max_examples, cfg.subsample, cfg.subsample_seed),
        ]

    def _read_diagnostic(self) -> list[SentenceExample]:
        if self.config.source == "hub":
            from xfer.tasks.glue.hub import load_hub_split

            return load_hub_split(AX_SPEC, "test", self.name, id_prefix=AX_SPEC.key)
        path = self.diagnostic_path()
        if not path.is_file():
            raise DataError(
                path, 0, f"{self.name}: the diagnostic set (AX) is missing (no such file; set diagnostic_file)"
            )
        return self._read_file(path, AX_SPEC.key, AX_SPEC)

    def write_predictions(
        self, directory: Path, split: Split, examples: Sequence[Example], predictions: Mapping[str, Any]
    ) -> Path:
        """MNLI's file as every GLUE task's; the diagnostic examples among the test split's go to
        `AX.tsv` beside it (`ax.tsv` when `max_examples` cut the split: no submission file then).

        The pair is published in one order: MNLI's file is removed first and written last, so it
        marks a complete pair. Written one after the other over an older run's pair, a kill between
        the two writes left the new model's AX.tsv beside the old model's MNLI-m.tsv, a mismatched
        submission that looked complete; now that kill leaves MNLI-m.tsv missing, which the GLUE
        server (and any packer) refuses, and the re-run writes both."""
        diagnostic = [e for e in examples if e.id.startswith(f"{AX_SPEC.key}-")]
        if split != "test" or not diagnostic:
            if split == "test":
                # An AX file beside it is an older model's (`diagnostic` was on then): left in place it
                # made a pair with the new MNLI-m.tsv that looked like one complete submission. Removed
                # after the checks (bad predictions leave the old pair intact) and before the write (a
                # kill in between leaves no mismatched pair either).
                check_prediction_ids(self.name, examples, predictions)
                self._submission_text(examples, predictions)
                whole = len(examples) >= self._rows.get("test", 0)
                stale = directory / (AX_SPEC.submission if whole else "ax.tsv")
                if stale.exists():
                    stale.unlink()
                    fsync_dir(directory)
            return super().write_predictions(directory, split, examples, predictions)
        check_prediction_ids(self.name, examples, predictions)
        whole = len(examples) >= self._rows.get("test", 0)
        mnli = [e for e in examples if not e.id.startswith(f"{AX_SPEC.key}-")]
        texts = self._submission_text(diagnostic, predictions), self._submission_text(mnli, predictions)
        mnli_path = directory / (self.spec.submission if whole else "test.tsv")
        mnli_path.unlink(missing_ok=True)  # both checked first; from here the pair is incomplete until the end
        if directory.is_dir():
            fsync_dir(directory)  # the removal must be durable before the new AX.tsv is
        _write(directory / (AX_SPEC.submission if whole else "ax.tsv"), texts[0])
        return _write(mnli_path, texts[1])


class MNLIMismatchedTask(GlueTask):
    """GLUE MNLI-mm: MNLI's train set, mismatched dev/test (dev_mismatched.tsv, ...); accuracy."""

    spec = GLUE_SPECS["mnli-mm"]


class QNLITask(GlueTask):
    """GLUE QNLI: does the sentence answer the question; accuracy."""

    spec = GLUE_SPECS["qnli"]


class RTETask(GlueTask):
    """GLUE RTE: textual entailment; accuracy."""

    spec = GLUE_SPECS["rte"]


class WNLITask(GlueTask):
    """GLUE WNLI: Winograd NLI ("1" = entailment); accuracy."""

    spec = GLUE_SPECS["wnli"]


class TsvTask(Task):
    """glue/tsv: classification or regression over any delimited file, configured in the recipe."""

    type = "classification"
    main_metric = "accuracy"

    def __init__(self, name: str, config: TsvTaskConfig | None = None):
        super().__init__(name, config if config is not None else TsvTaskConfig())
        cfg: TsvTaskConfig = self.config  # validated by TsvTaskConfig.__post_init__
        self.type = cfg.type  # type: ignore[misc]  # per-instance: the recipe decides
        self.main_metric = cfg.main_metric or cfg.metrics[0]  # type: ignore[misc]
        self._cache: dict[str, list[SentenceExample]] = {}

    @property
    def labels(self) -> tuple[str, ...]:
        cfg: TsvTaskConfig = self.config
        return tuple(cfg.labels or ())

    def info(self) -> TaskInfo:
        """The base info plus, for a regression task with `score_range`, that range under
        `extra["score_range"]`, as glue/stsb reports its (0, 5): objectives scale targets by it to
        [0, 1] (and predictions back), the HF export folds it into the head, BAM compares it."""
        info = super().info()
        cfg: TsvTaskConfig = self.config
        if cfg.type == "regression" and cfg.score_range is not None:
            info.extra["score_range"] = (float(cfg.score_range[0]), float(cfg.score_range[1]))
        return info

    def examples(self, split: Split) -> list[Example]:
        _check_split(self.name, split)
        cfg: TsvTaskConfig = self.config
        path = getattr(cfg, split)
        if path is None:
            # A DataError (a UserError) as the Task contract asks for missing splits; "file" = the task.
            raise DataError(self.name, 0, f"no {split} file configured (set `{split}:` in the task config)")
        if split not in self._cache:
            layout = TableLayout(
                text_a=cfg.text_a_column,
                text_b=cfg.text_b_column,
                label=cfg.label_column,
                index=cfg.id_column,
                header=cfg.header,
                label_optional=split == "test",
            )
            self._cache[split] = read_sentence_examples(
                Path(path),
                split,
                layout,
                labels=self.labels,
                regression=cfg.type == "regression",
                regression_bounds=tuple(cfg.score_range) if cfg.score_range is not None else None,
                delimiter=cfg.delimiter,
                quoting=cfg.quoting,
                max_examples=cfg.max_examples,
                subsample=cfg.subsample,
                subsample_seed=cfg.subsample_seed,
            )
            if split == "train":
                self._warn_unscaled(self._cache[split])
        return list(self._cache[split])

    def _warn_unscaled(self, examples: Sequence[SentenceExample]) -> None:
        """Warn (the stage's report shows it) when a regression task without `score_range` trains on
        scores outside [0, 1].

        Why: without a range, objectives take the scores as already in [0, 1] (the default range of
        `TaskInfo.extra["score_range"]`), so 1-100 ratings trained an output layer initialised for
        ~[0, 1] on raw targets in the tens, without a word, where glue/stsb's 0-5 are scaled. Not an
        error: unscaled targets are what such tasks always trained on, and some have no fixed range."""
        cfg: TsvTaskConfig = self.config
        if cfg.type != "regression" or cfg.score_range is not None:
            return
        scores = [(e.id, float(e.label)) for e in examples if e.label is not None]
        outside = [(ident, score) for ident, score in scores if not 0.0 <= score <= 1.0]
        if not outside:
            return
        low, high = min(s for _, s in scores), max(s for _, s in scores)
        warnings.warn(
            f"{self.name}: {len(outside)} of {len(scores)} training scores lie outside [0, 1] (they range "
            f"from {low:g} to {high:g}; first {outside[0][0]!r} with {outside[0][1]:g}), and without "
            "score_range fine-tuning trains on them unscaled: set `score_range: [low, high]` (the scale's "
            "range) to have targets scaled to [0, 1] as glue/stsb's 0-5 are",
            stacklevel=3,
        )

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        cfg: TsvTaskConfig = self.config
        labels = self.labels if cfg.type == "classification" else None
        golds, preds = scoring.gather(self.name, examples, predictions, labels=labels)
        positive = cfg.positive_label or (cfg.labels[-1] if cfg.labels else None)
        return scoring.compute(cfg.metrics, golds, preds, positive=positive)

    def write_predictions(
        self, directory: Path, split: Split, examples: Sequence[Example], predictions: Mapping[str, Any]
    ) -> Path:
        """The base class's `directory/<split>.tsv` (`id<TAB>prediction`, ids checked, written
        atomically), each value first checked as scoring checks it: `nan` or a class id was written
        as a prediction (a ValueError naming the example now, nothing written), as GLUE's writer."""
        cfg: TsvTaskConfig = self.config
        labels = self.labels if cfg.type == "classification" else None
        check_prediction_ids(self.name, examples, predictions)  # before the values: a missing id is named as such
        checked = {e.id: scoring.checked_prediction(self.name, e.id, predictions[e.id], labels) for e in examples}
        return super().write_predictions(directory, split, examples, checked)

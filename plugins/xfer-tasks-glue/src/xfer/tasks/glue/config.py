"""Config dataclasses of the GLUE plugin's tasks.

Kept free of heavy imports because the recipe validator imports them to type-check recipes.
Cross-field checks live in `__post_init__` and raise ValueError: the recipe validator reports
them at the task's position in the YAML file, before any stage runs.
"""

# `knob(...)` returns a `dataclasses.field`, which RUF009 cannot know.

import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal, get_args

from xfer.core.config import ExistingPath, FieldError, knob

AX_DEFAULT_FILE = "diagnostic.tsv"
"""The diagnostic set's file in download_glue_data.py's `diagnostic/` folder (beside `MNLI/`)."""


@dataclass
class GlueTaskConfig:
    """Where one GLUE task's data comes from (shared by glue/cola ... glue/wnli)."""

    data_dir: ExistingPath | None = knob(
        None,
        "The task's folder in a GLUE-format distribution, e.g. data/glue/RTE, holding train.tsv, "
        "dev.tsv and optionally test.tsv (MNLI: dev_matched.tsv / dev_mismatched.tsv and "
        "test_matched.tsv / test_mismatched.tsv). Required when source is 'local'; refused with 'hub' (never read).",
    )
    source: Literal["local", "hub"] = knob(
        "local",
        "'local' reads data_dir. 'hub' downloads nyu-mll/glue with the `datasets` library "
        "(needs network and `pip install xfer-tasks-glue[hub]`); never used unless asked for.",
    )
    max_examples: int | None = knob(
        None,
        "Keep only N examples of each split (which ones: `subsample`), for quick runs. "
        "None keeps everything; nothing is ever dropped otherwise.",
    )
    subsample: Literal["first", "random"] = knob(
        "first",
        "Which examples max_examples keeps: 'first' the first N rows (file order); 'random' a random N "
        "drawn with subsample_seed, kept in file order (fairer for files sorted by genre or label, like STS-B).",
    )
    subsample_seed: int = knob(0, "Seed of subsample: random (the same seed keeps the same examples).")

    hub_subsets: ClassVar[tuple[str, ...]] = ()
    """The subsets of nyu-mll/glue the task reads with `source: hub` (each task's config class names
    its own; this base class, which Python callers may use for any task, names none)."""

    def implicit_inputs(self) -> dict[str, Path]:
        """With `source: hub`, the task's copies in the `datasets` cache (the fingerprint's hook): no
        field names them, so another snapshot of nyu-mll/glue downloaded into the cache (which offline
        `datasets` then reads) left a completed stage, trained on the old one, skipped as unchanged.
        A copy the stage itself downloads (none was cached when it started) counts as a change once,
        as any input that appears while its stage runs: the next run trains again on that copy."""
        if self.source != "hub":
            return {}
        from xfer.tasks.glue.hub import cached_copies

        return {f"hub.{name}": folder for subset in self.hub_subsets for name, folder in cached_copies(subset).items()}

    def __post_init__(self) -> None:
        if self.source not in ("local", "hub"):
            raise ValueError(f"source must be 'local' or 'hub', not {self.source!r}")
        if self.source == "hub" and self.data_dir is not None:
            # It was ignored without a word: a recipe meant to train on a local (say, corrected) copy
            # trained on the Hub's, and its fingerprint signed a folder that was never read.
            raise FieldError(
                "data_dir",
                "is read only with source: local; with source: hub the task loads nyu-mll/glue with `datasets` "
                "(remove data_dir, or set source: local to read it)",
            )
        check_max_examples(self.max_examples)
        check_subsample(self.subsample)
        if self.data_dir is not None and Path(self.data_dir).is_file():
            # it passed validation (it exists), then every split was reported as missing at a
            # nonsensical path (`RTE/dev.tsv/dev.tsv: ... no such file`)
            raise FieldError(
                "data_dir",
                f"{self.data_dir} is a file; name the task's folder (the one holding train.tsv and dev.tsv), "
                f"e.g. {Path(self.data_dir).parent}",
            )

    def check_recipe(self) -> None:
        """In a recipe a local task must say where its data is (Python callers may leave it unset)."""
        if self.source == "local" and self.data_dir is None:
            raise FieldError("data_dir", "required when source is 'local': the task's GLUE folder (or set source: hub)")


@dataclass
class MnliTaskConfig(GlueTaskConfig):
    """glue/mnli's config: GLUE's, plus the diagnostic set (AX) its model also predicts."""

    diagnostic: bool = knob(
        False,
        "Also predict GLUE's diagnostic set (AX) with the MNLI model: the test split then holds AX's "
        "examples too (ids ax-<index>), and test predictions write AX.tsv next to MNLI-m.tsv, as a GLUE "
        "submission needs. Local: `diagnostic_file`, else <data_dir>/../diagnostic/diagnostic.tsv "
        "(download_glue_data.py's layout); hub: nyu-mll/glue's `ax` test split.",
        unsigned_at=False,  # added after runs existed: their fingerprints stay valid
    )
    diagnostic_file: ExistingPath | None = knob(
        None,
        "GLUE's AX.tsv (columns index, sentence1, sentence2) when it is not at the default place; left "
        "unset, the default place's file is filled in when it exists (stage fingerprints sign it).",
        unsigned_at=None,
    )

    hub_subsets: ClassVar[tuple[str, ...]] = ("mnli",)

    def implicit_inputs(self) -> dict[str, Path]:
        """MNLI's copies in the `datasets` cache and, with `diagnostic: true`, AX's (`ax` subset)."""
        found = super().implicit_inputs()
        if self.diagnostic and self.source == "hub":
            from xfer.tasks.glue.hub import cached_copies

            found.update({f"hub.{name}": folder for name, folder in cached_copies("ax").items()})
        return found

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.diagnostic_file is not None and not self.diagnostic:
            raise FieldError("diagnostic_file", "is only read with `diagnostic: true`")
        if self.diagnostic_file is not None and self.source == "hub":
            raise FieldError("diagnostic_file", "is a local file; with source: hub the Hub's `ax` split is read")
        if self.diagnostic_file is not None and Path(self.diagnostic_file).is_dir():
            # a folder passed validation (it exists) and was then reported as "missing (no such
            # file; set diagnostic_file)" by the pre-flight, although the recipe had set it
            raise FieldError(
                "diagnostic_file",
                f"{self.diagnostic_file} is a folder; name the file, e.g. {Path(self.diagnostic_file) / AX_DEFAULT_FILE}",
            )
        if self.diagnostic and self.source == "local" and self.diagnostic_file is None and self.data_dir is not None:
            # The default place is outside `data_dir`, so the fingerprint, which signs path-typed
            # fields, never saw the file: an edited or replaced diagnostic.tsv left a stale AX.tsv.
            # Only an existing file is filled in: the resolved recipe must validate (a run that
            # predicts dev only never reads it), and a file that appears later changes this field.
            default = Path(self.data_dir).parent / "diagnostic" / AX_DEFAULT_FILE
            if default.is_file():
                self.diagnostic_file = default


def _hub_task_config(name: str, task: str, subset: str) -> type[GlueTaskConfig]:
    """GlueTaskConfig for one task, naming the nyu-mll/glue subset it reads with source: hub (no
    fields of its own: the dataclass fields, checks and defaults are GlueTaskConfig's)."""
    doc = f"{task}'s config: GLUE's, reading subset `{subset}` of nyu-mll/glue with source: hub."
    return type(name, (GlueTaskConfig,), {"hub_subsets": (subset,), "__doc__": doc, "__module__": __name__})


CoLATaskConfig = _hub_task_config("CoLATaskConfig", "glue/cola", "cola")
SST2TaskConfig = _hub_task_config("SST2TaskConfig", "glue/sst2", "sst2")
MRPCTaskConfig = _hub_task_config("MRPCTaskConfig", "glue/mrpc", "mrpc")
STSBTaskConfig = _hub_task_config("STSBTaskConfig", "glue/stsb", "stsb")
QQPTaskConfig = _hub_task_config("QQPTaskConfig", "glue/qqp", "qqp")
MNLIMismatchedTaskConfig = _hub_task_config("MNLIMismatchedTaskConfig", "glue/mnli-mm", "mnli")
QNLITaskConfig = _hub_task_config("QNLITaskConfig", "glue/qnli", "qnli")
RTETaskConfig = _hub_task_config("RTETaskConfig", "glue/rte", "rte")
WNLITaskConfig = _hub_task_config("WNLITaskConfig", "glue/wnli", "wnli")


@dataclass
class TsvTaskConfig:
    """A sentence(-pair) classification or regression task defined entirely in the recipe."""

    train: ExistingPath | None = knob(None, "Training file (delimited text).", required=True)
    dev: ExistingPath | None = knob(None, "Development file.")
    test: ExistingPath | None = knob(None, "Test file; its label column may be absent (prediction only).")
    text_a_column: int | str = knob(0, "Column of the first text: 0-based index, or a header name.")
    text_b_column: int | str | None = knob(None, "Column of the second text of a pair; None for single texts.")
    label_column: int | str | None = knob(
        None,
        "Column of the label; None when no file carries labels. In the test file a missing "
        "header column means 'unlabelled'.",
    )
    id_column: int | str | None = knob(
        None, "Column holding an example id; None uses the 0-based row number. Ids must be unique per file."
    )
    header: bool = knob(True, "Whether the first line of every file is a header row.")
    type: Literal["classification", "regression"] = knob("classification", "Task type.")
    labels: list[str] | None = knob(
        None,
        "Label strings, in a fixed order (required for classification, forbidden for regression). "
        "A label in a file that is not listed here is an error.",
    )
    score_range: tuple[float, float] | None = knob(
        None,
        "Regression only: [low, high], the range of the gold scores (e.g. [1, 100] for 1-100 ratings). "
        "Reported as the task's score_range, as glue/stsb's (0, 5): fine-tuning scales targets by it to "
        "[0, 1] and predictions back, and a score outside it is a DataError at its file:line. None: "
        "targets are trained on as they are, i.e. as if the range were [0, 1] (right for scores already "
        "there; scores outside [0, 1] in the train file are trained on unscaled, with a warning).",
        unsigned_at=None,  # added after runs existed: their fingerprints stay valid
    )
    metrics: list[str] | None = knob(
        None,
        "Metrics to report: accuracy, f1, mcc (classification), pearson, spearman (regression); default: "
        "[accuracy] for classification, [spearman, pearson] for regression. "
        "f1 is the binary F1 of positive_label. All are reported x100. A namespaced name is a registered "
        "metric component, `(golds, predictions) -> percent` (`xfer components metric`; e.g. core.mcc).",
    )
    main_metric: str = knob("", "The metric used for model selection; empty means the first of `metrics`.")
    positive_label: str | None = knob(
        None, "Positive class for f1; default: the last entry of `labels` (which must then have two entries)."
    )
    delimiter: str = knob("\t", "Field separator (one character).")
    quoting: bool = knob(
        False,
        "False: fields are taken verbatim, quote characters included (like GLUE's files). "
        "True: CSV quoting with double quotes (fields may then contain the delimiter and newlines).",
    )
    max_examples: int | None = knob(
        None, "Keep only N examples of each split (which ones: `subsample`), for quick runs."
    )
    subsample: Literal["first", "random"] = knob(
        "first", "Which examples max_examples keeps: the 'first' N rows, or a seeded 'random' N in file order."
    )
    subsample_seed: int = knob(0, "Seed of subsample: random (the same seed keeps the same examples).")

    def __post_init__(self) -> None:
        if self.metrics is None:  # by type: a fixed [accuracy] was refused for a regression task, at a key
            # the user never wrote ("'accuracy' is not available for regression")
            self.metrics = ["spearman", "pearson"] if self.type == "regression" else ["accuracy"]
        problems = tsv_config_problems(self)
        if len(problems) == 1:
            # a lone problem is reported at its key's line of the recipe (several: at the task's mapping)
            raise FieldError(problems[0].key, problems[0].message)
        if problems:
            raise ValueError("; ".join(problems))
        if self.score_range is not None:  # checked above: two finite numbers, low < high
            self.score_range = (float(self.score_range[0]), float(self.score_range[1]))


class KeyedProblem(str):
    """A problem of `tsv_config_problems` and the key it blames (its text is `key: message`), so a
    lone one is raised as a FieldError at that key's line while the list stays a list of strings."""

    key: str
    message: str

    def __new__(cls, key: str, message: str) -> "KeyedProblem":
        problem = super().__new__(cls, f"{key}: {message}")
        problem.key, problem.message = key, message
        return problem


CLASSIFICATION_METRICS = ("accuracy", "f1", "mcc", "acc_f1_avg")
REGRESSION_METRICS = ("pearson", "spearman", "pearson_spearman_avg")


def check_max_examples(value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"max_examples must be a positive integer or null, not {value!r}")


def check_subsample(value: object) -> None:
    if value not in ("first", "random"):
        raise ValueError(f"subsample must be 'first' or 'random', not {value!r}")


def _component_problems(name: str) -> list[str]:
    """Whether a plugin registers the metric component `name` (`xfer components metric`)."""
    from xfer.core.errors import PluginError
    from xfer.core.plugins import default_host

    try:
        default_host().get("metric", name)
    except PluginError as err:
        return [str(err)]
    return []


def _score_range_problems(cfg: TsvTaskConfig) -> list[KeyedProblem]:
    """What is wrong with `score_range`: the objective divides targets by high - low, so (5, 5) would
    divide by zero, (5, 0) flip every target and an infinite bound scale every target to 0 or nan;
    a classification task has no scores to scale."""
    if cfg.score_range is None:
        return []
    if cfg.type != "regression":
        return [KeyedProblem("score_range", "is for regression tasks only (set type: regression, or remove it)")]
    try:
        low, high = (float(v) for v in cfg.score_range)
    except (TypeError, ValueError):
        return [KeyedProblem("score_range", f"must be [low, high], two numbers, not {cfg.score_range!r}")]
    if not (math.isfinite(low) and math.isfinite(high)):
        return [KeyedProblem("score_range", f"must be two finite numbers, not [{low}, {high}]")]
    if not low < high:
        return [KeyedProblem("score_range", f"must be [low, high] with low < high, not [{low:g}, {high:g}]")]
    return []


def tsv_config_problems(cfg: TsvTaskConfig) -> list[KeyedProblem]:
    """Every inconsistency of a glue/tsv config, each with the key it blames, so that one validation
    run reports them all (and a lone one at its key's line: it was reported at the task's mapping)."""
    problems: list[KeyedProblem] = []
    allowed: tuple[str, ...] = ()
    if cfg.type == "classification":
        allowed = CLASSIFICATION_METRICS
        if not cfg.labels:
            problems.append(KeyedProblem("labels", "required for a classification task"))
        elif len(set(cfg.labels)) != len(cfg.labels):
            problems.append(KeyedProblem("labels", f"has duplicates: {cfg.labels}"))
    elif cfg.type == "regression":
        allowed = REGRESSION_METRICS
        if cfg.labels:
            problems.append(KeyedProblem("labels", "must not be set for a regression task"))
    else:
        kinds = get_args(TsvTaskConfig.__annotations__["type"])
        problems.append(KeyedProblem("type", f"must be one of {kinds}, not {cfg.type!r}"))
    problems += _score_range_problems(cfg)
    if not cfg.metrics:
        problems.append(KeyedProblem("metrics", "is empty"))
    for metric in cfg.metrics:
        if "." in metric:  # a registered metric component
            problems += [KeyedProblem("metrics", problem) for problem in _component_problems(metric)]
        elif metric not in allowed:
            problems.append(
                KeyedProblem(
                    "metrics",
                    f"{metric!r} is not available for {cfg.type} (choose from {list(allowed)}, "
                    "or name a registered metric component such as core.mcc)",
                )
            )
    if cfg.main_metric and cfg.main_metric not in cfg.metrics:
        problems.append(KeyedProblem("main_metric", f"{cfg.main_metric!r} is not in metrics {cfg.metrics}"))
    if {"f1", "acc_f1_avg"} & set(cfg.metrics) and cfg.labels:
        if cfg.positive_label is None and len(cfg.labels) != 2:
            problems.append(KeyedProblem("positive_label", "f1 needs it when there are not exactly two labels"))
        if cfg.positive_label is not None and cfg.positive_label not in cfg.labels:
            problems.append(KeyedProblem("positive_label", f"{cfg.positive_label!r} is not in labels"))
    if len(cfg.delimiter) != 1:
        problems.append(KeyedProblem("delimiter", f"must be one character, not {cfg.delimiter!r}"))
    elif cfg.delimiter in "\r\n":
        # Records are lines: a line break never separates fields. It passed, and the file then
        # read as one column ("no column named 'label' in the header"), or as a CR error.
        problems.append(KeyedProblem("delimiter", f"{cfg.delimiter!r} is a line break, which ends records"))
    elif cfg.delimiter == '"' and cfg.quoting:
        # `"` is the quote character of `quoting: true`: csv then reads `""` as an escaped quote
        # or an empty quoted field, and a row either splits wrongly or fails far from the cause.
        problems.append(
            KeyedProblem("delimiter", "'\"' is the quote character of `quoting: true`; use another delimiter")
        )
    for key in ("text_a_column", "text_b_column", "label_column", "id_column"):
        if isinstance(getattr(cfg, key), str) and not cfg.header:
            problems.append(KeyedProblem(key, "is a column name but header is false"))
    for key, check in (("max_examples", check_max_examples), ("subsample", check_subsample)):
        try:
            check(getattr(cfg, key))
        except ValueError as err:
            problems.append(KeyedProblem(key, str(err).removeprefix(f"{key} ")))  # "max_examples must be ..."
    return problems

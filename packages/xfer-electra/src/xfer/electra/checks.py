"""The `electra.pretrain` pre-flight: problems found before any stage trains (`xfer run`,
`xfer validate --data`), each naming the file it is about.

- an objective that is not a pre-training objective (a fine-tuning one, or a plugin class that
  does not subclass `PretrainingObjective`);
- an empty corpus: every file the corpus names holds no text;
- a local `dataset:` (a .csv/.tsv/.parquet file, a save_to_disk folder) without its `text_column`;
- a `data_cache` inside the local `dataset:` folder it caches (`load_dataset` would read the cache's files);
- a local `dataset:` file with a line the stage refuses when it starts (`xfer.electra.data.check_local_dataset`):
  a JSON-lines row that is not JSON, not an object, without the text key or not text; streamed, also a
  CSV/TSV row with another field count than the header and bytes that are not UTF-8;
- an `init_generator` checkpoint trained with another vocabulary than the stage's tokenizer, or with
  another number of embeddings than the `init` checkpoint, or of the other form (a masked-LM
  generator for a two-tower noise model, or the reverse), or of another shape than the generator
  the objective's settings build next to `init:` (`model.generator_shape_mismatch`);
- an `init:` or `init_generator:` checkpoint of the other role (a generator as `init:`, a discriminator
  as `init_generator:`; `stage.check_role`), and a two-tower noise model as the `init:` of a masked-LM
  objective (`stage.check_not_two_tower`);
- a tokenizer that does not fit the `init` checkpoint: another vocabulary (token ids would mean
  other words), more tokens than it has embeddings, or fewer positions than `max_length`; and
  `encoder:` overrides that contradict the tokenizer (`vocab_size`, `pad_token_id`) — shared with
  `transformer.finetune` (`xfer.transformer.finetune_config.checkpoint_problems`);
- an `encoder:` override of an architecture field (`hidden_size`, `num_layers`, ...) that differs from
  the `init` checkpoint's (`xfer.transformer.modelio.with_overrides`, which the stage runs on reading it;
  also shared, `checkpoint_problems`), and a tokenizer folder the tokenizer loader refuses (no vocab.txt
  or tokenizer.json, a damaged one);
- a compute budget that does not buy a single step, even of the shortest examples (the stage costs the
  packed corpus's real lengths; in FLOPs: when the tokenizer and `init:` are folders, not earlier
  stages' outputs, whose sizes the stage checks when it starts);
- a generator `size` that gives a generator narrower than 1 unit, or `layers` that give it no layer,
  for the `init` checkpoint (without `init:` the recipe validation checks both against the preset,
  at the line of the knob).

Files produced by earlier stages do not exist yet and are checked by the stage itself. Bytes
that are not UTF-8 are reported with file and line by the reader when the corpus is read (the
`transformer.vocab` stage reading the same files reports them before any training too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xfer.core.errors import DataError, UserError
from xfer.electra.config import GeneratorConfig, generator_depth_problem, generator_width_problem
from xfer.transformer.finetune_config import (
    checkpoint_encoder,
    checkpoint_encoder_config,
    checkpoint_format_problem,
    checkpoint_problems,
    read_vocabulary,
    vocabulary_mismatch,
    weights_problem,
)

_PROBE_BYTES = 1 << 20
_SHORTEST_EXAMPLE = 3
"""Tokens of the shortest packed example, `[CLS] a [SEP]` with a one-token sentence
(`packing.ExamplePacker` skips sentences without tokens)."""


def preflight(config: Any, stage_dir: Path | None = None) -> list[UserError]:
    """Every problem found; each check runs on its own, so one does not hide another. `stage_dir`: the
    stage's folder in the run directory (None: not known), whose default example cache records files checked."""
    problems: list[UserError] = []
    init = config.init.path if config.init is not None else None
    tokenizer = _tokenizer_dir(config)
    checks = [
        lambda: _objective_kind(config),
        lambda: _empty_corpus(config),
        lambda: _dataset_column(config),
        lambda: _dataset_lines(config, stage_dir),
        lambda: _data_cache_inside_dataset(config),
        lambda: checkpoint_problems(
            tokenizer, init, config.encoder, config.max_length, random_init=config.init is None
        ),
        lambda: _generator_shape(config, init),
        lambda: init_generator_vocabulary(config.init_generator.path if config.init_generator else None, tokenizer),
        lambda: _init_generator_size(config, init),
        lambda: _init_generator_form(config),
        lambda: _init_generator_shape(config, init),
        lambda: _init_role(config, init),
    ]
    if config.budget is not None and config.budget.steps is None:
        checks.append(lambda: _budget(config, _vocab_size(config, init)))
    for check in checks:
        try:
            problems += check()
        except UserError as exc:
            problems.append(exc)
    return problems


def _objective_kind(config: Any) -> list[UserError]:
    """The objective is a pre-training objective (a fine-tuning one validates as a component too)."""
    from xfer.core.errors import PluginError
    from xfer.core.plugins import default_host
    from xfer.electra.objective import pretraining_objective_class

    try:
        pretraining_objective_class(default_host(), config.objective.name)
    except PluginError:
        return []  # recipe validation reports an objective it cannot load
    except UserError as wrong_kind:
        return [wrong_kind]
    return []


def init_generator_vocabulary(generator: Path | None, tokenizer: Path | None) -> list[UserError]:
    """The `init_generator` checkpoint's vocabulary against the stage's tokenizer (`init:`'s is
    checked by `checkpoint_problems`): a generator trained with other ids was loaded without a word,
    its output bias and (untied) embeddings standing for other tokens. Also run by the stage, for
    folders that earlier stages write."""
    if generator is None or tokenizer is None:
        return []
    ours = read_vocabulary(tokenizer)
    if ours is None:
        return []
    mismatch = vocabulary_mismatch(
        ours,
        read_vocabulary(generator),
        "the init_generator checkpoint",
        "give the generator pre-trained with this tokenizer (the `generator` output next to the `init:` one)",
    )
    return [mismatch] if mismatch else []


def _init_generator_size(config: Any, init: Path | None) -> list[UserError]:
    """The `init_generator` checkpoint's embedding count against the `init` one's. Tied, the
    generator's embeddings are the discriminator's and its own are skipped, so only its output bias
    showed the other size, once the corpus had been packed, in an error naming no file or tensor."""
    generator = config.init_generator.path if config.init_generator is not None else None
    if init is None or generator is None:
        return []
    ours, theirs = _checkpoint_vocab_size(init), _checkpoint_vocab_size(generator)
    if ours is None or theirs is None or ours == theirs:
        return []
    source = generator / ("xfer_model.json" if (generator / "xfer_model.json").is_file() else "config.json")
    return [
        UserError(
            f"init_generator: {source}: vocab_size {theirs} differs from the discriminator's {ours} (init: {init}): "
            "the generator must share the discriminator's vocabulary; give the generator pre-trained with it"
        )
    ]


def _vocab_size(config: Any, init: Path | None) -> int | None:
    """The tokenizer's size, else the init checkpoint's embedding count (None when neither reads)."""
    size = _tokenizer_vocab_size(config)
    return size if size is not None or init is None else _checkpoint_vocab_size(init)


def _tokenizer_vocab_size(config: Any) -> int | None:
    """Tokens in the stage's tokenizer folder (`tokenizer:`, else `init:`), None if not readable yet."""
    folder = _tokenizer_dir(config)
    vocabulary = read_vocabulary(folder) if folder is not None else None
    return len(vocabulary[1]) if vocabulary is not None else None


def _init_generator_form(config: Any) -> list[UserError]:
    """A masked-LM generator folder for a two-tower noise model (Electric's, ELECTRA-TT's), or a
    two-tower one for a masked-LM generator: the stage finds either once the corpus is packed.
    First, a path that is no checkpoint at all (a file inside one, a folder with none, a missing
    path), or whose weights do not open (a model.safetensors cut short), as `init:`'s: both were
    skipped here, and the stage refused them once the stages before it had run."""
    folder = config.init_generator.path if config.init_generator is not None else None
    if folder is None:
        return []
    if (unusable := checkpoint_format_problem(folder, "init_generator")) is not None:
        return [unusable]
    if (unreadable := weights_problem(folder)) is not None:
        return [unreadable]
    generator = getattr(config.objective.config, "generator", None)
    kind = getattr(generator, "kind", None) or ("two_tower" if config.objective.name == "electric.nce" else "mlm")
    problem = generator_form_problem(folder, kind == "two_tower", config.objective.name)
    return [problem] if problem is not None and kind in ("mlm", "two_tower") else []


def _init_generator_shape(config: Any, init: Path | None) -> list[UserError]:
    """The `init_generator` checkpoint's shape against the generator the objective's settings build
    next to the `init` discriminator, with the stage's check (`model.generator_shape_mismatch`, run by
    `stage._load_init`): a generator of another size, depth or tying was refused only once the stages
    before it had trained and the corpus was packed. Descriptions only are read; a folder of the other
    form, another vocabulary or `encoder:` overrides that contradict `init:` are said by the other checks."""
    from xfer.electra.model import generator_shape_mismatch
    from xfer.electra.stage import check_role, objective_settings
    from xfer.transformer.modelio import with_overrides

    folder = config.init_generator.path if config.init_generator is not None else None
    wanted = getattr(objective_settings(config), "generator", None)
    if init is None or folder is None or not isinstance(wanted, GeneratorConfig):
        return []
    two_tower = wanted.kind == "two_tower"
    if wanted.kind not in ("mlm", "two_tower") or checkpoint_format_problem(folder, "init_generator") is not None:
        return []
    if generator_form_problem(folder, two_tower, config.objective.name) is not None:
        return []
    check_role(folder, "generator", "init_generator")  # a discriminator: said as the stage says it, first
    disc, theirs = checkpoint_encoder_config(init), checkpoint_encoder_config(folder)
    if disc is None or theirs is None or disc.vocab_size != theirs.vocab_size:
        return []
    try:
        disc = with_overrides(disc, config.encoder, init)
    except UserError:
        return []
    has = "its towers each have" if two_tower else "its encoder has"  # as the stage words either
    mismatch = generator_shape_mismatch(disc, wanted, theirs, has)
    return [UserError(f"init_generator: {folder}: {mismatch}")] if mismatch else []


def _init_role(config: Any, init: Path | None) -> list[UserError]:
    """The `init:` checkpoint's role, with the stage's checks (`stage._encoder_config`): a generator for a
    discriminator (`stage.check_role`), and a two-tower noise model for a masked-LM objective
    (`electra.mlm` or a plugin's built on it; `stage.check_not_two_tower`). Both were found only once
    the stages before it had trained and the corpus was packed."""
    if init is None:
        return []
    from xfer.core.plugins import default_host
    from xfer.electra.objective import pretraining_objective_class
    from xfer.electra.stage import check_not_two_tower, check_role

    try:
        family = pretraining_objective_class(default_host(), config.objective.name).family
    except UserError:
        return []  # an objective that does not load, or not a pre-training one: said by `_objective_kind`
    if family == "electra.mlm":
        check_not_two_tower(init, "init")
    else:
        check_role(init, "discriminator", "init")
    return []


def generator_form_problem(folder: Path, two_tower: bool, objective: str) -> UserError | None:
    """Why the `init_generator` folder is not the form of generator `objective` trains (a two-tower
    noise model when `two_tower`, else a masked LM), or None. A two-tower model is an xfer model
    dir with modules ltr, rtl and head (Hugging Face has no such class)."""
    from xfer.core.atomic import read_json

    meta = read_json(folder / "xfer_model.json")
    modules = meta.get("modules") if isinstance(meta, dict) else None
    if (isinstance(modules, dict) and {"ltr", "rtl", "head"} <= modules.keys()) == two_tower:
        return None
    if two_tower:
        return UserError(
            f"init_generator: {folder} is a masked-LM generator, not a two-tower noise model, which objective "
            f"{objective!r} trains: give the `generator` output of an electric.nce or two-tower pre-training, or "
            "leave init_generator out for a fresh noise model"
        )
    return UserError(
        f"init_generator: {folder} is a two-tower noise model (modules ltr, rtl, head), not the masked-LM "
        f"generator objective {objective!r} trains: give an ELECTRA generator, or leave init_generator out "
        "for a fresh generator"
    )


def _checkpoint_vocab_size(folder: Path) -> int | None:
    """vocab_size from an HF config.json or an xfer model dir's encoder config (None if unreadable)."""
    size = (checkpoint_encoder(folder) or {}).get("vocab_size")
    return size if isinstance(size, int) else None


def _generator_shape(config: Any, init: Path | None) -> list[UserError]:
    """The generator `size` and `layers` against the `init` checkpoint (with `encoder:` overrides):
    without this, a generator that rounds to no unit or no layer was found by the stage, after the
    corpus had been packed."""
    generator = getattr(config.objective.config, "generator", None)
    if init is None or not isinstance(generator, GeneratorConfig) or generator.kind not in ("mlm", "two_tower"):
        return []
    values = {**(checkpoint_encoder(init) or {}), **config.encoder}
    what = f"the init checkpoint {init}"
    problems = []
    hidden, intermediate = values.get("hidden_size"), values.get("intermediate_size")
    layers = values.get("num_layers", values.get("num_hidden_layers"))  # xfer's name, else an HF config.json's
    if isinstance(hidden, int) and isinstance(intermediate, int):
        problem = generator_width_problem(generator.size, hidden, intermediate, what)
        if problem:
            problems.append(UserError(f"objective.generator.size: {problem}"))
    if isinstance(layers, int):
        problem = generator_depth_problem(generator.layers, layers, what)
        if problem:
            problems.append(UserError(f"objective.generator.layers: {problem}"))
    return problems


def _empty_corpus(config: Any) -> list[UserError]:
    files = config.corpus.files
    if files is None or files.inputs:  # text from an earlier stage: not there yet
        return []
    import glob

    paths = [Path(p) for pattern in files.patterns for p in sorted(glob.glob(pattern, recursive=True))]
    paths = [p for p in paths if p.is_file()]
    if not paths or any(_has_text(p) for p in paths):
        return []
    return [DataError(str(paths[0]), 0, f"the corpus has no text ({len(paths)} file(s), all empty or blank)")]


def _dataset_column(config: Any) -> list[UserError]:
    """A local `dataset:` whose columns, read from its header, schema or saved features, lack
    `text_column`: `xfer validate --data` said ok, and the stage found it only once the stages before
    it had run (hours, for a recipe's second pre-training stage). The stage's own error, worded alike."""
    corpus = config.corpus
    if corpus.dataset is None:
        return []
    path = Path(str(corpus.dataset))
    try:
        columns = _local_columns(path, corpus.split)
    except (OSError, ValueError, UnicodeDecodeError):
        return []  # unreadable here: the stage says why, with the file and line
    if columns is None or corpus.text_column in columns:
        return []
    listed = ", ".join(columns) or "none"
    return [
        DataError(
            str(path),
            0,
            f"no column {corpus.text_column!r} (columns: {listed}); set corpus.text_column",
            key=corpus.text_column,
        )
    ]


def _dataset_lines(config: Any, stage_dir: Path | None = None) -> list[UserError]:
    """The lines of a local `dataset:` file, checked as the stage checks them when it starts (the same
    functions): `xfer validate --data` said ok to a streamed JSON-lines file with a bad line or a row
    without the text key, and the stage refused it only once the stages before it had run. Passed files
    are recorded in the stage's example cache when that folder exists, `data_cache` or by default the stage's
    `data` folder (as `stage._examples` chooses): the stage, and the next run's pre-flight, do not read them
    again. Without `data_cache` and the stage's folder, a multi-GB corpus was parsed whole at every `xfer run`."""
    corpus = config.corpus
    if corpus.dataset is None or not Path(str(corpus.dataset)).exists():
        return []  # a Hub name, or a folder an earlier stage writes: the stage checks it
    from xfer.electra.data import check_local_dataset  # (imports datasets and torch: only when needed)

    folder = config.data_cache or (stage_dir / "data" if stage_dir is not None else None)
    cache = Path(folder) if folder is not None and Path(folder).is_dir() else None  # (never made here)
    try:
        check_local_dataset(corpus, cache)
    except DataError as problem:
        return [problem]
    return []


def _data_cache_inside_dataset(config: Any) -> list[UserError]:
    """A `data_cache` inside the local dataset folder it caches, refused by the stage when it starts
    (`xfer.electra.data._check_cache_outside_folder`): said before the stages before it train."""
    corpus = config.corpus
    if config.data_cache is None or corpus.dataset is None or not Path(str(corpus.dataset)).is_dir():
        return []
    from xfer.electra.data import _check_cache_outside_folder  # (imports datasets and torch: only when needed)

    try:
        _check_cache_outside_folder(Path(str(corpus.dataset)), Path(config.data_cache))
    except DataError as problem:
        return [problem]
    return []


def _local_columns(path: Path, split: str) -> list[str] | None:
    """The columns of a local .csv/.tsv (header line), .parquet (schema) or save_to_disk folder (its
    features), or None when they cannot be known without loading it (JSON lines, Hub names, ...)."""
    import csv
    import json

    suffix = path.suffix.lower()
    if path.is_file() and suffix in (".csv", ".tsv"):
        with open(path, newline="", encoding="utf-8-sig") as handle:
            tsv = suffix == ".tsv"
            header = next(
                csv.reader(
                    handle, delimiter="\t" if tsv else ",", quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL
                ),
                None,
            )
        return header if header else None
    if path.is_file() and suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    if path.is_dir():
        folder = path if (path / "state.json").is_file() else path / split
        info = folder / "dataset_info.json"
        if (folder / "state.json").is_file() and info.is_file():
            features = json.loads(info.read_text(encoding="utf-8")).get("features")
            return list(features) if isinstance(features, dict) else None
    return None


def _has_text(path: Path) -> bool:
    """True if the file has a non-blank byte besides a leading UTF-8 byte-order mark (files over
    1 MiB are assumed to have text). A BOM-only file passed and was found empty once packed."""
    if path.stat().st_size > _PROBE_BYTES:
        return True
    return bool(path.read_bytes().removeprefix(b"\xef\xbb\xbf").strip())


def _tokenizer_dir(config: Any) -> Path | None:
    source = config.tokenizer if config.tokenizer is not None else config.init
    return source.path if source is not None and source.path is not None else None


def _budget(config: Any, vocab_size: int | None) -> list[UserError]:
    """A budget must buy at least one step, at the least a step can cost (`_least_step`).

    A step's FLOPs need the model: with a tokenizer or `init:` an earlier stage makes, the vocabulary
    or the architecture is not known before that stage has run (the preset's were assumed: a budget
    that buys steps was refused as "less than one training step"), so the stage checks it itself."""
    per_step, tokens_per_step = _least_step(config, vocab_size)
    budget = config.budget
    if budget.flops is not None and per_step is None:
        return [
            UserError(
                f"budget.flops needs a FLOP count, and objective {config.objective.name!r} has no FLOP formula "
                "(see xfer.electra.flops.training_flops): give the budget in tokens or steps"
            )
        ]
    model_known = vocab_size is not None and (config.init is None or config.init.path is not None)
    if budget.flops is not None and model_known and budget.flops < per_step:
        return [UserError(f"budget.flops {budget.flops:.3g} is less than one training step ({per_step:.3g} FLOPs)")]
    if budget.tokens is not None and budget.tokens < tokens_per_step:
        return [UserError(f"budget.tokens {budget.tokens:.3g} is less than one step's {tokens_per_step:.0f} tokens")]
    return []


def _least_step(config: Any, vocab_size: int | None) -> tuple[float | None, float]:
    """(FLOPs or None without a formula, real tokens) of the cheapest step the stage can count.

    The stage costs a step at the packed corpus's real lengths (their mean; `stage._plan`), known only
    once the corpus is packed: priced at full-length sequences (`stage.planned_step`), a budget the
    stage accepts (`tokens: 250` for its 246.4 real tokens a step of 8 x 32) was refused here. So a step
    is priced at the shortest example, and the stage checks the exact cost. A stream's lengths are not
    known ahead even to the stage, which costs it at full length (`max_length`): that check is exact.
    A plugin's own FLOP formula is costed at full length only to report a broken one (as `xfer flops`
    and the stage do); it need not grow with length, so no FLOP budget is refused for it here."""
    import numpy as np

    from xfer.electra.stage import component_flops, objective_settings, planned_encoder, planned_step

    full_flops, full_tokens = planned_step(config, vocab_size)  # a plugin formula's error, said as the stage says it
    if config.corpus.streaming:
        return full_flops, full_tokens
    batch = config.train.batch_size
    tokens = float(batch * _SHORTEST_EXAMPLE)
    if full_flops is None or callable(getattr(objective_settings(config), "training_flops", None)):
        return (None if full_flops is None else 0.0), tokens
    per_sequence = component_flops(config, None, planned_encoder(config, vocab_size), np.full(1, _SHORTEST_EXAMPLE))
    return (None if per_sequence is None else batch * sum(per_sequence.values())), tokens

"""Config of the `electra.pretrain` stage (torch-free, so `xfer validate` stays fast).

Defaults are ELECTRA-Small's (thesis Tables 5.1/5.2): lr 5e-4, batch 128, sequence length 128,
10k warmup steps then linear decay to 0, AdamW (betas 0.9/0.999, eps 1e-6, weight decay 0.01 not
on LayerNorm and biases), gradient clipping 1.0, 1M steps. `train.bias_correction: false` and
`train.schedule: warmup_on_decay` reproduce the original TF optimizer exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from xfer.core.config import FieldError, Input, KeysOf, ObjectiveRef, knob
from xfer.core.train_config import TrainConfig
from xfer.electra.config import GeneratorConfig, generator_depth_problem, generator_width_problem
from xfer.electra.corpus import CorpusConfig
from xfer.transformer.finetune_config import (
    ENCODER_FIELDS,
    PresetName,
    check_encoder_overrides,
    check_preset_with_init,
)
from xfer.transformer.presets import preset_values

DEFAULT_TRAIN = TrainConfig(
    steps=1_000_000,
    batch_size=128,
    lr=5e-4,
    weight_decay=0.01,
    warmup_steps=10_000,
    schedule="linear",
    clip_norm=1.0,
    adam_eps=1e-6,
    eval_every=None,
    log_every=100,
    checkpoint_every=1000,
)


@dataclass
class Budget:
    """A compute budget: the stage trains for as many steps as it buys (exactly one field)."""

    flops: float | None = knob(
        None,
        "Training FLOPs (analytic matmul count, see `xfer flops`): a step is 3x its forward products "
        "(backward = 2x forward, as torch's FlopCounterMode counts), while the thesis's tables and the "
        "original flops_computation.py count 2x and also count embedding lookups as products: the "
        "thesis's numbers are not budgets here (its ELECTRA-Small, 1.4e18 there, is 1.15e18 by this count).",
        gt=0,
    )
    tokens: float | None = knob(None, "Real (non-pad) tokens seen by the model.", gt=0)
    steps: int | None = knob(None, "Optimizer steps.", ge=1)

    def __post_init__(self) -> None:
        given = [n for n in ("flops", "tokens", "steps") if getattr(self, n) is not None]
        if len(given) != 1:
            raise FieldError("flops", f"give exactly one of flops, tokens, steps (got {', '.join(given) or 'none'})")


@dataclass
class PretrainConfig:
    """`electra.pretrain`: pre-train a Transformer encoder on unlabeled text."""

    corpus: CorpusConfig = knob(doc="The text: files/globs/stage outputs or an HF `datasets` name/path.")
    tokenizer: Input | None = knob(
        None,
        "WordPiece folder (a transformer.vocab output, or vocab.txt/tokenizer.json); default: the one in `init`.",
        takes=("tokenizer", "model"),  # a model dir holds its tokenizer's files
    )
    objective: ObjectiveRef = knob(
        ObjectiveRef("electra.rtd"),
        "electra.rtd (ELECTRA), electra.mlm (BERT baseline), electric.nce (Electric), with their options, "
        "e.g. {name: electra.rtd, generator: {size: 0.5}}.",
    )
    model: PresetName = knob(
        "electra-small",
        "Discriminator size for random init; with `init`, the checkpoint's architecture (another preset is an error).",
    )
    encoder: Annotated[dict[str, Any], KeysOf.of(ENCODER_FIELDS, "encoder field")] = knob(
        {}, "Overrides of the preset, e.g. {num_layers: 4, hidden_size: 128}."
    )
    init: Input | None = knob(
        None,
        "Continue pre-training from a checkpoint: an ELECTRA discriminator (HF folder or xfer model dir, e.g. an "
        "earlier stage's `discriminator`). Weights only: the optimizer and schedule start afresh (not a resume).",
        takes=("model",),
    )
    init_generator: Input | None = knob(
        None,
        "The matching generator checkpoint (HF ElectraForMaskedLM folder or xfer dir); default: a fresh one.",
        takes=("model",),
    )
    max_length: int = knob(128, "Tokens per packed example, [CLS] and [SEP]s included.", ge=8)
    single_segment_prob: float = knob(0.1, "Probability that an example has one segment only.", ge=0.0, le=1.0)
    short_seq_prob: float = knob(0.05, "Probability that an example targets a random shorter length.", ge=0.0, le=1.0)
    train: TrainConfig = knob(DEFAULT_TRAIN, "Optimisation (ELECTRA-Small defaults).")
    budget: Budget | None = knob(
        None,
        "Train to a compute budget instead of train.steps: {flops: 1e15}, {tokens: 1e8} or {steps: N}. "
        "A train.steps or train.epochs of the recipe's own next to it is an error (one of them would be ignored).",
    )
    export_hf: bool = knob(True, "Also write each output in Hugging Face layout (`hf/` inside it).")
    on_collapse: Literal["warn", "stop"] = knob(
        "warn",
        "When the discriminator's token_spread stays below the collapse threshold for 3 logs (every token "
        "mapped to one vector; docs/results.md): warn on stderr and train on, or stop the stage with an error "
        "(the checkpoints so far are kept), so a recipe does not spend the rest of the budget and then "
        "fine-tune a collapsed encoder.",
        unsigned_at="warn",
    )
    data_cache: Path | None = knob(
        None,
        "Where the packed Arrow examples are cached (default: inside the stage's folder). A shared folder "
        "lets stages and runs with the same corpus, tokenizer and packing reuse one build.",
        not_an_input=True,
    )

    def __post_init__(self) -> None:
        check_preset_with_init(self.init, self.model, "electra-small")
        two_segments = self.single_segment_prob < 1.0
        check_encoder_overrides(
            self.encoder,
            self.model,
            self.init,
            self.max_length,
            segments=2 if two_segments else 1,
            segments_why="two-segment examples give the second segment token type 1; "
            "single_segment_prob: 1.0 makes every example one segment",
            default_positions=max(512, self.max_length),  # as the stage builds a preset (stage._encoder_config)
        )

    def preflight(self, stage_dir: Path | None = None) -> list[Any]:
        """Checks that read files, run before any stage trains (see `xfer.electra.checks`); `stage_dir`: the
        stage's folder in the run directory, whose example cache records the data files already checked."""
        from xfer.electra.checks import preflight

        return preflight(self, stage_dir)

    def check_recipe(self) -> None:
        if self.init_generator is not None and self.init is None:
            raise FieldError(
                "init_generator",
                "is only read together with `init:` (the discriminator it was trained with); "
                "give `init:` too, or remove init_generator to start from random weights",
            )
        self._check_init_generator_target()
        if self.tokenizer is None and self.init is None:
            raise FieldError(
                "tokenizer", "give a tokenizer (e.g. a transformer.vocab stage's output) or an init checkpoint"
            )
        self._check_generator_width()
        if self.corpus.streaming and self.budget is None and self.train.steps is None:
            raise FieldError(("train", "steps"), "a streaming corpus has no epochs: set train.steps or a budget")
        warmup = self.train.warmup_steps
        if (
            self.budget is not None
            and self.budget.steps is not None
            and warmup is not None
            and warmup > self.budget.steps
            and self.train.schedule != "constant"  # no warmup there: the lr is train.lr from the first step
        ):
            raise FieldError(
                ("train", "warmup_steps"),
                f"{warmup} is more than the budget's {self.budget.steps} steps: the learning rate would never reach "
                f"train.lr; give at most {self.budget.steps}",
            )
        self._check_budget_alone()

    def _check_init_generator_target(self) -> None:
        """`init_generator` loads a generator with weights of its own: a masked LM (ELECTRA's) or a
        two-tower noise model (Electric's, ELECTRA-TT's). The MLM baseline has none (its generator
        output is its main model: the generator's layers replaced the `init:` encoder's, silently
        when as wide), nor have unigram or uniform generators; the stage found the latter only once
        the corpus was packed."""
        if self.init_generator is None:
            return
        from xfer.electra.config import MLMConfig

        name, settings = self.objective.name, self.objective.config
        kind = getattr(getattr(settings, "generator", None), "kind", None)
        if isinstance(settings, MLMConfig) or (settings is None and name == "electra.mlm"):
            why = "its generator output is its main model, which `init:` loads"
        elif kind in ("unigram", "uniform"):
            why = f"its generator is a {kind} distribution, without weights"
        else:
            return
        raise FieldError(
            "init_generator",
            f"objective {name!r} has no generator with weights to load into ({why}); remove init_generator",
        )

    def _check_budget_alone(self) -> None:
        """A budget next to a `train.steps` or `train.epochs` of the recipe's own: the budget decides
        the steps, and the other was ignored without a word (`xfer run recipes/electra-vs-mlm-cpu.yaml
        stages.electra.train.steps=100` trained the whole budget). The stage's default 1M steps, and
        `steps: null` with the default epochs, are what a budget replaces, so they pass."""
        if self.budget is None:
            return
        steps, epochs = self.train.steps, self.train.epochs
        if steps is not None and steps != DEFAULT_TRAIN.steps:
            ignored, remove, plain = f"train.steps {steps}", "`train.steps: null`", f"{steps} steps"
        elif steps is None and epochs != DEFAULT_TRAIN.epochs:
            ignored, remove, plain = f"train.epochs {epochs:g}", "remove train.epochs", f"{epochs:g} epochs"
        else:
            return
        raise FieldError(
            "budget",
            f"decides how many steps the stage trains, so {ignored} would be ignored: give one of them "
            f"({remove} to train to the budget, `budget: null` to train {plain})",
        )

    def _check_generator_width(self) -> None:
        """A generator `size` that gives a generator narrower than 1 unit for this discriminator (the
        preset with `encoder:` overrides). With `init:` the checkpoint fixes the discriminator: the
        pre-flight checks a checkpoint folder, and the stage checks one an earlier stage writes."""
        generator = getattr(self.objective.config, "generator", None)
        if self.init is not None or not isinstance(generator, GeneratorConfig):
            return
        if generator.kind not in ("mlm", "two_tower"):  # unigram/uniform have no network to size
            return
        values = {**preset_values(self.model), **self.encoder}
        what = f"{self.model}{' with encoder overrides' if self.encoder else ''}"
        problem = generator_width_problem(generator.size, values["hidden_size"], values["intermediate_size"], what)
        if problem:
            raise FieldError(("objective", "generator", "size"), problem)
        problem = generator_depth_problem(generator.layers, values["num_layers"], what)
        if problem:
            raise FieldError(("objective", "generator", "layers"), problem)

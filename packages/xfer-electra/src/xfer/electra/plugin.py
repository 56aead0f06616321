"""xfer-electra's plugin (namespace `electra`): registration only, cheap to import (no torch)."""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import CommandSpec, ComponentSpec

_M = "xfer.electra"


@hookimpl
def xfer_stages() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "stage",
            "electra.pretrain",
            f"{_M}.stage:run_pretrain",
            # 2: corpus text spelling a special token ("[SEP]") is packed as text, not as that token;
            # 3: Electric's k = ceil(0.15 n) at full length; RTD at ELECTRA's cap (L = 64: 9 masked, not
            # 10); a local dataset folder's documents end at each file's end; 4: a streamed corpus's
            # shard orders and shuffle windows are separate random streams (its batches change); the
            # detection (Electric: energy) head's output layer and `embeddings_project` start
            # Glorot-uniform as in the original (were truncated normal 0.02); 5: on a bf16 CPU
            # (AMX/AVX512-BF16) matmul row counts are rounded up to a multiple of 64 and the extra rows
            # draw dropout bits, so the random stream there changes (fp32 and CUDA runs are unchanged);
            # 6: on a bf16 CPU a batch without padding is rounded up to a multiple of 64 rows too (was dense);
            # 7: on a bf16 CPU attention's length buckets come in rounded shapes (sequence count and length
            # multiples of 8): the bf16 rounding and the attention dropout's random stream change there
            "7",
            f"{_M}.stage_config:PretrainConfig",
            "Pre-train an encoder with ELECTRA (replaced token detection), Electric or MLM on your text, "
            "optionally to a compute budget; outputs discriminator, generator and tokenizer (xfer + HF layouts).",
            outputs=("discriminator", "generator", "tokenizer"),
            # each model dir carries the tokenizer files too (`_export`)
            output_kinds=(("discriminator", "model"), ("generator", "model"), ("tokenizer", "tokenizer")),
        ),
        ComponentSpec(
            "stage",
            "electra.score",
            f"{_M}.score_stage:run_score",
            # 2: ELECTRA-TT inverts the generator's sampling temperature; 3: under `precision: bf16` on a
            # CPU the heads' rows, and a batch without padding, are rounded up to a multiple of 64 rows
            # (scores may change in the last bits); 4: on a bf16 CPU attention's length buckets come in
            # rounded shapes (sequence count and length multiples of 8; scores may change in the last bits)
            "4",
            f"{_M}.score_config:ScoreConfig",
            "Pseudo-log-likelihood of every line of a text file (Electric one pass, MLM n passes, ELECTRA-TT), "
            "and n-best re-ranking with a weight chosen on a dev file.",
            outputs=("scores",),
            output_kinds=(("scores", "scores"),),
        ),
    ]


@hookimpl
def xfer_objectives() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "objective",
            "electra.rtd",
            f"{_M}.objective:RTDObjective",
            "1",
            f"{_M}.config:RTDConfig",
            "ELECTRA: a small generator replaces 15% of tokens, the discriminator detects replacements at every "
            "position (loss = MLM + 50 x detection); Table 5.7 ablations as variants.",
        ),
        ComponentSpec(
            "objective",
            "electra.mlm",
            f"{_M}.objective:MLMObjective",
            "1",
            f"{_M}.config:MLMConfig",
            "The BERT baseline: masked language modelling of 15% of tokens (80/10/10), no next-sentence task.",
        ),
    ]


@hookimpl
def xfer_models() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "model",
            "electra.generator_head",
            f"{_M}.heads:GeneratorHead",
            "1",
            None,
            "Head: MLM logits tied to the input embeddings (generator, BERT baseline); HF ElectraForMaskedLM.",
        ),
        ComponentSpec(
            "model",
            "electra.discriminator_head",
            f"{_M}.heads:DiscriminatorHead",
            "1",
            None,
            "Head: one replaced-token (or energy) logit per token; HF ElectraForPreTraining.",
        ),
        ComponentSpec(
            "model",
            "electra.cloze_head",
            f"{_M}.heads:ClozeHead",
            "1",
            None,
            "Head: the two-tower cloze model's softmax over [LTR state at t-1; RTL state at t+1].",
        ),
    ]


@hookimpl
def xfer_commands() -> list[CommandSpec]:
    return [
        CommandSpec(
            "flops",
            "analytic training FLOPs of a recipe's pre-training stages, per stage and objective",
            f"{_M}.flops_cli:configure",
            f"{_M}.flops_cli:run",
        ),
        CommandSpec(
            "score",
            "pseudo-log-likelihood of each line of a file with an ELECTRA/Electric/MLM checkpoint",
            f"{_M}.score_cli:configure",
            f"{_M}.score_cli:run",
        ),
    ]

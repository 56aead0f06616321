"""xfer-transformer's plugin (namespace `transformer`): stages, fine-tuning objectives, encoder presets, CLI."""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import CommandSpec, ComponentSpec

_M = "xfer.transformer"


@hookimpl
def xfer_stages() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "stage",
            "transformer.finetune",
            f"{_M}.finetune:run_finetune",
            # 2: task heads drawn with the encoder's initializer_range (was always 0.02), as ELECTRA's;
            # `pooler: tanh` starts from a BERT init checkpoint's pre-trained pooler (was random); a random
            # encoder's `embeddings_project` starts Glorot-uniform as in the original ELECTRA; 3: on a bf16 CPU
            # (AMX/AVX512-BF16) matmul row counts are rounded up to a multiple of 64 and the extra rows
            # draw dropout bits, so the random stream there changes (fp32 and CUDA runs are unchanged);
            # 4: on a bf16 CPU a batch without padding is rounded up to a multiple of 64 rows too (was dense);
            # 5: on a bf16 CPU attention's length buckets come in rounded shapes (multiples of 8): the bf16
            # rounding and the attention dropout's random stream change there
            "5",
            f"{_M}.finetune_config:FinetuneConfig",
            "Fine-tune an encoder per task (N seeds, median reported); GLUE/CoNLL/SQuAD via task plugins.",
            outputs=("models", "predictions", "results"),
            # models/<task>/: one model dir per task, not a model itself
            output_kinds=(("models", "task-models"), ("predictions", "predictions"), ("results", "results")),
            growable=("trials",),  # trial N depends on the config and seed + N only
        ),
        ComponentSpec(
            "stage",
            "transformer.vocab",
            f"{_M}.vocab_stage:run_vocab",
            "1",
            f"{_M}.vocab_stage:VocabConfig",
            "Train a WordPiece vocabulary (vocab.txt + tokenizer.json) from text files.",
            outputs=("tokenizer",),
            output_kinds=(("tokenizer", "tokenizer"),),
        ),
    ]


@hookimpl
def xfer_objectives() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "objective",
            "transformer.sequence",
            f"{_M}.objectives:SequenceObjective",
            "1",
            f"{_M}.objectives:SequenceConfig",
            "Sentence(-pair) classification / regression from [CLS] (cross-entropy / MSE on [0,1]-scaled targets).",
        ),
        ComponentSpec(
            "objective",
            "transformer.tagging",
            f"{_M}.objectives:TaggingObjective",
            "1",
            f"{_M}.objectives:TaggingConfig",
            "Word tagging from each word's first sub-token (POS, chunking, NER).",
        ),
        ComponentSpec(
            "objective",
            "transformer.span_qa",
            f"{_M}.objectives:SpanQAObjective",
            # 2: joint_end windows compared by the decoded span's log-probabilities; 3: no "" on SQuAD 1.1
            # with `answerable`, spans keep trailing combining marks, null odds for the official script;
            # 4: the answerability label is the question's in every window (ELECTRA's), answers covering
            # no token left out of the loss; 5: spans keep trailing format characters (soft hyphen, ZWJ)
            "5",
            f"{_M}.objectives:SpanQAConfig",
            "Extractive QA (SQuAD 1.1/2.0): start/end spans over doc-stride windows.",
        ),
    ]


@hookimpl
def xfer_models() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "model",
            "transformer.encoder",
            f"{_M}.encoder:Encoder",
            "1",
            f"{_M}.encoder:EncoderConfig",
            "BERT/ELECTRA-architecture Transformer encoder (presets: electra-small/base/large, bert-small/base/large, tiny, mini).",
        ),
        # Heads: registered like any plugin's head (see xfer.transformer.registry); model dirs
        # store them under their short kinds `sequence`, `token`, `span_qa`.
        ComponentSpec(
            "model",
            "transformer.sequence_head",
            f"{_M}.heads:SequenceHead",
            "1",
            None,
            "Head: sentence(-pair) classification/regression from [CLS]; HF *ForSequenceClassification.",
        ),
        ComponentSpec(
            "model",
            "transformer.token_head",
            f"{_M}.heads:TokenHead",
            "1",
            None,
            "Head: per-token tagging; HF *ForTokenClassification.",
        ),
        ComponentSpec(
            "model",
            "transformer.span_qa_head",
            f"{_M}.heads:SpanQAHead",
            "1",
            None,
            "Head: extractive QA start/end (+ ELECTRA's joint end / answerable extras); HF *ForQuestionAnswering.",
        ),
    ]


@hookimpl
def xfer_commands() -> list[CommandSpec]:
    return [
        CommandSpec(
            "vocab",
            "train a WordPiece vocabulary: xfer vocab train FILES --size N --out DIR",
            f"{_M}.vocab_cli:configure",
            f"{_M}.vocab_cli:run",
        )
    ]

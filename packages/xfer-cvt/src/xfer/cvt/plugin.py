"""xfer-cvt's plugin (namespace `cvt`): the `cvt.train` and `cvt.vectors` stages.

Registration only, cheap to import (no torch): the host imports every plugin at start-up.
"""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec

_M = "xfer.cvt"


@hookimpl
def xfer_stages() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "stage",
            "cvt.train",
            f"{_M}.stage:run_train",
            # 2: embeddings start at std 0.5; 3: vocabulary words past vectors_limit keep their vectors;
            # 4: task_sentences shared by two tasks (UD POS + parsing on one treebank) are written once;
            # 5: beam search never emits <pad> or <s> (translation outputs and CVT targets change);
            # 6: max_target_length (and 2 x source words + 10) counts output tokens, not the </s>;
            # 7: beam search prunes by the length-normalised score; scripts without spaces (Chinese,
            # Japanese, Thai...) are tokenized a character at a time; 8: a data word written like a
            # special (`<pad>`, `<start>`) is a word of its own, not the special's id, task draws and
            # task orders are separate random streams (the unlabeled order's too); the multi-task
            # `mean` counts a lower-is-better task's main metric negated; a projection >= the LSTM size is
            # the original's square projection (was dropped: `model: thesis` layer 2); 9: on a bf16 CPU
            # (AMX/AVX512-BF16) a transformer encoder's matmul row counts are rounded up to a multiple of 64
            # and the extra rows draw dropout bits when it is fine-tuned (fp32 and CUDA runs are unchanged);
            # 10: on a bf16 CPU a transformer encoder's attention buckets come in rounded shapes (multiples of 8)
            "10",
            f"{_M}.config:CvtConfig",
            "Cross-View Training (or its supervised / word-dropout baselines): char-CNN + BiLSTM encoder, "
            "tagging / parsing / seq2seq modules with auxiliary views, multi-task, on unlabeled text.",
            outputs=("model", "predictions", "results"),
            # a char-CNN + BiLSTM model, not a Transformer: no `init` of another stage reads it
            output_kinds=(("model", "cvt-model"), ("predictions", "predictions"), ("results", "results")),
            growable=("trials",),  # trial N depends on the config and seed + N only
        ),
        ComponentSpec(
            "stage",
            "cvt.vectors",
            f"{_M}.vectors:run_vectors",
            "2",  # 2: words starting with U+FEFF get no vector; unspaced scripts tokenized a character at a time
            f"{_M}.vectors:VectorsConfig",
            "Word vectors from unlabeled text (PPMI + truncated SVD) in GloVe format, for cvt.train's vocab.vectors "
            "when no GloVe file is at hand.",
            outputs=("vectors",),
            output_kinds=(("vectors", "vectors"),),
        ),
    ]

"""Hostile review of transformer.finetune: defects found and pinned (each test failed before its fix)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from xfer.core.tasks import Answer, SpanQAExample, TaskInfo
from xfer.transformer.encoder import Encoder
from xfer.transformer.heads import SpanQAOutput
from xfer.transformer.objectives import SpanQAObjective
from xfer.transformer.presets import preset
from xfer.transformer.tokenization import WordPieceTokenizer


def _tokenizer(tmp_path: Path) -> WordPieceTokenizer:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat . who sat where ? a cat on a mat .\n" * 20)
    return WordPieceTokenizer.train([corpus], 120, min_frequency=1)


class _FixedSpanHead(nn.Module):
    """A span head whose logits are given per window: a span (first context token, itself)
    with score `span[i]` and a null-span ([CLS], [CLS]) score `null[i]`."""

    def __init__(self, starts: list[int], span: list[float], null: list[float]):
        super().__init__()
        self.starts, self.span, self.null = starts, span, null

    def _logits(self, hidden: Tensor) -> Tensor:
        logits = torch.full(hidden.shape[:2], -1000.0)
        for row, (start, span, null) in enumerate(zip(self.starts, self.span, self.null, strict=True)):
            logits[row, start], logits[row, 0] = span / 2, null / 2
        return logits

    def forward(self, hidden: Tensor, allowed: Tensor | None = None, *rest: object) -> SpanQAOutput:
        logits = self._logits(hidden)
        return SpanQAOutput(logits, logits.clone())

    def decode(self, hidden: Tensor, start_ok: Tensor, max_answer_length: int) -> tuple[Tensor, Tensor, Tensor]:
        positions = torch.tensor(self.starts)
        return positions, positions, torch.zeros(len(self.starts))


def test_squad2_null_decision_compares_best_null_with_best_span_over_windows(tmp_path: Path) -> None:
    """SQuAD 2.0 without an answerability head: "no answer" when (min over windows of the null-span
    score) - (best span score over windows) > null_threshold, as the knob's doc and run_squad say.
    It took the minimum over windows of each window's own difference, which can say "no answer"
    although a window's null score is far below the best span's score."""
    tokenizer = _tokenizer(tmp_path)
    context = "the cat sat on the mat . " * 6
    example = SpanQAExample("q1", "who sat ?", context, (Answer("the mat", context.index("the mat")),))
    info = TaskInfo("squad2", "span_qa", (), "f1", extra={"unanswerable": True})
    encoder = Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1))
    objective = SpanQAObjective(encoder, info, tokenizer, 24, None)
    objective.config.doc_stride = 8
    features = objective.featurize([example])[:2]
    assert len(features) == 2
    starts = [f["start_ok"].index(1) for f in features]
    # window 0: best span 1, null 5 (its own difference 4); window 1: span -10, null 0 (difference 10).
    # run_squad: min null 0 - best span 1 = -1 < 0: answer with window 0's span.
    objective.head = _FixedSpanHead(starts, [1.0, -10.0], [5.0, 0.0])  # type: ignore[assignment]
    batch = objective.collate(features)
    objective.eval()
    with torch.no_grad():
        outputs = objective.predict(batch)
    predictions = objective.postprocess([example], features, outputs)
    offsets = features[0]["offsets"][starts[0]]
    assert predictions == {"q1": context[offsets[0] : offsets[1]]}
    # and a null score above every span by more than the threshold still says "no answer"
    objective.head = _FixedSpanHead(starts, [1.0, -10.0], [5.0, 3.0])  # type: ignore[assignment]
    with torch.no_grad():
        outputs = objective.predict(batch)
    assert objective.postprocess([example], features, outputs) == {"q1": ""}

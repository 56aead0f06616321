"""Hostile review of transformer.finetune: defects found and pinned (each test failed before its fix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn

from xfer.core.errors import CheckpointError
from xfer.core.tasks import Answer, SpanQAExample, TaskInfo
from xfer.testing import make_host, run_recipe_file, write_recipe
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


EXPORT_RECIPE = """\
name: t
seed: 1
stages:
  corpus: {kind: toy.corpus, sentences: 300}
  vocab: {kind: transformer.vocab, files: corpus.text, size: 200}
  ft:
    kind: transformer.finetune
    tokenizer: vocab.tokenizer
    model: tiny
    max_length: 32
    tasks: [{name: toy/agreement, train_size: 32, dev_size: 16}]
    select: best
    train: {steps: 4, batch_size: 8, eval_every: 2, checkpoint_every: 2}
"""


def test_a_missing_evaluated_checkpoint_is_an_error_not_another_checkpoint_exported(tmp_path: Path) -> None:
    """The export fell back to `latest` when the trial's recorded checkpoint was gone, writing the
    last step's weights under the metrics of the (best) checkpoint the trial was evaluated with."""
    recipe, run = write_recipe(tmp_path, EXPORT_RECIPE), tmp_path / "run"
    run_recipe_file(recipe, run, make_host(autoload=True))
    trial = run / "ft" / "trials" / "toy-agreement" / "trial-0"
    chosen = json.loads((trial / "done.json").read_text())["checkpoint"]
    latest = (trial / "checkpoints" / "latest").read_text().strip()
    assert chosen != Path(latest).name, "the setup needs a best checkpoint other than the last"
    # the stage stopped after its trials (a crash during the export), and the evaluated checkpoint was lost
    status_file = run / "ft" / "stage.json"
    status_file.write_text(json.dumps({**json.loads(status_file.read_text()), "status": "failed"}))
    for path in (trial / "checkpoints" / chosen).iterdir():
        path.unlink()
    (trial / "checkpoints" / chosen).rmdir()
    with pytest.raises(CheckpointError, match=rf"{chosen}: the checkpoint that trial 0 of toy/agreement was evaluated"):
        run_recipe_file(recipe, run, make_host(autoload=True))

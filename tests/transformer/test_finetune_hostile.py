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


def _windowed_qa(tmp_path: Path, info: TaskInfo) -> tuple[SpanQAObjective, SpanQAExample, str]:
    """A span-QA objective of 24-token windows (stride 8) and one question whose context needs several."""
    tokenizer = _tokenizer(tmp_path)
    context = "the cat sat on the mat . " * 6
    example = SpanQAExample("q1", "who sat ?", context, (Answer("the mat", context.index("the mat")),))
    encoder = Encoder(preset("tiny", vocab_size=tokenizer.vocab_size, num_layers=1))
    objective = SpanQAObjective(encoder, info, tokenizer, 24, None)
    objective.config.doc_stride = 8
    return objective, example, context


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

    def decode(
        self, hidden: Tensor, allowed: Tensor, max_answer_length: int, starts: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        positions = torch.tensor(self.starts)
        return positions, positions, torch.zeros(len(self.starts))


def test_squad2_null_decision_compares_best_null_with_best_span_over_windows(tmp_path: Path) -> None:
    """SQuAD 2.0 without an answerability head: "no answer" when (min over windows of the null-span
    score) - (best span score over windows) > null_threshold, as the knob's doc and run_squad say.
    It took the minimum over windows of each window's own difference, which can say "no answer"
    although a window's null score is far below the best span's score."""
    info = TaskInfo("squad2", "span_qa", (), "f1", extra={"unanswerable": True})
    objective, example, context = _windowed_qa(tmp_path, info)
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
    with pytest.raises(
        CheckpointError, match=rf"{chosen}: the checkpoint that trial 0 of toy/agreement \(accuracy .*\) was evaluated"
    ):
        run_recipe_file(recipe, run, make_host(autoload=True))


@pytest.mark.parametrize("joint_end", [False, True])
def test_a_span_may_end_past_the_windows_max_context_tokens(joint_end: bool) -> None:
    """Only the start must lie in a window's max-context tokens (run_squad): decoding limited the
    end too, so an answer starting near the end of one window's max-context part and ending in the
    overlap with the next was predicted by no window (the next window's start is not max-context)."""
    from xfer.transformer.heads import SpanQAHead

    torch.manual_seed(0)
    head = SpanQAHead(8, joint_end=joint_end).eval()
    hidden = torch.randn(1, 10, 8)
    allowed = torch.ones(1, 10, dtype=torch.bool)
    starts = torch.tensor([[0, 1, 1, 1, 1, 1, 0, 0, 0, 0]], dtype=torch.bool)  # max-context tokens 1..5
    with torch.no_grad():
        out = head(hidden, allowed)
        start_lp, end_lp = out.start_logits[0], out.end_logits[0]
        start, end, _ = head.decode(hidden, allowed, 30, starts=starts)
        unrestricted = head.decode(hidden, allowed, 30)
    assert bool(starts[0, start[0]]), "the start stays within the max-context tokens"
    if not joint_end:  # exhaustive search: the best start in 1..5 with any later end
        best = max(
            ((s, e) for s in range(1, 6) for e in range(s, 10)), key=lambda p: float(start_lp[p[0]] + end_lp[p[1]])
        )
        assert (int(start[0]), int(end[0])) == best
    # with ends free, the restricted search agrees with the unrestricted one whenever that one starts in 1..5
    if bool(starts[0, unrestricted[0][0]]):
        assert (int(start[0]), int(end[0])) == (int(unrestricted[0][0]), int(unrestricted[1][0]))


def test_predict_keeps_an_answer_that_ends_in_the_overlap_with_the_next_window(tmp_path: Path) -> None:
    """The objective decoded with the max-context mask as both start and end mask: an answer
    starting in window 0's max-context tokens and ending just past them came out cut short."""
    from xfer.transformer.heads import SpanQAHead

    objective, example, _ = _windowed_qa(tmp_path, TaskInfo("squad", "span_qa", (), "f1"))
    feature = objective.featurize([example])[0]
    last_start = max(i for i, ok in enumerate(feature["start_ok"]) if ok)
    end = last_start + 2
    assert feature["allowed"][end] and not feature["start_ok"][end], "the setup: an end in the overlap"
    head = SpanQAHead(objective.encoder.config.hidden_size)

    def fixed(hidden: Tensor, allowed: Tensor | None = None, *rest: object) -> SpanQAOutput:
        start_logits, end_logits = torch.zeros(hidden.shape[:2]), torch.zeros(hidden.shape[:2])
        start_logits[:, last_start], end_logits[:, end] = 10.0, 10.0
        return SpanQAOutput(start_logits, end_logits)

    head.forward = fixed  # type: ignore[method-assign]
    objective.head = head
    objective.eval()
    with torch.no_grad():
        (start, stop, _, _), *_ = objective.predict(objective.collate([feature]))
    assert (start, stop) == (last_start, end)


def test_joint_end_windows_are_compared_by_the_decoded_spans_own_score(tmp_path: Path) -> None:
    """With `joint_end` (ELECTRA's joint prediction), `predict` scored the decoded span with end
    logits conditioned on the argmax start (often [CLS]) rather than on the decoded start, so
    windows were compared by another span's end. ELECTRA's write_predictions compares
    log p(start) + log p(end | start) of the beam search: the decoded span's own score."""
    from xfer.transformer.heads import SpanQAHead

    torch.manual_seed(3)
    objective, example, _ = _windowed_qa(tmp_path, TaskInfo("squad", "span_qa", (), "f1", extra={"unanswerable": True}))
    objective.config.joint_end = True
    objective.head = SpanQAHead(objective.encoder.config.hidden_size, joint_end=True, joint_hidden=16)
    with torch.no_grad():
        objective.head.qa_outputs.bias[0] = 5.0  # every window's argmax start is elsewhere than its best span's
    objective.eval()
    features = objective.featurize([example])
    assert len(features) > 1, "the setup: several windows"
    batch = objective.collate(features)
    with torch.no_grad():
        predicted = objective.predict(batch)
        hidden = objective.hidden(batch)
        starts, ends, scores = objective.head.decode(
            hidden, batch["allowed"], objective.config.max_answer_length, starts=batch["start_ok"]
        )
        start_logits = objective.head(hidden, batch["allowed"]).start_logits
    for row, (start, end, score, null) in enumerate(predicted):
        assert (start, end) == (int(starts[row]), int(ends[row]))
        assert score == pytest.approx(float(scores[row]), abs=1e-5), (
            "the beam search's log p(start) + log p(end | start)"
        )
        assert null == pytest.approx(float(start_logits[row, 0]), abs=1e-5), "ELECTRA's null: the [CLS] start logit"

"""Task heads: shapes, pooler variants, sub-token gathering, QA losses and span decoding."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from xfer.transformer.heads import (
    SequenceHead,
    SpanQAHead,
    TokenHead,
    best_span,
    build_head,
    gather_first_subtokens,
    masked_log_softmax,
    span_loss,
    span_qa_loss,
)

H = 16


def hidden(b: int = 3, t: int = 10, seed: int = 0) -> torch.Tensor:
    return torch.randn(b, t, H, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("pooler", ["none", "tanh", "gelu"])
def test_sequence_head_variants(pooler: str) -> None:
    torch.manual_seed(0)
    head = SequenceHead(H, 3, dropout=0.1, pooler=pooler).eval()
    x = hidden()
    out = head(x)
    assert out.shape == (3, 3)
    cls = x[:, 0]
    if pooler == "none":
        expected = head.out(cls)
    elif pooler == "tanh":
        expected = head.out(torch.tanh(head.dense(cls)))
    else:
        expected = head.out(F.gelu(head.dense(cls)))
    assert torch.allclose(out, expected, atol=1e-6)
    x2 = x.clone()
    x2[:, 1:] = 0  # only [CLS] matters
    assert torch.allclose(head(x2), out)
    assert SequenceHead(H, 1).eval()(x).shape == (3, 1)  # regression
    with pytest.raises(ValueError, match="pooler"):
        SequenceHead(H, 2, pooler="max")


def test_dropout_in_training_only() -> None:
    head = SequenceHead(H, 2, dropout=0.5)
    x = hidden()
    torch.manual_seed(0)
    assert not torch.allclose(head.train()(x), head.eval()(x))


def test_token_head_and_first_subtokens() -> None:
    x = hidden()
    starts = torch.tensor([[1, 2, 5], [1, 3, 0], [4, 0, 0]])
    word_mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]])
    words = gather_first_subtokens(x, starts, word_mask)
    assert words.shape == (3, 3, H)
    assert torch.equal(words[0, 2], x[0, 5]) and torch.equal(words[1, 1], x[1, 3]) and torch.equal(words[2, 0], x[2, 4])
    assert words[1, 2].abs().sum() == 0 and words[2, 1:].abs().sum() == 0
    head = TokenHead(H, 5).eval()
    assert head(words).shape == (3, 3, 5)
    assert torch.allclose(head(words)[0, 1], head.out(x[0, 2]))


def test_masked_log_softmax_and_span_loss() -> None:
    logits = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    allowed = torch.tensor([[1, 1, 0, 0]])
    lp = masked_log_softmax(logits, allowed)
    assert torch.allclose(lp[0, :2].exp().sum(), torch.tensor(1.0))
    assert lp[0, 2:].exp().max() < 1e-30
    assert torch.allclose(span_loss(logits, torch.tensor([1]), allowed), -lp[0, 1])


def test_best_span_matches_brute_force() -> None:
    g = torch.Generator().manual_seed(0)
    start, end = torch.randn(4, 12, generator=g), torch.randn(4, 12, generator=g)
    allowed = torch.ones(4, 12, dtype=torch.bool)
    allowed[:, :3] = False  # question tokens
    allowed[1, 9:] = False  # padding
    s, e, score = best_span(start, end, allowed, max_answer_length=4)
    for b in range(4):
        candidates = [
            (start[b, i] + end[b, j], i, j)
            for i in range(12)
            for j in range(i, min(i + 4, 12))
            if allowed[b, i] and allowed[b, j]
        ]
        best = max(candidates)
        assert (s[b].item(), e[b].item()) == (best[1], best[2])
        assert torch.isclose(score[b], best[0])


def test_span_qa_head_hf_layout_and_decode() -> None:
    head = SpanQAHead(H).eval()
    x = hidden(2, 8)
    with torch.no_grad():
        head.qa_outputs.weight.zero_()
        head.qa_outputs.bias.zero_()
        head.qa_outputs.weight[0, 0] = 1.0  # start logit = feature 0
        head.qa_outputs.weight[1, 1] = 1.0  # end logit = feature 1
        x[:, :, :2] = 0
        x[0, 3, 0], x[0, 5, 1] = 10.0, 10.0  # answer 3..5
        x[1, 6, 0], x[1, 2, 1] = 10.0, 10.0  # end before start: not a valid span
        x[1, 0, 0], x[1, 0, 1] = 50.0, 50.0  # [CLS] never chosen by decode
        out = head(x)
        assert torch.equal(out.start_logits, x[..., 0]) and torch.equal(out.end_logits, x[..., 1])
        allowed = torch.ones(2, 8, dtype=torch.bool)
        start, end, _ = head.decode(x, allowed, max_answer_length=30)
    assert (start[0].item(), end[0].item()) == (3, 5)
    assert start[1].item() <= end[1].item() and start[1].item() > 0
    masked = head(x, allowed=torch.tensor([[1, 1, 1, 0, 1, 1, 1, 1]] * 2))
    assert masked.start_logits[0, 3] < -1000


def test_joint_end_answerable_head_train_and_decode() -> None:
    torch.manual_seed(0)
    head = SpanQAHead(H, joint_end=True, answerable=True, joint_hidden=12)
    x = hidden(3, 9).requires_grad_()
    allowed = torch.ones(3, 9, dtype=torch.bool)
    allowed[:, 1:3] = False
    starts, ends = torch.tensor([4, 0, 3]), torch.tensor([6, 0, 3])
    out = head(x, allowed, start_positions=starts)
    assert out.start_logits.shape == out.end_logits.shape == (3, 9) and out.na_logit.shape == (3,)
    # end logits depend on the conditioning start
    other = head(x, allowed, start_positions=torch.tensor([5, 5, 5]))
    assert not torch.allclose(out.end_logits, other.end_logits)
    loss = span_qa_loss(out, starts, ends, allowed, is_impossible=torch.tensor([0, 1, 0]))
    loss.backward()
    assert torch.isfinite(loss) and head.end_dense.weight.grad is not None and head.na_dense.weight.grad is not None
    # beam over all starts == exhaustive search
    head.eval()
    with torch.no_grad():
        s, e, score = head.decode(x, allowed, max_answer_length=3, beam_size=9)
        start_lp = masked_log_softmax(head(x, allowed).start_logits, allowed)
        for b in range(3):
            best = None
            for i in range(1, 9):
                if not allowed[b, i]:
                    continue
                end_lp = masked_log_softmax(
                    head(x[b : b + 1], allowed[b : b + 1], start_positions=torch.tensor([i])).end_logits,
                    allowed[b : b + 1],
                )[0]
                for j in range(i, min(i + 3, 9)):
                    if allowed[b, j] and (best is None or start_lp[b, i] + end_lp[j] > best[0]):
                        best = (start_lp[b, i] + end_lp[j], i, j)
            assert (s[b].item(), e[b].item()) == best[1:]
            assert torch.isclose(score[b], best[0], atol=1e-5)


def test_build_head_round_trip() -> None:
    for head in (SequenceHead(H, 2, pooler="tanh"), TokenHead(H, 4, dropout=0.2), SpanQAHead(H, answerable=True)):
        rebuilt = build_head(head.kind, head.config())
        assert type(rebuilt) is type(head) and rebuilt.config() == head.config()
        rebuilt.load_state_dict(head.state_dict())
    with pytest.raises(ValueError, match="unknown head kind"):
        build_head("pooling", {})

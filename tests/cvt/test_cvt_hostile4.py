"""Hostile review of CVT's sequence-to-sequence decoding and text handling, fourth round: what the
length limits of beam search count."""

from __future__ import annotations

import pytest
import torch

from tests.cvt.conftest import Kit

SOURCES = [["bob", "saw", "the", "dog", "near", "a", "big", "house", "."], ["mary", "runs"]]
STATE_FIELDS = ("fw1", "bw1", "fw2", "bw2", "lengths", "mask", "word_mask")
TARGET_VOCAB = ["<pad>", "<unk>", "<s>", "</s>", *[f"w{i}" for i in range(12)]]


def seq2seq_module(eos_bias: float = 0.0):
    """A tiny untrained decoder over TARGET_VOCAB (and the Kit's encoder); `eos_bias` is added to
    the </s> logit (very negative: the decoder never wants to stop)."""
    from xfer.cvt.seq2seq import EOS, Seq2seqModule

    k = Kit()
    torch.manual_seed(0)
    module = Seq2seqModule(k.encoder.full_size, 2 * k.encoder.layer2.output_size, TARGET_VOCAB, k.sizes, []).eval()
    with torch.no_grad():
        module.primary.output.bias[EOS] += eos_bias
    return k, module


# --- length limits -------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_max_target_length_is_the_number_of_output_tokens(limit: int) -> None:
    """`max_target_length: N` ("Longest output of beam search (tokens)") counted the </s> that ends
    the output: a decoder that never wants to stop produced N - 1 tokens, and N = 1 gave every
    source an empty translation (and every CVT teacher target an empty one). Beam search, the
    printed prediction and the teacher's targets must all hold N tokens, then </s>."""
    from xfer.cvt.objective import Settings
    from xfer.cvt.seq2seq import BOS, EOS, T_PAD

    k, module = seq2seq_module(eos_bias=-30.0)
    states, batch = k.states(SOURCES), k.batch(SOURCES)
    for beam in (1, 3):
        outputs = module.beam_search(states, beam, max_length=limit, length_penalty=1.0)
        assert [len(tokens) for tokens in outputs] == [limit, limit], (beam, outputs)
    settings = Settings(beam_size=2, teacher_beam_size=2, max_target_length=limit)
    assert [len(text.split(" ")) for text in module.predict(states, batch, settings)] == [limit, limit]
    targets = module.teacher(states, batch, settings)
    assert targets["dec_in"].shape == targets["dec_out"].shape == (2, limit + 1)
    for dec_in, dec_out in zip(targets["dec_in"].tolist(), targets["dec_out"].tolist(), strict=True):
        assert dec_in[0] == BOS and dec_out[-1] == EOS and dec_in[1:] == dec_out[:-1], (dec_in, dec_out)
        assert T_PAD not in dec_out and all(t > EOS for t in dec_out[:-1]), dec_out


def test_the_source_length_limit_is_two_tokens_per_source_word_plus_ten() -> None:
    """Below `max_target_length`, an output may hold 2 x source words + 10 tokens (the </s> not
    counted, as for `max_target_length`); it stopped one short (27 and 13 here)."""
    _, module = seq2seq_module(eos_bias=-30.0)
    k = Kit()
    outputs = module.beam_search(k.states(SOURCES), 2, max_length=100, length_penalty=1.0)
    assert [len(tokens) for tokens in outputs] == [2 * 9 + 10, 2 * 2 + 10]
    outputs = module.beam_search(k.states(SOURCES), 2, max_length=20, length_penalty=1.0)
    assert [len(tokens) for tokens in outputs] == [20, 14]


# --- what beam search finds (checked, no defect: pinned against regressions) -------------------------


def test_a_source_decodes_alike_alone_and_in_a_padded_batch() -> None:
    """Beam search is batched over sources x beams: a short source beside long ones (padded memory,
    a larger length limit for the batch, hypotheses of other sources still running after its own
    have ended) must get the output it gets alone."""
    import random

    from tests.cvt.conftest import WORDS

    k, module = seq2seq_module(eos_bias=-1.5)
    rng = random.Random(1)
    sources = [[rng.choice(WORDS) for _ in range(rng.randint(1, 12))] for _ in range(8)]
    for beam, penalty in ((1, 0.0), (3, 1.0)):
        together = module.beam_search(k.states(sources), beam, max_length=20, length_penalty=penalty)
        alone = [module.beam_search(k.states([s]), beam, max_length=20, length_penalty=penalty)[0] for s in sources]
        assert together == alone, (beam, penalty)


@pytest.mark.parametrize("penalty", [0.0, 1.0])
def test_a_beam_wider_than_every_output_finds_the_best_one_by_its_normalised_score(penalty: float) -> None:
    """Over 3 target words and `<unk>` with `max_target_length: 2` there are 21 outputs; a beam of 32
    keeps them all, so its answer must be the exhaustive maximum of log p / (tokens + 1)**penalty
    (the </s> counted in the length), scored here by teacher forcing: hypotheses that ended early
    keep their score, and none is cut short or lost."""
    import itertools

    import torch.nn.functional as F

    from xfer.cvt.model import EncoderStates
    from xfer.cvt.seq2seq import BOS, EOS, T_UNK, Seq2seqModule

    k = Kit()
    vocab = ["<pad>", "<unk>", "<s>", "</s>", "w0", "w1", "w2"]
    states = k.states(SOURCES)
    torch.manual_seed(8)
    module = Seq2seqModule(k.encoder.full_size, 2 * k.encoder.layer2.output_size, vocab, k.sizes, []).eval()
    with torch.no_grad():  # a peaked decoder (penalty 1: two-token outputs win, 0: empty ones)
        module.primary.output.weight.mul_(6.0)
        module.primary.output.bias.normal_(0.0, 1.0)
    found = module.beam_search(states, 32, max_length=2, length_penalty=penalty)
    outputs = [list(o) for n in range(3) for o in itertools.product([T_UNK, 4, 5, 6], repeat=n)]
    for b, tokens in enumerate(found):
        sub = EncoderStates(*(getattr(states, f)[b : b + 1] for f in STATE_FIELDS))

        def score(output: list[int], sub=sub) -> float:
            hidden, memory = module.decode_states(sub, torch.tensor([[BOS, *output]]), 0.0)
            index = torch.arange(len(output) + 1)
            logp = F.log_softmax(module.head_logits(module.primary, hidden, memory, sub.mask, index), -1)
            total = float(logp.gather(1, torch.tensor([*output, EOS])[:, None]).sum())
            return total / (len(output) + 1) ** penalty

        with torch.no_grad():
            best = max(outputs, key=score)
            assert score(tokens) == pytest.approx(score(best), abs=1e-5), (b, tokens, best)

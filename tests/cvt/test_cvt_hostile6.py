"""Hostile review of CVT's dependency decoding and sequence-to-sequence modules, sixth round (h151):
what the tree decoder makes of degenerate scores, and what beam search keeps."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cvt.conftest import Kit
from tests.cvt.test_mst import all_trees
from xfer.cvt.mst import chu_liu_edmonds, max_tree, tree_score

# --- the maximum spanning tree decoder -----------------------------------------------------------


@pytest.mark.parametrize("single_root", [False, True])
def test_a_nan_arc_score_is_an_impossible_arc_not_the_best_one(single_root: bool) -> None:
    """numpy's argmax takes NaN for the maximum: a NaN arc (an overflowing model's inf - inf) was
    chosen over every finite arc into its word, and the tree returned scored far below the best
    tree of finite arcs (in 271 of 600 random 1-5-word matrices). A NaN arc is impossible, as -inf."""
    rng = np.random.default_rng(0)
    trees = {(n, single_root): list(all_trees(n, single_root)) for n in range(1, 6)}
    for trial in range(150):
        n = 1 + trial % 5
        scores = rng.normal(size=(n + 1, n + 1))
        scores[rng.random(scores.shape) < 0.2] = np.nan
        scores[0, 1 + trial % n] = rng.normal()  # a finite ROOT arc: a finite tree exists
        heads = max_tree(scores, single_root) if single_root else chu_liu_edmonds(scores)
        clean = np.where(np.isnan(scores), -np.inf, scores)
        assert any(np.array_equal(heads, t) for t in trees[n, single_root]), heads
        best = max(tree_score(clean, t) for t in trees[n, single_root])
        assert tree_score(clean, heads) == pytest.approx(best), (trial, scores, heads)


def test_a_nan_arc_into_a_word_loses_to_its_finite_arcs() -> None:
    """The smallest case: word 2 may hang from ROOT (score 0) or word 1 (NaN)."""
    scores = np.array([[0.0, 5.0, 0.0], [0.0, 0.0, np.nan], [0.0, 1.0, 0.0]])
    assert max_tree(scores, single_root=False).tolist() == [-1, 0, 0]
    assert chu_liu_edmonds(scores).tolist() == [-1, 0, 0]
    assert max_tree(scores).tolist() == [-1, 2, 0]  # one root word: 2 -> 1 (1.0) beats 1 -> 2 (NaN)


def test_when_every_one_root_tree_is_impossible_the_one_with_the_fewest_impossible_arcs_wins() -> None:
    """No ROOT arc is possible (every score from ROOT -inf): every tree scores -inf, and the tree
    of the first word tried as root was returned, whatever impossible arcs it needed and however
    bad its other arcs. The decoder must return the tree the finite scores favour: one impossible
    (ROOT) arc, then the best arcs between words."""
    rng = np.random.default_rng(2)
    for n in range(2, 6):
        trees = list(all_trees(n, True))
        for _ in range(20):
            scores = rng.normal(size=(n + 1, n + 1))
            scores[0, 1:] = -np.inf
            heads = max_tree(scores)
            assert int((heads[1:] == 0).sum()) == 1
            words = scores.copy()
            words[0, 1:] = 0.0  # every tree has exactly one ROOT arc: compare the other arcs
            best = max(tree_score(words, t) for t in trees)
            assert tree_score(words, heads) == pytest.approx(best), (scores, heads)


def test_mst_decoding_of_the_parsing_module_finds_the_best_one_root_tree() -> None:
    """`parse_decoding: mst` maps the module's score columns (ROOT, <start>, words) to the decoder's
    nodes (ROOT, words): its trees must be the best one-root trees by the summed log head
    marginals, found by brute force, and ROOT arcs must carry a root relation (checked, no defect:
    pinned against regressions of that mapping)."""
    import random

    import torch

    from tests.cvt.conftest import WORDS, Kit
    from xfer.cvt.objective import Settings
    from xfer.cvt.parsing import ParsingModule

    k = Kit()
    relations = ["det", "nsubj", "obj", "punct", "root"]
    torch.manual_seed(3)
    module = ParsingModule(k.encoder.full_size, k.encoder.uni_size, 16, 8, relations, ["root"], []).eval()
    rng = random.Random(0)
    sentences = [[rng.choice(WORDS) for _ in range(rng.randint(1, 5))] for _ in range(16)]
    states, batch = k.states(sentences), k.batch(sentences)
    with torch.no_grad():
        predicted = module.predict(states, batch, Settings(parse_decoding="mst"))
        logprobs = module.primary_logprobs(states, 0.0)
    logprobs = logprobs.view(logprobs.shape[0], -1, len(relations)).clone()
    logprobs[:, 1:, relations.index("root")] = float("-inf")  # never on an arc between words (test_cvt_hostile7)
    start = 0
    for words, (heads, labels) in zip(sentences, predicted, strict=True):
        n = len(words)
        marginal = torch.logsumexp(logprobs[start : start + n].view(n, -1, len(relations)), -1)
        start += n

        def score(tree: list[int], marginal: torch.Tensor = marginal) -> float:
            return sum(float(marginal[d, 0 if h == 0 else h + 1]) for d, h in enumerate(tree))

        best = max((list(t[1:]) for t in all_trees(n, True)), key=score)
        assert score(heads) == pytest.approx(score(best), abs=1e-5), (words, heads, best)
        assert [r for h, r in zip(heads, labels, strict=True) if h == 0] == ["root"]


# --- beam search ---------------------------------------------------------------------------------


def bigram_decoder(next_logp: dict[str, dict[str, float]]):
    """A Seq2seqModule whose next-token log-probabilities depend only on the previous token (a
    table; tokens not listed share what is left), so that what beam search scores is known."""
    import math

    import torch
    from torch import nn

    from xfer.cvt.seq2seq import Seq2seqModule

    k = Kit()
    vocab = ["<pad>", "<unk>", "<s>", "</s>", "w0", "w1"]
    module = Seq2seqModule(k.encoder.full_size, 2 * k.encoder.layer2.output_size, vocab, k.sizes, []).eval()
    table = torch.full((len(vocab), len(vocab)), -1e4)  # <pad>, <s>: never (-inf would make 0 * -inf = NaN)
    for previous, row in next_logp.items():
        rest = [w for w in vocab if w not in row and w not in ("<pad>", "<s>")]
        left = math.log(1.0 - sum(math.exp(v) for v in row.values())) - math.log(len(rest))
        for word in vocab:
            if word not in ("<pad>", "<s>"):
                table[vocab.index(previous), vocab.index(word)] = row.get(word, left)

    class Last(nn.Module):  # the decoder "LSTM": its output is the previous token (one-hot)
        def forward(self, emb, state):
            return emb, state

    class Bigram(nn.Module):  # attention and softmax: the table's row of the previous token
        def key(self, memory):
            return memory

        def attention_vectors(self, hidden, memory, keys, mask, p_attention=0.0):
            return hidden

        def output(self, a):
            return a @ table

    module.embedding = nn.Embedding.from_pretrained(torch.eye(len(vocab)))
    module.lstm, module.primary = Last(), Bigram()
    return k, module


def test_beam_search_prunes_by_the_normalised_score_it_ranks_by() -> None:
    """`length_penalty` ("beam hypotheses are ranked by log-probability / length**this") ranked only
    the final beam: the search kept its hypotheses by raw log-probability, so a finished short one
    (its raw score frozen, never decreasing) held its slot against longer ones that rank above it.
    Here, beam 2, at most 2 tokens: "" scores -1.0 (raw and normalised), "w0" -1.4 raw (-0.7
    normalised, the best output), "w0 w1 ..." -1.3 raw so far: "w0" was pruned for "" and "w0 w1",
    and the search returned "" (a beam of 3 found "w0"). TF's BeamSearchDecoder, which the thesis'
    NMT code builds on, prunes by the length-penalised score too. Beam 1 stays greedy decoding."""
    from xfer.cvt.seq2seq import EOS

    k, module = bigram_decoder(
        {"<s>": {"</s>": -1.0, "w0": -0.5}, "w0": {"w1": -0.8, "</s>": -0.9}, "w1": {"</s>": -3.0}, "<unk>": {}}
    )
    states = k.states([["the", "dog"]])
    w0, w1 = 4, 5
    assert EOS == 3
    assert module.beam_search(states, 3, max_length=2, length_penalty=1.0) == [[w0]]
    assert module.beam_search(states, 2, max_length=2, length_penalty=1.0) == [[w0]]
    assert module.beam_search(states, 2, max_length=2, length_penalty=0.0) == [[]]  # raw: "" -1.0 beats -1.4
    assert module.beam_search(states, 1, max_length=2, length_penalty=1.0) == [[w0, w1]]  # greedy

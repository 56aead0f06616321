"""Each auxiliary view sees exactly what the thesis says, checked by perturbing one input word.

A view "depends on" word k at position t if replacing word k (by a word of another length, so
the char-CNN input changes too) changes that view's output at t. Each test also asserts the
dependencies that must exist, so a broken encoder that ignores its input cannot pass.
"""

from __future__ import annotations

import pytest
import torch

from xfer.cvt.data import Featurizer
from xfer.cvt.model import EncoderStates, reverse_within_lengths
from xfer.cvt.parsing import ParsingModule
from xfer.cvt.seq2seq import Seq2seqModule
from xfer.cvt.tagging import TaggingModule

from .conftest import WORDS, Kit

REPLACEMENT = "yesterday"  # longer than every word it replaces


def perturbed(sentences: list[list[str]], k: int) -> list[list[str]]:
    """Word k (1-based) of the first sentence replaced."""
    first = list(sentences[0])
    first[k - 1] = REPLACEMENT
    return [first, *sentences[1:]]


def per_word(states: EncoderStates, rows: torch.Tensor) -> dict[tuple[int, int], torch.Tensor]:
    """Rows of a [N, ...] tensor (one per word, in batch order) keyed by (sentence, position)."""
    index = states.word_mask.nonzero().tolist()
    return {(b, t): rows[i] for i, (b, t) in enumerate(index)}


def changed(a: torch.Tensor, b: torch.Tensor) -> bool:
    return not torch.allclose(a, b, rtol=0, atol=1e-6)


# --- tagging -----------------------------------------------------------------------------------

ALLOWED = {  # may the view's prediction for word t depend on word k?
    "fwd": lambda t, k: k <= t,
    "bwd": lambda t, k: k >= t,
    "future": lambda t, k: k < t,
    "past": lambda t, k: k > t,
    "full": lambda t, k: True,
}


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_tagging_views_see_only_their_side(kit, sentences, packed):
    k = kit(packed=packed)
    module = TaggingModule(k.encoder.full_size, k.encoder.uni_size, 16, ["A", "B", "C"], list(ALLOWED)).eval()
    base_states = k.states(sentences)
    base = {v: per_word(base_states, logits) for v, (logits, _) in module.view_logits(base_states).items()}
    n = len(sentences[0])
    for position in range(1, n + 1):
        states = k.states(perturbed(sentences, position))
        after = {v: per_word(states, logits) for v, (logits, _) in module.view_logits(states).items()}
        for view, allowed in ALLOWED.items():
            for (b, t), row in base[view].items():
                moved = changed(row, after[view][(b, t)])
                if b == 1:
                    assert not moved, f"{view}: sentence 1 changed when sentence 0 was perturbed"
                elif not allowed(t, position):
                    assert not moved, f"{view} at position {t} depends on word {position}"
                elif view in ("fwd", "bwd") and t == position:
                    # the direct dependency must exist, otherwise the test proves nothing
                    assert moved, f"{view} at position {t} ignores word {position}"
        for (b, t), row in base["future"].items():
            if b == 0 and t == position + 1:
                assert changed(row, after["future"][(b, t)]), "future ignores the previous word"
        for (b, t), row in base["past"].items():
            if b == 0 and t == position - 1:
                assert changed(row, after["past"][(b, t)]), "past ignores the next word"


def test_future_and_past_are_not_trained_on_sentence_edges(kit, sentences):
    k = kit()
    module = TaggingModule(k.encoder.full_size, k.encoder.uni_size, 16, ["A", "B"], ["future", "past"])
    states = k.states(sentences)
    views = module.view_logits(states)
    future, past = per_word(states, views["future"][1]), per_word(states, views["past"][1])
    for b, sentence in enumerate(sentences):
        n = len(sentence)
        assert future[(b, 1)] == 0 and all(future[(b, t)] == 1 for t in range(2, n + 1))
        assert past[(b, n)] == 0 and all(past[(b, t)] == 1 for t in range(1, n))


def test_packed_and_padded_lstms_compute_the_same_states(kit, sentences):
    padded, packed = kit(packed=False), kit(packed=True)
    packed.encoder.load_state_dict(padded.encoder.state_dict())
    a, b = padded.states(sentences), packed.states(sentences)
    mask = a.mask[..., None]
    for name in ("fw1", "bw1", "fw2", "bw2"):
        torch.testing.assert_close(getattr(a, name) * mask, getattr(b, name) * mask, rtol=1e-5, atol=1e-6)


def test_reversal_within_lengths_and_its_gradient_match_a_gather(kit):
    torch.manual_seed(0)
    lengths = torch.tensor([5, 1, 3, 5])
    x = torch.randn(4, 5, 3, dtype=torch.float64, requires_grad=True)
    steps = torch.arange(5)[None, :]
    last = (lengths - 1)[:, None]
    expected = x.gather(1, torch.where(steps <= last, last - steps, steps)[..., None].expand(-1, -1, 3))
    out = reverse_within_lengths(x, lengths)
    assert torch.equal(out, expected)
    assert torch.equal(out[2, 3:], x[2, 3:]), "padding stays where it was"
    assert torch.equal(reverse_within_lengths(out, lengths), x), "its own inverse"
    weight = torch.randn(4, 5, 3, dtype=torch.float64)
    (grad,) = torch.autograd.grad((out * weight).sum(), x)
    (expected_grad,) = torch.autograd.grad((expected * weight).sum(), x)
    assert torch.equal(grad, expected_grad)
    torch.autograd.gradcheck(lambda t: reverse_within_lengths(t, lengths), (x,))


def test_char_cnn_pools_relu_of_windows_inside_the_word(kit):
    cnn = kit().encoder.char_cnn
    chars = torch.tensor([[2, 5, 6, 7, 3, 0, 0], [2, 5, 3, 0, 0, 0, 0]])
    lengths = torch.tensor([5, 3])
    x = cnn.embedding(chars).transpose(1, 2)
    expected = []
    for width, conv in zip(cnn.widths, cnn.convs, strict=True):
        y = torch.relu(conv(x))
        windows = [(lengths[u] - width).clamp_min(0).item() + 1 for u in range(2)]
        expected.append(torch.stack([y[u, :, : windows[u]].amax(-1) for u in range(2)]))
    torch.testing.assert_close(cnn(chars, lengths), torch.cat(expected, -1))


# --- parsing -----------------------------------------------------------------------------------

SIDES = {"fwd": lambda pos, k: k <= pos, "bwd": lambda pos, k: k >= pos}


def test_parsing_views_see_only_their_sides(kit, sentences):
    """Score s(u, t, r) of view 'h-d' may depend on word k only through the head's view (h at u)
    or the dependent's view (d at t); the ROOT column only through the dependent's."""
    k = kit()
    views = ["fwd-fwd", "fwd-bwd", "bwd-fwd", "bwd-bwd"]
    module = ParsingModule(k.encoder.full_size, k.encoder.uni_size, 12, 6, ["a", "b", "root"], ["root"], views).eval()

    def scores(states: EncoderStates) -> torch.Tensor:
        sides = {"fwd": states.fw1, "bwd": states.bw1}
        heads = torch.stack([sides[v.split("-")[0]] for v in views])
        deps = torch.stack([sides[v.split("-")[1]] for v in views])
        return module.views(heads, deps, 0.0)  # [V, B, T, 1 + T, R]

    base = scores(k.states(sentences))
    n = len(sentences[0])
    checked = 0
    for position in range(1, n + 1):
        after = scores(k.states(perturbed(sentences, position)))
        for v, view in enumerate(views):
            head_side, dep_side = view.split("-")
            for t in range(1, n + 1):
                for column in [0, *range(2, n + 2)]:  # ROOT, then words 1..n (<start> is never a head)
                    u = column - 1
                    may = SIDES[dep_side](t, position) or (column > 0 and SIDES[head_side](u, position))
                    moved = changed(base[v, 0, t, column], after[v, 0, t, column])
                    if not may:
                        assert not moved, f"{view}: score of head {u} -> word {t} depends on word {position}"
                    elif (t == position or u == position) and column > 1:
                        assert moved, f"{view}: score of head {u} -> word {t} ignores word {position}"
                        checked += 1
            assert not changed(base[v, 1], after[v, 1]), "another sentence changed"
    assert checked > 0


# --- seq2seq -----------------------------------------------------------------------------------


def seq2seq_module(k) -> Seq2seqModule:
    vocab = ["<pad>", "<unk>", "<s>", "</s>", *[f"w{i}" for i in range(12)]]
    module = Seq2seqModule(
        k.encoder.full_size, 2 * k.encoder.layer2.output_size, vocab, k.sizes, ["attention_dropout", "future"]
    )
    return module.eval()


def test_future_decoder_never_sees_the_token_it_skips(kit, sentences):
    """The future decoder predicts y_{s+2} from step s, where the decoder has read y_1..y_s only;
    the primary decoder's prediction of the same token (at step s+1) reads y_{s+1}."""
    k = kit()
    module = seq2seq_module(k)
    states = k.states(sentences)
    dec_in = torch.tensor([[2, 5, 6, 7, 8, 9], [2, 10, 11, 12, 13, 0]])
    hidden, _ = module.decode_states(states, dec_in, 0.0)
    every = torch.arange(hidden.shape[0] * hidden.shape[1])

    def logits(head, dec) -> torch.Tensor:
        h, m = module.decode_states(states, dec, 0.0)
        return module.head_logits(head, h, m, states.mask, every).view(2, -1, len(module.vocab))

    future_base, primary_base = logits(module.aux["future"], dec_in), logits(module.primary, dec_in)
    for s in range(dec_in.shape[1] - 1):
        changed_in = dec_in.clone()
        changed_in[0, s + 1] = 15  # y_{s+1}
        future, primary = logits(module.aux["future"], changed_in), logits(module.primary, changed_in)
        assert not changed(future_base[0, s], future[0, s]), f"future decoder at step {s} saw y_{s + 1}"
        assert changed(primary_base[0, s + 1], primary[0, s + 1]), "primary decoder ignores the previous token"
        assert not changed(future_base[1], future[1])


def test_attention_dropout_decoder_does_not_see_dropped_positions(kit, sentences, monkeypatch):
    """The content of source positions whose attention weight is dropped does not reach the decoder's
    output; the others' does. (Attention dropout zeroes weights after the softmax, as standard
    attention dropout: a dropped position's key still enters the normalisation, its value does
    not.) The dropout mask is fixed by a stand-in so that the dropped positions are known."""
    import xfer.cvt.seq2seq as seq2seq

    k = kit()
    module = seq2seq_module(k)
    dropped = {0: [2, 4, 6], 1: [1, 3]}
    rates = []

    def fixed_dropout(x, p, training=True):
        rates.append(p)
        if p == 0:
            return x
        mask = torch.ones_like(x)
        for b, positions in dropped.items():
            mask[b, :, positions] = 0
        return x * mask / (1 - p)

    monkeypatch.setattr(seq2seq, "dropout", fixed_dropout)
    head = module.aux["attention_dropout"]
    hidden = torch.randn(2, 3, k.sizes["decoder"])

    states = k.states(sentences)
    memory = states.full
    keys = head.key(memory)

    def output(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return head.attention_vectors(hidden, values, keys, mask, 0.5)

    base = output(memory, states.mask)
    for b, length in enumerate(states.lengths.tolist()):
        for j in range(length):
            poked = memory.clone()
            poked[b, j] += 1.0
            moved = changed(base[b], output(poked, states.mask)[b])
            assert moved != (j in dropped[b]), f"sentence {b}, source position {j}: dropped={j in dropped[b]}"
    assert 0.5 in rates


def test_seq2seq_auxiliaries_share_embeddings_and_lstm_only(kit):
    k = kit()
    module = seq2seq_module(k)
    shared = {id(p) for p in (*module.embedding.parameters(), *module.lstm.parameters())}
    for name, head in [("primary", module.primary), *module.aux.items()]:
        own = {id(p) for p in head.parameters()}
        assert own and not own & shared, name
    assert not {id(p) for p in module.primary.parameters()} & {id(p) for p in module.aux["future"].parameters()}


def test_beam_search_of_width_one_is_greedy_decoding(kit, sentences):
    import torch.nn.functional as F

    from xfer.cvt.seq2seq import BOS, EOS

    k = kit()
    module = seq2seq_module(k)
    with torch.no_grad():
        module.primary.output.bias[EOS] -= 2.0  # longer outputs: more steps compared
    states = k.states(sentences)
    found = module.beam_search(states, beam=1, max_length=7, length_penalty=0.0)
    for b, tokens in enumerate(found):
        one = EncoderStates(
            *(getattr(states, f)[b : b + 1] for f in ("fw1", "bw1", "fw2", "bw2", "lengths", "mask", "word_mask"))
        )
        greedy = [BOS]
        while len(greedy) <= 7:  # max_length 7: at most 7 output tokens, then the limit forces </s>
            hidden, memory = module.decode_states(one, torch.tensor([greedy]), 0.0)
            logits = module.head_logits(module.primary, hidden, memory, one.mask, torch.tensor([len(greedy) - 1]))
            token = int(F.log_softmax(logits, -1).argmax())
            if token == EOS:
                break
            greedy.append(token)
        assert tokens == greedy[1:]
    wide = module.beam_search(states, beam=3, max_length=7, length_penalty=1.0)
    assert all(len(t) <= 7 for t in wide)


def test_a_frozen_unk_gives_unknown_words_only_their_characters(kit):
    """`vocab.train_unk: false` (the default): an out-of-vocabulary word reads a zero word vector that
    gets no gradient, whatever the <unk> row holds; with `true` the row is looked up and trained."""
    from xfer.cvt.vocab import UNK

    k = kit()
    unknown = [["bob", "saw", "zebras", "."]]
    assert k.batch(unknown)["words"][0, 3].item() == UNK
    with torch.no_grad():
        k.encoder.word_embedding.weight[UNK].normal_()  # as if trained on unlabeled text
    assert k.encoder.train_unk is False  # the default
    k.encoder.train_unk = True
    trained = k.states(unknown).full
    k.encoder.train_unk = False
    frozen = k.states(unknown).full
    with torch.no_grad():
        k.encoder.word_embedding.weight[UNK].zero_()
    assert torch.equal(frozen, k.states(unknown).full)  # the row's value does not matter
    k.encoder.train_unk = True
    assert torch.equal(frozen, k.states(unknown).full)  # ... and equals a zero <unk>
    assert not torch.equal(trained, frozen)
    k.encoder.train_unk = False
    k.states(unknown).full.sum().backward()
    grad = k.encoder.word_embedding.weight.grad
    assert grad[UNK].abs().sum() == 0 and grad[k.vocab.word_id("bob")].abs().sum() > 0


# --- Transformer features ----------------------------------------------------------------------


def kit_with_features(joins: str) -> Kit:
    """The tiny kit with a tiny Transformer whose word pieces are the kit's words (so a perturbed
    word changes the features too), its features joining at `joins`."""
    from xfer.cvt.model import TransformerFeatures, WordEncoder
    from xfer.transformer.encoder import Encoder, EncoderConfig
    from xfer.transformer.tokenization import WordPieceTokenizer

    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    torch.manual_seed(0)
    transformer = Encoder(
        EncoderConfig(
            vocab_size=len(pieces), embedding_size=16, hidden_size=16, num_layers=1, num_heads=2,
            intermediate_size=32, max_position_embeddings=64,
        )
    )  # fmt: skip
    k = Kit()
    tokenizer = WordPieceTokenizer.from_vocab({p: i for i, p in enumerate(pieces)})
    k.featurizer = Featurizer(k.vocab, k.sizes["max_word_chars"], tokenizer, 32)
    features = TransformerFeatures(transformer, -1, False, 1.0)
    k.encoder = WordEncoder(k.sizes, len(k.vocab.words), len(k.vocab.chars), features=features, features_join=joins)
    k.encoder.eval()
    return k


def leaks(k: Kit, sentences: list[list[str]]) -> list[str]:
    """(view, position, perturbed word) triples where a tagging view sees a word it must not."""
    module = TaggingModule(k.encoder.full_size, k.encoder.uni_size, 16, ["A", "B", "C"], list(ALLOWED)).eval()
    base_states = k.states(sentences)
    base = {v: per_word(base_states, logits) for v, (logits, _) in module.view_logits(base_states).items()}
    found = []
    for position in range(1, len(sentences[0]) + 1):
        states = k.states(perturbed(sentences, position))
        after = {v: per_word(states, logits) for v, (logits, _) in module.view_logits(states).items()}
        for view, allowed in ALLOWED.items():
            for (b, t), row in base[view].items():
                if b == 0 and not allowed(t, position) and changed(row, after[view][(b, t)]):
                    found.append(f"{view}@{t}<-{position}")
        full_moved = [changed(row, after["full"][(b, t)]) for (b, t), row in base["full"].items() if b == 0]
        assert all(full_moved), "the full view must see every word (through layer 2 at least)"
    return found


def test_transformer_features_joining_layer_2_keep_the_views_restricted(sentences):
    assert leaks(kit_with_features("layer2"), sentences) == []
    # the same features in layer 1's input show every view the whole sentence: the check can fail
    assert any(leak.startswith("future@") for leak in leaks(kit_with_features("input"), sentences))

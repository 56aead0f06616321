"""Sequence-to-sequence module: LSTM decoder with bilinear attention and CVT's auxiliary decoders
(thesis 4.2.4).

The source is read by the shared CVT encoder; its states [h1; h2] at every position (words and
<start>/<end>) are the attention memory. The decoder LSTM reads the previous target token (teacher
forcing: the whole target sequence in one LSTM call, no input feeding, as the thesis' equations):

    alpha_j ∝ exp(m_j W_alpha h_t)     c_t = sum_j alpha_j m_j     a_t = tanh(W_a [c_t; h_t])
    p(y_t | y_<t, x) = softmax(W_s a_t)

Auxiliary decoders share the target embeddings and the decoder LSTM with the primary one and
have their own attention (W_alpha, W_a) and softmax (W_s):
- `attention_dropout`: dropout on its attention weights alpha (a random subset of the source
  positions is hidden from it at every step);
- `future`: predicts y_{t+1} from its attention vector at step t, i.e. without seeing y_t;
- `full` (opt-in): sees the whole source, with the students' dropout but no attention dropout.
  METHODS.md and thesis 4.2.4 name the two decoders above; thesis 4.3.1 adds to every task's
  auxiliary modules one "that sees the whole input rather than a subset (but unlike the primary
  prediction module, does have dropout applied to its representations)", which tagging and
  parsing have as their `full` view and translation had no way to add.
On unlabeled sentences the teacher is the primary decoder's beam search (hard targets), and the
auxiliary decoders learn those outputs with label smoothing.

Target tokens: `<pad> <unk> <s> </s>` then words (`text.tokenize_joined`, joiners mark tokens
written without a space before them, so outputs detokenise exactly).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xfer.cvt.model import EncoderStates, dropout, init_linear, init_lstm
from xfer.cvt.text import detokenize

TARGET_SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")
T_PAD, T_UNK, BOS, EOS = range(4)
VIEWS = ("attention_dropout", "future", "full")


class AttentionHead(nn.Module):
    """Bilinear attention + attention layer + softmax layer of one decoder."""

    def __init__(self, memory_size: int, decoder_size: int, vocab: int):
        super().__init__()
        self.key = init_linear(nn.Linear(memory_size, decoder_size, bias=False))  # m_j W_alpha
        self.combine = init_linear(nn.Linear(memory_size + decoder_size, decoder_size, bias=False))
        self.output = init_linear(nn.Linear(decoder_size, vocab))

    def attention_vectors(
        self, hidden: Tensor, memory: Tensor, keys: Tensor, memory_mask: Tensor, p_attention: float = 0.0
    ) -> Tensor:
        """hidden [B, L, H], memory [B, T, M], keys [B, T, H] -> a [B, L, H]."""
        scores = torch.bmm(hidden, keys.transpose(1, 2)).float()
        scores = scores.masked_fill(~memory_mask[:, None, :], float("-inf"))
        alpha = F.softmax(scores, dim=-1)
        alpha = dropout(alpha, p_attention, self.training)
        context = torch.bmm(alpha.to(memory.dtype), memory)
        return torch.tanh(self.combine(torch.cat([context, hidden.to(context.dtype)], dim=-1)))


class Seq2seqModule(nn.Module):
    kind = "seq2seq"

    def __init__(
        self,
        memory_size: int,
        summary_size: int,
        target_vocab: Sequence[str],
        sizes: dict[str, Any],
        views: Sequence[str],
    ):
        super().__init__()
        self.vocab = list(target_vocab)
        decoder = sizes["decoder"]
        self.embedding = nn.Embedding(len(self.vocab), sizes["target_dim"], padding_idx=T_PAD)
        nn.init.normal_(self.embedding.weight, std=sizes["target_dim"] ** -0.5)
        self.lstm = nn.LSTM(sizes["target_dim"], decoder, batch_first=True)
        init_lstm(self.lstm)
        self.init_state = init_linear(nn.Linear(summary_size, decoder))
        self.primary = AttentionHead(memory_size, decoder, len(self.vocab))
        self.aux = nn.ModuleDict({v: AttentionHead(memory_size, decoder, len(self.vocab)) for v in VIEWS if v in views})

    # --- decoder pieces --------------------------------------------------------------------------

    def memory(self, states: EncoderStates) -> tuple[Tensor, Tensor]:
        """(memory [B, T, M], initial (h, c) [1, B, H]) from the encoder states."""
        rows = torch.arange(states.lengths.shape[0], device=states.lengths.device)
        summary = torch.cat([states.fw2[rows, states.lengths - 1], states.bw2[:, 0]], dim=-1)
        h0 = torch.tanh(self.init_state(summary))[None]
        return states.full, (h0, torch.zeros_like(h0))

    def decode_states(self, states: EncoderStates, dec_in: Tensor, p: float) -> tuple[Tensor, Tensor]:
        """Teacher forcing: decoder LSTM outputs [B, L, H] (dropout p) and the memory."""
        memory, (h0, c0) = self.memory(states)
        emb = dropout(self.embedding(dec_in), p, self.training)
        hidden, _ = self.lstm(emb, (h0.to(emb.dtype), c0.to(emb.dtype)))
        return dropout(hidden, p, self.training), memory

    def head_logits(
        self, head: AttentionHead, hidden: Tensor, memory: Tensor, mask: Tensor, index: Tensor, p_attention: float = 0.0
    ) -> Tensor:
        """Logits [N, V] at the flat decoder positions `index`."""
        keys = head.key(memory)
        a = head.attention_vectors(hidden, memory, keys, mask, p_attention)
        return head.output(a.flatten(0, 1).index_select(0, index)).float()

    # --- the objective's protocol ----------------------------------------------------------------

    def supervised(
        self, states: EncoderStates, batch: dict[str, Tensor], smoothing: float, p: float
    ) -> tuple[list, dict]:
        hidden, memory = self.decode_states(states, batch["dec_in"], p)
        gold = batch["dec_out"].flatten()
        index = (gold != T_PAD).nonzero().squeeze(1)
        logits = self.head_logits(self.primary, hidden, memory, states.mask, index)
        gold = gold[index]
        loss = F.cross_entropy(logits, gold, label_smoothing=smoothing, reduction="sum")
        correct = (logits.argmax(-1) == gold).sum()
        return [("primary", loss, logits.new_tensor(gold.numel()))], {"correct": correct, "total": gold.numel()}

    @torch.no_grad()
    def teacher(self, states: EncoderStates, batch: dict[str, Tensor], settings: Any) -> dict[str, Tensor]:
        """Hard targets: the primary decoder's beam search output, as teacher-forcing tensors."""
        outputs = self.beam_search(
            states, settings.teacher_beam_size, settings.max_target_length, settings.length_penalty
        )
        width = max(len(o) for o in outputs) + 1
        device = states.lengths.device
        dec_in = torch.full((len(outputs), width), T_PAD, dtype=torch.long, device=device)
        dec_out = torch.full((len(outputs), width), T_PAD, dtype=torch.long, device=device)
        for b, tokens in enumerate(outputs):
            dec_in[b, : len(tokens) + 1] = torch.tensor([BOS, *tokens], device=device)
            dec_out[b, : len(tokens) + 1] = torch.tensor([*tokens, EOS], device=device)
        return {"dec_in": dec_in, "dec_out": dec_out}

    def student_losses(
        self,
        states: EncoderStates,
        batch: dict[str, Tensor],
        targets: dict[str, Tensor],
        settings: Any,
        primary_only: bool,
    ) -> list[tuple[str, Tensor, Tensor]]:
        hidden, memory = self.decode_states(states, targets["dec_in"], settings.student_dropout)
        gold = targets["dec_out"]
        smoothing = settings.teacher_label_smoothing
        losses = []

        def add(name: str, head: AttentionHead, gold: Tensor, p_attention: float = 0.0, shift: int = 0) -> None:
            flat = gold.flatten()
            index = (flat != T_PAD).nonzero().squeeze(1)
            logits = self.head_logits(
                head, hidden[:, : hidden.shape[1] - shift], memory, states.mask, index, p_attention
            )
            loss = F.cross_entropy(logits, flat[index], label_smoothing=smoothing, reduction="sum")
            losses.append((name, loss, logits.new_tensor(index.numel())))

        if primary_only:
            add("primary", self.primary, gold)
            return losses
        if "attention_dropout" in self.aux:
            add("attention_dropout", self.aux["attention_dropout"], gold, settings.attention_dropout)
        if "future" in self.aux:
            # step s predicts gold[s + 1]: the token after the next one, without having read it
            add("future", self.aux["future"], gold[:, 1:], shift=1)
        if "full" in self.aux:
            add("full", self.aux["full"], gold)
        return losses

    @torch.no_grad()
    def predict(self, states: EncoderStates, batch: dict[str, Tensor], settings: Any) -> list[str]:
        """Detokenised beam search outputs. An emitted `<unk>` (a target word seen fewer than
        `target_min_count` times) is kept as the text "<unk>", spaced off its neighbours, so the
        prediction file shows where the model had no word. BLEU counts it as unmatched text, but
        sacrebleu's 13a (and intl) tokenizer cuts it into three tokens `<` `unk` `>` where BLEU on
        tokenized text (multi-bleu) counts one: each `<unk>` adds two unmatched tokens."""
        outputs = self.beam_search(states, settings.beam_size, settings.max_target_length, settings.length_penalty)
        return [detokenize([self.vocab[i] for i in tokens]) for tokens in outputs]

    # --- beam search -----------------------------------------------------------------------------

    @torch.no_grad()
    def beam_search(self, states: EncoderStates, beam: int, max_length: int, length_penalty: float) -> list[list[int]]:
        """Best output (token ids without <s>/</s>) of each source, ranked by log p / len**length_penalty.

        Batched over sources x beams, with no Python loop over sentences: a hypothesis that emitted
        </s> stays in its beam with a frozen score (it only extends with padding at no cost), a
        hypothesis that holds its source's length limit of output tokens (2 x source words + 10, at
        most `max_length`; the </s> after them not counted) can only emit </s>, and the search stops
        when every hypothesis has ended. The limit counted the </s>: `max_target_length: N` gave at
        most N - 1 tokens, and 1 gave every source an empty output. Each step keeps the `beam`
        candidates of a source with the best normalised score (finished ones included; TF's
        BeamSearchDecoder prunes by its penalised score too), and among the final ones the best
        wins; with length_penalty 0 that is the raw log p, and a beam of 1 is greedy decoding (a
        row's candidates share one length). Kept by raw log p, a finished short hypothesis held its
        slot against longer ones that ranked above it, and a beam of 2 returned an output a beam of
        3 beat. <pad> and <s> are never emitted: no target holds them, yet an undertrained decoder could rank them first
        (a <pad> then vanished from the output its hypothesis was scored as, and a CVT teacher
        target lost a token; a <s> was printed as the text "<s>")."""
        memory, (h, c) = self.memory(states)
        batch, device, vocab = memory.shape[0], memory.device, len(self.vocab)
        keys = self.primary.key(memory)
        memory_k, keys_k = memory.repeat_interleave(beam, 0), keys.repeat_interleave(beam, 0)
        mask_k = states.mask.repeat_interleave(beam, 0)
        h, c = h.repeat_interleave(beam, 1), c.repeat_interleave(beam, 1)
        rows = batch * beam
        scores = torch.full((batch, beam), float("-inf"), device=device)
        scores[:, 0] = 0.0
        tokens = torch.full((rows, 1), BOS, dtype=torch.long, device=device)
        ended = torch.zeros(rows, dtype=torch.bool, device=device)
        lengths = torch.zeros(rows, device=device)
        limits = torch.clamp(2 * (states.lengths - 2) + 10, max=max_length).repeat_interleave(beam).to(device)
        offsets = (torch.arange(batch, device=device) * beam)[:, None]
        for step in range(int(limits.max()) + 1):  # + 1: the </s> after `limits` tokens
            emb = self.embedding(tokens[:, -1:])
            out, (h, c) = self.lstm(emb, (h.to(emb.dtype), c.to(emb.dtype)))
            a = self.primary.attention_vectors(out, memory_k, keys_k, mask_k)
            logp = F.log_softmax(self.primary.output(a[:, 0]).float(), dim=-1)  # [B*K, V]
            logp[:, (T_PAD, BOS)] = float("-inf")  # never targets: a <pad> was dropped from the output
            last = (step >= limits) & ~ended  # `step` tokens emitted so far: only </s> may follow
            logp[last] = torch.where(torch.arange(vocab, device=device) == EOS, logp[last], float("-inf"))
            logp[ended] = float("-inf")
            logp[ended, T_PAD] = 0.0
            totals = (scores.view(-1, 1) + logp).view(batch, beam * vocab)
            # kept by the score they are ranked by: by raw log p, a finished short hypothesis (its
            # score frozen) held its slot against longer ones of a better normalised score
            grown = (lengths + (~ended).float()).clamp_min(1.0)  # every candidate of a row: same length
            ranked = totals.view(rows, vocab) / grown[:, None] ** length_penalty if length_penalty > 0 else totals
            top = ranked.view(batch, beam * vocab).topk(beam, dim=-1).indices
            top_scores = totals.gather(1, top)
            source = (offsets + top // vocab).view(-1)
            token = (top % vocab).view(-1)
            lengths = grown[source]
            ended = ended[source] | (token == EOS)
            tokens = torch.cat([tokens[source], token[:, None]], dim=1)
            h, c = h[:, source], c[:, source]
            scores = top_scores
            if bool(ended.all()):
                break
        ranked = scores.view(-1) / lengths.clamp_min(1.0) ** length_penalty if length_penalty > 0 else scores.view(-1)
        best = (offsets.view(-1) + ranked.view(batch, beam).argmax(-1)).tolist()
        results = []
        for row in best:
            path = tokens[row, 1:].tolist()
            results.append([t for t in path if t not in (EOS, T_PAD)])
        return results

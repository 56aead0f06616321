"""The CVT sentence encoder, top to bottom (thesis 4.2.1).

    words ──> word embedding ─┐
    chars ──> char-CNN ───────┴─ sum (or concat) = v
    v ──> BiLSTM layer 1 ──> fw1, bw1   (kept separate: the auxiliary views read them)
    [fw1; bw1 (; Transformer features)] ──> BiLSTM layer 2 ──> fw2, bw2

Optional Transformer features join layer 2's input by default (`joins: layer2`): each one has
attended to the whole sentence, so in layer 1's input they would give every auxiliary view the
words it must not see. `joins: input` puts them next to v instead (needed when they replace it).

Dropout (its rate is an argument of `forward`, because labeled, unlabeled and teacher passes use
different rates on the same weights) is applied where the original code applies it: on the word
embeddings, on each char-CNN output, and on the outputs of every LSTM. What comes before any
dropout (the char-CNN's word vectors, frozen Transformer features) is the same in every pass over a
batch: `inputs(batch)` computes it once, and an unlabeled CVT step hands it to both its teacher and
its student pass (the teacher would otherwise redo ~20% of its work for identical numbers).

Each direction of each layer is its own unidirectional `nn.LSTM`, so a view that reads only
`fw1` provably never sees a word to the right (the tests perturb inputs to check it). Two
implementations give the same result: `packed` runs PackedSequences (cuDNN), `padded` runs the
forward LSTM on right-padded input and the backward LSTM on each sentence reversed within its
length (padding stays at the end, so it never reaches a real position) — on CPU this uses oneDNN's
fused kernel and is 2-3x faster than packing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from xfer.cvt.vocab import PAD, UNK
from xfer.transformer.kernels import dropout as _kernel_dropout

EMBEDDING_STD = 0.5
"""Initial std of word and character embeddings. The original starts from GloVe 300d vectors,
whose components have std ~0.4; with a 1/sqrt(dim) init (0.09 here) the first LSTM's inputs are
so small (its outputs start at std 0.05) that NER stays on "everything is O" for ~400 SGD steps
(measured: dev F1 29 vs 60 after 400 steps of 10% CoNLL-2003 with std 0.5; std 1.0 gave 58)."""


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Inverted dropout; on CPU xfer's kernel that draws the mask from random bits (bernoulli_
    costs ~10% of a CVT step there)."""
    return _kernel_dropout(x, p, training) if training and p > 0 else x


@dataclass
class EncoderStates:
    """Per-position states of a batch [B, T, .]; positions 0 and n+1 are <start>/<end>."""

    fw1: Tensor
    bw1: Tensor
    fw2: Tensor
    bw2: Tensor
    lengths: Tensor  # [B], including the two boundary tokens
    mask: Tensor  # [B, T] bool: real positions (words and boundary tokens)
    word_mask: Tensor  # [B, T] bool: the words (positions 1..n)

    @property
    def full(self) -> Tensor:
        """[h1; h2]: what the primary modules read."""
        return torch.cat([self.fw1, self.bw1, self.fw2, self.bw2], dim=-1)

    def dropped(self, p: float) -> EncoderStates:
        """The same states with dropout on each (students of the `shared` teacher pass)."""
        if p <= 0:
            return self
        return replace(
            self, fw1=dropout(self.fw1, p), bw1=dropout(self.bw1, p), fw2=dropout(self.fw2, p), bw2=dropout(self.bw2, p)
        )

    def detached(self) -> EncoderStates:
        return replace(self, fw1=self.fw1.detach(), bw1=self.bw1.detach(), fw2=self.fw2.detach(), bw2=self.bw2.detach())


@dataclass
class EncoderInputs:
    """The dropout-free part of a batch's encoding (see `WordEncoder.inputs`)."""

    char_rows: Tensor | None  # [U, char features]: one row per distinct word of the batch
    features: Tensor | None  # [B, T, H]: frozen Transformer features, None when absent or fine-tuned


def reverse_within_lengths(x: Tensor, lengths: Tensor) -> Tensor:
    """x[b, :L_b] reversed in time for each b; positions >= L_b unchanged. Its own inverse.

    Whole rows are copied with `index_select` (an element-wise `gather` over [B, T, D] and its
    scatter-add backward cost 5-8x more; together they were ~5% of a training step), and the
    backward pass applies the same permutation to the gradient, since it is its own inverse."""
    batch, width = x.shape[:2]
    steps = torch.arange(width, device=x.device)[None, :]
    last = (lengths.to(x.device) - 1)[:, None]
    index = torch.where(steps <= last, last - steps, steps)
    rows = (index + width * torch.arange(batch, device=x.device)[:, None]).flatten()
    return _PermuteRows.apply(x, rows)


class _PermuteRows(torch.autograd.Function):
    """y[b, t] = x.flatten(0, 1)[rows[b * T + t]] for a permutation `rows` that is its own inverse."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, rows: Tensor) -> Tensor:
        ctx.save_for_backward(rows)
        return x.reshape(-1, *x.shape[2:]).index_select(0, rows).view(x.shape)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (rows,) = ctx.saved_tensors
        return _PermuteRows.apply(grad, rows), None


class BiLSTM(nn.Module):
    """Two unidirectional LSTMs (forward, backward) over the same input; outputs kept apart.

    `projection` P: LSTMP cells as the original's `LSTMCell(size, num_proj=min(size, P))`, whose
    output (and recurrent state) is the cell output times a projection matrix. Below the LSTM size
    that is torch's `proj_size`. At or above it the original still projects, with a square matrix,
    which torch's LSTM cannot run (it tells a projection by h and c differing in size). A square
    projection W_p computes the same function in another parametrisation: the LSTMP with recurrent
    matrix W_hm equals a plain LSTM with W_hh = W_hm W_p whose outputs are multiplied by W_p, which
    is what runs here (`fw_proj`, `bw_proj`; the plain LSTM keeps oneDNN's fused CPU kernel). It was
    dropped without a word, so `model: thesis` (LSTM 512, projection 512) had none on layer 2."""

    def __init__(self, input_size: int, hidden: int, projection: int | None = None):
        super().__init__()
        proj = projection if projection is not None and projection < hidden else 0
        self.fw = nn.LSTM(input_size, hidden, batch_first=True, proj_size=proj)
        self.bw = nn.LSTM(input_size, hidden, batch_first=True, proj_size=proj)
        self.output_size = proj or hidden
        for lstm in (self.fw, self.bw):
            init_lstm(lstm)
        square = projection is not None and projection >= hidden
        self.fw_proj = init_linear(nn.Linear(hidden, hidden, bias=False)) if square else None
        self.bw_proj = init_linear(nn.Linear(hidden, hidden, bias=False)) if square else None

    def forward(self, x: Tensor, lengths: Tensor, packed: bool) -> tuple[Tensor, Tensor]:
        reversed_x = reverse_within_lengths(x, lengths)
        if packed:
            fw, bw = self._run_packed(self.fw, x, lengths), self._run_packed(self.bw, reversed_x, lengths)
        else:
            fw, bw = self.fw(x)[0], self.bw(reversed_x)[0]
        if self.fw_proj is not None and self.bw_proj is not None:
            fw, bw = self.fw_proj(fw), self.bw_proj(bw)  # no bias: packed padding stays 0
        return fw, reverse_within_lengths(bw, lengths)

    @staticmethod
    def _run_packed(lstm: nn.LSTM, x: Tensor, lengths: Tensor) -> Tensor:
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = lstm(packed)
        return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]


def init_lstm(lstm: nn.LSTM) -> None:
    """TF LSTMCell defaults of the original code: Glorot-uniform weights, forget-gate bias 1."""
    for name, param in lstm.named_parameters():
        if name.startswith("weight"):
            nn.init.xavier_uniform_(param)
        elif name.startswith("bias"):
            nn.init.zeros_(param)
            if name.startswith("bias_ih"):
                hidden = param.shape[0] // 4
                with torch.no_grad():
                    param[hidden : 2 * hidden] = 1.0  # gate order i, f, g, o


def init_linear(module: nn.Linear) -> nn.Linear:
    """Glorot-uniform weight, zero bias (TF's dense default)."""
    nn.init.xavier_uniform_(module.weight)
    if module.bias is not None:
        nn.init.zeros_(module.bias)
    return module


class CharCNN(nn.Module):
    """Character embeddings -> one convolution per width -> ReLU -> max over the word.

    Only windows inside the word (<bow> ... <eow>) are pooled, so a word's vector does not depend
    on how long the other words of the batch are (a batch-independence the view tests rely on)."""

    def __init__(self, n_chars: int, char_dim: int, filters: int, widths: list[int]):
        super().__init__()
        self.embedding = nn.Embedding(n_chars, char_dim, padding_idx=0)
        nn.init.normal_(self.embedding.weight, std=EMBEDDING_STD)
        with torch.no_grad():
            self.embedding.weight[0].zero_()
        self.convs = nn.ModuleList(nn.Conv1d(char_dim, filters, w) for w in widths)
        self.widths = list(widths)
        self.output_size = filters * len(widths)

    def forward(self, chars: Tensor, lengths: Tensor) -> Tensor:
        """chars [U, L] (padded with 0), lengths [U] -> [U, filters * len(widths)]."""
        if chars.shape[1] < max(self.widths):
            chars = F.pad(chars, (0, max(self.widths) - chars.shape[1]))
        x = self.embedding(chars).transpose(1, 2).contiguous()  # once, not in each of the convolutions
        outputs = []
        for width, conv in zip(self.widths, self.convs, strict=True):
            y = conv(x)  # [U, F, L - w + 1]
            starts = torch.arange(y.shape[-1], device=y.device)[None, :]
            outside = starts > (lengths.to(y.device)[:, None] - width).clamp_min(0)
            # max(relu(y)) = relu(max(y)): the ReLU runs on [U, F], not on every window
            outputs.append(F.relu(y.masked_fill(outside[:, None, :], float("-inf")).amax(dim=-1)))
        return torch.cat(outputs, dim=-1)


class TransformerFeatures(nn.Module):
    """Per-word features from an xfer Transformer `Encoder`: the state of each word's first
    sub-token (layer `layer`), windows of long sentences stitched back together.

    Frozen (default): the Transformer stays in eval mode and runs without gradient. Fine-tuned:
    its gradients are multiplied by `lr_scale` (SGD with the LSTM's learning rate would wreck it),
    and its own dropout is on in training passes but off in dropout-free ones (`dropout_free`: the
    CVT teacher, which the thesis defines as the primary module seeing the input without noise)."""

    def __init__(self, encoder: nn.Module, layer: int = -1, finetune: bool = False, lr_scale: float = 1.0):
        super().__init__()
        self.encoder, self.layer, self.finetune = encoder, layer, finetune
        self.output_size = encoder.config.hidden_size
        for param in encoder.parameters():
            param.requires_grad_(finetune)
            if finetune and lr_scale != 1.0:
                param.register_hook(lambda grad, s=lr_scale: grad * s)
        if not finetune:
            encoder.eval()

    def train(self, mode: bool = True) -> TransformerFeatures:
        super().train(mode)
        if not self.finetune:
            self.encoder.eval()
        return self

    def forward(self, batch: dict[str, Tensor], width: int, dropout_free: bool = False) -> Tensor:
        quiet_now = dropout_free and self.encoder.training
        if quiet_now:
            self.encoder.eval()
        try:
            with torch.set_grad_enabled(self.finetune and torch.is_grad_enabled()):
                out = self.encoder(batch["wp_ids"], batch["wp_mask"], output_hidden_states=self.layer != -1)
                hidden = out.last_hidden_state if self.layer == -1 else out.hidden_states[self.layer]
        finally:
            if quiet_now:
                self.encoder.train()
        rows, words = batch["wp_starts"].shape
        picked = hidden.gather(1, batch["wp_starts"][..., None].expand(-1, -1, hidden.shape[-1]))  # [R, W, H]
        valid = torch.arange(words, device=hidden.device)[None, :] < batch["wp_count"][:, None]
        target_b = batch["wp_sentence"][:, None].expand(rows, words)[valid]
        target_t = (batch["wp_first"][:, None] + 1 + torch.arange(words, device=hidden.device)[None, :])[valid]
        out_features = hidden.new_zeros(int(batch["lengths"].shape[0]), width, hidden.shape[-1])
        out_features[target_b, target_t] = picked[valid]
        return out_features


class WordEncoder(nn.Module):
    """Word embedding + char-CNN (+ Transformer features) -> two BiLSTM layers (see module doc)."""

    def __init__(
        self,
        sizes: dict[str, Any],
        n_words: int,
        n_chars: int,
        *,
        features: TransformerFeatures | None = None,
        features_only: bool = False,
        features_join: str = "layer2",
        packed: bool = False,
        train_unk: bool = False,
    ):
        super().__init__()
        self.sizes, self.packed, self.features_only = dict(sizes), packed, features_only
        self.train_unk = train_unk
        self.word_embedding: nn.Embedding | None = None
        self.char_cnn: CharCNN | None = None
        input_size = 0
        if not features_only:
            self.word_embedding = nn.Embedding(n_words, sizes["word_dim"], padding_idx=0)
            nn.init.normal_(self.word_embedding.weight, std=EMBEDDING_STD)
            with torch.no_grad():
                self.word_embedding.weight[:2].zero_()  # <pad>, <unk>: an unseen word adds nothing
            self.char_cnn = CharCNN(n_chars, sizes["char_dim"], sizes["char_filters"], sizes["char_widths"])
            if sizes["char_combine"] == "sum":
                if self.char_cnn.output_size != sizes["word_dim"]:
                    raise ValueError("char_combine 'sum' needs word_dim == char_filters x len(char_widths)")
                input_size = sizes["word_dim"]
            else:
                input_size = sizes["word_dim"] + self.char_cnn.output_size
        self.features = features
        if features_only and features_join != "input":
            raise ValueError("features that replace the word + char input must join layer 1's input")
        self.features_at_input = features is not None and features_join == "input"
        if self.features_at_input:
            input_size += features.output_size
        self.layer1 = BiLSTM(input_size, sizes["lstm1"], sizes["projection"])
        layer2_input = 2 * self.layer1.output_size
        if features is not None and not self.features_at_input:
            layer2_input += features.output_size
        self.layer2 = BiLSTM(layer2_input, sizes["lstm2"], sizes["projection"])
        self.uni_size = self.layer1.output_size
        self.full_size = 2 * self.layer1.output_size + 2 * self.layer2.output_size

    def inputs(self, batch: dict[str, Tensor]) -> EncoderInputs:
        """What every pass over `batch` computes alike, whatever its dropout rate (module doc).
        Fine-tuned Transformer features are left out: they run in training mode, with their own
        dropout, in each pass."""
        rows = None if self.char_cnn is None else self.char_cnn(batch["chars"], batch["char_lengths"])
        frozen = self.features is not None and not self.features.finetune
        return EncoderInputs(rows, self.features(batch, batch["words"].shape[1]) if frozen else None)

    def embed(self, batch: dict[str, Tensor], p: float, features: Tensor | None, char_rows: Tensor | None) -> Tensor:
        """Layer 1's input [B, T, D]: v (dropout p on word embeddings and char-CNN outputs), and the
        Transformer `features` when they join here."""
        parts = []
        if self.word_embedding is not None and char_rows is not None:
            ids = batch["words"]
            if not self.train_unk:  # <unk> looked up as <pad>: a zero row that gets no gradient
                ids = ids.masked_fill(ids == UNK, PAD)
            words = dropout(self.word_embedding(ids), p, self.training)
            chars = dropout(char_rows[batch["slots"]], p, self.training)  # per token, as the original
            parts.append(words + chars if self.sizes["char_combine"] == "sum" else torch.cat([words, chars], dim=-1))
        if features is not None:
            parts.append(features)
        return parts[0] if len(parts) == 1 else torch.cat([parts[0], parts[1].to(parts[0].dtype)], dim=-1)

    def forward(
        self, batch: dict[str, Tensor], p: float, inputs: EncoderInputs | None = None, clean: bool = False
    ) -> EncoderStates:
        """The states of `batch` with dropout rate `p`; `inputs` = `self.inputs(batch)` when the
        caller already has them (they may also come from a batch that differs only in its word ids
        and slots, as the word-dropout student's does). `clean`: the CVT teacher's pass, without
        any noise: fine-tuned Transformer features then run without their own dropout too."""
        lengths = batch["lengths"]
        width = batch["words"].shape[1]
        positions = torch.arange(width, device=lengths.device)[None, :]
        mask = positions < lengths[:, None]
        word_mask = mask & (positions > 0) & (positions < (lengths - 1)[:, None])
        inputs = inputs if inputs is not None else self.inputs(batch)
        features = inputs.features
        if self.features is not None and features is None:
            features = self.features(batch, width, dropout_free=clean)
        features = None if features is None else dropout(features, p, self.training)
        v = self.embed(batch, p, features if self.features_at_input else None, inputs.char_rows)
        fw1, bw1 = self.layer1(v, lengths, self.packed)
        fw1, bw1 = dropout(fw1, p, self.training), dropout(bw1, p, self.training)
        layer2_parts = [fw1, bw1]
        if features is not None and not self.features_at_input:
            layer2_parts.append(features.to(fw1.dtype))
        fw2, bw2 = self.layer2(torch.cat(layer2_parts, dim=-1), lengths, self.packed)
        fw2, bw2 = dropout(fw2, p, self.training), dropout(bw2, p, self.training)
        return EncoderStates(fw1, bw1, fw2, bw2, lengths, mask, word_mask)

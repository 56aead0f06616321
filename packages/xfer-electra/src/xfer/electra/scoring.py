"""Pseudo-log-likelihoods (PLL) of text under ELECTRA-family checkpoints (thesis 5.4.5).

PLL(x) = sum_t log p(x_t | x without t), summed over the text's word pieces ([CLS]/[SEP] are
added around it and never scored). Methods, by what the checkpoint can do:

- `electric` (an `electric.nce` checkpoint): log p(x_t | x\\t) ~ -E(x)_t, the energy that the
  discriminator head outputs. ONE pass of the unmasked text scores every token.
- `mlm` (an `electra.mlm` checkpoint, or ELECTRA's masked-LM generator): log softmax at x_t with
  x_t replaced by [MASK]: one pass per token. The (text, position) pairs of all texts form one
  flat list of rows, each a copy of its text with one [MASK], cut into batches of rows of similar
  length; only the masked row's logits are computed (`MaskedGenerator.logits_at`).
- `electra-tt` (an `electra.rtd` checkpoint with a two-tower generator): the thesis inverts the
  optimal discriminator, p = k q D / ((n - k)(1 - D)), i.e.
      log p(x_t | x\\t) ~ log q(x_t | context) + log(k / (n - k)) + logit D_real(x)_t,
  with D_real = 1 - sigmoid(detection logit), so logit D_real = -(detection logit). One pass of
  the discriminator and one of the two-tower cloze model, both on the unmasked text.
  k / (n - k) is the *constant* mask_prob / (1 - mask_prob) of the checkpoint's objective (0.15 /
  0.85), not round(mask_prob * n) of the scored sentence: the discriminator learned its prior
  from packed pre-training examples (~max_length tokens, where k / n is mask_prob up to
  rounding), never from a short sentence on its own, so the training ratio is the one its
  logits are calibrated to. (ELECTRA also labels a sample equal to the original as real, which
  this inversion, like the thesis's, ignores.) q is the noise the discriminator was trained
  against: softmax(logits / T) with the generator's sampling `temperature` T (recorded in the
  checkpoint's objective config; 1 by default). With T != 1 the cloze model's own q is not what
  D's prior was calibrated to, and inverting with it shifted every token score by log q_T - log q.
- `two-tower` (not chosen by `auto`): the cloze model alone, sum_t log q(x_t | context): the
  thesis's "TwoTower" baseline of Table 5.9. One pass.

Long texts: a text of more than max_length - 2 pieces is scored in overlapping windows of
max_length tokens ([CLS] window [SEP]) that advance by half a window (the last one is moved back to
end at the text's end, so every window is full); every piece is scored
exactly once, in the window where it has the most context on its nearer side (the doc-stride
rule of BERT's SQuAD code), so no token is dropped and none is scored without context. The
result says how many windows a text took. max_length defaults to what the checkpoint records
(`max_length` in its meta) or else its position embeddings (512 for ELECTRA presets).

Empty texts (nothing left after tokenization) are an error naming file and line, or, with
`empty="zero"`, a PLL of 0 over 0 tokens (flagged `empty` in the output). Texts containing the
literal special tokens [CLS]/[SEP]/[MASK]/[PAD] are refused: the model would read them as
structure. [UNK] pieces are scored like any other piece (often very unlikely: ~-18 nats each on a
toy model), so `xfer score` counts them in its summary: many of them mean the text is out of the
tokenizer's vocabulary and its PLL says more about that than about the text.

Everything runs batched under `torch.inference_mode`, in eval mode (no dropout), on any device.
The same texts with the same batch size give the same scores, but a text's score depends
slightly on which texts share its batch (the padded width changes the order in which the kernels
sum): ~1e-5 nats per token, up to 3e-5 on a PLL in fp32. It is not bit-exact across batch sizes,
inputs or ranks; compare scores with a tolerance. fp32 by default: a PLL sums hundreds of
log-probabilities and re-ranking compares sums that differ by little; bf16 autocast (about 3
significant digits per token score) is available for speed.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from xfer.core.errors import CheckpointError, DataError, UserError
from xfer.core.textfile import read_text, split_lines
from xfer.electra.heads import ClozeHead, DiscriminatorHead, GeneratorHead
from xfer.electra.model import MaskedGenerator, TwoTower
from xfer.electra.objective import kernel_rows, recorded_objective
from xfer.electra.rerank import NON_FINITE, NBestList, bom_in_text, check_plls, json_object, unwritable
from xfer.transformer.encoder import Encoder

METHODS = ("auto", "electric", "mlm", "electra-tt", "two-tower")
PASSES = {"electric": "1 pass", "mlm": "n passes", "electra-tt": "1 pass of each model", "two-tower": "1 pass"}
Progress = Callable[[int], None]
EMPTY_MESSAGE = "empty text: nothing to score (remove it, or score empty texts as 0 with empty: zero / --empty zero)"


# --- texts -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One text to score and where it came from (for error messages and output records)."""

    text: str
    path: str
    line: int
    id: Any = None
    has_id: bool = False
    """The record had an `id` key: `"id": null` is carried to the output as null. Output records
    left the key out for a null id, so that line's record had no `id` while its neighbours had one."""
    key: str | None = None
    """Where in the line's record the text is, for errors (an n-best hypothesis: `hypotheses[3]`): the
    line of an n-best list holds many texts, and "z.jsonl:1: empty text" did not say which."""


JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")


def input_format(path: str | Path, fmt: str = "auto") -> str:
    """`text` or `jsonl`: `fmt` itself, or for `auto` what the suffix says (`JSONL_SUFFIXES` are JSONL)."""
    if fmt == "auto":
        return "jsonl" if Path(path).suffix.lower() in JSONL_SUFFIXES else "text"
    if fmt not in ("text", "jsonl"):
        raise UserError(f"unknown input format {fmt!r} (text or jsonl)")
    return fmt


def read_texts(path: str | Path, fmt: str = "auto", text_field: str = "text", *, recipe: bool = False) -> list[Line]:
    """The texts of a plain-text file (one per line) or a JSONL file (`text_field` of each object).

    `fmt="auto"` reads `.jsonl`, `.json` and `.ndjson` files as JSONL and anything else as text,
    except that a file read as text under `auto` whose first non-empty line is a JSON object is
    refused: it is almost surely JSON lines with another suffix, and scoring its raw
    `{"text": ...}` lines gives plausible-looking numbers for the wrong strings (an explicit
    `fmt="text"` scores it as text). `recipe=True` words that error for a recipe (the stage's
    `format` key) rather than for `xfer score` (`--format`). In a text file every line is a text
    (an empty one too: what happens to it is the scorer's `empty` policy); a byte-order mark starting
    a later line (`cat` of two files) is refused, as the other readers do: it was kept in the
    output text. Lines are cut by
    `xfer.core.textfile.split_lines` (on "\\n" only, so line numbers match editors'; a CRLF's CR
    dropped): a carriage return anywhere else is an error naming its line, because with CR-only
    (classic Mac) endings the whole file would otherwise be one text, silently. In JSONL, blank
    lines hold no record and are skipped; every other line must be an object with a string
    `text_field` (an optional `id` is carried to the output), no key given twice, and no NaN,
    Infinity or lone surrogate escape in the text or the id (`rerank.unwritable`), and no byte-order
    mark in the text (`rerank.bom_in_text`, as a text file's line and an n-best text).
    """
    path = Path(path)
    sniff = fmt == "auto"
    fmt = input_format(path, fmt)
    # a file of blank lines holds texts (empty ones, for the `empty` policy); only a file without lines is empty
    rows = split_lines(path, read_text(path, allow_empty=True))
    if not rows:
        raise DataError(path, 1, "file is empty")
    if sniff and fmt == "text":
        _refuse_json_lines(path, rows, recipe)
    lines = []
    for number, raw in enumerate(rows, start=1):
        if fmt == "text":
            lines.append(Line(raw, str(path), number))
            continue
        if not raw.strip():
            continue
        record = json_object(raw, path, number, rows)
        if text_field not in record:
            raise DataError(path, number, f"no {text_field!r} field (keys: {', '.join(sorted(record)) or 'none'})")
        text = record[text_field]
        if not isinstance(text, str):
            raise DataError(path, number, f"must be a string, got {type(text).__name__}", key=text_field)
        # the text goes to the tokenizer and the id to the output: a lone surrogate or a NaN crashed
        # them with a bare traceback, after the scoring (`rerank.unwritable`)
        for key, value in ((text_field, text), ("id", record.get("id"))):
            if (problem := unwritable(value)) is not None:
                raise DataError(path, number, problem, key=key)
        # a BOM starting a text line is refused (`split_lines`), and in an n-best text too: in a JSON
        # string it was scored silently ("the\ufeffcat" is one unknown word, a single [UNK] piece)
        if (problem := bom_in_text(text)) is not None:
            raise DataError(path, number, problem, key=text_field)
        lines.append(Line(text, str(path), number, record.get("id"), "id" in record, key=text_field))
    if not lines:
        raise DataError(path, 0, "no records to score")
    return lines


def _refuse_json_lines(path: Path, rows: Sequence[str], recipe: bool = False) -> None:
    """A DataError when the first non-empty line of a file about to be read as text is a JSON object;
    it says how to choose the format where the user is (a recipe key, or the command's option)."""
    import json

    number, first = next(((n, r.strip()) for n, r in enumerate(rows, start=1) if r.strip()), (0, ""))
    if not first.startswith("{"):
        return
    try:
        value = json.loads(first)
    except ValueError:
        return
    if isinstance(value, dict):
        jsonl, text = ("set format: jsonl", "format: text") if recipe else ("pass --format jsonl", "--format text")
        where = " in the electra.score stage" if recipe else ""
        raise DataError(
            path,
            number,
            "looks like JSON lines (this line is a JSON object), but the file name does not end in "
            f"{', '.join(JSONL_SUFFIXES)}, so it would be scored as plain text: {jsonl}{where} (or name it "
            f".jsonl) to score its text field, or {text} to score the raw lines as text",
        )


# --- segments and windows ------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """One encoder input, `[CLS] pieces[start:start+len] [SEP]`, and which of its positions to score."""

    text: int  # index of the text it belongs to
    ids: tuple[int, ...]
    scored: tuple[int, ...]  # positions in `ids` (1 .. len-2) scored in this segment
    start: int  # index in the text's pieces of ids[1]


def windows(n: int, budget: int) -> list[tuple[int, int, list[int]]]:
    """`(start, end, owned)` windows over `n` pieces, each at most `budget` long, advancing by
    `budget // 2` (the last one ends at `n`, a full window); `owned` are the pieces this window scores. Every piece is owned exactly once,
    by the window giving it the largest min(left context, right context) (ties: the earlier)."""
    if budget < 1:
        raise ValueError(f"a window must hold at least one piece, got budget {budget}")
    if n <= budget:
        return [(0, n, list(range(n)))]
    stride = max(1, budget // 2)
    starts = list(range(0, n - budget, stride))
    starts.append(n - budget)  # the last window ends at the text's end and is full: its head gets context too
    spans = [(start, start + budget) for start in starts]
    owner = [0] * n
    best = [-1] * n
    for index, (lo, hi) in enumerate(spans):
        for position in range(lo, hi):
            context = min(position - lo, hi - 1 - position)
            if context > best[position]:
                best[position], owner[position] = context, index
    owned: list[list[int]] = [[] for _ in spans]
    for position, index in enumerate(owner):
        owned[index].append(position)
    return [(lo, hi, own) for (lo, hi), own in zip(spans, owned, strict=True)]


def make_segments(pieces: Sequence[Sequence[int]], max_length: int, cls_id: int, sep_id: int) -> list[Segment]:
    """The segments of every text (empty texts get none)."""
    budget = max_length - 2
    if budget < 1:
        raise UserError(f"max_length {max_length} cannot hold [CLS], one piece and [SEP]")
    segments = []
    for index, text_pieces in enumerate(pieces):
        if not text_pieces:
            continue
        for lo, hi, owned in windows(len(text_pieces), budget):
            ids = (cls_id, *text_pieces[lo:hi], sep_id)
            segments.append(Segment(index, ids, tuple(1 + p - lo for p in owned), lo))
    return segments


# --- scorers ---------------------------------------------------------------------------------------


def _padded(segments: Sequence[Segment], device: torch.device) -> tuple[Tensor, Tensor]:
    """([B, T] ids right-padded with 0, [B, T] attention mask) of a batch of segments."""
    width = max(len(s.ids) for s in segments)
    ids = torch.tensor([(*s.ids, *(0,) * (width - len(s.ids))) for s in segments], dtype=torch.long)
    lengths = torch.tensor([len(s.ids) for s in segments])
    attention = (torch.arange(width)[None, :] < lengths[:, None]).long()
    return ids.to(device), attention.to(device)


def _flat_scored(segments: Sequence[Segment], width: int, device: torch.device) -> Tensor:
    flat = [row * width + p for row, segment in enumerate(segments) for p in segment.scored]
    return torch.tensor(flat, dtype=torch.long, device=device)


def _hidden_rows(encoder: Encoder, ids: Tensor, attention: Tensor, flat: Tensor) -> Tensor:
    """The encoder's last hidden states at `flat`, followed by the rows `kernel_rows` adds (a head
    applied to them is sliced back to `[:flat.numel()]`)."""
    hidden = encoder(ids, attention, torch.zeros_like(ids)).last_hidden_state
    return hidden.reshape(-1, hidden.shape[-1]).index_select(0, kernel_rows(flat))


def _log_prob_of(logits: Tensor, targets: Tensor) -> Tensor:
    """log softmax(logits)[target] per row, in fp32."""
    return logits.float().log_softmax(-1).gather(1, targets[:, None]).squeeze(1)


def _by_length(segments: Sequence[Segment]) -> list[int]:
    """Segment indices, longest first (batches of similar lengths waste no padding; stable)."""
    return sorted(range(len(segments)), key=lambda i: -len(segments[i].ids))


class PLLScorer(nn.Module):
    """Per-token log-probability estimates at the scored positions of segments.

    Subclasses implement `_score_batch(segments) -> Tensor` (flat, in segment then position
    order) for one-pass methods, or override `score`.
    """

    method: str = ""

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def max_positions(self) -> int:
        return min(m.config.max_position_embeddings for m in self.modules() if isinstance(m, Encoder))

    def encoder_passes(self, segments: Sequence[Segment]) -> int:
        """Sequences the encoder(s) read to score `segments` (the cost the methods differ in)."""
        return len(segments)

    @torch.inference_mode()
    def score(
        self, segments: Sequence[Segment], batch_size: int, progress: Progress | None = None
    ) -> list[list[float]]:
        """Token scores of every segment at its `scored` positions (same order)."""
        out: list[list[float]] = [[] for _ in segments]
        order = _by_length(segments)
        for begin in range(0, len(order), batch_size):
            chosen = order[begin : begin + batch_size]
            batch = [segments[i] for i in chosen]
            values = self._score_batch(batch).tolist()
            cursor = 0
            for i, segment in zip(chosen, batch, strict=True):
                out[i] = values[cursor : cursor + len(segment.scored)]
                cursor += len(segment.scored)
            if progress is not None:
                progress(len(batch))
        return out

    def _score_batch(self, segments: Sequence[Segment]) -> Tensor:
        raise NotImplementedError


class ElectricScorer(PLLScorer):
    """Electric: log p(x_t | x\\t) ~ -E(x)_t, every token from one pass over the unmasked text."""

    method = "electric"

    def __init__(self, encoder: Encoder, head: DiscriminatorHead):
        super().__init__()
        self.encoder, self.head = encoder, head

    def _score_batch(self, segments: Sequence[Segment]) -> Tensor:
        ids, attention = _padded(segments, self.device)
        flat = _flat_scored(segments, ids.shape[1], ids.device)
        return -self.head(_hidden_rows(self.encoder, ids, attention, flat))[: flat.numel()].float()


class TwoTowerScorer(PLLScorer):
    """The two-tower cloze model alone: log q(x_t | x<t, x>t), one pass (the thesis's TwoTower)."""

    method = "two-tower"

    def __init__(self, cloze: TwoTower):
        super().__init__()
        self.cloze = cloze

    def _log_q(self, ids: Tensor, attention: Tensor, flat: Tensor) -> Tensor:
        logits = self.cloze.logits_at(ids, attention, torch.zeros_like(ids), kernel_rows(flat))[: flat.numel()]
        return _log_prob_of(logits, ids.reshape(-1).index_select(0, flat))

    def _score_batch(self, segments: Sequence[Segment]) -> Tensor:
        ids, attention = _padded(segments, self.device)
        return self._log_q(ids, attention, _flat_scored(segments, ids.shape[1], ids.device))


class ElectraTTScorer(TwoTowerScorer):
    """ELECTRA-TT: log q_T(x_t | context) + log(k / (n - k)) - (detection logit)_t (see the module doc).

    q_T = softmax(cloze logits / temperature) is the noise distribution the discriminator saw
    in training (`RTDObjective` samples replacements from it), so its prior is calibrated to q_T.
    """

    method = "electra-tt"

    def __init__(
        self, encoder: Encoder, head: DiscriminatorHead, cloze: TwoTower, mask_prob: float, temperature: float = 1.0
    ):
        super().__init__(cloze)
        if not 0.0 < mask_prob < 1.0:
            raise CheckpointError(f"ELECTRA-TT needs the objective's mask_prob in (0, 1), got {mask_prob!r}")
        if not (math.isfinite(temperature) and temperature > 0.0):
            raise CheckpointError(f"ELECTRA-TT needs the generator's temperature > 0, got {temperature!r}")
        self.encoder, self.head = encoder, head
        self.mask_prob, self.temperature = mask_prob, temperature
        self.log_ratio = math.log(mask_prob / (1.0 - mask_prob))

    def encoder_passes(self, segments: Sequence[Segment]) -> int:
        return 2 * len(segments)

    def _log_q(self, ids: Tensor, attention: Tensor, flat: Tensor) -> Tensor:
        logits = self.cloze.logits_at(ids, attention, torch.zeros_like(ids), kernel_rows(flat))[: flat.numel()]
        if self.temperature != 1.0:  # in fp32, as the objective samples (`sampling.sample_softmax`)
            logits = logits.float() / self.temperature
        return _log_prob_of(logits, ids.reshape(-1).index_select(0, flat))

    def _score_batch(self, segments: Sequence[Segment]) -> Tensor:
        ids, attention = _padded(segments, self.device)
        flat = _flat_scored(segments, ids.shape[1], ids.device)
        replaced_logit = self.head(_hidden_rows(self.encoder, ids, attention, flat))[: flat.numel()].float()
        return self._log_q(ids, attention, flat) + self.log_ratio - replaced_logit


class MLMScorer(PLLScorer):
    """A masked LM: log p(x_t | x with x_t masked), one row (a copy of the text with one [MASK]) per token.

    Rows of all segments form one flat list, longest segments first, cut into batches of
    `batch_size` rows; each row's logits are computed at its masked position only.
    """

    method = "mlm"

    def __init__(self, mlm: MaskedGenerator, mask_id: int):
        super().__init__()
        self.mlm, self.mask_id = mlm, mask_id

    def encoder_passes(self, segments: Sequence[Segment]) -> int:
        return sum(len(s.scored) for s in segments)

    @torch.inference_mode()
    def score(
        self, segments: Sequence[Segment], batch_size: int, progress: Progress | None = None
    ) -> list[list[float]]:
        out: list[list[float]] = [[] for _ in segments]
        if not segments:
            return out
        order = _by_length(segments)
        device = self.device
        ids, _ = _padded([segments[i] for i in order], device)  # row r = segment order[r]
        lengths = torch.tensor([len(segments[i].ids) for i in order], device=device)
        row_segment = torch.tensor([r for r, i in enumerate(order) for _ in segments[i].scored], device=device)
        row_position = torch.tensor([p for i in order for p in segments[i].scored], device=device)
        values: list[float] = []
        for begin in range(0, row_segment.numel(), batch_size):
            seg = row_segment[begin : begin + batch_size]
            pos = row_position[begin : begin + batch_size]
            width = int(lengths[seg].max())
            rows = torch.arange(seg.numel(), device=device)
            batch = ids.index_select(0, seg)[:, :width].clone()
            targets = batch[rows, pos]
            batch[rows, pos] = self.mask_id
            attention = (torch.arange(width, device=device)[None, :] < lengths[seg][:, None]).long()
            logits = self.mlm.logits_at(batch, attention, torch.zeros_like(batch), kernel_rows(rows * width + pos))
            logits = logits[: seg.numel()]
            values += _log_prob_of(logits, targets).tolist()
            if progress is not None:
                progress(seg.numel())
        cursor = 0
        for i in order:
            out[i] = values[cursor : cursor + len(segments[i].scored)]
            cursor += len(segments[i].scored)
        return out


# --- loading checkpoints ----------------------------------------------------------------------------


@dataclass
class Checkpoint:
    """A model directory (xfer or HF) and what it holds: `kind` is detector (a discriminator/energy
    head), masked_lm (an MLM head) or two_tower (a cloze model)."""

    path: Path
    kind: str
    meta: dict[str, Any]
    build: Callable[[str], nn.Module]
    max_positions: int
    layout: str = "xfer"  # or "hf"

    @property
    def objective(self) -> str | None:
        """The built-in objective the model was trained with (or that a plugin's objective is built
        on: `objective_family`), which decides the scoring methods."""
        return recorded_objective(self.meta)

    @property
    def objective_config(self) -> dict[str, Any]:
        config = self.meta.get("objective_config")
        return config if isinstance(config, dict) else {}

    @property
    def generator_kind(self) -> str | None:
        generator = self.objective_config.get("generator")
        return generator.get("kind") if isinstance(generator, dict) else None


def open_checkpoint(path: str | Path, what: str = "checkpoint") -> Checkpoint:
    """Read a pre-training output (xfer model dir) or a HF ElectraForPreTraining/ElectraForMaskedLM folder."""
    from xfer.transformer.modelio import detect_format, load_model_dir

    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{what} {path}: not a directory{_hint(path)}")
    try:
        fmt = detect_format(path)
    except CheckpointError as error:
        raise CheckpointError(f"{what} {error}{_hint(path)}") from None
    if fmt == "hf":
        return _open_hf(path)
    model_dir = load_model_dir(path)
    modules = model_dir.modules
    head_kind = modules.get("head", {}).get("kind")
    if {"ltr", "rtl", "head"} <= set(modules):
        kind, encoders = "two_tower", ("ltr", "rtl")
    elif "encoder" in modules and head_kind == DiscriminatorHead.kind:
        kind, encoders = "detector", ("encoder",)
    elif "encoder" in modules and head_kind == GeneratorHead.kind:
        kind, encoders = "masked_lm", ("encoder",)
    else:
        raise CheckpointError(
            f"{what} {path}: not a pre-training checkpoint (modules {', '.join(sorted(modules))}, head kind "
            f"{head_kind!r}); PLLs need an Electric/ELECTRA discriminator, a masked LM or a two-tower cloze model"
        )
    positions = min(model_dir.encoder_config(name).max_position_embeddings for name in encoders)
    return Checkpoint(path, kind, model_dir.meta, model_dir.build, positions)


def _open_hf(path: Path) -> Checkpoint:
    """A HF folder; its meta holds what config.json records of the pre-training (xfer's HF export
    writes the objective, its settings and the trained length: `OBJECTIVE_KEY`,
    `OBJECTIVE_CONFIG_KEY`, `MAX_LENGTH_KEY`), so methods, windows and ELECTRA-TT's mask_prob and
    temperature are the same as for the xfer layout."""
    from xfer.transformer.hf import OBJECTIVE_CONFIG_KEY, OBJECTIVE_KEY, load_hf
    from xfer.transformer.initnotes import MAX_LENGTH_KEY
    from xfer.transformer.registry import build_head

    config, state, head = load_hf(path)
    kinds = {DiscriminatorHead.kind: "detector", GeneratorHead.kind: "masked_lm"}
    if head.kind not in kinds:
        raise CheckpointError(
            f"{path}: HF architecture {head.architecture!r} has no pre-training head "
            "(PLLs need ElectraForPreTraining or ElectraForMaskedLM)"
        )

    def build(name: str) -> nn.Module:
        if name == "encoder":
            module: nn.Module = Encoder(config)
            module.load_state_dict(state)
        else:
            module = build_head(head.kind, head.config)
            module.load_state_dict(head.state_dict)
        return module

    objective = head.hf_config.get(OBJECTIVE_KEY)
    meta: dict[str, Any] = {"objective": objective} if isinstance(objective, str) else {}
    settings = head.hf_config.get(OBJECTIVE_CONFIG_KEY)
    if isinstance(settings, dict):
        meta["objective_config"] = settings
    length = head.hf_config.get(MAX_LENGTH_KEY)
    if length is not None:
        if not (isinstance(length, int) and not isinstance(length, bool) and length >= 3):
            raise CheckpointError(f"{path / 'config.json'}: {MAX_LENGTH_KEY} {length!r} is not a length of 3 or more")
        meta["max_length"] = length
    if isinstance(role := _export_role(path, meta.get("objective")), str):
        meta["role"] = role
    return Checkpoint(path, kinds[head.kind], meta, build, config.max_position_embeddings, "hf")


def _export_role(path: Path, objective: Any) -> Any:
    """The `role` (discriminator / generator) of the xfer model directory an HF export sits in
    (`electra.pretrain` writes `<run>/<role>/hf`), when that directory records the same objective.

    config.json records no role, and the generator and the main model of a replace_mlm run are
    both ElectraForMaskedLM with the same objective settings: without the role, the HF export of
    the run's real [MASK]-trained generator was refused as "the main model" (`mlm_variant`)."""
    import json

    from xfer.transformer.modelio import META_FILE

    try:
        parent = json.loads((path.parent / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(parent, dict) or objective is None or parent.get("objective") != objective:
        return None
    return parent.get("role")


def _hint(path: Path) -> str:
    for candidate in (path / "outputs" / "discriminator", path / "discriminator"):
        if (candidate / "xfer_model.json").is_file():
            return f" (did you mean {candidate}?)"
    return ""


@dataclass
class LoadedScorer:
    """A ready scorer, its tokenizer, the longest input it takes, and what `auto` decided (notes)."""

    scorer: PLLScorer
    tokenizer: Any
    method: str
    max_length: int
    checkpoint: Path
    generator: Path | None
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """What scores: mlm and two-tower with a generator use the generator alone (the checkpoint
        only chose it and gives the tokenizer), so saying "from CKPT + generator" would mislead."""
        head = f"{self.method} ({PASSES[self.method]})"
        if self.generator is None:
            source = f"from {self.checkpoint}"
        elif self.method in ("mlm", "two-tower"):
            source = f"from the generator {self.generator} alone (the generator of {self.checkpoint})"
        else:
            source = f"from {self.checkpoint} + generator {self.generator}"
        return f"{head} {source}, max_length {self.max_length}"


MLM_VARIANTS = {
    "replace_mlm": "predicts the original tokens at positions the generator replaced (never at a [MASK])",
    "all_tokens_mlm": "predicts every token from generator-corrupted input, mixed with a copy head that the "
    "checkpoint does not include",
}
"""`electra.rtd` variants (Table 5.7) whose main model has a masked-LM head but was never trained on
[MASK] at the positions it predicts: what it learned instead."""


def mlm_variant(main: Checkpoint) -> str | None:
    """The variant when `main` is the main model of an `electra.rtd` run of a `MLM_VARIANTS` variant.

    Its head is a masked LM's, so it looks like one, but PLL's one-[MASK]-per-token passes ask it
    something it never learned. The run's generator has the same objective and variant in its meta
    but role `generator` (a real [MASK]-trained MLM), so it is not caught here. An HF export's
    config.json records the objective config but no role: it is read from the xfer directory the
    export sits in (`_export_role`), and unknown elsewhere."""
    if main.objective != "electra.rtd" or main.meta.get("role") == "generator":
        return None
    variant = main.objective_config.get("variant")
    return variant if variant in MLM_VARIANTS else None


def _mlm_variant_message(main: Checkpoint, variant: str) -> str:
    sibling = main.path.parent / "generator"
    if (sibling / "xfer_model.json").is_file():
        instead = f"score the run's masked-LM generator instead ({sibling}, trained with [MASK] input)"
    else:
        instead = f"the run exported no generator next to it ({sibling}; generator kind {main.generator_kind})"
    return (
        f"{main.path} is the main model of an electra.rtd run with variant {variant!r}: it {MLM_VARIANTS[variant]}, "
        f"so PLLs that mask one token at a time would score it on input it was never trained on: {instead}"
    )


def resolve_method(main: Checkpoint, method: str) -> tuple[str, bool]:
    """(method, whether it needs the generator) for `method` (or `auto`) on checkpoint `main`.

    `auto` refuses the main model of an `electra.rtd` run with an MLM variant (`mlm_variant`)
    rather than quietly scoring it as a [MASK]-trained masked LM, and does not route to its
    generator either: the user named this model, and silently scoring another one would
    misattribute the numbers. The error points to the generator; an explicit `mlm` scores the
    model anyway, with a note (`load_scorer`).
    """
    if method not in METHODS:
        raise UserError(f"unknown method {method!r} (one of {', '.join(METHODS)})")
    objective, generator_kind = main.objective, main.generator_kind
    if main.kind == "masked_lm":
        if method not in ("auto", "mlm"):
            raise UserError(f"{main.path} is a masked LM: only method mlm applies to it, not {method!r}")
        variant = mlm_variant(main)
        if variant is not None and method == "auto":
            raise UserError(
                f"{_mlm_variant_message(main, variant)}; or pass --method mlm (method: mlm) to score it as a "
                "[MASK]-trained masked LM anyway"
            )
        return "mlm", False
    if main.kind == "two_tower":
        if method not in ("auto", "two-tower"):
            raise UserError(
                f"{main.path} is a two-tower cloze model: it gives method two-tower; for {method!r} pass the "
                "discriminator as the checkpoint and this folder as the generator"
            )
        return "two-tower", False
    tt = method == "electra-tt" or (method == "auto" and generator_kind == "two_tower")
    if tt and _detects_at_masked_only(main):  # an mlm generator's run still gets `mlm` below
        generator = main.path.parent / "generator"
        raise UserError(
            f"{main.path} is the discriminator of an electra.rtd run with variant 'electra_15': it detects "
            "replacements at the masked positions only, where every token is a generator sample, so it is not the "
            "every-position detector whose prior ELECTRA-TT inverts (log q + log(k / (n - k)) - logit); its "
            f"PLLs would be calibrated to nothing. Score the run's generator alone instead ({generator} as the "
            "checkpoint: method two-tower or mlm, by its kind)"
        )
    if method == "auto":  # a discriminator / energy model
        if objective == "electric.nce":
            return "electric", False
        if objective == "electra.rtd" and generator_kind == "two_tower":
            return "electra-tt", True
        if objective == "electra.rtd" and generator_kind == "mlm":
            return "mlm", True  # ELECTRA's discriminator alone gives no PLL; its generator is a masked LM
        if objective == "electra.rtd" and generator_kind is None:
            raise UserError(
                f"{main.path}: an ELECTRA discriminator gives no PLL on its own and the checkpoint does not say "
                "which generator it was trained with: pass --method mlm or electra-tt with its --generator"
            )
        if objective == "electra.rtd":
            raise UserError(
                f"{main.path}: an ELECTRA discriminator trained with a {generator_kind} generator gives no PLL "
                "(it needs a two-tower or masked-LM generator)"
            )
        raise UserError(
            f"{main.path}: no known objective trained this checkpoint ({_no_objective(main)}): "
            "pass the method (electric, electra-tt, mlm, two-tower)"
        )
    if method == "electric" and objective not in (None, "electric.nce"):
        raise UserError(
            f"method electric needs an Electric (electric.nce) checkpoint; {main.path} was trained with {objective} "
            "(its head is a replaced-token detector, not an energy)"
        )
    if method == "electra-tt" and objective not in (None, "electra.rtd"):
        raise UserError(f"method electra-tt needs an ELECTRA (electra.rtd) checkpoint; {main.path} is {objective}")
    return method, method != "electric"


def _detects_at_masked_only(main: Checkpoint) -> bool:
    """The main model of an `electra.rtd` run of variant `electra_15` (its detection loss is taken at
    the masked positions only). There every token was sampled from q, so the optimal detector's
    odds are not (n - k) p / (k q): the ELECTRA-TT inversion does not hold for it, and `auto` used
    to apply it anyway (the variant's checkpoints record generator kind two_tower like `electra`'s)."""
    if main.kind != "detector" or main.objective != "electra.rtd" or main.meta.get("role") == "generator":
        return False
    return main.objective_config.get("variant") == "electra_15"


def load_scorer(
    checkpoint: str | Path,
    generator: str | Path | None = None,
    method: str = "auto",
    device: torch.device | str = "cpu",
    max_length: int | None = None,
) -> LoadedScorer:
    """Open the checkpoint (and the generator it needs), pick the method, build the scorer on `device`.

    Without `generator`, a method that needs one takes the checkpoint's sibling `generator/`
    folder (the layout `electra.pretrain` writes), and says so in `notes`.
    """
    from xfer.transformer.tokenization import WordPieceTokenizer

    main = open_checkpoint(checkpoint)
    requested = method
    method, needs_generator = resolve_method(main, method)
    notes: list[str] = []
    if main.kind == "detector" and main.objective is None and method in ("electric", "electra-tt"):
        notes.append(_unknown_objective_note(main, method))
    gen: Checkpoint | None = None
    if needs_generator:
        if generator is None:
            sibling = main.path.parent / "generator"
            if not (sibling / "xfer_model.json").is_file():
                raise UserError(f"method {method} needs the generator: pass it (no {sibling} next to the checkpoint)")
            generator = sibling
            notes.append(f"generator: {sibling} (next to the checkpoint)")
        gen = open_checkpoint(generator, "generator")
        want = "two_tower" if method in ("electra-tt", "two-tower") else "masked_lm"
        if gen.kind != want:
            raise UserError(f"method {method} needs a {want.replace('_', ' ')} generator; {gen.path} is a {gen.kind}")
        if main.objective and gen.objective and main.objective != gen.objective:
            raise UserError(
                f"{gen.path} was trained with {gen.objective} but {main.path} with {main.objective}: not a pair"
            )
        if method == "electra-tt" and main.generator_kind not in (None, "two_tower"):
            # the inversion needs the noise the discriminator was trained against: a two-tower model from
            # another run (the sibling of this one is no two-tower model) gave numbers calibrated to nothing
            own = "with method mlm, from its masked-LM generator" if main.generator_kind == "mlm" else "none"
            raise UserError(
                f"method electra-tt: {main.path} was trained against a {main.generator_kind} generator, not a "
                f"two-tower one, so {gen.path} is not the noise its logits are calibrated to (its PLLs: {own})"
            )
    elif generator is not None and requested != "auto":  # asked for both: one of them is a mistake
        raise UserError(f"method {method} scores with the checkpoint alone: it uses no generator ({generator})")
    elif generator is not None:
        notes.append(f"generator {generator} ignored: method {method} scores with the checkpoint alone")
    variant = mlm_variant(main) if method == "mlm" and gen is None else None
    if variant is not None:  # asked for explicitly (auto refuses): say what the numbers are
        notes.append(f"{_mlm_variant_message(main, variant)}; scored as a [MASK]-trained masked LM, as asked")
    if method == "electra-tt" and "mask_prob" not in main.objective_config:
        notes.append("mask_prob: 0.15 (the checkpoint does not record its objective's)")
    recorded = main.objective_config.get("generator")
    if method == "electra-tt" and not (isinstance(recorded, dict) and "temperature" in recorded):
        notes.append("temperature: 1.0 (the checkpoint does not record its generator's sampling temperature)")

    tokenizer = _tokenizer(main, gen, WordPieceTokenizer)
    scorer = _build(method, main, gen, tokenizer.mask_id)
    vocab = min(m.config.vocab_size for m in scorer.modules() if isinstance(m, Encoder))
    if tokenizer.vocab_size > vocab:
        raise CheckpointError(f"{main.path}: the tokenizer has {tokenizer.vocab_size} ids but the model {vocab}")
    positions = min(x.max_positions for x in (main, gen) if x is not None)
    trained = [_recorded_length(x) for x in (main, gen) if x is not None and "max_length" in x.meta]
    default = min([positions, *trained])
    if max_length is None:
        max_length = default
        if not trained:
            notes.append(
                f"max_length {max_length} from the position embeddings: the checkpoint does not record the length it "
                "was trained on; if that was shorter, pass it (--max-length / max_length) so that longer texts are "
                "windowed instead of read with untrained positions"
            )
    elif max_length > positions:
        raise UserError(f"max_length {max_length} exceeds the model's {positions} position embeddings")
    elif max_length < 3:
        raise UserError(f"max_length {max_length} cannot hold [CLS], one piece and [SEP]")
    elif trained and max_length > min(trained):
        notes.append(
            f"max_length {max_length} is longer than the {min(trained)} tokens the checkpoint was trained on: "
            f"positions beyond {min(trained)} were never trained, so texts longer than that are scored with "
            f"untrained position embeddings (the default, {default}, scores them in windows instead)"
        )
    scorer.eval().to(device)
    return LoadedScorer(scorer, tokenizer, method, max_length, main.path, gen.path if gen else None, notes)


def _recorded_length(checkpoint: Checkpoint) -> int:
    """The `max_length` a checkpoint's meta records, checked as `_open_hf` checks the HF key: `int()`
    of a null crashed with a bare TypeError, a string was taken as a number, and a length under 3
    was refused as if the user had passed it, without naming the checkpoint."""
    length = checkpoint.meta["max_length"]
    if not (isinstance(length, int) and not isinstance(length, bool) and length >= 3):
        source = checkpoint.path / ("config.json" if checkpoint.layout == "hf" else "xfer_model.json")
        raise CheckpointError(f"{source}: max_length {length!r} is not a length of 3 or more ([CLS], one piece, [SEP])")
    return length


def _unknown_objective_note(main: Checkpoint, method: str) -> str:
    """Why a detector that does not record its objective may give meaningless scores with `method`:
    ELECTRA's replaced-token detector and Electric's energy head have the same shape (HF calls
    both ElectraForPreTraining), so nothing in the weights tells them apart."""
    if method == "electric":
        meaning = (
            "Electric PLLs are only meaningful for an electric.nce model (an ELECTRA discriminator's "
            "replaced-token logits read as energies give meaningless numbers, often positive)"
        )
    else:
        meaning = "ELECTRA-TT PLLs are only meaningful for an electra.rtd discriminator"
    return f"{main.path} does not say how it was trained ({_no_objective(main)}): {meaning}"


def _no_objective(main: Checkpoint) -> str:
    """Where the objective would have been recorded, for messages about a checkpoint without a known one."""
    from xfer.transformer.hf import OBJECTIVE_KEY

    if main.objective is not None:
        return f"it records {main.objective!r}, which is none of electra.rtd, electra.mlm, electric.nce"
    return f"its config.json has no {OBJECTIVE_KEY!r}" if main.layout == "hf" else "no 'objective' in its meta"


def _build(method: str, main: Checkpoint, gen: Checkpoint | None, mask_id: int) -> PLLScorer:
    def two_tower(c: Checkpoint) -> TwoTower:
        head = c.build("head")
        assert isinstance(head, ClozeHead)
        return TwoTower.from_modules(c.build("ltr"), c.build("rtl"), head)  # type: ignore[arg-type]

    def masked_lm(c: Checkpoint) -> MaskedGenerator:
        return MaskedGenerator.from_modules(c.build("encoder"), c.build("head"))  # type: ignore[arg-type]

    if method == "electric":
        return ElectricScorer(main.build("encoder"), main.build("head"))  # type: ignore[arg-type]
    if method == "two-tower":
        return TwoTowerScorer(two_tower(gen or main))
    if method == "electra-tt":
        assert gen is not None
        # as the temperature below: a recorded null, string or out-of-range value (a hand-edited or
        # foreign config.json) crashed float() with a bare TypeError/ValueError, or was refused
        # without naming the checkpoint
        mask_prob = main.objective_config.get("mask_prob", 0.15)
        number = isinstance(mask_prob, int | float) and not isinstance(mask_prob, bool)
        if not (number and 0.0 < mask_prob < 1.0):
            raise CheckpointError(
                f"{main.path}: objective_config.mask_prob {mask_prob!r}: ELECTRA-TT needs the objective's masking "
                "probability, a number in (0, 1)"
            )
        generator = main.objective_config.get("generator")
        temperature = generator.get("temperature", 1.0) if isinstance(generator, dict) else 1.0
        number = isinstance(temperature, int | float) and not isinstance(temperature, bool)
        if not (number and math.isfinite(temperature) and temperature > 0):
            raise CheckpointError(
                f"{main.path}: objective_config.generator.temperature {temperature!r}: ELECTRA-TT needs the "
                "generator's sampling temperature, a number > 0"
            )
        return ElectraTTScorer(
            main.build("encoder"),  # type: ignore[arg-type]
            main.build("head"),  # type: ignore[arg-type]
            two_tower(gen),
            float(mask_prob),
            float(temperature),
        )
    return MLMScorer(masked_lm(gen or main), mask_id)


def _tokenizer(main: Checkpoint, gen: Checkpoint | None, cls: Any) -> Any:
    folders = [c.path for c in (main, gen) if c is not None and _has_tokenizer(c.path)]
    if not folders:
        raise CheckpointError(f"{main.path}: no tokenizer files (vocab.txt or tokenizer.json) in the checkpoint")
    tokenizer = cls.from_dir(folders[0])
    if len(folders) == 2 and cls.from_dir(folders[1]).vocab != tokenizer.vocab:
        raise CheckpointError(f"{folders[0]} and {folders[1]} have different vocabularies: not a pair")
    return tokenizer


def _has_tokenizer(folder: Path) -> bool:
    return (folder / "tokenizer.json").is_file() or (folder / "vocab.txt").is_file()


# --- scoring texts ---------------------------------------------------------------------------------


@dataclass
class TextScore:
    """The PLL of one text: its pieces, per-piece scores, and how many windows it took."""

    pll: float
    pieces: list[int]
    token_scores: list[float]
    windows: int

    @property
    def tokens(self) -> int:
        return len(self.pieces)

    @property
    def empty(self) -> bool:
        return not self.pieces


def tokenize(loaded: LoadedScorer, lines: Sequence[Line], empty: str = "error") -> list[list[int]]:
    """Word-piece ids of every line, checked: special tokens refused, empty ones per the `empty` policy."""
    if empty not in ("error", "zero"):
        raise UserError(f"empty must be 'error' or 'zero', not {empty!r}")
    tokenizer = loaded.tokenizer
    encodings = tokenizer.backend.encode_batch_fast([line.text for line in lines], add_special_tokens=False)
    structural = {tokenizer.cls_id: "[CLS]", tokenizer.sep_id: "[SEP]", tokenizer.mask_id: "[MASK]"}
    structural[tokenizer.pad_id] = "[PAD]"
    pieces = []
    for line, encoding in zip(lines, encodings, strict=True):
        ids = list(encoding.ids)
        bad = next((structural[i] for i in ids if i in structural), None)
        if bad is not None:
            raise DataError(
                line.path,
                line.line,
                f"contains the special token {bad}, which the model reads as structure: remove it",
                key=line.key,
            )
        if not ids and empty == "error":
            raise DataError(line.path, line.line, EMPTY_MESSAGE, key=line.key)
        pieces.append(ids)
    return pieces


def score_lines(
    loaded: LoadedScorer,
    lines: Sequence[Line],
    batch_size: int = 64,
    empty: str = "error",
    precision: str = "fp32",
    rank: int = 0,
    world_size: int = 1,
    progress: Progress | None = None,
) -> list[TextScore]:
    """The PLL of every line. With `world_size > 1` each rank scores every world_size-th segment
    and the results are gathered (all ranks return everything).

    A PLL that is not finite (NaN from a diverged or corrupt checkpoint) is a DataError naming
    the first such line, raised before anything is returned: NaN is not JSON, and every comparison
    with it is false, so written out it would break readers or silently win/lose every ranking.
    """
    pieces = tokenize(loaded, lines, empty)
    scores = score_pieces(loaded, pieces, batch_size, precision, rank, world_size, progress)
    for line, score in zip(lines, scores, strict=True):
        if not math.isfinite(score.pll):
            bad = sum(1 for value in score.token_scores if not math.isfinite(value))
            raise DataError(
                line.path,
                line.line,
                f"the PLL is {score.pll} ({bad} of {score.tokens} piece scores are not finite): {NON_FINITE}",
            )
    return scores


def score_pieces(
    loaded: LoadedScorer,
    pieces: Sequence[Sequence[int]],
    batch_size: int = 64,
    precision: str = "fp32",
    rank: int = 0,
    world_size: int = 1,
    progress: Progress | None = None,
) -> list[TextScore]:
    if batch_size < 1:
        raise UserError(f"batch_size must be at least 1, got {batch_size}")
    tokenizer = loaded.tokenizer
    segments = make_segments(pieces, loaded.max_length, tokenizer.cls_id, tokenizer.sep_id)
    mine = list(range(rank, len(segments), world_size))
    with _precision(precision, loaded.scorer.device):
        scores = loaded.scorer.score([segments[i] for i in mine], batch_size, progress)
    found = dict(zip(mine, scores, strict=True))
    if world_size > 1:
        from xfer.core import distributed as dist

        for part in dist.gather_objects(found):
            found.update(part)
    per_token: list[list[float]] = [[0.0] * len(p) for p in pieces]
    count = [0] * len(pieces)
    for index, segment in enumerate(segments):
        for position, value in zip(segment.scored, found[index], strict=True):
            per_token[segment.text][segment.start + position - 1] = value
        count[segment.text] += 1
    return [
        TextScore(math.fsum(values), list(p), values, count[i])
        for i, (p, values) in enumerate(zip(pieces, per_token, strict=True))
    ]


def unknown_pieces(loaded: LoadedScorer, scores: Sequence[TextScore]) -> int:
    """How many scored pieces are [UNK]: each is scored like a word (often very unlikely), so a text
    with many of them gets a PLL that measures the vocabulary's coverage more than the text."""
    unk = loaded.tokenizer.unk_id
    return sum(1 for score in scores for piece in score.pieces if piece == unk)


def encoder_passes(loaded: LoadedScorer, pieces: Sequence[Sequence[int]]) -> int:
    """How many sequences the encoder(s) read to score these texts (1 per window, or 1 per token for MLM)."""
    tokenizer = loaded.tokenizer
    return loaded.scorer.encoder_passes(make_segments(pieces, loaded.max_length, tokenizer.cls_id, tokenizer.sep_id))


@contextlib.contextmanager
def _precision(precision: str, device: torch.device) -> Iterator[None]:
    if precision == "fp32":
        yield
    elif precision == "bf16":
        with torch.autocast(device.type, dtype=torch.bfloat16):
            yield
    else:
        raise UserError(f"precision must be fp32 or bf16, not {precision!r}")


def record(line: Line, score: TextScore, method: str, tokenizer: Any = None) -> dict[str, Any]:
    """The output JSON object of one line; with `tokenizer`, its pieces and per-piece scores too."""
    out: dict[str, Any] = {"line": line.line}
    if line.has_id or line.id is not None:
        out["id"] = line.id
    out |= {"pll": score.pll, "tokens": score.tokens, "method": method}
    if score.windows > 1:
        out["windows"] = score.windows
    if score.empty:
        out["empty"] = True
    if tokenizer is not None:
        out["pieces"] = [tokenizer.backend.id_to_token(i) for i in score.pieces]
        out["token_scores"] = score.token_scores
    return out


def blank_hypothesis(lists: Sequence[NBestList]) -> DataError | None:
    """The error for the first hypothesis that is blank (empty or whitespace), or None.

    For checks before the model loads (`xfer score`, the stage's preflight): `tokenize` finds
    these too, but only after the checkpoint is loaded and other outputs may have been written.
    Texts that only tokenize to nothing still need the tokenizer and are found while scoring."""
    for nbest in lists:
        for index, hypothesis in enumerate(nbest.hypotheses):
            if not hypothesis.text.strip():
                return DataError(
                    nbest.path, nbest.line, f"a hypothesis is an {EMPTY_MESSAGE}", key=f"hypotheses[{index}]"
                )
    return None


def score_nbest(
    loaded: LoadedScorer,
    groups: Sequence[Sequence[NBestList]],
    batch_size: int = 64,
    empty: str = "error",
    precision: str = "fp32",
    rank: int = 0,
    world_size: int = 1,
    progress: Progress | None = None,
    counts: dict[str, int] | None = None,
) -> list[list[list[float]]]:
    """PLLs of every hypothesis of every list of every group (e.g. [dev, test]), each distinct text scored once.

    A non-finite PLL is a DataError naming the file, line, list id and hypothesis (`rerank.check_plls`).
    `counts`, when given, is filled with `nbest_counts`, what a scored file's summary says: without
    it, hypotheses longer than max_length were windowed, and [UNK] pieces scored, without a word.
    """
    unique: dict[str, Line] = {}
    for lists in groups:
        for nbest in lists:
            for index, hypothesis in enumerate(nbest.hypotheses):
                where = f"hypotheses[{index}]"
                unique.setdefault(hypothesis.text, Line(hypothesis.text, nbest.path, nbest.line, key=where))
    lines = list(unique.values())
    pieces = tokenize(loaded, lines, empty)
    scores = score_pieces(loaded, pieces, batch_size, precision, rank, world_size, progress)
    if counts is not None:
        counts.update(nbest_counts(loaded, scores))
    pll = {line.text: score.pll for line, score in zip(lines, scores, strict=True)}
    out = [[[pll[h.text] for h in nbest.hypotheses] for nbest in lists] for lists in groups]
    for lists, values in zip(groups, out, strict=True):
        check_plls(lists, values)
    return out


def nbest_counts(loaded: LoadedScorer, scores: Sequence[TextScore]) -> dict[str, int]:
    """What the scoring of distinct n-best hypotheses did, as a scored file's summary says it: how many
    texts and pieces, how many were longer than max_length (scored in windows), empty (scored 0), and
    how many pieces were [UNK] (a hypothesis of them is ranked by the vocabulary's coverage)."""
    return {
        "texts": len(scores),
        "pieces": sum(score.tokens for score in scores),
        "windowed": sum(1 for score in scores if score.windows > 1),
        "empty": sum(1 for score in scores if score.empty),
        "unk": unknown_pieces(loaded, scores),
    }


def describe_counts(counts: dict[str, int], max_length: int) -> str:
    """One line for a log or report: `nbest_counts` in words (only what is not zero, besides the totals)."""
    return (
        f"{counts['texts']} distinct hypotheses ({counts['pieces']} pieces)"
        + (
            f"; {counts['windowed']} longer than max_length {max_length}, scored in windows"
            if counts["windowed"]
            else ""
        )
        + (f"; {counts['empty']} empty, scored 0" if counts["empty"] else "")
        + (f"; {counts['unk']} [UNK] pieces (out of the vocabulary; each scored as [UNK])" if counts["unk"] else "")
    )

"""Pre-training objectives: ELECTRA (`electra.rtd`), the BERT baseline (`electra.mlm`) and Electric
(`electric.nce`), on one generator/discriminator machinery.

Each is an `nn.Module` the shared `Trainer` drives: `forward(batch)` takes a packed batch
({input_ids, attention_mask, token_type_ids}, no masking done yet), draws its masks on the fly,
and returns `StepOutput(loss, metrics)`. Metrics are 0-dim tensors (no device sync): losses,
generator MLM accuracy, sampled-token accuracy, replaced fraction, discriminator accuracy,
precision, recall and AUC (percent), and `tokens` (real tokens, for tokens/s). The detection
metrics come with their weights (`disc_recall@weight`, ...: xfer.core.trainer.WEIGHT_SUFFIX), so
the log pools them over its window instead of averaging per-batch ratios.

The ELECTRA step (METHODS.md, in order):
1. choose round(0.15 n) distinct candidate positions (`masking.select`);
2. the generator sees them as [MASK] (85%) or unchanged (15%), and its softmax is computed only
   at those positions; MLM loss = cross-entropy to the original tokens;
3. sample replacements from the generator's softmax in fp32 without gradient (`sampling`: exact
   inverse-CDF draws sharing the loss's exponentials, instead of the original's Gumbel-max), so
   no gradient flows from the discriminator into the generator;
4. the discriminator reads the corrupted sequence; a position is "replaced" only where the sample
   differs from the original; sigmoid BCE averaged over every real (non-pad) token;
5. loss = 1.0 * MLM + 50.0 * discriminator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xfer.core.errors import UserError
from xfer.core.trainer import WEIGHT_SUFFIX, StepOutput
from xfer.electra import masking
from xfer.electra.config import MLMConfig, NCEConfig, RTDConfig
from xfer.electra.heads import DiscriminatorHead, GeneratorHead
from xfer.electra.model import MaskedGenerator, TwoTower, generator_encoder_config
from xfer.electra.sampling import (
    GeneratorStep,
    OutputWorkspace,
    generator_loss_and_sample,
    generator_step_from_features,
    sample_softmax,
)
from xfer.transformer.encoder import Encoder, EncoderConfig
from xfer.transformer.kernels import padded_index, row_multiple


@dataclass(frozen=True)
class SpecialTokens:
    """The ids masking needs (from the tokenizer)."""

    pad: int
    cls: int
    sep: int
    mask: int

    @classmethod
    def of(cls, tokenizer: Any) -> SpecialTokens:
        return cls(tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id)


class PretrainingObjective(nn.Module):
    """What the three objectives share: special ids, the masking cap, the exported models.

    `family` names the built-in objective a class is (and a plugin's subclass of it stays): its
    checkpoints record it, so `xfer score` picks a method and `init:` checks a role by what the
    model is, not by the plugin's own registered name."""

    family: ClassVar[str | None] = None

    def __init__(self, tokens: SpecialTokens, max_length: int, mask_prob: float):
        super().__init__()
        self.tokens = tokens
        self.mask_prob = mask_prob
        self.cap = masking.max_predictions(mask_prob, max_length)
        self.register_buffer("special_ids", torch.tensor([tokens.cls, tokens.sep, tokens.mask]), persistent=False)

    def select(self, batch: dict[str, Tensor], rounding: str = "round") -> masking.Selection:
        return masking.select(
            batch["input_ids"], batch["attention_mask"], self.special_ids, self.mask_prob, self.cap, rounding
        )

    def exports(self) -> dict[str, dict[str, nn.Module]]:
        """Output name -> modules of the xfer model directory to write (`discriminator`, `generator`)."""
        raise NotImplementedError

    @property
    def main_encoder(self) -> Encoder:
        """The encoder downstream tasks fine-tune."""
        raise NotImplementedError


def recorded_objective(meta: dict[str, Any]) -> str | None:
    """The objective a checkpoint's meta says trained it, as the built-in one it is (`family`, for a
    plugin's objective built on one) or else its registered name; None when it says nothing."""
    return meta.get("objective_family") or meta.get("objective")


def pretraining_objective_class(host: Any, name: str) -> type[PretrainingObjective]:
    """The objective registered as `name`, checked to be a pre-training objective (a subclass of
    `PretrainingObjective`). A fine-tuning objective named here (`transformer.sequence`) crashed in
    its constructor with a bare TypeError, and a plugin class that wraps one instead of subclassing
    it trained the whole budget, then failed writing its outputs; so did a subclass without
    `exports` (one without `main_encoder` or `forward` failed at stage start with a bare traceback)."""
    cls = host.load("objective", name)
    if not (isinstance(cls, type) and issubclass(cls, PretrainingObjective)):
        shown = cls.__qualname__ if isinstance(cls, type) else repr(cls)
        raise UserError(
            f"objective {name!r} ({shown}) is not a pre-training objective: electra.pretrain trains "
            "electra.rtd, electra.mlm, electric.nce, or a plugin's subclass of "
            "xfer.electra.objective.PretrainingObjective (docs/plugins.md)"
        )
    # inherited unchanged: PretrainingObjective's raise NotImplementedError, `forward` is nn.Module's
    missing = [m for m in ("forward", "exports", "main_encoder") if getattr(cls, m) is getattr(PretrainingObjective, m)]
    if missing:  # exports: the whole budget trained, then NotImplementedError writing the outputs
        raise UserError(
            f"objective {name!r} ({cls.__qualname__}) does not define {', '.join(missing)}: a subclass of "
            "PretrainingObjective must (or subclass a built-in one: RTDObjective, MLMObjective, ElectricObjective)"
        )
    return cls


# --- diagnostics -----------------------------------------------------------------------------------


@torch.no_grad()
def detection_metrics(logits: Tensor, replaced: Tensor) -> dict[str, Tensor]:
    """Accuracy, precision, recall and AUC (percent) of "replaced" predictions (logit > 0).

    AUC is the Mann-Whitney statistic of this batch's probabilities (50 when a class is absent),
    computed on the device without a sync. Tied logits share their average rank (as sklearn's
    `roc_auc_score`): a detector that scores every token alike is at 50, wherever the replaced
    tokens sit; with first-come ranks it scored anywhere from 0 to 100.

    Each comes with its weight (`NAME@weight`, see xfer.core.trainer.WEIGHT_SUFFIX), so that the trainer
    logs the window's pooled figures: accuracy by the tokens scored, precision by the tokens predicted
    replaced, recall by the replaced tokens, AUC by the (replaced, original) pairs it ranks. Averaged per
    batch, a batch with no replaced token pulled the window's AUC toward its placeholder 50 and its recall
    toward 0 (and one with nothing predicted replaced its precision toward 0); the batch's own values stay
    those placeholders, now of weight 0."""
    logits, labels = logits.detach().float(), replaced.bool()
    predicted = logits > 0
    hits = (predicted & labels).sum()
    n_pos = labels.sum()
    n_neg = labels.numel() - n_pos
    ordered = logits.sort().values
    below = torch.searchsorted(ordered, logits, right=False)  # values strictly below each logit
    through = torch.searchsorted(ordered, logits, right=True)  # ... and those equal to it
    # Twice the rank sums, exactly in int64 (average ranks are half-integers): the old float64 ranks
    # failed on MPS, which has no float64, and their boolean-mask indexing synced with the host.
    twice_ranks = below + through + 1  # 2 x the average of the 1-based ranks below+1 .. through
    twice_u = torch.where(labels, twice_ranks, 0).sum() - n_pos * (n_pos + 1)
    # divided in float64 where the device has it (the same bits as before on CPU/CUDA), else float32
    dtype = torch.float64 if masking.has_float64(logits.device) else torch.float32
    u = twice_u.to(dtype) / 2
    auc = torch.where((n_pos > 0) & (n_neg > 0), u / (n_pos * n_neg).clamp(min=1), torch.full_like(u, 0.5))
    n_predicted = predicted.sum()
    metrics = {
        "disc_accuracy": 100.0 * (predicted == labels).float().mean(),
        "disc_precision": 100.0 * hits / n_predicted.clamp(min=1),
        "disc_recall": 100.0 * hits / n_pos.clamp(min=1),
        "disc_auc": 100.0 * auc,
    }
    weights = {  # float32 counts, on the device (no sync)
        "disc_accuracy": torch.full((), float(labels.numel()), device=logits.device),
        "disc_precision": n_predicted.float(),
        "disc_recall": n_pos.float(),
        "disc_auc": (n_pos * n_neg).float(),
    }
    return metrics | {name + WEIGHT_SUFFIX: weight for name, weight in weights.items()}


def _real_rows(batch: dict[str, Tensor]) -> Tensor:
    return batch["attention_mask"].reshape(-1).nonzero().squeeze(1)


def kernel_rows(rows: Tensor) -> Tensor:
    """`rows` rounded up to the row counts the matmuls reading them should see (repeating the last
    row; see `xfer.transformer.kernels.row_multiple`): a head applied to them is sliced back to
    `[:rows.numel()]`. The number of real tokens or masked positions changes at every step, and on a
    CPU with bf16 a new row count costs a kernel compilation in each Linear it goes through (the PLL
    scorers, whose scored positions change with every batch, use it too)."""
    return padded_index(rows, row_multiple(rows.device))


def _hidden_rows(encoder: Encoder, input_ids: Tensor, batch: dict[str, Tensor], rows: Tensor) -> Tensor:
    """The encoder's last hidden states at the flat `rows`, followed by the rows `kernel_rows` adds."""
    hidden = encoder(input_ids, batch["attention_mask"], batch.get("token_type_ids")).last_hidden_state
    return hidden.reshape(-1, hidden.shape[-1]).index_select(0, kernel_rows(rows))


def _cross_entropy(logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """Mean cross-entropy in fp32, and the argmax accuracy (percent)."""
    logits = logits.float()
    loss = F.cross_entropy(logits, targets) if targets.numel() else logits.sum() * 0.0
    accuracy = 100.0 * (logits.detach().argmax(-1) == targets).float().mean() if targets.numel() else loss.detach()
    return loss, accuracy


def _copy_mixture_argmax(log_softmax: Tensor, copy_logit: Tensor, inputs: Tensor) -> Tensor:
    """The token All-Tokens MLM predicts: the argmax of D [v = input] + (1 - D) softmax[v], i.e. the
    input token unless the softmax's best other token outweighs D + (1 - D) softmax[input].

    Its accuracy used to be the softmax's argmax alone, over every token: a model that copies the
    ~85% of tokens the generator left unchanged (D near 1, the softmax then untrained there) read
    near 0% while predicting them right, and the figure was quoted next to electra.mlm's accuracy
    at the masked positions."""
    log_softmax, copy_logit = log_softmax.detach(), copy_logit.detach()
    best = log_softmax.argmax(-1)
    log_input = torch.logaddexp(
        F.logsigmoid(copy_logit), F.logsigmoid(-copy_logit) + log_softmax.gather(1, inputs[:, None]).squeeze(1)
    )
    log_best = F.logsigmoid(-copy_logit) + log_softmax.gather(1, best[:, None]).squeeze(1)
    return torch.where((best == inputs) | (log_input >= log_best), inputs, best)


# --- ELECTRA ---------------------------------------------------------------------------------------


class RTDObjective(PretrainingObjective):
    """`electra.rtd`: a generator proposes replacements, the discriminator detects them.

    Variants (Table 5.7): `electra` (every position), `electra_15` (the masked positions only),
    `replace_mlm` (the main model does MLM on generator-corrupted input) and `all_tokens_mlm`
    (it predicts every token, with a copy probability). Generators: a small masked LM (`mlm`), a
    two-tower cloze model (`two_tower`, ELECTRA-TT), the corpus's `unigram` distribution, or
    `uniform`. `disc_weight` weights the detection loss; the MLM variants' main loss has weight 1.
    """

    family = "electra.rtd"

    def __init__(
        self,
        encoder_config: EncoderConfig,
        tokens: SpecialTokens,
        max_length: int,
        config: RTDConfig,
        unigram_counts: Tensor | None = None,
    ):
        super().__init__(tokens, max_length, config.mask_prob)  # ELECTRA's cap (METHODS.md): 9 at L = 64
        self.config = config
        self.discriminator = Encoder(encoder_config)
        hidden, vocab = encoder_config.hidden_size, encoder_config.vocab_size
        if config.variant in ("electra", "electra_15"):
            self.head: nn.Module = DiscriminatorHead(hidden, encoder_config.initializer_range)
        else:  # the main model is itself a masked LM over the corrupted input
            self.head = GeneratorHead(hidden, encoder_config.embedding_size, vocab, encoder_config.layer_norm_eps)
            self.copy = nn.Linear(hidden, 1) if config.variant == "all_tokens_mlm" else None
        kind = config.generator.kind
        shared = self.discriminator.embeddings if config.generator.tie_embeddings else None
        self.generator: nn.Module | None = None
        if kind in ("mlm", "two_tower"):
            gen_config = generator_encoder_config(encoder_config, config.generator)
            self.generator = (MaskedGenerator if kind == "mlm" else TwoTower)(gen_config, shared)
        never = torch.zeros(vocab, dtype=torch.bool)
        never[[tokens.pad, tokens.cls, tokens.sep, tokens.mask]] = True
        if kind == "unigram":
            if unigram_counts is None or unigram_counts.numel() != vocab:
                raise ValueError(f"a unigram generator needs token counts for all {vocab} ids")
            log_probs = unigram_counts.double().masked_fill(never, 0.0).log().float()
        else:  # uniform over every ordinary token
            log_probs = torch.zeros(vocab).masked_fill(never, float("-inf"))
        self.register_buffer("fixed_log_probs", log_probs, persistent=kind == "unigram")
        self.output_workspace = OutputWorkspace()  # the generator softmax's buffers, reused every step

    @property
    def main_encoder(self) -> Encoder:
        return self.discriminator

    def exports(self) -> dict[str, dict[str, nn.Module]]:
        out: dict[str, dict[str, nn.Module]] = {"discriminator": {"encoder": self.discriminator, "head": self.head}}
        if isinstance(self.generator, MaskedGenerator):
            out["generator"] = {"encoder": self.generator.encoder, "head": self.generator.head}
        elif isinstance(self.generator, TwoTower):
            out["generator"] = {"ltr": self.generator.ltr, "rtl": self.generator.rtl, "head": self.generator.head}
        return out

    def _generate(self, batch: dict[str, Tensor], selection: masking.Selection, originals: Tensor) -> GeneratorStep:
        """The generator's loss, its fp32 samples at the chosen positions (no gradient) and its
        argmax accuracy against `originals`, the tokens at those positions."""
        ids, attention, types = batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids")
        temperature = self.config.generator.temperature
        if isinstance(self.generator, MaskedGenerator):
            masked = masking.electra_generator_input(ids, selection, self.tokens.mask, self.config.mask_fraction)
            features = self.generator.features_at(masked, attention, types, kernel_rows(selection.flat))
            word, bias = self.generator.encoder.embeddings.word.weight, self.generator.head.bias
            return generator_step_from_features(features, word, bias, originals, self.output_workspace, temperature)
        if isinstance(self.generator, TwoTower):  # a cloze model: trained on every candidate, unmasked input
            cand = masking.candidates(ids, attention, self.special_ids).reshape(-1).nonzero().squeeze(1)
            all_logits = self.generator.logits_at(ids, attention, types, kernel_rows(cand))[: cand.numel()]
            step = generator_loss_and_sample(all_logits, ids.reshape(-1).index_select(0, cand), temperature)
            return step._replace(sampled=step.sampled.index_select(0, torch.searchsorted(cand, selection.flat)))
        sampled = sample_softmax(self.fixed_log_probs.expand(selection.flat.numel(), -1), temperature)
        accuracy = 100.0 * (originals == self.fixed_log_probs.argmax()).float().mean()
        return GeneratorStep(self.fixed_log_probs.new_zeros(()), sampled, accuracy)

    def forward(self, batch: dict[str, Tensor]) -> StepOutput:
        ids = batch["input_ids"]
        selection = self.select(batch)
        originals = ids.reshape(-1).index_select(0, selection.flat)
        gen_loss, sampled, gen_accuracy = self._generate(batch, selection, originals)
        corrupted = ids.reshape(-1).index_copy(0, selection.flat, sampled).view_as(ids)
        replaced = torch.zeros(ids.numel(), dtype=torch.bool, device=ids.device)
        replaced[selection.flat] = sampled != originals  # a sample equal to the original is real
        real = _real_rows(batch)
        metrics: dict[str, Tensor] = {
            "gen_loss": gen_loss.detach(),
            "gen_accuracy": gen_accuracy,
            "sampled_accuracy": 100.0 * (sampled == originals).float().mean(),
            "replaced": 100.0 * replaced.index_select(0, real).float().mean(),
            "tokens": real.new_tensor(real.numel(), dtype=torch.float32),
        }
        variant = self.config.variant
        if variant in ("electra", "electra_15"):
            rows = real if variant == "electra" else selection.flat
            logits = self.head(_hidden_rows(self.discriminator, corrupted, batch, rows))[: rows.numel()]
            labels = replaced.index_select(0, rows)
            main = F.binary_cross_entropy_with_logits(logits, labels.float())
            metrics |= detection_metrics(logits, labels)
            loss = self.config.gen_weight * gen_loss + self.config.disc_weight * main
        elif variant == "replace_mlm":
            logits = self.head(
                _hidden_rows(self.discriminator, corrupted, batch, selection.flat),
                self.discriminator.embeddings.word.weight,
            )[: selection.flat.numel()]
            main, accuracy = _cross_entropy(logits, originals)
            metrics["mlm_accuracy"] = accuracy
            loss = self.config.gen_weight * gen_loss + main
        else:  # all_tokens_mlm: p(x_t) = D * [x_t is the input token] + (1 - D) * softmax(...)[x_t]
            hidden = _hidden_rows(self.discriminator, corrupted, batch, real)
            logits = self.head(hidden, self.discriminator.embeddings.word.weight)[: real.numel()]
            log_softmax = logits.float().log_softmax(-1)
            targets = ids.reshape(-1).index_select(0, real)
            copy_logit = self.copy(hidden)[: real.numel()].squeeze(-1).float()
            is_input = ~replaced.index_select(0, real)  # the target equals the (possibly corrupted) input token
            log_copy = F.logsigmoid(copy_logit).masked_fill(~is_input, float("-inf"))
            log_generate = F.logsigmoid(-copy_logit) + log_softmax.gather(1, targets[:, None]).squeeze(1)
            main = -torch.logaddexp(log_copy, log_generate).mean()
            correct = (
                _copy_mixture_argmax(log_softmax, copy_logit, corrupted.reshape(-1).index_select(0, real)) == targets
            )
            # at the masked positions, as `mlm_accuracy` of replace_mlm and electra.mlm; every token's too
            at_selection = torch.searchsorted(real, selection.flat)
            metrics["mlm_accuracy"] = 100.0 * correct.index_select(0, at_selection).float().mean()
            metrics["all_tokens_accuracy"] = 100.0 * correct.float().mean()
            loss = self.config.gen_weight * gen_loss + main
        metrics["main_loss"] = main.detach()
        return StepOutput(loss, metrics)


# --- the BERT baseline ---------------------------------------------------------------------------


class MLMObjective(PretrainingObjective):
    """`electra.mlm`: BERT's masked LM (80/10/10 corruption, fixed count, no NSP), same sizes as ELECTRA."""

    family = "electra.mlm"

    def __init__(self, encoder_config: EncoderConfig, tokens: SpecialTokens, max_length: int, config: MLMConfig):
        super().__init__(tokens, max_length, config.mask_prob)
        self.config = config
        self.vocab_size = encoder_config.vocab_size
        self.mlm = MaskedGenerator(encoder_config, shared=None)

    @property
    def main_encoder(self) -> Encoder:
        return self.mlm.encoder

    def exports(self) -> dict[str, dict[str, nn.Module]]:
        model = {"encoder": self.mlm.encoder, "head": self.mlm.head}
        return {"discriminator": model, "generator": model}

    def forward(self, batch: dict[str, Tensor]) -> StepOutput:
        ids = batch["input_ids"]
        selection = self.select(batch)
        corrupted = masking.bert_input(
            ids, selection, self.tokens.mask, self.vocab_size, self.config.mask, self.config.random
        )
        flat = selection.flat
        logits = self.mlm.logits_at(corrupted, batch["attention_mask"], batch.get("token_type_ids"), kernel_rows(flat))
        loss, accuracy = _cross_entropy(logits[: flat.numel()], ids.reshape(-1).index_select(0, flat))
        tokens = batch["attention_mask"].sum().float()
        return StepOutput(loss, {"mlm_accuracy": accuracy, "tokens": tokens})


# --- Electric -------------------------------------------------------------------------------------


class ElectricObjective(PretrainingObjective):
    """`electric.nce`: an energy-based cloze model trained by NCE (thesis 5.1.3, Algorithm 2).

    The energy model E(x)_t is an `Encoder` + `DiscriminatorHead` over the *unmasked* noised input.
    The noise model q is a two-tower cloze model over the original input (trained by maximum
    likelihood at every candidate). k = ceil(0.15 n) positions get samples from q and are all
    labelled noise, even a sample equal to the original. The classifier's "noise" logit is
    E(x)_t + log(k * q(x_t | context) / (n - k)) (q without gradient), i.e.
    P(real) = sigmoid(-E(x)_t - log(k q / (n - k))); its BCE is averaged over every real token.
    PLL(x) = sum_t -E(x)_t, one pass.
    """

    family = "electric.nce"

    def __init__(self, encoder_config: EncoderConfig, tokens: SpecialTokens, max_length: int, config: NCEConfig):
        super().__init__(tokens, max_length, config.mask_prob)
        self.cap = masking.electric_cap(config.mask_prob, max_length)  # k = ceil(0.15 n) at full length too
        self.config = config
        self.discriminator = Encoder(encoder_config)
        self.head = DiscriminatorHead(encoder_config.hidden_size, encoder_config.initializer_range)
        shared = self.discriminator.embeddings if config.generator.tie_embeddings else None
        self.generator = TwoTower(generator_encoder_config(encoder_config, config.generator), shared)

    @property
    def main_encoder(self) -> Encoder:
        return self.discriminator

    def exports(self) -> dict[str, dict[str, nn.Module]]:
        return {
            "discriminator": {"encoder": self.discriminator, "head": self.head},
            "generator": {"ltr": self.generator.ltr, "rtl": self.generator.rtl, "head": self.generator.head},
        }

    def energy(self, input_ids: Tensor, batch: dict[str, Tensor], rows: Tensor) -> Tensor:
        """E(x)_t at the flat `rows` (one forward pass)."""
        return self.head(_hidden_rows(self.discriminator, input_ids, batch, rows))[: rows.numel()]

    def forward(self, batch: dict[str, Tensor]) -> StepOutput:
        ids, attention, types = batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids")
        selection = self.select(batch, rounding="ceil")
        real = _real_rows(batch)
        # q at every real position, from the original input: trains the cloze model, samples the noise,
        # and corrects the classifier
        log_q = self.generator.logits_at(ids, attention, types, kernel_rows(real))[: real.numel()]
        log_q = log_q.float().log_softmax(-1)
        is_candidate = masking.candidates(ids, attention, self.special_ids).reshape(-1).index_select(0, real)
        targets = ids.reshape(-1).index_select(0, real)
        cloze_loss = F.nll_loss(log_q[is_candidate], targets[is_candidate])
        at_selection = torch.searchsorted(real, selection.flat)
        sampled = sample_softmax(log_q.index_select(0, at_selection), self.config.generator.temperature)
        noised = ids.reshape(-1).index_copy(0, selection.flat, sampled)
        is_noise = torch.zeros(ids.numel(), dtype=torch.bool, device=ids.device)
        is_noise[selection.flat] = True  # every replaced position is noise, even if the sample equals the original
        labels = is_noise.index_select(0, real)
        # the correction needs the distribution the noise is drawn from: softmax(log q / T) when sampled at T
        temperature = self.config.generator.temperature
        noise_log_q = log_q.detach() if temperature == 1.0 else (log_q.detach() / temperature).log_softmax(-1)
        log_q_token = noise_log_q.gather(1, noised.index_select(0, real)[:, None]).squeeze(1)
        k = selection.count.float().clamp(min=1)
        n = attention.sum(-1).float()
        log_ratio = (k / (n - k).clamp(min=1)).log()  # per sequence
        row_sequence = real // ids.shape[1]
        energy = self.energy(noised.view_as(ids), batch, real)
        noise_logit = energy + log_q_token + log_ratio.index_select(0, row_sequence)
        nce_loss = F.binary_cross_entropy_with_logits(noise_logit, labels.float())
        loss = self.config.gen_weight * cloze_loss + self.config.disc_weight * nce_loss
        originals = ids.reshape(-1).index_select(0, selection.flat)
        metrics = {
            "gen_loss": cloze_loss.detach(),
            "main_loss": nce_loss.detach(),
            "gen_accuracy": 100.0 * (log_q.detach()[is_candidate].argmax(-1) == targets[is_candidate]).float().mean(),
            "sampled_accuracy": 100.0 * (sampled == originals).float().mean(),
            "replaced": 100.0 * labels.float().mean(),
            "tokens": real.new_tensor(real.numel(), dtype=torch.float32),
            **detection_metrics(noise_logit, labels),
        }
        return StepOutput(loss, metrics)

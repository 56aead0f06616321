"""Does an ELECTRA stage trained on the toy language learn subject-verb agreement, and does its
generator give it the chance? A diagnostic for the quickstart's toy/agreement point.

    python tools/probe_agreement.py runs/qs/pretrain [--checkpoint step-0001200] [--examples 640]

Two measurements on a stage whose corpus is the toy language (`toy.corpus`) and whose objective is
`electra.rtd` with an `mlm` or `two_tower` generator (ELECTRA, ELECTRA-TT) or `electric.nce` (Electric):

- **What the generator puts at present-tense verbs.** On `--examples` packed examples of the
  stage's own data cache, masked and sampled exactly as in training (the stage's mask rate and
  temperature; Electric's noise model at its k = ceil(mask_prob n) positions), the replaced tokens
  at positions that hold a present-tense verb form are split into: a present-tense verb form of the
  *other* number (an agreement error, the only replacement there that teaches agreement), a
  present-tense form of the same number (number cannot give it away), and anything else (another
  part of speech, a past-tense form, a word piece), which the discriminator can catch without
  knowing agreement. Only samples that differ from the original count as replaced, for Electric
  too, although Electric labels every sampled position noise: a same-token sample teaches nothing
  about agreement.
- **What the discriminator knows, zero-shot.** For each agreeing verb of the grammatical
  toy/agreement dev sentences, its "replaced" logit (Electric: its energy E(x)_t, also higher for
  noise) in the sentence as is and with that one verb flipped to the other number; the AUC of
  flipped vs as is (50 = no knowledge), separately for verbs with an attractor (a noun of the other
  number between subject and verb) and without.

Only verbs whose both forms are single vocabulary pieces count (at the quickstart's 600-piece
vocabulary that is nearly all). docs/results.md ("The quickstart with a toy ELECTRA stage") reads
these numbers. `tools/probe_context.py --noise agreement` is the matching control: a detector
trained on verb-number flips alone.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_detection import ProbeError, examples_table, load_objective, random_batch

AGREEMENT_OBJECTIVES: dict[str, tuple[str, ...]] = {"electra.rtd": ("mlm", "two_tower"), "electric.nce": ("two_tower",)}
"""What this probe reads (objective -> generator kinds): a generator that samples at the masked
positions and a detector whose logit is higher for a replaced token. A unigram or uniform generator
knows no context, so it never makes an agreement error on purpose; electra.mlm has no detector."""

Scorer = Callable[[Tensor, Tensor], Tensor]  # (input ids [B, T], attention [B, T]) -> logits [B, T]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage_dir", type=Path, help="an electra.pretrain stage directory (RUN_DIR/STAGE)")
    parser.add_argument("--checkpoint", help="checkpoint name under checkpoints/ (default: the latest)")
    parser.add_argument("--examples", type=int, default=640, help="packed examples for the generator (default 640)")
    parser.add_argument("--sentences", type=int, default=800, help="toy/agreement dev sentences (default 800)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if min(args.examples, args.sentences) < 1:
        parser.error("--examples and --sentences must be at least 1")
    try:
        objective, tokenizer = load_objective(args.stage_dir, args.checkpoint, AGREEMENT_OBJECTIVES)
        numbers, _ = present_forms(tokenizer)
        counts = generator_replacements(objective, examples_table(args.stage_dir), numbers, args.examples, args.seed)
        pairs = agreement_pairs(tokenizer, args.sentences)
        knowledge = zero_shot(discriminator_scorer(objective), pairs, tokenizer.pad_id)
    except ProbeError as exc:
        print(f"probe_agreement: {exc}", file=sys.stderr)
        return 2
    print(format_report(counts, knowledge))
    return 0


def present_forms(tokenizer: Any) -> tuple[Tensor, Tensor]:
    """(`numbers`, `flips`), both [vocab]: `numbers` is 1 for a singular present-tense verb form
    ("runs", "does"), 2 for a plural one ("run", "do"), 0 otherwise; `flips` maps such a form's id
    to its other-number form's and every other id to itself. Only verbs whose both forms are single
    vocabulary pieces count. (A base form after "does not" counts as plural too: a small share.)"""
    from xfer.core.toy.lexicon import ToyLexicon

    vocab = tokenizer.vocab
    numbers = torch.zeros(tokenizer.vocab_size, dtype=torch.long)
    flips = torch.arange(tokenizer.vocab_size)
    for singular, plural in [(verb.sg3, verb.base) for verb in ToyLexicon().verbs] + [("does", "do")]:
        if singular in vocab and plural in vocab:
            numbers[vocab[singular]], numbers[vocab[plural]] = 1, 2
            flips[vocab[singular]], flips[vocab[plural]] = vocab[plural], vocab[singular]
    if not numbers.any():
        raise ProbeError("no toy-language verb is a single piece of this vocabulary: not a toy.corpus stage?")
    return numbers, flips


@dataclass(frozen=True)
class Replacements:
    """What the generator put at masked present-tense verbs, summed over the probed examples."""

    examples: int
    replaced: int  # replaced tokens anywhere (a sample equal to the original is not replaced)
    masked_verbs: int  # masked positions holding a present-tense verb form
    agreement_errors: int  # replaced by a present-tense form of the other number
    same_number: int  # replaced by another present-tense form of the same number
    other: int  # replaced by anything else
    replaced_verbs: int = 0  # masked verbs replaced at all: the three kinds above add up to it
    sampled: int = 0  # positions sampled (masked), replaced or not
    objective: str = "electra.rtd"  # the stage's objective: Electric labels every sampled position noise


def generator_replacements(objective: Any, table: Any, numbers: Tensor, n_examples: int, seed: int) -> Replacements:
    """Mask and sample `n_examples` packed examples as training does, in batches of 64."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    pad = objective.tokens.pad
    totals = np.zeros(7, dtype=np.int64)
    done = 0
    with torch.no_grad():
        while done < min(n_examples, len(table)):
            batch = random_batch(table, min(64, n_examples - done), rng, pad)
            originals, sampled = training_samples(objective, batch)
            replaced = sampled != originals
            at_verb = numbers[originals] > 0
            wrong = at_verb & replaced & (numbers[sampled] > 0) & (numbers[sampled] != numbers[originals])
            same = at_verb & replaced & (numbers[sampled] == numbers[originals])
            other = at_verb & replaced & (numbers[sampled] == 0)
            counted = [replaced, at_verb, wrong, same, other, at_verb & replaced]
            totals += [int(x.sum()) for x in counted] + [originals.numel()]
            done += batch["input_ids"].shape[0]
    replaced_all, masked_verbs, wrong, same, other, replaced_verbs, sampled_all = (int(x) for x in totals)
    return Replacements(
        done, replaced_all, masked_verbs, wrong, same, other, replaced_verbs, sampled_all, objective.family
    )


def training_samples(objective: Any, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    """(original tokens, sampled tokens) at the positions a training step of `objective` would
    replace, drawn as its `forward` draws them (the same random numbers in the same order)."""
    if objective.family == "electric.nce":
        return _electric_noise(objective, batch)
    selection = objective.select(batch)
    originals = batch["input_ids"].reshape(-1).index_select(0, selection.flat)
    return originals, objective._generate(batch, selection, originals).sampled


def _electric_noise(objective: Any, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    """ElectricObjective.forward's noise: k = ceil(mask_prob n) positions, each sampled from the
    two-tower q (computed at every real position, from the original input) at its temperature."""
    from xfer.electra.sampling import sample_softmax

    ids, attention = batch["input_ids"], batch["attention_mask"]
    selection = objective.select(batch, rounding="ceil")
    real = attention.reshape(-1).nonzero().squeeze(1)
    log_q = objective.generator.logits_at(ids, attention, batch.get("token_type_ids"), real).float().log_softmax(-1)
    at_selection = torch.searchsorted(real, selection.flat)
    sampled = sample_softmax(log_q.index_select(0, at_selection), objective.config.generator.temperature)
    return ids.reshape(-1).index_select(0, selection.flat), sampled


@dataclass(frozen=True)
class AgreementPair:
    """One agreeing verb of a grammatical sentence: the sentence's ids as is and with that verb
    flipped to the other number, the verb's position in both, and whether an attractor intervenes."""

    original: list[int]
    flipped: list[int]
    position: int
    attractor: bool


def agreement_pairs(tokenizer: Any, n_sentences: int) -> list[AgreementPair]:
    """Pairs from the grammatical sentences among the first `n_sentences` toy/agreement dev examples."""
    from xfer.core.toy.lexicon import ToyLexicon
    from xfer.core.toy.tasks import ToyAgreementTask, ToyTaskConfig

    lexicon, vocab = ToyLexicon(), tokenizer.vocab
    task = ToyAgreementTask("toy/agreement", ToyTaskConfig(dev_size=n_sentences))
    pairs = []
    for sentence in task.toy_sentences("dev"):
        if not sentence.grammatical:
            continue
        encoded = tokenizer.encode_words(list(sentence.words))
        for agreement in sentence.agreements:
            verb = sentence.words[agreement.verb]
            other = lexicon.other_number(verb)
            if verb not in vocab or other not in vocab or agreement.verb >= encoded.num_words:
                continue
            position = encoded.word_starts[agreement.verb]
            flipped = list(encoded.input_ids)
            flipped[position] = vocab[other]
            pairs.append(AgreementPair(list(encoded.input_ids), flipped, position, bool(agreement.attractors)))
    if not pairs:
        raise ProbeError(
            f"none of the first {n_sentences} toy/agreement dev sentences is grammatical with an agreeing "
            "verb whose both forms are single pieces of this vocabulary (raise --sentences)"
        )
    return pairs


def discriminator_scorer(objective: Any) -> Scorer:
    """The detector's per-token score, higher for a replaced token: ELECTRA's "replaced" logit, or
    Electric's energy E(x)_t (`ElectricObjective.energy`: the same head over the discriminator)."""

    def score(ids: Tensor, attention: Tensor) -> Tensor:
        hidden = objective.discriminator(ids, attention, torch.zeros_like(ids)).last_hidden_state
        return objective.head(hidden).float()

    return score


def zero_shot(score: Scorer, pairs: Sequence[AgreementPair], pad_id: int) -> dict[str, tuple[float, int]]:
    """{"no attractor": (AUC, verbs), "attractor": (AUC, verbs)}: the verb's logit flipped vs as is.
    A split without pairs has AUC nan."""
    from sklearn.metrics import roc_auc_score

    logits: list[tuple[float, float]] = []
    with torch.no_grad():
        for start in range(0, len(pairs), 64):
            chunk = pairs[start : start + 64]
            sequences = [torch.tensor(p.original) for p in chunk] + [torch.tensor(p.flipped) for p in chunk]
            ids = pad_sequence(sequences, batch_first=True, padding_value=pad_id)
            scores = score(ids, (ids != pad_id).long())
            for row, pair in enumerate(chunk):
                logits.append((float(scores[row, pair.position]), float(scores[len(chunk) + row, pair.position])))
    out = {}
    for name, attracted in (("no attractor", False), ("attractor", True)):
        chosen = [pair_logits for pair_logits, p in zip(logits, pairs, strict=True) if p.attractor == attracted]
        if not chosen:
            out[name] = (float("nan"), 0)
            continue
        y = [0, 1] * len(chosen)
        x = [value for as_is, flipped in chosen for value in (as_is, flipped)]
        out[name] = (100.0 * float(roc_auc_score(y, x)), len(chosen))
    return out


def format_report(counts: Replacements, knowledge: dict[str, tuple[float, int]]) -> str:
    def share(n: int) -> str:
        return f"{n:7d}  {100.0 * n / max(counts.replaced, 1):5.1f}% of all replacements"

    electric = counts.objective == "electric.nce"
    lines = [
        f"{'noise model' if electric else 'generator'}, {counts.examples} packed examples: "
        f"{counts.replaced} tokens replaced, {counts.masked_verbs} masked present-tense verbs",
        f"  replaced by the other number's form (agreement error)  {share(counts.agreement_errors)}",
        f"  replaced by a form of the same number                  {share(counts.same_number)}",
        f"  replaced by anything else                              {share(counts.other)}",
    ]
    if electric:
        lines.append(
            f"  (electric.nce labels all {counts.sampled} sampled positions noise, also the "
            f"{counts.sampled - counts.replaced} samples equal to the original; only samples that differ "
            "count here: a same-token sample teaches nothing about agreement)"
        )
    score = "energy E(x)_t" if electric else "'replaced' logit"
    lines.append(f"discriminator, zero-shot: AUC of the {score}, verb flipped vs as is (50 = no knowledge)")
    lines += [f"  {name:13s} {auc:5.1f}  ({n} verbs)" for name, (auc, n) in knowledge.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())

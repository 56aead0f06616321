"""The toy grammar: `ToyGrammar` expands sentences and records their annotations as it goes.

Annotations (POS tags, BIO chunks, subject-verb agreement dependencies with their attractors)
are produced by the same expansion that produces the words, which is why they are known rather
than guessed. The grammar's unambiguity constraints are explained in the package docstring.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Literal

from xfer.core.config import knob
from xfer.core.toy.lexicon import _AUX, _PRONOUNS, Noun, NounKind, Number, ToyLexicon, Verb
from xfer.core.toy.rng import derive_rng

Role = Literal["main", "subject_relative", "object_relative"]

POS_TAGS: tuple[str, ...] = tuple(
    sorted((",", ".", "CC", "DT", "IN", "JJ", "NN", "NNP", "NNS", "PRP", "RB", "VB", "VBD", "VBP", "VBZ", "WDT", "WP"))
)
"""Every part-of-speech tag the grammar can emit, sorted (the `ToyPosTask` label order)."""

CHUNK_TAGS: tuple[str, ...] = tuple(sorted(("B-ADVP", "B-NP", "B-PP", "B-SBAR", "B-VP", "I-NP", "I-VP", "O")))
"""Every chunk tag the grammar can emit, sorted. (No I-PP/I-ADVP/I-SBAR: those chunks are one word.)"""


# ---------------------------------------------------------------------------------------------
# Sentences and their annotations.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    """One subject–verb agreement dependency of a present-tense verb (past tense has none).

    `verb` is the index of the agreeing word (the verb, or "does"/"do" under negation);
    `controllers` the index of the subject's head noun (two for "the dog and the cat");
    `number` the number the controllers require; `attractors` the indices of nouns/pronouns of
    the *other* number between the last controller and the verb — what makes the dependency
    hard for a model that just looks at the nearest noun.
    """

    verb: int
    controllers: tuple[int, ...]
    number: Number
    role: Role
    attractors: tuple[int, ...] = ()

    @property
    def expected_tag(self) -> str:
        return "VBZ" if self.number == "sg" else "VBP"


@dataclass(frozen=True)
class ToySentence:
    """A generated sentence: words, one POS tag and one chunk tag per word, agreement metadata.

    `corrupted_verb` is None for a grammatical sentence and the index of the flipped verb for one
    made by `ToyGrammar.corrupt`; the agreement metadata always states what grammar requires, so
    `violations()` is empty exactly when the sentence is grammatical.
    """

    words: tuple[str, ...]
    pos: tuple[str, ...]
    chunks: tuple[str, ...]
    agreements: tuple[Agreement, ...]
    corrupted_verb: int | None = None

    def __post_init__(self) -> None:
        if not len(self.words) == len(self.pos) == len(self.chunks):
            raise ValueError(f"{len(self.words)} words, {len(self.pos)} POS tags, {len(self.chunks)} chunk tags")

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def grammatical(self) -> bool:
        return self.corrupted_verb is None

    def violations(self) -> tuple[Agreement, ...]:
        """Agreements whose verb form does not match the number its controllers require."""
        return tuple(a for a in self.agreements if self.pos[a.verb] != a.expected_tag)


@dataclass
class ToyGrammarConfig:
    """Shape of the toy language. Probabilities are per decision point; all in [0, 1]."""

    seed: int = knob(0, "Seed used by `ToyGrammar.sentences`/`generate_text` when none is passed.")
    max_words: int = knob(25, "Longest sentence in tokens, punctuation included (longer ones are redrawn).")
    max_depth: int = knob(2, "Deepest nesting of prepositional phrases and relative clauses.")
    relative_clause_prob: float = knob(0.35, "Chance that a common noun phrase gets a relative clause.")
    object_relative_prob: float = knob(
        0.5, "Chance that a relative clause is an object relative ('the dog that the cats chase')."
    )
    pp_prob: float = knob(0.3, "Chance that a noun phrase gets a prepositional phrase (if no relative clause).")
    vp_pp_prob: float = knob(0.2, "Chance that a verb phrase ends with a prepositional phrase.")
    adjective_prob: float = knob(0.3, "Chance of each adjective (at most two) before a noun.")
    adverb_prob: float = knob(0.15, "Chance that a verb phrase has an adverb.")
    plural_prob: float = knob(0.5, "Chance that a noun phrase or pronoun is plural.")
    proper_name_prob: float = knob(0.1, "Chance that a noun phrase is a proper name.")
    pronoun_prob: float = knob(0.1, "Chance that a subject or object is a pronoun.")
    transitive_prob: float = knob(0.5, "Chance that a verb phrase has a transitive verb and an object.")
    past_prob: float = knob(0.15, "Chance that a verb is in the past tense (which shows no agreement).")
    negation_prob: float = knob(0.08, "Chance that a verb is negated with do-support ('does not run').")
    coordination_prob: float = knob(0.1, "Chance that a sentence is two clauses joined by ', and'/', but'.")
    subject_coordination_prob: float = knob(0.06, "Chance that a subject is 'NP and NP' (plural agreement).")
    attractor_preference: float = knob(
        0.9, "When corrupting, chance of flipping a verb that has an attractor (if one exists)."
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name.endswith(("_prob", "_preference")):
                value = getattr(self, f.name)
                if not 0.0 <= value <= 1.0:
                    raise ValueError(f"ToyGrammarConfig.{f.name} must be in [0, 1], got {value}")
        if self.relative_clause_prob + self.pp_prob > 1.0:
            raise ValueError("ToyGrammarConfig: relative_clause_prob + pp_prob must not exceed 1")
        if self.pronoun_prob + self.proper_name_prob > 1.0:
            raise ValueError("ToyGrammarConfig: pronoun_prob + proper_name_prob must not exceed 1")
        if self.max_words < 3:
            raise ValueError(f"ToyGrammarConfig.max_words must be at least 3 ('Alice runs .'), got {self.max_words}")
        if self.max_depth < 0:
            raise ValueError(f"ToyGrammarConfig.max_depth must be >= 0, got {self.max_depth}")


@dataclass(frozen=True)
class _Head:
    """The head of a noun phrase: what a verb agreeing with it needs."""

    indices: tuple[int, ...]
    number: Number
    kind: NounKind


@dataclass
class _Builder:
    """Accumulates one sentence's tokens and annotations while the grammar expands."""

    words: list[str] = field(default_factory=list)
    pos: list[str] = field(default_factory=list)
    chunks: list[str] = field(default_factory=list)
    nominals: list[tuple[int, Number]] = field(default_factory=list)
    agreements: list[Agreement] = field(default_factory=list)

    def add(self, word: str, tag: str, chunk: str) -> int:
        self.words.append(word)
        self.pos.append(tag)
        self.chunks.append(chunk)
        return len(self.words) - 1

    def nominal(self, word: str, tag: str, chunk: str, number: Number) -> int:
        index = self.add(word, tag, chunk)
        self.nominals.append((index, number))
        return index

    def finish(self) -> ToySentence:
        agreements = tuple(
            Agreement(
                a.verb,
                a.controllers,
                a.number,
                a.role,
                tuple(i for i, n in self.nominals if max(a.controllers) < i < a.verb and n != a.number),
            )
            for a in self.agreements
        )
        return ToySentence(tuple(self.words), tuple(self.pos), tuple(self.chunks), agreements)


class ToyGrammar:
    """The probabilistic grammar. Stateless apart from its config and lexicon: all randomness
    comes from the `random.Random` passed in, so callers control (and can reproduce) streams.

    Grammar (depth-limited by `max_depth`, length-limited by `max_words`):

        S        -> Clause ( "," CC Clause )? "."
        Clause   -> Subject VP
        Subject  -> SimpleNP "and" SimpleNP | NP(animate, subject case)
        NP       -> PRP | NNP | Det Adj* N ( RelClause | PP )?
        PP       -> IN Det Adj* N(thing) PP?            # no relative clauses inside PPs
        RelClause-> ("who"|"that"|"which") VP           # subject relative, animate head
                  | ("that"|"who"|"which") NP V (Adv)? (PP)?   # object relative, gap after V
        VP       -> VerbGroup (NP if transitive) (Adv)? (PP)?
        VerbGroup-> V | ("does"|"do"|"did") "not" V-base
    """

    def __init__(self, config: ToyGrammarConfig | None = None):
        self.config = config if config is not None else ToyGrammarConfig()
        self.lexicon = ToyLexicon()

    # -- public API ---------------------------------------------------------------------------

    def sentence(self, rng: random.Random) -> ToySentence:
        """One grammatical sentence of at most `max_words` tokens, drawn from `rng`.

        Over-long draws are discarded and redrawn (from the same `rng`, so still deterministic);
        that keeps each expansion simple at the cost of a slight bias towards short structures.
        """
        for _ in range(10_000):
            sentence = self._draw(rng)
            if len(sentence.words) <= self.config.max_words:
                return sentence
        raise RuntimeError(f"no sentence of at most {self.config.max_words} words in 10000 draws; raise max_words")

    def sentences(self, n: int, seed: int | None = None) -> list[ToySentence]:
        """`n` sentences from the stream named by `seed` (default: the config's seed)."""
        rng = derive_rng(self.config.seed if seed is None else seed, "sentences")
        return [self.sentence(rng) for _ in range(n)]

    def corrupt(self, sentence: ToySentence, rng: random.Random) -> ToySentence | None:
        """The sentence with exactly one present-tense agreement broken, or None if it has none.

        The flipped verb is one with an attractor (an intervening noun of the other number) with
        probability `attractor_preference` when such a verb exists: flipping only verbs right
        after their subject would make the task solvable by looking at the nearest noun.
        """
        if not sentence.grammatical:
            raise ValueError("corrupt() expects a grammatical sentence")
        if not sentence.agreements:
            return None
        attracted = [a for a in sentence.agreements if a.attractors]
        pool = list(sentence.agreements)
        if attracted and rng.random() < self.config.attractor_preference:
            pool = attracted
        target = rng.choice(pool)
        words, pos = list(sentence.words), list(sentence.pos)
        words[target.verb] = self.lexicon.other_number(words[target.verb])
        pos[target.verb] = "VBP" if pos[target.verb] == "VBZ" else "VBZ"
        return ToySentence(tuple(words), tuple(pos), sentence.chunks, sentence.agreements, target.verb)

    # -- expansion ----------------------------------------------------------------------------

    def _draw(self, rng: random.Random) -> ToySentence:
        b = _Builder()
        self._clause(b, rng)
        if rng.random() < self.config.coordination_prob:
            b.add(",", ",", "O")
            b.add(rng.choice(self.lexicon.conjunctions), "CC", "O")
            self._clause(b, rng)
        b.add(".", ".", "O")
        return b.finish()

    def _clause(self, b: _Builder, rng: random.Random) -> None:
        subject = self._subject(b, rng)
        self._vp(b, rng, subject, depth=0, role="main")

    def _subject(self, b: _Builder, rng: random.Random) -> _Head:
        if rng.random() < self.config.subject_coordination_prob:
            first = self._simple_np(b, rng)
            b.add("and", "CC", "O")
            second = self._simple_np(b, rng)
            return _Head(first.indices + second.indices, "pl", "person")
        return self._np(b, rng, depth=0, case="subj", nouns=self.lexicon.animate_nouns)

    def _number(self, rng: random.Random) -> Number:
        return "pl" if rng.random() < self.config.plural_prob else "sg"

    def _simple_np(self, b: _Builder, rng: random.Random) -> _Head:
        """A name or Det Adj* N without modifiers (conjuncts, so coordination stays unambiguous)."""
        if rng.random() < self.config.proper_name_prob:
            return self._name(b, rng)
        return self._common_np(b, rng, self.lexicon.animate_nouns)

    def _np(self, b: _Builder, rng: random.Random, depth: int, case: str, nouns: Sequence[Noun]) -> _Head:
        r = rng.random()
        if r < self.config.pronoun_prob:
            return self._pronoun(b, rng, case)
        if r < self.config.pronoun_prob + self.config.proper_name_prob:
            return self._name(b, rng)
        head = self._common_np(b, rng, nouns)
        self._modifier(b, rng, head, depth)
        return head

    def _pronoun(self, b: _Builder, rng: random.Random, case: str) -> _Head:
        number = self._number(rng)
        options = [w for w, n, c in _PRONOUNS if n == number and c in (case, None)]
        index = b.nominal(rng.choice(options), "PRP", "B-NP", number)
        return _Head((index,), number, "person")

    def _name(self, b: _Builder, rng: random.Random) -> _Head:
        index = b.nominal(rng.choice(self.lexicon.names), "NNP", "B-NP", "sg")
        return _Head((index,), "sg", "person")

    def _common_np(self, b: _Builder, rng: random.Random, nouns: Sequence[Noun]) -> _Head:
        noun = rng.choice(nouns)
        number = self._number(rng)
        adjectives = self._adjectives(rng)
        form = noun.form(number)
        b.add(self._determiner(rng, number, adjectives[0] if adjectives else form), "DT", "B-NP")
        for adjective in adjectives:
            b.add(adjective, "JJ", "I-NP")
        index = b.nominal(form, "NN" if number == "sg" else "NNS", "I-NP", number)
        return _Head((index,), number, noun.kind)

    def _adjectives(self, rng: random.Random) -> list[str]:
        chosen: list[str] = []
        while len(chosen) < 2 and rng.random() < self.config.adjective_prob:
            chosen.append(rng.choice([a for a in self.lexicon.adjectives if a not in chosen]))
        return chosen

    def _determiner(self, rng: random.Random, number: Number, next_word: str) -> str:
        options = [(d, w) for d, n, w in self.lexicon.determiners if n in (number, None)]
        det = rng.choices([d for d, _ in options], weights=[w for _, w in options])[0]
        return "an" if det == "a" and next_word[0] in "aeiou" else det

    def _modifier(self, b: _Builder, rng: random.Random, head: _Head, depth: int) -> None:
        """At most one post-modifier, so a relative clause never follows a PP (see package doc)."""
        if depth >= self.config.max_depth:
            return
        r = rng.random()
        if r < self.config.relative_clause_prob:
            self._relative(b, rng, head, depth + 1)
        elif r < self.config.relative_clause_prob + self.config.pp_prob:
            self._pp(b, rng, depth + 1)

    def _pp(self, b: _Builder, rng: random.Random, depth: int) -> None:
        b.add(rng.choice(self.lexicon.prepositions), "IN", "B-PP")
        self._common_np(b, rng, self.lexicon.thing_nouns)  # "near a chair", not "in a man"
        if depth < self.config.max_depth and rng.random() < self.config.pp_prob:
            self._pp(b, rng, depth + 1)

    def _relative(self, b: _Builder, rng: random.Random, head: _Head, depth: int) -> None:
        subject_relative = head.kind != "thing" and rng.random() >= self.config.object_relative_prob
        pronoun = rng.choice(("who", "that") if head.kind == "person" else ("that", "which"))
        b.add(pronoun, "WP" if pronoun == "who" else "WDT", "B-SBAR")
        if subject_relative:
            self._vp(b, rng, head, depth, role="subject_relative")
            return
        subject = self._np(b, rng, depth, case="subj", nouns=self.lexicon.animate_nouns)
        self._verb_group(b, rng, subject, rng.choice(self.lexicon.transitive_verbs), "object_relative")
        self._vp_tail(b, rng, depth)

    def _vp(self, b: _Builder, rng: random.Random, controller: _Head, depth: int, role: Role) -> None:
        transitive = rng.random() < self.config.transitive_prob
        verbs = self.lexicon.transitive_verbs if transitive else self.lexicon.intransitive_verbs
        self._verb_group(b, rng, controller, rng.choice(verbs), role)
        if transitive:
            self._np(b, rng, depth, case="obj", nouns=self.lexicon.nouns)
        self._vp_tail(b, rng, depth)

    def _vp_tail(self, b: _Builder, rng: random.Random, depth: int) -> None:
        if rng.random() < self.config.adverb_prob:
            b.add(rng.choice(self.lexicon.adverbs), "RB", "B-ADVP")
        if depth < self.config.max_depth and rng.random() < self.config.vp_pp_prob:
            self._pp(b, rng, depth + 1)

    def _verb_group(self, b: _Builder, rng: random.Random, controller: _Head, verb: Verb, role: Role) -> None:
        """The finite verb (or "does/do/did not" + base form); records agreement if present tense."""
        past = rng.random() < self.config.past_prob
        number = controller.number
        if rng.random() < self.config.negation_prob:
            aux = "did" if past else _AUX[number]
            index = b.add(aux, "VBD" if past else ("VBZ" if number == "sg" else "VBP"), "B-VP")
            b.add("not", "RB", "I-VP")
            b.add(verb.base, "VB", "I-VP")
        elif past:
            index = b.add(verb.past, "VBD", "B-VP")
        else:
            index = b.add(verb.sg3 if number == "sg" else verb.base, "VBZ" if number == "sg" else "VBP", "B-VP")
        if not past:
            b.agreements.append(Agreement(index, controller.indices, number, role))

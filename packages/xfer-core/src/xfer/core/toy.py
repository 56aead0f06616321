"""A deterministic toy English for the embedded quickstart and for tests.

Real corpora are large, licensed and slow to download; a quickstart demo and the test suite need
text and labelled sets that exist offline, build in milliseconds and still make a model *learn*
something. This module generates them from a small probabilistic grammar of English-like
sentences ("the dog that the cats chase runs .") with a lexicon of a few hundred words.

Because every sentence is generated, its annotations are known rather than guessed:

- part-of-speech tags (PTB-like: DT JJ NN NNS NNP PRP VBZ VBP VBD VB RB IN CC WDT WP , .),
- base-phrase chunks in BIO (CoNLL-2000-like: NP, VP, PP, ADVP, SBAR),
- every subject–verb agreement dependency (which verb agrees with which head noun, and which
  nouns of the other number intervene — "attractors"), so that a grammaticality task can flip
  exactly one verb and stay unambiguous.

Determinism: all randomness comes from `random.Random` instances seeded with strings (hashed
with SHA-512 by the standard library, so independent of `PYTHONHASHSEED` and the machine);
nothing iterates over sets or uses the global RNG. Same seed, same output, everywhere.

Design choices that keep the labelled sets honest:

- The grammar is unambiguous wherever agreement depends on structure: a relative clause only
  attaches to a noun phrase without a prepositional phrase, and noun phrases inside
  prepositional phrases never take relative clauses, so "the dog near the cats that sleep"
  cannot be re-read with the clause attached to "dog". A corrupted sentence is therefore
  ungrammatical under every parse, not just under the one that generated it.
- Relative pronouns are chunked as B-SBAR (the brief for this demo: the chunk marks the clause
  boundary). Note that CoNLL-2000 itself tags wh-relative pronouns as B-NP; a model trained
  here learns the toy convention.
- Splits come from separate random streams and each distinct sentence is assigned to exactly
  one split by a hash of its text, so train/dev/test never share a sentence, and a tagging
  split of size n is a prefix of the same split of size n + k (the agreement task's balanced
  label shuffle depends on the size, so there only the underlying sentence stream is shared).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Literal

from xfer.core import metrics
from xfer.core.config import knob
from xfer.core.errors import DataError
from xfer.core.tasks import Example, SentenceExample, Split, TaggingExample, Task, missing_predictions

Number = Literal["sg", "pl"]
NounKind = Literal["person", "animal", "thing"]
Role = Literal["main", "subject_relative", "object_relative"]

POS_TAGS: tuple[str, ...] = tuple(
    sorted((",", ".", "CC", "DT", "IN", "JJ", "NN", "NNP", "NNS", "PRP", "RB", "VB", "VBD", "VBP", "VBZ", "WDT", "WP"))
)
"""Every part-of-speech tag the grammar can emit, sorted (the `ToyPosTask` label order)."""

CHUNK_TAGS: tuple[str, ...] = tuple(sorted(("B-ADVP", "B-NP", "B-PP", "B-SBAR", "B-VP", "I-NP", "I-VP", "O")))
"""Every chunk tag the grammar can emit, sorted. (No I-PP/I-ADVP/I-SBAR: those chunks are one word.)"""

SPLITS: tuple[Split, ...] = ("train", "dev", "test")

# ---------------------------------------------------------------------------------------------
# Lexicon data. Plain immutable strings: "singular:plural" for irregular nouns, "3sg:base:past"
# for verbs. Every word form belongs to exactly one category (checked when the lexicon is built)
# except verb base forms, which are both VBP ("they run") and VB ("does not run") — the one
# tagging ambiguity a POS model has to resolve from context.
# ---------------------------------------------------------------------------------------------

_PERSONS = (
    "teacher doctor farmer student child:children man:men woman:women girl boy king queen pilot baker "
    "artist writer singer lawyer nurse sailor friend neighbor"
)
_ANIMALS = "dog cat bird horse mouse:mice rabbit fox:foxes wolf:wolves lion bear duck goat cow frog owl"
_THINGS = (
    "book table house car garden river tree box:boxes city:cities road window door hill ship song letter "
    "picture bridge lamp chair village forest church:churches bottle key apple island egg"
)
_NAMES = "Alice Bob Carol David Emma Frank Grace Henry Iris Jack Kate Leo Mary Nick Olivia Paul"
_TRANSITIVE = (
    "chases:chase:chased sees:see:saw likes:like:liked finds:find:found follows:follow:followed "
    "watches:watch:watched helps:help:helped visits:visit:visited carries:carry:carried "
    "pushes:push:pushed loves:love:loved knows:know:knew meets:meet:met catches:catch:caught "
    "calls:call:called admires:admire:admired ignores:ignore:ignored feeds:feed:fed "
    "teaches:teach:taught builds:build:built paints:paint:painted draws:draw:drew "
    "remembers:remember:remembered"
)
_INTRANSITIVE = (
    "runs:run:ran sleeps:sleep:slept sings:sing:sang jumps:jump:jumped laughs:laugh:laughed "
    "smiles:smile:smiled swims:swim:swam cries:cry:cried waits:wait:waited dances:dance:danced "
    "sits:sit:sat arrives:arrive:arrived works:work:worked travels:travel:traveled rests:rest:rested"
)
_ADJECTIVES = (
    "old young big small happy sad angry quiet loud brave clever lazy busy tired hungry gentle wild tall "
    "red green blue dark bright empty heavy famous strange friendly proud calm eager ugly elegant "
    "little curious"
)
_ADVERBS = "quickly slowly quietly loudly happily sadly carefully gladly eagerly often again together"
_PREPOSITIONS = "in on near with behind under beside above below across"
_CONJUNCTIONS = "and but"
# Determiner -> number it selects (None: either). Weights say how often each is chosen.
_DETERMINERS: tuple[tuple[str, Number | None, float], ...] = (
    ("the", None, 0.5),
    ("no", None, 0.04),
    ("a", "sg", 0.26),
    ("every", "sg", 0.08),
    ("each", "sg", 0.05),
    ("this", "sg", 0.07),
    ("these", "pl", 0.12),
    ("those", "pl", 0.1),
    ("some", "pl", 0.2),
)
_PRONOUNS: tuple[tuple[str, Number, str | None], ...] = (
    ("he", "sg", "subj"),
    ("she", "sg", "subj"),
    ("it", "sg", None),  # same form as subject and object
    ("they", "pl", "subj"),
    ("him", "sg", "obj"),
    ("her", "sg", "obj"),
    ("them", "pl", "obj"),
)
_AUX = {"sg": "does", "pl": "do"}  # present "do"-support for negation; "did" in the past


@dataclass(frozen=True)
class Noun:
    singular: str
    plural: str
    kind: NounKind

    def form(self, number: Number) -> str:
        return self.singular if number == "sg" else self.plural


@dataclass(frozen=True)
class Verb:
    sg3: str  # "runs"  (VBZ)
    base: str  # "run"  (VBP, and VB after "does not")
    past: str  # "ran"  (VBD, no agreement)
    transitive: bool


@dataclass(frozen=True)
class WordInfo:
    """One reading of a word: its tag plus what agreement checks need to know about it.

    `number` is set for nouns, pronouns, number-selecting determiners and present-tense verb
    forms; `case` ("subj"/"obj") for pronouns that have only one; `transitive` for verbs.
    """

    word: str
    tag: str
    number: Number | None = None
    case: str | None = None
    transitive: bool | None = None


def _parse_nouns(spec: str, kind: NounKind) -> tuple[Noun, ...]:
    nouns = []
    for item in spec.split():
        singular, _, plural = item.partition(":")
        nouns.append(Noun(singular, plural or singular + "s", kind))
    return tuple(nouns)


def _parse_verbs(spec: str, transitive: bool) -> tuple[Verb, ...]:
    return tuple(Verb(*item.split(":"), transitive=transitive) for item in spec.split())


class ToyLexicon:
    """The toy vocabulary, grouped by category, with a reverse index from word to readings.

    Built from the constant tables above so tests (and the independent agreement checker in
    them) can look words up without touching generation code.
    """

    def __init__(self) -> None:
        self.nouns: tuple[Noun, ...] = (
            _parse_nouns(_PERSONS, "person") + _parse_nouns(_ANIMALS, "animal") + _parse_nouns(_THINGS, "thing")
        )
        self.names: tuple[str, ...] = tuple(_NAMES.split())
        self.verbs: tuple[Verb, ...] = _parse_verbs(_TRANSITIVE, True) + _parse_verbs(_INTRANSITIVE, False)
        self.adjectives: tuple[str, ...] = tuple(_ADJECTIVES.split())
        self.adverbs: tuple[str, ...] = tuple(_ADVERBS.split())
        self.prepositions: tuple[str, ...] = tuple(_PREPOSITIONS.split())
        self.conjunctions: tuple[str, ...] = tuple(_CONJUNCTIONS.split())
        self.determiners = _DETERMINERS
        self.animate_nouns = tuple(n for n in self.nouns if n.kind != "thing")
        self.thing_nouns = tuple(n for n in self.nouns if n.kind == "thing")
        self.transitive_verbs = tuple(v for v in self.verbs if v.transitive)
        self.intransitive_verbs = tuple(v for v in self.verbs if not v.transitive)
        self._index = self._build_index()
        self._other_number = self._build_number_flips()

    def _build_index(self) -> dict[str, tuple[WordInfo, ...]]:
        readings: dict[str, list[WordInfo]] = {}

        def add(info: WordInfo) -> None:
            readings.setdefault(info.word, []).append(info)

        for noun in self.nouns:
            add(WordInfo(noun.singular, "NN", "sg"))
            add(WordInfo(noun.plural, "NNS", "pl"))
        for name in self.names:
            add(WordInfo(name, "NNP", "sg"))
        for verb in self.verbs:
            add(WordInfo(verb.sg3, "VBZ", "sg", transitive=verb.transitive))
            add(WordInfo(verb.base, "VBP", "pl", transitive=verb.transitive))
            add(WordInfo(verb.base, "VB", transitive=verb.transitive))
            add(WordInfo(verb.past, "VBD", transitive=verb.transitive))
        add(WordInfo("does", "VBZ", "sg"))
        add(WordInfo("do", "VBP", "pl"))
        add(WordInfo("did", "VBD"))
        add(WordInfo("not", "RB"))
        for word in self.adjectives:
            add(WordInfo(word, "JJ"))
        for word in self.adverbs:
            add(WordInfo(word, "RB"))
        for word in self.prepositions:
            add(WordInfo(word, "IN"))
        for word in self.conjunctions:
            add(WordInfo(word, "CC"))
        for det, number, _ in self.determiners:
            add(WordInfo(det, "DT", number))
        add(WordInfo("an", "DT", "sg"))
        for word, number, case in _PRONOUNS:
            add(WordInfo(word, "PRP", number, case))
        add(WordInfo("who", "WP"))
        add(WordInfo("that", "WDT"))
        add(WordInfo("which", "WDT"))
        add(WordInfo(",", ","))
        add(WordInfo(".", "."))
        self._check_unambiguous(readings)
        return {word: tuple(infos) for word, infos in readings.items()}

    @staticmethod
    def _check_unambiguous(readings: Mapping[str, list[WordInfo]]) -> None:
        """Fail loudly if an edit to the tables makes a word ambiguous beyond the intended cases.

        Ambiguity elsewhere (a noun that is also a verb, an invariant plural like "sheep") would
        make agreement depend on a reading the corrupted sentence might satisfy, i.e. label noise
        in the agreement task.
        """
        for word, infos in readings.items():
            tags = {info.tag for info in infos}
            if len(infos) > 1 and tags != {"VBP", "VB"}:
                raise AssertionError(f"toy lexicon: {word!r} is ambiguous between {sorted(tags)}")

    def _build_number_flips(self) -> dict[str, str]:
        flips = {_AUX["sg"]: _AUX["pl"], _AUX["pl"]: _AUX["sg"]}
        for verb in self.verbs:
            flips[verb.sg3] = verb.base
            flips[verb.base] = verb.sg3
        return flips

    def analyses(self, word: str) -> tuple[WordInfo, ...]:
        """All readings of `word` (empty if it is not in the toy language)."""
        return self._index.get(word, ())

    def tags(self, word: str) -> frozenset[str]:
        return frozenset(info.tag for info in self.analyses(word))

    def other_number(self, word: str) -> str:
        """The present-tense form of the other number: "runs" <-> "run", "does" <-> "do"."""
        try:
            return self._other_number[word]
        except KeyError:
            raise ValueError(f"{word!r} is not a present-tense verb form of the toy lexicon") from None

    def vocabulary(self) -> tuple[str, ...]:
        """Every word form, sorted: what a tokenizer trained on the toy text can ever see."""
        return tuple(sorted(self._index))


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
        """At most one post-modifier, so a relative clause never follows a PP (see module doc)."""
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


# ---------------------------------------------------------------------------------------------
# Unlabelled text.
# ---------------------------------------------------------------------------------------------


def derive_rng(seed: int, *stream: str) -> random.Random:
    """An RNG for the named sub-stream of `seed` (e.g. `derive_rng(13, "agreement", "dev")`).

    Seeding with a string makes `random` hash it with SHA-512, so different streams of one seed
    are independent and the result does not depend on `PYTHONHASHSEED` or the platform.
    """
    return random.Random("/".join(("xfer.toy", str(seed), *stream)))


def generate_text(
    n_sentences: int,
    seed: int | None = None,
    sentences_per_document: int = 8,
    config: ToyGrammarConfig | None = None,
) -> list[list[str]]:
    """`n_sentences` sentences (space-separated tokens) grouped into documents.

    Documents are consecutive groups of `sentences_per_document` (the last may be shorter), so
    pre-training objectives that need document boundaries (next-sentence tasks, packing) work.
    `seed` defaults to the config's seed.
    """
    if sentences_per_document < 1:
        raise ValueError(f"sentences_per_document must be >= 1, got {sentences_per_document}")
    grammar = ToyGrammar(config)
    rng = derive_rng(grammar.config.seed if seed is None else seed, "text")
    texts = [grammar.sentence(rng).text for _ in range(n_sentences)]
    return [texts[i : i + sentences_per_document] for i in range(0, len(texts), sentences_per_document)]


def write_text(
    directory: str | Path,
    n_sentences: int,
    seed: int | None = None,
    sentences_per_document: int = 8,
    config: ToyGrammarConfig | None = None,
    filename: str = "toy.txt",
) -> list[Path]:
    """Write `generate_text(...)` to `directory/filename`: one sentence a line, a blank line
    between documents (the usual pre-training corpus layout). Returns the written files."""
    documents = generate_text(n_sentences, seed, sentences_per_document, config)
    path = Path(directory) / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "\n\n".join("\n".join(document) for document in documents)
    path.write_text(body + "\n" if body else "", encoding="utf-8")
    return [path]


# ---------------------------------------------------------------------------------------------
# Labelled tasks.
# ---------------------------------------------------------------------------------------------


@dataclass
class ToyTaskConfig:
    """Config shared by the toy tasks: one seed and the split sizes."""

    seed: int = knob(13, "Seed of the data; each split uses its own stream derived from it.")
    train_size: int = knob(2000, "Number of training examples.")
    dev_size: int = knob(500, "Number of development examples.")
    test_size: int = knob(500, "Number of test examples.")
    max_words: int = knob(25, "Longest sentence in tokens, punctuation included.")

    def __post_init__(self) -> None:
        for name in ("train_size", "dev_size", "test_size"):
            if getattr(self, name) < 0:
                raise ValueError(f"ToyTaskConfig.{name} must be >= 0, got {getattr(self, name)}")


def split_of(text: str) -> Split:
    """The one split a sentence may appear in, from a hash of its text (source text for the
    agreement task). This is what keeps train/dev/test disjoint without coordinating streams."""
    return SPLITS[hashlib.sha256(text.encode("utf-8")).digest()[0] % len(SPLITS)]


def _require_predictions(examples: Sequence[Example], predictions: Mapping[str, Any]) -> None:
    missing = missing_predictions(examples, predictions)
    if missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise ValueError(f"{len(missing)} example(s) have no prediction: {shown}")


class _ToyTask(Task):
    """Shared plumbing: config defaulting, split sizes, per-instance caching of generated splits."""

    _stream: ClassVar[str]

    def __init__(self, name: str, config: ToyTaskConfig | None = None):
        super().__init__(name, config if config is not None else ToyTaskConfig())
        self.grammar = ToyGrammar(ToyGrammarConfig(seed=self.config.seed, max_words=self.config.max_words))
        self._cache: dict[str, list[ToySentence]] = {}

    def toy_sentences(self, split: Split) -> list[ToySentence]:
        """The generated sentences behind `examples(split)`, in the same order (with metadata)."""
        if split not in SPLITS:
            raise DataError(f"<toy task {self.name}>", 0, f"no split {split!r}; expected one of {', '.join(SPLITS)}")
        if split not in self._cache:
            size = getattr(self.config, f"{split}_size")
            self._cache[split] = self._generate(split, size)
        return list(self._cache[split])

    def _sources(self, split: Split) -> Iterator[ToySentence]:
        """Distinct grammatical sentences that belong to `split`, from the split's own stream."""
        rng = derive_rng(self.config.seed, self._stream, split)
        seen: set[str] = set()
        while True:
            sentence = self.grammar.sentence(rng)
            text = sentence.text
            if text not in seen and split_of(text) == split and self._usable(sentence):
                seen.add(text)
                yield sentence

    def _usable(self, sentence: ToySentence) -> bool:
        return True

    def _generate(self, split: Split, size: int) -> list[ToySentence]:
        sources = self._sources(split)
        return [next(sources) for _ in range(size)]

    @staticmethod
    def _id(split: str, index: int) -> str:
        return f"{split}-{index:06d}"


class _ToyTaggingTask(_ToyTask):
    type = "tagging"
    _stream = "tagging"  # POS and chunking share sentences, like CoNLL-2000's WSJ sections

    def _tags(self, sentence: ToySentence) -> tuple[str, ...]:
        raise NotImplementedError

    def examples(self, split: Split) -> list[Example]:
        return [
            TaggingExample(self._id(split, i), s.words, self._tags(s)) for i, s in enumerate(self.toy_sentences(split))
        ]

    def _gold_and_predicted(
        self, examples: Sequence[Example], predictions: Mapping[str, Any]
    ) -> tuple[list[list[str]], list[list[str]]]:
        _require_predictions(examples, predictions)
        golds, preds = [], []
        for example in examples:
            if not isinstance(example, TaggingExample) or example.tags is None:
                raise ValueError(f"example {example.id} is not a labelled tagging example")
            predicted = [str(tag) for tag in predictions[example.id]]
            if len(predicted) != len(example.tags):
                raise ValueError(f"example {example.id}: {len(example.tags)} words but {len(predicted)} predicted tags")
            golds.append(list(example.tags))
            preds.append(predicted)
        return golds, preds


class ToyPosTask(_ToyTaggingTask):
    """Part-of-speech tagging of toy sentences; main metric: token accuracy (%)."""

    main_metric = "accuracy"

    @property
    def labels(self) -> tuple[str, ...]:
        return POS_TAGS

    def _tags(self, sentence: ToySentence) -> tuple[str, ...]:
        return sentence.pos

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        golds, preds = self._gold_and_predicted(examples, predictions)
        flat_gold = [tag for tags in golds for tag in tags]
        flat_pred = [tag for tags in preds for tag in tags]
        return {"accuracy": metrics.accuracy(flat_gold, flat_pred)}


class ToyChunkTask(_ToyTaggingTask):
    """Base-phrase chunking (BIO) of toy sentences; main metric: span F1 (%), conlleval-style."""

    main_metric = "f1"

    @property
    def labels(self) -> tuple[str, ...]:
        return CHUNK_TAGS

    def _tags(self, sentence: ToySentence) -> tuple[str, ...]:
        return sentence.chunks

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        golds, preds = self._gold_and_predicted(examples, predictions)
        scores = metrics.span_f1(golds, preds, scheme="BIO")
        flat = metrics.accuracy([t for g in golds for t in g], [t for p in preds for t in p])
        return {"f1": scores.f1, "precision": scores.precision, "recall": scores.recall, "accuracy": flat}


class ToyAgreementTask(_ToyTask):
    """Grammaticality of toy sentences: "1" grammatical, "0" one verb's agreement flipped.

    Classes are balanced exactly (shuffled). Every example comes from a distinct source sentence:
    a corrupted example's grammatical original is discarded, never used as a positive, so no
    minimal pair exists within or across splits (a model cannot solve the task by spotting the
    twin). Only sentences with at least one present-tense verb are drawn, for both classes;
    otherwise "only past-tense verbs" would give the label away.
    """

    type = "classification"
    main_metric = "accuracy"
    _stream = "agreement"

    @property
    def labels(self) -> tuple[str, ...]:
        return ("0", "1")

    def _usable(self, sentence: ToySentence) -> bool:
        return bool(sentence.agreements)

    def _generate(self, split: Split, size: int) -> list[ToySentence]:
        rng = derive_rng(self.config.seed, self._stream, split, "labels")
        grammatical = [True] * (size - size // 2) + [False] * (size // 2)
        rng.shuffle(grammatical)
        sources = self._sources(split)
        out = []
        for keep in grammatical:
            source = next(sources)
            corrupted = None if keep else self.grammar.corrupt(source, rng)
            out.append(source if corrupted is None else corrupted)
        return out

    def examples(self, split: Split) -> list[Example]:
        return [
            SentenceExample(self._id(split, i), s.text, label="1" if s.grammatical else "0")
            for i, s in enumerate(self.toy_sentences(split))
        ]

    def evaluate(self, examples: Sequence[Example], predictions: Mapping[str, Any]) -> dict[str, float]:
        _require_predictions(examples, predictions)
        golds = [str(example.label) for example in examples if isinstance(example, SentenceExample)]
        if len(golds) != len(examples):
            raise ValueError("ToyAgreementTask.evaluate expects SentenceExample instances")
        preds = [str(predictions[example.id]) for example in examples]
        return {"accuracy": metrics.accuracy(golds, preds), "mcc": metrics.mcc(golds, preds)}

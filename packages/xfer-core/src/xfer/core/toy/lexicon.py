"""The toy vocabulary: word tables and `ToyLexicon`, the reverse index from word to readings.

Kept apart from the grammar so that code which only needs to *read* toy sentences (the
independent agreement checker in the tests, tokenizer vocabularies) can look words up without
touching generation code, and so the tables can be audited on their own: building the lexicon
fails loudly if an edit makes a word ambiguous beyond the one intended VBP/VB case.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Number = Literal["sg", "pl"]
NounKind = Literal["person", "animal", "thing"]

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

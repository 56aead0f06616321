"""A deterministic toy English for the embedded quickstart and for tests.

Real corpora are large, licensed and slow to download; a quickstart demo and the test suite need
text and labelled sets that exist offline, build in milliseconds and still make a model *learn*
something. This package generates them from a small probabilistic grammar of English-like
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

Layout (each module imports only the ones above it, so there are no import cycles):

- `xfer.core.toy.lexicon`: the word tables and `ToyLexicon`, the word -> readings index.
- `xfer.core.toy.rng`: `derive_rng`, the one source of named, reproducible random streams.
- `xfer.core.toy.grammar`: the probabilistic grammar, `ToySentence` and its annotations.
- `xfer.core.toy.text`: unlabelled text (documents of sentences) for corpora and vocabularies.
- `xfer.core.toy.tasks`: the labelled tasks `toy/pos`, `toy/chunk` and `toy/agreement`.

Everything public is re-exported here, so `from xfer.core.toy import ...` keeps working.
"""

from xfer.core.toy.grammar import (
    CHUNK_TAGS,
    POS_TAGS,
    Agreement,
    Role,
    ToyGrammar,
    ToyGrammarConfig,
    ToySentence,
)
from xfer.core.toy.lexicon import Noun, NounKind, Number, ToyLexicon, Verb, WordInfo
from xfer.core.toy.rng import derive_rng
from xfer.core.toy.tasks import (
    SPLITS,
    ToyAgreementTask,
    ToyChunkTask,
    ToyPosTask,
    ToyTaskConfig,
    split_of,
)
from xfer.core.toy.text import generate_text, write_text

__all__ = [
    "CHUNK_TAGS",
    "POS_TAGS",
    "SPLITS",
    "Agreement",
    "Noun",
    "NounKind",
    "Number",
    "Role",
    "ToyAgreementTask",
    "ToyChunkTask",
    "ToyGrammar",
    "ToyGrammarConfig",
    "ToyLexicon",
    "ToyPosTask",
    "ToySentence",
    "ToyTaskConfig",
    "Verb",
    "WordInfo",
    "derive_rng",
    "generate_text",
    "split_of",
    "write_text",
]

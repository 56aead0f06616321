"""What the tokenizer's encoders return, and the names every tokenization module shares.

This module imports nothing from the rest of the package, so every other module can depend on it
without creating an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, UNK, CLS, SEP, MASK)
"""The five BERT special tokens, in the order that gives trained vocabularies ids 0..4."""

CONTINUATION_PREFIX = "##"
VOCAB_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"


@dataclass(frozen=True, slots=True)
class Encoding:
    """Ids for one sequence or pair: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, unpadded."""

    input_ids: list[int]
    token_type_ids: list[int]

    @property
    def length(self) -> int:
        """Number of real tokens; the attention mask is `length` ones followed by the padding."""
        return len(self.input_ids)

    @property
    def attention_mask(self) -> list[int]:
        """All ones: nothing is padded here (see the package docstring)."""
        return [1] * len(self.input_ids)


@dataclass(frozen=True, slots=True)
class WordAlignment:
    """A word-tokenized sentence (or a window of one) encoded as `[CLS] pieces... [SEP]`.

    `word_starts[i]` is the index in `input_ids` of the first sub-token of word
    `first_word + i`; a tagger predicts one label per word at those positions. Only the words that
    fit are encoded: `truncated_words` counts the words left out, which the caller must encode in
    further windows (see `WordPieceTokenizer.split_for_tagging`) rather than lose.
    """

    input_ids: list[int]
    word_starts: list[int]
    truncated_words: int
    first_word: int = 0

    @property
    def num_words(self) -> int:
        """How many words this encoding covers (`len(word_starts)`)."""
        return len(self.word_starts)

    @property
    def length(self) -> int:
        return len(self.input_ids)

    @property
    def token_type_ids(self) -> list[int]:
        """All zeros: a tagging input is a single segment."""
        return [0] * len(self.input_ids)


@dataclass(frozen=True, slots=True)
class QAFeature:
    """One window of a (question, context) example: `[CLS] question [SEP] context-window [SEP]`.

    `offsets[i]` is the `(start, end)` character span in the original context of token `i`, or
    None for question and special tokens, so predicted token positions map back to answer text
    as `context[offsets[start][0]:offsets[end][1]]`. `start_position`/`end_position` are the
    answer's first/last token inside this window, or 0 (`[CLS]`) when the answer is not entirely
    inside it or no answer was given (the SQuAD convention). `token_is_max_context[i]` is True
    when this window gives context token `i` the most context on both sides among all windows
    containing it; prediction should only use answer starts/ends at such tokens, so that every
    context token is scored by exactly one window.
    """

    example_index: int
    input_ids: list[int]
    token_type_ids: list[int]
    offsets: list[tuple[int, int] | None]
    token_is_max_context: list[bool]
    start_position: int
    end_position: int

    @property
    def length(self) -> int:
        return len(self.input_ids)

    @property
    def attention_mask(self) -> list[int]:
        return [1] * len(self.input_ids)

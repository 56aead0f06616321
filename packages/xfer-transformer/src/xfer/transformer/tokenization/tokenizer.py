"""`WordPieceTokenizer`, the one tokenizer class the model code and task heads use.

It only assembles ids: training and the BERT pipeline come from `training`, file formats from
`vocab_files` and the truncation/windowing arithmetic from `windows`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, models

from xfer.core.errors import DataError
from xfer.transformer.tokenization.encodings import (
    CLS,
    CONTINUATION_PREFIX,
    MASK,
    PAD,
    SEP,
    SPECIAL_TOKENS,
    TOKENIZER_CONFIG_FILE,
    TOKENIZER_FILE,
    UNK,
    VOCAB_FILE,
    Encoding,
    QAFeature,
    WordAlignment,
)
from xfer.transformer.tokenization.training import _bert_post_processor, build_bert_tokenizer, train_wordpiece
from xfer.transformer.tokenization.vocab_files import (
    _config_options,
    _looks_cased,
    _normalizer_lowercases,
    _normalizer_state,
    _set_bert_options,
    _set_lowercase,
    _write_atomic,
    check_vocab_txt_matches,
    read_vocab_txt,
)
from xfer.transformer.tokenization.windows import (
    _STRATEGIES,
    TruncationStrategy,
    _answer_token_span,
    _doc_spans,
    _fit_words,
    _max_context_spans,
    _truncated_lengths,
    _windows,
    _word_budget,
)


def _refuse_dangling_links(directory: Path) -> None:
    """DataError for a tokenizer file of `directory` that is a symlink to nothing: a Hugging Face
    cache snapshot links every file to a blob, and a blob deleted by hand, a cache cleaned in part or
    a snapshot folder copied without its blobs leaves links that `is_file()` takes for absent files.
    `from_dir` then fell back, silently: to vocab.txt without tokenizer.json's normaliser and added
    tokens, or without tokenizer_config.json's casing and accent options (an uncased, accent-keeping
    vocabulary then stripped accents, so "café" became [UNK]); with both gone it said the folder had
    no tokenizer at all."""
    for name in (TOKENIZER_FILE, VOCAB_FILE, TOKENIZER_CONFIG_FILE):
        link = directory / name
        if link.is_symlink() and not link.exists():
            raise DataError(
                link,
                0,
                f"dangling symlink to {os.readlink(link)} (the file it points to is missing: an interrupted or partly "
                "deleted Hugging Face download); fetch the tokenizer again",
            )


class WordPieceTokenizer:
    """A BERT-style WordPiece tokenizer with the encoders the xfer task heads need.

    Wraps (a private copy of) a `tokenizers.Tokenizer` whose model is WordPiece with `##`
    continuations and whose vocabulary holds `[PAD] [UNK] [CLS] [SEP] [MASK]` at any ids. The
    post-processor is always rebuilt from the detected ids, and truncation/padding settings stored
    in a `tokenizer.json` are dropped, so every source behaves the same way.

    Text that spells a special token exactly ("[SEP]", "[MASK]"; "[mask]" is text) gets that token's
    id, as in HF's `BertTokenizerFast` and `BertTokenizer` (whose `never_split` holds them), so a
    cloze input or an "[E1]" marker works; Google's BERT/ELECTRA `BasicTokenizer` splits it into
    "[", "sep", "]". Pre-training packs corpus text the Google way (`xfer.electra.data`) and PLL
    scoring refuses such text, as either would be wrong there.
    """

    def __init__(self, tokenizer: Tokenizer, *, source: str | Path = "<tokenizer>"):
        self._source = str(source)
        self._tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self._check_model()
        vocab = self._tokenizer.get_vocab(with_added_tokens=True)
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise DataError(self._source, 0, f"vocabulary lacks the special token(s) {', '.join(missing)}")
        self._special_ids = {t: vocab[t] for t in SPECIAL_TOKENS}
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
        self._tokenizer.post_processor = _bert_post_processor(self.cls_id, self.sep_id)
        self._vocab: dict[str, int] | None = None
        # Every stage saves its tokenizer (as vocab.txt too) next to what it exports, at the end:
        # a vocabulary that cannot be saved must fail here, not after hours of training.
        try:
            self._tokens_by_id()
        except ValueError as error:
            raise DataError(self._source, 0, str(error)) from None

    def _check_model(self) -> None:
        model = self._tokenizer.model
        if not isinstance(model, models.WordPiece):
            raise DataError(self._source, 0, f"not a WordPiece tokenizer (model is {type(model).__name__})")
        if self._tokenizer.pre_tokenizer is None:
            # WordPiece would then see each whole text, spaces included, as one word: [UNK] or
            # nonsense pieces for every input, without an error
            raise DataError(self._source, 0, "no pre-tokenizer: BERT's WordPiece needs one (BertPreTokenizer)")
        if model.unk_token != UNK:
            # Unknown words would get no id at all: `tokenizers` raises a bare Exception on the
            # first one (or, with that token present, uses an id the task code does not know).
            raise DataError(self._source, 0, f"WordPiece unknown token is {model.unk_token!r}, expected '{UNK}'")
        if model.token_to_id(UNK) is None:
            # only an added token (`added_tokens`, not `model.vocab`): WordPiece looks it up in its own
            # vocabulary, so the first unknown word raised a bare Exception ("Missing [UNK] token")
            raise DataError(
                self._source, 0, f"'{UNK}' is not in the WordPiece model's vocabulary (only an added token)"
            )
        if model.continuing_subword_prefix != CONTINUATION_PREFIX:
            raise DataError(
                self._source,
                0,
                f"WordPiece continuation prefix is {model.continuing_subword_prefix!r}, expected '##'",
            )

    # -- loading and saving -------------------------------------------------------------------

    @classmethod
    def train(cls, files: Sequence[Path | str], vocab_size: int, **options: Any) -> WordPieceTokenizer:
        """`train_wordpiece(files, vocab_size, **options)`, wrapped."""
        return cls(train_wordpiece(files, vocab_size, **options), source="<trained>")

    @classmethod
    def from_vocab(cls, vocab: dict[str, int], lowercase: bool = True) -> WordPieceTokenizer:
        """A tokenizer for an in-memory `token -> id` vocabulary with the BERT pipeline."""
        try:
            return cls(build_bert_tokenizer(vocab, lowercase), source="<vocab>")
        except ValueError as error:
            raise DataError("<vocab>", 0, str(error)) from None

    @classmethod
    def from_file(cls, path: Path | str, lowercase: bool | None = None) -> WordPieceTokenizer:
        """Load a `tokenizer.json` (any `.json` file) or a BERT `vocab.txt` (anything else).

        `lowercase=None` keeps a `tokenizer.json`'s own normaliser and, for a `vocab.txt`, infers
        the casing from the vocabulary: a vocabulary with upper-case tokens was built from cased
        text, and lower-casing the input for it (or not lower-casing for an uncased one) would
        turn most words into `[UNK]` without any error.
        """
        path = Path(path)
        if path.suffix == ".json":
            return cls._from_tokenizer_json(path, lowercase)
        vocab = read_vocab_txt(path)
        if lowercase is None:
            lowercase = not _looks_cased(vocab)
        try:
            return cls(build_bert_tokenizer(vocab, lowercase), source=path)
        except ValueError as error:
            raise DataError(path, 0, str(error)) from None

    @classmethod
    def _from_tokenizer_json(cls, path: Path, lowercase: bool | None) -> WordPieceTokenizer:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise DataError(path, 0, "file not found") from None
        except (OSError, UnicodeDecodeError) as error:
            raise DataError(path, 0, f"cannot read: {error}") from None
        try:
            tokenizer = Tokenizer.from_str(text)
        except Exception as error:  # tokenizers raises a bare Exception for malformed JSON
            raise DataError(path, 0, f"not a valid tokenizer.json: {error}") from None
        if lowercase is not None:
            _set_lowercase(tokenizer, lowercase, path)
        return cls(tokenizer, source=path)

    @classmethod
    def from_dir(cls, directory: Path | str, lowercase: bool | None = None) -> WordPieceTokenizer:
        """Load a saved tokenizer or an HF model directory.

        Prefers `tokenizer.json` (it records the exact normaliser) and falls back to `vocab.txt`;
        with both, they must agree (vocab.txt may stop before tokenizer.json's added tokens).
        `tokenizer_config.json`'s `do_lower_case`, `strip_accents` and `tokenize_chinese_chars`, when
        present, set the normalisation as they do in HF `transformers`; an explicit `lowercase`
        argument overrides the casing of both files.
        """
        directory = Path(directory)
        _refuse_dangling_links(directory)
        options = _config_options(directory / TOKENIZER_CONFIG_FILE)
        if lowercase is None:
            lowercase = options.get("lowercase")
        options.pop("lowercase", None)
        for name in (TOKENIZER_FILE, VOCAB_FILE):
            if (directory / name).is_file():
                tokenizer = cls.from_file(directory / name, lowercase=lowercase)
                if name == TOKENIZER_FILE and (directory / VOCAB_FILE).is_file():
                    check_vocab_txt_matches(directory / VOCAB_FILE, tokenizer.vocab, directory / name)
                _set_bert_options(tokenizer._tokenizer, options)
                return tokenizer
        if directory.is_file():  # `tokenizer: tok/vocab.txt`: the recipe knobs take its folder
            raise DataError(directory, 0, f"is a file; give the folder that holds it ({directory.parent})")
        if not directory.exists():
            # a mistyped or not yet written folder was "no tokenizer.json or vocab.txt in this
            # directory", as if it existed and had lost its files
            raise DataError(directory, 0, f"no such directory, so no {TOKENIZER_FILE} or {VOCAB_FILE} to load")
        raise DataError(directory, 0, f"no {TOKENIZER_FILE} or {VOCAB_FILE} in this directory")

    def save(self, directory: Path | str) -> Path:
        """Write `vocab.txt` (for BERT tooling) and `tokenizer.json` (exact pipeline) atomically.

        Returns the directory. Both files load back to identical encodings with `from_dir`.
        A `tokenizer_config.json` already there (an earlier `save_hf`, e.g. `xfer vocab train --out`
        into a model folder) gets this tokenizer's normalisation options: `from_dir` applies them
        over tokenizer.json, so a stale `do_lower_case: true` lower-cased (and stripped the accents
        of) the input of a cased vocabulary saved over it, turning its cased words into `[UNK]`.

        tokenizer.json is written last. Each file is replaced atomically but the three are not one
        write, and `from_dir` reads tokenizer.json and checks vocab.txt against it: a crash after a
        new tokenizer.json but before the config kept the OLD config's `do_lower_case: true` over
        the new cased tokenizer.json, which then loaded without an error and lower-cased its input
        ("Paris" -> [UNK]). Written last, an interrupted save leaves the old tokenizer.json beside a
        new vocab.txt, a mismatch `from_dir` reports.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tokens = self._tokens_by_id()
        _write_atomic(directory / VOCAB_FILE, "".join(f"{t}\n" for t in tokens))
        config_path = directory / TOKENIZER_CONFIG_FILE
        if config_path.is_file() or config_path.is_symlink():  # a dangling link: unreadable, replaced
            try:
                config = json.loads(config_path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                config = None  # unreadable: replaced by one that says how this tokenizer normalises
            config = config if isinstance(config, dict) else {}
            _write_atomic(config_path, json.dumps(config | self._normalization_config(), indent=2) + "\n")
        _write_atomic(directory / TOKENIZER_FILE, self._tokenizer.to_str(pretty=True))
        return directory

    def save_hf(self, directory: Path | str, model_max_length: int) -> Path:
        """`save`, plus the `tokenizer_config.json` HF `transformers` reads next to a checkpoint.
        Without it, its Electra tokenizer took `do_lower_case=True` (lower-casing the input of a
        cased vocabulary, so its pieces differed from xfer's) and no length limit (`truncation=True`
        kept inputs longer than the position embeddings, which then failed in the model)."""
        directory = self.save(directory)
        config = self._normalization_config()
        config |= {
            "model_max_length": model_max_length,
            "unk_token": UNK,
            "sep_token": SEP,
            "pad_token": PAD,
            "cls_token": CLS,
            "mask_token": MASK,
        }
        _write_atomic(directory / TOKENIZER_CONFIG_FILE, json.dumps(config, indent=2) + "\n")
        return directory

    def _normalization_config(self) -> dict[str, Any]:
        """The `tokenizer_config.json` keys that say how input is normalised (what `from_dir` and
        HF `transformers` read)."""
        config: dict[str, Any] = {"do_lower_case": self.lowercase}
        state = _normalizer_state(self._tokenizer)
        if state.get("type") == "BertNormalizer":
            # transformers resets both to its defaults (accents follow casing; CJK split) when
            # the config does not name them: a lower-casing, accent-keeping tokenizer lost its accents
            config["strip_accents"] = state.get("strip_accents")
            config["tokenize_chinese_chars"] = state.get("handle_chinese_chars", True)
        return config

    def _tokens_by_id(self) -> list[str]:
        """Tokens in id order; vocab.txt cannot represent gaps or tokens spanning lines."""
        ids = sorted(self.vocab.values())
        if ids != list(range(len(ids))):
            shared = next((i for i, j in pairwise(ids) if i == j), None)
            unused = next(i for i, j in enumerate([*ids, -1]) if i != j)
            problem = f"two tokens have id {shared}" if shared is not None else f"no token has id {unused}"
            raise ValueError(
                f"vocabulary ids are not contiguous from 0 ({problem}), so it cannot be written as vocab.txt"
            )
        by_id = {i: t for t, i in self.vocab.items()}
        tokens = [by_id[i] for i in range(len(by_id))]
        bad = [t for t in tokens if "\n" in t or "\r" in t]
        if bad:
            raise ValueError(f"tokens containing line breaks cannot be written to vocab.txt: {bad[:3]!r}")
        return tokens

    # -- properties -----------------------------------------------------------------------------

    @property
    def backend(self) -> Tokenizer:
        """The underlying `tokenizers.Tokenizer` (do not enable truncation or padding on it)."""
        return self._tokenizer

    @property
    def vocab_size(self) -> int:
        """Embedding rows a model needs: the largest id plus one (the vocabulary size for vocab.txt)."""
        return max(self.vocab.values()) + 1

    @property
    def vocab(self) -> dict[str, int]:
        """`token -> id` (a shared dict: do not modify)."""
        if self._vocab is None:
            self._vocab = self._tokenizer.get_vocab(with_added_tokens=True)
        return self._vocab

    @property
    def lowercase(self) -> bool:
        """Whether input text is lower-cased (read from the normaliser)."""
        return _normalizer_lowercases(_normalizer_state(self._tokenizer))

    @property
    def pad_id(self) -> int:
        return self._special_ids[PAD]

    @property
    def unk_id(self) -> int:
        return self._special_ids[UNK]

    @property
    def cls_id(self) -> int:
        return self._special_ids[CLS]

    @property
    def sep_id(self) -> int:
        return self._special_ids[SEP]

    @property
    def mask_id(self) -> int:
        return self._special_ids[MASK]

    @property
    def special_ids(self) -> frozenset[int]:
        """Ids of the five special tokens (MLM/RTD masking must never replace them)."""
        return frozenset(self._special_ids.values())

    # -- plain text -----------------------------------------------------------------------------

    def tokenize(self, text: str) -> list[str]:
        """Word pieces of `text` without special tokens (for inspection and tests)."""
        return self._tokenizer.encode(text, add_special_tokens=False).tokens

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text for ids, joining `##` pieces (lower-cased/accent-stripped text stays so)."""
        return self._tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    # -- sequences and pairs --------------------------------------------------------------------

    def encode_pair(
        self,
        text_a: str,
        text_b: str | None = None,
        *,
        max_length: int = 512,
        truncation: TruncationStrategy = "longest_first",
    ) -> Encoding:
        """Encode `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` (type ids 0 then 1), truncated.

        Truncation to `max_length` tokens (specials included) cuts from the right and matches HF
        `BertTokenizerFast` exactly: `longest_first` keeps the shorter text whole when cutting the
        longer one suffices and otherwise splits the room evenly; `only_first`/`only_second` cut
        that text alone and raise ValueError when it is too short to make the pair fit (HF raises
        too). A single text is simply cut with `longest_first`/`only_first`; `only_second` raises
        ValueError when a single text must be cut (there is no second text to cut), as HF does.

        A `text_b` with no word pieces ("", spaces, control characters) gives the single sequence
        `[CLS] a [SEP]`, as Google's BERT and ELECTRA do (`if tokens_b:`): an empty question of
        QQP, or a single-text example in a batch of pairs (passed as ""), got a second `[SEP]` of
        type 1, an input the reference code never builds, and one that depended on its batch.
        """
        texts_b = None if text_b is None else [text_b]
        return self.encode_pairs([text_a], texts_b, max_length=max_length, truncation=truncation)[0]

    def encode_pairs(
        self,
        texts_a: Sequence[str],
        texts_b: Sequence[str] | None = None,
        *,
        max_length: int = 512,
        truncation: TruncationStrategy = "longest_first",
    ) -> list[Encoding]:
        """Batch `encode_pair`: all texts are tokenized in one parallel Rust call.

        Truncation is applied here rather than by `tokenizers`, with the same arithmetic: its
        truncation also builds every overflowing window combination of a pair, which costs
        seconds for long pairs with a small `max_length` and is never used.
        """
        if texts_b is not None and len(texts_b) != len(texts_a):
            raise ValueError(f"texts_a has {len(texts_a)} items but texts_b has {len(texts_b)}")
        if truncation not in _STRATEGIES:
            raise ValueError(f"truncation must be one of {', '.join(_STRATEGIES)}, not {truncation!r}")
        texts = [*texts_a, *(texts_b or ())]
        pieces = [e.ids for e in self._tokenizer.encode_batch_fast(texts, add_special_tokens=False)] if texts else []
        firsts = pieces[: len(texts_a)]
        seconds: list[list[int] | None] = list(pieces[len(texts_a) :]) if texts_b is not None else [None] * len(firsts)
        return [self._assemble_pair(a, b, max_length, truncation) for a, b in zip(firsts, seconds, strict=True)]

    def _assemble_pair(self, a: list[int], b: list[int] | None, max_length: int, strategy: str) -> Encoding:
        if not b:  # no second text, or one without pieces: a single sequence (see `encode_pair`)
            b = None
        budget = max_length - (2 if b is None else 3)
        if budget < 0:
            raise ValueError(f"max_length={max_length} cannot even hold the special tokens")
        keep_a, keep_b = _truncated_lengths(len(a), None if b is None else len(b), budget, strategy)
        input_ids = [self.cls_id, *a[:keep_a], self.sep_id]
        if b is None:
            return Encoding(input_ids, [0] * len(input_ids))
        first_length = len(input_ids)
        input_ids += [*b[:keep_b], self.sep_id]
        return Encoding(input_ids, [0] * first_length + [1] * (len(input_ids) - first_length))

    # -- word-level alignment (tagging) ---------------------------------------------------------

    def encode_words(self, words: Sequence[str], *, max_length: int = 512) -> WordAlignment:
        """Encode a pre-split sentence, keeping the first sub-token index of every word.

        Each word is tokenized on its own, so a word never merges with its neighbours and the
        alignment is exact. A word that yields no pieces (an empty string, a control character)
        becomes `[UNK]` so it still has a position to carry its label. Words are never silently
        dropped: when the sentence does not fit, the alignment covers the longest prefix that does
        and `truncated_words` says how many are left (use `split_for_tagging` or
        `encode_words_windows`). A single word longer than `max_length - 2` pieces alone is cut to
        its first pieces; its start, which carries the label, is kept.
        """
        return self.encode_words_batch([words], max_length=max_length)[0]

    def encode_words_batch(self, sentences: Sequence[Sequence[str]], *, max_length: int = 512) -> list[WordAlignment]:
        """Batch `encode_words` (one parallel Rust call for all sentences)."""
        alignments = []
        for pieces in self._word_pieces_batch(sentences):
            end = _fit_words(pieces, 0, _word_budget(max_length))
            alignments.append(self._align(pieces, 0, end, max_length))
        return alignments

    def split_for_tagging(self, words: Sequence[str], *, max_length: int = 512) -> list[tuple[int, int]]:
        """Consecutive `(start_word, end_word)` windows (end exclusive) that each fit `max_length`.

        The windows cover every word exactly once, in order; `encode_words(words[s:e])` of each
        window has `truncated_words == 0`. An empty sentence gives one empty window `(0, 0)` so
        every sentence yields at least one input.
        """
        return self.split_for_tagging_batch([words], max_length=max_length)[0]

    def split_for_tagging_batch(
        self, sentences: Sequence[Sequence[str]], *, max_length: int = 512
    ) -> list[list[tuple[int, int]]]:
        """Batch `split_for_tagging`."""
        budget = _word_budget(max_length)
        return [_windows(pieces, budget) for pieces in self._word_pieces_batch(sentences)]

    def encode_words_windows(self, words: Sequence[str], *, max_length: int = 512) -> list[WordAlignment]:
        """`encode_words` of every `split_for_tagging` window, tokenizing the sentence once.

        Each alignment's `first_word` says where its window starts in `words`.
        """
        (pieces,) = self._word_pieces_batch([words])
        windows = _windows(pieces, _word_budget(max_length))
        return [self._align(pieces, start, end, max_length) for start, end in windows]

    def _word_pieces_batch(self, sentences: Sequence[Sequence[str]]) -> list[list[list[int]]]:
        """For each sentence, the piece ids of each word (`[UNK]` for words without pieces)."""
        batch = [list(words) for words in sentences]
        nonempty = [words for words in batch if words]
        # encode_batch_fast would be quicker but does not report word ids.
        encoded = iter(self._tokenizer.encode_batch(nonempty, is_pretokenized=True, add_special_tokens=False))
        result = []
        for words in batch:
            pieces: list[list[int]] = [[] for _ in words]
            if words:
                encoding = next(encoded)
                for token_id, word_id in zip(encoding.ids, encoding.word_ids, strict=True):
                    if word_id is not None:
                        pieces[word_id].append(token_id)
            for word_pieces in pieces:
                if not word_pieces:
                    word_pieces.append(self.unk_id)
            result.append(pieces)
        return result

    def _align(self, pieces: list[list[int]], start: int, end: int, max_length: int) -> WordAlignment:
        budget = _word_budget(max_length)
        input_ids = [self.cls_id]
        word_starts = []
        for word_pieces in pieces[start:end]:
            word_starts.append(len(input_ids))
            input_ids.extend(word_pieces[: budget - (len(input_ids) - 1)])
        input_ids.append(self.sep_id)
        return WordAlignment(input_ids, word_starts, truncated_words=len(pieces) - end, first_word=start)

    # -- span question answering ----------------------------------------------------------------

    def encode_qa(
        self,
        question: str,
        context: str,
        *,
        answer: tuple[int, int] | None = None,
        example_index: int = 0,
        max_length: int = 384,
        doc_stride: int = 128,
        max_query_length: int = 64,
    ) -> list[QAFeature]:
        """Encode one SQuAD-style example as one or more overlapping windows over the context.

        `answer` is `(start_char, end_char)` into `context`, end exclusive, so that
        `context[start_char:end_char]` is the answer text. See `encode_qa_batch`.
        """
        return self.encode_qa_batch(
            [question],
            [context],
            [answer],
            max_length=max_length,
            doc_stride=doc_stride,
            max_query_length=max_query_length,
            first_example_index=example_index,
        )

    def encode_qa_batch(
        self,
        questions: Sequence[str],
        contexts: Sequence[str],
        answers: Sequence[tuple[int, int] | None] | None = None,
        *,
        max_length: int = 384,
        doc_stride: int = 128,
        max_query_length: int = 64,
        first_example_index: int = 0,
    ) -> list[QAFeature]:
        """Encode SQuAD-style examples with the original BERT doc-stride windowing.

        The question is cut to its first `max_query_length` tokens; the context is split into
        windows of up to `max_length - len(question) - 3` tokens whose starts are `doc_stride`
        tokens apart (Google's `run_squad.py` meaning, which differs from HF's `stride` = overlap),
        the last window ending at the end of the context. Example `i` gets
        `example_index = first_example_index + i` so features of a chunked dataset stay unique.
        Offsets come from the fast tokenizer, so accents, lower-casing and removed control
        characters never shift the mapping back to context characters.
        """
        if len(contexts) != len(questions) or (answers is not None and len(answers) != len(questions)):
            raise ValueError("questions, contexts and answers must have the same length")
        if doc_stride < 1 or max_query_length < 0:
            raise ValueError("doc_stride must be at least 1 and max_query_length non-negative")
        if not questions:
            return []
        question_ids = self._tokenizer.encode_batch_fast(list(questions), add_special_tokens=False)
        context_encodings = self._tokenizer.encode_batch(list(contexts), add_special_tokens=False)
        features: list[QAFeature] = []
        for i, (question, context) in enumerate(zip(question_ids, context_encodings, strict=True)):
            answer = answers[i] if answers is not None else None
            span = None
            if answer is not None:
                span = _answer_token_span(context.offsets, answer, len(contexts[i]))
            features.extend(
                self._qa_windows(
                    question.ids[:max_query_length],
                    context.ids,
                    context.offsets,
                    span,
                    first_example_index + i,
                    max_length,
                    doc_stride,
                )
            )
        return features

    def _qa_windows(
        self,
        question_ids: list[int],
        context_ids: list[int],
        context_offsets: list[tuple[int, int]],
        answer_span: tuple[int, int] | None,
        example_index: int,
        max_length: int,
        doc_stride: int,
    ) -> list[QAFeature]:
        room = max_length - len(question_ids) - 3
        if room < 1:
            raise ValueError(
                f"max_length={max_length} leaves no room for context after a {len(question_ids)}-token question"
            )
        spans = _doc_spans(len(context_ids), room, doc_stride)
        best_span = _max_context_spans(spans, len(context_ids))
        head = [self.cls_id, *question_ids, self.sep_id]
        first = len(head)
        features = []
        for index, (start, length) in enumerate(spans):
            end = start + length
            start_position = end_position = 0
            if answer_span is not None and start <= answer_span[0] and answer_span[1] < end:
                start_position = answer_span[0] - start + first
                end_position = answer_span[1] - start + first
            features.append(
                QAFeature(
                    example_index=example_index,
                    input_ids=[*head, *context_ids[start:end], self.sep_id],
                    token_type_ids=[0] * first + [1] * (length + 1),
                    offsets=[None] * first + list(context_offsets[start:end]) + [None],
                    token_is_max_context=[False] * first + [best_span[p] == index for p in range(start, end)] + [False],
                    start_position=start_position,
                    end_position=end_position,
                )
            )
        return features

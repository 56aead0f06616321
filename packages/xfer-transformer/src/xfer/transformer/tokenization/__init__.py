"""WordPiece tokenization for BERT/ELECTRA-style encoders, built on HF `tokenizers`.

Why a wrapper instead of using `tokenizers.Tokenizer` directly: the model code needs a small,
stable contract (fixed special-token ids, `[CLS] a [SEP] b [SEP]` pairs with type ids 0/1,
word-level alignment for tagging, doc-stride windows for span QA) that behaves the same whether
the vocabulary was trained here, shipped as a Google/HF `vocab.txt`, or loaded from a
`tokenizer.json`. Everything heavy (normalisation, WordPiece, pair truncation) stays in the
Rust library; Python only assembles ids.

Conventions shared by every encoder method:

* Padding is never done here; an `Encoding` has exactly as many ids as real tokens and the
  collator pads a batch to its longest member (cheaper than padding to `max_length`).
* `max_length` always counts the special tokens.
* Special token ids are read from the vocabulary, never assumed: vocabularies trained with
  `train_wordpiece` have `[PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4`, Google's BERT/ELECTRA
  `vocab.txt` has `[PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103`.
"""

from xfer.transformer.tokenization.encodings import SPECIAL_TOKENS, Encoding, QAFeature, WordAlignment
from xfer.transformer.tokenization.tokenizer import WordPieceTokenizer
from xfer.transformer.tokenization.training import build_bert_tokenizer, train_wordpiece
from xfer.transformer.tokenization.vocab_files import read_vocab_txt
from xfer.transformer.tokenization.windows import TruncationStrategy

__all__ = [
    "SPECIAL_TOKENS",
    "Encoding",
    "QAFeature",
    "TruncationStrategy",
    "WordAlignment",
    "WordPieceTokenizer",
    "build_bert_tokenizer",
    "read_vocab_txt",
    "train_wordpiece",
]

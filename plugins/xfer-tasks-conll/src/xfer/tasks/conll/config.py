"""Config dataclasses of the CoNLL plugin's tasks.

Design: every task names its files explicitly (`train_file`, `dev_file`, `test_file`) rather
than a `data_dir` with conventional names, because the corpora we use name their files
differently (eng.train / train.txt / en_ewt-ud-train.conllu). Kept free of heavy imports: the
recipe validator imports these classes. `__post_init__` checks raise ValueError, which the
recipe validator reports at the task's position in the YAML file.
"""

# `knob(...)` returns a `dataclasses.field`, which RUF009 cannot know.

from dataclasses import dataclass
from typing import Any, Literal, get_args, get_type_hints

from xfer.core.config import ExistingPath, knob


@dataclass
class FilesConfig:
    """The fields every CoNLL task has."""

    train_file: ExistingPath | None = knob(None, "Training file; also defines the tag set (`labels`).", required=True)
    dev_file: ExistingPath | None = knob(None, "Development file.")
    test_file: ExistingPath | None = knob(None, "Test file.")
    max_examples: int | None = knob(
        None, "Keep only the FIRST N sentences of each split (file order), for quick runs. None keeps all."
    )

    def __post_init__(self) -> None:
        """Literal fields are checked here too, for configs built in Python rather than YAML."""
        value: Any = self.max_examples
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"max_examples must be a positive integer or null, not {value!r}")
        for name, hint in get_type_hints(type(self)).items():
            choices = get_args(hint) if getattr(hint, "__origin__", None) is Literal else ()
            if choices and getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, not {getattr(self, name)!r}")


@dataclass
class SpanTaggingConfig(FilesConfig):
    """Span tagging from a column file (conll/ner; base of conll/chunking)."""

    tag_column: int = knob(-1, "0-based column of the span tag; -1 = last column (CoNLL-2003: NER).")
    tag_scheme: Literal["BIO", "BIOES"] = knob(
        "BIOES",
        "Scheme of the examples' tags and of `labels` (files are converted on read). BIOES is the "
        "default, as in the CVT code; span F1 is the same for both.",
    )
    input_scheme: Literal["auto", "IOB1", "IOB2", "BIOES"] = knob(
        "auto",
        "Scheme of the files. auto: BIOES if E-/S- tags occur, otherwise IOB1 or IOB2 (IOB1 spans "
        "starting with I- are converted to IOB2, which leaves IOB2 unchanged; a file that starts spans "
        "both with I- and with B- after another tag is an error naming the odd tag). IOB2 rejects an I- "
        "that does not continue a span.",
    )
    separator: Literal["whitespace", "tab"] = knob(
        "whitespace",
        "whitespace: split on runs of spaces/tabs; tab: split on single tabs (words may hold spaces, but not "
        "around them), for files whose words hold spaces (multiword tokens of UD-derived data: `New York`).",
        unsigned_at="whitespace",  # how conll/ner and conll/chunking read every file before the knob existed
    )


@dataclass
class ChunkingConfig(SpanTaggingConfig):
    """conll/chunking (CoNLL-2000: `WORD POS CHUNK`, no official dev set)."""

    dev_from_train: int = knob(
        1500,
        "When dev_file is not set: use the LAST N sentences of train_file as the dev split and "
        "the rest as train (deterministic; the CVT code holds out a seeded random 1500 instead). "
        "Ignored when dev_file is set.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.dev_from_train, bool) or not isinstance(self.dev_from_train, int) or self.dev_from_train < 0:
            raise ValueError(f"dev_from_train must be a non-negative integer, not {self.dev_from_train!r}")


@dataclass
class UdPosConfig(FilesConfig):
    """conll/ud-pos: POS tagging from CoNLL-U files."""

    tag_column: Literal["upos", "xpos"] = knob("upos", "Which CoNLL-U column is the tag: UPOS (4th) or XPOS (5th).")


@dataclass
class ColumnsConfig(FilesConfig):
    """conll/columns: any one-token-per-line column file."""

    word_column: int = knob(0, "0-based column of the word.")
    tag_column: int = knob(-1, "0-based column of the tag; -1 = last column.")
    scheme: Literal["BIO", "BIOES", "none"] = knob(
        "BIO",
        "BIO/BIOES: span tags, scored with span F1 (tags are validated, not converted). "
        "none: per-token tags (e.g. POS), scored with token accuracy.",
    )
    separator: Literal["whitespace", "tab"] = knob(
        "whitespace",
        "whitespace: split on runs of spaces/tabs; tab: split on single tabs (words may hold spaces, but not "
        "around them).",
    )


@dataclass
class UdParseConfig(FilesConfig):
    """conll/ud-parse: dependency parsing from CoNLL-U files (HEAD and DEPREL columns)."""

    punctuation: Literal["form", "upos", "none"] = knob(
        "form",
        "Words left out of LAS/UAS. form: CoNLL-2007 eval.pl (the FORM is made only of Unicode "
        "punctuation characters); upos: words tagged PUNCT (every word needs a UPOS); none: score every word.",
    )
    relations: Literal["full", "universal"] = knob(
        "full",
        "full: DEPREL as written (CoNLL-2007 compares the whole label, e.g. nmod:poss); "
        "universal: drop subtypes after ':' on read (CoNLL-2018 LAS), for labels, training and scoring.",
    )

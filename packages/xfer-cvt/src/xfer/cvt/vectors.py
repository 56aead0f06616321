"""The `cvt.vectors` stage: word vectors from unlabeled text (PPMI + truncated SVD), GloVe format.

Why: the thesis starts every CVT model, the supervised baselines included, from GloVe vectors
trained on billions of words. Offline there is no GloVe, and a model starting from random
vectors learns an embedding only for the words of its labeled data: in CVT mode the unlabeled
corpus can shape embeddings only through the auxiliary losses, slowly (after 1,500 steps the
unlabeled-only rows were still at their initial norm). This stage computes count-based vectors
from the unlabeled corpus itself, in minutes on one CPU core, and writes them in GloVe's text
format so that `vocab.vectors` reads them exactly as it reads GloVe.

Method (Levy, Goldberg & Dagan 2015, "Improving distributional similarity with lessons learned
from word embeddings"): co-occurrence counts within `window` words on each side of a word,
weighted 1/distance as GloVe does, never across lines; positive PMI with the context
distribution smoothed by the power 0.75; a truncated SVD of the PPMI matrix (randomized, seeded:
the same corpus gives the same file); vectors U·sqrt(S) ("eigenvalue weighting" 0.5), scaled so
that their components have standard deviation `std` (the encoder's random-init scale).

Words are counted under the same key the CVT vocabulary uses (`vocab.embedding_key`: lower-cased,
digits -> 0, PTB escapes undone), so every vector row matches a vocabulary entry.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from xfer.core.atomic import atomic_path
from xfer.core.config import FieldError, Files, knob
from xfer.core.errors import DataError, UserError
from xfer.core.stage import StageContext

VECTORS_FILE = "vectors.txt"
BLOCK_TOKENS = 1 << 23  # co-occurrences are counted this many corpus tokens at a time
# Words starting with U+FEFF get no vector: their line of the GloVe format would start with it, which
# readers take for a byte-order mark (stripped on line 1: another word; refused on the others, so
# cvt.train refused the file this stage wrote). Wikipedia text has such words ("\ufeff47.650"
# in coordinates), and `tokenize: punct` makes U+FEFF a word of its own.
BOM = "\ufeff"


@dataclass
class VectorsConfig:
    files: Files = knob(
        doc="Unlabeled text (paths, globs or stage outputs), one tokenized sentence per line.", takes=("text",)
    )
    dim: int = knob(120, "Vector size: the CVT model's word_dim (preset `cpu`: 120, `thesis`: 300).", ge=1)
    words: int = knob(50000, "Vectors for at most this many words (the most frequent).", ge=1)
    min_count: int = knob(5, "Words seen fewer times get no vector.", ge=1)
    window: int = knob(5, "Context words on each side (weighted 1/distance).", ge=1)
    lowercase: bool = knob(True, "Count words lower-cased, as `vocab.lowercase` looks them up (keep them equal).")
    tokenize: Literal["whitespace", "punct"] = knob(
        "whitespace", "As unlabeled.tokenize: whitespace for tokenized corpora, punct to split punctuation off."
    )
    max_lines: int | None = knob(None, "Read only the first N lines of the corpus (None: all).", ge=1)
    std: float = knob(0.5, "Standard deviation of the written components (the CVT encoder's init scale).", gt=0)

    def __post_init__(self) -> None:
        if self.words <= self.dim:  # was found after reading the corpus, with advice to add text
            raise FieldError(
                "words",
                f"{self.words} words cannot give {self.dim}-dimensional vectors (the SVD needs more words than "
                "dimensions): give more words than dim",
            )

    def preflight(self) -> list[UserError]:
        """The text files, read before any stage trains (as cvt.train's unlabeled files)."""
        from xfer.cvt.checks import unlabeled_problems

        return unlabeled_problems(self.files, task_sentences=False, key="files")


def vectors_file(path: Path) -> Path:
    """The word vectors file `vocab.vectors` names: the file itself, or a cvt.vectors output
    folder's VECTORS_FILE (another folder was reported as "<folder>/vectors.txt: file not found")."""
    if not path.is_dir() or (path / VECTORS_FILE).is_file():
        return path / VECTORS_FILE if path.is_dir() else path
    raise DataError(
        path, 0, f"vocab.vectors is a folder without {VECTORS_FILE} (no cvt.vectors output): give the vectors file"
    )


def sentences_of(ctx: StageContext, config: VectorsConfig) -> Iterable[list[str]]:
    from xfer.cvt.data import UnlabeledCorpus

    files = ctx.resolve_files(config.files)
    if not files:
        raise UserError(f"stage {ctx.name}: no text files found in {config.files}")
    corpus = UnlabeledCorpus(files, chunk_lines=10000, max_length=10**9, tokenizer=config.tokenize, key="files")
    left = config.max_lines
    for index, chunk in enumerate(corpus.chunks):
        if left is not None and left <= 0:
            return
        yield from corpus.read(index, left)
        if left is not None:
            left -= chunk.lines


def encode_corpus(
    sentences: Iterable[Sequence[str]], lowercase: bool, gap: int
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The corpus read once as key ids: (keys in order of first occurrence, each key's count, every
    line's key ids followed by `gap` times -1 (no window of `gap` words reaches across a line)).

    Why ids: the corpus was kept as lists of key strings (a new string object and a list slot per
    token, then a list of Python ints for the windows), 125-190 bytes a token at the peak: a
    100M-token corpus needed 12-19 GB, where these int32 ids take 4 bytes a token."""
    from xfer.cvt.vocab import embedding_key

    ids: dict[str, int] = {}
    flat = array("i")
    padding = [-1] * gap
    for sentence in sentences:
        flat.extend([ids.setdefault(embedding_key(w, lowercase), len(ids)) for w in sentence])
        flat.extend(padding)
    corpus = np.frombuffer(flat, dtype=np.intc) if flat else np.zeros(0, dtype=np.intc)
    counts = np.bincount(corpus + 1, minlength=len(ids) + 1)[1:]  # + 1: the line ends' -1s go to bin 0
    return list(ids), counts, corpus


def cooccurrences(ids: np.ndarray, size: int, window: int, block: int | None = None):
    """Symmetric co-occurrence counts [size, size] (scipy CSR), each pair weighted 1/distance.

    `ids`: the corpus as vocabulary indices, -1 for other words and for the `window` slots after
    each line (`encode_corpus`). Pairs are counted `block` tokens at a time (default BLOCK_TOKENS),
    so that the temporary arrays of one distance (~40 bytes a token) do not grow with the corpus;
    a corpus of one block gives exactly the sums of an unblocked count."""
    from scipy import sparse

    block = block or BLOCK_TOKENS
    total = sparse.csr_matrix((size, size), dtype=np.float64)
    for start in range(0, len(ids), block):
        for distance in range(1, window + 1):
            right = ids[start + distance : start + block + distance]
            left = ids[start : start + len(right)]  # each pair (i, i + distance) once: i in this block
            keep = (left >= 0) & (right >= 0)
            rows, cols = left[keep], right[keep]
            weights = np.full(rows.shape, 1.0 / distance)
            pairs = sparse.coo_matrix((weights, (rows, cols)), shape=(size, size)).tocsr()
            total = total + pairs + pairs.T
    return total.tocsr()


def ppmi(counts, smoothing: float = 0.75):
    """Positive PMI of a co-occurrence matrix, contexts' distribution raised to `smoothing`."""
    from scipy import sparse

    coo = counts.tocoo()
    total = coo.data.sum()
    row_p = np.asarray(counts.sum(axis=1)).ravel() / total
    context = np.asarray(counts.sum(axis=0)).ravel() ** smoothing
    context_p = context / context.sum()
    with np.errstate(divide="ignore"):
        values = np.log(coo.data / total) - np.log(row_p[coo.row]) - np.log(context_p[coo.col])
    keep = values > 0
    return sparse.csr_matrix((values[keep], (coo.row[keep], coo.col[keep])), shape=counts.shape)


def truncated_svd(matrix, rank: int, seed: int, oversample: int = 10, power_iterations: int = 4):
    """(U [n, rank], S [rank]) by randomized SVD (Halko, Martinsson & Tropp 2011), seeded."""
    rng = np.random.default_rng(seed)
    n = matrix.shape[1]
    k = min(rank + oversample, min(matrix.shape))
    q, _ = np.linalg.qr(matrix @ rng.standard_normal((n, k)))
    for _ in range(power_iterations):
        q, _ = np.linalg.qr(matrix.T @ q)
        q, _ = np.linalg.qr(matrix @ q)
    u_small, s, _ = np.linalg.svd((matrix.T @ q).T, full_matrices=False)
    return (q @ u_small)[:, :rank], s[:rank]


def train_vectors(
    sentences: Iterable[Sequence[str]],
    *,
    dim: int,
    words: int,
    min_count: int,
    window: int,
    lowercase: bool,
    std: float,
    seed: int,
) -> tuple[list[str], np.ndarray]:
    """(words by decreasing count, vectors [len(words), dim])."""
    keys, counts, corpus = encode_corpus(sentences, lowercase, gap=window)
    seen = counts.tolist()
    ranked = sorted(range(len(keys)), key=lambda i: (-seen[i], keys[i]))
    chosen = [i for i in ranked if seen[i] >= min_count][:words]
    vocabulary = [keys[i] for i in chosen]
    if len(vocabulary) <= dim:
        raise UserError(
            f"{len(vocabulary)} words are seen at least {min_count} times: too few for {dim}-dimensional vectors "
            "(more text, a lower min_count or a smaller dim)"
        )
    index = np.full(len(keys) + 1, -1, dtype=np.intc)  # the last entry: a line end's -1 stays -1
    index[chosen] = np.arange(len(chosen), dtype=np.intc)
    ids = index[corpus]
    del corpus
    u, s = truncated_svd(ppmi(cooccurrences(ids, len(vocabulary), window)), dim, seed)
    vectors = u * np.sqrt(s)[None, :]
    informative = np.linalg.norm(vectors, axis=1) > 0  # a word whose every PMI is <= 0 gets no vector
    if not informative.any():  # the stage wrote an empty file and succeeded; cvt.train refused it later
        raise UserError(
            f"none of the {len(vocabulary)} words has a positive PMI with a context word within window {window} "
            "(windows never cross lines: one word per line, a word list?), so no word gets a vector: give "
            "running text, one sentence per line"
        )
    kept = informative & np.array([not w.startswith(BOM) for w in vocabulary], dtype=bool)
    vocabulary = [w for w, keep in zip(vocabulary, kept, strict=True) if keep]
    vectors = vectors[kept]
    vectors *= std / max(float(vectors.std()), 1e-12)
    return vocabulary, vectors.astype(np.float32)


def write_vectors(path: Path, vocabulary: Sequence[str], vectors: np.ndarray) -> None:
    """GloVe text format: `word v1 ... vd`, one word per line, most frequent first."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        for word, row in zip(vocabulary, vectors, strict=True):
            out.write(word + " " + " ".join(f"{x:.5f}" for x in row) + "\n")


def run_vectors(ctx: StageContext) -> None:
    """Write `outputs/vectors/vectors.txt` (read by cvt.train's `vocab.vectors: STAGE.vectors`)."""
    config: VectorsConfig = ctx.config
    out = ctx.output_dir("vectors")
    if not ctx.is_main:
        return
    vocabulary, vectors = train_vectors(
        sentences_of(ctx, config),
        dim=config.dim,
        words=config.words,
        min_count=config.min_count,
        window=config.window,
        lowercase=config.lowercase,
        std=config.std,
        seed=ctx.seed,
    )
    write_vectors(out / VECTORS_FILE, vocabulary, vectors)
    ctx.report(
        f"{len(vocabulary)} word vectors of size {config.dim} (PPMI + truncated SVD, window {config.window}) "
        f"from {len(ctx.resolve_files(config.files))} file(s)."
    )

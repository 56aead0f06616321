"""The `cvt.vectors` stage: count-based vectors that put distributionally similar words together,
written in the GloVe format `vocab.vectors` reads, and consumed by `cvt.train` from a recipe."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from xfer.core.errors import RecipeError, UserError
from xfer.cvt.testing import tiny_cvt_recipe, write_tiny_data
from xfer.cvt.vectors import ppmi, train_vectors, truncated_svd, write_vectors
from xfer.cvt.vocab import read_vectors
from xfer.testing import make_host, run_recipe_file, write_recipe

ANIMALS = ["cat", "dog", "horse", "cow"]
FRUIT = ["apple", "pear", "plum", "fig"]


def two_topic_corpus(lines: int = 600, seed: int = 0) -> list[list[str]]:
    """Animals only ever run/sleep/bark; fruit is only ever eaten/peeled: two context families."""
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        if rng.random() < 0.5:
            out.append(["the", rng.choice(ANIMALS), rng.choice(["runs", "sleeps", "barks"]), "outside", "."])
        else:
            out.append(["we", rng.choice(["eat", "peel", "slice"]), "the", rng.choice(FRUIT), "today", "."])
    return out


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_words_sharing_contexts_get_close_vectors():
    words, vectors = train_vectors(
        two_topic_corpus(), dim=4, words=100, min_count=1, window=2, lowercase=True, std=0.5, seed=0
    )
    v = {w: vectors[i] for i, w in enumerate(words)}
    within = min(cosine(v[a], v[b]) for group in (ANIMALS, FRUIT) for a in group for b in group if a != b)
    across = max(cosine(v[a], v[b]) for a in ANIMALS for b in FRUIT)
    assert within > 0.8 and across < 0.3, (within, across)
    assert vectors.shape == (len(words), 4) and vectors.dtype == np.float32
    assert abs(float(vectors.std()) - 0.5) < 1e-3


def test_vectors_are_deterministic_and_keyed_like_the_vocabulary():
    corpus = [[w.upper() if i % 2 else w for w in s] + ["1984"] for i, s in enumerate(two_topic_corpus())]
    first = train_vectors(corpus, dim=4, words=100, min_count=1, window=2, lowercase=True, std=0.5, seed=3)
    second = train_vectors(corpus, dim=4, words=100, min_count=1, window=2, lowercase=True, std=0.5, seed=3)
    assert first[0] == second[0] and np.array_equal(first[1], second[1])
    assert "cat" in first[0] and "CAT" not in first[0] and "0000" in first[0]  # embedding_key: lower, digits -> 0
    assert first[0][0] in {"the", "."}  # most frequent first


def test_limits_and_errors():
    words, _ = train_vectors(two_topic_corpus(), dim=2, words=5, min_count=1, window=2, lowercase=True, std=1, seed=0)
    assert len(words) == 5
    with pytest.raises(UserError, match="too few for 40-dimensional vectors"):
        train_vectors(two_topic_corpus(), dim=40, words=100, min_count=1, window=2, lowercase=True, std=1, seed=0)


def test_ppmi_and_svd_match_their_definitions():
    from scipy import sparse

    counts = np.array([[0, 4, 1], [4, 0, 2], [1, 2, 6]], dtype=float)
    got = ppmi(sparse.csr_matrix(counts), smoothing=1.0).toarray()
    total = counts.sum()
    expected = np.log(counts * total / np.outer(counts.sum(1), counts.sum(0)), where=counts > 0, out=np.zeros((3, 3)))
    np.testing.assert_allclose(got, np.maximum(expected, 0), rtol=1e-10)
    matrix = np.random.default_rng(0).standard_normal((30, 20))
    u, s = truncated_svd(matrix, 3, seed=0)
    np.testing.assert_allclose(s, np.linalg.svd(matrix, compute_uv=False)[:3], rtol=1e-6)
    assert u.shape == (30, 3)


def test_written_file_reads_back_with_read_vectors(tmp_path):
    words, vectors = train_vectors(
        two_topic_corpus(), dim=3, words=50, min_count=1, window=2, lowercase=True, std=1, seed=0
    )
    path = tmp_path / "v.txt"
    write_vectors(path, words, vectors)
    read = read_vectors(path, 3, None)
    assert list(read) == words
    np.testing.assert_allclose(np.array(list(read.values())), vectors, atol=1e-5)


def test_cvt_train_starts_from_a_vectors_stage(tmp_path):
    """`vocab.vectors: vectors.vectors` in a recipe: every vector word enters the vocabulary (in
    supervised mode too) and its embedding row starts from the vector."""
    write_tiny_data(tmp_path)
    recipe = tiny_cvt_recipe(
        "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}",
        mode="supervised",
        steps=1,
        extra="    vocab: {vectors: vectors.vectors}\n    sizes: {word_dim: 6}",
    ).replace(
        "stages:\n",
        "stages:\n  vectors:\n    kind: cvt.vectors\n    files: [unlabeled.txt]\n    dim: 6\n    min_count: 1\n",
    )
    run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", make_host(autoload=True))
    vectors = read_vectors(tmp_path / "run" / "vectors" / "outputs" / "vectors" / "vectors.txt", 6, None)
    vocab = json.loads((tmp_path / "run" / "fit" / "outputs" / "model" / "vocab.json").read_text())["words"]
    assert set(vectors) <= set(vocab)
    # another dim is a recipe error at vocab.vectors: it was found only once the vectors stage had run
    bad = recipe.replace("    dim: 6\n", "    dim: 5\n")
    with pytest.raises(
        RecipeError, match=r"vocab.vectors: stage 'vectors' writes 5-dimensional vectors, .* word_dim 6"
    ):
        run_recipe_file(write_recipe(tmp_path, bad), tmp_path / "bad", make_host(autoload=True))
    assert not (tmp_path / "bad").exists()
    with pytest.raises(UserError, match=r"vectors\.txt:1: expected a word and 5 numbers \(word_dim\), found 6"):
        path = tmp_path / "run" / "vectors" / "outputs" / "vectors" / "vectors.txt"  # a file: read by the stage
        fit = recipe.replace("vectors: vectors.vectors}", f"vectors: {path}}}").replace("word_dim: 6", "word_dim: 5")
        run_recipe_file(write_recipe(tmp_path, fit), tmp_path / "bad", make_host(autoload=True))


def test_initial_embeddings_are_the_vectors(tmp_path, monkeypatch):
    """The rows of the vector words are the vectors at step 0 (checked on the model the stage builds)."""
    import xfer.cvt.stage as stage

    write_tiny_data(tmp_path)
    captured = {}
    original = stage.build_objective

    def spy(*args, **kwargs):
        objective = original(*args, **kwargs)
        captured["weight"] = objective.encoder.word_embedding.weight.detach().clone()
        return objective

    monkeypatch.setattr(stage, "build_objective", spy)
    words, vectors = train_vectors(
        [line.split() for line in (tmp_path / "unlabeled.txt").read_text().splitlines()],
        dim=6,
        words=1000,
        min_count=1,
        window=5,
        lowercase=True,
        std=0.5,
        seed=1,
    )
    write_vectors(tmp_path / "v.txt", words, vectors)
    recipe = tiny_cvt_recipe(
        "{name: conll/chunking, train_file: chunk-train.txt, dev_file: chunk-dev.txt}",
        mode="supervised",
        steps=1,
        extra="    vocab: {vectors: v.txt}\n    sizes: {word_dim: 6}",
    )
    run_recipe_file(write_recipe(tmp_path, recipe), tmp_path / "run", make_host(autoload=True))
    vocab = json.loads((tmp_path / "run" / "fit" / "outputs" / "model" / "vocab.json").read_text())["words"]
    rows = captured["weight"].numpy()
    for word, vector in zip(words, vectors, strict=True):
        np.testing.assert_allclose(rows[vocab.index(word)], vector, atol=1e-5)  # the file keeps 5 decimals

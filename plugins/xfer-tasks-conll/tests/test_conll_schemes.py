"""Tag scheme conversions and validation, and span F1 being the same in BIO and BIOES."""

from __future__ import annotations

import random

import pytest

from xfer.core.tasks import TaggingExample
from xfer.tasks.conll import schemes
from xfer.tasks.conll.config import SpanTaggingConfig
from xfer.tasks.conll.tasks import SpanTaggingTask

BIO = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "I-LOC", "O", "B-ORG"]
BIOES = ["B-PER", "E-PER", "O", "S-LOC", "B-LOC", "I-LOC", "E-LOC", "O", "S-ORG"]


def test_bio_to_bioes_and_back():
    assert schemes.bio_to_bioes(BIO) == BIOES
    assert schemes.bioes_to_bio(BIOES) == BIO


def random_bio(rng: random.Random, n: int) -> list[str]:
    tags, inside = [], ""
    for _ in range(n):
        choice = rng.random()
        if choice < 0.4:
            tags.append("O")
            inside = ""
        elif choice < 0.7 or not inside:
            inside = rng.choice(["PER", "LOC", "ORG"])
            tags.append(f"B-{inside}")
        else:
            tags.append(f"I-{inside}")
    return tags


def test_round_trip_on_random_sequences():
    rng = random.Random(0)
    for _ in range(500):
        bio = random_bio(rng, rng.randint(1, 12))
        bioes = schemes.bio_to_bioes(bio)
        assert schemes.bad_tag(bio, "IOB2") is None
        assert schemes.bad_tag(bioes, "BIOES") is None
        assert schemes.bioes_to_bio(bioes) == bio
        assert schemes.bio_to_bioes(schemes.bioes_to_bio(bioes)) == bioes
        assert schemes.iob1_to_iob2(bio) == bio  # identity on IOB2


def test_iob1_to_iob2():
    # IOB1: a span starts with I-, B- only separates two adjacent spans of the same type
    iob1 = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG", "I-MISC"]
    assert schemes.iob1_to_iob2(iob1) == ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "B-ORG", "B-MISC"]


@pytest.mark.parametrize(
    ("tags", "scheme", "position", "reason"),
    [
        (["O", "X-FOO"], "IOB2", 1, "bad tag 'X-FOO'"),
        (["B-PER", "I-"], "IOB1", 1, "bad tag 'I-'"),
        (["B"], "IOB2", 0, "bad tag 'B'"),
        (["S-PER"], "IOB2", 0, "bad tag 'S-PER'"),
        (["O", "I-PER"], "IOB2", 1, "does not continue a span"),
        (["B-PER", "I-LOC"], "IOB2", 1, "does not continue a span"),
        (["B-PER", "O"], "BIOES", 1, "inside an open PER span"),
        (["E-PER"], "BIOES", 0, "without a preceding B-PER"),
        (["O", "B-PER"], "BIOES", 1, "not closed"),
    ],
)
def test_bad_tags_are_located(tags, scheme, position, reason):
    found = schemes.bad_tag(tags, scheme)
    assert found is not None and found[0] == position and reason in found[1]


def test_span_f1_is_the_same_in_bio_and_bioes():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "O"], ["B-ORG", "B-MISC"]]
    # gold spans PER, LOC, ORG; predicted PER, ORG, MISC; 2 correct -> P = R = F1 = 2/3
    scores = {}
    for scheme in ("BIO", "BIOES"):
        convert = schemes.bio_to_bioes if scheme == "BIOES" else list
        examples = [
            TaggingExample(id=f"s{i}", words=("w",) * len(g), tags=tuple(convert(g))) for i, g in enumerate(gold)
        ]
        predictions = {f"s{i}": convert(p) for i, p in enumerate(pred)}
        task = SpanTaggingTask("conll/ner", SpanTaggingConfig(tag_scheme=scheme))
        scores[scheme] = task.evaluate(examples, predictions)
    assert scores["BIO"] == scores["BIOES"]
    assert scores["BIO"]["f1"] == pytest.approx(200 / 3)
    assert scores["BIO"]["precision"] == pytest.approx(200 / 3)
    assert scores["BIO"]["recall"] == pytest.approx(200 / 3)


def test_span_f1_same_in_both_schemes_on_random_predictions():
    rng = random.Random(1)
    gold = [random_bio(rng, 10) for _ in range(50)]
    pred = [random_bio(rng, 10) for _ in range(50)]
    results = []
    for scheme, convert in (("BIO", list), ("BIOES", schemes.bio_to_bioes)):
        examples = [TaggingExample(id=str(i), words=("w",) * 10, tags=tuple(convert(g))) for i, g in enumerate(gold)]
        task = SpanTaggingTask("conll/ner", SpanTaggingConfig(tag_scheme=scheme))
        results.append(task.evaluate(examples, {str(i): convert(p) for i, p in enumerate(pred)}))
    assert results[0] == pytest.approx(results[1])


def test_iob_span_starts_tell_the_flavours_apart():
    """I-X not continuing X starts a span only in IOB1; B-X not following X only in IOB2."""
    assert schemes.iob_span_starts(["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]) == ([0, 4, 5], [])
    assert schemes.iob_span_starts(["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG"]) == ([], [0, 4, 5])
    assert schemes.iob_span_starts(["O", "I-PER", "O", "B-LOC"]) == ([1], [3])

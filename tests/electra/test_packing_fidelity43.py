"""ELECTRA's pre-training examples against the original `ExampleBuilder` (google-research/electra,
`build_pretraining_dataset.py`), rule by rule.

`Reference` restates the original's rules from its description (not its code): lines accumulate
until their raw token count reaches the target length (max_length, not BERT's max_length - 3);
the first segment aims at `(target - 3) // 2` tokens (no draw over sentence boundaries as BERT's
`create_pretraining_data` makes), or at 100,000 with p = 0.1; both segments lose their tail (never
their head, nor a random side); with p = 0.05 the next target is uniform in [5, max_length]; a
blank line (after `str.strip`) ends the document. The packer, seeded alike, must make the same
examples and consume the same random draws, on streams with empty lines, lines longer than an
example and every small max_length.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from xfer.electra.data import _PackSpec
from xfer.electra.packing import ExamplePacker, block_rng
from xfer.transformer.tokenization import WordPieceTokenizer

CLS, SEP = 2, 3


class Reference:
    """The original example builder's rules, written out independently for comparison."""

    def __init__(
        self,
        max_length: int,
        rng: random.Random,
        short_p: float = 0.05,
        single_p: float = 0.1,
        cls: int = CLS,
        sep: int = SEP,
    ):
        self.max_length, self.rng, self.short_p, self.single_p = max_length, rng, short_p, single_p
        self.cls, self.sep = cls, sep
        self.lines: list[list[int]] = []
        self.total = 0
        self.target = max_length

    def line(self, ids: list[int] | None) -> tuple[list[int], list[int]] | None:
        """One line of text as its token ids; None is a blank line."""
        if ids is None:
            return self.build() if self.total else None
        self.lines.append(list(ids))
        self.total += len(ids)
        return self.build() if self.total >= self.target else None

    def build(self) -> tuple[list[int], list[int]]:
        goal = 100_000 if self.rng.random() < self.single_p else (self.target - 3) // 2
        a: list[int] = []
        b: list[int] = []
        for ids in self.lines:
            joins_a = not a or len(a) + len(ids) < goal
            if not joins_a and not b and len(a) < goal:
                joins_a = self.rng.random() < 0.5
            (a if joins_a else b).extend(ids)
        a = a[: self.max_length - 2]
        b = b[: max(0, self.max_length - len(a) - 3)]
        self.lines, self.total = [], 0
        self.target = self.rng.randint(5, self.max_length) if self.rng.random() < self.short_p else self.max_length
        ids = [self.cls, *a, self.sep] + ([*b, self.sep] if b else [])
        types = [0] * (len(a) + 2) + [1] * (len(b) + 1 if b else 0)
        return ids, types


def stream(seed: int, max_length: int, events: int) -> Iterator[list[int] | None]:
    """Lines of 0 to 3 * max_length tokens (about a third longer than an example), empty lines
    (no tokens), and blank lines (None) ending documents; token ids say which line they come from."""
    rng = random.Random(seed)
    for index in range(events):
        roll = rng.random()
        if roll < 0.15:
            yield None
        elif roll < 0.2:
            yield []
        else:
            size = rng.randint(1, 3 * max_length) if roll < 0.35 else rng.randint(1, max(1, max_length // 3))
            yield [100 + index] * size


def packed(packer: ExamplePacker, line: list[int] | None, short_ids: bool) -> tuple[list[int], list[int]] | None:
    if line is None:
        example = packer.end_document()
    elif short_ids:  # only the ids an example can keep, with the line's full token count
        example = packer.add_sentence(line[: packer.keep_tokens], len(line))
    else:
        example = packer.add_sentence(line)
    return None if example is None else (example.input_ids, example.token_type_ids)


@pytest.mark.parametrize("short_ids", [False, True])
@pytest.mark.parametrize(
    ("max_length", "short_p", "single_p"),
    [(5, 0.05, 0.1), (6, 0.05, 0.1), (7, 0.3, 0.1), (20, 0.05, 0.1), (128, 0.05, 0.1), (24, 0.5, 0.5), (16, 1.0, 0.0)],
)
def test_the_packer_makes_the_original_builders_examples_with_the_same_draws(
    max_length: int, short_p: float, single_p: float, short_ids: bool
) -> None:
    for seed in range(3):
        reference = Reference(max_length, random.Random(seed), short_p, single_p)
        packer = ExamplePacker(max_length, CLS, SEP, random.Random(seed), short_p, single_p)
        made = 0
        for line in stream(1000 * seed + max_length, max_length, 3000):
            expected = reference.line(line)
            assert packed(packer, line, short_ids) == expected
            made += expected is not None
        assert packed(packer, None, short_ids) == reference.line(None)  # the end of the file flushes
        assert packer.rng.getstate() == reference.rng.getstate()  # the same draws, in the same order
        assert made > 300


class Scripted(random.Random):
    """Scripted draws; fails on a draw not scripted."""

    def __init__(self, draws: list[float], ints: list[int] | None = None):
        super().__init__(0)
        self.draws, self.ints = list(draws), list(ints or [])

    def random(self) -> float:
        return self.draws.pop(0)

    def randint(self, a: int, b: int) -> int:
        return self.ints.pop(0)


def ids(n: int, start: int = 10) -> list[int]:
    return list(range(start, start + n))


def test_an_example_is_cut_when_the_raw_tokens_reach_max_length_not_max_length_minus_3() -> None:
    """The original compares the sentences' tokens with the target itself and lets the segment cuts
    drop the 3 tokens [CLS]/[SEP] take (BERT's builder aims at max_length - 3 instead)."""
    packer = ExamplePacker(20, CLS, SEP, Scripted([0.5, 0.9]))
    assert packer.add_sentence(ids(8)) is None  # fills segment a's target (20 - 3) // 2 = 8
    assert packer.add_sentence(ids(11, 50)) is None  # 19 tokens: still below the target of 20
    example = packer.add_sentence(ids(1, 70))
    assert example.input_ids == [CLS, *ids(8), SEP, *ids(9, 50), SEP]  # b's 12 tokens cut to 20 - 8 - 3


def test_the_first_segment_target_is_fixed_by_the_target_length_not_drawn() -> None:
    """(target - 3) // 2 = 8 for 20: sentences fill segment a while they stay below it, whatever
    their number; only the sentence that would reach it flips a coin (one draw, here won)."""
    rng = Scripted([0.5, 0.2, 0.9])
    packer = ExamplePacker(20, CLS, SEP, rng)
    for k in range(7):
        assert packer.add_sentence([40 + k]) is None  # 1 + ... + 1 = 7 < 8: no draw
    example = packer.add_sentence(ids(13))  # 7 + 13 >= 8: the flip (0.2) keeps it in a
    assert example.input_ids == [CLS, *[40 + k for k in range(7)], *ids(11), SEP]
    assert rng.draws == []


def test_at_the_shortest_target_every_later_sentence_goes_to_segment_b_without_a_draw() -> None:
    """A short target of 5 gives a first-segment target of (5 - 3) // 2 = 1: the first sentence fills
    it and no coin is flipped for the others (segment a is not below its target)."""
    rng = Scripted([0.5, 0.01, 0.5, 0.9], ints=[5])
    packer = ExamplePacker(20, CLS, SEP, rng)
    assert packer.add_sentence(ids(20)) is not None  # then the short target 5 is drawn
    packer.add_sentence(ids(1, 50))
    packer.add_sentence(ids(2, 60))
    example = packer.add_sentence(ids(2, 70))
    assert example.target_length == 5
    assert example.input_ids == [CLS, 50, SEP, 60, 61, 70, 71, SEP]
    assert rng.draws == [] and rng.ints == []


def test_the_single_segment_target_is_100000_tokens_so_a_longer_first_segment_still_flips_a_coin() -> None:
    """The original's single-segment example aims at 100,000 tokens, not at everything: after a
    99,999-token line the next line flips the coin, and when it loses, that line starts segment b,
    which the cut keeps if the example has room (an example of max_length 200,000 here)."""
    rng = Scripted([0.05, 0.7, 0.9])  # single; the flip is lost; no short target
    packer = ExamplePacker(200_000, CLS, SEP, rng)
    assert packer.add_sentence(ids(99_999)) is None
    assert packer.add_sentence(ids(5, 7)) is None
    example = packer.end_document()
    assert example.single_segment and rng.draws == []
    assert example.segment_split == 99_999 + 2 and example.input_ids[example.segment_split :] == [*ids(5, 7), SEP]


def test_the_cuts_keep_the_head_of_each_segment() -> None:
    """The original drops each segment's tail, never its head nor a random side (BERT's
    `truncate_seq_pair` draws which end of the pair loses a token)."""
    rng = Scripted([0.5, 0.9, 0.05, 0.9])
    packer = ExamplePacker(12, CLS, SEP, rng)
    packer.add_sentence(ids(4))  # fills segment a's target (12 - 3) // 2 = 4
    two = packer.add_sentence(ids(30, 100))  # segment b: cut to 12 - 4 - 3 = 5 tokens
    assert two.input_ids == [CLS, *ids(4), SEP, *ids(5, 100), SEP]
    one = packer.add_sentence(ids(30, 200))  # a single segment: cut to 12 - 2 = 10 tokens
    assert one.input_ids == [CLS, *ids(10, 200), SEP]
    assert rng.draws == []


class Lines:
    """A one-block source of the given lines (what `_PackSpec.pack_block` reads)."""

    name = "lines.txt"

    def __init__(self, lines: list[str]):
        self._lines = lines

    def lines(self, block: int) -> Iterator[list[str]]:
        yield self._lines


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> WordPieceTokenizer:
    root = tmp_path_factory.mktemp("fidelity-vocab")
    text = root / "train.txt"
    text.write_text("the cat sat on a mat\na dog ran far\n" * 20, encoding="utf-8")
    return WordPieceTokenizer.train([Path(text)], vocab_size=60)


def pack_lines(
    tokenizer: WordPieceTokenizer,
    lines: list[str],
    max_length: int = 64,
    seed: int = 0,
    short_p: float = 0.0,
    single_p: float = 0.0,
) -> list[tuple[list[int], list[int]]]:
    backend_json = tokenizer.backend.to_str()
    spec = _PackSpec(backend_json, hashlib.sha256(backend_json.encode()).hexdigest(), tokenizer.cls_id, tokenizer.sep_id,
                     max_length, seed, short_p, single_p, Lines(lines))  # fmt: skip
    return [(example.input_ids, example.token_type_ids) for example in spec.pack_block(0)]


def test_lines_are_stripped_and_a_whitespace_only_line_ends_the_document_as_in_the_original(
    tokenizer: WordPieceTokenizer,
) -> None:
    """The original strips each line (Python's `str.strip`, Unicode whitespace included) and a line
    left empty ends the document; a line of control characters has no tokens but is not blank, so
    it ends nothing; the end of the block (of the file) flushes the last document."""
    lines = ["  the cat  ", " \t\u3000\xa0", "a dog", "\x01\x02", "ran far", "the mat"]
    documents = [ids for ids, _ in pack_lines(tokenizer, lines)]
    assert [tokenizer.decode(ids[1:-1]) for ids in documents] == ["the cat", "a dog ran far the mat"]
    assert all(ids[0] == tokenizer.cls_id and ids[-1] == tokenizer.sep_id for ids in documents)


def test_a_block_of_text_packs_as_the_original_packs_its_lines(tokenizer: WordPieceTokenizer) -> None:
    """The whole path from lines of text: each line stripped and tokenized on its own, blank lines
    ending documents, and the block's own seeded RNG playing the part of the original's."""
    rng = random.Random(5)
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far"]
    lines = [
        "" if rng.random() < 0.15 else " " * rng.randint(0, 2) + " ".join(rng.choices(words, k=rng.randint(1, 30)))
        for _ in range(3000)
    ]
    reference = Reference(16, block_rng(7, 0), 0.2, 0.3, tokenizer.cls_id, tokenizer.sep_id)
    expected = []
    for line in [*lines, ""]:
        text = line.strip()
        example = reference.line(tokenizer.backend.encode(text, add_special_tokens=False).ids if text else None)
        expected += [example] if example else []
    assert len(expected) > 1000
    assert pack_lines(tokenizer, lines, max_length=16, seed=7, short_p=0.2, single_p=0.3) == expected

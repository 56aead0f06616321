"""Span tag schemes: validation and conversion between IOB1, IOB2 (BIO) and BIOES.

Models are trained on one scheme (BIOES by default, as in the CVT code: the extra E/S tags
give a tagger explicit span ends) while files come in IOB1 or IOB2. Conversions are pure
functions on one sentence; validation returns the position of the first bad tag so readers
can name `file:line`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_IOB = re.compile(r"^(O|[BI]-\S+)$")
_TAG = {"IOB1": _IOB, "IOB2": _IOB, "BIO": _IOB, "BIOES": re.compile(r"^(O|[BIES]-\S+)$")}


def _split(tag: str) -> tuple[str, str]:
    """`B-PER` -> (`B`, `PER`); `O` -> (`O`, ``)."""
    return (tag[0], tag[2:]) if tag != "O" else ("O", "")


def bad_form(tags: Sequence[str], scheme: str) -> tuple[int, str] | None:
    """(position, reason) of the first tag that is not `O` or `P-TYPE` with a prefix P of `scheme`.

    The whole tag must match (`fullmatch`): `re.match` with `$` also accepted a tag ending in a line
    break (`B-PER\\n`, a prediction read back from a file without stripping its newline), which
    was then scored as a span of type `PER\\n` and written as an extra line of the prediction file."""
    pattern = _TAG[scheme]
    for i, tag in enumerate(tags):
        if not pattern.fullmatch(tag):
            prefixes = "B/I/E/S" if scheme == "BIOES" else "B/I"
            return i, f"bad tag {tag!r} for scheme {scheme} (expected O or {prefixes}-TYPE)"
    return None


def bad_tag(tags: Sequence[str], scheme: str) -> tuple[int, str] | None:
    """(position, reason) of the first tag that is malformed in `scheme`, or None.

    Form only for IOB1 (anything goes between well-formed tags); IOB2 additionally forbids an
    `I-X` that does not continue an `X` span; BIOES checks every transition, because a
    converted sequence that is not well formed would silently change spans.
    """
    problem = bad_form(tags, scheme)
    if problem is not None:
        return problem
    if scheme in ("IOB2", "BIO"):
        prev = "O"
        for i, tag in enumerate(tags):
            prefix, kind = _split(tag)
            if prefix == "I" and _split(prev)[1] != kind:
                return i, f"{tag!r} after {prev!r} does not continue a span (IOB1 file? use input_scheme IOB1 or auto)"
            prev = tag
    if scheme == "BIOES":
        inside = ""  # type of the open span, "" if none
        for i, tag in enumerate(tags):
            prefix, kind = _split(tag)
            if inside and not (prefix in "IE" and kind == inside):
                return i, f"{tag!r} inside an open {inside} span (expected I-{inside} or E-{inside})"
            if not inside and prefix in "IE":
                return i, f"{tag!r} without a preceding B-{kind}"
            inside = kind if prefix in "BI" else ""
        if inside:
            return len(tags) - 1, f"the {inside} span is not closed by E-{inside} at the end of the sentence"
    return None


def iob_span_starts(tags: Sequence[str]) -> tuple[list[int], list[int]]:
    """Positions of the span starts that only one IOB flavour writes: (IOB1-only, IOB2-only).

    An `I-X` that does not continue an `X` span starts a span only in IOB1 (IOB2 forbids it); a
    `B-X` that does not follow an `X` span starts one only in IOB2 (IOB1 writes `B-` solely
    between two adjacent spans of one type). A file with both kinds is neither scheme, so
    `input_scheme: auto` must not guess: an IOB2 file with one `I-` typo would otherwise be read
    as IOB1 and the typo silently turned into a span start.
    """
    iob1: list[int] = []
    iob2: list[int] = []
    prev_kind = ""
    for i, tag in enumerate(tags):
        prefix, kind = _split(tag)
        if prefix == "I" and kind != prev_kind:
            iob1.append(i)
        elif prefix == "B" and kind != prev_kind:
            iob2.append(i)
        prev_kind = kind
    return iob1, iob2


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 uses `B-` only between adjacent spans of one type; IOB2 starts every span with `B-`.

    Identity on IOB2 input, so applying it to a file of unknown IOB flavour is safe.
    """
    out: list[str] = []
    prev_kind = ""
    for tag in tags:
        prefix, kind = _split(tag)
        if prefix == "I" and kind != prev_kind:
            tag = f"B-{kind}"
        out.append(tag)
        prev_kind = kind
    return out


def bio_to_bioes(tags: Sequence[str]) -> list[str]:
    """IOB2 -> BIOES: a span's last token becomes `E-` (or `S-` for a one-token span)."""
    out: list[str] = []
    for i, tag in enumerate(tags):
        prefix, kind = _split(tag)
        continues = i + 1 < len(tags) and tags[i + 1] == f"I-{kind}"
        if prefix == "B":
            out.append(tag if continues else f"S-{kind}")
        elif prefix == "I":
            out.append(tag if continues else f"E-{kind}")
        else:
            out.append(tag)
    return out


def bioes_to_bio(tags: Sequence[str]) -> list[str]:
    """BIOES -> IOB2: `E-` becomes `I-`, `S-` becomes `B-`."""
    table = {"E": "I", "S": "B"}
    return [f"{table.get(tag[0], tag[0])}{tag[1:]}" if tag != "O" else tag for tag in tags]


def is_bioes_tag(tag: str) -> bool:
    """An E- or S- tag: only BIOES has them."""
    return tag[:2] in ("E-", "S-")

"""Named random streams: the single place where the toy language's randomness is seeded.

Grammar, text and tasks all draw from `derive_rng`, so "same seed, same output, everywhere"
(see the package docstring) is a property of one function rather than of every caller.
"""

from __future__ import annotations

import random


def derive_rng(seed: int, *stream: str) -> random.Random:
    """An RNG for the named sub-stream of `seed` (e.g. `derive_rng(13, "agreement", "dev")`).

    Seeding with a string makes `random` hash it with SHA-512, so different streams of one seed
    are independent and the result does not depend on `PYTHONHASHSEED` or the platform.
    """
    return random.Random("/".join(("xfer.toy", str(seed), *stream)))

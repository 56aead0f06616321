"""How often the multi-task student trains on each task.

BAM samples tasks with probability ∝ |D|^0.75 (Bowman et al., 2018): large datasets do not drown
the small ones, yet a large dataset still gets more steps than a small one. The original code
reached the same effect with dataset copies plus loss weights; sampling gives the same expected
contribution per task without either. The usual alternatives are exposed for ablations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from xfer.core.errors import UserError


def task_probabilities(
    sizes: Mapping[str, int], scheme: str = "power", alpha: float = 0.75, temperature: float = 2.0
) -> dict[str, float]:
    """Sampling probability of each task from its training-set size.

    power: ∝ |D|^alpha; proportional: ∝ |D|; uniform: equal; temperature: ∝ |D|^(1/temperature)
    (the same family as power, written the way multilingual models usually state it).
    """
    if not sizes:
        raise ValueError("no tasks to sample from")
    empty = [name for name, size in sizes.items() if size <= 0]
    if empty:
        raise ValueError(f"task {empty[0]!r} has no training examples")
    exponents = {"power": alpha, "proportional": 1.0, "uniform": 0.0}
    if scheme == "temperature":
        exponent = 1.0 / temperature
    elif scheme in exponents:
        exponent = exponents[scheme]
    else:
        raise ValueError(f"unknown sampling scheme {scheme!r} (power, proportional, uniform, temperature)")
    try:
        raw = {name: float(size) ** exponent for name, size in sizes.items()}
        total = sum(raw.values())
    except OverflowError:  # e.g. 100,000 examples at temperature 0.01: 1e500
        total = math.inf
    if math.isfinite(total):  # kept where it is finite: its rounding decides the draws of existing runs
        return {name: value / total for name, value in raw.items()}
    # past the float range, which was a bare OverflowError when the student started: the same
    # probabilities in log space, relative to the largest task: exponent * (log |D| - log max |D|).
    # (exponent * log |D| - its maximum gave inf - inf = NaN once the product itself overflowed, e.g.
    # temperature 1e-310: NaN probabilities, refused only as "invalid task probabilities" by the source.)
    largest = max(sizes.values())
    raw = {
        name: 1.0 if size == largest else math.exp(exponent * (math.log(size) - math.log(largest)))
        for name, size in sizes.items()
    }
    total = sum(raw.values())
    probabilities = {name: value / total for name, value in raw.items()}
    never = min(probabilities, key=lambda name: probabilities[name])
    if probabilities[never] == 0.0:  # its head would stay as initialised, and its results be reported
        knob = "temperature" if scheme == "temperature" else "alpha"
        raise UserError(
            f"sampling: {scheme} with {knob} {temperature if knob == 'temperature' else alpha} gives task "
            f"{never!r} ({sizes[never]} examples) a probability that is 0 in floating point next to "
            f"{max(sizes, key=lambda name: sizes[name])!r} ({max(sizes.values())}): it would never be "
            f"sampled; {'raise the temperature' if knob == 'temperature' else 'lower alpha'}"
        )
    return probabilities

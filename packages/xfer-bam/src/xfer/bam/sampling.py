"""How often the multi-task student trains on each task.

BAM samples tasks with probability ∝ |D|^0.75 (Bowman et al., 2018): large datasets do not drown
the small ones, yet a large dataset still gets more steps than a small one. The original code
reached the same effect with dataset copies plus loss weights; sampling gives the same expected
contribution per task without either. The usual alternatives are exposed for ablations.
"""

from __future__ import annotations

from collections.abc import Mapping


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
    raw = {name: float(size) ** exponent for name, size in sizes.items()}
    total = sum(raw.values())
    return {name: value / total for name, value in raw.items()}

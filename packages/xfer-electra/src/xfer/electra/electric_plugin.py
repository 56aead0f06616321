"""xfer-electra's second plugin (namespace `electric`): the Electric objective. Registration only."""

from __future__ import annotations

from xfer.core.hookspecs import hookimpl
from xfer.core.specs import ComponentSpec


@hookimpl
def xfer_objectives() -> list[ComponentSpec]:
    return [
        ComponentSpec(
            "objective",
            "electric.nce",
            "xfer.electra.objective:ElectricObjective",
            "1",
            "xfer.electra.config:NCEConfig",
            "Electric: an energy-based cloze model trained by NCE against a two-tower cloze noise model; "
            "pseudo-log-likelihoods in one pass.",
        )
    ]

"""`example.focal`: the built-in sentence objective with focal loss instead of cross-entropy.

Focal loss (Lin et al., 2017) down-weights examples the model already gets right,
FL = -(1 - p_t)^gamma * log p_t, which helps with skewed label distributions. Everything else
(featurisation, [CLS] head, prediction) is inherited from `transformer.sequence`, so the
whole plugin is one overridden method.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from xfer.core import FieldError, knob
from xfer.transformer.objectives import SequenceConfig, SequenceObjective


@dataclass
class FocalConfig(SequenceConfig):
    # `ge=0`: a recipe's negative gamma is an error at its own line (`__post_init__` only knows the
    # mapping's); the check below is for Python callers, and names the key all the same.
    gamma: float = knob(2.0, "Focusing parameter; 0 gives plain cross-entropy.", ge=0)

    def __post_init__(self) -> None:
        if self.gamma < 0:
            raise FieldError("gamma", "must be >= 0")


class FocalObjective(SequenceObjective):
    """Classification only (focal loss has no regression form)."""

    task_types = ("classification",)

    def loss(self, scores: Tensor, labels: Tensor) -> Tensor:
        log_p = F.log_softmax(scores.float(), dim=-1).gather(-1, labels[:, None]).squeeze(-1)
        # 1 - p_t is exactly 0 for an example already right with p_t = 1.0 in float32 (a logit margin
        # over ~17); for 0 < gamma < 1 the derivative of x**gamma there is inf, inf * log p_t (= 0) is
        # NaN, and one confident example made every gradient NaN (the run stopped as diverged). The
        # true gradient there is 0, which the clamp gives; any 1 - p_t > 0 is unchanged.
        miss = (1 - torch.exp(log_p)).clamp_min(torch.finfo(log_p.dtype).tiny)
        return -((miss**self.config.gamma) * log_p).mean()

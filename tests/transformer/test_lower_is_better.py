"""A task whose main metric is lower-is-better (`TaskInfo.greater_is_better = False`, a perplexity):
a diverged run's NaN must count as the worst run when the exported model and the summary are chosen."""

from __future__ import annotations

import math

from xfer.core.results import task_result
from xfer.cvt.results import task_row
from xfer.transformer.finetune import _median_trial

RUNS = [{"trial": 0, "seed": 1, "ppl": math.nan}, *({"trial": t, "seed": t + 1, "ppl": 10.0 * t} for t in range(1, 5))]


def test_the_exported_median_trial_counts_a_nan_run_as_the_worst() -> None:
    """NaN sorted lowest whatever the direction: of NaN, 10, 20, 30, 40 (lower is better) the exported
    'median' model was trial 2 (20), leaning toward the best runs; it is trial 3 (30)."""
    assert _median_trial(RUNS, "ppl", greater_is_better=False) == 3
    assert _median_trial(RUNS, "ppl") == 2  # greater is better: NaN the lowest, as before


def test_a_stage_result_records_the_direction_and_its_median() -> None:
    entry = task_result("ppl", RUNS, greater_is_better=False)
    assert entry["greater_is_better"] is False and entry["summary"]["ppl"]["median"] == 30.0


def test_cvt_results_range_puts_a_nan_run_at_the_worst_end() -> None:
    row = task_row("cvt", "lm", task_result("ppl", RUNS, greater_is_better=False) | {"runs": RUNS})
    assert "| 10.0–nan |" in row, row

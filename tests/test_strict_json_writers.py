"""Every metrics.jsonl and results.json writer writes strict JSON (a diverged value as "NaN"), and
the readers take it back as the float.

`xfer.core.results.task_result` and `report.metric_json` became strict, but the stage's own metrics
writer (`RunLog.log`) and BAM's results writer still wrote Python's bare NaN token, which `jq`,
JavaScript and Go refuse; CVT's curve reader read the file with `json.loads` alone."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

from xfer.core.plugins import default_host
from xfer.core.stage import StageContext


def strict(text: str) -> Any:
    def refuse(token: str) -> None:
        raise AssertionError(f"bare {token} token: not strict JSON")

    return json.loads(text, parse_constant=refuse)


def context(tmp_path: Path) -> StageContext:
    folder = tmp_path / "run" / "stage"
    folder.mkdir(parents=True)
    return StageContext(
        tmp_path / "run", "stage", "test.kind", None, 1, folder, torch.device("cpu"), default_host(), {}
    )


def test_a_diverged_loss_is_logged_as_strict_json_and_read_back_as_nan(tmp_path: Path) -> None:
    from xfer.core.runs.report import read_metrics
    from xfer.cvt.results import dev_rows

    ctx = context(tmp_path)
    log = ctx.events(trial=0)
    log.log(10, "train", {"loss": math.nan, "grad_norm": math.inf})
    log.log(10, "dev", {"f1": math.nan})
    lines = ctx.metrics_file.read_text().splitlines()
    assert [strict(line)["split"] for line in lines] == ["train", "dev"]
    train, dev = read_metrics(ctx.metrics_file)
    assert math.isnan(train["loss"]) and train["grad_norm"] == math.inf
    assert math.isnan(dev["f1"])
    (row,) = dev_rows(ctx.dir)
    assert math.isnan(row["f1"]), "CVT's curve reader takes the spelled-out NaN back as the float"


def test_bam_results_are_strict_json(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from xfer.bam.stage import write_results
    from xfer.core.results import read_results

    ctx = context(tmp_path)
    info = SimpleNamespace(main_metric="accuracy")
    data = SimpleNamespace(name="toy/agreement", info=info)
    group = SimpleNamespace(name="g", slug="g", tasks=[data])
    record = {"trial": 0, "seed": 1, "steps": 5, "checkpoint": "last", "seconds": 1.0}
    runs = {"g": [{"metrics": {"toy/agreement": {"accuracy": math.nan}}, **record}]}
    results = write_results(ctx, [group], runs)
    assert math.isnan(results["toy/agreement"]["runs"][0]["accuracy"]), "the caller keeps the floats"
    strict((ctx.dir / "outputs/results/results.json").read_text())
    read = read_results(ctx.dir)
    assert read is not None and math.isnan(read["toy/agreement"]["runs"][0]["accuracy"])

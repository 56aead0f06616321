"""glue/tsv's `metrics` default follows the task type."""

from __future__ import annotations

from pathlib import Path

from xfer.tasks.glue.config import TsvTaskConfig
from xfer.tasks.glue.tasks import TsvTask


def test_a_regression_tsv_task_without_metrics_gets_correlations(tmp_path: Path) -> None:
    """The default `metrics: [accuracy]` was refused for a regression task ("'accuracy' is not
    available for regression"), at a key the recipe never wrote."""
    (tmp_path / "r.tsv").write_text("a\tscore\nx\t1.5\n", encoding="utf-8")
    task = TsvTask("glue/tsv", TsvTaskConfig(train=tmp_path / "r.tsv", label_column="score", type="regression"))
    assert task.main_metric == "spearman"
    assert task.config.metrics == ["spearman", "pearson"]


def test_a_classification_tsv_task_keeps_accuracy(tmp_path: Path) -> None:
    (tmp_path / "c.tsv").write_text("a\tlabel\nx\tyes\n", encoding="utf-8")
    config = TsvTaskConfig(train=tmp_path / "c.tsv", label_column="label", labels=["no", "yes"])
    assert config.metrics == ["accuracy"] and TsvTask("glue/tsv", config).main_metric == "accuracy"

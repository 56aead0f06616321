"""Test plugin for the subprocess runs of tests/bam (run_cli, torchrun): stage reports skip drawing
their matplotlib training curves (about a second per stage; plotting is core's, tested in tests/core)."""

from xfer.core import report

XFER_NAMESPACE = "bamtestnoplots"

report._plot = lambda *args, **kwargs: None  # type: ignore[assignment]

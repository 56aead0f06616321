"""Test-only xfer plugin module: report.md without its matplotlib curves.

The subprocesses of the CVT tests (SIGKILL-and-resume, torchrun) load it through
`XFER_PLUGIN_MODULES` (see conftest.py): each report's ~10 curves cost ~5 s of CPU per process,
and the curves are not what these tests check."""

import xfer.core.report


def _no_plot(*args: object, **kwargs: object) -> None:
    return None


xfer.core.report._plot = _no_plot

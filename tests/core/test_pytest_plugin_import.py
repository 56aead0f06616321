"""The `pytest11` plugin of xfer.testing loads in every pytest session of every plugin author:
it must stay cheap, i.e. never import torch at import time."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_pytest_plugin_does_not_import_torch() -> None:
    code = "import sys, xfer.testing.pytest_plugin, xfer.testing; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", "xfer.testing.pytest_plugin imported torch at import time"

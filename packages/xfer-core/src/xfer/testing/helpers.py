"""Building blocks of the test kit (see `xfer.testing`).

torch and the runner are imported inside the functions that need them: pytest loads this
module through the `pytest11` entry point in every session, and a plugin author's pure-Python
tests should not pay torch's import time (about 1.5 s) for fixtures they never use.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xfer.core.plugins import PluginHost
from xfer.core.recipes.recipe import load_recipe

if TYPE_CHECKING:
    import torch

    from xfer.core.runs.runner import RunResult


def _names(value: Iterable[str] | None, what: str) -> list[str] | None:
    """`value` as a list of names; a bare string is refused. `make_host("my.plugin")` (the brackets
    forgotten) loaded the one-letter modules "m", "y", "." ... as failed plugins, and a recipe then found
    none of the plugin's components ("no installed plugin provides namespace ...; pip install ..."), which
    hid the typo."""
    if isinstance(value, str):
        raise ValueError(f"{what} must be a list of names, got the string {value!r} (write [{value!r}])")
    return None if value is None else list(value)


def make_host(modules: Iterable[str] = (), autoload: bool = False, allow: Iterable[str] | None = None) -> PluginHost:
    """A host with the built-ins, `modules` (import paths) and, if `autoload`, installed plugins."""
    return PluginHost(
        autoload=autoload,
        allow=_names(allow, "make_host(allow=...)"),
        modules=_names(modules, "make_host(modules=...)"),
    )


def write_recipe(directory: Path, text: str, name: str = "recipe.yaml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def run_recipe_file(
    recipe: Path,
    run_dir: Path,
    host: PluginHost,
    overrides: Sequence[str] = (),
    *,
    preflight: bool = True,
    **kwargs: Any,
) -> RunResult:
    """Validate and run a recipe in this process (quiet), with the checks `xfer run` makes first.

    `xfer run` refuses a run directory it may not use and reads every selected stage's data (the
    pre-flight) before the first stage trains; without them here, a plugin author's test passed on a
    recipe every real `xfer run` refused (a dev file the stage never reads, a malformed line in a
    later stage's data, a stage config's own `preflight()`). The same functions `xfer run` calls run
    here. `preflight=False` skips both, for a test of what a stage itself does past them."""
    from xfer.core.runs.preflight import check_data
    from xfer.core.runs.runner import check_run_dir, run_recipe

    plan = load_recipe(recipe, list(overrides), host)
    if preflight:
        # as `xfer run` (cli.cmd_run): not under torchrun, where `run_recipe` refuses on every rank at once
        if os.environ.get("WORLD_SIZE", "1").strip() in ("", "1"):
            check_run_dir(plan, run_dir, force=bool(kwargs.get("force")), fork=kwargs.get("fork"))  # type: ignore[arg-type]
        check_data(plan, host, kwargs.get("only"), run_dir=run_dir)  # type: ignore[arg-type]
    return run_recipe(plan, run_dir, host=host, log=lambda *a, **k: None, **kwargs)


def run_cli(
    args: Sequence[str],
    *,
    plugin_modules: Iterable[str] = (),
    kill_at_step: int | None = None,
    term_at_step: int | None = None,
    crash_in_checkpoint: int | None = None,
    cwd: Path | None = None,
    timeout: float = 600,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `xfer ARGS` in a fresh Python process, optionally with an injected fault."""
    command = [sys.executable, "-m", "xfer.testing.faults"]
    if kill_at_step is not None:
        command += ["--kill-at-step", str(kill_at_step)]
    if term_at_step is not None:
        command += ["--term-at-step", str(term_at_step)]
    if crash_in_checkpoint is not None:
        command += ["--crash-in-checkpoint", str(crash_in_checkpoint)]
    full_env = {**os.environ, **(env or {})}
    modules = [m for m in full_env.get("XFER_PLUGIN_MODULES", "").split(",") if m]
    modules += _names(plugin_modules, "run_cli(plugin_modules=...)") or []
    full_env["XFER_PLUGIN_MODULES"] = ",".join(dict.fromkeys(modules))
    return subprocess.run([*command, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def output_tensors(run_dir: Path, stage: str) -> dict[str, torch.Tensor]:
    """Every tensor in every safetensors file under the stage's outputs, keyed 'file:tensor'."""
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    root = run_dir / stage / "outputs"
    for file in sorted(root.rglob("*.safetensors")):
        for name, tensor in load_file(str(file)).items():
            tensors[f"{file.relative_to(root)}:{name}"] = tensor
    if not tensors:
        raise AssertionError(f"no safetensors weights under {root}")
    return tensors


def output_files(run_dir: Path, stage: str) -> dict[str, str]:
    """The sha256 of every file under the stage's outputs, keyed by its path there."""
    from xfer.core.runs.fingerprint import file_sha256

    root = run_dir / stage / "outputs"
    files = {str(f.relative_to(root)): file_sha256(f) for f in sorted(root.rglob("*")) if f.is_file()}
    if not files:
        raise AssertionError(f"no files under {root}")
    return files


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], rtol: float = 0.0) -> None:
    """Bitwise equality (rtol=0) or relative closeness of two weight sets, naming the first mismatch."""
    import torch

    assert a.keys() == b.keys(), f"different tensors: {sorted(a.keys() ^ b.keys())[:5]}"
    for name in a:
        x, y = a[name].float(), b[name].float()
        if rtol == 0.0:
            assert torch.equal(x, y), f"{name}: max abs difference {(x - y).abs().max().item():.3g}"
        else:
            scale = y.abs().max().clamp_min(1e-12)
            diff = ((x - y).abs().max() / scale).item()
            assert diff <= rtol, f"{name}: relative difference {diff:.3g} > {rtol}"

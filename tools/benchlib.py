"""Measurement helpers shared by the benchmarks in tools/ (not a library of the project).

- CPU facts: `cpu_flags()` (does the CPU have native bf16: AMX or AVX512-BF16?).
- Contention: `stall_us()` reads Linux PSI (microseconds in which a runnable task waited for a
  CPU), `cpu_pressure()` its 10-second average; benchmarks keep timings taken while the machine
  was quiet (`QUIET`) apart, since other jobs on a 2-core machine otherwise decide the result.
- Memory: `peak_rss_growth(run)` resets the kernel's peak-RSS counter, runs `run()`, and returns
  the growth of peak RSS in MiB: the extra resident memory the work needed (every allocation torch
  makes, which tracemalloc would not see). Run it in a fresh process per measured side.
- Peak: `matmul_peak_flops(dtype)` times large square matmuls: the ceiling for model-FLOPs utilisation.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from pathlib import Path

QUIET = 0.10  # a timing is "quiet" if other tasks waited for a CPU during less than this share of it


def cpu_flags() -> dict[str, bool]:
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        flags = set()
    return {name: name in flags for name in ("amx_bf16", "avx512_bf16", "avx512f", "avx2")}


def native_bf16() -> bool:
    flags = cpu_flags()
    return flags["amx_bf16"] or flags["avx512_bf16"]


def describe_cpu() -> str:
    model = next(
        (line.split(":", 1)[1].strip() for line in _cpuinfo_lines() if line.startswith("model name")), "unknown CPU"
    )
    flags = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in cpu_flags().items())
    return f"{model}; {flags}"


def _cpuinfo_lines() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def stall_us() -> int | None:
    """Cumulative microseconds in which some runnable task waited for a CPU (Linux PSI), or None."""
    try:
        first = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return int(first.split("total=")[1])
    except (OSError, IndexError, ValueError):
        return None


def cpu_pressure() -> str:
    """Share of the last 10 s in which some runnable task waited for a CPU (Linux PSI), if available."""
    try:
        first = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return first.split()[1].replace("avg10=", "") + "%"
    except (OSError, IndexError):
        return "n/a"


def timed(work: Callable[[], object]) -> tuple[float, float]:
    """(seconds, share of them in which another task waited for a CPU) of one call of `work`."""
    stall0, start = stall_us(), time.perf_counter()
    work()
    elapsed, stall1 = time.perf_counter() - start, stall_us()
    share = (stall1 - stall0) / 1e6 / elapsed if stall0 is not None and stall1 is not None else 0.0
    return elapsed, share


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def peak_rss_growth(run: Callable[[], object]) -> tuple[float, str]:
    """(MiB of peak-RSS growth while `run()` ran, method used)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        method = "VmHWM after clear_refs"
    except OSError:
        method = "ru_maxrss"
    base = _rss_kib("VmRSS")
    run()
    peak = _rss_kib("VmHWM") if method.startswith("VmHWM") else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (peak - base) / 1024, method


def matmul_peak_flops(dtype_name: str = "float32", size: int = 2048, repeats: int = 5) -> float:
    """Best FLOP/s of a size^3 matmul (fp32 or bf16): the machine's practical matmul ceiling."""
    import torch

    dtype = getattr(torch, dtype_name)
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best

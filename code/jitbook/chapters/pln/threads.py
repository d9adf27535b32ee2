"""Two thread pools on two cores: XLA's, and the OpenBLAS pool that JAX's CPU linear
algebra borrows.

On CPU, `jnp.linalg.inv`, `cholesky` and `triangular_solve` call LAPACK through SciPy's
bundled OpenBLAS, which keeps its own threads next to XLA's. When the two pools compete
for the same cores, a 114 x 114 triangular solve can take milliseconds instead of
microseconds. `threadpoolctl` limits the OpenBLAS pool for the duration of a fit and
restores it afterwards.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import scipy.linalg  # noqa: F401  loads SciPy's OpenBLAS now: threadpoolctl only limits libraries already loaded
from threadpoolctl import threadpool_info, threadpool_limits

from jitbook.arguments import whole_number

BLAS_THREADS = 1  # what every fit uses; the chapter measures the default against it


def blas_threads() -> int:
    """Threads the loaded BLAS libraries (SciPy's OpenBLAS among them) may use now: the
    largest setting."""
    return max(
        info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"
    )


def blas_limited(threads: int = BLAS_THREADS) -> threadpool_limits:
    """A context manager: BLAS uses `threads` threads inside it and its previous setting
    after it.

    Taught in The PLN model, made fast, Two thread pools.
    """
    whole_number(threads, "threads")
    return threadpool_limits(limits=threads, user_api="blas")


def cpu_description() -> str:
    """The CPU this process runs on, as the operating system names it, and its core
    count: the machine every timing of the PLN pages belongs to."""
    name = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    return f"{name} ({os.cpu_count()} cores visible to this process)"

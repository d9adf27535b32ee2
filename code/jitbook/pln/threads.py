"""The BLAS thread pool that JAX's CPU linear algebra borrows, and how to keep it from fighting XLA.

On CPU, `jnp.linalg.inv`, `cholesky` and `triangular_solve` call LAPACK through SciPy's bundled
OpenBLAS, which runs its own pool of threads next to XLA's. On a small machine the two pools compete
for the same cores, and a 114 x 114 triangular solve can take milliseconds instead of microseconds.
"""

from __future__ import annotations

import ctypes
from pathlib import Path


def _scipy_openblas() -> ctypes.CDLL | None:
    import scipy

    libs = Path(scipy.__file__).resolve().parent.parent / "scipy.libs"
    for path in sorted(libs.glob("libscipy_openblas*.so*")):
        return ctypes.CDLL(str(path))
    return None


def blas_threads() -> int | None:
    """Threads SciPy's OpenBLAS may use (None if this SciPy does not bundle OpenBLAS)."""
    lib = _scipy_openblas()
    if lib is None or not hasattr(lib, "scipy_openblas_get_num_threads"):
        return None
    return int(lib.scipy_openblas_get_num_threads())


def set_blas_threads(n: int) -> int | None:
    """Let SciPy's OpenBLAS use `n` threads; returns the previous setting (None if not found)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer number of threads, got {n!r}.")
    lib = _scipy_openblas()
    if lib is None or not hasattr(lib, "scipy_openblas_set_num_threads"):
        return None
    previous = blas_threads()
    lib.scipy_openblas_set_num_threads(ctypes.c_int(n))
    return previous

"""jitbook: the code that the book *JIT with JAX* shows, runs and tests.

Importing it first sets an XLA flag that avoids a CPU miscompile (see ``jitbook._guard``); do
``import jitbook`` before any JAX computation.
"""

from ._guard import apply_cpu_guard

apply_cpu_guard()

from . import timing  # noqa: E402
from .cache import capture_jax_logs, count_compiles  # noqa: E402
from .display import show_source, table, versions  # noqa: E402
from .size import pick, small  # noqa: E402

__all__ = ["capture_jax_logs", "count_compiles", "pick", "show_source", "small", "table", "timing", "versions"]

"""The examples of the first chapter: one function run op by op and compiled, and when jit pays off."""

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp

from . import timing


def standardize_softplus(x: jax.Array) -> jax.Array:
    """Softplus of each row standardized to mean 0 and variance 1: nine elementwise ops and two reductions.

    Op by op, every line is its own kernel that reads and writes the whole array; compiled, XLA fuses
    them into a few passes over memory.
    """
    y = jnp.log1p(jnp.exp(-jnp.abs(x))) + jnp.maximum(x, 0.0)  # softplus, stable for large |x|
    mean = jnp.mean(y, axis=1, keepdims=True)
    centered = y - mean
    std = jnp.sqrt(jnp.mean(centered**2, axis=1, keepdims=True) + 1e-6)
    return centered / std


def tiny(x: jax.Array) -> jax.Array:
    """A function too small to be worth compiling when it runs once."""
    return x + 1.0


def heavy_matmul(n: int) -> jax.Array:
    """A computation long enough that asynchronous dispatch returns well before it ends."""
    a = jnp.ones((n, n), dtype=jnp.float32)
    return (a @ a) @ a


def break_even_calls(compile_s: float, eager_s: float, jit_s: float) -> float:
    """After how many calls compiling pays off: compile time over the time saved per call (inf if none)."""
    for name, value in (("compile_s", compile_s), ("eager_s", eager_s), ("jit_s", jit_s)):
        if not isinstance(value, (int, float)) or value < 0 or math.isnan(value):
            raise ValueError(f"{name} must be a non-negative number of seconds, got {value!r}.")
    saved = eager_s - jit_s
    return math.inf if saved <= 0 else compile_s / saved


# --- explorer


def size_sweep(rows: Sequence[int], columns: int = 256, repeats: int = 5) -> list[dict]:
    """``standardize_softplus`` on ``rows`` x ``columns`` arrays: op by op, compiled, compile time, break-even calls.

    Defined for the explorer of chapter "Why compile?", section "Explore it".
    """
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence) or not rows or not all(
            isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in rows):
        raise ValueError(f"rows must be a non-empty list of positive array heights, e.g. [16, 256, 4096]; got {rows!r}.")
    table = []
    for n in rows:
        x = jax.random.normal(jax.random.key(n), (n, columns))
        eager = timing.time_call(standardize_softplus, x, repeats=repeats)
        first = timing.stages(standardize_softplus, x)
        compiled = timing.time_call(jax.jit(standardize_softplus), x, repeats=repeats)
        compile_s = first.trace + first.lower + first.compile
        calls = break_even_calls(compile_s, eager.median, compiled.median)
        table.append({"rows": n, "elements": n * columns, "op by op (ms)": 1e3 * eager.median,
                      "compiled (ms)": 1e3 * compiled.median, "compile (ms)": 1e3 * compile_s,
                      "calls to pay off": math.ceil(calls) if math.isfinite(calls) else "never"})
    return table

"""The examples of the first chapter: one function run op by op and compiled, and when jit pays off."""

import math
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from . import timing
from .cache import count_compiles, fresh_jit


def standardize_softplus(x: jax.Array) -> jax.Array:
    """Softplus of each row standardized to mean 0 and variance 1: elementwise ops and reductions,
    counted by the chapter.

    Op by op, every primitive is its own kernel that writes its whole result; compiled, XLA fuses
    them into fewer passes over memory.

    Taught in Why compile?, Two ways to run the same function.
    """
    y = jnp.log1p(jnp.exp(-jnp.abs(x))) + jnp.maximum(
        x, 0.0
    )  # softplus, stable for large |x|
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
    """After how many calls compiling pays off: compile time over the time saved per call (inf if
    none).

    Taught in Why compile?, Op by op against compiled, measured.
    """
    for name, value in (
        ("compile_s", compile_s),
        ("eager_s", eager_s),
        ("jit_s", jit_s),
    ):
        if not isinstance(value, (int, float)) or value < 0 or math.isnan(value):
            raise ValueError(
                f"{name} must be a non-negative number of seconds, got {value!r}."
            )
    saved = eager_s - jit_s
    return math.inf if saved <= 0 else compile_s / saved


def cold_and_warm(fn: Callable, x: jax.Array, repeats: int = 50) -> list[dict]:
    """First and later calls of ``fn(x)``, op by op and jitted, each first call on a cold start.

    Pass an ``x`` of a shape nothing has used yet: op by op, the first call compiles each primitive
    for that shape, as the first jitted call compiles the whole function. Taught in Why compile?,
    When compiling does not pay off.
    """
    rows = []
    for way, callable_ in (("op by op", fn), ("jax.jit", fresh_jit(fn))):
        with count_compiles() as log:
            start = time.perf_counter()
            jax.block_until_ready(callable_(x))
            first = time.perf_counter() - start
        later = timing.time_call(callable_, x, repeats=repeats, warmup=0)
        rows.append(
            {
                "way": way,
                "first call (ms)": 1e3 * first,
                "compiles in first call": log.count,
                "later calls (ms)": 1e3 * later.median,
            }
        )
    return rows


def wrapper_per_call(
    fn: Callable, x: jax.Array, repeats: int = 200
) -> tuple[timing.Timing, ...]:
    """Per-call times of one ``jax.jit(fn)`` called again, and of a new ``jax.jit(fn)`` at every
    call.

    Both find the compiled program; the new wrapper misses jit's fast dispatch path. Taught in
    Why compile?, Two ways to run the same function.
    """
    kept = jax.jit(fn)
    jax.block_until_ready(kept(x))
    reused = timing.time_call(kept, x, repeats=repeats)
    reused.name = "one jax.jit, called again"
    rebuilt = timing.time_call(lambda v: jax.jit(fn)(v), x, repeats=repeats)
    rebuilt.name = "a new jax.jit at every call"
    return reused, rebuilt


HUGE = 3e38  # near the largest float32 (3.4e38): its reciprocal is below float32's normal range


def divide_by_huge(x: jax.Array) -> jax.Array:
    """``x / 3e38``: exact op by op for ``x = 3e38``, but compiled, XLA may rewrite it and lose the
    answer.

    Taught in Why compile?, Two ways to run the same function.
    """
    return x / HUGE


# --- explorer


def size_sweep(rows: Sequence[int], columns: int = 256, repeats: int = 5) -> list[dict]:
    """``standardize_softplus`` on ``rows`` x ``columns`` arrays: op by op, compiled, compile time, break-even calls.

    Taught in Why compile?, Explore it.
    """
    if (
        isinstance(rows, (str, bytes))
        or not isinstance(rows, Sequence)
        or not rows
        or not all(
            isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in rows
        )
    ):
        raise ValueError(
            f"rows must be a non-empty list of positive array heights, e.g. [16, 256, 4096]; got {rows!r}."
        )
    table = []
    for n in rows:
        x = jax.random.normal(jax.random.key(n), (n, columns))
        eager = timing.time_call(standardize_softplus, x, repeats=repeats)
        first = timing.stages(standardize_softplus, x)
        compiled = timing.time_call(
            first.compiled, x, repeats=repeats
        )  # the executable just built: no second compile
        compile_s = first.trace + first.lower + first.compile
        calls = break_even_calls(compile_s, eager.median, compiled.median)
        table.append(
            {
                "rows": n,
                "elements": n * columns,
                "op by op (ms)": 1e3 * eager.median,
                "compiled (ms)": 1e3 * compiled.median,
                "compile (ms)": 1e3 * compile_s,
                "calls to pay off": math.ceil(calls)
                if math.isfinite(calls)
                else "never",
            }
        )
    return table

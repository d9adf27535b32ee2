"""The examples of the first chapter: one function run op by op and compiled, and when jit pays off."""

import math

import jax
import jax.numpy as jnp


def standardize_softplus(x: jax.Array) -> jax.Array:
    """Softplus of each row standardized to mean 0 and variance 1: nine elementwise ops and two reductions.

    Op by op, every line is its own kernel that reads and writes the whole array; compiled, XLA fuses
    them into a few passes over memory.

    Taught in "Why compile?", "Two ways to run the same function".
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
    """After how many calls compiling pays off: compile time over the time saved per call (inf if none).

    Taught in "Why compile?", "Op by op against compiled, measured".
    """
    for name, value in (("compile_s", compile_s), ("eager_s", eager_s), ("jit_s", jit_s)):
        if not isinstance(value, (int, float)) or value < 0 or math.isnan(value):
            raise ValueError(f"{name} must be a non-negative number of seconds, got {value!r}.")
    saved = eager_s - jit_s
    return math.inf if saved <= 0 else compile_s / saved

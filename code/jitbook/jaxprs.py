"""The examples of the chapter on jaxprs: small functions whose jaxprs show one thing each.

The tools that take jaxprs apart (``stats``, ``anatomy``, ``walk``) are in ``jitbook.programs``.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

SEEN: list = []  # what log2_with_side_effects appended; trace-time side effects land here


def log2_with_side_effects(x: jax.Array) -> jax.Array:
    """log2 of x that also prints and appends to a global list: neither shows up in the jaxpr."""
    SEEN.append(x)
    print("running the Python body with", x)
    return jnp.log(x) / jnp.log(2.0)


def by_rank(x: jax.Array) -> jax.Array:
    """Row sums of a matrix, cosine of anything else: a Python branch on a shape, decided while tracing."""
    if x.ndim == 2:
        return jnp.sum(x, axis=1)
    return jnp.cos(x)


def step(x: jax.Array) -> jax.Array:
    """One iteration of a toy update: three primitives."""
    return jnp.sin(x) * 0.5 + x


def step_f32_constant(x: jax.Array) -> jax.Array:
    """``step`` with its 0.5 as a float32 array constant: strongly typed, so it promotes a float16 ``x``."""
    return jnp.sin(x) * np.float32(0.5) + x


def scaled_by(k: float) -> Callable[[jax.Array], jax.Array]:
    """A function that captures the Python number ``k``: it enters the jaxpr as a literal, not a constant."""

    def scale(x: jax.Array) -> jax.Array:
        return x * k

    return scale


def python_loop(x: jax.Array, steps: int) -> jax.Array:
    """``steps`` iterations in a Python loop: tracing unrolls it, one copy of ``step`` per iteration."""
    for _ in range(steps):
        x = step(x)
    return x


def fori_loop(x: jax.Array, steps: int) -> jax.Array:
    """The same iterations in ``lax.fori_loop``: ``step`` is traced once, into the loop's body."""
    return lax.fori_loop(0, steps, lambda i, x: step(x), x)


def with_closure(table: jax.Array) -> Callable[[jax.Array], jax.Array]:
    """A function that reads ``table`` from its enclosing scope: the array becomes a constant of the jaxpr."""

    def project(x: jax.Array) -> jax.Array:
        return jnp.tanh(x @ table)

    return project


def with_argument(x: jax.Array, table: jax.Array) -> jax.Array:
    """The same computation with ``table`` passed in: an input of the jaxpr, not a constant."""
    return jnp.tanh(x @ table)

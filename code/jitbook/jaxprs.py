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


# --- explorer


def variants(size: int) -> dict[str, tuple[Callable, tuple, tuple[int, ...]]]:
    """Functions of this chapter with arguments to trace them: name -> (function, arguments, static_argnums)."""
    x = jnp.linspace(0.0, 1.0, size, dtype=jnp.float32)
    table = jax.random.normal(jax.random.key(3), (size, size))
    return {
        "step, float32": (step, (x,), ()),
        "step, float16": (step, (x.astype(jnp.float16),), ()),
        "step_f32_constant, float16": (step_f32_constant, (x.astype(jnp.float16),), ()),
        "python_loop, 10 steps": (python_loop, (x, 10), (1,)),
        "fori_loop, 10 steps": (fori_loop, (x, 10), (1,)),
        "with_closure": (with_closure(table), (x[None, :],), ()),
        "with_argument": (with_argument, (x[None, :], table), ()),
    }


def clip_lines(text: str, width: int = 160) -> str:
    """``text`` with each line cut to ``width`` characters, saying how many were cut (a constant can be 1 MB)."""
    return "\n".join(line if len(line) <= width else f"{line[:width]}... ({len(line) - width:,} more characters)"
                     for line in text.splitlines())


def variant_explorer(size: int) -> tuple[list[dict], list[dict]]:
    """Each of ``variants(size)`` walked through trace, lower, compile: its sizes, XLA's costs, and the texts.

    Defined for the explorer of chapter "jaxprs and the road to XLA", section "Explore it".
    """
    from .programs import COSTS, count_equations, walk

    rows, panels = [], []
    for name, (fn, args, static) in variants(size).items():
        road = walk(fn, *args, static_argnums=static, excerpt_lines=14)
        rows.append({"variant": name, "equations": count_equations(road.stages.jaxpr),
                     "StableHLO characters": len(road.stablehlo), **{k: road.cost[k] for k in COSTS}})
        costs = "\n".join(f"{k}: {road.cost[k]:g}" for k in COSTS)
        panels.append({"jaxpr": road.jaxpr_text, "StableHLO (excerpt)": clip_lines(road.excerpt()), "cost_analysis": costs})
    return rows, panels

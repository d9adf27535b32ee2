"""Jitting only part of a function: the branch on a value stays in Python, the
arithmetic under it is jitted (the jit blog's third way out of a value branch).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from jitbook.chapters import tracing
from jitbook.errors import error_line, raised


@jax.jit
def sin_part(x: jax.Array) -> jax.Array:
    """The arithmetic of the ``t > 0`` branch, jitted on its own."""
    return jnp.sin(x)


@jax.jit
def cos_part(x: jax.Array) -> jax.Array:
    """The arithmetic of the other branch, jitted on its own."""
    return jnp.cos(x)


def sin_or_cos_partly(x: jax.Array, t) -> jax.Array:
    """``tracing.sin_or_cos`` with only the parts under the ``if`` jitted: the branch
    runs in Python, on a real ``t``.

    Taught in Tracing through control flow and loops, Jitting only part of a function.
    """
    if t > 0:
        return sin_part(x)
    return cos_part(x)


def programs_held() -> int:
    """Programs the two jitted parts hold in their caches: one per part and shape."""
    return sin_part._cache_size() + cos_part._cache_size()


def part_rows(x: jax.Array, ts: Sequence[float]) -> list[dict]:
    """``sin_or_cos_partly`` for each ``t``, against the un-jitted ``sin_or_cos``; then
    the whole function under ``jax.jit`` and ``jax.vmap`` over ``t``, where ``t`` is a
    tracer again."""
    if not ts:
        raise ValueError("part_rows needs at least one value of t, e.g. (1.0, -1.0).")
    rows = [
        {
            "call": f"sin_or_cos_partly(x, {t})",
            "outcome": "same as un-jitted sin_or_cos: "
            + str(
                bool(jnp.allclose(sin_or_cos_partly(x, t), tracing.sin_or_cos(x, t)))
            ),
            "programs held by the parts": programs_held(),
        }
        for t in ts
    ]
    whole = {
        "jax.jit(sin_or_cos_partly)": lambda: jax.jit(sin_or_cos_partly)(x, ts[0]),
        "jax.vmap over t": lambda: jax.vmap(sin_or_cos_partly, in_axes=(None, 0))(
            x, jnp.asarray(ts)
        ),
    }
    for label, call in whole.items():
        rows.append(
            {
                "call": label,
                "outcome": error_line(raised(call)),
                "programs held by the parts": programs_held(),
            }
        )
    return rows

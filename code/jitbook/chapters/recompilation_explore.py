"""Static arguments and compiling again, Explore it: one jitted ``power`` called with
one part of its cache key changed at a time.

Taught in Static arguments and compiling again, Explore it.
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from jitbook.cache import capture_jax_logs, count_compiles, fresh_jit, messages_about
from jitbook.chapters.recompilation import power


def call_sequence(x: jax.Array | None = None) -> list[tuple[str, object, object, dict]]:
    """Calls of ``power(x, n)`` (``n`` static) in turn: (what changed, x, n, config
    options set for the call)."""
    x = jnp.linspace(0.5, 1.5, 8) if x is None else x
    return [
        ("first call: f32[8], n=2", x, 2, {}),
        ("new values, same shape", x + 1.0, 2, {}),
        ("new shape: f32[9]", jnp.ones(9), 2, {}),
        ("new dtype: i32[8]", jnp.arange(8), 2, {}),
        ("a Python float: weak f32[]", 1.5, 2, {}),
        ("jnp.float32: strong f32[]", jnp.float32(1.5), 2, {}),
        ("new static value: n=3", x, 3, {}),
        ("static n=2.0, equal to 2", x, 2.0, {}),
        ("config: matmul precision", x, 2, {"jax_default_matmul_precision": "highest"}),
        ("back to the first call", x, 2, {}),
    ]


def _call(jitted, x, n, config: dict) -> tuple[int, list[str]]:
    """One call of ``jitted(x, n)`` with ``config`` set for it (and set back): its
    compiles of ``power`` and the messages JAX logged."""
    old = {k: jax.config.values[k] for k in config}
    try:
        with (
            capture_jax_logs(log_compiles=False) as messages,
            count_compiles() as log,
        ):
            for k, v in config.items():
                jax.config.update(k, v)
            jitted(x, n)
    finally:
        for k, v in old.items():
            jax.config.update(k, v)
    return log.count_for("power"), messages


def call_story(
    calls: Sequence[tuple[str, object, object, dict]] | None = None,
) -> tuple[list[dict], list[dict]]:
    """One fresh ``jax.jit(power, static_argnums=1)`` called on each of ``calls``:
    compiled or not; and JAX's reason for that change alone.

    JAX explains a miss against the closest key it has seen, which after a few calls
    can be another call's key and name a difference that is not this call's change
    (``closest_key_blame``); so each panel's explanation comes from a second fresh
    ``jax.jit(power)`` that has seen only the first call.

    Taught in Static arguments and compiling again, Explore it.
    """
    calls = call_sequence() if calls is None else calls
    jitted = fresh_jit(power, static_argnums=1)
    rows, panels = [], []
    for i, (label, x, n, config) in enumerate(calls):
        compiled, messages = _call(jitted, x, n, config)
        if i:  # the change alone: a fresh wrapper warmed by the first call only
            alone = fresh_jit(power, static_argnums=1)
            _call(alone, *calls[0][1:])
            _, messages = _call(alone, x, n, config)
        aval = jax.typeof(x)
        rows.append(
            {
                "call": i + 1,
                "what changed": label,
                "jit sees": f"{aval.str_short(short_dtypes=True)}, n={n!r}",
                "weak type": bool(aval.weak_type),
                "compiled": compiled,
                "compiles so far": compiled
                + (rows[-1]["compiles so far"] if rows else 0),
            }
        )
        why = messages_about(messages, "power", max_lines=12)
        panels.append(
            {
                "JAX's explanation of this change alone": why
                or (
                    "no message: the call found its program in jit's cache"
                    if not compiled
                    else "no message"
                )
            }
        )
    return rows, panels


def closest_key_blame(x: jax.Array | None = None) -> str:
    """JAX's explanation of ``power(x, 3)`` after ``power(x, 2)`` and
    ``power(x9, 2)`` (``x9`` one element longer): it compares with the closest key
    seen, ``x9``'s, and names ``x``'s shape, though the change was ``n``."""
    x = jnp.ones(8) if x is None else x
    jitted = fresh_jit(power, static_argnums=1)
    jitted(x, 2)
    jitted(jnp.ones(x.shape[0] + 1, x.dtype), 2)
    _, messages = _call(jitted, x, 3, {})
    return messages_about(messages, "power", max_lines=12)

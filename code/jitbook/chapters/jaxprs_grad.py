"""`jax.grad` and jaxprs: the gradient of a function is another function, whose jaxpr
`make_jaxpr` shows and `jax.jit` compiles like any other.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def wiggle(x: jax.Array) -> jax.Array:
    """``sin(x) * x``: two equations, and a derivative that needs ``cos``."""
    return jnp.sin(x) * x


def primitive_names(closed) -> list[str]:
    """The primitives of a closed jaxpr's top-level equations, in order."""
    return [eqn.primitive.name for eqn in closed.jaxpr.eqns]


def grad_jaxpr_facts(x: float = 1.0) -> dict:
    """The equations of ``wiggle`` and of ``jax.grad(wiggle)``, the gradient's jaxpr
    evaluated against ``jax.grad`` and the derivative by hand, and the program that
    ``jax.jit(jax.grad(wiggle))`` traces.

    Taught in jaxprs and the road to XLA, The jaxpr of a gradient.
    """
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        raise TypeError(
            f"grad_jaxpr_facts takes a Python number, got {type(x).__name__}."
        )
    forward = jax.make_jaxpr(wiggle)(x)
    gradient = jax.make_jaxpr(jax.grad(wiggle))(x)
    (jitted_eqn,) = jax.make_jaxpr(jax.jit(jax.grad(wiggle)))(x).jaxpr.eqns
    inner = jitted_eqn.params["jaxpr"]
    (evaluated,) = jax.core.eval_jaxpr(gradient.jaxpr, gradient.consts, x)
    return {
        "wiggle": primitive_names(forward),
        "jax.grad(wiggle)": primitive_names(gradient),
        "inside jax.jit(jax.grad(wiggle))": primitive_names(inner),
        "the gradient's jaxpr, evaluated": float(evaluated),
        "jax.grad(wiggle)(x)": float(jax.grad(wiggle)(x)),
        "cos(x) x + sin(x), by hand": float(np.cos(x) * x + np.sin(x)),
    }

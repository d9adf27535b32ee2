"""RAdam, the tutorial's optimizer: written out for one array at a time, and why eager
and jit round it apart.

optax's `scale_by_radam` multiplies the step by a rectifier r_t computed from rho_inf -
2 t b2^t / (1 - b2^t), two nearly equal numbers: float32 keeps few digits of the
difference. `b2 ** count` is `jnp.power`, which takes a concrete integer exponent
(eager: the count is a concrete array) to `lax.integer_pow`, repeated multiplication,
and a traced one (under jit) to `lax.pow`; the two round b2^t apart, and the
cancellation magnifies that. Given the same b2^t, eager and jit compute the same rho.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jitbook.chapters.pln.model import Params


class RAdamState(NamedTuple):
    """Step count and RAdam's two moment estimates, one per parameter array."""

    count: jax.Array
    mu: Params
    nu: Params


def radam_init(params: Params) -> RAdamState:
    """Step 0, both moments zero."""
    zeros = Params(*(jnp.zeros_like(x) for x in params))
    return RAdamState(jnp.zeros([], jnp.int32), zeros, zeros)


def radam_scalars(
    count: jax.Array, b1: float = 0.9, b2: float = 0.999, threshold: float = 5.0
):
    """The per-step scalars of RAdam (as optax.scale_by_radam computes them): bias
    corrections and rectifier."""
    ro_inf = 2.0 / (1.0 - b2) - 1.0
    b2t = b2**count
    ro = ro_inf - 2 * count * b2t / (1 - b2t)
    r = jnp.sqrt(
        (ro - 4.0) * (ro - 2.0) * ro_inf / ((ro_inf - 4.0) * (ro_inf - 2.0) * ro)
    )
    return 1 - b1**count, 1 - b2t, r, ro >= threshold


def radam_step(
    x, g, mu, nu, scalars, lr, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
):
    """One RAdam step on one array, scaled by -lr and clipped to 0.1: a single
    elementwise pass.

    Taught in The PLN model, made fast, A faster level.
    """
    c1, c2, r, rectify = scalars
    mu = b1 * mu + (1 - b1) * g
    nu = b2 * nu + (1 - b2) * g * g
    mu_hat = mu / c1.astype(mu.dtype)
    step = jnp.where(
        rectify, r * mu_hat / (jnp.sqrt(nu / c2.astype(nu.dtype)) + eps), mu_hat
    )
    return x + jnp.clip(-lr * step, -0.1, 0.1), mu, nu


def unit_steps(n_steps: int = 8) -> jax.Array:
    """optax RAdam's first updates for a constant unit gradient; jit it or not to
    compare float32 rounding.

    Taught in The PLN model, level by level, Same algorithm, same numbers.
    """
    radam, g = optax.scale_by_radam(), jnp.ones(1)
    state, updates = radam.init(g), []
    for _ in range(n_steps):
        u, state = radam.update(g, state)
        updates.append(u[0])
    return jnp.stack(updates)


def power_primitive(traced: bool, step: int = 6, b2: float = 0.999) -> str:
    """The primitive that RAdam's `b2 ** count` records: `integer_pow` when the count
    is a concrete array (eager), `pow` when it is traced (under jit)."""
    count = jnp.asarray(step, jnp.int32)
    if traced:
        jaxpr = jax.make_jaxpr(lambda c: b2**c)(count)
    else:
        jaxpr = jax.make_jaxpr(lambda: b2**count)()
    (eqn,) = jaxpr.eqns[-1:]
    return eqn.primitive.name


def rho(count, b2t, b2: float = 0.999):
    """RAdam's rho_t from the step count and b2^t, as optax computes it."""
    rho_inf = 2.0 / (1.0 - b2) - 1.0
    return rho_inf - 2 * count * b2t / (1 - b2t)


def rounding_apart(step: int = 6, b2: float = 0.999) -> list[dict]:
    """b2^t at `step`, eager and jitted, and rho from each, eager and jitted: the two
    b2^t differ, while each b2^t gives one rho either way.

    Taught in The PLN model, level by level, Same algorithm, same numbers.
    """
    count = jnp.asarray(step, jnp.int32)
    b2ts = {
        f"eager ({power_primitive(False, step, b2)})": b2**count,
        f"jit ({power_primitive(True, step, b2)})": jax.jit(lambda c: b2**c)(count),
    }
    exact = b2**step
    return [
        {
            "b2^t computed": name,
            "b2^t": float(b2t),
            "error against float64": float(b2t) - exact,
            "rho, eager": float(rho(count, b2t, b2)),
            "rho, jit": float(jax.jit(rho)(count, b2t)),
        }
        for name, b2t in b2ts.items()
    ]


def rectifier_float64(step: int, b2: float = 0.999) -> float:
    """RAdam's rectifier r_t in float64, the yardstick for the float32 values."""
    rho_inf = 2 / (1 - b2) - 1
    rho = rho_inf - 2 * step * b2**step / (1 - b2**step)
    return float(
        np.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
    )

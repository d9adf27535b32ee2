"""The optimized level: the same iteration as `levels.py`, with less work per iteration.

What changes (the chapter measures each): hand-written gradients, so the exponential is computed once
and no backward pass re-reads the big arrays; the loss's constant terms computed once, before the
loop; the trace term and log det taken from the small p x p matrices the closed-form step already
has (no extra n x p x p product); Omega from a Cholesky factor instead of a general inverse; the
RAdam step written out for one array at a time, with the gradients materialised once (an
optimization barrier) so XLA does not recompute them inside every fused update.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .data import PLNData
from .model import Params, init_params, log_stirling


class FastState(NamedTuple):
    """The carry: parameters, optimizer state, and the p x p quantities of the closed-form step."""

    params: Params
    opt_state: RAdamState
    gram: jax.Array  # M^T M + diag(sum_i S_i^2) at the current M, S (= n Sigma)
    Omega: jax.Array  # the precision the next gradient step uses
    logdet_Omega: jax.Array


def gram(M: jax.Array, S: jax.Array) -> jax.Array:
    """n Sigma: the p x p matrix the closed-form update needs (one n x p x p product)."""
    return M.T @ M + jnp.diag(jnp.sum(S * S, axis=0))


def precision(gram_: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    """Omega = (gram / n)^-1 and log det Omega, both from one Cholesky factor L (stable, no overflow)."""
    L = jnp.linalg.cholesky(gram_ / n)
    Omega = jax.scipy.linalg.cho_solve((L, True), jnp.eye(L.shape[0], dtype=L.dtype))
    return Omega, -2.0 * jnp.sum(jnp.log(jnp.diag(L)))


def loss_and_grads(params: Params, data: PLNData, state: FastState, const: jax.Array, XtY: jax.Array):
    """Minus the ELBO and its gradient in one pass over the n x p arrays."""
    B, M, S = params
    Y, O, X = data
    n, p = Y.shape
    S2 = S * S
    A = jnp.exp(O + M + X @ B + S2 / 2)
    trace = jnp.sum(state.gram * state.Omega)  # trace((M^T M + diag(sum S^2)) Omega), both symmetric
    big_terms = jnp.ones(n) @ (Y * M - A + jnp.log(S2) / 2)  # a matrix-vector product, not a reduce: see the profile
    elbo = n / 2 * state.logdet_Omega + jnp.sum(big_terms) + jnp.sum(XtY * B) - trace / 2 + const
    grads = Params(B=X.T @ A - XtY, M=A - Y + M @ state.Omega, S=S * (A + jnp.diag(state.Omega)) - 1.0 / S)
    return -elbo, jax.lax.optimization_barrier(grads)


class RAdamState(NamedTuple):
    """Step count and RAdam's two moment estimates, one per parameter array."""

    count: jax.Array
    mu: Params
    nu: Params


def radam_init(params: Params) -> RAdamState:
    zeros = Params(*(jnp.zeros_like(x) for x in params))
    return RAdamState(jnp.zeros([], jnp.int32), zeros, zeros)


def radam_scalars(count: jax.Array, b1: float = 0.9, b2: float = 0.999, threshold: float = 5.0):
    """The per-step scalars of RAdam (as optax.scale_by_radam computes them): bias corrections and rectifier."""
    ro_inf = 2.0 / (1.0 - b2) - 1.0
    b2t = b2**count
    ro = ro_inf - 2 * count * b2t / (1 - b2t)
    r = jnp.sqrt((ro - 4.0) * (ro - 2.0) * ro_inf / ((ro_inf - 4.0) * (ro_inf - 2.0) * ro))
    return 1 - b1**count, 1 - b2t, r, ro >= threshold


def radam_step(x, g, mu, nu, scalars, lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
    """One RAdam step on one array, scaled by -lr and clipped to 0.1: a single elementwise pass."""
    c1, c2, r, rectify = scalars
    mu = b1 * mu + (1 - b1) * g
    nu = b2 * nu + (1 - b2) * g * g
    mu_hat = mu / c1.astype(mu.dtype)
    step = jnp.where(rectify, r * mu_hat / (jnp.sqrt(nu / c2.astype(nu.dtype)) + eps), mu_hat)
    return x + jnp.clip(-lr * step, -0.1, 0.1), mu, nu


@partial(jax.jit, static_argnames=("n_iter", "lr"))
def _fit_fast(data: PLNData, n_iter: int, lr: float):
    Y, O, X = data
    n, p = Y.shape
    const = jnp.sum(Y * O) + 0.5 * n * p - jnp.sum(log_stirling(Y))  # does not change: computed once
    XtY = X.T @ Y
    params = init_params(data)
    eye = jnp.eye(p)
    state = FastState(params, radam_init(params), gram(params.M, params.S), eye, jnp.zeros(()))

    def body(state: FastState, _) -> tuple[FastState, jax.Array]:
        loss, grads = loss_and_grads(state.params, data, state, const, XtY)
        count = state.opt_state.count + 1
        scalars = radam_scalars(count)
        steps = [radam_step(*a, scalars, lr) for a in zip(state.params, grads, *state.opt_state[1:], strict=False)]
        params, mu, nu = (Params(*parts) for parts in zip(*steps, strict=False))
        opt_state = RAdamState(count, mu, nu)
        g = gram(params.M, params.S)
        Omega, logdet = precision(g, n)
        return FastState(params, opt_state, g, Omega, logdet), loss

    state, losses = jax.lax.scan(body, state, length=n_iter)
    return losses, state

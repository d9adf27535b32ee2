"""The PLN model as pure functions: its ELBO, the closed-form covariance, the optimizer.

Counts Y (n x p) are Poisson with log-rate O + X B + Z, and Z ~ N(0, Sigma). The
variational posterior of row i of Z is N(M_i, diag(S_i^2)); we maximise the ELBO over
B, M, S and update Sigma (and its inverse Omega) in closed form.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax


class Params(NamedTuple):
    """What the optimizer moves: coefficients B, variational means M and std devs S."""

    B: jax.Array
    M: jax.Array
    S: jax.Array


def init_params(data) -> Params:
    """Start where the 2023 tutorial starts: B = 0, M = 0, S = 1."""
    Y, _, X = data
    n, p = Y.shape
    return Params(jnp.zeros((X.shape[1], p)), jnp.zeros((n, p)), jnp.ones((n, p)))


def log_stirling(k: jax.Array) -> jax.Array:
    """Stirling's log(k!), 0! = 1! as in pyPLNmodels and the seed: off by a constant."""
    k1 = k + (k == 0)
    return 0.5 * jnp.log(2 * jnp.pi * k1) + k1 * (jnp.log(k1) - 1.0)


def neg_elbo(params: Params, data, Omega: jax.Array) -> jax.Array:
    """Minus the ELBO at (B, M, S) for a fixed precision matrix Omega: the loss.

    Taught in A worked example: the PLN model, level by level,
    The model.
    """
    B, M, S = params
    Y, O, X = data
    n, p = Y.shape
    S2 = S * S
    Z = O + M + X @ B
    A = jnp.exp(Z + S2 / 2)
    elbo = (
        n / 2 * jnp.linalg.slogdet(Omega)[1]
    )  # not log(det(Omega)): det overflows float32
    elbo += jnp.sum(Y * Z - A + 0.5 * jnp.log(S2))
    elbo -= 0.5 * jnp.trace((M.T @ M + jnp.diag(jnp.sum(S2, axis=0))) @ Omega)
    elbo += 0.5 * n * p - jnp.sum(log_stirling(Y))
    return -elbo


def closed_form_sigma(M: jax.Array, S: jax.Array) -> jax.Array:
    """The Sigma that maximises the ELBO at M, S: (M^T M + diag(sum_i S_i^2)) / n.

    Taught in A worked example: the PLN model, level by level,
    The model.
    """
    return (M.T @ M + jnp.diag(jnp.sum(S * S, axis=0))) / M.shape[0]


def neg_elbo_grads(params: Params, data, Omega: jax.Array) -> Params:
    """The gradient of `neg_elbo` by hand (the tests compare it with jax.grad).

    Taught in A worked example: the PLN model, level by level,
    The model.
    """
    B, M, S = params
    Y, O, X = data
    A = jnp.exp(O + M + X @ B + S * S / 2)
    return Params(
        B=-X.T @ (Y - A),
        M=-(Y - A - M @ Omega),
        S=-(1.0 / S - S * (A + jnp.diag(Omega))),
    )


def check_lr(lr) -> float:
    """A positive, finite learning rate as a float, or a clear error: a negative or NaN
    step would make the fit diverge without a word."""
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real):
        raise TypeError(
            f"lr must be a number, a learning rate such as 1.0 or 0.1, got {lr!r} "
            f"({type(lr).__name__})."
        )
    if not math.isfinite(lr) or lr <= 0:
        raise ValueError(
            f"lr must be a positive, finite learning rate such as 1.0 or 0.1, got "
            f"{lr!r}; with a negative, zero or NaN step the fit never converges."
        )
    return float(lr)


def make_optimizer(lr: float = 1.0) -> optax.GradientTransformation:
    """RAdam, a step of size `lr`, each step clipped to 0.1: the seed's recipe, lr used.

    Taught in A worked example: the PLN model, level by level,
    The model.
    """
    return optax.chain(optax.scale_by_radam(), optax.scale(-lr), optax.clip(0.1))


def neg_elbo_numpy(params: Params, data, Omega) -> float:
    """`neg_elbo` in float64 NumPy: the yardstick for fits whose float32 losses tie."""
    B, M, S = (np.asarray(x, np.float64) for x in params)
    Y, O, X = (np.asarray(x, np.float64) for x in data)
    n, p = Y.shape
    S2 = S * S
    Z = O + M + X @ B
    k = Y + (Y == 0)
    elbo = n / 2 * np.linalg.slogdet(np.asarray(Omega, np.float64))[1]
    elbo += np.sum(Y * Z - np.exp(Z + S2 / 2) + 0.5 * np.log(S2))
    elbo -= 0.5 * np.trace(
        (M.T @ M + np.diag(S2.sum(axis=0))) @ np.asarray(Omega, np.float64)
    )
    elbo += 0.5 * n * p - np.sum(0.5 * np.log(2 * np.pi * k) + k * (np.log(k) - 1.0))
    return float(-elbo)

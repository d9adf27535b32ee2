"""The 2023 tutorial's mistakes, kept small and runnable so the chapter can show what each one does.

Nothing here is used by the fitted levels; `model.py` and `levels.py` hold the corrected code.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import optax
from jax.tree_util import register_pytree_node_class

from .model import (
    Params,
    closed_form_sigma,
    init_params,
    log_stirling,
    make_optimizer,
    neg_elbo,
)


def seed_neg_elbo(params: Params, data, Omega: jax.Array) -> jax.Array:
    """The seed's loss: log(det(Omega)), and a trace whose parentheses are in the wrong place.

    Taught in The PLN model, level by level, Bugs in the 2023 code.
    """
    B, M, S = params
    Y, O, X = data
    n, p = Y.shape
    S2 = S * S
    Z = O + M + X @ B
    A = jnp.exp(Z + S2 / 2)
    elbo = (
        n / 2 * jnp.log(jnp.linalg.det(Omega))
    )  # det overflows float32 once Omega grows
    elbo += jnp.sum(Y * Z - A + 0.5 * jnp.log(S2))
    elbo -= 0.5 * jnp.trace(
        M.T @ M + jnp.diag(jnp.sum(S2, axis=0)) @ Omega
    )  # @ binds before +
    elbo += 0.5 * n * p - jnp.sum(log_stirling(Y))
    return -elbo


def trace_bug_neg_elbo(params: Params, data, Omega: jax.Array) -> jax.Array:
    """The corrected loss with only the trace bug left in, to see what that bug alone costs."""
    M, S = params.M, params.S
    right = jnp.trace((M.T @ M + jnp.diag(jnp.sum(S * S, axis=0))) @ Omega)
    wrong = jnp.trace(M.T @ M + jnp.diag(jnp.sum(S * S, axis=0)) @ Omega)
    return neg_elbo(params, data, Omega) + 0.5 * (wrong - right)


def seed_optimizer(lr: float) -> optax.GradientTransformation:
    """The seed's optimizer: `lr` is accepted and never used, so the step is RAdam's own, clipped to 0.1.

    Taught in The PLN model, level by level, Bugs in the 2023 code.
    """
    return optax.chain(optax.scale_by_radam(), optax.scale(-1.0), optax.clip(0.1))


@partial(jax.jit, static_argnames=("n_iter", "loss_fn", "make_opt"))
def fit_with(
    data, n_iter: int, loss_fn=neg_elbo, make_opt=make_optimizer, lr: float = 1.0
):
    """The "scan" level with the loss and optimizer swapped for the seed's; returns losses, params, Omega."""
    opt = make_opt(lr)
    params = init_params(data)
    eye = jnp.eye(data[0].shape[1])

    def body(carry, _):
        params, Omega, opt_state = carry
        loss, grads = jax.value_and_grad(loss_fn)(params, data, Omega)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return (
            params,
            jnp.linalg.inv(closed_form_sigma(params.M, params.S)),
            opt_state,
        ), loss

    (params, Omega, _), losses = jax.lax.scan(
        body, (params, eye, opt.init(params)), length=n_iter
    )
    return losses, params, Omega


@register_pytree_node_class
class SeedPLN:
    """The seed's level-4 class, trimmed to its bugs: a global write, arrays as aux data, fields lost.

    Taught in The PLN model, level by level, Bugs in the 2023 code.
    """

    def __init__(self, Y, O, X):
        self.Y, self.O, self.X = Y, O, X
        self.n, self.p = Y.shape
        self.B, self.M, self.S = init_params((Y, O, X))
        self.Sigma = self.Omega = jnp.eye(self.p)

    def update_Sigma(self):
        pln.Sigma = closed_form_sigma(self.M, self.S)  # noqa: F821  writes to a global named pln, not self

    def tree_flatten(self):
        children = (self.B, self.M, self.S, self.Sigma, self.Omega)
        aux_data = {
            "Y": self.Y,
            "O": self.O,
            "X": self.X,
            "n": self.n,
            "p": self.p,
        }  # arrays as static data
        return children, aux_data

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        B, M, S, Sigma, Omega = children
        obj = cls(aux_data["Y"], aux_data["O"], aux_data["X"])
        obj.B, obj.M, obj.S = (
            B,
            M,
            S,
        )  # Sigma and Omega are dropped: back to the identity
        return obj

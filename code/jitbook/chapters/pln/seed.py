"""The 2023 tutorial's PLN code, rewritten small: the two bugs in its loss, its unused
learning rate, its un-jitted scan and its level-4 class, kept to show what each does.

The fitted levels use none of it; `model.py` and `levels.py` hold the corrected code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from jax.tree_util import register_pytree_node_class

from jitbook.chapters.pln.data import PLNData
from jitbook.chapters.pln.model import (
    Params,
    closed_form_sigma,
    init_params,
    log_stirling,
    make_optimizer,
    neg_elbo,
)

Loss = Callable[[Params, PLNData, jax.Array], jax.Array]


def seed_neg_elbo(params: Params, data: PLNData, Omega: jax.Array) -> jax.Array:
    """Minus the tutorial's ELBO: its log-determinant and its trace term are both wrong.

    Taught in A worked example: the PLN model, level by level,
    Bugs in the 2023 code.
    """
    B, M, S = params
    Y, O, X = data
    n, p = Y.shape
    S2 = S * S
    Z = O + M + X @ B
    log_det = jnp.log(jnp.linalg.det(Omega))  # det overflows float32 as Omega grows
    trace = jnp.trace(M.T @ M + jnp.diag(S2.sum(axis=0)) @ Omega)  # @ binds before +
    elbo = n / 2 * log_det + jnp.sum(Y * Z - jnp.exp(Z + S2 / 2) + jnp.log(S2) / 2)
    elbo = elbo - trace / 2 + n * p / 2 - jnp.sum(log_stirling(Y))
    return -elbo


def trace_bug_neg_elbo(params: Params, data: PLNData, Omega: jax.Array) -> jax.Array:
    """The corrected loss with only the trace bug left in: what that bug alone costs."""
    M, S = params.M, params.S
    diag = jnp.diag(jnp.sum(S * S, axis=0))
    right = jnp.trace((M.T @ M + diag) @ Omega)
    wrong = jnp.trace(M.T @ M + diag @ Omega)
    return neg_elbo(params, data, Omega) + (wrong - right) / 2


def identity_omega_neg_elbo(
    params: Params, data: PLNData, Omega: jax.Array
) -> jax.Array:
    """The tutorial's loss with Omega held at the identity, whatever it is given.

    Its level 4 fitted this model (see `fit_level4`).
    """
    return seed_neg_elbo(params, data, jnp.eye(Omega.shape[0], dtype=Omega.dtype))


def seed_optimizer(lr: float) -> optax.GradientTransformation:
    """The tutorial's optimizer: `lr` is accepted, never used; RAdam's step, clipped.

    Taught in A worked example: the PLN model, level by level,
    Bugs in the 2023 code.
    """
    return optax.chain(optax.scale_by_radam(), optax.scale(-1.0), optax.clip(0.1))


def scan_fit(
    data: PLNData,
    n_iter: int,
    loss_fn: Loss = neg_elbo,
    make_opt: Callable[[float], optax.GradientTransformation] = make_optimizer,
    lr: float = 1.0,
) -> tuple[jax.Array, Params, jax.Array]:
    """The whole fit as one `lax.scan`, not jitted, as the tutorial's levels 2 to 4 ran.

    The loop body is a new function at every call. Returns losses, parameters and Omega.
    Taught in A worked example: the PLN model, level by level,
    Bugs in the 2023 code.
    """
    opt = make_opt(lr)
    params = init_params(data)

    def body(carry, _):
        params, Omega, opt_state = carry
        loss, grads = jax.value_and_grad(loss_fn)(params, data, Omega)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        Omega = jnp.linalg.inv(closed_form_sigma(params.M, params.S))
        return (params, Omega, opt_state), loss

    start = (params, jnp.eye(data[0].shape[1]), opt.init(params))
    (params, Omega, _), losses = jax.lax.scan(body, start, length=n_iter)
    return losses, params, Omega


# `scan_fit` jitted once and for all: the loss, the optimizer and the length are static.
fit_with = jax.jit(scan_fit, static_argnames=("n_iter", "loss_fn", "make_opt"))


# The global the tutorial's methods write to: its notebook's name for the fitted object.
pln: SeedPLN | None = None


@register_pytree_node_class
class SeedPLN:
    """The tutorial's level-4 class: arrays as aux data, Sigma and Omega lost on
    unflatten, and methods that write to the global `pln` instead of `self`.

    Taught in A worked example: the PLN model, level by level,
    Bugs in the 2023 code.
    """

    def __init__(self, Y: jax.Array, O: jax.Array, X: jax.Array) -> None:
        self.Y, self.O, self.X = Y, O, X
        self.n, self.p = Y.shape
        self.B, self.M, self.S = init_params((Y, O, X))
        self.Sigma = self.Omega = jnp.eye(self.p)

    def params(self) -> Params:
        return Params(self.B, self.M, self.S)

    def set_params(self, params: Params) -> None:
        self.B, self.M, self.S = params

    def update_Sigma(self) -> None:
        pln.Sigma = closed_form_sigma(self.M, self.S)  # the global, not self

    def update_Omega(self) -> None:
        pln.Omega = jnp.linalg.inv(self.Sigma)  # the global, from self's Sigma

    def tree_flatten(self):
        children = (self.B, self.M, self.S, self.Sigma, self.Omega)
        aux_data = {"Y": self.Y, "O": self.O, "X": self.X}  # arrays as static data
        return children, aux_data

    @classmethod
    def tree_unflatten(cls, aux_data, children) -> SeedPLN:
        obj = cls(aux_data["Y"], aux_data["O"], aux_data["X"])  # Sigma = Omega = I
        obj.set_params(Params(*children[:3]))  # Sigma and Omega dropped
        return obj


def fit_level4(model: SeedPLN, n_iter: int) -> jax.Array:
    """The tutorial's level 4: an un-jitted scan whose carry is the class; the losses.

    Taught in A worked example: the PLN model, level by level,
    Bugs in the 2023 code.
    """
    opt = seed_optimizer(1.0)

    def body(carry, _):
        model, opt_state = carry
        data = PLNData(model.Y, model.O, model.X)
        loss, grads = jax.value_and_grad(seed_neg_elbo)(
            model.params(), data, model.Omega
        )
        updates, opt_state = opt.update(grads, opt_state)
        model.set_params(optax.apply_updates(model.params(), updates))
        model.update_Sigma()
        model.update_Omega()
        return (model, opt_state), loss

    start = (model, opt.init(model.params()))
    _, losses = jax.lax.scan(body, start, length=n_iter)
    return losses


class PlainPLN:
    """The tutorial's level-3 container: a plain class, unknown to JAX's pytrees."""

    def __init__(self, M: jax.Array, S: jax.Array) -> None:
        self.M, self.S = M, S

    def __repr__(self) -> str:  # JAX's error quotes it: no memory address on the page
        return f"PlainPLN(M: {self.M.shape}, S: {self.S.shape})"


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class DataclassPLN:
    """The same container as a dataclass, registered with JAX's own
    `register_dataclass`: its array fields are children, `n_iter` is static metadata.

    Taught in A worked example: the PLN model, level by level,
    Bugs in the 2023 code.
    """

    M: jax.Array
    S: jax.Array
    n_iter: int = dataclasses.field(default=1, metadata={"static": True})


def carry_through_scan(model, n_iter: int = 2):
    """`model` as the carry of a `lax.scan` that leaves it unchanged, as the tutorial's
    level 3 carried its class: the carry comes back, or JAX refuses its type."""
    return jax.lax.scan(lambda carry, _: (carry, None), model, length=n_iter)[0]

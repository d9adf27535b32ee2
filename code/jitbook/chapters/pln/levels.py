"""One algorithm, several ways to run it: from plain eager JAX to one compiled loop.

Every level runs the same iteration: a gradient step on (B, M, S) with the ELBO at the
current Omega, then the closed-form Sigma and Omega. They differ only in what JAX gets
to compile. Only the number of iterations is static; the learning rate is traced, so a
new one reuses the compiled program.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.tree_util import register_pytree_node_class

from jitbook.cache import CompileLog, count_compiles
from jitbook.chapters.pln.data import PLNData, check_n_iter, device_data
from jitbook.chapters.pln.fast import fast_program
from jitbook.chapters.pln.model import (
    Params,
    check_lr,
    closed_form_sigma,
    init_params,
    make_optimizer,
    neg_elbo,
)
from jitbook.chapters.pln.threads import blas_limited
from jitbook.fresh import run_cold


class FitResult(NamedTuple):
    """Per-iteration loss (minus the ELBO, before that iteration's step) and the final
    parameters."""

    losses: np.ndarray
    params: Params
    Sigma: jax.Array
    Omega: jax.Array


# Level "eager": no jit at all; every jnp call dispatches one small compiled kernel.
def fit_eager(data: PLNData, n_iter: int, lr: float = 1.0) -> FitResult:
    """Level "eager": a plain Python loop of plain JAX calls.

    Taught in The PLN model, level by level, Levels of compilation.
    """
    opt = make_optimizer(lr)
    params = init_params(data)
    Sigma = Omega = jnp.eye(data.Y.shape[1])
    opt_state = opt.init(params)
    losses = []
    for _ in range(n_iter):
        loss, grads = jax.value_and_grad(neg_elbo)(params, data, Omega)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        Sigma = closed_form_sigma(params.M, params.S)
        Omega = jnp.linalg.inv(Sigma)
        losses.append(loss)
    return FitResult(np.asarray(jnp.stack(losses)), params, Sigma, Omega)


# Level "jit_step": the pieces are jitted, the loop stays in Python. Every piece is
# built once, here: a jax.jit built inside the fit would be a new function at every fit.
_loss_and_grad = jax.jit(jax.value_and_grad(neg_elbo))
_closed_form_sigma = jax.jit(closed_form_sigma)
_inv = jax.jit(jnp.linalg.inv)
_apply_updates = jax.jit(optax.apply_updates)


@jax.jit
def _update(grads: Params, opt_state, params: Params, lr):
    """The optimizer step, ``lr`` an argument: one program for every learning rate."""
    return make_optimizer(lr).update(grads, opt_state, params)


def fit_jit_step(data: PLNData, n_iter: int, lr: float = 1.0) -> FitResult:
    """Level "jit_step": a Python loop over jitted pieces, one dispatch per piece per
    iteration.

    Taught in The PLN model, level by level, Levels of compilation.
    """
    params = init_params(data)
    Sigma = Omega = jnp.eye(data.Y.shape[1])
    opt_state = make_optimizer(lr).init(params)
    losses = []
    for _ in range(n_iter):
        loss, grads = _loss_and_grad(params, data, Omega)
        updates, opt_state = _update(grads, opt_state, params, lr)
        params = _apply_updates(params, updates)
        Sigma = _closed_form_sigma(params.M, params.S)
        Omega = _inv(Sigma)
        losses.append(loss)
    return FitResult(np.asarray(jnp.stack(losses)), params, Sigma, Omega)


# Level "scan": the whole loop is one lax.scan inside one jit; the carry is a plain
# tuple.
@partial(jax.jit, static_argnames="n_iter")
def scan_program(data: PLNData, n_iter: int, lr):
    """The compiled loop of level "scan": `n_iter` iterations in one `lax.scan`, the
    carry a plain tuple.

    Taught in The PLN model, level by level, Levels of compilation.
    """
    opt = make_optimizer(lr)
    params = init_params(data)
    eye = jnp.eye(data.Y.shape[1])

    def body(carry, _):
        params, Sigma, Omega, opt_state = carry
        loss, grads = jax.value_and_grad(neg_elbo)(params, data, Omega)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        Sigma = closed_form_sigma(params.M, params.S)
        return (params, Sigma, jnp.linalg.inv(Sigma), opt_state), loss

    (params, Sigma, Omega, _), losses = jax.lax.scan(
        body, (params, eye, eye, opt.init(params)), length=n_iter
    )
    return losses, params, Sigma, Omega


def fit_scan(data: PLNData, n_iter: int, lr: float = 1.0) -> FitResult:
    """Level "scan": one compiled program for all iterations."""
    losses, params, Sigma, Omega = scan_program(data, n_iter, lr)
    return FitResult(np.asarray(losses), params, Sigma, Omega)


# Level "namedtuple": the same scan, with the carry given names.
class FitState(NamedTuple):
    """Everything that changes from one iteration to the next."""

    params: Params
    Sigma: jax.Array
    Omega: jax.Array
    opt_state: optax.OptState


@partial(jax.jit, static_argnames="n_iter")
def namedtuple_program(data: PLNData, n_iter: int, lr) -> tuple[jax.Array, FitState]:
    """The compiled loop of level "namedtuple": the same scan, its carry a `FitState`.

    Taught in The PLN model, level by level, Levels of compilation.
    """
    opt = make_optimizer(lr)

    def body(state: FitState, _) -> tuple[FitState, jax.Array]:
        loss, grads = jax.value_and_grad(neg_elbo)(state.params, data, state.Omega)
        updates, opt_state = opt.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        Sigma = closed_form_sigma(params.M, params.S)
        return FitState(params, Sigma, jnp.linalg.inv(Sigma), opt_state), loss

    params = init_params(data)
    eye = jnp.eye(data.Y.shape[1])
    state, losses = jax.lax.scan(
        body, FitState(params, eye, eye, opt.init(params)), length=n_iter
    )
    return losses, state


def fit_namedtuple(data: PLNData, n_iter: int, lr: float = 1.0) -> FitResult:
    """Level "namedtuple": the state carried as a NamedTuple (a pytree JAX already
    knows)."""
    losses, state = namedtuple_program(data, n_iter, lr)
    return FitResult(np.asarray(losses), state.params, state.Sigma, state.Omega)


# Level "jit_iteration": the level most users write: one jitted iteration, called from a
# Python loop.
@jax.jit
def one_iteration(state: FitState, data: PLNData, lr) -> tuple[FitState, jax.Array]:
    """A whole iteration as one compiled program: the state goes in, the next state and
    the loss come out.

    Taught in The PLN model, level by level, Levels of compilation.
    """
    opt = make_optimizer(lr)
    loss, grads = jax.value_and_grad(neg_elbo)(state.params, data, state.Omega)
    updates, opt_state = opt.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    Sigma = closed_form_sigma(params.M, params.S)
    return FitState(params, Sigma, jnp.linalg.inv(Sigma), opt_state), loss


def fit_jit_iteration(data: PLNData, n_iter: int, lr: float = 1.0) -> FitResult:
    """Level "jit_iteration": a Python loop calling `one_iteration`, one dispatch per
    iteration.

    Taught in The PLN model, level by level, Levels of compilation.
    """
    return _iterate(one_iteration, data, n_iter, lr)


# The same iteration, its state donated: XLA may write the next state into the buffers
# of the one it was given, instead of allocating the whole state again at every call.
one_iteration_donated = jax.jit(one_iteration.__wrapped__, donate_argnums=0)


def fit_jit_iteration_donated(data: PLNData, n_iter: int, lr: float = 1.0) -> FitResult:
    """`fit_jit_iteration` with the state donated at every call.

    Taught in The PLN model, level by level, What each level costs.
    """
    return _iterate(one_iteration_donated, data, n_iter, lr)


def _iterate(step, data: PLNData, n_iter: int, lr: float) -> FitResult:
    params = init_params(data)
    p = data.Y.shape[1]
    # two eyes, not one twice: a donated state must not hold the same buffer twice
    state = FitState(params, jnp.eye(p), jnp.eye(p), make_optimizer(lr).init(params))
    losses = []
    for _ in range(n_iter):
        state, loss = step(state, data, lr)
        losses.append(loss)
    return FitResult(
        np.asarray(jnp.stack(losses)), state.params, state.Sigma, state.Omega
    )


# Level "pytree": a class with methods, registered as a pytree. Methods return new
# objects.
@register_pytree_node_class
class PLN:
    """Data, parameters and closed-form Sigma/Omega in one object; every array is a
    pytree child.

    Taught in The PLN model, level by level, Levels of compilation.
    """

    def __init__(
        self, data: PLNData, params: Params, Sigma: jax.Array, Omega: jax.Array
    ):
        self.data, self.params, self.Sigma, self.Omega = data, params, Sigma, Omega

    @classmethod
    def start(cls, data: PLNData) -> PLN:
        eye = jnp.eye(data.Y.shape[1])
        return cls(data, init_params(data), eye, eye)

    def loss(self, params: Params) -> jax.Array:
        return neg_elbo(params, self.data, self.Omega)

    def with_params(self, params: Params) -> PLN:
        """A new PLN at `params`, with Sigma and Omega updated in closed form (self is
        not modified)."""
        Sigma = closed_form_sigma(params.M, params.S)
        return PLN(self.data, params, Sigma, jnp.linalg.inv(Sigma))

    def tree_flatten(self):
        return (
            self.data,
            self.params,
            self.Sigma,
            self.Omega,
        ), None  # arrays are children, never aux data

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)  # every field comes back


@partial(jax.jit, static_argnames="n_iter")
def pytree_program(pln: PLN, n_iter: int, lr) -> tuple[jax.Array, PLN]:
    """The compiled loop of level "pytree": a `PLN` object carried by scan."""
    opt = make_optimizer(lr)

    def body(carry, _):
        pln, opt_state = carry
        loss, grads = jax.value_and_grad(pln.loss)(pln.params)
        updates, opt_state = opt.update(grads, opt_state, pln.params)
        return (
            pln.with_params(optax.apply_updates(pln.params, updates)),
            opt_state,
        ), loss

    (pln, _), losses = jax.lax.scan(body, (pln, opt.init(pln.params)), length=n_iter)
    return losses, pln


def fit_pytree(data: PLNData, n_iter: int, lr: float = 1.0) -> FitResult:
    """Level "pytree": a registered pytree class with methods, carried by scan."""
    losses, pln = pytree_program(PLN.start(data), n_iter, lr)
    return FitResult(np.asarray(losses), pln.params, pln.Sigma, pln.Omega)


# Level "equinox": the same class as an eqx.Module, compiled with eqx.filter_jit.
class PLNModule(eqx.Module):
    """Parameters and closed-form Sigma/Omega as an immutable Equinox module (a pytree
    by construction).

    Taught in The PLN model, level by level, Levels of compilation.
    """

    params: Params
    Sigma: jax.Array
    Omega: jax.Array

    def loss(self, data: PLNData) -> jax.Array:
        return neg_elbo(self.params, data, jax.lax.stop_gradient(self.Omega))

    def with_params(self, params: Params) -> PLNModule:
        Sigma = closed_form_sigma(params.M, params.S)
        return PLNModule(params, Sigma, jnp.linalg.inv(Sigma))


@eqx.filter_jit
def equinox_program(model: PLNModule, data: PLNData, n_iter: int, lr):
    """The compiled loop of level "equinox"; a Python `lr` would be static here, so
    `fit_equinox` passes an array.

    Taught in The PLN model, level by level, Levels of compilation.
    """
    opt = make_optimizer(lr)

    def body(carry, _):
        model, opt_state = carry
        loss, grads = eqx.filter_value_and_grad(PLNModule.loss)(model, data)
        updates, opt_state = opt.update(grads.params, opt_state, model.params)
        return (
            model.with_params(optax.apply_updates(model.params, updates)),
            opt_state,
        ), loss

    (model, _), losses = jax.lax.scan(
        body, (model, opt.init(model.params)), length=n_iter
    )
    return losses, model


def fit_equinox(data: PLNData, n_iter: int, lr: float = 1.0) -> FitResult:
    """Level "equinox": an Equinox module, compiled by eqx.filter_jit (which holds
    Python numbers static)."""
    eye = jnp.eye(data.Y.shape[1])
    model = PLNModule(init_params(data), eye, eye)
    losses, model = equinox_program(model, data, n_iter, jnp.asarray(lr, jnp.float32))
    return FitResult(np.asarray(losses), model.params, model.Sigma, model.Omega)


def fit_fast(data: PLNData, n_iter: int, lr: float = 1.0) -> FitResult:
    """Level "fast" (see `fast.py`): the same iteration, less work per iteration."""
    losses, state = fast_program(data, n_iter, lr)
    Sigma = state.gram / data.Y.shape[0]
    return FitResult(np.asarray(losses), state.params, Sigma, state.Omega)


LEVELS = {
    "eager": fit_eager,
    "jit_step": fit_jit_step,
    "jit_iteration": fit_jit_iteration,
    "scan": fit_scan,
    "namedtuple": fit_namedtuple,
    "pytree": fit_pytree,
    "equinox": fit_equinox,
    "fast": fit_fast,
}


def fit(data, n_iter: int, level: str = "scan", lr: float = 1.0) -> FitResult:
    """Fit the PLN model for `n_iter` iterations at the given level of compilation.

    The OpenBLAS pool that JAX's LAPACK calls borrow is limited for the fit and restored
    after it (see `threads`), so a plain call runs at the speed the chapter measures.
    """
    _check_levels([level])
    n_iter, data, lr = check_n_iter(n_iter), device_data(data), check_lr(lr)
    with blas_limited():
        return LEVELS[level](data, n_iter, lr)


def fit_levels(
    data, n_iter: int, levels=tuple(LEVELS), lr: float = 1.0
) -> dict[str, FitResult]:
    """Run several levels on the same data: {level: FitResult}. ``levels``: names, or
    one name; all are checked before any fit starts."""
    levels = [levels] if isinstance(levels, str) else list(levels)
    _check_levels(levels)
    check_n_iter(n_iter), check_lr(lr)
    return {level: fit(data, n_iter, level, lr) for level in levels}


def _check_levels(levels: list) -> None:
    """Every name a level of ``LEVELS``, or an error listing them."""
    unknown = [level for level in levels if level not in LEVELS]
    if unknown or not levels:
        said = f"unknown level {unknown[0]!r}" if unknown else "no level given"
        raise ValueError(f"{said}; choose from {', '.join(map(repr, LEVELS))}.")


# --- what a first fit compiles

# The jitted functions that run a level's iterations; everything else a first fit
# compiles is eager set-up before the loop (initial parameters, identity matrices) or
# gathering after it (stacking the losses), one small program per jnp function.
LOOP_PROGRAMS = {
    "eager": (),
    "jit_step": ("neg_elbo", "_update", "apply_updates", "closed_form_sigma", "inv"),
    "jit_iteration": ("one_iteration",),
    "scan": ("scan_program",),
    "namedtuple": ("namedtuple_program",),
    "pytree": ("pytree_program",),
    "equinox": ("equinox_program",),
    "fast": ("fast_program",),
}


def first_fit_programs(data, n_iter: int, level: str) -> dict:
    """What a level's first fit compiles from empty caches: the jitted programs that
    run its iterations, and the eager ones (the whole eager level; set-up before the
    loop and gathering after it at the others).

    The fit runs in a fresh process (``first_fit_compiles``), so the count does not
    depend on what ran before, and the caller's warm programs stay warm. Taught in The
    PLN model, level by level, What each level costs.
    """
    if level not in LOOP_PROGRAMS:
        raise ValueError(
            f"unknown level {level!r}; choose one of {', '.join(LOOP_PROGRAMS)}."
        )
    log = CompileLog(compiles=first_fit_compiles(data, n_iter, level))
    loop = sum(log.count_for(name) for name in LOOP_PROGRAMS[level])
    return {
        "level": level,
        "programs compiled": log.count,
        "jitted programs of the loop": loop,
        "eager programs (set-up and gathering)": log.count - loop,
    }


def first_fit_compiles(data, n_iter: int, level: str) -> list[str]:
    """The programs a level's first fit compiles, by name, in a fresh process
    (``run_cold``) where JAX's caches start empty."""
    return run_cold(_first_fit_compiles, device_data(data), n_iter, level)


def _first_fit_compiles(data, n_iter: int, level: str) -> list[str]:
    """``first_fit_compiles`` in a process whose caches are empty."""
    with count_compiles() as log:
        fit(data, n_iter, level)
    return log.compiles


# --- explorer


def level_curves(
    runs: dict[str, FitResult],
    ms_per_iter: dict[str, float],
    share: float = 0.99,
    compile_s: dict[str, float] | None = None,
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[dict]]:
    """Each level's loss against the warm seconds its iterations take (every level runs
    the same fit, so by iteration their curves are one; by time they part as the levels
    get faster), the iterations and warm seconds it took to go ``share`` of the way
    down, beside the compile a first fit paid.

    "The way down" runs from the highest first loss to the lowest loss any level
    reached. ``runs`` is ``fit_levels``' result, ``ms_per_iter`` each level's warm run
    time per iteration and ``compile_s`` its first fit's compile seconds (both from
    ``bench.benchmark_levels``). Taught in A worked example, Explore it.
    """
    missing = sorted(set(runs) - set(ms_per_iter))
    if missing:
        raise ValueError(
            f"no time per iteration for the levels {missing}; give ms_per_iter an "
            "entry for each level of runs."
        )
    if not 0 < share < 1:
        raise ValueError(
            "share is the part of the loss decrease to reach, between 0 and 1 (e.g. "
            f"0.99), got {share!r}."
        )
    start = max(float(r.losses[0]) for r in runs.values())
    best = min(float(np.min(r.losses)) for r in runs.values())
    target = start - share * (start - best)
    reach = f"iterations to {share:.0%} of the way down"
    series, rows = {}, []
    for level, result in runs.items():
        losses = np.asarray(result.losses, dtype=np.float64)
        seconds = np.arange(1, len(losses) + 1) * ms_per_iter[level] / 1e3
        series[level] = (seconds, losses)
        hit = np.flatnonzero(losses <= target)
        reached = int(hit[0]) + 1 if hit.size else None
        row = {
            "level": level,
            "iterations run": len(losses),
            "final loss": float(losses[-1]),
            "ms / iter, warm": float(ms_per_iter[level]),
            reach: reached if reached else f"not in {len(losses)}",
            "seconds to get there, warm": reached * ms_per_iter[level] / 1e3
            if reached
            else "not reached",
        }
        if compile_s is not None:
            row["compile s of a first fit"] = compile_s.get(level, "not measured")
        rows.append(row)
    return series, rows

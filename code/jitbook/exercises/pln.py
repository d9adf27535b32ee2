"""Exercises of the chapter "A worked example: the PLN model, level by level"."""

import jax
import jax.numpy as jnp
import numpy as np

from ..cache import count_compiles
from ..pln import Params, load_oaks, neg_elbo
from . import Wrong, call_answer, exercise, expect


def _point(seed: int = 0, n: int = 40, p: int = 12):
    rng = np.random.default_rng(seed)
    M = rng.normal(0, 0.7, (n, p)).astype(np.float32)
    S = rng.uniform(0.2, 1.0, (n, p)).astype(np.float32)
    W = rng.normal(size=(3 * p, p))
    Omega = (W.T @ W / (3 * p) + 0.3 * np.eye(p)).astype(np.float32)
    return M, S, Omega


@exercise("pln.trace-term", answer="trace_term", topic="operator precedence in the ELBO", difficulty=1,
          hint="@ binds tighter than +: put the sum of the two p x p matrices in parentheses before @ Omega.")
def _trace_term(answer):
    M, S, Omega = _point()
    out = call_answer(answer, jnp.asarray(M), jnp.asarray(S), jnp.asarray(Omega))
    M64, S64, O64 = (x.astype(np.float64) for x in (M, S, Omega))
    want = np.trace((M64.T @ M64 + np.diag((S64**2).sum(0))) @ O64)
    seed_value = np.trace(M64.T @ M64 + np.diag((S64**2).sum(0)) @ O64)
    got = float(np.asarray(out))
    if np.isclose(got, seed_value, rtol=1e-4):
        raise Wrong(f"you returned {got:.4f}, the 2023 tutorial's value: trace(MᵀM) + trace(diag(s) Ω). "
                    f"The model needs trace((MᵀM + diag(s)) Ω) = {want:.4f}.")
    expect(np.isclose(got, want, rtol=1e-4), "equals trace((MᵀM + diag(Σᵢ Sᵢ²)) Ω)",
           f"returned {got:.4f}, expected {want:.4f} (float64 NumPy).")


@exercise("pln.logdet", answer="logdet_precision", topic="log det without overflow", difficulty=1,
          hint="log det(Σ⁻¹) = -log det Σ; with L = cholesky(Σ), log det Σ = 2 Σ log diag(L).")
def _logdet(answer):
    rng = np.random.default_rng(1)
    W = rng.normal(size=(400, 114))
    Sigma = (W.T @ W / 400 * 0.05).astype(np.float32)  # small eigenvalues: det(Σ⁻¹) overflows float32
    want = -np.linalg.slogdet(Sigma.astype(np.float64))[1]
    out = call_answer(answer, jnp.asarray(Sigma))
    got = float(np.asarray(out))
    expect(np.isfinite(got), "is finite for a 114 x 114 Σ whose det(Σ⁻¹) overflows float32",
           f"returned {got}: det(inv(Σ)) is about 10^{want / np.log(10):.0f}, beyond float32's 3.4e38.")
    expect(np.isclose(got, want, rtol=1e-4), "equals log det(Σ⁻¹)", f"returned {got:.4f}, expected {want:.4f}.")


@exercise("pln.grad-S", answer="grad_S", topic="hand-written gradients", difficulty=2,
          hint="d/dS of -ELBO: the exponential term gives S·A, the trace term S·diag(Ω), and ½ log S² gives 1/S.")
def _grad_S(answer):
    data = load_oaks(1)
    rng = np.random.default_rng(2)
    n, p = data.Y.shape
    params = Params(jnp.full((1, p), -1.0), jnp.asarray(rng.normal(0, 0.3, (n, p)), jnp.float32),
                    jnp.asarray(rng.uniform(0.3, 1.0, (n, p)), jnp.float32))
    W = rng.normal(size=(3 * p, p))
    Omega = jnp.asarray(W.T @ W / (3 * p) + 0.5 * np.eye(p), jnp.float32)
    want = np.asarray(jax.grad(neg_elbo)(params, data, Omega).S)
    out = np.asarray(call_answer(answer, params, data, Omega))
    expect(out.shape == want.shape, "has the shape of S", f"returned shape {out.shape}, expected {want.shape}.")
    err = np.abs(out - want).max() / np.abs(want).max()
    expect(err < 1e-4, "matches jax.grad of neg_elbo with respect to S",
           f"largest difference is {err:.2%} of the largest entry; check the sign and each of the three terms.")


@exercise("pln.pytree", answer="Carry", topic="a pytree class that keeps its fields", difficulty=2,
          hint="Return every array as a child in tree_flatten (aux data: None), and rebuild with cls(*children).")
def _pytree(answer):
    expect(isinstance(answer, type), "is a class", f"Carry is a {type(answer).__name__}, not a class.")
    M, _, Omega = _point(3)
    try:
        obj = answer(jnp.asarray(M), jnp.asarray(Omega) * 2, jnp.asarray(Omega))
    except Exception as err:  # the student's constructor
        raise Wrong(f"Carry(M, Sigma, Omega) raised {type(err).__name__}: {err}") from None
    try:
        leaves, treedef = jax.tree_util.tree_flatten(obj)
        back = jax.tree_util.tree_unflatten(treedef, leaves)
    except Exception as err:
        raise Wrong(f"flattening or unflattening a Carry raised {type(err).__name__}: {err}") from None
    expect(len(leaves) == 3, "has M, Sigma and Omega as its three leaves",
           f"flattening gave {len(leaves)} leaves; register the class as a pytree with all three arrays as children.")
    for name in ("M", "Sigma", "Omega"):
        expect(np.array_equal(np.asarray(getattr(back, name)), np.asarray(getattr(obj, name))),
               f"keeps {name} through unflatten", f"after tree_unflatten, {name} is not the original {name}.")
    f = jax.jit(lambda c: c.M.sum() + c.Sigma.sum() + c.Omega.sum())
    other = answer(jnp.asarray(M + 1), jnp.asarray(Omega * 3), jnp.asarray(Omega + 1))
    with count_compiles() as log:
        try:
            f(obj)
            f(other)
        except Exception as err:
            raise Wrong(f"jit of a function of Carry raised {type(err).__name__}: {err}") from None
    expect(log.count == 1, "new arrays of the same shapes reuse the compiled program",
           f"two Carry objects with new arrays compiled {log.count} times; arrays belong in children, not aux data.")

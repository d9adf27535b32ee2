"""Exercises of the chapter "A worked example: the PLN model, level by level"."""

import jax
import jax.numpy as jnp
import numpy as np

from ..cache import count_compiles
from ..pln import Params, neg_elbo
from ..pln.seed import seed_neg_elbo
from . import Wrong, call_answer, exercise, expect

_N, _P = 40, 12  # small and distinct, so a p x p array built from an n-row array is recognisable


def _point(seed: int = 0, n: int = _N, p: int = _P):
    rng = np.random.default_rng(seed)
    M = rng.normal(0, 0.7, (n, p)).astype(np.float32)
    S = rng.uniform(0.2, 1.0, (n, p)).astype(np.float32)
    W = rng.normal(size=(3 * p, p))
    Omega = (W.T @ W / (3 * p) + 0.3 * np.eye(p)).astype(np.float32)
    return M, S, Omega


def _problem(seed: int = 0):
    """Small synthetic data, parameters and an SPD Omega (det(Omega) stays finite at p = 12)."""
    M, S, Omega = _point(seed)
    rng = np.random.default_rng(seed + 10)
    Y = rng.poisson(3.0, M.shape).astype(np.float32)
    O = rng.normal(0.5, 0.2, M.shape).astype(np.float32)
    X = np.ones((M.shape[0], 1), np.float32)
    params = Params(jnp.full((1, M.shape[1]), -0.5), jnp.asarray(M), jnp.asarray(S))
    return params, (jnp.asarray(Y), jnp.asarray(O), jnp.asarray(X)), jnp.asarray(Omega)


def _close(got, want, rtol: float = 1e-4) -> bool:
    return got.shape == want.shape and float(np.abs(got - want).max()) <= rtol * float(np.abs(want).max())


@exercise("pln.seed-grad-M", answer="seed_grad_M", topic="what the trace bug does to the gradient", difficulty=1,
          hint="The 2023 trace is tr(MᵀM) + tr(diag(s) Ω); d/dM of ½ tr(MᵀM) is M. The rest is as in neg_elbo_grads.")
def _seed_grad_M(answer):
    params, data, Omega = _problem(0)
    want = np.asarray(jax.grad(seed_neg_elbo)(params, data, Omega).M)
    out = np.asarray(call_answer(answer, params, data, Omega))
    expect(out.shape == want.shape, "has the shape of M", f"returned shape {out.shape}, expected {want.shape}.")
    model = np.asarray(jax.grad(neg_elbo)(params, data, Omega).M)
    if _close(out, model):
        raise Wrong("you returned the gradient of the corrected loss (with M Ω). The 2023 loss's trace term is "
                    "tr(MᵀM) + tr(diag(s) Ω): what does Ω multiply there?")
    expect(_close(out, want), "matches jax.grad of the 2023 loss with respect to M",
           f"largest difference is {np.abs(out - want).max() / np.abs(want).max():.2%} of the largest entry.")


@exercise("pln.grad-omega", answer="grad_Omega", topic="where the closed-form Sigma comes from", difficulty=2,
          hint="d/dΩ of log det Ω is Ω⁻¹ (Ω symmetric), of tr(GΩ) is G; neg_elbo is minus the ELBO.")
def _grad_omega(answer):
    params, data, Omega = _problem(1)
    M, S = params.M, params.S
    want = np.asarray(jax.grad(neg_elbo, argnums=2)(params, data, Omega))
    out = np.asarray(call_answer(answer, M, S, Omega))
    expect(out.shape == want.shape, "has the shape of Omega", f"returned shape {out.shape}, expected {want.shape}.")
    if _close(-out, want):
        raise Wrong("you returned the gradient of the ELBO; neg_elbo is minus the ELBO, so flip the sign.")
    expect(_close(out, want), "matches jax.grad of neg_elbo with respect to Omega",
           f"largest difference is {np.abs(out - want).max() / np.abs(want).max():.2%} of the largest entry; "
           "check the factor n/2 in front of log det Ω.")
    G = np.asarray(M, np.float64).T @ np.asarray(M, np.float64) + np.diag((np.asarray(S, np.float64) ** 2).sum(0))
    Omega_star = jnp.asarray(np.linalg.inv(G / M.shape[0]), jnp.float32)
    at_star = np.asarray(call_answer(answer, M, S, Omega_star))
    expect(np.abs(at_star).max() < 1e-3 * np.abs(G).max(), "is zero at Ω = Σ⁻¹ with Σ in closed form",
           f"at Ω = (G/n)⁻¹ your gradient reaches {np.abs(at_star).max():.3g}; it should vanish there.")


def _eqns(jaxpr):
    """Every equation of a jaxpr, including those of nested jaxprs (pjit, custom_jvp, ...)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else (value,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _eqns(inner)


@exercise("pln.trace-term", answer="trace_term", topic="the trace term without MᵀM", difficulty=2,
          hint="tr(MᵀM Ω) = Σᵢⱼ Mᵢⱼ (MΩ)ᵢⱼ, and tr(diag(s) Ω) = Σⱼ sⱼ Ωⱼⱼ.")
def _trace_term(answer):
    M, S, Omega = _point()
    args = (jnp.asarray(M), jnp.asarray(S), jnp.asarray(Omega))
    out = call_answer(answer, *args)
    M64, S64, O64 = (x.astype(np.float64) for x in (M, S, Omega))
    want = np.trace((M64.T @ M64 + np.diag((S64**2).sum(0))) @ O64)
    seed_value = np.trace(M64.T @ M64 + np.diag((S64**2).sum(0)) @ O64)
    got = float(np.asarray(out))
    if np.isclose(got, seed_value, rtol=1e-4):
        raise Wrong(f"you returned {got:.4f}, the 2023 tutorial's value: trace(MᵀM) + trace(diag(s) Ω). "
                    f"The model needs trace((MᵀM + diag(s)) Ω) = {want:.4f}.")
    expect(np.isclose(got, want, rtol=1e-4), "equals trace((MᵀM + diag(Σᵢ Sᵢ²)) Ω)",
           f"returned {got:.4f}, expected {want:.4f} (float64 NumPy).")
    try:
        jaxpr = jax.make_jaxpr(answer)(*args).jaxpr
    except Exception as err:
        raise Wrong(f"tracing your function with jax.make_jaxpr raised {type(err).__name__}: {err}") from None
    built = [e.primitive.name for e in _eqns(jaxpr)
             if any(tuple(v.aval.shape) == (_P, _P) for v in e.outvars)
             and any(_N in getattr(getattr(v, "aval", None), "shape", ()) for v in e.invars)]
    expect(not built, "never forms the p x p matrix MᵀM",
           f"`{built[0] if built else ''}` builds a {_P} x {_P} array from the {_N}-row M: that is MᵀM. "
           "Use the product M Ω instead.")


@exercise("pln.pytree", answer="Carry", topic="children and static data in a pytree class", difficulty=2,
          hint="Arrays are children; the Python int the loop needs is aux data; tree_unflatten gets both back.")
def _pytree(answer):
    expect(isinstance(answer, type), "is a class", f"Carry is a {type(answer).__name__}, not a class.")
    M, _, Omega = _point(3)
    try:
        obj = answer(jnp.asarray(M), jnp.asarray(Omega), 3)
        leaves, treedef = jax.tree_util.tree_flatten(obj)
        back = jax.tree_util.tree_unflatten(treedef, leaves)
    except Exception as err:  # the student's class
        raise Wrong(f"building, flattening or unflattening a Carry raised {type(err).__name__}: {err}") from None
    if len(leaves) == 3:
        raise Wrong("flattening gave 3 leaves: n_steps became a child, so under jit it is a tracer and "
                    "range(n_steps) fails. Return it as aux data.")
    expect(len(leaves) == 2, "has M and Omega as its two leaves",
           f"flattening gave {len(leaves)} leaves; M and Omega are arrays and belong in the children.")
    for name in ("M", "Omega"):
        expect(np.array_equal(np.asarray(getattr(back, name, None)), np.asarray(getattr(obj, name))),
               f"keeps {name} through unflatten", f"after tree_unflatten, {name} is not the original {name}.")
    expect(getattr(back, "n_steps", None) == 3 and isinstance(back.n_steps, int), "keeps n_steps through unflatten",
           f"after tree_unflatten, n_steps is {getattr(back, 'n_steps', None)!r}, not the original 3.")

    def walk(c):
        x = c.M
        for _ in range(c.n_steps):
            x = x @ c.Omega / 10
        return x.sum()

    f = jax.jit(walk)
    with count_compiles() as log:
        try:
            f(obj)
            f(answer(jnp.asarray(M + 1), jnp.asarray(Omega * 3), 3))
            same = log.count
            f(answer(jnp.asarray(M), jnp.asarray(Omega), 4))
        except Exception as err:
            raise Wrong(f"jit of a function looping range(c.n_steps) raised {type(err).__name__}: {err}") from None
    expect(same == 1, "new arrays of the same shapes reuse the compiled program",
           f"two Carry objects with new arrays compiled {same} times; arrays belong in children, not aux data.")
    expect(log.count == 2, "a new n_steps compiles a new program",
           f"changing n_steps compiled {log.count - same} times; n_steps is static: it should compile once.")

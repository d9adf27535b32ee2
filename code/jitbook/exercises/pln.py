"""Exercises of the chapter "The PLN model, level by level" (chapters/pln.qmd)."""

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.cache import count_compiles
from jitbook.chapters.pln import Params, neg_elbo
from jitbook.chapters.pln.seed import seed_neg_elbo

from . import Wrong, call_answer, close, error_line, exercise, expect, judge

N, P = (
    40,
    12,
)  # small and distinct, so a p x p array built from an n-row array is recognisable


def random_point(seed: int = 0, n: int = N, p: int = P):
    """Variational means M, standard deviations S and an SPD precision Omega, float32,
    for checkers."""
    rng = np.random.default_rng(seed)
    M = rng.normal(0, 0.7, (n, p)).astype(np.float32)
    S = rng.uniform(0.2, 1.0, (n, p)).astype(np.float32)
    W = rng.normal(size=(3 * p, p))
    Omega = (W.T @ W / (3 * p) + 0.3 * np.eye(p)).astype(np.float32)
    return M, S, Omega


def _problem(seed: int = 0):
    """Small synthetic data, parameters and an SPD Omega (det(Omega) stays finite at p =
    12)."""
    M, S, Omega = random_point(seed)
    rng = np.random.default_rng(seed + 10)
    Y = rng.poisson(3.0, M.shape).astype(np.float32)
    O = rng.normal(0.5, 0.2, M.shape).astype(np.float32)
    X = np.ones((M.shape[0], 1), np.float32)
    params = Params(jnp.full((1, M.shape[1]), -0.5), jnp.asarray(M), jnp.asarray(S))
    return params, (jnp.asarray(Y), jnp.asarray(O), jnp.asarray(X)), jnp.asarray(Omega)


_AD_NAMES = {"grad", "value_and_grad", "vjp", "jvp", "jacrev", "jacfwd", "linearize"}


def _names_used(fn, seen=None) -> set[str]:
    """The names ``fn`` uses, with those of the notebook functions it calls."""
    seen = set() if seen is None else seen
    code = getattr(fn, "__code__", None)
    if code is None or code in seen:
        return set()
    seen.add(code)
    names, stack = set(), [code]
    while stack:
        c = stack.pop()
        names |= set(c.co_names)
        stack += [k for k in c.co_consts if hasattr(k, "co_names")]
    for name in list(names):
        called = getattr(fn, "__globals__", {}).get(name)
        if getattr(called, "__module__", None) == "__main__":
            names |= _names_used(called, seen)
    return names


def _without_autodiff(answer, name: str) -> None:
    used = sorted(_names_used(answer) & _AD_NAMES)
    expect(
        not used,
        "works the gradient out by hand (no automatic differentiation)",
        f"{name} uses {', '.join(used)}: the exercise asks for the gradient worked out "
        "by hand, without jax.grad; write the formula.",
    )


@exercise(
    "pln.seed-grad-M", "seed_grad_M", "what the trace bug does to the gradient", 1
)
def _seed_grad_M(answer):
    """The 2023 trace is tr(MᵀM) + tr(diag(s) Ω); d/dM of ½ tr(MᵀM) is M. The rest is
    as in neg_elbo_grads.
    """
    params, data, Omega = _problem(0)
    out = judge.array(call_answer(answer, params, data, Omega), "seed_grad_M")
    want = np.asarray(jax.grad(seed_neg_elbo)(params, data, Omega).M)
    expect(
        out.shape == want.shape,
        "has the shape of M",
        f"returned shape {out.shape}, expected {want.shape}.",
    )
    model = np.asarray(jax.grad(neg_elbo)(params, data, Omega).M)
    if close(out, model):
        raise Wrong(
            "you returned the gradient of the corrected loss (with M Ω). The 2023 "
            "loss's trace term is "
            "tr(MᵀM) + tr(diag(s) Ω): what does Ω multiply there?"
        )
    expect(
        close(out, want),
        "matches jax.grad of the 2023 loss with respect to M",
        f"largest difference is {np.abs(out - want).max() / np.abs(want).max():.2%} of "
        "the largest entry.",
    )
    _without_autodiff(answer, "seed_grad_M")


def _symmetric(grad: np.ndarray) -> np.ndarray:
    """The gradient over symmetric matrices, 2A - diag(A): another convention."""
    return 2 * grad - np.diag(np.diag(grad))


@exercise("pln.grad-omega", "grad_Omega", "where the closed-form Sigma comes from", 2)
def _grad_omega(answer):
    """d/dΩ of log det Ω is Ω⁻¹ (Ω symmetric), of tr(GΩ) is G; neg_elbo is minus the
    ELBO.
    """
    params, data, Omega = _problem(1)
    M, S = params.M, params.S
    out = judge.array(call_answer(answer, M, S, Omega), "grad_Omega")
    want = np.asarray(jax.grad(neg_elbo, argnums=2)(params, data, Omega))
    expect(
        out.shape == want.shape,
        "has the shape of Omega",
        f"returned shape {out.shape}, expected {want.shape}.",
    )
    if close(-out, want) or close(-out, _symmetric(want)):
        raise Wrong(
            "you returned the gradient of the ELBO; neg_elbo is minus the ELBO, so "
            "flip the sign."
        )
    n = M.shape[0]
    if close(out - want, (n - 1) / 2 * np.linalg.inv(np.asarray(Omega, np.float64))):
        raise Wrong(
            "the log det term is off by a factor n: check the factor n/2 in front of "
            "log det Ω (d/dΩ of (n/2) log det Ω is (n/2) Ω⁻¹)."
        )
    expect(
        close(out, want) or close(out, _symmetric(want)),
        "matches jax.grad of neg_elbo with respect to Omega (or its symmetric-matrix "
        "form)",
        f"largest difference is {np.abs(out - want).max() / np.abs(want).max():.2%} of "
        "the largest entry; differentiate term by term: ½ tr(GΩ) gives G/2, (n/2) log "
        "det Ω gives (n/2) Ω⁻¹.",
    )
    _without_autodiff(answer, "grad_Omega")
    G = np.asarray(M, np.float64).T @ np.asarray(M, np.float64) + np.diag(
        (np.asarray(S, np.float64) ** 2).sum(0)
    )
    Omega_star = jnp.asarray(np.linalg.inv(G / M.shape[0]), jnp.float32)
    at_star = judge.array(call_answer(answer, M, S, Omega_star), "grad_Omega")
    expect(
        np.abs(at_star).max() < 1e-3 * np.abs(G).max(),
        "is zero at Ω = Σ⁻¹ with Σ in closed form",
        f"at Ω = (G/n)⁻¹ your gradient reaches {np.abs(at_star).max():.3g}; it should "
        "vanish there.",
    )


@exercise("pln.pytree", "Carry", "children and static data in a pytree class", 2)
def _pytree(answer):
    """Arrays are children; the Python int the loop needs is aux data; tree_unflatten
    gets both back.
    """
    expect(
        isinstance(answer, type),
        "is a class",
        f"Carry is a {type(answer).__name__}, not a class.",
    )
    M, _, Omega = random_point(3)
    try:
        obj = answer(jnp.asarray(M), jnp.asarray(Omega), 3)
        leaves, treedef = jax.tree_util.tree_flatten(obj)
        back = jax.tree_util.tree_unflatten(treedef, leaves)
    except Exception as err:  # the student's class
        raise Wrong(
            f"building, flattening or unflattening a Carry raised {error_line(err)}"
        ) from None
    if len(leaves) == 3:
        raise Wrong(
            "flattening gave 3 leaves: n_steps became a child, so under jit it is a "
            "tracer and "
            "range(n_steps) fails. Return it as aux data."
        )
    expect(
        len(leaves) == 2,
        "has M and Omega as its two leaves",
        f"flattening gave {len(leaves)} leaves; M and Omega are arrays and belong in "
        "the children.",
    )
    for name in ("M", "Omega"):
        expect(
            np.array_equal(
                judge.array(getattr(back, name, None), "Carry"),
                judge.array(getattr(obj, name)),
            ),
            f"keeps {name} through unflatten",
            f"after tree_unflatten, {name} is not the original {name}.",
        )
    expect(
        type(getattr(back, "n_steps", None)) is int and back.n_steps == 3,
        "keeps n_steps through unflatten",
        f"after tree_unflatten, n_steps is {getattr(back, 'n_steps', None)!r}, not the "
        "original 3.",
    )

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
            raise Wrong(
                f"jit of a function looping range(c.n_steps) raised {error_line(err)}"
            ) from None
    expect(
        same == 1,
        "new arrays of the same shapes reuse the compiled program",
        f"two Carry objects with new arrays compiled {same} times; arrays belong in "
        "children, not aux data.",
    )
    expect(
        log.count == 2,
        "a new n_steps compiles a new program",
        f"changing n_steps compiled {log.count - same} times; n_steps is static: it "
        "should compile once.",
    )

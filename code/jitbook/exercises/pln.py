"""Exercises of the chapter "The PLN model, level by level" (chapters/pln.qmd).

Gradients are judged on their values at points drawn per student, against
``jax.grad`` computed here; whether JAX's autodiff made the answer's program is read
from that program's own record (its operations' ``jvp(...)`` locations) by a probe:
self-reported. The pytree class is judged by a probe that flattens it and counts a
jitted loop's compiles: self-reported.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.chapters.pln import Params, neg_elbo
from jitbook.chapters.pln.seed import seed_neg_elbo

from . import Wrong, ask, close, exercise, expect, judge


def random_point(rng, n: int, p: int):
    """Variational means M, standard deviations S and an SPD precision Omega
    (float32)."""
    M = rng.normal(0, 0.7, (n, p)).astype(np.float32)
    S = rng.uniform(0.2, 1.0, (n, p)).astype(np.float32)
    W = rng.normal(size=(3 * p, p))
    Omega = (W.T @ W / (3 * p) + 0.3 * np.eye(p)).astype(np.float32)
    return M, S, Omega


def sizes(rng) -> tuple[int, int]:
    """n rows and p < n columns, drawn: a p x p array built from an n-row one shows."""
    return int(rng.integers(25, 60)), int(rng.integers(5, 16))


def _problem(rng):
    """Data, parameters (B, M, S) and an SPD Omega as plain tuples of arrays."""
    n, p = sizes(rng)
    M, S, Omega = random_point(rng, n, p)
    Y = rng.poisson(3.0, (n, p)).astype(np.float32)
    O = rng.normal(0.5, 0.2, (n, p)).astype(np.float32)
    X = np.ones((n, 1), np.float32)
    B = rng.uniform(-0.8, -0.2, (1, p)).astype(np.float32)
    return (B, M, S), (Y, O, X), Omega


def _expect_by_hand(autodiff: bool, name: str) -> None:
    expect(
        not autodiff,
        "works the gradient out by hand (no automatic differentiation in its program)",
        f"{name}'s program was made by JAX's automatic differentiation (jax.grad, vjp "
        "or jvp): the exercise asks for the gradient worked out by hand; write the "
        "formula.",
        self_reported=True,
    )


@exercise(
    "pln.seed-grad-M", "seed_grad_M", "what the trace bug does to the gradient", 1
)
def _seed_grad_M(rng):
    """The 2023 trace is tr(MᵀM) + tr(diag(s) Ω); d/dM of ½ tr(MᵀM) is M. The rest is
    as in neg_elbo_grads.
    """
    params, data, Omega = _problem(rng)
    (found,) = yield [ask.probe("on_pln_tuples", params, data, Omega)]
    out = judge.array(found["value"], "seed_grad_M")
    args = Params(*map(jnp.asarray, params)), tuple(map(jnp.asarray, data)), Omega
    want = np.asarray(jax.grad(seed_neg_elbo)(*args).M)
    expect(
        out.shape == want.shape,
        "has the shape of M",
        f"returned shape {out.shape}, expected {want.shape}.",
    )
    if close(out, np.asarray(jax.grad(neg_elbo)(*args).M)):
        raise Wrong(
            "you returned the gradient of the corrected loss (with M Ω). The 2023 "
            "loss's trace term is tr(MᵀM) + tr(diag(s) Ω): what does Ω multiply there?"
        )
    expect(
        close(out, want),
        "matches jax.grad of the 2023 loss with respect to M",
        f"largest difference is {np.abs(out - want).max() / np.abs(want).max():.2%} of "
        "the largest entry.",
    )
    _expect_by_hand(found["autodiff"], "seed_grad_M")


def _symmetric(grad: np.ndarray) -> np.ndarray:
    """The gradient over symmetric matrices, 2A - diag(A): another convention."""
    return 2 * grad - np.diag(np.diag(grad))


@exercise("pln.grad-omega", "grad_Omega", "where the closed-form Sigma comes from", 2)
def _grad_omega(rng):
    """d/dΩ of log det Ω is Ω⁻¹ (Ω symmetric), of tr(GΩ) is G; neg_elbo is minus the
    ELBO.
    """
    params, data, Omega = _problem(rng)
    _, M, S = params
    n = M.shape[0]
    M64, S64 = M.astype(np.float64), S.astype(np.float64)
    G = M64.T @ M64 + np.diag((S64**2).sum(0))
    Omega_star = np.linalg.inv(G / n).astype(np.float32)
    out, at_star, autodiff = yield [
        ask.call(M, S, Omega),
        ask.call(M, S, Omega_star),
        ask.probe("autodiff_used", M, S, Omega),
    ]
    out = judge.array(out, "grad_Omega")
    args = Params(*map(jnp.asarray, params)), tuple(map(jnp.asarray, data))
    want = np.asarray(jax.grad(neg_elbo, argnums=2)(*args, jnp.asarray(Omega)))
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
    if close(out - want, (n - 1) / 2 * np.linalg.inv(Omega.astype(np.float64))):
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
    at_star = judge.array(at_star, "grad_Omega")
    expect(
        np.abs(at_star).max() < 1e-3 * np.abs(G).max(),
        "is zero at Ω = Σ⁻¹ with Σ in closed form",
        f"at Ω = (G/n)⁻¹ your gradient reaches {np.abs(at_star).max():.3g}; it should "
        "vanish there.",
    )
    _expect_by_hand(autodiff, "grad_Omega")


@exercise("pln.pytree", "Carry", "children and static data in a pytree class", 2)
def _pytree(rng):
    """Arrays are children; the Python int the loop needs is aux data; tree_unflatten
    gets both back.
    """
    n, p = sizes(rng)
    M, _, Omega = random_point(rng, n, p)
    steps = int(rng.integers(2, 6))
    (found,) = yield [ask.probe("pytree_split", M, Omega, steps)]
    leaves = found["leaves"]
    if len(leaves) == 3:
        raise Wrong(
            "flattening gave 3 leaves: n_steps became a child, so under jit it is a "
            "tracer and range(n_steps) fails. Return it as aux data."
        )
    expect(
        len(leaves) == 2
        and any(judge.agrees(leaf, M, atol=0) for leaf in leaves if leaf is not None)
        and any(
            judge.agrees(leaf, Omega, atol=0) for leaf in leaves if leaf is not None
        ),
        "has M and Omega as its two leaves",
        f"flattening gave {len(leaves)} leaves; M and Omega are arrays and belong in "
        "the children.",
        self_reported=True,
    )
    for name, value in (("M", M), ("Omega", Omega)):
        expect(
            judge.agrees(found["kept"][name], value, atol=0),
            f"keeps {name} through unflatten",
            f"after tree_unflatten, {name} is not the original {name}.",
            self_reported=True,
        )
    expect(
        found["n_steps"] == steps and type(found["n_steps"]) is int,
        "keeps n_steps through unflatten",
        f"after tree_unflatten, n_steps is {found['n_steps']!r}, not the original "
        f"{steps}.",
        self_reported=True,
    )
    if "jit_error" in found:
        raise Wrong(
            f"jit of a function looping range(c.n_steps) raised {found['jit_error']}"
        )
    expect(
        found["same_shapes"] == 1,
        "new arrays of the same shapes reuse the compiled program",
        f"two Carry objects with new arrays compiled {found['same_shapes']} times; "
        "arrays belong in children, not aux data.",
        self_reported=True,
    )
    expect(
        found["new_n_steps"] == 1,
        "a new n_steps compiles a new program",
        f"changing n_steps compiled {found['new_n_steps']} times; n_steps is static: "
        "it should compile once.",
        self_reported=True,
    )

"""Exercises of the chapter "The PLN model, made fast" (chapters/pln-fast.qmd)."""

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.programs import equations

from . import Wrong, call_answer, error_line, exercise, expect, judge
from .pln import N, P, random_point


@exercise("pln-fast.trace-term", "trace_term", "the trace term without MᵀM", 2)
def _trace_term(answer):
    """tr(MᵀM Ω) = Σᵢⱼ Mᵢⱼ (MΩ)ᵢⱼ, and tr(diag(s) Ω) = Σⱼ sⱼ Ωⱼⱼ."""
    M, S, Omega = random_point()
    args = (jnp.asarray(M), jnp.asarray(S), jnp.asarray(Omega))
    out = call_answer(answer, *args)
    M64, S64, O64 = (x.astype(np.float64) for x in (M, S, Omega))
    want = np.trace((M64.T @ M64 + np.diag((S64**2).sum(0))) @ O64)
    seed_value = np.trace(M64.T @ M64 + np.diag((S64**2).sum(0)) @ O64)
    got = float(judge.number(out, "trace_term"))
    if np.isclose(got, seed_value, rtol=1e-4):
        raise Wrong(
            f"you returned {got:.4f}, the 2023 tutorial's value: trace(MᵀM) + "
            "trace(diag(s) Ω). "
            f"The model needs trace((MᵀM + diag(s)) Ω) = {want:.4f}."
        )
    expect(
        np.isclose(got, want, rtol=1e-4),
        "equals trace((MᵀM + diag(Σᵢ Sᵢ²)) Ω)",
        f"returned {got:.4f}, expected {want:.4f} (float64 NumPy).",
    )
    try:
        jaxpr = jax.make_jaxpr(answer)(*args).jaxpr
    except Exception as err:
        raise Wrong(
            f"tracing your function with jax.make_jaxpr raised {error_line(err)}"
        ) from None
    built = [
        e.primitive.name
        for e in equations(jaxpr)
        if any(tuple(v.aval.shape) == (P, P) for v in e.outvars)
        and any(N in getattr(getattr(v, "aval", None), "shape", ()) for v in e.invars)
    ]
    expect(
        not built,
        "never forms the p x p matrix MᵀM",
        f"`{built[0] if built else ''}` builds a {P} x {P} array from the {N}-row M: "
        "that is MᵀM. "
        "Use the product M Ω instead.",
    )
    wide = [
        e.primitive.name
        for e in equations(jaxpr)
        if any(
            sum(d >= N for d in getattr(v.aval, "shape", ())) >= 2 for v in e.outvars
        )
    ]
    expect(
        not wide,
        "never forms an n x n array",
        f"`{wide[0] if wide else ''}` builds an {N} x {N} array, n x n (M Ω Mᵀ is "
        "one): at the chapter's size that is hundreds of MB. tr(M Ω Mᵀ) is the sum of "
        "M * (M Ω), entry by entry.",
    )

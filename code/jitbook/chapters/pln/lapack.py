"""The LAPACK routines a compiled CPU program calls: factorisations and solves."""

from __future__ import annotations

import re

import jax

# LAPACK's names (single precision: sgetrf, spotrf, strsm) and what each routine does.
ROUTINES = {
    "getrf": "LU factorisation (getrf)",
    "potrf": "Cholesky factorisation (potrf)",
    "trsm": "triangular solve (trsm)",
}


def lapack_calls(compiled: jax.stages.Compiled | str) -> dict[str, int]:
    """How many times each routine of `ROUTINES` appears in a compiled program's HLO.

    A loop body is counted once, however many times it runs.
    Taught in The PLN model, made fast and convergent, A faster level.
    """
    if isinstance(compiled, jax.stages.Compiled):
        compiled = compiled.as_text()
    if not isinstance(compiled, str):
        raise TypeError(
            "lapack_calls takes a compiled program (jax.jit(f).lower(...).compile()) "
            f"or its HLO text, got {type(compiled).__name__}."
        )
    targets = re.findall(r'custom_call_target="lapack_[sdcz](\w+?)(?:_ffi)?"', compiled)
    return {label: targets.count(name) for name, label in ROUTINES.items()}

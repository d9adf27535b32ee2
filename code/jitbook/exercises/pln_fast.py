"""Exercises of the chapter "The PLN model, made fast" (chapters/pln-fast.qmd).

Judged on the answer's value at a point drawn per student and on the shapes of the
arrays its lowered program makes, at sizes drawn per student.
"""

import re

import numpy as np

from . import Wrong, ask, exercise, expect, judge
from .pln import random_point, sizes

_SHAPES = re.compile(r"tensor<([0-9x]+)x\w+>")
_OP = re.compile(r"(?:stablehlo|chlo)\.(\w+)")


def _made(text: str) -> list[tuple[str, list[tuple], tuple]]:
    """Each operation of a lowered program: its name, operand shapes, result shape."""
    found = []
    for line in text.splitlines():
        op = _OP.search(line)
        if not op or " : " not in line:
            continue
        types = line.rsplit(" : ", 1)[1]
        shapes = [tuple(int(d) for d in s.split("x")) for s in _SHAPES.findall(types)]
        if not shapes:
            continue
        operands = shapes[:-1] if "->" in types else shapes
        found.append((op.group(1), operands, shapes[-1]))
    return found


@exercise("pln-fast.trace-term", "trace_term", "the trace term without MᵀM", 2)
def _trace_term(rng):
    """tr(MᵀM Ω) = Σᵢⱼ Mᵢⱼ (MΩ)ᵢⱼ, and tr(diag(s) Ω) = Σⱼ sⱼ Ωⱼⱼ."""
    n, p = sizes(rng)
    M, S, Omega = random_point(rng, n, p)
    specs = ask.spec((n, p)), ask.spec((n, p)), ask.spec((p, p))
    out, text = yield [ask.call(M, S, Omega), ask.lower(*specs)]
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
    ops = _made(text)
    built = [
        name
        for name, operands, result in ops
        if result == (p, p) and any(n in shape for shape in operands)
    ]
    expect(
        not built,
        "never forms the p x p matrix MᵀM",
        f"`{built[0] if built else ''}` builds a {p} x {p} array from the {n}-row M: "
        "that is MᵀM. Use the product M Ω instead.",
    )
    wide = [name for name, _, result in ops if sum(d >= n for d in result) >= 2]
    expect(
        not wide,
        "never forms an n x n array",
        f"`{wide[0] if wide else ''}` builds a {n} x {n} array, n x n (M Ω Mᵀ is "
        "one): at the chapter's size that is hundreds of MB. tr(M Ω Mᵀ) is the sum of "
        "M * (M Ω), entry by entry.",
    )

"""Exercises of the chapter "jit's cache key and its caches": judged on plain values
and on the program the grader compiles from them, never on a count a student's process
reports."""

import jax.numpy as jnp
import numpy as np

from jitbook.cache import fresh_jit

from . import ask, error_line, exercise, expect, judge


def _poly_eval(coeffs, x):
    """The chapter's ``poly_eval``: the polynomial with ``coeffs`` (highest power
    first), unrolled."""
    y = jnp.zeros_like(x)
    for c in coeffs:
        y = y * x + c
    return y


def _coefficients(rng) -> list:
    """Two to five coefficients, some whole (given as ints in the list)."""
    drawn = np.round(rng.uniform(-3, 3, size=int(rng.integers(2, 6))), 2)
    drawn[int(rng.integers(len(drawn)))] = float(rng.integers(1, 4))
    return [int(c) if c.is_integer() else float(c) for c in drawn]


@exercise("cache-key.static-coeffs", "as_static", "hashable static arguments", 2)
def _static_coeffs(rng):
    """A static argument must be hashable and compare equal when it means the same
    thing: a tuple of floats.
    """
    coeffs, other = _coefficients(rng), _coefficients(rng)
    array = np.asarray(coeffs, np.float64)
    got = yield [ask.call(coeffs), ask.call(ask.numpy(array)), ask.call(other)]
    x = np.linspace(-1.0, 1.0, int(rng.integers(4, 9))).astype(np.float32)
    evaluate = fresh_jit(_poly_eval, static_argnums=0)
    values = []
    for given, static in zip((coeffs, "np.array(...)", other), got, strict=True):
        judge.plain(static, "as_static")
        try:
            values.append(np.asarray(evaluate(static, x)))
        except (TypeError, ValueError) as err:
            expect(
                False,
                "",
                f"jit refused as_static({given!r}) as a static argument: "
                f"{error_line(err)}",
            )
    expect(
        judge.agrees(values[0], np.polyval(coeffs, x), atol=1e-4),
        "evaluates the polynomial of the given coefficients",
        f"poly_eval(as_static({coeffs!r}), x) evaluated to {values[0].tolist()}.",
    )
    expect(
        got[0] == got[1] and hash(got[0]) == hash(got[1]),
        "a list and an array of the same coefficients give equal, equally hashed "
        "values (one program)",
        f"as_static({coeffs!r}) and as_static(np.array({coeffs!r})) gave {got[0]!r} "
        f"and {got[1]!r}: jit compiles again unless they are equal and hash equal; "
        "turn each coefficient into a float.",
    )
    expect(
        got[2] != got[0] and judge.agrees(values[2], np.polyval(other, x), atol=1e-4),
        "other coefficients give another value and their own results",
        f"as_static({other!r}) evaluated to {values[2].tolist()}: different "
        "coefficients must give a different static value.",
    )

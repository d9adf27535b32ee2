"""Exercises of the chapter "jaxprs and the road to XLA"."""

import re

import jax
import numpy as np

from jitbook import programs
from jitbook.chapters import jaxprs
from jitbook.evidence import probes, read

from . import Wrong, ask, exercise, expect, judge

_ELEMENTWISE = ["sin", "tanh", "square", "plus_one", "double"]


def _recipe(rng, first: str, pool: list[str]) -> list[str]:
    """A function drawn per student: ``first`` and two to four more steps, shuffled."""
    steps = [first, *rng.choice(pool, int(rng.integers(2, 5)))]
    return [str(s) for s in rng.permutation(steps)]


def _square(rng, low: int, high: int) -> np.ndarray:
    n = int(rng.integers(low, high))
    return rng.uniform(-1.0, 1.0, size=(n, n)).astype(np.float32)


def _shown(steps: list[str]) -> str:
    return " then ".join(steps)


@exercise("jaxprs.count-equations", "count_equations", "reading a jaxpr", 1)
def _count_equations(rng):
    """jax.make_jaxpr(fn)(*args) returns a jaxpr; its .eqns list holds one entry per
    equation.
    """
    recipes = [
        _recipe(rng, first, list(probes.STEPS))
        for first in ("matmul", "loop", "closure", str(rng.choice(_ELEMENTWISE)))
    ]
    x = _square(rng, 2, 7)
    results = yield [ask.probe("on_composed", steps, x) for steps in recipes]
    for steps, got in zip(recipes, results, strict=True):
        got = judge.number(got, "count_equations")
        jaxpr = jax.make_jaxpr(probes.composed(steps))(x)
        want = len(jaxpr.eqns)
        label = f"x -> {_shown(steps)}"
        if got == len(list(programs.equations(jaxpr))) and got != want:
            raise Wrong(
                f"for {label} you returned {got}, counting the equations inside the "
                f"loop body too; count only the top level ({want}): the loop is one "
                "equation."
            )
        if got == len(str(jaxpr).splitlines()) - 2 and got != want:
            raise Wrong(
                f"for {label} you returned {got}, the number of printed lines; an "
                "equation can span several lines (dot_general prints its parameters "
                f"on their own), there are {want}."
            )
        expect(
            got == want,
            f"{label}: {want} equations",
            f"for {label} you returned {got!r}, expected {want}.",
            self_reported=True,
        )


_SHORT = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}
_RESULT = re.compile(r"@main\([^)]*\)\s*->\s*\(?\s*tensor<([^>]*)>")


@exercise("jaxprs.keep-dtype", "halve", "weak-typed literals", 1)
def _keep_dtype(rng):
    """A Python float is weak-typed: it takes the dtype of the array it meets. A
    jnp.float32 is not.
    """
    n = int(rng.integers(3, 12))
    values = {
        dtype: (rng.integers(-64, 64, size=n) / 4).astype(dtype)
        for dtype in ("float16", "float32")
    }
    *texts, half16, half32 = yield [
        *(ask.lower(ask.spec((n,), dtype)) for dtype in _SHORT),
        *(ask.call(x) for x in values.values()),
    ]
    for (dtype, x), got in zip(values.items(), (half16, half32), strict=True):
        expect(
            judge.agrees(got, x.astype(np.float64) / 2),
            f"halves {dtype}",
            f"halve(x) returned {got!r} for the {dtype} x = {x.tolist()}; expected "
            "each value halved.",
        )
        kept = isinstance(got, np.ndarray) and got.dtype == np.dtype(dtype)
        expect(
            kept,
            f"keeps {dtype}",
            f"for a {dtype} input the result is "
            f"{getattr(got, 'dtype', type(got).__name__)}: the constant you multiply "
            "by has its own dtype and promotes x; use a Python number, which is "
            "weak-typed.",
        )
    for dtype, text in zip(_SHORT, texts, strict=True):
        result = _RESULT.search(text)
        made = result.group(1).split("x")[-1] if result else "?"
        expect(
            made == _SHORT[dtype],
            f"the jitted program returns {dtype}",
            f"jitted for a {dtype} input, your function's program returns {made}: "
            "the constant you multiply by has its own dtype and promotes x; use a "
            "Python number, which is weak-typed.",
        )
        expect(
            "stablehlo.convert" not in text,
            f"no dtype conversion in the program ({dtype})",
            f"for a {dtype} input the program converts dtypes (convert_element_type "
            "in the jaxpr, stablehlo.convert once lowered); multiply by a weak-typed "
            "Python float instead.",
        )


def _trajectory_reference(x: np.ndarray, steps: int) -> np.ndarray:
    rows, current = [], jax.numpy.asarray(x)
    for _ in range(steps):
        current = jaxprs.update(current)
        rows.append(np.asarray(current))
    return np.stack(rows)


@exercise("jaxprs.fixed-size", "trajectory", "loops in jaxprs", 2)
def _fixed_size(rng):
    """lax.scan(body, x, length=steps) traces body once; body(carry, _) returns (new
    carry, value to stack).
    """
    x = rng.uniform(-1.0, 1.0, size=int(rng.integers(3, 8))).astype(np.float32)
    counts = [int(rng.integers(2, 6)), int(rng.integers(20, 41))]
    *results, sizes = yield [
        *(ask.call(x, steps) for steps in counts),
        ask.probe("jaxpr_sizes", x, counts, allow_error=True),
    ]
    for steps, got in zip(counts, results, strict=True):
        want = _trajectory_reference(x, steps)
        shape = np.shape(got)
        expect(
            judge.agrees(got, want, atol=1e-5),
            f"stacks the {steps} iterates for {steps} steps",
            f"trajectory(x, {steps}) should have shape {want.shape} and row i equal "
            f"to x after i + 1 steps of jaxprs.update; got shape {shape}"
            + ("" if shape != want.shape else " with other values")
            + ".",
        )
    if isinstance(sizes, read.Failed):
        raise Wrong(
            "tracing trajectory(x, steps) with steps as a Python int raised "
            f"{sizes.message}",
            details=sizes.message,
        )
    small, large = sizes
    expect(
        small == large,
        f"the jaxpr has the same size for {counts[0]} and {counts[1]} steps",
        f"the jaxpr has {small} equations for {counts[0]} steps and {large} for "
        f"{counts[1]}: a Python loop is unrolled while tracing; use lax.scan.",
        self_reported=True,
    )


def _compiled_flops(fn, *args) -> float:
    return programs.cost_summary(jax.jit(fn).trace(*args).lower().compile())["flops"]


@exercise("jaxprs.flops", "flops_of", "compile and cost analysis", 2)
def _flops(rng):
    """jax.jit(fn).trace(*args).lower().compile().cost_analysis() is a dict with a
    'flops' entry.
    """
    pool = ["matmul", *_ELEMENTWISE]
    recipes = [_recipe(rng, "matmul", pool), _recipe(rng, "tanh", pool)]
    x = _square(rng, 3, 25)
    results = yield [ask.probe("on_composed", steps, x) for steps in recipes]
    for steps, got in zip(recipes, results, strict=True):
        label = f"x -> {_shown(steps)} (x {x.shape[0]} x {x.shape[1]})"
        if type(got) is dict:
            raise Wrong(
                f"for {label} you returned the whole cost analysis; return its "
                "'flops' entry as a number."
            )
        got = judge.number(got, "flops_of")
        want = _compiled_flops(probes.composed(steps), x)
        expect(
            float(got) == want,
            f"{label}: {want:g} flops",
            f"for {label} you returned {got!r}; XLA's cost analysis says {want:g} "
            "flops.",
            self_reported=True,
        )


def _shapes(rng) -> list[tuple]:
    """Three different shapes, and a fourth for none of them."""
    a, b = (int(v) for v in rng.choice(np.arange(2, 9), 2, replace=False))
    return [(a,), (b,), (int(rng.integers(2, 5)), int(rng.integers(2, 5))), (a + 9,)]


@exercise("jaxprs.precompile", "precompile", "ahead-of-time compilation", 2)
def _precompile(rng):
    """jax.ShapeDtypeStruct(shape, jnp.float32) stands in for an array when you trace
    and lower.
    """
    *shapes, other_shape = _shapes(rng)
    steps = _recipe(rng, "sin", _ELEMENTWISE)
    inputs = [rng.uniform(-1, 1, size=s).astype(np.float32) for s in shapes]
    other = np.zeros(other_shape, np.float32)
    (found,) = yield [ask.probe("precompiled", steps, shapes, inputs, other)]
    returned = found.get("returned", "dict")
    keys = found.get("keys", [])
    expect(
        returned == "dict" and sorted(map(str, keys)) == sorted(map(str, shapes)),
        "returns one entry per shape",
        f"precompile returned {returned} with keys {keys}; return a dict from each "
        "shape (a tuple) to its compiled function.",
        self_reported=True,
    )
    expect(
        found["compiled_ahead"] >= len(shapes),
        "compiles ahead of time",
        f"only {found['compiled_ahead']} compilations happened inside precompile for "
        f"{len(shapes)} shapes; compile each one there, with "
        ".trace(...).lower().compile().",
        self_reported=True,
    )
    fn = probes.composed(steps)
    for shape, x, got in zip(shapes, inputs, found["outputs"], strict=True):
        expect(
            judge.agrees(got, np.asarray(fn(x)), atol=1e-5),
            f"{shape}: right values",
            f"the function for shape {shape} does not compute fn.",
            self_reported=True,
        )
    expect(
        found["compiled_later"] == 0,
        "no compilation when called",
        f"calling the functions compiled {found['compiled_later']} times; they should "
        "be executables compiled in advance.",
        self_reported=True,
    )
    expect(
        found["other_refused"],
        "each entry is an executable for its one shape",
        f"the entry for {shapes[0]} also ran on a {other_shape} array, compiling for "
        "it: it is a jitted function warmed up, not an executable. Return "
        "jax.jit(fn).trace(...).lower().compile() for each shape.",
        self_reported=True,
    )

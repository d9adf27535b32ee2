"""Exercises of the chapter "Tracing: what jit sees"."""

import re

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.chapters import tracing
from jitbook.evidence import read

from . import Wrong, _failed_message, ask, exercise, expect, judge


def _explained(failed: read.Failed, what: str) -> Wrong:
    """A request that raised, with a plain explanation in front of the tracer errors
    a student is likely to meet."""
    if failed.missing or failed.placeholder:
        return Wrong(_failed_message({"kind": "call"}, failed))
    text = f"{what} raised {failed.message}" + (
        f" ({failed.line})" if failed.line else ""
    )
    if "TracerBoolConversionError" in text or "truth value of an array" in text:
        return Wrong(
            "under jit, an `if` (or `and`/`or`/`bool()`) on a traced value cannot be "
            "decided while tracing: the tracer has a shape and dtype but no value. "
            + text,
            details=failed.message,
        )
    if "TracerIntegerConversionError" in text or "ConcretizationTypeError" in text:
        return Wrong(
            "under jit, n is a tracer, not a Python int, so range(n) or a scan length "
            "cannot use it; lax.fori_loop accepts a traced trip count. " + text,
            details=failed.message,
        )
    if "Non-hashable static arguments" in text:
        return Wrong(
            "your function makes n a static argument of a jit, but n must stay a "
            "traced argument (no static_argnums), so that one program serves every "
            f"n. {text.split(' The error was')[0]}",
            details=failed.message,
        )
    return Wrong(text, details=failed.message)


def _settled(results: list, what: str) -> list:
    """The results, or the first failure explained."""
    for got in results:
        if isinstance(got, read.Failed):
            raise _explained(got, what)
    return results


def _quarters(rng, size=None):
    """Values printed exactly as written (multiples of 1/4, none zero)."""
    whole = rng.integers(1, 32, size=size) * rng.choice([-1, 1], size=size)
    return whole / 4.0


_HOST_CALLBACK = re.compile(r"custom_call\s*@(\w*callback\w*)\(([^)]*)\)")


@exercise("tracing.debug-print", "noisy_square", "print vs jax.debug.print", 1)
def _debug_print(rng):
    """A plain print runs once, while tracing, and shows a tracer; jax.debug.print runs
    at every call.
    """
    values = [float(v) for v in _quarters(rng, 3)]
    length = int(rng.integers(2, 7))
    asked = [ask.call(v, jit=True, allow_error=True) for v in values]
    *results, text, lines = yield asked + [
        ask.lower(ask.spec((length,)), allow_error=True),
        ask.probe("printed_at_calls", values, allow_error=True),
    ]
    results = [
        judge.number(r, "noisy_square")
        for r in _settled(results, "jax.jit(noisy_square)")
    ]
    want = [v * v for v in values]
    expect(
        results == want,
        "returns x * x under jit",
        f"for inputs {values} it returned {results}, expected {want}.",
    )
    (text,) = _settled([text], "lowering jax.jit(noisy_square)")
    callbacks = _HOST_CALLBACK.findall(text)
    expect(
        bool(callbacks),
        "the compiled program calls back to the host",
        "the jitted program has no host callback, so nothing prints when it runs: a "
        "plain print runs only while tracing (once, showing a tracer), not at every "
        "call; use jax.debug.print.",
    )
    expect(
        any(operands.strip() for _, operands in callbacks),
        "the callback is given a value of the program",
        "the program's host callback takes no value: it prints fixed text; pass x to "
        'jax.debug.print, e.g. jax.debug.print("x = {}", x).',
    )
    (lines,) = _settled([lines], "calling jax.jit(noisy_square)")
    missing = [v for v in values if not any(repr(v) in line for line in lines)]
    expect(
        not missing,
        "prints the value of x at every call",
        f"the jitted function printed {lines!r} for calls with {values}; the values "
        f"{missing} never appeared.",
        self_reported=True,
    )


def _values(rng) -> list[list]:
    """Lists of arguments drawn per student, their lengths and order too: Python
    floats beside float32 arrays of the same shape, repeats, new shapes and dtypes,
    all of these mixed, and no calls at all."""
    k = int(rng.integers(2, 6))
    scalars = [
        float(_quarters(rng)),
        float(_quarters(rng)),
        int(rng.integers(1, 9)),
        np.array(_quarters(rng), np.float32),
    ]
    arrays = [
        rng.normal(size=k).astype(np.float32),
        rng.normal(size=k).astype(np.float32),
        rng.normal(size=k + 1).astype(np.float32),
        rng.integers(0, 9, size=k).astype(np.int32),
        rng.normal(size=(2, k)).astype(np.float32),
    ]

    def drawn(pool, first, low, high):
        rest = [pool[i] for i in rng.choice(len(pool), int(rng.integers(low, high)))]
        return [pool[i] for i in first] + rest

    weak_and_not = drawn(scalars, [0, 3], 1, 6)
    shapes = drawn(arrays, [0, 1], 1, 6)
    mixed = drawn(scalars + arrays, [], 3, 9)
    weak_and_not = [weak_and_not[i] for i in rng.permutation(len(weak_and_not))]
    return [weak_and_not, shapes, mixed, []]


def body_runs(values: list) -> int:
    """The reference: how many times the body of a fresh ``jax.jit`` runs on these
    values, as the kernel receives them (arrays as JAX arrays)."""
    counted = tracing.BodyCounter(lambda v: v * 2)
    jitted = jax.jit(counted)
    for value in values:
        jitted(jnp.asarray(value) if isinstance(value, np.ndarray) else value)
    return counted.runs


def _described(values: list) -> str:
    def one(v):
        if isinstance(v, np.ndarray):
            return f"{v.dtype}{list(v.shape)} array"
        return f"Python {type(v).__name__} {v}"

    return "[" + ", ".join(map(one, values)) + "]" if values else "no values"


@exercise("tracing.count-traces", "trace_count", "when the body runs", 2)
def _count_traces(rng):
    """Jit a new function whose body adds one to a counter, inside trace_count, call it
    on each value, and return the counter.
    """
    lists = _values(rng)
    results = yield [ask.call(values) for values in lists]
    for values, got in zip(lists, results, strict=True):
        want = body_runs(values)
        got = judge.whole(got, "trace_count")
        what = _described(values)
        if got == len(values) != want:
            raise Wrong(
                f"for {what} you returned {got}, the number of calls; jit runs the "
                "Python body only when it meets a new shape, dtype or weak type, here "
                f"{want} time(s)."
            )
        expect(
            got == want,
            f"{len(values)} calls: the body ran {want} time(s)",
            f"for {what} you returned {got!r}, but the body runs {want} time(s) (a "
            "Python float is weakly typed, a float32 array is not).",
        )

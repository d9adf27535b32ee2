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


def _leaky_reference(v) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return np.where(v > 0, v, 0.1 * v)


@exercise("tracing.where", "leaky_relu", "branching on values", 1)
def _where(rng):
    """jnp.where(condition, a, b) picks a or b elementwise, and works on tracers."""
    scalar = -float(rng.uniform(0.5, 4.0))
    row = rng.normal(size=int(rng.integers(4, 9))).astype(np.float32)
    row[0], row[1] = -abs(row[0]), abs(row[1])  # both sides of zero, every time
    grid = rng.normal(size=(int(rng.integers(2, 5)), int(rng.integers(2, 6))))
    grid = grid.astype(np.float32)
    results = yield [
        ask.call(v, jit=True, allow_error=True) for v in (scalar, row, grid)
    ]
    got_scalar, got_row, got_grid = _settled(results, "jax.jit(leaky_relu)")
    expect(
        judge.agrees(got_scalar, 0.1 * scalar),
        "works on a scalar under jit",
        f"leaky_relu({scalar}) returned {got_scalar!r}, expected {0.1 * scalar:.4g}.",
    )
    expect(
        judge.agrees(got_row, _leaky_reference(row), atol=1e-6),
        "gives x for x > 0 and 0.1 * x otherwise",
        f"for {row.tolist()} it returned {np.asarray(got_row).tolist()}, "
        f"expected {_leaky_reference(row).tolist()}.",
    )
    expect(
        judge.agrees(got_grid, _leaky_reference(grid), atol=1e-6),
        "works elementwise on a 2-D array",
        f"for a {grid.shape[0]} x {grid.shape[1]} array it did not give x where "
        "x > 0 and 0.1 * x elsewhere, entry by entry.",
    )


MAX_STEPS = 10  # the static bound the exercise "tracing.loop-once" gives


def _sum_of_steps_reference(x: np.ndarray, n: int) -> np.ndarray:
    current, total = np.asarray(x, np.float64), np.zeros(np.shape(x))
    for _ in range(n):
        current = np.sin(current) + 1.0
        total = total + current
    return total


def _gradient_reference(x, n: int) -> np.ndarray:
    """d/dx of sum(step(x) + ... + step^n(x)), by the unrolled Python loop."""

    def unrolled(v):
        total = jnp.zeros_like(v)
        for _ in range(n):
            v = tracing.step(v)
            total = total + v
        return total.sum()

    return np.asarray(jax.grad(unrolled)(jnp.asarray(x)))


@exercise("tracing.loop-once", "sum_of_steps", "loops under jit", 2)
def _loop_once(rng):
    """lax.scan over jnp.arange(10) has a static length; in the body, jnp.where(i < n,
    new, old) stops the carry changing after n steps, and n stays traced.
    """
    x = rng.uniform(-2.0, 2.0, size=int(rng.integers(2, 7))).astype(np.float32)
    middle = sorted(
        int(n) for n in rng.choice(np.arange(1, MAX_STEPS), 2, replace=False)
    )
    counts = [0, *middle, MAX_STEPS]
    n_grad = int(rng.integers(1, MAX_STEPS))
    *results, text, gradient = yield [
        *(ask.call(x, n, jit=True, allow_error=True) for n in counts),
        ask.lower(ask.spec(x.shape), ask.spec((), "int32"), allow_error=True),
        ask.probe("gradient_of_sum", x, n_grad, allow_error=True),
    ]
    _settled(results, "jax.jit(sum_of_steps)")
    for n, out in zip(counts, results, strict=True):
        want = _sum_of_steps_reference(x, n)
        expect(
            judge.agrees(out, want, atol=1e-4),
            f"n = {n}: sums the first {n} steps",
            f"with n = {n} it returned {np.asarray(out).tolist()}, expected "
            f"{want.tolist()} (step(x) + step(step(x)) + ..., {n} terms; 0 for n = 0).",
        )
    _settled([text], "lowering jax.jit(sum_of_steps) with n an int32 tracer")
    expect(
        bool(re.search(r"@main\([^)]*tensor<i(32|64)>", text)),
        "one program for every n: n stays an input of it",
        "n is not an input of the compiled program; keep n a traced argument (no "
        "static_argnums, no Python loop over it), so one program serves every n.",
    )
    if isinstance(gradient, read.Failed) and "Reverse-mode" in gradient.message:
        raise Wrong(
            "jax.grad cannot go through your loop: a fori_loop (or while_loop) with a "
            "traced n is a while_loop, which reverse-mode differentiation refuses. Use "
            f"lax.scan with the static length {MAX_STEPS} and mask the steps after n "
            "with jnp.where.",
            details=gradient.message,
        )
    (gradient,) = _settled([gradient], "jax.grad of sum(sum_of_steps(x, n))")
    want = _gradient_reference(x, n_grad)
    expect(
        judge.agrees(gradient, want, atol=1e-4),
        "jax.grad works through it",
        f"the gradient of sum(sum_of_steps(x, {n_grad})) is "
        f"{np.asarray(gradient).tolist()}, expected {want.tolist()}.",
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

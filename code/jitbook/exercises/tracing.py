"""Exercises of the chapter "Tracing: what jit sees"."""

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.chapters import tracing

from . import Wrong, call_answer, error_line, exercise, expect, judge


def _explained(err: Wrong) -> Wrong:
    """Add a plain explanation in front of the tracer errors a student is likely to
    meet."""
    text = str(err)
    if "TracerBoolConversionError" in text or "truth value of an array" in text:
        return Wrong(
            "under jit, an `if` (or `and`/`or`/`bool()`) on a traced value cannot be "
            "decided while "
            f"tracing: the tracer has a shape and dtype but no value. {text}"
        )
    if "TracerIntegerConversionError" in text or "ConcretizationTypeError" in text:
        return Wrong(
            "under jit, n is a tracer, not a Python int, so range(n) or a scan length "
            "cannot use it; "
            f"lax.fori_loop accepts a traced trip count. {text}"
        )
    return err


def _call(fn, *args):
    """Call the student's (jitted) function, turning tracer errors into explanations."""
    try:
        return call_answer(fn, *args)
    except Wrong as err:
        raise _explained(err) from None


@exercise("tracing.debug-print", "noisy_square", "print vs jax.debug.print", 1)
def _debug_print(answer):
    """A plain print runs once, while tracing, and shows a tracer; jax.debug.print runs
    at every call.
    """
    judge.expect_function(answer, "noisy_square")
    jitted = jax.jit(answer)
    values = (1.5, 2.5, 3.5)
    results = []
    lines = tracing.printed_lines(
        lambda v: results.append(judge.number(_call(jitted, v), "noisy_square")),
        [(v,) for v in values],
    )
    expect(
        results == [v * v for v in values],
        "returns x * x",
        f"for inputs {values} it returned {results}, expected "
        f"{[v * v for v in values]}.",
    )
    missing = [v for v in values if not any(str(v) in line for line in lines)]
    tracer_lines = [line for line in lines if "Tracer" in line]
    if tracer_lines and missing:
        raise Wrong(
            f"the jitted function printed {lines!r} for three calls: a plain print "
            "runs only while "
            f"tracing, so it shows a tracer once instead of the value at every call."
        )
    expect(
        not missing,
        "prints the value of x at every call",
        f"the jitted function printed {lines!r} for calls with {values}; the values "
        f"{missing} never appeared.",
    )


def _leaky_reference(v) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return np.where(v > 0, v, 0.1 * v)


@exercise("tracing.where", "leaky_relu", "branching on values", 1)
def _where(answer):
    """jnp.where(condition, a, b) picks a or b elementwise, and works on tracers."""
    judge.expect_function(answer, "leaky_relu")
    x = jnp.array([-2.0, -0.5, 0.0, 0.5, 3.0])
    y = jnp.stack([x, -2.0 * x])  # a 2-D array: the rule holds elementwise
    scalar = judge.array(_call(jax.jit(answer), jnp.float32(-2.0)), "leaky_relu")
    expect(
        judge.agrees(scalar, -0.2),
        "works on a scalar under jit",
        f"leaky_relu(-2.0) returned {scalar!r}, expected -0.2.",
    )
    out_x, out_y = (
        judge.array(_call(jax.jit(answer), v), "leaky_relu") for v in (x, y)
    )
    expect(
        judge.agrees(out_x, _leaky_reference(x), atol=1e-6),
        "gives x for x > 0 and 0.1 * x otherwise",
        f"for {np.asarray(x).tolist()} it returned {out_x.tolist()}, "
        f"expected {_leaky_reference(x).tolist()}.",
    )
    expect(
        judge.agrees(out_y, _leaky_reference(y), atol=1e-6),
        "works elementwise on a 2-D array",
        f"for the 2-D array {np.asarray(y).tolist()} it returned {out_y.tolist()}, "
        f"expected {_leaky_reference(y).tolist()}.",
    )


MAX_STEPS = 10  # the static bound the exercise "tracing.loop-once" gives


def _sum_of_steps_reference(x: np.ndarray, n: int) -> np.ndarray:
    current, total = np.asarray(x, np.float64), np.zeros(np.shape(x))
    for _ in range(n):
        current = np.sin(current) + 1.0
        total = total + current
    return total


def _gradient_reference(x: jax.Array, n: int) -> np.ndarray:
    """d/dx of sum(step(x) + ... + step^n(x)), by the unrolled Python loop."""

    def unrolled(v):
        total = jnp.zeros_like(v)
        for _ in range(n):
            v = tracing.step(v)
            total = total + v
        return total.sum()

    return np.asarray(jax.grad(unrolled)(x))


@exercise("tracing.loop-once", "sum_of_steps", "loops under jit", 2)
def _loop_once(answer):
    """lax.scan over jnp.arange(10) has a static length; in the body, jnp.where(i < n,
    new, old) stops the carry changing after n steps, and n stays traced.
    """
    judge.expect_function(answer, "sum_of_steps")
    x = jnp.array([0.5, -1.0, 2.0])
    jitted = jax.jit(answer)
    outputs = {}
    with judge.compiles_of(jitted) as counted:
        for n in (0, 3, 7, MAX_STEPS):
            outputs[n] = judge.array(_call(jitted, x, n), "sum_of_steps")
    for n, out in outputs.items():
        want = _sum_of_steps_reference(x, n)
        expect(
            judge.agrees(out, want),
            f"n = {n}: sums the first {n} steps",
            f"with n = {n} it returned {out.tolist()}, expected "
            f"{want.tolist()} "
            f"(step(x) + step(step(x)) + ..., {n} terms; 0 for n = 0).",
        )
    judge.expect_compiles(
        counted,
        1,
        f"compiles once for n = 0, 3, 7 and {MAX_STEPS}",
        "jax.jit(sum_of_steps) compiled {count} times for four values of n; n must "
        "stay a traced argument (no static_argnums, no Python loop over it).",
    )
    gradient = jax.jit(jax.grad(lambda v, n: answer(v, n).sum()))
    try:
        got = judge.array(gradient(x, 3), "jax.grad of sum_of_steps")
    except ValueError as err:
        if "Reverse-mode differentiation" in str(err):
            raise Wrong(
                "jax.grad cannot go through your loop: a fori_loop (or while_loop) "
                "with a traced n is a "
                "while_loop, which reverse-mode differentiation refuses. Use lax.scan "
                "with the static "
                f"length {MAX_STEPS} and mask the steps after n with jnp.where."
            ) from None
        raise Wrong(f"jax.grad of your function raised {error_line(err)}") from None
    want = _gradient_reference(x, 3)
    expect(
        judge.agrees(got, want),
        "jax.grad works through it",
        f"the gradient of sum(sum_of_steps(x, 3)) is {got.tolist()}, "
        f"expected {want.tolist()}.",
    )


@exercise("tracing.count-traces", "trace_count", "when the body runs", 2)
def _count_traces(answer):
    """Wrap fn in a function that adds one to a counter and then calls fn; jit the
    wrapper.
    """
    judge.expect_function(answer, "trace_count")
    cases = {
        "three floats": [(1.0,), (2.0,), (3.0,)],
        "two shapes and two dtypes": [
            (jnp.ones(3),),
            (jnp.zeros(3),),
            (jnp.ones(4),),
            (jnp.ones(3, jnp.int32),),
        ],
        "a Python float, then a float32 array of the same shape": [
            (1.0,),
            (jnp.float32(1.0),),
        ],
        "no calls": [],
    }
    for what, calls in cases.items():
        got = judge.number(call_answer(answer, lambda v: v * 2, calls), "trace_count")
        want = reference_trace_count(lambda v: v * 2, calls)
        if got == len(calls) != want:
            raise Wrong(
                f"for {what} you returned {got}, the number of calls; jit runs the "
                "Python body only when "
                f"it meets a new shape, dtype or weak type, here {want} time(s)."
            )
        expect(
            got == want,
            f"{what}: {want}",
            f"for {what} you returned {got!r}, expected {want}.",
        )


def reference_trace_count(fn, calls) -> int:
    """How many times the body of a fresh ``jax.jit(fn)`` runs for these calls (the
    checker's reference)."""
    counted = tracing.BodyCounter(fn)
    jitted = jax.jit(counted)
    for args in calls:
        jitted(*args)
    return counted.runs

"""Exercises of the chapter "Tracing through control flow and loops"."""

import re

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.chapters import tracing
from jitbook.evidence import read

from . import Wrong, ask, exercise, expect, judge
from .tracing import _settled


def _leaky_reference(v) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return np.where(v > 0, v, 0.1 * v)


@exercise("control-flow.where", "leaky_relu", "branching on values", 1)
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


MAX_STEPS = 10  # the static bound the exercise "control-flow.loop-once" gives


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


@exercise("control-flow.loop-once", "sum_of_steps", "loops under jit", 2)
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

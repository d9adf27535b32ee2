"""Exercises of the chapter "Why compile?"."""

import math

import numpy as np

from jitbook.chapters import why_compile

from . import ask, exercise, expect, judge


@exercise("why-compile.ready", "run_and_wait", "asynchronous dispatch", 1)
def _ready(rng):
    """jax.block_until_ready(tree) waits for every array in a tuple, list or dict."""
    x = rng.normal(size=int(rng.integers(3, 9))).astype(np.float32)
    y = rng.normal(size=x.shape).astype(np.float32)
    passed, waits = yield [ask.probe("passes_through", x, y), ask.probe("waits")]
    expect(
        type(passed) is tuple
        and len(passed) == 2
        and type(passed[1]) is dict
        and judge.agrees(passed[0], np.sin(x))
        and judge.agrees(passed[1].get("b"), x * y),
        "returns what fn returned, structure and values",
        "for a function returning (array, {'b': array}) the result came back "
        "changed; return what fn returned.",
        self_reported=True,
    )
    expect(
        waits["ready"],
        "the array is computed when it is returned",
        "the array was still being computed when your function returned; wait for it "
        "before returning.",
        self_reported=True,
    )
    expect(
        waits["waited"] == waits["leaves"],
        "waits for every leaf of the result",
        f"for a result with {waits['leaves']} arrays (a tuple holding a dict and a "
        f"list) your function waited for {waits['waited']} of them; wait for every "
        "leaf, e.g. jax.block_until_ready on the whole result.",
        self_reported=True,
    )
    expect(
        waits["kept"],
        "returns the result itself",
        "return what fn returned, after waiting for it.",
        self_reported=True,
    )


@exercise("why-compile.fuse", "fast_standardize", "jax.jit", 1)
def _fuse(rng):
    """Transpose, standardize the rows, transpose back; jit that whole function once,
    outside any loop.
    """
    rows, cols = int(rng.integers(8, 80)), int(rng.integers(3, 20))
    x = rng.normal(size=(rows, cols)).astype(np.float32)
    (program,) = yield [ask.export(ask.spec((rows, cols)))]
    got = program(x)
    expected = np.asarray(why_compile.standardize_softplus(x.T).T)
    expect(
        judge.agrees(got, expected, atol=1e-4),
        "standardizes each column",
        f"on a {rows} x {cols} input its results are not "
        "why_compile.standardize_softplus applied to the columns (each column of the "
        "result should have mean 0 and variance 1).",
    )


def calls_until_jit_pays(compile_s: float, eager_s: float, jit_s: float) -> float:
    """The reference: the smallest whole k with compile_s + k * jit_s <= k * eager_s."""
    if compile_s == 0:
        return 0
    if jit_s >= eager_s:
        return math.inf
    return math.ceil(compile_s / (eager_s - jit_s))


def _cost_cases(rng) -> list[tuple[float, float, float]]:
    """Costs drawn per student, with the three edges (never pays, pays at once)."""
    cases = []
    while len(cases) < 6:
        compile_s = round(float(rng.uniform(0.05, 5.0)), 3)
        eager_s = round(float(rng.uniform(0.002, 0.5)), 4)
        jit_s = round(eager_s * float(rng.uniform(0.05, 0.9)), 4)
        ratio = compile_s / (eager_s - jit_s) if eager_s > jit_s else 0.5
        if abs(ratio - round(ratio)) > 1e-6:  # no case sits on a rounding edge
            cases.append((compile_s, eager_s, jit_s))
    equal = round(float(rng.uniform(0.01, 0.1)), 3)
    return cases + [(1.0, equal, equal), (0.2, equal, 2 * equal), (0.0, 2.0, 1.0)]


@exercise("why-compile.break-even", "calls_until_jit_pays", "cost of compiling", 2)
def _break_even(rng):
    """After k calls: compile_s + k * jit_s against k * eager_s. Solve for the smallest
    whole k.
    """
    cases = _cost_cases(rng)
    results = yield [ask.call(*args) for args in cases]
    for args, got in zip(cases, results, strict=True):
        want = calls_until_jit_pays(*args)
        got = judge.whole(got, f"calls_until_jit_pays{args}")
        if want == math.inf:
            expect(
                got == math.inf,
                f"{args} -> never pays",
                f"calls_until_jit_pays{args} returned {got!r}; when jit_s >= eager_s "
                "it never pays: return math.inf.",
            )
        else:
            expect(
                got == want,
                f"{args} -> {want} calls",
                f"calls_until_jit_pays{args} returned {got}, expected {want}.",
            )

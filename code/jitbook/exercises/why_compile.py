"""Exercises of the chapter "Why compile?"."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from jitbook.chapters import why_compile

from . import call_answer, exercise, expect, judge


class _SlowResult:
    """Stands in for an array whose computation finishes only when asked: it records
    whether it was waited on."""

    def __init__(self) -> None:
        self.waited = False

    def block_until_ready(self):
        self.waited = True
        return self


@exercise("why-compile.ready", "run_and_wait", "asynchronous dispatch", 1)
def _ready(answer):
    """jax.block_until_ready(tree) waits for every array in a tuple, list or dict."""
    single = call_answer(answer, lambda a: a @ a, jnp.ones((300, 300)))
    expect(
        judge.is_array(single),
        "returns the array",
        f"for a function returning one array you returned a {type(single).__name__}; "
        "return what fn returned.",
    )
    expect(
        single.is_ready(),
        "the array is computed when it is returned",
        "the array was still being computed when your function returned; wait for it "
        "before returning.",
    )
    pair = call_answer(answer, lambda a: (a + 1, {"b": a * 2}), jnp.ones(4))
    expect(
        type(pair) is tuple
        and type(pair[1]) is dict
        and judge.is_array(pair[1].get("b"))
        and float(pair[1]["b"][0]) == 2.0,
        "keeps the result's structure",
        "for a function returning (array, {'b': array}) the result came back changed; "
        "return it as it is.",
    )
    slow = [_SlowResult() for _ in range(3)]
    result = call_answer(answer, lambda: (slow[0], {"b": slow[1], "c": [slow[2]]}))
    waited = sum(s.waited for s in slow)
    expect(
        waited == len(slow),
        "waits for every leaf of the result",
        f"for a result with {len(slow)} arrays (a tuple holding a dict and a list) "
        f"your function waited for {waited} of them; wait for every leaf, e.g. "
        "jax.block_until_ready on the whole result.",
    )
    expect(
        type(result) is tuple and result[0] is slow[0],
        "returns the result itself",
        "return what fn returned, after waiting for it.",
    )


@exercise("why-compile.fuse", "fast_standardize", "jax.jit", 1)
def _fuse(answer):
    """Transpose, standardize the rows, transpose back; jit that whole function once,
    outside any loop.
    """
    judge.expect_function(answer, "fast_standardize")
    x = jax.random.normal(jax.random.key(1), (64, 16))
    y = x + 1.0  # made before counting: only the answer's own compiles count
    first = judge.array(call_answer(answer, x), "fast_standardize")  # may compile
    with judge.compiles_of(answer) as counted:
        call_answer(answer, y)
    expected = np.asarray(why_compile.standardize_softplus(x.T).T)
    expect(
        first.shape == x.shape and np.allclose(first, expected, atol=1e-5),
        "standardizes each column",
        "its results are not why_compile.standardize_softplus applied to the columns "
        "(each column of the result should have mean 0 and variance 1).",
    )
    judge.expect_compiles(
        counted,
        0,
        "compiles nothing on a second call of the same shape",
        "a second call with the same shape compiled {times} ({programs}); jit once, "
        "outside the function, and reuse the jitted function.",
    )
    expect(
        judge.is_jitted(answer),
        "is a jitted function",
        "it is not compiled by jax.jit (a jitted function's class has .lower).",
    )


@exercise("why-compile.break-even", "calls_until_jit_pays", "cost of compiling", 2)
def _break_even(answer):
    """After k calls: compile_s + k * jit_s against k * eager_s. Solve for the smallest
    whole k.
    """
    cases = [
        ((1.0, 0.3, 0.1), 5),
        ((1.0, 0.4, 0.1), 4),
        ((0.5, 0.002, 0.001), 500),
        ((0.2, 0.01, 0.01), math.inf),
        ((0.2, 0.01, 0.02), math.inf),
        ((0.0, 2.0, 1.0), 0),
    ]
    for args, want in cases:
        got = judge.whole(call_answer(answer, *args), f"calls_until_jit_pays{args}")
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

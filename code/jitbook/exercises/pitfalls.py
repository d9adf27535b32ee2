"""Exercises of the chapter "What trips people up".

Checkers count compiles only on shapes the kernel has not seen, so they never clear the
student's caches.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from . import call_answer, exercise, expect, judge

_sizes = itertools.count(11)


def _fresh_size() -> int:
    """A new array length at each check: a shape no earlier run compiled."""
    return next(_sizes)


@exercise("pitfalls.key-argument", "jitter", "random keys as arguments", 1)
def _key_argument(answer):
    """Take the key as a second argument and draw with jax.random.normal(key, x.shape);
    never read a key from a global inside a jitted function.
    """
    judge.expect_jitted(answer, "jitter")
    x = jnp.linspace(0.0, 1.0, _fresh_size())
    k1, k2 = jax.random.split(jax.random.key(3))
    with judge.compiles_of(answer) as counted:
        a, b, again = (
            judge.array(call_answer(answer, x, k), "jitter(x, key)")
            for k in (k1, k2, k1)
        )
    judge.expect_agrees(
        a,
        x + 0.1 * jax.random.normal(k1, x.shape),
        "adds 0.1 * jax.random.normal(key, x.shape)",
        "jitter(x, key) should be x + 0.1 * jax.random.normal(key, x.shape).",
        atol=1e-6,
    )
    expect(
        not np.allclose(a, b),
        "a new key gives new noise",
        "two different keys gave the same noise: is the key read from a global "
        "(a constant baked in at tracing) instead of the argument?",
    )
    expect(
        np.array_equal(a, again),
        "the same key gives the same noise",
        "the same key gave different noise: draw only with jax.random and the key.",
    )
    judge.expect_compiles(
        counted,
        1,
        "new keys do not compile again",
        "three calls compiled jitter {count} times; keys are arrays, pass them as "
        "traced arguments (not static).",
    )


@exercise("pitfalls.donate-step", "decay", "donation", 2)
def _donate_step(answer):
    """jax.jit(lambda state: 0.9 * state, donate_argnums=0): the output has the input's
    shape and dtype, so XLA can write it into the input's buffer.
    """
    judge.expect_jitted(answer, "decay")
    n = _fresh_size()
    state = jnp.linspace(1.0, 2.0, n)
    before = np.asarray(state, np.float64)
    out = judge.array(call_answer(answer, state), "decay(state)")
    want = 0.9 * before  # made after the call: the reference never meets the answer
    judge.expect_agrees(
        out, want, "returns 0.9 * state", "decay(state) should return 0.9 * state."
    )
    stats = answer.lower(jnp.ones(n)).compile().memory_analysis()
    expect(
        stats.alias_size_in_bytes >= 4 * n,
        "the compiled program writes its output into the donated input",
        f"XLA aliases {stats.alias_size_in_bytes} bytes of {4 * n}: no input was "
        "donated; pass donate_argnums=0 to jax.jit.",
    )
    expect(
        state.is_deleted(),
        "the caller's array is gone after the call",
        "the input array survived the call, so it was not donated.",
    )


@exercise("pitfalls.checked-take", "safe_take", "checkify", 2)
def _checked_take(answer):
    """checkify.checkify(jax.jit(lambda x, i: x[i]), errors=checkify.index_checks)
    returns a function giving (error, value).
    """
    n = _fresh_size()
    x = jnp.arange(n, dtype=jnp.float32)
    result = call_answer(answer, x, 2)
    expect(
        type(result) is tuple
        and len(result) == 2
        and type(result[0]) is checkify.Error,
        "returns (error, value) as checkify does",
        f"safe_take(x, i) returned {type(result).__name__}; return what a "
        "checkify-wrapped function returns, a pair (error, value).",
    )
    err, value = result
    expect(
        err.get() is None and judge.number(value, "safe_take") == 2.0,
        "an index in bounds gives the entry and no error",
        f"safe_take(x, 2) should give x[2] = 2.0 and no error, got {value} and "
        f"{err.get()!r}.",
    )
    err, value = call_answer(answer, x, n + 3)
    message = err.get() or ""
    expect(
        "out-of-bounds" in message,
        "an index out of bounds is reported",
        f"safe_take(x, {n + 3}) reported no error (the value was clamped to "
        f"{float(value)}); pass errors=checkify.index_checks to checkify.",
    )

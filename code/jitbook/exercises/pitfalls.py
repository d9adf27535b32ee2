"""Exercises of the chapter "What trips people up": the key and the donated buffer are
read off the exported program, which the grader runs itself; checkify's answers are
the values a jitted call returns on indices drawn per student."""

import jax
import numpy as np

from jitbook.evidence import read

from . import Wrong, ask, exercise, expect, judge


@exercise("pitfalls.key-argument", "jitter", "random keys as arguments", 1)
def _key_argument(rng):
    """Take the key as a second argument and draw with jax.random.normal(key, x.shape);
    never read a key from a global inside a jitted function.
    """
    size = int(rng.integers(4, 40))
    x = rng.normal(size=size).astype(np.float32)
    (program,) = yield [ask.export(ask.spec((size,)), ask.spec((2,), "uint32"))]
    seeds = [int(s) for s in rng.integers(0, 2**31, size=2)]
    raw = [np.asarray(jax.random.key_data(jax.random.key(s))) for s in seeds]
    first, second, again = program(x, raw[0]), program(x, raw[1]), program(x, raw[0])
    want = x + 0.1 * np.asarray(jax.random.normal(jax.random.key(seeds[0]), x.shape))
    expect(
        not judge.agrees(first, second),
        "one program: a new key gives new noise",
        "the compiled jitter gave the same noise for two different keys: is the key "
        "read from a global (a constant baked in at tracing) instead of the argument?",
    )
    expect(
        judge.agrees(first, want, atol=1e-5),
        "adds 0.1 * jax.random.normal(key, x.shape)",
        "jitter(x, key) should be x + 0.1 * jax.random.normal(key, x.shape).",
    )
    expect(
        np.array_equal(first, again),
        "the same key gives the same noise",
        "the same key gave different noise: draw only with jax.random and the key.",
    )


@exercise("pitfalls.donate-step", "decay", "donation", 2)
def _donate_step(rng):
    """jax.jit(lambda state: 0.9 * state, donate_argnums=0): the output has the input's
    shape and dtype, so XLA can write it into the input's buffer.
    """
    size = int(rng.integers(4, 64))
    state = rng.normal(size=size).astype(np.float32)
    (program,) = yield [ask.export(ask.spec((size,)))]
    judge.expect_agrees(
        program(state),
        0.9 * state,
        "returns 0.9 * state",
        "decay(state) should return 0.9 * state.",
    )
    main = next(
        (line for line in program.text.splitlines() if "func public @main" in line), ""
    )
    donated = "tf.aliasing_output" in main or "jax.buffer_donor" in main
    expect(
        donated,
        "the program writes its output into the donated input",
        "the exported decay donates no input (its program has no tf.aliasing_output "
        "or jax.buffer_donor on the state): pass donate_argnums=0 to jax.jit.",
    )


def _indices(rng, size: int) -> tuple[int, int, int]:
    """An index in bounds, one counted from the end, one past the end."""
    inside = int(rng.integers(0, size))
    return inside, -int(rng.integers(1, size + 1)), size + int(rng.integers(0, 5))


@exercise("pitfalls.checked-take", "safe_take", "checkify", 2)
def _checked_take(rng):
    """checkify.checkify(jax.jit(lambda x, i: x[i]), errors=checkify.index_checks)
    returns a function giving (error, value).
    """
    size = int(rng.integers(5, 30))
    x = rng.normal(size=size).astype(np.float32)
    indices = _indices(rng, size)
    error, value = (("__getitem__", (0,)), ("get", ())), (("__getitem__", (1,)),)
    asked = [ask.call(x, indices[0], jit=True)]
    for i in indices:
        asked += [
            ask.call(x, i, jit=True, then=error, allow_error=True),
            ask.call(x, i, jit=True, then=value, allow_error=True),
        ]
    pair, *got = yield asked
    expect(
        type(pair) is tuple
        and len(pair) == 2
        and getattr(pair[0], "type_name", "") == "Error",
        "returns (error, value) as checkify does, under jax.jit",
        f"jax.jit(safe_take)(x, i) returned {type(pair).__name__}; return what a "
        "checkify-wrapped function returns, a pair (error, value).",
    )
    for i, message, got_value in zip(indices, got[::2], got[1::2], strict=True):
        failed = next(
            (g for g in (message, got_value) if isinstance(g, read.Failed)), None
        )
        if failed is not None or type(message) not in (str, type(None)):
            raise Wrong(
                f"for safe_take(x, {i}), reading error.get() and the value raised "
                f"{failed.message if failed else type(message).__name__}."
            )
        if -size <= i < size:
            expect(
                message is None and judge.agrees(got_value, x[i], atol=0),
                f"index {i} (in bounds): the entry, no error",
                f"safe_take(x, {i}) on {size} entries should give x[{i}] = {x[i]:.4g} "
                f"and no error, got {got_value} and {message!r}.",
            )
        else:
            expect(
                "out-of-bounds" in (message or ""),
                f"index {i} (out of bounds): an error",
                f"safe_take(x, {i}) on {size} entries reported no error (the value "
                f"was clamped to {float(got_value):.4g}); pass "
                "errors=checkify.index_checks to checkify.",
            )
